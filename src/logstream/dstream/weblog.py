"""Web-log analytics on DStreams: the book's Part III version of logstream's pipeline.

Per batch of processing time (Spark Streaming Programming Guide; book Ch. 16–22):

* **parse** every line with the same compiled ``LogFormat`` regular expression as the rest of
  logstream (:class:`~logstream.parsing.logformat.CompiledFormat`, here through Python's
  :mod:`re`); a line that does not match, or whose status is not a number, is counted by an
  accumulator created lazily as a singleton (the guide's "Accumulators, Broadcast Variables,
  and Checkpoints" pattern, so it survives recovery from a checkpoint), and kept with its
  reason, as the other paths keep it (:mod:`logstream.dstream.quarantine`);
* **status classes** of the batch: ``reduceByKey``;
* **trending pages** (content pages: ``.html``, ``.htm``, ``/``, as in ``logstream run``):
  ``reduceByKeyAndWindow(add, subtract, window, slide)`` — the window is
  updated incrementally with the inverse function (the guide's "Window Operations"), and keys
  whose count fell to zero are filtered out;
* **running totals per host**: ``updateStateByKey``; a host with no request for
  ``host_idle_batches`` batches is evicted, so the state stays bounded;
* **a static join**: with a list of hosts (``listed_hosts``), ``transform()`` joins each
  batch's hosts with a static RDD of the list (created lazily, so a recovered context makes
  its own) and counts the batch's requests from listed hosts;
* **output**: ``foreachRDD`` commits each batch's status classes and counts to the serving
  store in one transaction keyed by the batch time and a fingerprint of its data (a replayed
  batch changes nothing: :func:`commit_status_batch`), each slide's top pages keyed by the
  batch time (they replace nothing and add nothing when replayed), and ``foreachPartition``
  upserts the host totals (absolute values: idempotent by themselves).

Times here are processing times: a DStream batch holds what arrived during its interval,
whatever the lines' own timestamps say (see ``docs/dstream.md``).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from logstream.analytics.pages import is_content_path
from logstream.errors import LogFormatError
from logstream.parsing import compile_format
from logstream.parsing.logformat import CompiledFormat

if TYPE_CHECKING:
    from pyspark import Accumulator, SparkContext
    from pyspark.streaming import DStream

__all__ = [
    "DSTREAM_QUERY",
    "TRENDING_QUERY",
    "DStreamSettings",
    "HostTotals",
    "build_weblog_streams",
    "classify_line",
    "commit_status_batch",
    "dstream_store_schema",
    "line_parser",
    "listed_hosts_rdd",
    "parse_line",
    "parse_rdd_of",
    "parsed_requests",
    "progress_listener",
    "read_listed_hosts",
    "time_checker",
    "unparseable_accumulator",
]

#: The DStream edition's query name in the store's ``progress`` table, and the ledger key
#: (with the batch time in ms) of the trending pages of every slide of the window.
DSTREAM_QUERY = "dstream"
TRENDING_QUERY = "dstream_trending"

#: Tables of the DStream edition in the serving store (created on first use).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS dstream_batches (
    batch_time TEXT NOT NULL, fingerprint TEXT NOT NULL, requests INTEGER NOT NULL,
    unparseable_total INTEGER NOT NULL, listed_requests INTEGER,
    PRIMARY KEY (batch_time, fingerprint));
CREATE TABLE IF NOT EXISTS dstream_status (
    batch_time TEXT NOT NULL, fingerprint TEXT NOT NULL, status_class TEXT NOT NULL,
    requests INTEGER NOT NULL, PRIMARY KEY (batch_time, fingerprint, status_class));
CREATE TABLE IF NOT EXISTS dstream_trending (
    batch_time TEXT NOT NULL, url_path TEXT NOT NULL, requests INTEGER NOT NULL,
    PRIMARY KEY (batch_time, url_path));
CREATE TABLE IF NOT EXISTS dstream_hosts (
    client_host TEXT PRIMARY KEY, requests INTEGER NOT NULL, bytes INTEGER NOT NULL,
    batch_time TEXT NOT NULL);
"""

