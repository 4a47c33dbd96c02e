"""Panes: every window metric computed once, as partial aggregates that merge.

One aggregation folds the events of a micro-batch (or of a whole batch input) into the open
**panes** of every view (:func:`fold_panes`): each event is projected once per view it
belongs to (an ``explode`` of per-view rows, the "union of per-view projections") and one
``groupBy`` ``(view, key, pane)`` sums counts and bytes, with a HyperLogLog sketch for the
visitors. Panes are *mergeable*: the panes of two micro-batches with the same ``(view, key,
start_ms)`` add up (counts and sums) and union (sketches) into the pane of both. Longer and
sliding windows are sums of panes: a 5-minute window sliding every minute is the sum of five
1-minute panes (:func:`sliding_windows`), instead of counting every event into five windows —
the pane technique of Li et al., "No pane, no gain" (SIGMOD Record 34(1), 2005).

Views
-----
==============  ==================  =====================  ==================================
view            key                 pane length            measures
==============  ==================  =====================  ==================================
``traffic``     ``""`` (the site)   ``traffic_ms``         requests, bytes, status classes,
                                                           errors (≥ 400), server errors
``pages``       ``url_path`` of a   ``page_pane_ms`` (the  requests, server errors
                content page        trending slide)
``visitors``    ``""``              ``traffic_ms``         HLL sketch of ``client_host`` (its
                                                           counts are 0)
``clients``     ``client_host``     ``clients_ms``         requests, bytes, errors, static
                                                           assets, robots.txt, first and last
                                                           event time (the bot features)
``client_pages`` ``client_host``,   ``clients_ms``         requests: one pane per client and
                ``\n``, ``url_path``                        path, so the client's distinct
                                                           pages are its panes (exact)
``sections``    ``section``         ``traffic_ms``         as ``traffic``
``agents``      ``agent_class``     ``traffic_ms``         as ``traffic``
``networks``    ``organisation``    ``traffic_ms``         as ``traffic``
``os`` …        the panel's item    ``traffic_ms``         as ``traffic``
``visitors_     visitor (host,      a day (UTC)            as ``traffic``: one pane per
daily``         ``\n``, user agent)                        visitor and day, so a day's
                                                           visitors are its panes (exact)
==============  ==================  =====================  ==================================

The last three are the *dimension views*: their keys are columns added by reference data
(:class:`logstream.reference.Enricher`), which the events must carry when one of them is
computed; a null key (a client in no known network) counts as ``unknown``.

The *panel views* (:data:`PANEL_VIEWS`: ``requests``, ``static_requests``, ``not_found``,
``hosts``, ``os``,
``browsers``, ``virtual_hosts``, ``referrers``, ``referring_sites``, ``remote_user``,
``geolocation``) are GoAccess's panels per minute: their keys are the per-event columns of
:mod:`logstream.pipeline.ingest.panels` (a null key: the event is not in the panel, as a
request without a referrer is in no referrer panel). ``visitors_daily`` is GoAccess's
``visitors`` panel: one pane per visitor (client host, day and user agent, as GoAccess
defines one) and UTC day, so that a day's unique visitors are exact; a request answered
with a 4xx status counts in its day's hits and bytes under the key ``""`` but makes no
visitor (GoAccess's default).

Every pane row has :data:`PANE_SCHEMA`; measures a view does not have are 0 (or a null
sketch). Panes are aligned on the epoch (UTC), as ``pyspark.sql.functions.window`` aligns
windows, so a pane's windows are exactly Spark's.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from logstream.analytics.pages import ROBOTS_TXT, is_content_page, is_static_asset
from logstream.analytics.traffic import ERROR_STATUS_MIN, STATUS_CLASSES

__all__ = [
    "CLIENT_PAGE_SEP",
    "DAILY_VIEW",
    "DAY_MS",
    "DIMENSION_VIEWS",
    "MEASURES",
    "PANEL_VIEWS",
    "PANE_SCHEMA",
    "PANE_VIEWS",
    "SKETCH_VIEWS",
    "PaneSpec",
    "day_sums",
    "dimension_windows",
    "fold_panes",
    "gathered",
    "pane_start",
    "panel_windows",
    "sliding_windows",
    "traffic_windows",
]

#: The panel views (GoAccess's panels per minute) and the event column keying each
#: (:mod:`logstream.pipeline.ingest.panels`; null: the event is not in the panel).
PANEL_VIEWS = {
    "requests": "p_request",
    "static_requests": "p_static",
    "not_found": "p_not_found",
    "hosts": "p_host",
    "os": "p_os",
    "browsers": "p_browser",
    "virtual_hosts": "p_vhost",
    "referrers": "p_referrer",
    "referring_sites": "p_site",
    "remote_user": "p_user",
    "geolocation": "p_country",
}
#: GoAccess's ``visitors`` panel: one pane per visitor and UTC day, keyed by ``p_visitor``.
DAILY_VIEW = "visitors_daily"
#: A day, in milliseconds: the pane of :data:`DAILY_VIEW`.
DAY_MS = 86_400_000

#: The views, in the order of :data:`PANE_SCHEMA`'s ``view`` values.
PANE_VIEWS = (
    "traffic",
    "pages",
    "visitors",
    "clients",
    "client_pages",
    "sections",
    "agents",
    "networks",
    *PANEL_VIEWS,
    DAILY_VIEW,
)
#: The sketch views: one HLL sketch per pane of ``item`` distinct values, keyed by ``key``
#: (``None``: the whole site), in a small aggregation of their own.
SKETCH_VIEWS = {"visitors": (None, "client_host")}
#: Separates client and path in a ``client_pages`` key (no field of a log line holds one).
CLIENT_PAGE_SEP = "\n"
#: The dimension views and the enrichment column that keys each.
DIMENSION_VIEWS = {"sections": "section", "agents": "agent_class", "networks": "organisation"}

#: The additive measures of a pane, in schema order.
MEASURES = (
    "requests",
    "bytes",
    *(f"status_{c}" for c in STATUS_CLASSES),
    "errors",
    "server_errors",
    "static_requests",
    "robots_requests",
)

PANE_SCHEMA = StructType(
    [
        StructField("view", StringType(), False),
        StructField("key", StringType(), False),
        StructField("start_ms", LongType(), False),
        StructField("end_ms", LongType(), False),
        *(StructField(m, LongType(), False) for m in MEASURES),
        StructField("first_ms", LongType(), True),
        StructField("last_ms", LongType(), True),
        StructField("sketch", BinaryType(), True),
    ]
)

#: A response is a server error from this status on (the anomaly alerts' error rate).
SERVER_ERROR_STATUS_MIN = 500


@dataclass(frozen=True)
class PaneSpec:
    """Pane lengths of the views, in milliseconds, and which views are computed.

    Attributes
    ----------
    traffic_ms : int
        Traffic and visitor panes (the ``--window``, default 1 minute).
    page_pane_ms : int
        Content-page panes: the slide of the trending windows (default 1 minute).
    clients_ms : int
        Client windows (``--clients-window``, default 5 minutes): top clients are ranked per
        whole window, so the pane is the window.
    views : tuple of str
        The views computed (a subset of :data:`PANE_VIEWS`).
    """

    traffic_ms: int = 60_000
    page_pane_ms: int = 60_000
    clients_ms: int = 300_000
    views: tuple[str, ...] = PANE_VIEWS

    def length_ms(self, view: str) -> int:
        """The pane length of ``view``, ms."""
        if view == "pages":
            return self.page_pane_ms
        if view in ("clients", "client_pages"):
            return self.clients_ms
        if view == DAILY_VIEW:
            return DAY_MS
        return self.traffic_ms  # traffic, visitors, the dimension and panel views


def pane_start(t_ms: Column, length_ms: int) -> Column:
    """The start (epoch ms) of the pane of length ``length_ms`` holding ``t_ms`` (epoch ms),
    aligned on the epoch as ``pyspark.sql.functions.window`` aligns windows."""
    return t_ms - F.pmod(t_ms, F.lit(length_ms))


def fold_panes(
    open_panes: DataFrame | None,
    events: DataFrame | None,
    spec: PaneSpec,
    single_partition: bool = False,
    sketch_events: DataFrame | None = None,
) -> DataFrame:
    """Fold a micro-batch's events into the open panes, every view at once, with one
    aggregation (one shuffle).

    Parameters
    ----------
    open_panes : DataFrame, optional
        :data:`PANE_SCHEMA` rows: the panes carried from earlier micro-batches.
    events : DataFrame, optional
        Batch DataFrame of the micro-batch's events with ``event_time`` (timestamp),
        ``client_host``, ``url_path``, ``status`` (int), ``bytes_sent`` (bigint), and the
        key columns of the dimension views in ``spec`` (:data:`DIMENSION_VIEWS`), of its
        panel views (:data:`PANEL_VIEWS`) and ``p_visitor`` for :data:`DAILY_VIEW`.
    spec : PaneSpec
        Pane lengths and views.
    single_partition : bool
        Aggregate in one partition, with no shuffle (the inputs are gathered with
        ``coalesce(1)``; a single partition satisfies every grouping, so Spark plans no
        exchange): for a small micro-batch, whose time is the fixed cost of its stages, not
        work (see :class:`logstream.pipeline.ingest.AnalyticsSettings`). The result is the
        same, in one partition.
    sketch_events : DataFrame, optional
        The events the sketch views read (default ``events``): the same events before the
        joins that add the dimension and panel keys, which the sketches do not read. Spark
        keeps a left join whose columns are not read, so the sketch aggregation would
        compute those joins a second time (on the 31-day input in one micro-batch: the
        distinct hosts and their GeoIP lookup twice).

    Returns
    -------
    DataFrame
        :data:`PANE_SCHEMA` plus ``touched`` (boolean: the pane has events of ``events``), one
        row per ``(view, key, start_ms)`` of the views of ``spec`` found in either input;
        ``start_ms``/``end_ms`` are epoch milliseconds (end exclusive), measures are counts and
        bytes, ``sketch`` the HLL sketch (``hll_sketch_agg``, lgConfigK 12) of a sketch view
        (:data:`SKETCH_VIEWS`: visitors), null for the others; a sketch view
        has only its sketch (its measures are 0, its times null). ``static_requests``,
        ``robots_requests`` and ``first_ms``/``last_ms`` (the first and last event time in
        the pane, epoch ms) are computed only when ``spec`` has the ``client_pages`` view
        (the bot features); otherwise they are 0 and null, at no cost to the aggregation.

    Raises
    ------
    ValueError
        When ``spec`` has no view.

    Notes
    -----
    The counted views (traffic, pages, clients) are one ``groupBy`` of sums over the union of
    the open panes and one row per event and view (requests 1, bytes, a 0/1 per status
    class): a ``HashAggregate`` with generated code, partial sums before its one shuffle.
    The visitors' sketch is a second, small aggregation: ``hll_sketch_agg`` of the events'
    ``client_host`` per minute, then ``hll_union_agg`` with the open visitor panes. An HLL
    sketch is an object aggregate: kept in the main aggregation it made Spark plan an
    ``ObjectHashAggregate`` for every row of every view (sort-based after
    ``spark.sql.objectHashAggregate.sortBased.fallbackThreshold`` keys a task, 128 by
    default). On the 31-day input in one micro-batch (2 cores): 2 aggregations and 2
    shuffles took 5.7 s, this 3.6 s. The sketch aggregation reads the events as they are: a
    sketch counts a host once however often it is added, so the distinct ``(minute, host)``
    pairs it first read cost a shuffle for nothing (its stages 6.4 → 4.7 executor-s, one
    shuffle less, with logstream's fallback threshold of 16,384 keys:
    :data:`logstream.session.OBJECT_AGG_KEYS`).
    """
    views = [v for v in PANE_VIEWS if v in spec.views]
    if not views:
        raise ValueError("a PaneSpec needs at least one view")
    counted: DataFrame | None = None
    sketched: DataFrame | None = None
    if open_panes is not None:
        counted, sketched = _open_by_kind(open_panes.where(F.col("view").isin(*views)))
    if events is not None:
        counted_views = [v for v in views if v not in SKETCH_VIEWS]
        if counted_views:
            rows = _event_rows(events, spec, counted_views)
            counted = rows if counted is None else counted.unionByName(rows)
        source = events if sketch_events is None else sketch_events
        for view in (v for v in views if v in SKETCH_VIEWS):
            panes = _sketch_panes(source, view, spec.length_ms(view))
            sketched = panes if sketched is None else sketched.unionByName(panes)
    return _aggregate(counted, sketched, single_partition)


_KEYS = ("view", "key", "start_ms", "end_ms")
#: The columns of a pane after its keys: the measures, the first and last event time.
_VALUES = (*MEASURES, "first_ms", "last_ms")


def _open_by_kind(panes: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Open pane rows (``touched`` false) split into counted views and sketch panes."""
    columns, sketched = _open_columns()
    marked = panes.select(*columns)
    return marked.where(~sketched), marked.where(sketched)


