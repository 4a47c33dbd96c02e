"""What the dashboard shows, read from the serving store in one read-only snapshot.

Every refresh opens the store's reader (:meth:`ServingStore.reader <logstream.serving.
ServingStore.reader>`: a new SQLite connection, or one of the process's pool for a PostgreSQL
store, :func:`~logstream.serving.shared_reader`) in one read transaction (``REPEATABLE READ
READ ONLY`` on PostgreSQL), reads every panel through it (:mod:`logstream.dashboard.views`)
and ends it. All numbers of one refresh therefore come from the same committed state of the
store (SQLite's WAL mode, PostgreSQL's MVCC: the pipeline keeps writing meanwhile), and a
SQLite store that is replaced or created between two refreshes is picked up by the next one.
The SQL is the reader's (:class:`~logstream.serving.reader.StoreReader`, bounded queries
only); this module decides what the page says. Nothing here imports Spark.

The store's state decides what the page says (:attr:`Snapshot.state`):

``missing``     the SQLite file does not exist yet ("waiting for data…");
``waiting``     the store exists but holds no table or no committed micro-batch yet;
``unreadable``  the database cannot be read (not a database, locked for too long, the
                PostgreSQL server unreachable …);
``ok``          data to show; :attr:`Snapshot.stale` is set when no micro-batch was committed
                for a while (the pipeline is stopped or idle: an older run's data), and
                :attr:`Snapshot.notes` names the parts an older store does not have.

A table that exists but is empty (no alert raised, no session closed yet) is not a note: its
part of the snapshot is empty and the page says so.

Times
-----
Window bounds are ISO 8601 UTC text as in the store (``1995-07-09T04:00:00Z``). The time
range (``15m`` … ``7d``, ``all``) is counted back from the **newest event time**, not from the
wall clock, so a replay of old logs is shown like live traffic. The newest event time is that
of the ledgered micro-batches (``ledger_max_event_time_ms``; ``max_event_time_ms``, which the
windows written ahead of their ledger row raise, for an older store), the watermark that
minus ``watermark_delay_ms`` (``pipeline_state``); a window is *complete* when
``window_end <= watermark``.

Tiles
-----
The tiles of a micro-batch (last micro-batch, its rows, rates and duration, state rows, newest
event, watermark) describe one: the newest ingest micro-batch in the ledger, with its own
progress row (not the newest progress row, which may be a later micro-batch's without a
ledger row, or an earlier one's while the newest is still reporting).

The panels' dataclasses and constants are :mod:`logstream.dashboard.model`'s, re-exported
here.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from logstream.dashboard import views
from logstream.dashboard.model import (
    ALERTS_SHOWN,
    DEFAULT_RANGE,
    DEFAULT_TOP,
    DIMENSION_SERIES,
    STATUS_CLASSES,
    TIME_RANGES,
    Alert,
    Alerts,
    Bots,
    BotScore,
    DimensionTraffic,
    Filters,
    Health,
    Session,
    Sessions,
    SessionWindow,
    Snapshot,
    TopClient,
    TopClients,
    Traffic,
    Trending,
    TrendingPage,
    Visitors,
    ago,
    epoch_s,
    iso,
    store_path_from_url,
)
from logstream.dashboard.shared import SharedResults
from logstream.errors import ConfigError
from logstream.monitoring.kafka import kafka_source
from logstream.serving import ServingStore, shared_reader, store_location
from logstream.serving.read_errors import READ_ERRORS, read_failure
from logstream.serving.reader import (
    FOLLOW_LOSS_KEYS,
    StoreReader,
    follow_losses,
    ingest_batch_id,
)
from logstream.serving.rows import LedgerRow
from logstream.units import plural

__all__ = [
    "ALERTS_SHOWN",
    "DEFAULT_RANGE",
    "DIMENSION_SERIES",
    "FOLLOW_LOSS_KEYS",
    "STATUS_CLASSES",
    "TIME_RANGES",
    "Alert",
    "Alerts",
    "BotScore",
    "Bots",
    "DimensionTraffic",
    "Filters",
    "Health",
    "Session",
    "SessionWindow",
    "Sessions",
    "Snapshot",
    "TopClient",
    "TopClients",
    "Traffic",
    "Trending",
    "TrendingPage",
    "Visitors",
    "epoch_s",
    "follow_losses",
    "iso",
    "read_snapshot",
    "store_path_from_url",
]

#: A store whose last micro-batch is older than this (seconds, wall clock) is "stale".
STALE_AFTER_S = 120.0
#: Watermark delay assumed when the store does not record one (the pipeline's default).
DEFAULT_WATERMARK_DELAY_MS = 600_000
#: Ledger key of the DStream edition's trending pages, and its progress rows' query
#: (``logstream.dstream.weblog``, not imported: that module imports Spark's analytics).
DSTREAM_LEDGER_QUERY = "dstream_trending"
DSTREAM_QUERY = "dstream"


def read_snapshot(
    path: Path | str,
    filters: Filters | None = None,
    *,
    top: int | None = None,
    now: datetime | None = None,
    stale_after_s: float = STALE_AFTER_S,
    shared: SharedResults | None = None,
) -> Snapshot:
    """Read what the dashboard shows from the store at ``path``; never raises for a bad store.

    Parameters
    ----------
    path : Path or str
        The SQLite serving store (a path or a ``sqlite:///`` URL; it may not exist yet), or
        a ``postgresql://`` URL.
    filters : Filters, optional
        Time range, URL prefix, status classes (default: :class:`Filters` defaults).
    top : int, optional
        Trending pages listed (default: the pipeline's ``--top`` recorded in the store, else
        :data:`~logstream.dashboard.model.DEFAULT_TOP`).
    now : datetime, optional
        Wall clock for the staleness check (default: now, UTC).
    stale_after_s : float
        Seconds without a committed micro-batch after which :attr:`Snapshot.stale` is set.
    shared : SharedResults, optional
        The dashboard process's results: a snapshot of the same store version, recorded
        state and filters is read once and shared by every refresh that asks for it
        (:mod:`logstream.dashboard.shared`); its ``read_at`` and ``stale`` are this call's.
        None: read everything now.

    Returns
    -------
    Snapshot
        ``state`` tells whether there is data; every error of the database becomes a
        message.
    """
    filters = filters or Filters()
    now = now or datetime.now(UTC)
    read_at = now.strftime("%H:%M:%S UTC")
    try:
        where = store_location(path)  # every form of --store, as the pipeline reads it
    except ConfigError as exc:  # never valid: say so on the page, naming what was given
        return Snapshot(
            state="unreadable",
            message=f"Cannot open the store {path}: {exc}",
            store_path=str(path),
            filters=filters,
            read_at=read_at,
        )
    if isinstance(where, str):
        return _read_postgres(where, filters, top, now, stale_after_s, shared)
    path = where.expanduser()
    base = {"store_path": path, "filters": filters, "read_at": read_at}
    if not path.exists():
        shown = path.absolute()  # a relative path is read from the dashboard's directory
        return Snapshot(
            state="missing",
            message=f"Waiting for data… the store {shown} does not exist yet. Start the "
            f"pipeline with: logstream run --store sqlite:///{shown}",
            **base,
        )
    try:
        store = ServingStore(path, read_only=True)
        with store.reader() as read:  # one read transaction: a consistent snapshot
            return _read(read, base, filters, top, now, stale_after_s, shared)
    except READ_ERRORS as exc:
        failure = read_failure(exc)
        if failure == "no_tables":
            return Snapshot(
                state="waiting",
                message=f"Waiting for data… the store {path} has no tables yet (the pipeline "
                f"is creating it).",
                **base,
            )
        if failure == "retry":
            return Snapshot(
                state="unreadable",
                message=f"Cannot read the store {path} right now ({exc}); retrying at the next "
                "refresh.",
                **base,
            )
        return Snapshot(
            state="unreadable",
            message=f"Cannot read {path}: {exc}. Is it a logstream serving store? Point "
            "--store at the file given to logstream run --store.",
            **base,
        )


def _read_postgres(
    url: str,
    filters: Filters,
    top: int | None,
    now: datetime,
    stale_after_s: float,
    shared: SharedResults | None,
) -> Snapshot:
    """:func:`read_snapshot` of a PostgreSQL store, through the process's pool for ``url``."""
    try:
        store = shared_reader(url)  # the process's pool for url
    except ConfigError as exc:  # a malformed URL: never valid, say so on the page
        return Snapshot(
            state="unreadable", message=str(exc), store_path=url, filters=filters, read_at=""
        )
    base = {"store_path": store.url, "filters": filters, "read_at": now.strftime("%H:%M:%S UTC")}
    try:
        with store.reader() as read:  # REPEATABLE READ READ ONLY: one snapshot
            return _read(read, base, filters, top, now, stale_after_s, shared)
    except READ_ERRORS as exc:
        if read_failure(exc) == "no_tables":
            return Snapshot(
                state="waiting",
                message=f"Waiting for data… the store {store.url} has no tables yet (start "
                f"the pipeline with: logstream run --store {store.url}).",
                **base,
            )
        reason = " ".join(str(exc).split()) or type(exc).__name__
        return Snapshot(
            state="unreadable",
            message=f"Cannot read the store {store.url} right now ({reason}); retrying at "
            "the next refresh.",
            **base,
        )


def _read(
    read: StoreReader,
    base: dict[str, Any],
    filters: Filters,
    top: int | None,
    now: datetime,
    stale_after_s: float,
    shared: SharedResults | None = None,
) -> Snapshot:
    """The snapshot of a readable store: the counters and the ledger decide its state, then
    every panel is read (:func:`_panels`)."""
    notes: list[str] = []
    state = read.state()
    if top is None:
        stored = state.get("top") or ""
        top = int(stored) if stored.isdigit() and int(stored) > 0 else DEFAULT_TOP
    counters = read.counter_totals()
    counters["duplicates"] = views.section(notes, "duplicates", read.duplicates, 0)
    last, ledger_rows = views.section(
        notes, "ledger", lambda: (read.last_committed(), read.ledger_rows()), (None, None)
    )
    progress_seq = views.section(notes, "progress", read.progress_seq, None)
    # the windows of a micro-batch reach the store ahead of its ledger row and counters
    # (ServingStore.commit_ingest_views), which records the batch id: new data
    views_batch = state.get("views_batch")
    losses = follow_losses(state)
    version = (
        ledger_rows,  # any query's micro-batch (the tiles' is the newest ingest one)
        None if last is None else last[3],
        progress_seq,
        tuple(sorted(counters.items())),
        views_batch,
        tuple(sorted(losses.items())),
        _digest(state),  # what the pipeline records of itself (--top, its source, offsets …)
    )
    if last is None and not any(counters.values()) and views_batch is None:
        return Snapshot(
            state="waiting",
            message="Waiting for data… the pipeline has created the store but has not "
            "committed a micro-batch yet.",
            counters=counters,
            version=version,
            **base,
        )
    if last is not None and last[1] == DSTREAM_LEDGER_QUERY:  # an ingest batch comes first
        totals = read.dstream_totals()
        return _dstream_snapshot(read, base, notes, last, state, counters, version, top, totals)

    def whole() -> Snapshot:
        return _ok(read, base, notes, state, counters, version, losses, last, top)

    if shared is None:
        snap = whole()
    else:  # the wall clock's part (read_at, stale) is this refresh's own: see below
        key = ("snapshot", str(base["store_path"]), base["filters"], top, version)
        snap = replace(shared.get(key, whole), read_at=base["read_at"])
    snap.stale = _stale(last, now, stale_after_s)
    return snap


def _digest(state: dict[str, str]) -> str:
    """A short digest of the store's recorded state (the page keeps the version it drew)."""
    return hashlib.blake2b(repr(sorted(state.items())).encode(), digest_size=8).hexdigest()


def _ok(
    read: StoreReader,
    base: dict[str, Any],
    notes: list[str],
    state: dict[str, str],
    counters: dict[str, int],
    version: tuple[Any, ...],
    losses: dict[str, int],
    last: LedgerRow | None,
    top: int,
) -> Snapshot:
    """The snapshot of a store with data, but for what depends on the wall clock."""
    newest_ms = _newest_event_ms(read, state, last, notes)
    if state.get("watermark_delay_ms"):
        delay_ms = float(state["watermark_delay_ms"])
    else:
        delay_ms = DEFAULT_WATERMARK_DELAY_MS
        notes.append(
            "The store does not record the watermark delay (older run): assuming 10 minutes."
        )
    snap = Snapshot(
        state="ok", message="", top=top, counters=counters, version=version, notes=notes, **base
    )
    snap.batch = ingest_batch_id(last)
    _describe(snap, state, losses)
    if newest_ms is None:  # no event time recorded: only quarantined lines so far, or none
        snap.message = (
            "No event parsed yet: every line read so far is quarantined."
            if counters["quarantined"]
            else "No event parsed yet."
        )
        snap.late_examples, snap.quarantine_examples = views.examples(read, notes)
        snap.health = views.section(
            notes, "progress", lambda: views.health(read, last, state), None
        )
        return snap
    _panels(snap, read, state, last, newest_ms, delay_ms)
    return snap


def _newest_event_ms(
    read: StoreReader, state: dict[str, str], last: LedgerRow | None, notes: list[str]
) -> float | None:
    """The newest event time of the ledgered micro-batches: that of the micro-batch the tiles
    show (``max_event_time_ms`` may already be the next one's, whose windows are written
    ahead); an older store's, or the end of its last traffic window; None without one."""
    if state.get("ledger_max_event_time_ms") and last is not None:
        return float(state["ledger_max_event_time_ms"])
    if state.get("max_event_time_ms"):  # a store of an older logstream, or nothing ledgered
        return float(state["max_event_time_ms"])
    last_end = read.traffic_last_end()
    if last_end:
        notes.append("The store does not record the newest event time: using the last window.")
        return epoch_s(last_end) * 1000
    return None


def _describe(snap: Snapshot, state: dict[str, str], losses: dict[str, int]) -> None:
    """What the pipeline recorded of itself (source, losses, deduplication, queries)."""
    snap.source_label = state.get("source_label")
    snap.follow_losses = losses
    snap.kafka = kafka_source(state)
    if state.get("dedup") in ("true", "false"):
        snap.dedup = state["dedup"] == "true"
    if "queries" in state:
        snap.queries = frozenset(state["queries"].split(",")) - {"none", ""}
    snap.synthetic = state.get("synthetic") == "True"


def _stale(last: LedgerRow | None, now: datetime, stale_after_s: float) -> str | None:
    """What the page says when the last micro-batch was committed more than
    ``stale_after_s`` seconds before ``now``; None when it was not (or there is none)."""
    if last is None:
        return None
    age = now.timestamp() - epoch_s(last[3])
    if age <= stale_after_s:
        return None
    return (
        f"No micro-batch committed for {ago(age)} (last at {last[3][:19]}Z): the pipeline is "
        "stopped or idle; showing the data it left."
    )


def _panels(
    snap: Snapshot,
    read: StoreReader,
    state: dict[str, str],
    last: LedgerRow | None,
    newest_ms: float,
    delay_ms: float,
) -> None:
    """Every panel of the range the filters select, counted back from the newest event."""
    filters, notes, top = snap.filters, snap.notes, snap.top
    newest_s = newest_ms / 1000
    watermark_s = (newest_ms - delay_ms) / 1000
    span = TIME_RANGES[filters.time_range][1]
    # window starts are whole seconds: start >= newest - span  <=>  start >= ceil(...)
    range_start = None if span is None else math.ceil(newest_s - span)
    snap.newest_event = iso(newest_s)
    snap.watermark = iso(watermark_s)
    snap.watermark_delay_s = delay_ms / 1000
    snap.range_start = None if range_start is None else iso(range_start)

    snap.traffic = views.traffic(read, state, filters, newest_s, range_start)
    bucket = snap.traffic.bucket_s
    snap.traffic_from = snap.traffic.times[0] if snap.traffic.times else None
    snap.store_retention = state.get("store_retention")
    snap.log_offset = state.get("log_offset") or None
    snap.log_format = state.get("log_format") or None
    snap.visitors = views.section(
        notes, "unique_visitors", lambda: views.visitors(read, snap.range_start, bucket), None
    )
    snap.trending = views.section(
        notes,
        "trending_pages",
        lambda: views.trending(read, state, filters, watermark_s, top),
        None,
    )
    snap.health = views.section(notes, "progress", lambda: views.health(read, last, state), None)
    views.own_watermark(snap.health, last, snap.watermark, state)
    snap.late_examples, snap.quarantine_examples = views.examples(read, notes)
    snap.alerts = views.section(notes, "alerts", lambda: views.alerts(read, snap.range_start), None)
    snap.bots = views.section(notes, "bot_scores", lambda: views.bots(read, snap.range_start), None)
    snap.top_clients = views.section(
        notes, "top_clients", lambda: views.top_clients(read, state, watermark_s, top), None
    )
    snap.sessions = views.section(
        notes,
        "sessions or session_stats",
        lambda: views.sessions(read, state, range_start),
        None,
    )
    chosen = {"sections": filters.sections, "agents": filters.agent_classes, "networks": ()}
    for dimension, keys in chosen.items():
        found = views.section(
            notes,
            "traffic_by_dimension",
            lambda d=dimension, k=keys: views.dimension(read, d, k, snap.range_start, bucket),
            None,
        )
        setattr(snap, dimension, found)
    snap.panels = views.section(
        notes,
        "traffic_by_panel (daily_visitors)",
        lambda: views.panels(read, snap.range_start, top),
        None,
    )


def _dstream_snapshot(
    read: StoreReader,
    base: dict[str, Any],
    notes: list[str],
    last: LedgerRow,
    state: dict[str, str],
    counters: dict[str, int],
    version: tuple[Any, ...],
    top: int,
    totals: tuple[int, int, int],
) -> Snapshot:
    """What the page shows of a DStream store: its counts and batches; it has no event time,
    so no watermark, no event-time window and no watermark delay to assume."""
    batches, requests, unparseable = totals
    counters = {**counters, "events": requests, "quarantined": unparseable}
    snap = Snapshot(
        state="ok",
        message=(
            "A store of the DStream edition (logstream dstream run): "
            f"{plural(requests, 'request')} parsed and {plural(unparseable, 'unparseable line')}"
            f" in {plural(batches, 'batch', 'batches')} of processing time. It records no "
            "event time, so the watermark and the event-time charts and windows stay empty "
            "(docs/dstream.md)."
        ),
        top=top,
        counters=counters,
        version=(*version, totals),
        notes=notes,
        **base,
    )
    snap.edition = "dstream"
    snap.health = views.section(notes, "progress", lambda: views.health(read, last, state), None)
    return snap