#: One parsed request: (client_host, url_path, status, bytes_sent).
Request = tuple[str, str, int, int]
#: A host's running state: (requests, bytes, batches without a request).
HostTotals = tuple[int, int, int]


@dataclass(frozen=True)
class DStreamSettings:
    """Options of ``logstream dstream run``.

    Attributes
    ----------
    log_format : str
        ``common``, ``combined`` or a ``LogFormat`` string.
    batch_s : float
        Batch interval, seconds.
    window_s, slide_s : float
        Trending pages' window and slide, seconds of processing time (multiples of
        ``batch_s``; the book's 5 minutes sliding by 1 minute by default).
    top : int
        Trending pages kept per batch in the store.
    host_idle_batches : int
        A host with no request for this many batches leaves the state.
    listed_hosts : tuple of str
        Client hosts of a static list (``--listed-hosts FILE``: known crawlers, a watch list);
        each batch's requests from them are counted by a ``transform()`` join with it.
    """

    log_format: str = "common"
    batch_s: float = 1.0
    window_s: float = 300.0
    slide_s: float = 60.0
    top: int = 10
    host_idle_batches: int = 1800
    listed_hosts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("window_s", "slide_s"):
            value = getattr(self, name)
            ratio = value / self.batch_s
            if value <= 0 or abs(ratio - round(ratio)) > 1e-9:
                raise ValueError(
                    f"{name.removesuffix('_s')} {value:g} s must be a positive multiple of the "
                    f"batch interval ({self.batch_s:g} s)"
                )
        if self.top < 1 or self.host_idle_batches < 1:
            raise ValueError("top and host_idle_batches must be at least 1")


# ---------------------------------------------------------------------------------------------
# The batch parser's quarantine rules (logstream.parsing.parser.parse), in plain Python: a
# DStream job parses with Python's re in its executors, and must set aside exactly the lines
# `logstream batch` and `logstream run` quarantine, for the same reason.

_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1
_SIGNED_DIGITS = re.compile(r"[+-]?[0-9]+")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
#: Spark datetime pattern letters (as logstream's formats write them) → Python regex, with the
#: fixed widths of Spark's strict parser: ``9/Jul/1995`` and year ``19950`` are bad for
#: ``dd/MMM/yyyy``, the month name is read case-insensitively, an offset is ``+HHMM``.
_PATTERN_TOKENS = {
    "yyyy": r"(?P<year>[0-9]{4})",
    "yy": r"(?P<yy>[0-9]{2})",
    "MMM": r"(?P<mon>[A-Za-z]{3})",
    "MM": r"(?P<month>[0-9]{2})",
    "dd": r"(?P<day>[0-9]{2})",
    "d": r"(?P<day>[0-9]{1,2})",
    "HH": r"(?P<hour>[0-9]{2})",
    "hh": r"(?P<hour12>[0-9]{2})",
    "mm": r"(?P<minute>[0-9]{2})",
    "ss": r"(?P<second>[0-9]{2})",
    "a": r"(?P<ampm>[AaPp][Mm])",
    "Z": r"(?P<offset>[+-][0-9]{4})",
}


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """A Spark datetime pattern of :func:`logstream.parsing.compile_format` as a Python regex."""
    parts: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "'":  # a quoted literal ('' is a quote)
            end = pattern.index("'", i + 1)
            parts.append(re.escape(pattern[i + 1 : end] or "'"))
            i = end + 1
        elif ch.isalpha():
            run = len(pattern[i:]) - len(pattern[i:].lstrip(ch))
            token = pattern[i : i + run]
            if token not in _PATTERN_TOKENS:
                raise LogFormatError(f"time pattern {pattern!r}: {token!r} is not supported here")
            parts.append(_PATTERN_TOKENS[token])
            i += run
        else:
            parts.append(re.escape(ch))
            i += 1
    return re.compile("".join(parts))