# The column builders below are cached (functools.cache, keyed by their plain arguments): a
# Column is an unresolved expression of the JVM, the same for every micro-batch, and building
# one from Python costs several Py4J round trips (a function's wrapper, its arguments, its
# alias). Rebuilt every micro-batch, they were about 2,000 of a warm live micro-batch's 5,500
# round trips.


@functools.cache
def _open_columns() -> tuple[tuple[Column, ...], Column]:
    return (
        (*(F.col(c) for c in PANE_SCHEMA.fieldNames()), F.lit(False).alias("touched")),
        F.col("view").isin(*SKETCH_VIEWS),
    )


def gathered(frame: DataFrame, single_partition: bool) -> DataFrame:
    """``frame`` in one partition (``coalesce(1)``, no shuffle) when ``single_partition``:
    Spark then plans no exchange for a grouping, a window or a cogroup over it (a single
    partition satisfies every clustered distribution). A union of such frames has one
    partition per input: gather it again before grouping it."""
    return frame.coalesce(1) if single_partition else frame


@functools.cache
def _aggregate_columns() -> tuple[tuple[Column, ...], tuple[Column, ...], tuple[Column, ...]]:
    """The counted views' aggregates and projection, and the sketch views' aggregates."""
    sums = [F.sum(m).cast("bigint").alias(m) for m in MEASURES]
    times = [F.min("first_ms").alias("first_ms"), F.max("last_ms").alias("last_ms")]
    touched = F.max("touched").alias("touched")
    counted = (
        *(F.col(c) for c in (*_KEYS, *_VALUES)),
        F.lit(None).cast("binary").alias("sketch"),
        F.col("touched"),
    )
    sketched = (*sums, *times, F.hll_union_agg("sketch", True).alias("sketch"), touched)
    return (*sums, *times, touched), counted, sketched


