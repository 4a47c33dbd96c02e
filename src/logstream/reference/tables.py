"""Reference tables: loading, validation, versions, and the record of the version each
micro-batch used.

A reference table is a small CSV or Parquet file that enriches every event (the book's
stream–static join, Ch. 8–9; Spark guide "Join Operations: stream-static joins"):

============  =====================================  ==========================================
kind          columns (in the file's header)         matched on
============  =====================================  ==========================================
``networks``  ``network`` (IPv4 CIDR or address),    ``client_host``, longest prefix
              ``organisation``, ``country`` (opt.)
``agents``    ``pattern`` (Java regex),              ``user_agent``: the first class, in the
              ``agent_class``                        table's order, one of whose patterns is
                                                     found in it
``sections``  ``prefix`` (starts with ``/``),        ``url_path``, longest prefix
              ``section``
============  =====================================  ==========================================

Without an ``agents`` table the built-in one is used (:func:`builtin_agent_rules`): HTTP
tools, then the crawlers of the ``crawler-user-agents`` package, then browsers. Without a
``sections`` table a page's section is its first path segment (``/shuttle/``, or ``/`` for a
file at the root). Without a ``networks`` table there is no network enrichment.

Versions and replay
-------------------
A table's *version* is the SHA-256 of its file's bytes. :class:`ReferenceTables` checks the
files once per micro-batch (size and modification time; the content hash only when they
changed) and keeps an immutable copy of every version it loads under its snapshot directory.
Before a micro-batch uses the tables it records their versions in ``batches/<id>.json``
(written atomically); a micro-batch replayed after a crash finds the record and enriches with
exactly the same versions, even if a file changed in between.
"""

from __future__ import annotations

import csv
import hashlib
import io
import ipaddress
import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from logstream.errors import ConfigError, InputPathError

__all__ = [
    "AGENT_CLASSES",
    "CRAWLER_CLASS",
    "REFERENCE_KINDS",
    "ReferenceTables",
    "Table",
    "builtin_agent_rules",
    "load_table",
    "parse_reference_options",
    "read_rows",
]

log = logging.getLogger(__name__)

#: The kinds of reference table, in the order they are applied.
REFERENCE_KINDS = ("networks", "agents", "sections")
#: The columns of each kind; the last of networks (``country``) is optional.
COLUMNS = {
    "networks": ("network", "organisation", "country"),
    "agents": ("pattern", "agent_class"),
    "sections": ("prefix", "section"),
}
_OPTIONAL = {"country"}

#: The agent class whose share of requests is the crawler share.
CRAWLER_CLASS = "crawler"
#: Classes of the built-in agents table, plus ``other`` (a user agent no pattern matches)
#: and ``unknown`` (no user agent: ``-`` or a log format without one).
AGENT_CLASSES = ("tool", CRAWLER_CLASS, "browser", "other", "unknown")

#: HTTP libraries and command-line clients (checked before the crawler patterns, which list
#: several of them as crawlers).
_TOOL_PATTERNS = (
    r"^curl/",
    r"[wW]get",
    r"python-requests",
    r"Python-urllib",
    r"python-httpx",
    r"aiohttp",
    r"Go-http-client",
    r"^Java/",
    r"libwww-perl",
    r"okhttp",
    r"Apache-HttpClient",
    r"PostmanRuntime",
    r"^HTTPie/",
    r"axios/",
    r"node-fetch",
    r"^Ruby",
    r"^PHP",
)
#: Browsers (checked after the crawlers: a crawler's user agent often names a browser too).
_BROWSER_PATTERNS = (
    r"Firefox/",
    r"Chrome/",
    r"CriOS/",
    r"Safari/",
    r"Edge?/",
    r"OPR/",
    r"Opera",
    r"MSIE ",
    r"Trident/",
    r"^Mozilla/[0-9.]+ \(",
)


