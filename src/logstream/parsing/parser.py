"""Parse raw log lines into the canonical event schema with native Spark SQL expressions.

One regular-expression pass per line: the compiled format (:mod:`logstream.parsing.logformat`)
is applied with ``regexp_replace``, which rewrites a matching line into its captured fields
joined by U+0001, and ``split`` cuts them apart. This is about 5× faster than one
``regexp_extract`` per field (``bench/bench_parse_strategies.py``). Typed fields are read with
``try_*`` functions, so under ANSI mode no input can fail the job: a line that does not fit
becomes a quarantine row with a reason instead.

The same functions serve batch and streaming DataFrames.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F

from logstream.parsing.logformat import REQUEST_REGEX, CompiledFormat
from logstream.schema import EVENT_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "LONG_LINE_KEPT",
    "MAX_FUTURE_S",
    "MAX_LINE_BYTES",
    "REASON_COLUMN",
    "TIME_TEXT_COLUMN",
    "WRITTEN_OFFSET_COLUMN",
    "events",
    "fenced",
    "hhmm_parts",
    "hhmm_seconds",
    "parse",
    "quarantine",
]

#: Column of :func:`parse`'s output naming why a line is quarantined (null when parsed).
REASON_COLUMN = "quarantine_reason"
#: Column of :func:`parse`'s output (``time_text=True``) holding the time as written.
TIME_TEXT_COLUMN = "time_text"
#: Column of :func:`parse`'s output (``time_text=True``, a format whose time is the Common Log
#: Format's, ``dd/MMM/yyyy:HH:mm:ss Z``) holding the UTC offset written in an event's time
#: (seconds east of UTC): that pattern parses only a time ending in a space and ``±HHMM``
#: within ±18:00, so the last word of an event's time is its offset, read without a regular
#: expression. Meaningless where ``event_time`` is null.
WRITTEN_OFFSET_COLUMN = "written_offset_s"
#: How far ahead of the clock an event time may be before the line is quarantined as
#: ``future_event_time`` (seconds; ``logstream run --max-future``): a day, as Apache Druid's
#: ``earlyMessageRejectionPeriod`` is commonly set, which no clock skew or time zone reaches.
MAX_FUTURE_S = 86_400.0
#: A line longer than this many bytes is quarantined as ``line_too_long`` before the format's
#: regular expression sees it (``--max-line-bytes``): a request line is bounded by Apache's
#: ``LimitRequestLine`` (8,190 bytes) and nginx's ``large_client_header_buffers`` (8 KiB), a
#: whole log line with its referrer and user agent by a few of them, and one line of many
#: megabytes (a runaway writer, a binary file) held a micro-batch for minutes in the regex.
MAX_LINE_BYTES = 64 * 1024
#: Characters of a ``line_too_long`` line the quarantine keeps (its start).
LONG_LINE_KEPT = 1024

_SEP = "\x01"
#: NUL: no log format emits it, and PostgreSQL's text cannot hold it (a line with one is
#: quarantined as ``control_character``, its bytes kept in ``quarantine/``).
_NUL = "\x00"
_CLF_TIME_PATTERN = "dd/MMM/yyyy:HH:mm:ss Z"
_CORRUPT = "_corrupt_record"
_DASH_IS_NULL = ("ident", "user", "referrer", "user_agent")


def _null_if_empty(col: Column, dash_is_null: bool = False) -> Column:
    cond = (col == "") | (col == "-") if dash_is_null else col == ""
    return F.when(cond, F.lit(None)).otherwise(col)


def _has_control_character(line: Column) -> Column:
    """Whether ``line`` holds U+0001 (the parser's field separator) or NUL: no log format
    emits either, and a store cannot hold NUL (PostgreSQL's text)."""
    return line.contains(_SEP) | line.contains(_NUL)


def _time_column(raw: Column, fmt: CompiledFormat) -> Column:
    if fmt.time_kind == "any":  # JSON: ISO 8601, CLF time, epoch seconds or milliseconds
        epoch = raw.try_cast("bigint")
        return F.coalesce(
            F.try_to_timestamp(raw),
            F.try_to_timestamp(raw, F.lit(_CLF_TIME_PATTERN)),
            F.when(epoch >= 100_000_000_000, F.timestamp_millis(epoch)).otherwise(
                F.timestamp_seconds(epoch)
            ),
        )
    if fmt.time_kind == "epoch_s":
        return F.timestamp_seconds(raw.try_cast("bigint"))
    if fmt.time_kind == "epoch_ms":
        return F.timestamp_millis(raw.try_cast("bigint"))
    if fmt.time_kind == "epoch_s_frac":
        return F.timestamp_micros((raw.try_cast("decimal(20,6)") * 1_000_000).try_cast("bigint"))
    parsed = F.try_to_timestamp(raw, F.lit(fmt.time_pattern))
    if _two_digit_year(fmt.time_pattern):
        # Spark reads "yy" as 2000–2099; a log's "95" is 1995: POSIX strptime's pivot (69–99
        # are 1969–1999, 00–68 are 2000–2068), as Python's %y and the DStream parser read it
        return F.when(F.year(parsed) >= 2069, parsed - F.expr("INTERVAL 100 YEARS")).otherwise(
            parsed
        )
    return parsed


def _two_digit_year(pattern: str | None) -> bool:
    """Whether a Spark datetime pattern reads a two-digit year (``yy``, not ``yyyy``)."""
    if pattern is None:
        return False
    letters = "".join(pattern.split("'")[::2])  # outside quoted text
    return "yy" in letters and "yyyy" not in letters


def parse(
    lines: DataFrame,
    fmt: CompiledFormat,
    max_future_s: float | None = MAX_FUTURE_S,
    max_line_bytes: int | None = MAX_LINE_BYTES,
    *,
    time_text: bool = False,
) -> DataFrame:
    """Parse raw lines into events and quarantine candidates in one pass.

    Parameters
    ----------
    lines : DataFrame
        Batch or streaming DataFrame with columns ``value`` (string, one log line) and
        ``source_file`` (string, nullable).
    fmt : CompiledFormat
        The compiled log format.
    max_future_s : float, optional
        A line whose time is more than this many seconds ahead of the clock is quarantined
        as ``future_event_time``: no server writes tomorrow's requests, and one such line
        would move a stream's watermark past every real event. The clock is Spark's
        ``current_timestamp()``: in a streaming query the micro-batch's own timestamp, which
        its offset log records, so a replay decides the same way. None: no such rule (the
        continuous trigger refuses ``current_timestamp()``).
    max_line_bytes : int, optional
        A line of more bytes is quarantined as ``line_too_long`` with its first
        :data:`LONG_LINE_KEPT` characters; the format never reads it. None: no bound.
    time_text : bool
        Also keep the time as written, in a column :data:`TIME_TEXT_COLUMN` (the batch
        report reads the line's offset from it), and with the Common Log Format's time its
        offset, in a last column :data:`WRITTEN_OFFSET_COLUMN`.

    Returns
    -------
    DataFrame
        The :data:`~logstream.schema.EVENT_SCHEMA` columns, then ``raw_line`` (the input
        ``value``) and :data:`REASON_COLUMN` (null for a parsed event, else a key of
        :data:`~logstream.schema.QUARANTINE_REASONS`). Split it with :func:`events` and
        :func:`quarantine`.

    Notes
    -----
    ``-`` means "absent" in access logs: ``ident``, ``user``, ``referrer`` and ``user_agent``
    become null, ``bytes_sent`` becomes 0. Fields the format does not have are null.
    """
    value = F.col("value")
    if fmt.header is not None:  # a file's header line is not a log line
        lines = lines.where(~value.startswith(fmt.header))
    lines, raw, too_long = _bounded(lines, max_line_bytes)
    if fmt.is_json:
        staged, group = _json_fields(lines, fmt, raw, too_long)
    else:
        replacement = "".join(f"{_SEP}${i}" for i in range(1, len(fmt.fields) + 1))
        rewritten = F.regexp_replace(value, F.lit(fmt.regex), F.lit(replacement))
        matched = rewritten.startswith(_SEP) & ~value.contains(_SEP)
        staged = lines.select(
            raw.alias("raw_line"),
            F.col("source_file"),
            matched.alias("_matched"),
            F.split(rewritten, _SEP).alias("_f"),
            too_long.alias("_too_long"),
        )
        group = {name: F.get(F.col("_f"), i + 1) for i, name in enumerate(fmt.fields)}

    def field(name: str) -> Column:
        if name not in group:
            return F.lit(None).cast("string")
        return _null_if_empty(group[name], dash_is_null=name in _DASH_IS_NULL)

    bytes_raw = group.get("bytes_sent", F.lit("0"))
    if fmt.is_json:  # an absent or null size is "-": nothing sent
        bytes_raw = F.coalesce(bytes_raw, F.lit("-"))
    bytes_sent = F.when(bytes_raw == "-", F.lit(0).cast("bigint")).otherwise(
        bytes_raw.try_cast("bigint")
    )
    status = group["status"].try_cast("int") if "status" in group else F.lit(None).cast("int")
    if "response_time_us" in group:
        response_time = group["response_time_us"].try_cast("bigint")
    elif "response_time_s" in group:
        response_time = group["response_time_s"].try_cast("bigint") * 1_000_000
    elif "response_time_s_frac" in group:
        response_time = (
            group["response_time_s_frac"].try_cast("decimal(20,6)") * 1_000_000
        ).try_cast("bigint")
    else:
        response_time = F.lit(None).cast("bigint")

    typed = staged.select(
        field("client_host").alias("client_host"),
        field("ident").alias("ident"),
        field("user").alias("user"),
        _time_column(group["time"], fmt).alias("event_time"),
        field("method").alias("method"),
        field("url_path").alias("url_path"),
        field("query_string").alias("query_string"),
        field("protocol").alias("protocol"),
        status.alias("status"),
        bytes_sent.alias("bytes_sent"),
        field("referrer").alias("referrer"),
        field("user_agent").alias("user_agent"),
        response_time.alias("response_time_us"),
        field("virtual_host").alias("virtual_host"),
        F.col("source_file"),
        F.col("raw_line"),
        F.col("_matched"),
        F.col("_too_long"),
        *((group["time"].alias(TIME_TEXT_COLUMN),) if time_text else ()),
    )
    reason = _reason(max_future_s)
    kept: tuple[Column | str, ...] = (TIME_TEXT_COLUMN,) if time_text else ()
    if time_text and fmt.time_kind == "pattern" and fmt.time_pattern == _CLF_TIME_PATTERN:
        kept = (*kept, _clf_offset_seconds(F.col(TIME_TEXT_COLUMN)).alias(WRITTEN_OFFSET_COLUMN))
    return typed.select(*EVENT_COLUMNS, "raw_line", reason.alias(REASON_COLUMN), *kept)


def _clf_offset_seconds(written: Column) -> Column:
    """The offset of a time the Common Log Format's pattern parsed (``… -0400``: -14,400),
    seconds east of UTC: its last word, ``±HHMM``, cast once (no regular expression)."""
    return hhmm_seconds(F.substring_index(written, " ", -1).try_cast("int"))


def hhmm_parts(hhmm: Column) -> tuple[Column, Column]:
    """The hours and minutes of an offset written ``±HHMM`` and cast to an integer
    (``-0430`` is -430: 4 and 30), unsigned."""
    return F.floor(F.abs(hhmm) / 100), F.abs(hhmm) % 100


def hhmm_seconds(hhmm: Column, parts: tuple[Column, Column] | None = None) -> Column:
    """An offset written ``±HHMM`` and cast to an integer (``-0430`` is -430) in seconds east
    of UTC (bigint: -16,200), unchecked: the caller knows its minutes are below 60. ``parts``:
    its :func:`hhmm_parts`, when the caller has them already."""
    hours, minutes = parts if parts is not None else hhmm_parts(hhmm)
    magnitude = (hours * 3600 + minutes * 60).cast("bigint")
    return F.when(hhmm < 0, -magnitude).otherwise(magnitude)


def _reason(max_future_s: float | None) -> Column:
    """The quarantine reason of a staged row of :func:`parse` (null for an event): the first
    that holds, from the line's length and its match of the format to its typed fields."""
    raw_line = F.col("raw_line")
    # a line that matched is not empty and has no U+0001 (the format excludes it): only
    # NUL is left to look for, one scan instead of a trimmed copy and two scans of every line
    unmatched = (
        F.when(F.trim(raw_line) == "", F.lit("empty_line"))
        .when(_has_control_character(raw_line), F.lit("control_character"))
        .otherwise(F.lit("format_mismatch"))
    )
    reason = (
        F.when(F.col("_too_long"), F.lit("line_too_long"))
        .when(~F.col("_matched"), unmatched)
        .when(raw_line.contains(_NUL), F.lit("control_character"))
        .when(F.col("event_time").isNull(), F.lit("bad_timestamp"))
        .when(F.col("status").isNull() | ~F.col("status").between(100, 599), F.lit("bad_status"))
        .when(F.col("bytes_sent").isNull() | (F.col("bytes_sent") < 0), F.lit("bad_bytes"))
    )
    if max_future_s is not None:
        reason = reason.when(_in_the_future(max_future_s), F.lit("future_event_time"))
    return reason


def _bounded(lines: DataFrame, max_line_bytes: int | None) -> tuple[DataFrame, Column, Column]:
    """``lines`` whose ``value`` is empty where the line has more than ``max_line_bytes``
    bytes (the format never reads it), the raw text the quarantine keeps (its first
    :data:`LONG_LINE_KEPT` characters) and the condition of such a line; ``lines`` as they
    are without a bound."""
    value = F.col("value")
    if max_line_bytes is None:
        return lines, value, F.lit(False)
    too_long = F.octet_length(value) > F.lit(max_line_bytes)  # UTF-8 knows its bytes: no scan
    bounded = lines.select(
        F.when(too_long, F.lit("")).otherwise(value).alias("value"),
        F.when(too_long, F.substring(value, 1, LONG_LINE_KEPT)).otherwise(value).alias("_raw"),
        too_long.alias("_too_long"),
        F.col("source_file"),
    )
    return bounded, F.col("_raw"), F.col("_too_long")


def _in_the_future(max_future_s: float) -> Column:
    """``event_time`` more than ``max_future_s`` ahead of ``current_timestamp()``; the clock
    stays out of the generated code (a decimal difference, as
    :mod:`logstream.analytics.bounds` writes a micro-batch's bounds), so each micro-batch's
    new clock compiles nothing again."""
    exact = "decimal(18,0)"
    ahead = F.unix_micros("event_time").cast(exact) - F.unix_micros(F.current_timestamp()).cast(
        exact
    )
    return ahead > F.lit(int(max_future_s * 1_000_000))


def _json_fields(
    lines: DataFrame, fmt: CompiledFormat, raw: Column, too_long: Column
) -> tuple[DataFrame, dict[str, Column]]:
    """Stage JSON-lines input: one ``from_json`` per line (every mapped key read as text, so
    ``200`` and ``"200"`` both parse), a request line split by :data:`REQUEST_REGEX` (one
    ``regexp_replace`` + ``split``, as for text lines). A line that is not a JSON object does
    not match (``columnNameOfCorruptRecord``)."""
    from pyspark.sql.types import StringType, StructField, StructType

    keys = dict(fmt.json_keys)
    names = list(dict.fromkeys(keys.values()))
    schema = StructType(
        [StructField(k, StringType(), True) for k in names]
        + [StructField(_CORRUPT, StringType(), True)]
    )
    obj = F.from_json(
        F.col("value"), schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}
    )
    staged = lines.select(
        raw.alias("raw_line"), F.col("source_file"), obj.alias("_j"), too_long.alias("_too_long")
    ).select(
        "raw_line",
        "source_file",
        "_j",
        "_too_long",
        (
            F.col("_j").isNotNull()
            & F.col(f"_j.{_CORRUPT}").isNull()
            & F.ltrim(F.col("raw_line")).startswith("{")
            & ~_has_control_character(F.col("raw_line"))
        ).alias("_matched"),
    )
    group: dict[str, Column] = {}
    for field_name, key in keys.items():
        text = F.col("_j").getField(key)
        if field_name == "request":
            parts = F.split(
                F.regexp_replace(
                    text, F.lit(REQUEST_REGEX), F.lit(f"{_SEP}$1{_SEP}$2{_SEP}$3{_SEP}$4")
                ),
                _SEP,
            )
            for i, name in enumerate(("method", "url_path", "query_string", "protocol")):
                group[name] = F.get(parts, i + 1)
        else:
            group["time" if field_name == "event_time" else field_name] = text
    return staged, group


def fenced(parsed: DataFrame) -> DataFrame:
    """Return ``parsed`` behind a generator, so that no later filter is evaluated on the raw line.

    Spark's optimizer pushes a filter below the projection that computes the columns it
    tests, by writing each column's expression into the filter (``PushPredicateThroughNonJoin``;
    SPARK-47672 and SPARK-50589 proposed stopping it for expensive expressions, neither merged).
    On :func:`parse`'s output that copies the regular-expression rewrite into the filter once
    for every typed field the quarantine reason reads: ``events(parse(lines))`` ran the
    expression five times a line, 4.7x the time of one pass (10 NASA days, 2 cores, a warm
    ``noop`` write: 7.71 s against 1.64 s). A filter cannot pass a ``Generate`` whose output it
    reads, so the rows go through ``inline`` of a one-element array: each line is parsed once,
    whatever filters follow.

    Parameters
    ----------
    parsed : DataFrame
        Any DataFrame (in practice :func:`parse`'s output), batch or streaming.

    Returns
    -------
    DataFrame
        The same columns, types and rows.

    Notes
    -----
    A ``Generate`` is not allowed under the continuous trigger (map-like operators only), so
    the continuous rule alerts (:mod:`logstream.rules`) filter without the fence. The
    micro-batch pipeline needs none either: it persists the parsed micro-batch before any
    filter. The device readings come out of
    :func:`logstream.devices.readings.parse_readings` behind it.
    """
    columns = [F.col(f"`{name.replace('`', '``')}`") for name in parsed.columns]  # dots too
    return parsed.select(F.inline(F.array(F.struct(*columns))))


def events(parsed: DataFrame) -> DataFrame:
    """Keep the parsed events of :func:`parse`'s output, parsing each line once
    (:func:`fenced`).

    Returns
    -------
    DataFrame
        Exactly the :data:`~logstream.schema.EVENT_SCHEMA` columns.
    """
    return fenced(parsed).where(F.col(REASON_COLUMN).isNull()).select(*EVENT_COLUMNS)


def quarantine(parsed: DataFrame) -> DataFrame:
    """Keep the quarantined lines of :func:`parse`'s output, parsing each line once
    (:func:`fenced`).

    Returns
    -------
    DataFrame
        :data:`~logstream.schema.QUARANTINE_SCHEMA`: ``raw_line``, ``source_file``, ``reason``,
        ``detail`` (null for a line; the error for a ``corrupt_file`` row).
    """
    return (
        fenced(parsed)
        .where(F.col(REASON_COLUMN).isNotNull())
        .select(
            "raw_line",
            "source_file",
            F.col(REASON_COLUMN).alias("reason"),
            F.lit(None).cast("string").alias("detail"),
        )
    )