def _aggregate(
    counted: DataFrame | None, sketched: DataFrame | None, single_partition: bool
) -> DataFrame:
    counted_aggs, counted_columns, sketched_aggs = _aggregate_columns()
    frames = []
    if counted is not None:
        frames.append(
            gathered(counted, single_partition)
            .groupBy(*_KEYS)
            .agg(*counted_aggs)
            .select(*counted_columns)
        )
    if sketched is not None:
        frames.append(gathered(sketched, single_partition).groupBy(*_KEYS).agg(*sketched_aggs))
    out = frames[0]
    for frame in frames[1:]:
        out = gathered(out.unionByName(frame), single_partition)
    return out


def _event_rows(events: DataFrame, spec: PaneSpec, views: list[str]) -> DataFrame:
    """One row per event and counted view it belongs to: its pane and its measures."""
    exploded, present, measured = _event_columns(spec, tuple(views))
    return events.select(*exploded).where(present).select(*measured)


@functools.cache
def _event_columns(
    spec: PaneSpec, views: tuple[str, ...]
) -> tuple[tuple[Column, ...], Column, tuple[Column, ...]]:
    """:func:`_event_rows`' projections: the per-view rows exploded, the condition that keeps
    the views an event is in, the measures of a row."""
    t_ms = F.unix_millis("event_time")
    rows = []
    for view in views:
        key: Column = F.lit("")
        if view == "pages":
            key = F.col("url_path")
        elif view == "clients":
            key = F.col("client_host")
        elif view == "client_pages":
            key = F.concat_ws(CLIENT_PAGE_SEP, "client_host", "url_path")
        elif view in DIMENSION_VIEWS:
            key = F.coalesce(F.col(DIMENSION_VIEWS[view]), F.lit("unknown"))
        elif view in PANEL_VIEWS:
            key = F.col(PANEL_VIEWS[view])
        elif view == DAILY_VIEW:
            key = F.col("p_visitor")
        start = pane_start(t_ms, spec.length_ms(view))
        row = F.struct(
            F.lit(view).alias("view"),
            key.alias("key"),
            start.alias("start_ms"),
            (start + F.lit(spec.length_ms(view))).alias("end_ms"),
        )
        if view == "pages":
            row = F.when(is_content_page(), row)
        elif view == "client_pages":  # a request without a path is no page
            row = F.when(F.col("url_path").isNotNull(), row)
        elif view in PANEL_VIEWS:  # a null item: the event is not in the panel
            row = F.when(key.isNotNull(), row)
        rows.append(row)
    status = F.col("status")
    one = F.lit(1).cast("bigint")
    zero = F.lit(0).cast("bigint")

    def flag(condition: Column) -> Column:
        return F.when(condition, one).otherwise(zero)

    # the bot features' measures only when they are computed (the client_pages view): the
    # others get constants; the per-event flags once per event, before the explode
    detail = "client_pages" in spec.views
    no_time = F.lit(None).cast("bigint")
    # explode, then drop the views an event is not in: a filter inside the array (a
    # higher-order function) has no generated code, and Spark then evaluates the whole
    # projection row by row in interpreted mode (fold_panes on the 31-day input, warm: 4.6 s
    # with it, see bench/profile_pipeline.py)
    return (
        (
            F.explode(F.array(*rows)).alias("p"),
            F.col("status"),
            F.col("bytes_sent"),
            (t_ms if detail else no_time).alias("t_ms"),
            (flag(is_static_asset()) if detail else zero).alias("static_requests"),
            (flag(F.col("url_path") == ROBOTS_TXT) if detail else zero).alias("robots_requests"),
        ),
        F.col("p").isNotNull(),
        (
            *(F.col(f"p.{k}").alias(k) for k in _KEYS),
            one.alias("requests"),
            F.coalesce(F.col("bytes_sent"), zero).alias("bytes"),
            *(
                flag(F.floor(status / 100) == int(c[0])).alias(f"status_{c}")
                for c in STATUS_CLASSES
            ),
            flag(status >= ERROR_STATUS_MIN).alias("errors"),
            flag(status >= SERVER_ERROR_STATUS_MIN).alias("server_errors"),
            F.col("static_requests"),
            F.col("robots_requests"),
            F.col("t_ms").alias("first_ms"),
            F.col("t_ms").alias("last_ms"),
            F.lit(None).cast("binary").alias("sketch"),
            F.lit(True).alias("touched"),
        ),
    )