@dataclass(frozen=True)
class Table:
    """One version of a reference table, validated.

    Attributes
    ----------
    kind : str
        One of :data:`REFERENCE_KINDS`.
    digest : str
        SHA-256 (hex) of the file's bytes: the version.
    rows : tuple of tuple
        Normalised rows, first occurrence of a key kept: networks ``(network_start, length,
        organisation, country)`` (IPv4 as an integer, prefix length 0–32), agents
        ``(pattern, agent_class)``, sections ``(prefix, section)``.
    source : str
        The file it was read from (``builtin`` for the built-in agents table).
    """

    kind: str
    digest: str
    rows: tuple[tuple[object, ...], ...]
    source: str


def builtin_agent_rules() -> list[tuple[str, str]]:
    """The built-in agents table: ``(pattern, agent_class)`` rows, in match order.

    HTTP tools first, then every pattern of the ``crawler-user-agents`` package
    (``crawleruseragents.CRAWLER_USER_AGENTS_DATA``, the community list of crawler user
    agents), then browsers.
    """
    from crawleruseragents import CRAWLER_USER_AGENTS_DATA

    rules: dict[str, str] = {}
    for pattern, cls in (
        *((p, "tool") for p in _TOOL_PATTERNS),
        *((d["pattern"], CRAWLER_CLASS) for d in CRAWLER_USER_AGENTS_DATA),
        *((p, "browser") for p in _BROWSER_PATTERNS),
    ):
        rules.setdefault(pattern, cls)  # the package repeats a few of the tool patterns
    return list(rules.items())


def _builtin_agents_csv() -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS["agents"])
    writer.writerows(builtin_agent_rules())
    return out.getvalue().encode()


def parse_reference_options(values: list[str] | tuple[str, ...] | None) -> dict[str, Path]:
    """Parse ``--reference KIND=PATH`` values into ``{kind: absolute path}``.

    Raises
    ------
    ConfigError
        When a value is not ``KIND=PATH``, names an unknown kind, or repeats a kind.
    InputPathError
        When a file does not exist.
    """
    tables: dict[str, Path] = {}
    for value in values or ():
        kind, sep, path = value.partition("=")
        kind = kind.strip().lower()
        if not sep or not path.strip():
            raise ConfigError(
                f"--reference {value!r} is not KIND=PATH: write e.g. "
                "--reference sections=sections.csv (kinds: " + ", ".join(REFERENCE_KINDS) + ")"
            )
        if kind not in REFERENCE_KINDS:
            raise ConfigError(
                f"--reference {value!r}: unknown table kind {kind!r}; choose from "
                + ", ".join(REFERENCE_KINDS)
            )
        if kind in tables:
            raise ConfigError(f"--reference {kind}= is given twice: give each kind once")
        file = Path(path.strip()).expanduser().absolute()
        if not file.is_file():
            raise InputPathError(
                f"reference table {str(file)!r} ({kind}) does not exist: give the path of a "
                ".csv or .parquet file"
            )
        tables[kind] = file
    return tables


