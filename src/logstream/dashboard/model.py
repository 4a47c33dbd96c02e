"""What one refresh of the dashboard returns: the page's controls, one dataclass per panel
and the :class:`Snapshot` that holds them, with the constants that bound what is shown.

The rows the store itself holds (:class:`Alert`, :class:`BotScore`, :class:`Session`,
:class:`SessionWindow`) are :mod:`logstream.serving.rows`'s, re-exported here. Times are
ISO 8601 UTC text as in the store (``1995-07-09T04:00:00Z``); nothing here reads the store.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from logstream.errors import ConfigError
from logstream.serving import store_file
from logstream.serving.reader import INGEST_QUERY
from logstream.serving.rows import Alert, BotScore, Session, SessionWindow

__all__ = [
    "ALERTS_SHOWN",
    "BOTS_SHOWN",
    "DEFAULT_RANGE",
    "DEFAULT_TOP",
    "DIMENSION_SERIES",
    "EXAMPLES_SHOWN",
    "HEALTH_BATCHES",
    "INGEST_QUERY",
    "LONGEST_SESSIONS",
    "MAX_POINTS",
    "SITE_SERIES",
    "STALE_AFTER_S",
    "STATUS_CLASSES",
    "TIME_RANGES",
    "TREND_WINDOWS",
    "Alert",
    "Alerts",
    "BotScore",
    "Bots",
    "DimensionTraffic",
    "Filters",
    "Health",
    "PanelItems",
    "Session",
    "SessionWindow",
    "Sessions",
    "Snapshot",
    "State",
    "TopClient",
    "TopClients",
    "Traffic",
    "Trending",
    "TrendingPage",
    "Visitors",
    "ago",
    "epoch_s",
    "format_lacks",
    "interval_s",
    "iso",
    "not_computed",
    "offset_seconds",
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

#: Flagged client windows listed.
BOTS_SHOWN = 15
#: Series drawn for a dimension with no key selected (the top keys by requests).
DIMENSION_SERIES = 8

State = Literal["missing", "waiting", "unreadable", "ok"]


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


def span_text(seconds: float) -> str:
    """A span rounded to the minute, in hours and minutes.

    Examples
    --------
    >>> span_text(7200), span_text(7260), span_text(2400)
    ('2 h', '2 h 1 min', '40 min')
    """
    minutes = round(seconds / 60)
    hours, rest = divmod(minutes, 60)
    if not hours:
        return f"{minutes} min"
    return f"{hours} h" if not rest else f"{hours} h {rest} min"


def interval_s(text: str | None) -> float | None:
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


def ago(seconds: float) -> str:
    """A wall-clock duration as the page writes it (seconds, minutes, hours or days).

    Examples
    --------
    >>> ago(30), ago(600), ago(7200), ago(3 * 86400)
    ('30 s', '10 min', '2.0 h', '3.0 days')
    """
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


# -- what a refresh returns --------------------------------------------------------------------


#: The longest text of a control the page sends (a URL prefix, a section).
MAX_CONTROL_CHARS = 1_000
#: The most sections or agent classes a refresh draws.
MAX_CHOSEN = 100


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
    zone : {"log", "utc"}
        The times shown: in the offset the log is written in (the default, as the batch
        report's), or in UTC. A store that does not record the log's offset shows UTC.
    """

    time_range: str = DEFAULT_RANGE
    url_prefix: str = ""
    status_classes: tuple[str, ...] = STATUS_CLASSES
    sections: tuple[str, ...] = ()
    agent_classes: tuple[str, ...] = ()
    zone: str = "log"

    @classmethod
    def build(
        cls,
        time_range: str | None = None,
        url_prefix: str | None = None,
        status_classes: list[str] | tuple[str, ...] | None = None,
        sections: list[str] | tuple[str, ...] | None = None,
        agent_classes: list[str] | tuple[str, ...] | None = None,
        zone: str | None = None,
    ) -> Filters:
        """Clean values from the browser (a request anyone can send): unknown range →
        default, prefix stripped and cut at :data:`MAX_CONTROL_CHARS`, classes kept in
        :data:`STATUS_CLASSES` order (None = all, an empty list = none); sections and agent
        classes sorted, strings only, at most :data:`MAX_CHOSEN` (None or empty = all)."""
        rng = time_range if time_range in TIME_RANGES else DEFAULT_RANGE
        chosen = STATUS_CLASSES if status_classes is None else tuple(status_classes)

        def keys(values: Any) -> tuple[str, ...]:
            kept = {v[:MAX_CONTROL_CHARS] for v in values or () if isinstance(v, str)}
            return tuple(sorted(kept)[:MAX_CHOSEN])

        return cls(
            time_range=rng,  # type: ignore[arg-type]
            url_prefix=str(url_prefix or "").strip()[:MAX_CONTROL_CHARS],
            status_classes=tuple(c for c in STATUS_CLASSES if c in chosen),
            sections=keys(sections),
            agent_classes=keys(agent_classes),
            zone="utc" if zone == "utc" else "log",
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
    #: the first window of the view in the range (ISO UTC): the store keeps the reference
    #: views for ``--store-retention``, so a longer range begins before them
    covered_from: str | None = None
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
class PanelItems:
    """GoAccess's panels in the range: each panel's top items by hits (``traffic_by_panel``,
    the store's ``traffic_by_dimension`` rows of the panel views) and its visitors per day
    (``daily_visitors``)."""

    #: panel → [(item, hits, bytes)], most hits first, at most ``top`` items
    items: dict[str, list[tuple[str, int, int]]] = field(default_factory=dict)
    #: panel → (hits, items) of every item in the range
    totals: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: (day, hits, unique visitors, bytes), oldest first: the days overlapping the range
    days: list[tuple[str, int, int, int]] = field(default_factory=list)
    #: the first window of the panels' items in the range (ISO UTC; kept for the retention)
    covered_from: str | None = None


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
class Alerts:
    """The alert list and the site-wide request alerts of the selected range."""

    latest: list[Alert] = field(default_factory=list)  #: newest minute first
    kept: int = 0  #: alerts in the store (it keeps the latest 500)
    site_requests: list[Alert] = field(default_factory=list)  #: in the range, oldest first


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
    #: the newest committed ingest micro-batch the snapshot shows (None: not an ingest store)
    batch: int | None = None
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
    panels: PanelItems | None = None  #: GoAccess's panels (None: no panel row in the range)
    dedup: bool | None = None  #: the ingest query drops duplicate lines (None: not recorded)
    #: the queries over ``events/`` the pipeline runs (``--queries``; None: not recorded)
    queries: frozenset[str] | None = None
    source_label: str | None = None  #: what the demo replays (``pipeline_state``)
    synthetic: bool = False  #: the data is generated, not real logs
    #: ``dstream`` for a store of the DStream edition (no event time), else ``structured``
    edition: str = "structured"
    #: the offset the log is written in (``-04:00``; ``pipeline_state``), None when unknown
    log_offset: str | None = None
    #: the log format the pipeline parses (``pipeline_state``), None when unknown
    log_format: str | None = None
    #: how long the store keeps the reference and panel views (``--store-retention``)
    store_retention: str | None = None
    #: the first traffic window in the range (ISO UTC): where the range's data begins
    traffic_from: str | None = None
    #: what the follow source could not read (``pipeline_state``: :data:`FOLLOW_LOSS_KEYS`);
    #: empty when the store records none (another source, or an older run)
    follow_losses: dict[str, int] = field(default_factory=dict)
    #: the Kafka source's latest offsets and lag per partition, rows/s and the messages it
    #: could not read (``pipeline_state``: :func:`logstream.monitoring.kafka.kafka_progress`
    #: and ``lost``, a running total); None without a Kafka source
    kafka: dict[str, Any] | None = None

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

    @property
    def zone_offset_s(self) -> int:
        """Seconds east of UTC of the times shown (:attr:`Filters.zone`): the log's offset,
        or 0 for UTC or a store that does not record it."""
        if self.filters.zone == "utc" or not self.log_offset:
            return 0
        return offset_seconds(self.log_offset)

    @property
    def zone_name(self) -> str:
        """The zone of the times shown: ``UTC`` or the log's offset (``-04:00``)."""
        return self.log_offset if self.filters.zone == "log" and self.log_offset else "UTC"

    def shown(self, text: str | None) -> str | None:
        """An ISO UTC time of the store as the page shows it, in :attr:`zone_name`:
        ``1995-07-09T04:00:00Z`` → ``1995-07-09 00:00:00`` at ``-04:00`` (what plotly.js
        parses as a date; fractions of a second kept)."""
        if not text:
            return None
        base = text.replace("T", " ").removesuffix("Z")
        if not self.zone_offset_s:
            return base
        whole, _, fraction = base.partition(".")
        at = datetime.fromisoformat(whole).replace(tzinfo=UTC).timestamp() + self.zone_offset_s
        local = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S")
        return f"{local}.{fraction}" if fraction else local

    def covered_span(self, covered_from: str | None) -> str | None:
        """How much of the range a view covers when it begins after the range's data does
        (``2 h``, rounded to the minute); None when it covers the range (within a minute
        or a traffic bucket)."""
        if covered_from is None or self.newest_event is None:
            return None
        begins = self.range_start or self.traffic_from
        if begins is None:
            return None
        bucket = self.traffic.bucket_s if self.traffic is not None else 60
        data_from = epoch_s(self.traffic_from) if self.traffic_from else epoch_s(begins)
        start = max(epoch_s(begins), data_from)
        if epoch_s(covered_from) - start <= max(60, bucket):
            return None
        # the end of what the charts draw: the newest ledgered event, or the windows written
        # ahead of the ledger (drawn all the same)
        end = epoch_s(self.newest_event)
        if self.traffic is not None and self.traffic.times:
            end = max(end, epoch_s(self.traffic.times[-1]) + bucket)
        if end <= epoch_s(covered_from):
            return None
        return span_text(end - epoch_s(covered_from))

    def coverage_note(self, covered_from: str | None, what: str = "the range") -> str:
        """``covers the last 2 h of the range (the store keeps it for --store-retention 2
        hours)``, or ``""`` when the view covers the range."""
        span = self.covered_span(covered_from)
        if span is None:
            return ""
        retention = interval_s(self.store_retention)
        kept = (
            f" (the store keeps it for --store-retention {span_text(retention)})"
            if retention
            else " (the store keeps it for --store-retention)"
        )
        return f"covers the last {span} of {what}{kept}"

    def not_computed(self, output: str) -> str:
        """Why the pipeline writing this store has no ``output`` (:func:`not_computed`)."""
        return not_computed(output, self.log_format)

    def query_off(self, name: str) -> bool:
        """Whether the pipeline writing this store runs without query ``name`` (``--queries``)."""
        return self.queries is not None and name not in self.queries


def not_computed(output: str, log_format: str | None) -> str:
    """Why a pipeline that parses ``log_format`` has no ``output``: a format without user
    agents has no ``traffic_by_agent`` (every event would be ``unknown``), else ``--queries``
    left it out.

    Examples
    --------
    >>> not_computed("traffic_by_agent", "common")
    'Not computed: the log format common has no user agent.'
    >>> not_computed("traffic_by_agent", "combined")
    'Not computed: the pipeline runs without traffic_by_agent (--queries).'
    """
    if output == "traffic_by_agent" and format_lacks(log_format, "user_agent"):
        return f"Not computed: the log format {log_format} has no user agent."
    return f"Not computed: the pipeline runs without {output} (--queries)."


def format_lacks(log_format: str | None, name: str) -> bool:
    """Whether the log format ``log_format`` (a name or a LogFormat string) has no field
    ``name``; False when the format is unknown or cannot be compiled.

    Examples
    --------
    >>> format_lacks("common", "referrer"), format_lacks("combined", "referrer")
    (True, False)
    """
    if not log_format:
        return False
    from logstream.errors import LogFormatError
    from logstream.parsing.logformat import compile_format

    try:
        return name not in compile_format(log_format).fields
    except LogFormatError:
        return False


def offset_seconds(offset: str) -> int:
    """Seconds east of UTC of an offset written ``±HH:MM``.

    Examples
    --------
    >>> offset_seconds("-04:00"), offset_seconds("+05:30")
    (-14400, 19800)
    """
    sign = -1 if offset.startswith("-") else 1
    hours, minutes = offset[1:].split(":")
    return sign * (int(hours) * 3600 + int(minutes) * 60)