def _sketch_panes(events: DataFrame, view: str, length_ms: int) -> DataFrame:
    """The panes of a sketch view (:data:`SKETCH_VIEWS`) of ``events`` (``touched``): an HLL
    sketch per pane and key of the distinct values of its item column."""
    keyed, sketch, pane = _sketch_columns(view, length_ms)
    return events.select(*keyed).groupBy("start_ms", "key").agg(sketch).select(*pane)


@functools.cache
def _sketch_columns(view: str, length_ms: int) -> tuple[tuple[Column, ...], Column, tuple]:
    """:func:`_sketch_panes`' projection, aggregate and pane row."""
    key_col, item = SKETCH_VIEWS[view]
    key = F.col(key_col) if key_col else F.lit("")
    zero = F.lit(0).cast("bigint")
    no_time = F.lit(None).cast("bigint")
    keyed = (
        pane_start(F.unix_millis("event_time"), length_ms).alias("start_ms"),
        key.alias("key"),
        F.col(item),
    )
    pane = (
        F.lit(view).alias("view"),
        F.col("key"),
        F.col("start_ms"),
        (F.col("start_ms") + F.lit(length_ms)).alias("end_ms"),
        *[zero.alias(m) for m in MEASURES],
        no_time.alias("first_ms"),
        no_time.alias("last_ms"),
        F.col("sketch"),
        F.lit(True).alias("touched"),
    )
    return keyed, F.hll_sketch_agg(item).alias("sketch"), pane


