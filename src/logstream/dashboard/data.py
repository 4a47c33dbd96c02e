"""What the dashboard shows, read from the serving store in one read-only snapshot.

Every refresh takes a read-only connection (a new SQLite connection, or one of the process's
pool for a PostgreSQL store, :func:`~logstream.serving.shared_reader`), starts one read
transaction (``REPEATABLE READ READ ONLY`` on PostgreSQL), runs the queries below and ends
it. All numbers of one refresh therefore come from the same
committed state of the store (SQLite's WAL mode, PostgreSQL's MVCC: the pipeline keeps
writing meanwhile), and a SQLite store that is replaced or created between two refreshes is
picked up by the next one. The SQL is the same for both databases (PostgreSQL's schema has
SQLite's ``unixepoch`` and the ledger's ``rowid``). Nothing here imports Spark.

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

Cost
----
Every query is bounded: primary-key or indexed ranges (``traffic_per_minute``,
``unique_visitors``, ``session_stats`` by ``window_start``; ``trending_pages`` and
``top_clients`` by their ``window_end`` index), tables the store caps (``alerts`` and
``sessions``: 500 rows), or ``LIMIT`` on ``seq``. The duplicates dropped are a counter the
store keeps (``counters``), not a sum over ``progress``.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

import psycopg

from logstream.errors import ConfigError
from logstream.serving import ServingStore, shared_reader, store_file, store_location
from logstream.serving.store import missing_schema
from logstream.units import plural

__all__ = [
    "DEFAULT_RANGE",
    "DIMENSION_SERIES",
    "FOLLOW_LOSS_KEYS",
    "STATUS_CLASSES",
    "TIME_RANGES",
    "Alert",
    "Alerts",
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

#: Status classes, in stacking order (the columns ``status_1xx`` … ``status_5xx``).
STATUS_CLASSES: tuple[str, ...] = ("1xx", "2xx", "3xx", "4xx", "5xx")

#: Time ranges offered by the selector: key → (label, seconds back from the newest event;
#: None = everything in the store).
TIME_RANGES: dict[str, tuple[str, int | None]] = {
    "15m": ("15 min", 15 * 60),
    "1h": ("1 h", 3600),
    "3h": ("3 h", 3 * 3600),
    "6h": ("6 h", 6 * 3600),
    "24h": ("24 h", 24 * 3600),
    "7d": ("7 days", 7 * 86400),
    "all": ("all", None),
}
DEFAULT_RANGE = "6h"

#: Most points per time series sent to the browser; longer ranges are bucketed.
MAX_POINTS = 1500
#: Bucket widths tried, in minutes (the first one with at most MAX_POINTS buckets wins).
_BUCKET_MINUTES = (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440)
#: Trending pages listed when neither the caller nor the store says.
DEFAULT_TOP = 10
#: Trending windows drawn in each page's sparkline.
TREND_WINDOWS = 30
#: Batches of the pipeline-health chart.
HEALTH_BATCHES = 120
#: Latest late events / quarantined lines listed.
EXAMPLES_SHOWN = 10
#: Latest anomaly alerts listed (the store keeps 500).
ALERTS_SHOWN = 20
#: Longest sessions listed, among the closed sessions the store keeps (500).
LONGEST_SESSIONS = 10
#: Series name of site-wide alerts (``logstream.analytics.alerts.SITE_SERIES``, not imported:
#: that module imports Spark).
SITE_SERIES = "site"
#: A store whose last micro-batch is older than this (seconds, wall clock) is "stale".
STALE_AFTER_S = 120.0
#: Watermark delay assumed when the store does not record one (the pipeline's default).
DEFAULT_WATERMARK_DELAY_MS = 600_000
#: Name of the ingest query in ``progress`` (``logstream.pipeline.ingest.INGEST_QUERY``,
#: not imported: that module imports Spark).
INGEST_QUERY = "ingest"

State = Literal["missing", "waiting", "unreadable", "ok"]
T = TypeVar("T")
#: A connection of the refresh's read transaction: :class:`sqlite3.Connection`, or the
#: PostgreSQL store's (the same ``execute`` calls and rows).
Connection = Any


# -- small helpers ---------------------------------------------------------------------------


def store_path_from_url(url: str) -> Path:
    """The file of a serving-store URL ``sqlite:///PATH`` (:func:`logstream.serving.
    store_file` also accepts ``postgresql://`` URLs).

    Raises
    ------
    ConfigError
        When ``url`` is not a ``sqlite:///`` URL (a PostgreSQL URL included).

    Examples
    --------
    >>> store_path_from_url("sqlite:///out/logstream.db")
    PosixPath('out/logstream.db')
    """
    path = store_file(url)  # the serving store's own reading of a --store URL
    if path is None:
        raise ConfigError(
            f"store {url!r} is not a SQLite file: use sqlite:///PATH "
            "(e.g. --store sqlite:///out/logstream.db)"
        )
    return path


def iso(epoch_seconds: float) -> str:
    """ISO 8601 UTC text of an instant, to the second (floor), as in the store.

    Examples
    --------
    >>> iso(805262400)
    '1995-07-09T04:00:00Z'
    """
    return datetime.fromtimestamp(math.floor(epoch_seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def epoch_s(text: str) -> float:
    """Epoch seconds of ISO 8601 text (``Z`` or an offset; fractions kept).

    Examples
    --------
    >>> epoch_s("1995-07-09T04:00:00Z")
    805262400.0
    """
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def _interval_s(text: str | None) -> float | None:
    """Seconds of a Spark interval string as the pipeline stores it (``"60 seconds"``)."""
    if not text:
        return None
    number, _, unit = text.strip().partition(" ")
    try:
        value = float(number)
    except ValueError:
        return None
    scale = {"milliseconds": 0.001, "seconds": 1.0, "minutes": 60.0, "hours": 3600.0}
    factor = scale.get(unit.strip().lower() or "seconds")
    return None if factor is None or value <= 0 else value * factor


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


# -- what a refresh returns --------------------------------------------------------------------


@dataclass(frozen=True)
class Filters:
    """The page's controls.

    Parameters
    ----------
    time_range : str
        A key of :data:`TIME_RANGES`; an unknown key means :data:`DEFAULT_RANGE`.
    url_prefix : str
        Trending pages are restricted to URL paths starting with this text (case-sensitive);
        empty = all pages.
    status_classes : tuple of str
        Status classes counted in the requests chart and the request totals.
    sections, agent_classes : tuple of str
        Site sections and agent classes drawn in the reference-data charts; empty = all.
    """

    time_range: str = DEFAULT_RANGE
    url_prefix: str = ""
    status_classes: tuple[str, ...] = STATUS_CLASSES
    sections: tuple[str, ...] = ()
    agent_classes: tuple[str, ...] = ()

    @classmethod
    def build(
        cls,
        time_range: str | None = None,
        url_prefix: str | None = None,
        status_classes: list[str] | tuple[str, ...] | None = None,
        sections: list[str] | tuple[str, ...] | None = None,
        agent_classes: list[str] | tuple[str, ...] | None = None,
    ) -> Filters:
        """Clean values from the browser: unknown range → default, prefix stripped, classes
        kept in :data:`STATUS_CLASSES` order (None = all, an empty list = none); sections and
        agent classes sorted (None or empty = all)."""
        rng = time_range if time_range in TIME_RANGES else DEFAULT_RANGE
        chosen = STATUS_CLASSES if status_classes is None else tuple(status_classes)
        return cls(
            time_range=rng,  # type: ignore[arg-type]
            url_prefix=(url_prefix or "").strip(),
            status_classes=tuple(c for c in STATUS_CLASSES if c in chosen),
            sections=tuple(sorted(set(sections or ()))),
            agent_classes=tuple(sorted(set(agent_classes or ()))),
        )


@dataclass
class Traffic:
    """Traffic per time bucket in the selected range (lists of equal length, oldest first).

    Rates are per minute: a bucket's count × 60 / ``bucket_s``. With 1-minute windows and
    1-minute buckets a point is exactly one window's count.
    """

    window_s: float  #: traffic window of the store, seconds
    bucket_s: int  #: width of a point, seconds (a multiple of minutes)
    times: list[str] = field(default_factory=list)  #: bucket starts, ISO UTC
    per_class: dict[str, list[float]] = field(default_factory=dict)  #: selected classes, /min
    requests_per_min: list[float] = field(default_factory=list)  #: selected classes, /min
    bytes_per_min: list[float] = field(default_factory=list)  #: all statuses, bytes/min
    error_rate: list[float | None] = field(default_factory=list)  #: % of all requests ≥ 400
    total_requests: int = 0  #: requests of the selected classes in the range
    total_all: int = 0  #: requests of every class in the range
    total_bytes: int = 0  #: bytes in the range (every class)
    total_errors: int = 0  #: requests with status ≥ 400 in the range


@dataclass
class DimensionTraffic:
    """Traffic per key of a reference-data view (sections, agent classes, networks) in the
    range: the ``traffic_by_dimension`` table of the store."""

    dimension: str  #: ``sections``, ``agents`` or ``networks``
    bucket_s: int
    times: list[str] = field(default_factory=list)  #: bucket starts, ISO UTC
    #: requests/min per bucket of the selected keys (all keys when none is selected; for
    #: networks the top :data:`DIMENSION_SERIES` by requests)
    series: dict[str, list[float]] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)  #: every key: requests in the range
    errors: dict[str, int] = field(default_factory=dict)  #: every key: status ≥ 400 in range

    @property
    def total(self) -> int:
        """Requests of every key in the range."""
        return sum(self.requests.values())


@dataclass
class Visitors:
    """Unique visitors per traffic window (HLL estimates), per bucket: mean and peak."""

    bucket_s: int
    times: list[str] = field(default_factory=list)
    mean: list[float] = field(default_factory=list)
    peak: list[int] = field(default_factory=list)


@dataclass
class TrendingPage:
    """One row of the trending table."""

    rank: int
    url_path: str
    requests: int  #: in the shown window
    previous: int  #: in the window one slide earlier (0 when absent)
    trend: list[int]  #: requests in the last :data:`TREND_WINDOWS` windows, oldest first


@dataclass
class Trending:
    """Top pages of the latest complete trending window (or the latest open one)."""

    window_start: str
    window_end: str
    complete: bool  #: False: no window is complete yet, this one may still grow
    pages: list[TrendingPage]
    trend_ends: list[str]  #: window ends of the sparkline points, oldest first
    window_s: float
    slide_s: float
    matching_pages: int  #: pages of the window matching the URL prefix


@dataclass
class TopClient:
    """One row of a top-clients table."""

    rank: int
    client_host: str
    requests: int
    bytes: int


@dataclass
class TopClients:
    """Heavy hitters of the latest complete clients window (or the latest open one).

    The store holds every client of each window (``top_clients``); the top ones by requests
    come from its ``(window_end, requests DESC)`` index, those by bytes from one pass over
    the window's rows.
    """

    window_start: str
    window_end: str
    complete: bool  #: False: no window is complete yet, this one may still grow
    window_s: float
    by_requests: list[TopClient]
    by_bytes: list[TopClient]
    clients: int  #: distinct clients in the window
    requests: int  #: requests of every client in the window
    bytes: int  #: bytes of every client in the window


@dataclass
class Alert:
    """One anomaly alert (a row of ``alerts``): a minute ``z`` deviations from the running
    mean of its series.

    ``value``, ``mean`` and ``std`` are requests per minute for the metric ``requests`` and a
    fraction (0–1) of server errors for ``error_rate``.
    """

    window_start: str  #: the minute, ISO UTC
    window_end: str
    series: str  #: ``site`` or a page path
    metric: str  #: ``requests`` or ``error_rate``
    value: float
    mean: float
    std: float
    z: float
    direction: str  #: ``spike`` or ``drop``


@dataclass
class Alerts:
    """The alert list and the site-wide request alerts of the selected range."""

    latest: list[Alert] = field(default_factory=list)  #: newest minute first
    kept: int = 0  #: alerts in the store (it keeps the latest 500)
    site_requests: list[Alert] = field(default_factory=list)  #: in the range, oldest first


@dataclass
class BotScore:
    """A client window a bot model flagged (a row of ``bot_scores``)."""

    window_start: str
    window_end: str
    client_host: str
    requests: int
    bot_probability: float  #: P(bot), 0–1
    distinct_pages: float
    error_ratio: float  #: 0–1
    static_share: float  #: 0–1
    robots: float  #: 1 when robots.txt was fetched
    model_version: str


@dataclass
class Bots:
    """The bot model's verdicts: the newest flagged client windows and the range's totals."""

    latest: list[BotScore] = field(default_factory=list)  #: newest window, likeliest first
    windows: int = 0  #: final client windows scored in the range
    clients: int = 0  #: client windows scored
    bots: int = 0  #: client windows flagged
    bot_requests: int = 0
    requests: int = 0


@dataclass
class SessionWindow:
    """Statistics of the sessions that started in one window (a row of ``session_stats``)."""

    window_start: str
    window_end: str
    sessions: int
    bounces: int  #: sessions with at most one page
    pages: int  #: pages viewed, summed over the sessions
    median_duration_s: int | None  #: KLL estimate
    p95_duration_s: int | None  #: KLL estimate

    @property
    def bounce_rate(self) -> float | None:
        """Bounces as a percentage of the sessions (None without sessions)."""
        return 100.0 * self.bounces / self.sessions if self.sessions else None


@dataclass
class Session:
    """One closed session (a row of ``sessions``)."""

    client_host: str
    user_agent: str | None
    session_start: str
    session_end: str
    duration_s: int
    requests: int
    pages: int
    bytes: int
    entry_page: str | None
    exit_page: str | None
    bounce: bool


@dataclass
class Sessions:
    """Session statistics per window overlapping the range, and the longest kept sessions."""

    window_s: float | None  #: statistics window (by session start), seconds
    windows: list[SessionWindow] = field(default_factory=list)  #: oldest first
    longest: list[Session] = field(default_factory=list)  #: longest first
    kept: int = 0  #: closed sessions in the store (it keeps the latest 500)

    @property
    def sessions(self) -> int:
        """Sessions of the shown windows."""
        return sum(w.sessions for w in self.windows)

    @property
    def bounce_rate(self) -> float | None:
        """Bounce rate of the shown windows, % (None without sessions)."""
        total = self.sessions
        return 100.0 * sum(w.bounces for w in self.windows) / total if total else None

    @property
    def pages_per_session(self) -> float | None:
        """Pages per session of the shown windows (None without sessions)."""
        total = self.sessions
        return sum(w.pages for w in self.windows) / total if total else None


@dataclass
class Health:
    """Pipeline health from the ``progress`` and ``ledger`` tables."""

    last_batch_at: str | None = None  #: wall-clock commit time of the newest micro-batch
    last_batch_id: int | None = None
    input_rows_per_s: float | None = None  #: latest ingest batch, events/s
    processed_rows_per_s: float | None = None  #: latest ingest batch, events/s
    batch_duration_ms: int | None = None  #: latest ingest batch
    num_input_rows: int | None = None
    #: rows of state: the analytics snapshot's (open panes, sessions, detector series) plus
    #: Spark's state store's (deduplication), latest batch
    state_rows: int | None = None
    state_memory_bytes: int | None = None
    times: list[str] = field(default_factory=list)  #: ingest batches (wall clock), oldest first
    input_rate: list[float | None] = field(default_factory=list)
    processing_rate: list[float | None] = field(default_factory=list)
    duration_ms: list[int | None] = field(default_factory=list)
    queries: list[dict[str, Any]] = field(default_factory=list)  #: latest row per query
    #: the newest ledgered ingest micro-batch has no progress row yet (reported when it ends)
    progress_pending: bool = False


@dataclass
class Snapshot:
    """Everything one refresh shows (see the module docstring for ``state``)."""

    state: State
    message: str
    store_path: Path | str  #: the SQLite file, or the PostgreSQL URL (password masked)
    filters: Filters
    read_at: str = ""
    stale: str | None = None
    notes: list[str] = field(default_factory=list)
    version: tuple[Any, ...] = ()  #: changes when the store has new data
    top: int = 10  #: trending pages listed
    newest_event: str | None = None
    watermark: str | None = None
    watermark_delay_s: float | None = None
    range_start: str | None = None  #: None = everything
    counters: dict[str, int] = field(default_factory=dict)  #: events … quarantined, duplicates
    traffic: Traffic | None = None
    visitors: Visitors | None = None
    trending: Trending | None = None
    health: Health | None = None
    late_examples: list[dict[str, Any]] = field(default_factory=list)
    quarantine_examples: list[dict[str, Any]] = field(default_factory=list)
    alerts: Alerts | None = None
    bots: Bots | None = None
    sessions: Sessions | None = None
    top_clients: TopClients | None = None
    sections: DimensionTraffic | None = None
    agents: DimensionTraffic | None = None
    networks: DimensionTraffic | None = None
    dedup: bool | None = None  #: the ingest query drops duplicate lines (None: not recorded)
    #: the queries over ``events/`` the pipeline runs (``--queries``; None: not recorded)
    queries: frozenset[str] | None = None
    source_label: str | None = None  #: what the demo replays (``pipeline_state``)
    synthetic: bool = False  #: the data is generated, not real logs
    #: ``dstream`` for a store of the DStream edition (no event time), else ``structured``
    edition: str = "structured"
    #: what the follow source could not read (``pipeline_state``: :data:`FOLLOW_LOSS_KEYS`);
    #: empty when the store records none (another source, or an older run)
    follow_losses: dict[str, int] = field(default_factory=dict)

    @property
    def lost_bytes(self) -> int:
        """Bytes of the followed log lost to rotation (0 when none or not recorded)."""
        return self.follow_losses.get("follow_lost_bytes", 0)

    @property
    def crawler_share(self) -> float | None:
        """Requests of the ``crawler`` agent class over all requests in the range (0–1)."""
        if self.agents is None or not self.agents.total:
            return None
        return self.agents.requests.get("crawler", 0) / self.agents.total

    def query_off(self, name: str) -> bool:
        """Whether the pipeline writing this store runs without query ``name`` (``--queries``)."""
        return self.queries is not None and name not in self.queries


# -- reading ---------------------------------------------------------------------------------

#: The follow source's running totals in ``pipeline_state``: bytes, lines (an estimate) and
#: files it could not read, and truncations it saw (``docs/follow.md``).
FOLLOW_LOSS_KEYS = (
    "follow_lost_bytes",
    "follow_lost_lines",
    "follow_lost_files",
    "follow_truncations",
)


def follow_losses(state: dict[str, Any]) -> dict[str, int]:
    """The follow source's loss totals of a ``pipeline_state`` mapping, each key of
    :data:`FOLLOW_LOSS_KEYS` (0 when absent); empty when the store records none of them.

    Examples
    --------
    >>> follow_losses({"follow_lost_bytes": "120", "follow_lost_lines": "3"})["follow_lost_files"]
    0
    >>> follow_losses({"top": "10"})
    {}
    """
    if not any(k in state for k in FOLLOW_LOSS_KEYS):
        return {}
    out = {}
    for key in FOLLOW_LOSS_KEYS:
        try:
            out[key] = int(float(state.get(key) or 0))
        except ValueError:  # never a reason to lose the page
            out[key] = 0
    return out


def read_snapshot(
    path: Path | str,
    filters: Filters | None = None,
    *,
    top: int | None = None,
    now: datetime | None = None,
    stale_after_s: float = STALE_AFTER_S,
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
        :data:`DEFAULT_TOP`).
    now : datetime, optional
        Wall clock for the staleness check (default: now, UTC).
    stale_after_s : float
        Seconds without a committed micro-batch after which :attr:`Snapshot.stale` is set.

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
        return _read_postgres(where, filters, top, now, stale_after_s)
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
        with store.read_transaction() as conn:  # one read transaction: a consistent snapshot
            return _read(conn, base, filters, top, now, stale_after_s)
    except sqlite3.OperationalError as exc:
        text = str(exc)
        if "no such table" in text:
            return Snapshot(
                state="waiting",
                message=f"Waiting for data… the store {path} has no tables yet (the pipeline "
                f"is creating it).",
                **base,
            )
        return Snapshot(
            state="unreadable",
            message=f"Cannot read the store {path} right now ({text}); retrying at the next "
            "refresh.",
            **base,
        )
    except sqlite3.DatabaseError as exc:
        return Snapshot(
            state="unreadable",
            message=f"Cannot read {path}: {exc}. Is it a logstream serving store? Point "
            "--store at the file given to logstream run --store.",
            **base,
        )


def _read_postgres(
    url: str, filters: Filters, top: int | None, now: datetime, stale_after_s: float
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
        with store.read_transaction() as conn:  # REPEATABLE READ READ ONLY: one snapshot
            return _read(conn, base, filters, top, now, stale_after_s)
    except psycopg.Error as exc:
        if missing_schema(exc):
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
    conn: Connection,
    base: dict[str, Any],
    filters: Filters,
    top: int | None,
    now: datetime,
    stale_after_s: float,
) -> Snapshot:
    notes: list[str] = []
    state = {r[0]: r[1] for r in conn.execute("SELECT key, value FROM pipeline_state")}
    if top is None:
        stored = state.get("top") or ""
        top = int(stored) if stored.isdigit() and int(stored) > 0 else DEFAULT_TOP
    counters = {
        "events": 0,
        "late_events": 0,
        "quarantined": 0,
        "corrupt_files": 0,
        "duplicates": 0,
    }
    counters.update({r[0]: int(r[1]) for r in conn.execute("SELECT name, value FROM counters")})
    counters["duplicates"] = _section(
        notes,
        "duplicates",
        lambda: int(conn.execute("SELECT SUM(dropped) FROM dedup_batches").fetchone()[0] or 0),
        0,
    )
    last, ledger_rows = _section(
        notes,
        "ledger",
        lambda: (
            _last_committed(conn),
            conn.execute("SELECT MAX(rowid) FROM ledger").fetchone()[0],
        ),
        (None, None),
    )
    progress_seq = _section(
        notes, "progress", lambda: conn.execute("SELECT MAX(seq) FROM progress").fetchone()[0], None
    )
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

    dstream = _dstream_totals(conn, last)
    if dstream is not None:
        return _dstream_snapshot(conn, base, notes, last, state, counters, version, top, dstream)

    newest_ms: float | None = None
    # the newest event time of the ledgered micro-batches: that of the micro-batch the tiles
    # show (max_event_time_ms may already be the next one's, whose windows are written ahead)
    if state.get("ledger_max_event_time_ms") and last is not None:
        newest_ms = float(state["ledger_max_event_time_ms"])
    elif state.get("max_event_time_ms"):  # a store of an older logstream, or nothing ledgered
        newest_ms = float(state["max_event_time_ms"])
    else:
        row = conn.execute("SELECT MAX(window_end) FROM traffic_per_minute").fetchone()
        if row[0]:
            newest_ms = epoch_s(row[0]) * 1000
            notes.append("The store does not record the newest event time: using the last window.")
    if state.get("watermark_delay_ms"):
        delay_ms = float(state["watermark_delay_ms"])
    else:
        delay_ms = DEFAULT_WATERMARK_DELAY_MS
        notes.append(
            "The store does not record the watermark delay (older run): assuming 10 minutes."
        )

    snap = Snapshot(
        state="ok",
        message="",
        top=top,
        counters=counters,
        version=version,
        notes=notes,
        **base,
    )
    snap.source_label = state.get("source_label")
    snap.follow_losses = losses
    if state.get("dedup") in ("true", "false"):
        snap.dedup = state["dedup"] == "true"
    if "queries" in state:
        snap.queries = frozenset(state["queries"].split(",")) - {"none", ""}
    snap.synthetic = state.get("synthetic") == "True"
    if last is not None:
        age = now.timestamp() - epoch_s(last[3])
        if age > stale_after_s:
            snap.stale = (
                f"No micro-batch committed for {_ago(age)} (last at {last[3][:19]}Z): the "
                "pipeline is stopped or idle; showing the data it left."
            )
    if newest_ms is None:  # no event time recorded: only quarantined lines so far, or none
        snap.message = (
            "No event parsed yet: every line read so far is quarantined."
            if counters["quarantined"]
            else "No event parsed yet."
        )
        snap.late_examples, snap.quarantine_examples = _examples(conn, notes)
        snap.health = _section(notes, "progress", lambda: _health(conn, last, state), None)
        return snap

    newest_s = newest_ms / 1000
    watermark_s = (newest_ms - delay_ms) / 1000
    span = TIME_RANGES[filters.time_range][1]
    # window starts are whole seconds: start >= newest - span  <=>  start >= ceil(...)
    range_start = None if span is None else math.ceil(newest_s - span)
    snap.newest_event = iso(newest_s)
    snap.watermark = iso(watermark_s)
    snap.watermark_delay_s = delay_ms / 1000
    snap.range_start = None if range_start is None else iso(range_start)

    snap.traffic = _traffic(conn, state, filters, newest_s, range_start)
    snap.visitors = _section(
        notes,
        "unique_visitors",
        lambda: _visitors(conn, snap.range_start, snap.traffic.bucket_s if snap.traffic else 60),
        None,
    )
    snap.trending = _section(
        notes, "trending_pages", lambda: _trending(conn, state, filters, watermark_s, top), None
    )
    snap.health = _section(notes, "progress", lambda: _health(conn, last, state), None)
    _own_watermark(snap.health, last, snap.watermark, state)
    snap.late_examples, snap.quarantine_examples = _examples(conn, notes)
    snap.alerts = _section(notes, "alerts", lambda: _alerts(conn, snap.range_start), None)
    snap.bots = _section(notes, "bot_scores", lambda: _bots(conn, snap.range_start), None)
    snap.top_clients = _section(
        notes, "top_clients", lambda: _top_clients(conn, state, watermark_s, top), None
    )
    snap.sessions = _section(
        notes, "sessions or session_stats", lambda: _sessions(conn, state, range_start), None
    )
    bucket = snap.traffic.bucket_s if snap.traffic else 60
    chosen = {"sections": filters.sections, "agents": filters.agent_classes, "networks": ()}
    for dimension, keys in chosen.items():
        found = _section(
            notes,
            "traffic_by_dimension",
            lambda d=dimension, k=keys: _dimension(conn, d, k, snap.range_start, bucket),
            None,
        )
        setattr(snap, dimension, found)
    return snap


#: Series drawn for a dimension with no key selected (the top keys by requests).
DIMENSION_SERIES = 8


def _dimension(
    conn: Connection,
    dimension: str,
    keys: tuple[str, ...],
    range_start: str | None,
    bucket: int,
) -> DimensionTraffic | None:
    where, params = "WHERE dimension = ?", [dimension]
    if range_start is not None:
        where += " AND window_start >= ?"
        params.append(range_start)
    out = DimensionTraffic(dimension=dimension, bucket_s=bucket)
    for key, requests, errors in conn.execute(
        f"SELECT key, SUM(requests), SUM(errors) FROM traffic_by_dimension {where} "
        "GROUP BY key ORDER BY SUM(requests) DESC, key",
        params,
    ):
        out.requests[key] = int(requests)
        out.errors[key] = int(errors)
    if not out.requests:
        return None
    shown = [k for k in keys if k in out.requests] or list(out.requests)[:DIMENSION_SERIES]
    rows = conn.execute(
        f"SELECT (unixepoch(window_start) / {bucket}) * {bucket} AS t, key, SUM(requests) "
        f"FROM traffic_by_dimension {where} AND key IN ({', '.join('?' * len(shown))}) "
        "GROUP BY t, key ORDER BY t",
        [*params, *shown],
    ).fetchall()
    times = sorted({r[0] for r in rows})
    index = {t: i for i, t in enumerate(times)}
    out.times = [iso(t) for t in times]
    out.series = {k: [0.0] * len(times) for k in shown}
    per_minute = 60.0 / bucket
    for t, key, requests in rows:
        out.series[key][index[t]] = requests * per_minute
    return out


def _section(notes: list[str], table: str, read: Callable[[], T], default: T) -> T:
    """Run one part of the refresh; a table an older store lacks becomes a note."""
    try:
        return read()
    except (sqlite3.OperationalError, psycopg.Error) as exc:
        if not missing_schema(exc):  # "no such table" / "no such column": older schema
            raise
        notes.append(
            f"This store has no usable {table} table ({exc}): it was written by an older "
            "logstream; that part of the page is left empty."
        )
        return default


def _window_seconds(conn: Connection, state: dict[str, str], key: str, table: str) -> float | None:
    """Width of the windows of ``table``, seconds: as the pipeline recorded it in
    ``pipeline_state`` under ``key``, else that of the newest window; None without either."""
    recorded = _interval_s(state.get(key))
    if recorded is not None:
        return recorded
    row = conn.execute(
        f"SELECT window_start, window_end FROM {table} ORDER BY window_start DESC LIMIT 1"
    ).fetchone()
    return epoch_s(row[1]) - epoch_s(row[0]) if row else None


def _bucket_seconds(window_s: float, span_s: float) -> int:
    for minutes in _BUCKET_MINUTES:
        width = max(minutes * 60, math.ceil(window_s))
        if span_s / width <= MAX_POINTS:
            return width
    return _BUCKET_MINUTES[-1] * 60


def _traffic(
    conn: Connection,
    state: dict[str, str],
    filters: Filters,
    newest_s: float,
    range_start: float | None,
) -> Traffic:
    window_s = _window_seconds(conn, state, "traffic_window", "traffic_per_minute")
    if window_s is None:  # no window yet
        window_s = 60.0
    if range_start is None:
        first = conn.execute("SELECT MIN(window_start) FROM traffic_per_minute").fetchone()[0]
        span = newest_s - (epoch_s(first) if first else newest_s)
        where, params = "", ()
    else:
        span = newest_s - range_start
        where, params = "WHERE window_start >= ?", (iso(range_start),)
    bucket = _bucket_seconds(window_s, span)
    rows = conn.execute(
        f"SELECT (unixepoch(window_start) / {bucket}) * {bucket} AS t, SUM(requests), "
        "SUM(bytes), SUM(status_1xx), SUM(status_2xx), SUM(status_3xx), SUM(status_4xx), "
        f"SUM(status_5xx), SUM(errors) FROM traffic_per_minute {where} "
        "GROUP BY t ORDER BY t",
        params,
    ).fetchall()
    per_minute = 60.0 / bucket
    out = Traffic(window_s=window_s, bucket_s=bucket)
    out.per_class = {c: [] for c in filters.status_classes}
    index = {c: 3 + i for i, c in enumerate(STATUS_CLASSES)}
    for r in rows:
        out.times.append(iso(r[0]))
        selected = 0
        for c in filters.status_classes:
            selected += r[index[c]]
            out.per_class[c].append(r[index[c]] * per_minute)
        out.requests_per_min.append(selected * per_minute)
        out.bytes_per_min.append(r[2] * per_minute)
        out.error_rate.append(100.0 * r[8] / r[1] if r[1] else None)
        out.total_requests += selected
        out.total_all += r[1]
        out.total_bytes += r[2]
        out.total_errors += r[8]
    return out


def _visitors(conn: Connection, range_start: str | None, bucket: int) -> Visitors:
    where, params = ("", ()) if range_start is None else ("WHERE window_start >= ?", (range_start,))
    rows = conn.execute(
        f"SELECT (unixepoch(window_start) / {bucket}) * {bucket} AS t, AVG(visitors), "
        f"MAX(visitors) FROM unique_visitors {where} GROUP BY t ORDER BY t",
        params,
    ).fetchall()
    return Visitors(
        bucket_s=bucket,
        times=[iso(r[0]) for r in rows],
        mean=[float(r[1]) for r in rows],
        peak=[int(r[2]) for r in rows],
    )


def _latest_window(
    conn: Connection, table: str, watermark_s: float, order: str
) -> tuple[str, str, bool] | None:
    """The window a panel of ``table`` shows: the latest complete one, else the newest open one.

    Parameters
    ----------
    conn : Connection
        The refresh's read transaction.
    table : str
        A table of windows (``window_start``, ``window_end``: ISO UTC text).
    watermark_s : float
        The watermark, epoch seconds: a window ending at or before it is complete.
    order : str
        ``ORDER BY`` clause that puts the latest window first (and uses the table's index).

    Returns
    -------
    tuple of (str, str, bool) or None
        Start, end, whether it is complete; None when ``table`` is empty.
    """
    select = f"SELECT window_start, window_end FROM {table}"
    latest = f"ORDER BY {order} LIMIT 1"
    row = conn.execute(f"{select} WHERE window_end <= ? {latest}", (iso(watermark_s),)).fetchone()
    if row is not None:
        return row[0], row[1], True
    row = conn.execute(f"{select} {latest}").fetchone()  # nothing complete yet: the newest open
    return None if row is None else (row[0], row[1], False)


def _trending(
    conn: Connection,
    state: dict[str, str],
    filters: Filters,
    watermark_s: float,
    top: int,
) -> Trending | None:
    latest = _latest_window(
        conn, "trending_pages", watermark_s, "window_end DESC, window_start DESC"
    )
    if latest is None:
        return None
    start, end, complete = latest
    window_s = _interval_s(state.get("trending_window")) or (epoch_s(end) - epoch_s(start))
    slide_s = _interval_s(state.get("trending_slide")) or window_s
    prefix = filters.url_prefix
    match = "AND substr(url_path, 1, ?) = ?" if prefix else ""
    match_params: tuple[Any, ...] = (len(prefix), prefix) if prefix else ()
    pages = conn.execute(
        "SELECT url_path, requests FROM trending_pages WHERE window_start = ? AND "
        f"window_end = ? {match} ORDER BY requests DESC, url_path LIMIT ?",
        (start, end, *match_params, top),
    ).fetchall()
    matching = conn.execute(
        f"SELECT COUNT(*) FROM trending_pages WHERE window_start = ? AND window_end = ? {match}",
        (start, end, *match_params),
    ).fetchone()[0]
    end_s = epoch_s(end)
    ends = [iso(end_s - k * slide_s) for k in range(TREND_WINDOWS - 1, -1, -1)]
    counts: dict[tuple[str, str], int] = {}
    if pages:
        marks = ",".join("?" * len(pages))
        for r in conn.execute(
            "SELECT window_end, url_path, SUM(requests) FROM trending_pages "
            f"WHERE window_end > ? AND window_end <= ? AND url_path IN ({marks}) "
            "GROUP BY window_end, url_path",
            (iso(end_s - TREND_WINDOWS * slide_s), end, *[p[0] for p in pages]),
        ):
            counts[(r[0], r[1])] = int(r[2])
    previous_end = iso(end_s - slide_s)
    return Trending(
        window_start=start,
        window_end=end,
        complete=complete,
        pages=[
            TrendingPage(
                rank=i + 1,
                url_path=p[0],
                requests=int(p[1]),
                previous=counts.get((previous_end, p[0]), 0),
                trend=[counts.get((e, p[0]), 0) for e in ends],
            )
            for i, p in enumerate(pages)
        ],
        trend_ends=ends,
        window_s=window_s,
        slide_s=slide_s,
        matching_pages=int(matching),
    )


#: Ledger key of the DStream edition's trending pages, and its progress rows' query
#: (``logstream.dstream.weblog``, not imported: that module imports Spark's analytics).
DSTREAM_LEDGER_QUERY = "dstream_trending"
DSTREAM_QUERY = "dstream"
#: How the DStream edition's progress rows carry the scheduling delay (in ``watermark``).
_SCHEDULING_DELAY = "scheduling_delay_ms="


def _dstream_totals(conn: Connection, last: Any) -> tuple[int, int, int] | None:
    """``(batches, requests, unparseable lines)`` of a store written by the DStream edition
    (``logstream dstream run``: its own ``dstream_*`` tables, no event time), else None."""
    if last is None or last[1] != DSTREAM_LEDGER_QUERY:  # an ingest batch comes first
        return None
    batches, requests = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(requests), 0) FROM dstream_batches"
    ).fetchone()
    newest = conn.execute(  # the accumulator's running total, as of the newest batch
        "SELECT unparseable_total FROM dstream_batches ORDER BY batch_time DESC LIMIT 1"
    ).fetchone()
    return int(batches), int(requests), int(newest[0]) if newest else 0


def _dstream_snapshot(
    conn: Connection,
    base: dict[str, Any],
    notes: list[str],
    last: Any,
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
    snap.health = _section(notes, "progress", lambda: _health(conn, last, state), None)
    return snap


def _last_committed(conn: Connection) -> Any:
    """The ledger row ``(rowid, query, batch_id, committed_at)`` of the newest committed
    ingest micro-batch, else the newest row of any query (a store filled by other writers);
    None when the ledger is empty."""
    sql = "SELECT rowid, query, batch_id, committed_at FROM ledger {} ORDER BY rowid DESC LIMIT 1"
    row = conn.execute(sql.format("WHERE query = ?"), (INGEST_QUERY,)).fetchone()
    return row if row is not None else conn.execute(sql.format("")).fetchone()


def _own_watermark(
    health: Health | None, last: Any, watermark: str | None, state: dict[str, str]
) -> None:
    """Give the ingest query's row of the progress table what its tiles show: logstream's
    event-time watermark (Spark reports none for the ingest query, or with deduplication
    the arrival-time watermark of that operator) and the state rows of the analytics
    snapshot added to Spark's. Only for the row of the tiles' micro-batch (``last``)."""
    if health is None or last is None or last[1] != INGEST_QUERY or health.progress_pending:
        return
    for row in health.queries:
        if row.get("query") == INGEST_QUERY and row.get("batch_id") == last[2]:
            row["watermark"] = watermark
            analytics = state.get("analytics_state_rows")
            if analytics is not None:
                row["state_rows"] = (row.get("state_rows") or 0) + int(analytics)


def _health(conn: Connection, last: Any, state: dict[str, str]) -> Health:
    """The tiles' micro-batch and the streaming queries' latest progress.

    The tiles describe one micro-batch, the newest in the ledger (``last``): its own
    progress row, not the newest row, which may be a later micro-batch's (one with no data,
    or one being committed) or an earlier one's (the progress of the newest is reported once
    it ends). Until that row is stored, the tiles of its progress are empty
    (:attr:`Health.progress_pending`).
    """
    health = Health()
    analytics_rows = state.get("analytics_state_rows")
    if last is not None:
        health.last_batch_at = last[3]
        health.last_batch_id = last[2]
    rows = [dict(r) for r in conn.execute("SELECT * FROM progress ORDER BY seq DESC LIMIT 600")]
    if not rows:
        health.progress_pending = last is not None and last[1] == INGEST_QUERY
        return health
    for r in rows:  # the DStream edition's scheduling delay, carried in the watermark
        mark = r.get("watermark")
        if isinstance(mark, str) and mark.startswith(_SCHEDULING_DELAY):
            delay = mark.removeprefix(_SCHEDULING_DELAY)
            r["watermark"] = None  # a DStream has none
            r["scheduling_delay_ms"] = int(delay) if delay.lstrip("-").isdigit() else None
    latest: dict[str, dict[str, Any]] = {}
    for r in rows:
        latest.setdefault(r.get("query") or "?", r)
    main = INGEST_QUERY if INGEST_QUERY in latest else rows[0].get("query") or "?"
    series = [r for r in rows if (r.get("query") or "?") == main][:HEALTH_BATCHES][::-1]
    newest: dict[str, Any] | None = latest[main]
    if last is not None and last[1] == main:
        newest = next(
            (r for r in rows if r.get("query") == main and r.get("batch_id") == last[2]), None
        )
        if newest is None:
            health.progress_pending = True
        else:
            latest[main] = newest  # the table's row of the query: the tiles' micro-batch
    health.queries = sorted(latest.values(), key=lambda r: r.get("query") or "")
    health.times = [str(r.get("timestamp") or "") for r in series]
    health.input_rate = [r.get("input_rows_per_s") for r in series]
    health.processing_rate = [r.get("processed_rows_per_s") for r in series]
    health.duration_ms = [r.get("batch_duration_ms") for r in series]
    if newest is None:
        return health
    health.input_rows_per_s = newest.get("input_rows_per_s")
    health.processed_rows_per_s = newest.get("processed_rows_per_s")
    health.batch_duration_ms = newest.get("batch_duration_ms")
    health.num_input_rows = newest.get("num_input_rows")
    states = [r.get("state_rows") for r in latest.values() if r.get("state_rows") is not None]
    memory = [
        r.get("state_memory_bytes")
        for r in latest.values()
        if r.get("state_memory_bytes") is not None
    ]
    if analytics_rows is not None:  # open panes, sessions and series of the last snapshot
        states.append(int(analytics_rows))
    health.state_rows = sum(states) if states else None
    health.state_memory_bytes = sum(memory) if memory else None
    return health


def _examples(
    conn: Connection, notes: list[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    def latest(table: str) -> list[dict[str, Any]]:
        sql = f"SELECT * FROM {table} ORDER BY seq DESC LIMIT {EXAMPLES_SHOWN}"
        return _section(notes, table, lambda: [dict(r) for r in conn.execute(sql)], [])

    return latest("late_examples"), latest("quarantine_examples")


def _alerts(conn: Connection, range_start: str | None) -> Alerts:
    """The newest alerts and the site-wide request alerts of the range (``alerts`` holds at
    most 500 rows: no index needed)."""
    cols = "window_start, window_end, series, metric, value, mean, std, z, direction"
    latest = conn.execute(
        f"SELECT {cols} FROM alerts ORDER BY window_start DESC, seq DESC LIMIT {ALERTS_SHOWN}"
    ).fetchall()
    kept = conn.execute("SELECT COUNT(*) FROM alerts").fetchone()[0]
    since, params = ("", ()) if range_start is None else ("AND window_start >= ?", (range_start,))
    marks = conn.execute(
        f"SELECT {cols} FROM alerts WHERE series = ? AND metric = 'requests' {since} "
        "ORDER BY window_start, seq",
        (SITE_SERIES, *params),
    ).fetchall()
    return Alerts(
        latest=[Alert(*r) for r in latest],
        kept=int(kept),
        site_requests=[Alert(*r) for r in marks],
    )


#: Flagged client windows listed.
BOTS_SHOWN = 15


def _bots(conn: Connection, range_start: str | None) -> Bots:
    """The newest flagged client windows and the totals of the range (``bot_scores`` holds
    at most 500 rows, ``bot_windows`` a row per client window)."""
    latest = conn.execute(
        "SELECT window_start, window_end, client_host, requests, bot_probability, "
        "distinct_pages, error_ratio, static_share, robots, model_version FROM bot_scores "
        f"ORDER BY window_start DESC, bot_probability DESC LIMIT {BOTS_SHOWN}"
    ).fetchall()
    since, params = ("", ()) if range_start is None else ("WHERE window_start >= ?", (range_start,))
    totals = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(clients), 0), COALESCE(SUM(bots), 0), "
        f"COALESCE(SUM(bot_requests), 0), COALESCE(SUM(requests), 0) FROM bot_windows {since}",
        params,
    ).fetchone()
    return Bots([BotScore(*r) for r in latest], *(int(v) for v in totals))


def _top_clients(
    conn: Connection, state: dict[str, str], watermark_s: float, top: int
) -> TopClients | None:
    """Top clients of the latest complete clients window, else of the newest open one."""
    latest = _latest_window(conn, "top_clients", watermark_s, "window_end DESC")
    if latest is None:
        return None
    start, end, complete = latest
    # ``window_start || ''``: keep the (window_end, requests DESC) index for the ranking
    where = "WHERE window_end = ? AND window_start || '' = ?"
    by_requests = conn.execute(
        f"SELECT client_host, requests, bytes FROM top_clients {where} "
        "ORDER BY requests DESC, client_host LIMIT ?",
        (end, start, top),
    ).fetchall()
    by_bytes = conn.execute(
        f"SELECT client_host, requests, bytes FROM top_clients {where} "
        "ORDER BY bytes DESC, client_host LIMIT ?",
        (end, start, top),
    ).fetchall()
    clients, requests, size = conn.execute(
        f"SELECT COUNT(*), SUM(requests), SUM(bytes) FROM top_clients {where}", (end, start)
    ).fetchone()
    return TopClients(
        window_start=start,
        window_end=end,
        complete=complete,
        window_s=_interval_s(state.get("clients_window")) or (epoch_s(end) - epoch_s(start)),
        by_requests=[
            TopClient(i + 1, r[0], int(r[1]), int(r[2])) for i, r in enumerate(by_requests)
        ],
        by_bytes=[TopClient(i + 1, r[0], int(r[1]), int(r[2])) for i, r in enumerate(by_bytes)],
        clients=int(clients),
        requests=int(requests or 0),
        bytes=int(size or 0),
    )


def _sessions(conn: Connection, state: dict[str, str], range_start: float | None) -> Sessions:
    """Session statistics of the windows overlapping the range (``window_end > range
    start``, read by ``window_start``) and the longest of the kept sessions."""
    window_s = _window_seconds(conn, state, "session_stats_window", "session_stats")
    where, params = "", ()
    if range_start is not None and window_s is not None:
        where = "WHERE window_start > ? AND window_end > ?"
        params = (iso(range_start - window_s), iso(range_start))
    rows = conn.execute(
        "SELECT window_start, window_end, sessions, bounces, pages, median_duration_s, "
        f"p95_duration_s FROM session_stats {where} ORDER BY window_start DESC "
        f"LIMIT {MAX_POINTS}",
        params,
    ).fetchall()
    longest = conn.execute(
        "SELECT client_host, user_agent, session_start, session_end, duration_s, requests, "
        "pages, bytes, entry_page, exit_page, bounce FROM sessions "
        f"ORDER BY duration_s DESC, session_end DESC, seq DESC LIMIT {LONGEST_SESSIONS}"
    ).fetchall()
    kept = conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
    return Sessions(
        window_s=window_s,
        windows=[
            SessionWindow(r[0], r[1], int(r[2]), int(r[3]), int(r[4]), r[5], r[6])
            for r in reversed(rows)
        ],
        longest=[Session(*r[:10], bounce=bool(r[10])) for r in longest],
        kept=int(kept),
    )