def _days_in_month(year: int, month: int) -> int:
    if month == 2:  # proleptic Gregorian, as Spark: year 0 is a leap year
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _valid_fields(got: dict[str, str | None]) -> bool:
    """Whether the fields of a matched time make a date and time (Spark's strict resolver)."""
    if got.get("year") is not None:
        year = int(got["year"])  # type: ignore[arg-type]
    elif got.get("yy") is not None:
        year = 2000 + int(got["yy"])  # type: ignore[arg-type]
    else:
        year = 1970
    if got.get("mon") is not None:
        name = got["mon"].lower()  # type: ignore[union-attr]
        if name not in _MONTHS:
            return False
        month = _MONTHS.index(name) + 1
    else:
        month = int(got.get("month") or 1)
    day = int(got.get("day") or 1)
    if got.get("hour12") is not None:
        hour = int(got["hour12"])  # type: ignore[arg-type]
        if not 1 <= hour <= 12:
            return False
        hour = hour % 12 + (12 if (got.get("ampm") or "am").lower() == "pm" else 0)
    else:
        hour = int(got.get("hour") or 0)
    minute, second = int(got.get("minute") or 0), int(got.get("second") or 0)
    if not (1 <= month <= 12 and 1 <= day <= _days_in_month(year, month)):
        return False
    if not (0 <= hour <= 23 and 0 <= minute <= 59 and 0 <= second <= 59):
        return False
    offset = got.get("offset")
    if offset is not None:
        hours, minutes = int(offset[1:3]), int(offset[3:5])
        if minutes > 59 or hours * 60 + minutes > 18 * 60:  # java.time.ZoneOffset: ±18:00
            return False
    return True


def time_checker(fmt: CompiledFormat) -> Callable[[str], bool]:
    """Whether a ``time`` field's text is a valid time for ``fmt``, as the batch parser reads it.

    The batch parser reads the field with ``try_to_timestamp(time, pattern)`` (or an epoch cast)
    and quarantines a line whose time is null as ``bad_timestamp``; this is the same test in
    plain Python, for the DStream edition.

    Examples
    --------
    >>> from logstream.parsing import compile_format
    >>> ok = time_checker(compile_format("common"))
    >>> ok("09/Jul/1995:00:00:01 -0400"), ok("bad date"), ok("31/Feb/1995:00:00:01 -0400")
    (True, False, False)
    """
    if fmt.time_kind in ("epoch_s", "epoch_ms"):  # try_cast("bigint")
        return lambda text: bool(_SIGNED_DIGITS.fullmatch(text)) and abs(int(text)) <= _LONG_MAX
    if fmt.time_kind == "epoch_s_frac":  # try_cast("decimal(20,6)"): 14 whole digits at most
        frac = re.compile(r"[+-]?[0-9]+(?:\.[0-9]*)?|[+-]?\.[0-9]+")
        return lambda text: (
            bool(frac.fullmatch(text)) and (len(text.lstrip("+-").split(".")[0].lstrip("0")) <= 14)
        )
    if fmt.time_kind != "pattern" or fmt.time_pattern is None:
        raise LogFormatError(f"time kind {fmt.time_kind!r} is not read by the DStream edition")
    regex = _pattern_regex(fmt.time_pattern)

    def ok(text: str) -> bool:
        match = regex.fullmatch(text)
        return match is not None and _valid_fields(match.groupdict())

    return ok


_CLF_TIME_OK: Callable[[str], bool] | None = None


def _clf_time_ok(text: str) -> bool:
    global _CLF_TIME_OK
    if _CLF_TIME_OK is None:
        _CLF_TIME_OK = time_checker(compile_format("common"))
    return _CLF_TIME_OK(text)


def _whole(text: str, limit: int) -> int | None:
    """``text`` as Spark's ``try_cast`` to a whole number reads it (``+5``, ``0005``), or None
    (``5.0``, ``5_0``, ``1e3`` and values beyond ``limit`` are null there)."""
    if not _SIGNED_DIGITS.fullmatch(text):
        return None
    value = int(text)
    return value if -limit - 1 <= value <= limit else None