def traffic_windows(panes: DataFrame) -> DataFrame:
    """Traffic panes as rows of :func:`logstream.analytics.traffic_per_window`'s schema.

    Parameters
    ----------
    panes : DataFrame
        :data:`PANE_SCHEMA` rows (any views; only ``traffic`` is kept).

    Returns
    -------
    DataFrame
        ``window_start``, ``window_end`` (timestamp), ``requests``, ``bytes``,
        ``status_1xx`` … ``status_5xx``, ``errors`` (bigint), ``error_rate`` (double).
    """
    return _window_rows(panes, "traffic", (F.col("errors") / F.col("requests")).alias("error_rate"))


def _window_rows(panes: DataFrame, view: str, *extra: Column) -> DataFrame:
    """The panes of ``view`` with window bounds as timestamps and the traffic measures; the
    key column first for a dimension view, ``extra`` columns last."""
    key = [F.col("key").alias(DIMENSION_VIEWS[view])] if view in DIMENSION_VIEWS else []
    return panes.where(F.col("view") == view).select(
        F.timestamp_millis("start_ms").alias("window_start"),
        F.timestamp_millis("end_ms").alias("window_end"),
        *key,
        "requests",
        "bytes",
        *[f"status_{c}" for c in STATUS_CLASSES],
        "errors",
        *extra,
    )


