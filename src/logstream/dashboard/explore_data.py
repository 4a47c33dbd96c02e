"""The data of the dashboard's explore section: a chosen range against the one before it, a
filter, a site, every site, and the last minutes live.

Everything is read from the serving store in one read transaction, as the rest of the page
(:func:`logstream.dashboard.data.read_snapshot`):

* **the last N minutes** (N from 1 to 60) of event time, counted back from the minute of the
  newest event: requests and status classes from ``traffic_per_minute``, top pages (GoAccess's
  requested files, the ``requests`` panel) and top clients (the ``hosts`` panel) from
  ``traffic_by_dimension``: the store's live views, which every micro-batch updates from its
  open panes;
* **the range** (``since`` to ``until``; default the last hour of event time) and **the one
  before it** (the same length, just before): totals, and each panel's top items with their
  change (:func:`logstream.comparison.compare_reports`, hits and bytes: a panel's minute
  windows do not add up to visitors);
* **sites**: a row per virtual host in the range, and an ``all sites`` row, their sum;
* **a filter or a site** needs the events, not the windows: the pipeline's ``events/``
  Parquet output (its directory is in the store's ``pipeline_state``) is scanned with Arrow,
  the filter's time range and expression pushed into the scan
  (:func:`logstream.filter_arrow.arrow_expression`).

The filter comes from the page's URL, which anyone can send: it is checked first, before the
store is opened (the allowlist and bounds of :mod:`logstream.filter_allowlist`), and a scan of
the events is bounded in time: :data:`SCAN_TIMEOUT_S` for both periods, checked between the
scan's record batches, and at most :data:`SCANS_AT_ONCE` scans run in the process at once. A
refused filter, a scan past its time and an unexpected error are a message in the section (the
error's text goes to the dashboard's log, not to the page).

No Spark: the web process never imports PySpark.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

from logstream.comparison import compare_reports
from logstream.errors import ConfigError
from logstream.filter_arrow import arrow_expression
from logstream.filters import EventFilter, parse_instant
from logstream.serving import ServingStore, shared_reader, store_location
from logstream.serving.postgres import redact_url
from logstream.serving.reader import ingest_batch_id

__all__ = [
    "ALL_SITES",
    "Explore",
    "ExploreView",
    "LastMinutes",
    "SiteRow",
    "read_explore",
    "site_rows",
]

#: The label of the row that sums every site.
ALL_SITES = "all sites"
#: Items listed per table.
TOP = 10
#: Items read per table to find the other period's items.
DEPTH = 1000
#: The panels compared between the range and the one before.
COMPARED = ("requests", "hosts", "not_found", "static_requests", "referring_sites")
#: The event columns a filtered view reads.
_EVENT_COLUMNS = ("event_time", "client_host", "url_path", "status", "bytes_sent", "virtual_host")
#: Seconds the scans of the events of one refresh (the range and the one before) may take.
SCAN_TIMEOUT_S = 5.0
#: Scans of the events that run at once in the dashboard process; a refresh that finds them
#: all busy waits for one until its own time is up.
SCANS_AT_ONCE = 2
_SCANS = threading.BoundedSemaphore(SCANS_AT_ONCE)

log = logging.getLogger(__name__)


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Explore:
    """The explore section's controls, as the page's URL keeps them.

    Attributes
    ----------
    filter : str
        A ``--filter`` expression ("" for none).
    since, until : str
        The range's ends as ``--since`` takes them ("" : the last hour of event time).
    site : str
        A virtual host ("" or :data:`ALL_SITES`: every site).
    minutes : int
        N of the last N minutes, 1–60.
    """

    filter: str = ""
    since: str = ""
    until: str = ""
    site: str = ""
    minutes: int = 5

    @classmethod
    def from_query(cls, query: str) -> Explore:
        """The controls of a URL's query string (``?filter=…&since=…``); bad numbers clamp."""
        values = {k: v[-1] for k, v in parse_qs(query.lstrip("?")).items()}
        try:
            minutes = int(values.get("minutes", 5))
        except ValueError:
            minutes = 5
        return cls(
            values.get("filter", ""),
            values.get("since", ""),
            values.get("until", ""),
            values.get("site", ""),
            max(1, min(60, minutes)),
        )

    def query(self) -> str:
        """The query string that keeps these controls (``""`` for the defaults).

        Examples
        --------
        >>> Explore(filter="status >= 500", minutes=10).query()
        '?filter=status+%3E%3D+500&minutes=10'
        """
        pairs = {k: v for k, v in self.__dict__.items() if v not in ("", Explore.minutes)}
        return "?" + urlencode(pairs) if pairs else ""


@dataclass
class LastMinutes:
    """The last ``minutes`` minutes of event time, ``start`` to ``end`` (ISO 8601 UTC)."""

    minutes: int
    start: str
    end: str
    requests: int = 0
    status: dict[str, int] = field(default_factory=dict)
    pages: list[tuple[str, int]] = field(default_factory=list)
    clients: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class SiteRow:
    """A site's traffic in the range: ``requests``, ``bytes`` and its share of the
    requests (0–1)."""

    site: str
    requests: int
    bytes: int
    share: float = 1.0