def classify_line(
    line: str,
    regex: Any,
    fields: tuple[str, ...],
    time_ok: Callable[[str], bool] = _clf_time_ok,
) -> Request | str:
    """Parse one access-log line into ``(client_host, url_path, status, bytes_sent)``, or give
    the reason the batch parser quarantines it for.

    The reasons and their order are :func:`logstream.parsing.parse`'s: ``empty_line``,
    ``control_character`` (NUL or U+0001), ``format_mismatch``, ``bad_timestamp`` (``time_ok`` says
    no: :func:`time_checker` of the format), ``bad_status`` (not a whole number from 100 to
    599), ``bad_bytes`` (neither ``-`` nor a whole number ≥ 0). ``bytes_sent`` of ``-`` is 0.
    The path is the request target up to ``?``.
    """
    if line.strip(" ") == "":  # Spark's trim: spaces only
        return "empty_line"
    if "\x00" in line or "\x01" in line:
        return "control_character"
    match = regex.match(line)
    if match is None:
        return "format_mismatch"
    got = dict(zip(fields, match.groups(), strict=True))
    if "time" in got and not time_ok(got["time"] or ""):
        return "bad_timestamp"
    status = _whole(got["status"] or "", _INT_MAX) if "status" in got else None
    if status is None or not 100 <= status <= 599:
        return "bad_status"
    size_text = got.get("bytes_sent")
    size = 0 if size_text is None or size_text == "-" else _whole(size_text, _LONG_MAX)
    if size is None or size < 0:
        return "bad_bytes"
    target = got.get("url_path") or got.get("target") or ""
    return (got.get("client_host") or "-", target.split("?", 1)[0], status, size)


def parse_line(
    line: str,
    regex: Any,
    fields: tuple[str, ...],
    time_ok: Callable[[str], bool] = _clf_time_ok,
) -> Request | None:
    """:func:`classify_line`'s request, or None for a line the batch parser quarantines
    (``time_ok`` defaults to the CLF time of ``common`` and ``combined``)."""
    request = classify_line(line, regex, fields, time_ok)
    return None if isinstance(request, str) else request


def line_parser(fmt: CompiledFormat) -> Callable[[Iterable[str]], Iterator[Request | str]]:
    """Classify the lines of a partition with ``fmt`` (:func:`classify_line`), the regex and
    the time checker built once per call; a header line of the format (``nasa-tsv``) is
    skipped, as the batch parser skips it."""
    pattern, fields, header = fmt.regex, fmt.fields, fmt.header
    time_checker(fmt)  # a time the DStream edition cannot read fails here, on the driver

    def classify(part: Iterable[str]) -> Iterator[Request | str]:
        regex, time_ok = re.compile(pattern), time_checker(fmt)
        for line in part:
            if header is not None and line.startswith(header):
                continue
            yield classify_line(line, regex, fields, time_ok)

    return classify


_UNPARSEABLE: Accumulator[int] | None = None


def unparseable_accumulator(sc: SparkContext) -> Accumulator[int]:
    """The accumulator counting unparseable lines, created on first use (the guide's lazily
    instantiated singleton, so that a context recovered from a checkpoint gets one too)."""
    global _UNPARSEABLE
    if _UNPARSEABLE is None:
        _UNPARSEABLE = sc.accumulator(0)
    return _UNPARSEABLE


def _update_host(new: Iterable[tuple[int, int]], state: HostTotals | None, idle: int) -> Any:
    requests, size, quiet = state if state is not None else (0, 0, 0)
    values = list(new)
    if not values:
        return None if quiet + 1 >= idle else (requests, size, quiet + 1)
    return (requests + len(values), size + sum(b for _, b in values), 0)


def dstream_store_schema(path: Path | str) -> None:
    """Create the DStream edition's tables in the serving store at ``path`` (and add
    ``dstream_batches.listed_requests`` to a store made before it existed)."""
    with sqlite3.connect(path, timeout=30) as conn:
        conn.executescript(_SCHEMA)
        columns = {r[1] for r in conn.execute("PRAGMA table_info(dstream_batches)")}
        if "listed_requests" not in columns:
            conn.execute("ALTER TABLE dstream_batches ADD COLUMN listed_requests INTEGER")


_LISTED: tuple[Any, tuple[str, ...], Any] | None = None