def dimension_windows(panes: DataFrame, view: str) -> DataFrame:
    """Panes of a dimension view as traffic rows per window and key.

    Parameters
    ----------
    panes : DataFrame
        :data:`PANE_SCHEMA` rows (any views; only ``view`` is kept).
    view : str
        A key of :data:`DIMENSION_VIEWS`.

    Returns
    -------
    DataFrame
        ``window_start``, ``window_end`` (timestamp), the view's key column (``section``,
        ``agent_class`` or ``organisation``: string), ``requests``, ``bytes``,
        ``status_1xx`` … ``status_5xx``, ``errors`` (bigint; errors are statuses ≥ 400).
    """
    return _window_rows(panes, view)


#: The columns of a ``traffic_by_panel`` row after its keys (:func:`panel_windows`).
_PANEL_MEASURES = ("requests", "bytes", *(f"status_{c}" for c in STATUS_CLASSES), "errors")


def panel_windows(panes: DataFrame) -> DataFrame:
    """GoAccess's panels as window rows: the panes of the panel views per minute and item,
    and :data:`DAILY_VIEW`'s visitor panes summed per day.

    Parameters
    ----------
    panes : DataFrame
        :data:`PANE_SCHEMA` rows (any views; the panel views and the daily view are kept).

    Returns
    -------
    DataFrame
        ``panel`` (a key of :data:`PANEL_VIEWS`, or ``visitors``), ``key`` (the item; for
        ``visitors`` the day, ``yyyy-MM-dd``), ``window_start``, ``window_end`` (timestamp: a
        traffic window, or the UTC day), ``requests``, ``bytes``, ``status_1xx`` …
        ``status_5xx``, ``errors`` (bigint), ``visitors`` (bigint: the day's unique visitors,
        exact; null for the other panels).
    """
    items, sums, day_row = _panel_columns()
    per_day = (
        panes.where(F.col("view") == DAILY_VIEW)
        .groupBy("start_ms", "end_ms")
        .agg(*sums)
        .select(*day_row)
    )
    return panes.where(F.col("view").isin(*PANEL_VIEWS)).select(*items).unionByName(per_day)