def read_rows(kind: str, data: bytes, name: str) -> list[dict[str, str | None]]:
    """Rows of a CSV (with a header) or Parquet file as dictionaries of text.

    Raises
    ------
    ConfigError
        When the file is neither, or cannot be read; the message starts with ``kind`` and
        ``name``.
    """
    if name.endswith(".parquet"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(pa.BufferReader(data))
        except Exception as exc:
            raise ConfigError(f"{kind} table {name}: not a readable Parquet file ({exc})") from exc
        columns = {c: [None if v is None else str(v) for v in table.column(c).to_pylist()]
                   for c in table.column_names}  # fmt: skip
        n = table.num_rows
        return [{c: columns[c][i] for c in columns} for i in range(n)]
    if name.endswith(".csv"):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{kind} table {name}: not UTF-8 text ({exc})") from exc
        return list(csv.DictReader(io.StringIO(text)))
    raise ConfigError(f"{kind} table {name}: use a .csv or .parquet file")


def load_table(kind: str, data: bytes, name: str) -> Table:
    """Validate a reference table's bytes into a :class:`Table`.

    Parameters
    ----------
    kind : str
        One of :data:`REFERENCE_KINDS`.
    data : bytes
        The file's content (CSV with a header row, or Parquet).
    name : str
        The file's name or path (its suffix chooses the reader), shown in messages.

    Raises
    ------
    ConfigError
        When a column is missing or a row is invalid; the message names the row (1 = the
        first row after the header) and the fix.
    """
    rows = read_rows(kind, data, name)
    wanted = COLUMNS[kind]
    header = set(rows[0]) if rows else set()
    missing = [c for c in wanted if c not in _OPTIONAL and c not in header]
    if rows and missing:
        raise ConfigError(
            f"{kind} table {name}: missing column(s) {', '.join(missing)}; its header must "
            f"name {', '.join(wanted)}"
        )
    out: list[tuple[object, ...]] = []
    seen: set[object] = set()
    skipped_v6 = duplicates = 0

    def text(row: dict[str, str | None], col: str, i: int, required: bool = True) -> str:
        value = (row.get(col) or "").strip()
        if required and not value:
            raise ConfigError(
                f"{kind} table {name}: row {i}: {col} is empty; fill it or drop the row"
            )
        return value

    for i, row in enumerate(rows, start=1):
        if kind == "networks":
            value = text(row, "network", i)
            try:
                net = ipaddress.ip_network(value, strict=False)
            except ValueError as exc:
                raise ConfigError(
                    f"{kind} table {name}: row {i}: network {value!r} is not a CIDR or an "
                    "address (e.g. 192.0.2.0/24)"
                ) from exc
            if net.version == 6:
                skipped_v6 += 1
                continue
            key: object = (int(net.network_address), net.prefixlen)
            record: tuple[object, ...] = (
                *key,  # type: ignore[misc]
                text(row, "organisation", i),
                text(row, "country", i, required=False) or None,
            )
        elif kind == "agents":
            pattern = text(row, "pattern", i)
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigError(
                    f"{kind} table {name}: row {i}: pattern {pattern!r} is not a regular "
                    f"expression ({exc})"
                ) from exc
            key = pattern
            record = (pattern, text(row, "agent_class", i))
        else:
            prefix = text(row, "prefix", i)
            if not prefix.startswith("/"):
                raise ConfigError(
                    f"{kind} table {name}: row {i}: prefix {prefix!r} must start with '/' "
                    "(a URL path prefix, e.g. /shuttle/)"
                )
            key = prefix
            record = (prefix, text(row, "section", i))
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        out.append(record)
    if skipped_v6:
        log.warning("%s table %s: %d IPv6 network(s) skipped (IPv4 only)", kind, name, skipped_v6)
    if duplicates:
        log.warning("%s table %s: %d repeated key(s) skipped (first kept)", kind, name, duplicates)
    digest = hashlib.sha256(data).hexdigest()
    return Table(kind, digest, tuple(out), name)


@dataclass
class _Source:
    path: Path
    stat: tuple[int, int] | None = None  # (size, mtime_ns) of the loaded version


@dataclass
class ReferenceTables:
    """The reference tables of a pipeline or a batch report, re-read when their files change.

    Parameters
    ----------
    sources : mapping of str to Path
        ``{kind: file}`` (see :func:`parse_reference_options`); a kind left out uses its
        default (built-in agents, first-segment sections, no networks).
    snapshot_dir : Path, optional
        Where versions and per-batch records are kept (the pipeline's state directory); None
        for a batch report (no versions kept).

    Raises
    ------
    ConfigError
        When a table is invalid at start.
    InputPathError
        When a file does not exist at start.
    """

    sources: Mapping[str, Path] = field(default_factory=dict)
    snapshot_dir: Path | None = None

    def __post_init__(self) -> None:
        self._sources = {k: _Source(Path(p)) for k, p in self.sources.items()}
        self._by_digest: dict[tuple[str, str], Table] = {}
        self.current: dict[str, Table] = {}
        if "agents" not in self._sources:
            data = _builtin_agents_csv()
            self.current["agents"] = self._keep(load_table("agents", data, "builtin.csv"), data)
        for kind, src in self._sources.items():
            if not src.path.is_file():
                raise InputPathError(f"reference table {str(src.path)!r} ({kind}) does not exist")
            self._load(kind, src)

    # -- versions --------------------------------------------------------------------------

    def _keep(self, table: Table, data: bytes) -> Table:
        self._by_digest[(table.kind, table.digest)] = table
        if self.snapshot_dir is not None:
            copy = self._snapshot_path(table.kind, table.digest, table.source)
            if not copy.exists():
                copy.parent.mkdir(parents=True, exist_ok=True)
                tmp = copy.with_name(copy.name + ".tmp")
                tmp.write_bytes(data)
                os.replace(tmp, copy)
        return table

    def _snapshot_path(self, kind: str, digest: str, name: str) -> Path:
        assert self.snapshot_dir is not None
        suffix = ".parquet" if name.endswith(".parquet") else ".csv"
        return self.snapshot_dir / f"{kind}-{digest}{suffix}"

    def _load(self, kind: str, src: _Source) -> None:
        st = src.path.stat()
        data = src.path.read_bytes()
        self.current[kind] = self._keep(load_table(kind, data, str(src.path)), data)
        src.stat = (st.st_size, st.st_mtime_ns)

    def refresh(self) -> list[str]:
        """Re-read the tables whose files changed since they were loaded.

        A file that vanished or now holds an invalid table leaves the version in use, with a
        warning in the log (a typo in a table mid-stream does not stop the pipeline).

        Returns
        -------
        list of str
            The kinds whose version changed.
        """
        changed = []
        for kind, src in self._sources.items():
            try:
                st = src.path.stat()
            except OSError:
                log.warning(
                    "reference table %s (%s) is gone: keeping the version in use", src.path, kind
                )
                continue
            if (st.st_size, st.st_mtime_ns) == src.stat:
                continue
            before = self.current[kind].digest
            try:
                self._load(kind, src)
            except (ConfigError, OSError) as exc:
                log.warning(
                    "reference table %s not reloaded, keeping the version in use: %s", src.path, exc
                )
                src.stat = (st.st_size, st.st_mtime_ns)
                continue
            if self.current[kind].digest != before:
                changed.append(kind)
        return changed

    def versions(self) -> dict[str, str]:
        """``{kind: digest}`` of the tables in use."""
        return {k: t.digest for k, t in self.current.items()}

    def for_batch(self, batch_id: int) -> dict[str, Table]:
        """The tables micro-batch ``batch_id`` enriches with.

        The first time: refresh, then record the versions (``batches/<id>.json``) before
        returning them. A replay of the batch (the record exists): the recorded versions,
        from their snapshots.
        """
        if self.snapshot_dir is None:
            self.refresh()
            return dict(self.current)
        record = self.snapshot_dir / "batches" / f"{batch_id}.json"
        if record.exists():
            versions = json.loads(record.read_text())
            return {k: self._version(k, d) for k, d in versions.items()}
        self.refresh()
        record.parent.mkdir(parents=True, exist_ok=True)
        tmp = record.with_name(record.name + ".tmp")
        tmp.write_text(json.dumps(self.versions(), sort_keys=True))
        os.replace(tmp, record)
        for old in record.parent.glob("*.json"):  # only the newest batch can be replayed
            if old.stem.isdigit() and int(old.stem) < batch_id:
                old.unlink(missing_ok=True)
        return dict(self.current)

    def _version(self, kind: str, digest: str) -> Table:
        known = self._by_digest.get((kind, digest))
        if known is not None:
            return known
        assert self.snapshot_dir is not None
        for suffix in (".csv", ".parquet"):
            copy = self.snapshot_dir / f"{kind}-{digest}{suffix}"
            if copy.exists():
                table = load_table(kind, copy.read_bytes(), str(copy))
                self._by_digest[(kind, digest)] = table
                return table
        raise ConfigError(
            f"the {kind} table version {digest[:12]} recorded for a micro-batch is missing from "
            f"{self.snapshot_dir}: restore it, or start with a new --state-dir"
        )
