"""The settings, names and totals of the micro-batch step.

:class:`AnalyticsSettings` holds the event-time settings, normalised to milliseconds, and
answers the questions every step asks of them: the watermark after an event time, whether a
watermark passes a window boundary, which pane views the chosen outputs need.
:class:`BotScorer` is a loaded bot model, :class:`IngestTotals` the running totals of the
progress line. The constants name the query, its outputs and the parts of its state.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F

from logstream.analytics.alerts import ALERT_STATE_SCHEMA, AlertConfig
from logstream.analytics.panes import DAILY_VIEW, PANE_SCHEMA, PANEL_VIEWS, PaneSpec
from logstream.analytics.sessions import SESSION_PARTS_SCHEMA
from logstream.ml.model import ModelInfo
from logstream.pipeline.config import EVENT_QUERIES, REFERENCE_QUERIES

if TYPE_CHECKING:  # pyspark.ml (and pandas) load only with a bot model
    from pyspark.ml import PipelineModel

__all__ = [
    "DIMENSION_OUTPUTS",
    "DRIVER_ROWS",
    "DRIVER_TEXT_BYTES",
    "INGEST_QUERY",
    "OUTPUTS",
    "SINGLE_PARTITION_ROWS",
    "STATE_PARTS",
    "STREAM_PANELS",
    "WRITERS",
    "AnalyticsSettings",
    "BotScorer",
    "IngestTotals",
    "iso",
    "iso_ms",
    "iso_ms_col",
    "local_driver_rows",
    "stream_panels",
]

#: The parts of the analytics state carried between micro-batches, and their schemas.
STATE_PARTS = {
    "panes": PANE_SCHEMA,
    "sessions": SESSION_PARTS_SCHEMA,
    "series": ALERT_STATE_SCHEMA,
}

#: Name of the streaming query (also its checkpoint folder and its key in the store's ledger).
INGEST_QUERY = "ingest"

#: The analytics outputs, in the order they are written; ``--queries`` chooses among them.
OUTPUTS = EVENT_QUERIES
#: The outputs of the dimension views (traffic per reference-data key), and their views.
DIMENSION_OUTPUTS = {
    "traffic_by_section": "sections",
    "traffic_by_agent": "agents",
    "traffic_by_network": "networks",
}

#: GoAccess's panels the stream counts (``traffic_by_panel``): the batch report's, each per
#: minute (``hosts`` too: the dashboard's last minutes read its top clients there; the
#: ``top_clients`` output ranks whole client windows). ``visitors`` is the daily view.
STREAM_PANELS = ("visitors", *PANEL_VIEWS)

#: The event fields a panel needs in the log format, beyond the request and the client.
_PANEL_FIELDS = {
    "os": "user_agent",
    "browsers": "user_agent",
    "referrers": "referrer",
    "referring_sites": "referrer",
    "remote_user": "user",
    "virtual_hosts": "virtual_host",
}


def stream_panels(disabled: Iterable[str], fields: Iterable[str]) -> tuple[str, ...]:
    """The panels of :data:`STREAM_PANELS` the stream counts: those not ``disabled``
    (``--no-panel``) whose fields the log format has.

    Examples
    --------
    >>> stream_panels(["geolocation"], ["client_host", "user", "status"])
    ('visitors', 'requests', 'static_requests', 'not_found', 'hosts', 'remote_user')
    """
    off, have = set(disabled), set(fields)
    return tuple(
        p for p in STREAM_PANELS if p not in off and _PANEL_FIELDS.get(p, "client_host") in have
    )


#: Default of :attr:`AnalyticsSettings.single_partition_rows`.
SINGLE_PARTITION_ROWS = 50_000
#: Default of :attr:`AnalyticsSettings.driver_rows`: a live micro-batch's bound, and the
#: bound wherever the driver is not the whole machine (a cluster, Spark Connect).
DRIVER_ROWS = 200_000
#: A micro-batch on the driver path peaks at about this many bytes a line on the driver
#: (Python's resident memory: 4.1 GB at most over a 284-day backfill in micro-batches of
#: 1,093,432 NASA lines; docs/performance.md).
DRIVER_BYTES_PER_LINE = 4_000
#: The most lines :func:`local_driver_rows` gives.
LOCAL_DRIVER_ROWS = 2_000_000
#: A micro-batch whose files hold more text than this (bytes; a compressed file counted ten
#: times) takes the Spark steps: its Arrow rows (3.4 times the text on the NASA log) stay
#: below Spark's ``spark.driver.maxResultSize`` (1 GiB by default).
DRIVER_TEXT_BYTES = 200_000_000


def local_driver_rows(memory_bytes: int | None = None) -> int:
    """:attr:`AnalyticsSettings.driver_rows` where one process is the driver and the
    executors (a local master) and the run computes outputs: the lines whose peak
    (:data:`DRIVER_BYTES_PER_LINE`) fits a quarter of the machine's memory, at least
    :data:`DRIVER_ROWS` and at most :data:`LOCAL_DRIVER_ROWS`. A backfill's micro-batch of
    that size is delivered on the driver in about half the Spark steps' time
    (docs/performance.md, *Scale*).

    Parameters
    ----------
    memory_bytes : int, optional
        The machine's physical memory (default: ``os.sysconf``'s).

    Examples
    --------
    >>> local_driver_rows(24 * 2**30)
    1610612
    >>> local_driver_rows(16 * 2**30)
    1073741
    >>> local_driver_rows(2**30), local_driver_rows(2**40)
    (200000, 2000000)
    """
    if memory_bytes is None:
        memory_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(DRIVER_ROWS, min(LOCAL_DRIVER_ROWS, memory_bytes // 4 // DRIVER_BYTES_PER_LINE))


def iso_ms(epoch_ms: int) -> str:
    """Format epoch milliseconds as ISO 8601 UTC text, to the second.

    Examples
    --------
    >>> iso_ms(0)
    '1970-01-01T00:00:00Z'
    """
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso(col: Column | str) -> Column:
    """Format a timestamp column as ISO 8601 UTC text (``1995-07-09T04:00:00Z``)."""
    c = F.col(col) if isinstance(col, str) else col
    return F.date_format(c, "yyyy-MM-dd'T'HH:mm:ss'Z'")


def iso_ms_col(col: str) -> Column:
    """Format a column of epoch milliseconds as ISO 8601 UTC text (see :func:`iso`)."""
    return iso(F.timestamp_millis(col))


@dataclass(frozen=True)
class AnalyticsSettings:
    """The event-time settings of the micro-batch step, normalised to milliseconds.

    Attributes
    ----------
    watermark_ms : int
        Delay after which an event is late and a window final.
    traffic_ms, trending_ms, trending_slide_ms, clients_ms, session_gap_ms : int
        Window lengths: traffic and visitors, trending pages (and its slide, the page pane),
        top clients, the session inactivity gap.
    session_stats_window : str
        Spark interval of the session statistics' tumbling window.
    retention_ms : int
        Trending and client windows ending this long before the newest event leave the store.
    top : int
        Clients kept per window and measure in ``top_clients/``.
    alerts : AlertConfig
    outputs : tuple of str
        The outputs computed (from :data:`OUTPUTS`).
    single_partition_rows : int
        A micro-batch of at most this many lines (on time, late and quarantined) is analysed
        in one partition, with no shuffle (:func:`~logstream.analytics.panes.gathered`): the
        time of a small micro-batch is the fixed cost of its stages, not work, and every
        shuffle is a stage (with adaptive execution a Spark job of its own, re-planned).
        Larger ones (a backfill) are spread over every core. 0: never.
    driver_rows : int
        A micro-batch of at most this many lines is delivered on the driver: parsed and
        classified in one Spark job, collected as Arrow, folded with Arrow
        (:mod:`logstream.pipeline.ingest.driver`, the live path). Larger ones go through the
        Spark steps. 0: never. It bounds what a micro-batch collects to the driver;
        ``logstream run`` sets :func:`local_driver_rows` on a local master when the run
        computes outputs (a backfill's micro-batches then take the driver path too).
    panels : tuple of str
        GoAccess's panels counted by ``traffic_by_panel`` (:data:`STREAM_PANELS`).
    static_extensions : tuple of str
        Extensions counted as static files besides GoAccess's (``--static-ext``).
    site_host : str, optional
        Your own site's host (``--site-host``): its referrals leave the referrer panels.
    protocol_required : bool
        The log format has a protocol: a request without a valid one is keyed ``-`` in
        GoAccess's panels (:func:`~logstream.analytics.requests.request_target`).
    """

    watermark_ms: int = 600_000
    traffic_ms: int = 60_000
    trending_ms: int = 300_000
    trending_slide_ms: int = 60_000
    clients_ms: int = 300_000
    session_gap_ms: int = 1_800_000
    session_stats_window: str = "3600 seconds"
    retention_ms: int = 2 * 3600 * 1000
    top: int = 10
    alerts: AlertConfig = field(default_factory=AlertConfig)
    outputs: tuple[str, ...] = tuple(q for q in OUTPUTS if REFERENCE_QUERIES.get(q) is None)
    single_partition_rows: int = SINGLE_PARTITION_ROWS
    driver_rows: int = DRIVER_ROWS
    panels: tuple[str, ...] = STREAM_PANELS
    static_extensions: tuple[str, ...] = ()
    site_host: str | None = None
    protocol_required: bool = False

    def watermark_at(self, max_event_ms: int | None) -> int | None:
        """The watermark (epoch ms) after events up to ``max_event_ms``: the newest event time
        minus the delay (Spark guide, "Handling Late Data and Watermarking"); None before any
        event.

        Examples
        --------
        >>> AnalyticsSettings(watermark_ms=600_000).watermark_at(3_600_000)
        3000000
        >>> AnalyticsSettings().watermark_at(None) is None
        True
        """
        return None if max_event_ms is None else max_event_ms - self.watermark_ms

    def boundary_ms(self) -> int:
        """The step (ms) of every event-time boundary a watermark can pass: each window and
        pane ends at a multiple of its slide (panes are aligned to the epoch,
        :func:`~logstream.analytics.panes.pane_start`), and each detector deadline at a whole
        minute (:mod:`logstream.analytics.alerts`).

        Examples
        --------
        >>> AnalyticsSettings().boundary_ms()
        60000
        >>> AnalyticsSettings(traffic_ms=30_000).boundary_ms()
        30000
        """
        return math.gcd(
            self.traffic_ms, self.trending_ms, self.trending_slide_ms, self.clients_ms, 60_000
        )

    def on_boundary(self, epoch_ms: int) -> int:
        """``epoch_ms`` down to a boundary (:meth:`boundary_ms`). A window's end ``e`` is on
        one, so ``e > t`` exactly when ``e > on_boundary(t)``: the live views' horizon is
        rounded with it, so their conditions, built once and kept while the horizon holds
        (:func:`logstream.pipeline.ingest.live.live_columns`), change once a minute. (The
        comparisons themselves keep their bounds out of the generated code:
        :mod:`logstream.analytics.bounds`.)

        Examples
        --------
        >>> AnalyticsSettings().on_boundary(179_999)
        120000
        """
        return epoch_ms - epoch_ms % self.boundary_ms()

    def closes_windows(self, final_until_ms: int | None, watermark_ms: int) -> bool:
        """Whether a watermark moving from ``final_until_ms`` (None: before any) to
        ``watermark_ms`` passes a boundary (:meth:`boundary_ms`): only then can a window become
        final or a detector deadline pass. Following a log in real time, most micro-batches
        pass none, and skip publishing final windows and scoring alerts.

        Examples
        --------
        >>> s = AnalyticsSettings()
        >>> s.closes_windows(120_000, 179_999), s.closes_windows(120_000, 180_000)
        (False, True)
        >>> s.closes_windows(None, 5)
        True
        """
        if final_until_ms is None:
            return True
        step = self.boundary_ms()
        return watermark_ms // step > final_until_ms // step

    def pane_spec(self) -> PaneSpec:
        """The pane views the chosen outputs need."""
        wanted = set(self.outputs)
        views = []
        if wanted & {"traffic_per_minute", "alerts"}:
            views.append("traffic")
        if wanted & {"trending_pages", "alerts"}:
            views.append("pages")
        if "unique_visitors" in wanted:
            views.append("visitors")
        if wanted & {"top_clients", "bot_scores"}:
            views.append("clients")
        if "bot_scores" in wanted:
            views.append("client_pages")
        views += [view for output, view in DIMENSION_OUTPUTS.items() if output in wanted]
        if "traffic_by_panel" in wanted:
            views += [view for view in PANEL_VIEWS if view in self.panels]
            if "visitors" in self.panels:
                views.append(DAILY_VIEW)
        return PaneSpec(
            traffic_ms=self.traffic_ms,
            page_pane_ms=self.trending_slide_ms,
            clients_ms=self.clients_ms,
            views=tuple(views),
        )


@dataclass(frozen=True)
class BotScorer:
    """A loaded bot model (:func:`logstream.ml.model.load_model`) and its metadata."""

    model: PipelineModel
    info: ModelInfo


@dataclass
class IngestTotals:
    """Running totals of this process's ingest stage (for the progress line)."""

    batches: int = 0
    events: int = 0
    late_events: int = 0
    quarantined: int = 0
    filtered: int = 0
    watermark_ms: int | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


#: Writes of one micro-batch run at once (its outputs, sessions, alerts: Spark jobs that read
#: the persisted panes and events, and write apart). A micro-batch's Spark jobs are small (a
#: task or two), and much of each is the driver's planning, code generation and output commit:
#: run together, one job's driver work overlaps another's tasks (the make-run-sized micro-batch
#: of 400 lines passing minutes, ``bench/profile_microbatch.py --chunk-lines 400 --chunks 20``,
#: 2 cores, a same-run pair, the writes in turn against at once: addBatch median
#: 3.27 s → 3.02 s).
WRITERS = 3