@dataclass
class ExploreView:
    """What the explore section shows (see the module's docstring)."""

    controls: Explore
    message: str = ""
    source: str = "windows"  # or "events": a filter or a site reads the Parquet events
    start: str = ""
    end: str = ""
    previous_start: str = ""
    totals: dict[str, int] = field(default_factory=dict)
    previous_totals: dict[str, int] = field(default_factory=dict)
    comparison: dict[str, Any] = field(default_factory=dict)
    last: LastMinutes | None = None
    sites: list[SiteRow] = field(default_factory=list)
    #: the offset the log is written in (``-04:00``; the store's ``log_offset``), if known
    log_offset: str | None = None
    #: the newest committed ingest micro-batch when the section read the store
    batch: int | None = None


def _newest(read: Any) -> datetime | None:
    value = read.state_value("max_event_time_ms")
    if not value:
        return None
    return datetime.fromtimestamp(int(value) / 1000, UTC)


def _range(controls: Explore, newest: datetime) -> tuple[datetime, datetime]:
    """The chosen range; relative times count back from the newest event, as the page's
    time ranges do. Raises ConfigError for a bad or empty range."""
    end_default = newest.replace(second=0, microsecond=0) + timedelta(minutes=1)
    until = parse_instant(controls.until, "until", end_default) if controls.until else None
    since = parse_instant(controls.since, "since", end_default) if controls.since else None
    until = until or end_default
    since = since or until - timedelta(hours=1)
    if since >= until:
        raise ConfigError(f"the range {_iso(since)} – {_iso(until)} is empty: widen it")
    return since, until


def _last_minutes(read: Any, newest: datetime, minutes: int) -> LastMinutes:
    end = newest.replace(second=0, microsecond=0) + timedelta(minutes=1)
    start = end - timedelta(minutes=minutes)
    out = LastMinutes(minutes, _iso(start), _iso(end))
    traffic = read.range_traffic(out.start, out.end)
    out.requests = traffic["requests"]
    out.status = {f"{c}xx": traffic[f"status_{c}xx"] for c in "12345"}
    for dimension, key, hits, _size, _n in read.range_items(
        ("requests", "hosts"), out.start, out.end, TOP
    ):
        (out.pages if dimension == "requests" else out.clients).append((key, hits))
    return out


def _report(totals: dict[str, int], items: dict[str, list[tuple[str, int, int]]], n: dict):
    """A report-shaped dictionary of window rows, for :func:`compare_reports`."""
    out: dict[str, Any] = {
        "general": {
            "total_requests": totals["requests"],
            "valid_requests": totals["requests"],
            "unique_visitors": 0,
            "bandwidth_bytes": totals["bytes"],
        }
    }
    for panel in COMPARED:
        rows = items.get(panel, [])
        out[panel] = {
            "metadata": {"items": n.get(panel, len(rows))},
            "data": [{"data": k, "hits": h, "visitors": None, "bytes": b} for k, h, b in rows],
        }
    return out


def _window_period(read: Any, start: str, end: str) -> dict[str, Any]:
    totals = read.range_traffic(start, end)
    items: dict[str, list[tuple[str, int, int]]] = {}
    counts: dict[str, int] = {}
    for dimension, key, hits, size, n in read.range_items(COMPARED, start, end, DEPTH):
        items.setdefault(dimension, []).append((key, hits, size))
        counts[dimension] = n
    return _report(totals, items, counts)


def _scan(events: Any, condition: Any, deadline: float) -> Any:
    """The events ``condition`` keeps, as an Arrow table; a ConfigError once the monotonic
    clock passes ``deadline`` (checked between record batches: the scan stops there)."""
    import pyarrow as pa

    if not _SCANS.acquire(timeout=max(0.0, deadline - time.monotonic())):
        raise ConfigError("other pages are scanning the events: this view comes at a later refresh")
    try:
        scanner = events.scanner(columns=list(_EVENT_COLUMNS), filter=condition)
        batches = []
        for batch in scanner.to_batches():
            if time.monotonic() > deadline:
                raise ConfigError(
                    f"the filter's scan of the events took longer than {SCAN_TIMEOUT_S:g} s "
                    "and was stopped: narrow the range (since, until) or the filter"
                )
            batches.append(batch)
        return pa.Table.from_batches(batches, schema=scanner.projected_schema)
    finally:
        _SCANS.release()