@functools.cache
def day_sums() -> tuple[tuple[Column, ...], Column]:
    """The aggregates that sum a day's :data:`DAILY_VIEW` panes, grouped by ``start_ms``: the
    traffic measures of ``traffic_by_panel`` and ``visitors`` (the panes but the key ``""``,
    which holds the day's 4xx requests: no visitor); and the day's key (``yyyy-MM-dd``)."""
    sums = (
        *(F.sum(m).cast("bigint").alias(m) for m in _PANEL_MEASURES),
        F.count_if(F.col("key") != "").cast("bigint").alias("visitors"),
    )
    return sums, F.date_format(F.timestamp_millis("start_ms"), "yyyy-MM-dd")


@functools.cache
def _panel_columns() -> tuple:
    """:func:`panel_windows`' projections and aggregates."""
    bounds = (
        F.timestamp_millis("start_ms").alias("window_start"),
        F.timestamp_millis("end_ms").alias("window_end"),
    )
    items = (
        F.col("view").alias("panel"),
        F.col("key"),
        *bounds,
        *(F.col(m) for m in _PANEL_MEASURES),
        F.lit(None).cast("bigint").alias("visitors"),
    )
    sums, day = day_sums()
    day_row = (
        F.lit("visitors").alias("panel"),
        day.alias("key"),
        *bounds,
        *(F.col(m) for m in _PANEL_MEASURES),
        F.col("visitors"),
    )
    return items, sums, day_row


def sliding_windows(panes: DataFrame, view: str, window_ms: int, slide_ms: int) -> DataFrame:
    """Sum the panes of ``view`` into sliding windows (each pane is ``slide_ms`` long).

    A window ``[s, s + window_ms)`` is the sum of its ``window_ms / slide_ms`` panes; a pane
    starting at ``p`` belongs to the windows starting at ``p − k·slide_ms``, k = 0 … n−1.

    Parameters
    ----------
    panes : DataFrame
        :data:`PANE_SCHEMA` rows.
    view : str
        The view summed (``pages``).
    window_ms, slide_ms : int
        Window length and slide, milliseconds; the slide is the pane length and divides the
        window.

    Returns
    -------
    DataFrame
        ``key``, ``start_ms``, ``end_ms`` (bigint, the window), ``requests``,
        ``server_errors`` (bigint), ``panes`` (int: panes of the window present in the
        input), ``touched`` (boolean: one of them is, when the input has that column of
        :func:`fold_panes`).

    Raises
    ------
    ValueError
        When the slide does not divide the window.
    """
    if window_ms % slide_ms:
        raise ValueError(f"the slide ({slide_ms} ms) must divide the window ({window_ms} ms)")
    of_view, columns, keys, sums, window = _sliding_columns(
        view, window_ms, slide_ms, "touched" in panes.columns
    )
    return panes.where(of_view).select(*columns).groupBy(*keys).agg(*sums).select(*window)


@functools.cache
def _sliding_columns(view: str, window_ms: int, slide_ms: int, touched_column: bool) -> tuple:
    """:func:`sliding_windows`' condition, projection, grouping, aggregates and window row."""
    n = window_ms // slide_ms
    offsets = F.array(*[F.lit(k * slide_ms) for k in range(n)])
    touched = F.col("touched") if touched_column else F.lit(False)
    return (
        F.col("view") == view,
        (
            F.col("key"),
            F.col("requests"),
            F.col("server_errors"),
            F.col("start_ms"),
            touched.alias("touched"),
            F.explode(offsets).alias("k"),
        ),
        (F.col("key"), (F.col("start_ms") - F.col("k")).alias("w")),
        (
            F.sum("requests").cast("bigint").alias("requests"),
            F.sum("server_errors").cast("bigint").alias("server_errors"),
            F.count("*").cast("int").alias("panes"),
            F.max("touched").alias("touched"),
        ),
        (
            F.col("key"),
            F.col("w").alias("start_ms"),
            (F.col("w") + F.lit(window_ms)).alias("end_ms"),
            *(F.col(c) for c in ("requests", "server_errors", "panes", "touched")),
        ),
    )


def views_in(spec_views: Iterable[str]) -> tuple[str, ...]:
    """The known views of ``spec_views``, in :data:`PANE_VIEWS` order."""
    chosen = set(spec_views)
    return tuple(v for v in PANE_VIEWS if v in chosen)