def listed_hosts_rdd(sc: SparkContext, hosts: tuple[str, ...]) -> Any:
    """The static pair RDD ``(host, None)`` of the listed hosts, cached, created on first use
    on the driver (the guide's lazily instantiated singleton: an RDD made before a checkpoint
    cannot be used by a context recovered from it, so the ``transform()`` function asks for
    it each batch)."""
    global _LISTED
    if _LISTED is None or _LISTED[0] is not sc or _LISTED[1] != hosts:
        _LISTED = (sc, hosts, sc.parallelize([(h, None) for h in hosts], 1).cache())
    return _LISTED[2]


def read_listed_hosts(path: Path) -> tuple[str, ...]:
    """Client hosts of a list file: one per line; blank lines and ``#`` comments skipped.

    Raises
    ------
    ValueError
        When the file cannot be read or lists no host (the message names the file).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read the host list {str(path)!r}: {exc}") from exc
    hosts = tuple(
        dict.fromkeys(h for line in text.splitlines() if (h := line.split("#", 1)[0].strip()))
    )
    if not hosts:
        raise ValueError(f"the host list {str(path)!r} has no host (one per line)")
    return hosts


_FINGERPRINT_MOD = 1 << 61
#: Key of the listed hosts' requests in the status stream (not a status class).
_LISTED_KEY = "listed"


def _crc(request: Request) -> int:
    import zlib

    return zlib.crc32(repr(request).encode("utf-8", "surrogatepass"))


def commit_status_batch(
    store_path: str,
    batch_time: str,
    fingerprint: str,
    classes: list[tuple[str, tuple[int, int]]],
    unparseable_total: int,
    listed_requests: int | None = None,
    quarantined: tuple[dict[str, int], list[tuple[str, str]]] | None = None,
) -> bool:
    """Commit one batch's status classes exactly once, keyed by (batch time, fingerprint).

    The batch time alone is not a safe key: after a driver restart, Spark Streaming generates
    the batches between its last checkpoint and the restart again, and a receiver's new lines
    can land in a batch time that the previous run had already committed (observed with the
    socket source). The fingerprint (record count and sum of the records' CRC-32) tells a
    replay of the same batch (skipped) from other data under the same time (committed).

    ``quarantined`` (the running count of each reason and the batch's example lines:
    :func:`logstream.dstream.quarantine.drain_examples`) is written in the same transaction
    (:func:`logstream.dstream.quarantine.record_quarantine`).

    Returns
    -------
    bool
        True when committed now, False for a replay of a committed batch.
    """
    from logstream.dstream.quarantine import record_quarantine

    total = sum(n for _, (n, _h) in classes)
    with sqlite3.connect(store_path, timeout=60) as conn:
        conn.execute("BEGIN IMMEDIATE")
        if conn.execute(
            "SELECT 1 FROM dstream_batches WHERE batch_time = ? AND fingerprint = ?",
            (batch_time, fingerprint),
        ).fetchone():
            return False
        conn.execute(
            "INSERT INTO dstream_batches(batch_time, fingerprint, requests, unparseable_total, "
            "listed_requests) VALUES (?, ?, ?, ?, ?)",
            (batch_time, fingerprint, total, unparseable_total, listed_requests),
        )
        conn.executemany(
            "INSERT INTO dstream_status VALUES (?, ?, ?, ?)",
            [(batch_time, fingerprint, c, n) for c, (n, _h) in classes],
        )
        if quarantined is not None:
            batch_id = round(datetime.fromisoformat(batch_time).timestamp() * 1000)
            record_quarantine(conn, batch_time, fingerprint, batch_id, *quarantined)
    return True


def _ms(t: datetime) -> int:
    return round(t.timestamp() * 1000)


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _write_hosts(store_path: str, batch_time: str) -> Callable[[Iterator[Any]], None]:
    def write(rows: Iterator[tuple[str, HostTotals]]) -> None:
        batch = [(host, s[0], s[1], batch_time) for host, s in rows]
        if not batch:
            return
        with sqlite3.connect(store_path, timeout=60) as conn:
            conn.executemany(
                "INSERT INTO dstream_hosts(client_host, requests, bytes, batch_time) "
                "VALUES (?, ?, ?, ?) ON CONFLICT(client_host) DO UPDATE SET "
                "requests = excluded.requests, bytes = excluded.bytes, "
                "batch_time = excluded.batch_time",
                batch,
            )

    return write


def parsed_requests(lines: DStream, log_format: str) -> DStream:
    """Parse a DStream of access-log lines into :data:`Request` tuples.

    Each batch's RDD is parsed in ``mapPartitions`` with the compiled ``LogFormat`` regex
    (Python's :mod:`re`, compiled once per partition); a line that does not parse is counted
    by :func:`unparseable_accumulator`, which the ``transform()`` function fetches on the
    driver every batch, so a context recovered from a checkpoint gets one too.

    Parameters
    ----------
    lines : DStream of str
    log_format : str
        ``common``, ``combined`` or a ``LogFormat`` string.

    Returns
    -------
    DStream of Request
        ``(client_host, url_path, status, bytes_sent)`` per parsed line.

    Raises
    ------
    LogFormatError
        When ``log_format`` does not compile.
    """
    fmt = compile_format(log_format)
    if fmt.is_json:
        raise LogFormatError(
            f"the DStream edition parses text lines with a regex: --format {log_format!r} is "
            "JSON; use the Structured Streaming pipeline (logstream run) for JSON lines"
        )
    return lines.transform(parse_rdd_of(fmt))


def parse_rdd_of(fmt: CompiledFormat) -> Callable[[Any], Any]:
    """The per-batch function of :func:`parsed_requests`: an RDD of lines → its requests, the
    lines the batch parser quarantines counted by :func:`unparseable_accumulator` and kept
    with their reason by :func:`logstream.dstream.quarantine.quarantine_accumulator`."""
    from logstream.dstream.quarantine import kept_requests, quarantine_accumulator

    classify = line_parser(fmt)

    def parse_rdd(rdd: Any) -> Any:
        # on the driver, once per batch: the accumulator singletons of the (maybe recovered)
        # context go into the closure the executors run
        bad_lines = unparseable_accumulator(rdd.context)
        quarantined = quarantine_accumulator(rdd.context)

        def parse_partition(part: Iterable[str]) -> Iterator[Request]:
            yield from kept_requests(classify, part, bad_lines, quarantined)

        return rdd.mapPartitions(parse_partition)

    return parse_rdd


def build_weblog_streams(
    lines: DStream, settings: DStreamSettings, store_path: Path | str
) -> dict[str, DStream]:
    """Build the DStream graph of the web-log analytics on ``lines`` (see the module docs).

    Parameters
    ----------
    lines : DStream of str
        One access-log line per element (socket, text files, queue).
    settings : DStreamSettings
    store_path : path
        The SQLite serving store the output operations write (tables ``dstream_batches``,
        ``dstream_status``, ``dstream_trending``, ``dstream_hosts``; the trending pages
        under ledger key :data:`TRENDING_QUERY` with the batch time in ms).

    Returns
    -------
    dict of str to DStream
        ``requests`` (parsed requests), ``status`` ((class, count) per batch), ``pages``
        ((url_path, count) over the window), ``hosts`` ((host, (requests, bytes, idle))),
        for tests and further output operations.

    Notes
    -----
    The context must have a checkpoint directory (``ssc.checkpoint``): the inverse-function
    window and ``updateStateByKey`` keep state across batches.
    """
    from logstream.dstream.quarantine import drain_examples, quarantine_accumulator
    from logstream.serving import ServingStore

    store_file = str(Path(store_path).absolute())
    ServingStore(store_file)
    dstream_store_schema(store_file)
    # four streams read the parsed requests: parse each batch once (and count its unparseable
    # lines once: an accumulator in a transformation adds again on every recomputation)
    requests = parsed_requests(lines, settings.log_format).cache()
    # (class, (requests, sum of the requests' CRC-32)): the sums fingerprint the batch's data
    keyed = requests.map(lambda r: (f"{r[2] // 100}xx", (1, _crc(r))))
    listed = settings.listed_hosts
    if listed:

        def join_listed(rdd: Any) -> Any:  # on the driver, each batch
            return rdd.join(listed_hosts_rdd(rdd.context, listed))

        # the static join: transform() with an RDD of the listed hosts
        keyed = keyed.union(
            requests.map(lambda r: (r[0], 1))
            .transform(join_listed)
            .map(lambda _kv: (_LISTED_KEY, (1, 0)))
        )
    status = keyed.reduceByKey(lambda a, b: (a[0] + b[0], (a[1] + b[1]) % _FINGERPRINT_MOD))
    pages = (  # trending pages are content pages, as in logstream run
        requests.filter(lambda r: is_content_path(r[1]))
        .map(lambda r: (r[1], 1))
        .reduceByKeyAndWindow(
            lambda a, b: a + b,
            lambda a, b: a - b,
            settings.window_s,
            settings.slide_s,
        )
        .filter(lambda kv: kv[1] > 0)
    )
    idle = settings.host_idle_batches
    hosts = requests.map(lambda r: (r[0], (1, r[3]))).updateStateByKey(
        lambda new, state: _update_host(new, state, idle)
    )
    top = settings.top

    def commit_status(t: datetime, rdd: Any) -> None:
        got = sorted(rdd.collect())  # at most the five status classes and the listed count
        classes = [kv for kv in got if kv[0] != _LISTED_KEY]
        in_list = next((n for k, (n, _h) in got if k == _LISTED_KEY), 0) if listed else None
        total = sum(n for _, (n, _h) in classes)
        fingerprint = f"{total}:{sum(h for _, (_n, h) in classes) % _FINGERPRINT_MOD:x}"
        unparseable = unparseable_accumulator(rdd.context).value
        why = drain_examples(quarantine_accumulator(rdd.context))
        commit_status_batch(store_file, _iso(t), fingerprint, classes, unparseable, in_list, why)

    def commit_trending(t: datetime, rdd: Any) -> None:
        trending = rdd.takeOrdered(top, key=lambda kv: (-kv[1], kv[0]))
        batch_time = _iso(t)

        def apply(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "INSERT INTO dstream_trending VALUES (?, ?, ?)",
                [(batch_time, p, n) for p, n in trending],
            )

        store = ServingStore(store_file)
        store.commit_batch(TRENDING_QUERY, _ms(t), len(trending), apply)

    status.foreachRDD(commit_status)
    pages.foreachRDD(commit_trending)
    hosts.foreachRDD(lambda t, rdd: rdd.foreachPartition(_write_hosts(store_file, _iso(t))))
    return {"requests": requests, "status": status, "pages": pages, "hosts": hosts}


def progress_listener(store_path: Path | str) -> Any:
    """A ``StreamingListener`` (the guide's "Monitoring Applications") that records every
    completed batch in the store's ``progress`` table, query ``dstream``: ``batch_id`` (the
    batch time, epoch ms), ``num_input_rows`` (records), ``batch_duration_ms`` (processing
    time, ms), ``processed_rows_per_s``. The table has no column for the scheduling delay, so
    it goes in ``watermark`` as text (``scheduling_delay_ms=…``): a DStream has no watermark.
    """
    from pyspark.streaming.listener import StreamingListener

    from logstream.serving import ServingStore

    store = ServingStore(str(Path(store_path).absolute()))

    class BatchProgress(StreamingListener):
        def onBatchCompleted(self, batchCompleted: Any) -> None:
            info = batchCompleted.batchInfo()
            records = int(info.numRecords())
            # JavaBatchInfo: delays in ms, -1 when unknown
            proc_ms = int(info.processingDelay())
            sched_ms = int(info.schedulingDelay())
            proc_ms = proc_ms if proc_ms >= 0 else None
            batch_ms = int(info.batchTime().milliseconds())
            store.record_progress(
                [
                    {
                        "query": DSTREAM_QUERY,
                        "batch_id": batch_ms,
                        "timestamp": _iso(datetime.fromtimestamp(batch_ms / 1000, UTC)),
                        "num_input_rows": records,
                        "batch_duration_ms": proc_ms,
                        "processed_rows_per_s": records * 1000 / proc_ms if proc_ms else None,
                        "watermark": f"scheduling_delay_ms={sched_ms}",
                    }
                ]
            )

    return BatchProgress()