def _event_period(events: Any, flt: EventFilter, deadline: float) -> dict[str, Any]:
    """The report-shaped totals and items of the events ``flt`` keeps (an Arrow scan that
    ends by ``deadline``, :func:`_scan`)."""
    import pyarrow.compute as pc

    table = _scan(events, arrow_expression(flt), deadline)
    status = table["status"]
    totals = {
        "requests": table.num_rows,
        "bytes": int(pc.sum(table["bytes_sent"]).as_py() or 0),
        **{
            f"status_{c}xx": int(pc.sum(pc.equal(pc.divide(status, 100), int(c))).as_py() or 0)
            for c in "12345"
        },
    }
    items: dict[str, list[tuple[str, int, int]]] = {}
    counts: dict[str, int] = {}
    for panel, column in (("requests", "url_path"), ("hosts", "client_host")):
        grouped = table.group_by(column).aggregate([(column, "count"), ("bytes_sent", "sum")])
        rows = sorted(
            zip(
                grouped[column].to_pylist(),
                grouped[f"{column}_count"].to_pylist(),
                grouped["bytes_sent_sum"].to_pylist(),
                strict=True,
            ),
            key=lambda r: (-r[1], r[0] or ""),
        )
        items[panel] = [(k, int(h), int(b or 0)) for k, h, b in rows[:DEPTH] if k is not None]
        counts[panel] = len(rows)
    return _report(totals, items, counts)


def _events_dataset(read: Any) -> Any:
    """The pipeline's ``events/`` Parquet output as an Arrow dataset; raises ConfigError when
    the store does not say where it is or it is not Parquet."""
    import pyarrow.dataset as ds

    where, fmt = read.state_value("output_dir"), read.state_value("output_format")
    if not where or (fmt or "parquet") != "parquet":
        raise ConfigError(
            "a filter or a site needs the pipeline's Parquet events, and this store names "
            "none (a run with --output-format parquet writes them)"
        )
    path = Path(where) / "events"
    if not path.is_dir():
        raise ConfigError(f"the events directory {path} does not exist yet")
    return ds.dataset(path, format="parquet", partitioning="hive")


def _sites(read: Any, start: str, end: str) -> list[SiteRow]:
    rows = [
        SiteRow(key, hits, size)
        for _d, key, hits, size, _n in read.range_items(("virtual_hosts",), start, end, DEPTH)
    ]
    if not rows:
        return []
    total = SiteRow(ALL_SITES, sum(r.requests for r in rows), sum(r.bytes for r in rows))
    for r in rows:
        r.share = r.requests / total.requests if total.requests else 0.0
    return [*rows, total]


def _store(store_path: Path | str) -> Any:
    """The store to read (a PostgreSQL store through the process's pool)."""
    where = store_location(store_path)
    if isinstance(where, str):
        return shared_reader(where)
    path = Path(where).expanduser()
    if not path.exists():
        raise ConfigError(f"the store {path} does not exist yet")
    return ServingStore(path, read_only=True)


def site_rows(store_path: Path | str, since: str | None, until: str | None = None) -> list[SiteRow]:
    """Every site's requests and bytes in the store's windows starting in ``[since, until)``
    (None: from the first, to the last), then :data:`ALL_SITES`, their sum."""
    with _store(store_path).reader() as read:
        return _sites(read, since or "", until or "9999")


def _checked_filter(controls: Explore) -> EventFilter:
    """The filter of the controls (its expression and the site), checked before anything is
    read; raises ConfigError."""
    expressions = [controls.filter] if controls.filter.strip() else []
    if controls.site and controls.site != ALL_SITES:
        site = controls.site.replace(chr(39), "").replace("\\", "")
        expressions.append(f"virtual_host = '{site}'")
    return EventFilter.build(filters=expressions)


def read_explore(store_path: Path | str, controls: Explore) -> ExploreView:
    """The explore section's data (see the module's docstring); an error of the controls
    (a bad filter or range), a scan past its time or an error of the events becomes
    :attr:`ExploreView.message`."""
    view = ExploreView(controls)
    try:
        flt = _checked_filter(controls)  # a refused filter: said before the store is opened
        store = _store(store_path)
        with store.reader() as read:
            view.log_offset = read.state_value("log_offset") or None
            view.batch = ingest_batch_id(read.last_committed())
            newest = _newest(read)
            if newest is None:
                view.message = "No event yet."
                return view
            view.last = _last_minutes(read, newest, controls.minutes)
            since, until = _range(controls, newest)
            before = since - (until - since)
            view.start, view.end, view.previous_start = _iso(since), _iso(until), _iso(before)
            view.sites = _sites(read, view.start, view.end)
            if flt.expressions:
                view.source = "events"
                events = _events_dataset(read)
                deadline = time.monotonic() + SCAN_TIMEOUT_S
                current = _event_period(events, replace(flt, since=since, until=until), deadline)
                previous = _event_period(events, replace(flt, since=before, until=since), deadline)
            else:
                current = _window_period(read, view.start, view.end)
                previous = _window_period(read, view.previous_start, view.start)
    except ConfigError as exc:
        view.message = str(exc)
        return view
    except Exception:  # an unreadable store or events: the log has the error, the page a line
        log.exception("explore section: reading %s failed", redact_url(str(store_path)))
        view.message = (
            "The events or the store could not be read (the dashboard's log has the error); "
            "retrying at the next refresh."
        )
        return view
    view.totals = current["general"]
    view.previous_totals = previous["general"]
    view.comparison = compare_reports(current, previous, top=TOP, depth=DEPTH)
    return view
