"""Panes: every window metric computed once, as partial aggregates that merge.

One pass over the events of a micro-batch (or of a whole batch input) produces the **panes** of
every view in one aggregation: each event is projected once per view it belongs to (an
``explode`` of per-view rows, the "union of per-view projections") and one ``groupBy``
``(view, key, pane)`` computes counts, sums and a HyperLogLog sketch. Panes are *mergeable*:
the panes of two micro-batches with the same ``(view, key, start_ms)`` add up (counts and sums)
and union (sketches) into the pane of both (:func:`merge_panes`). Longer and sliding windows are
sums of panes: a 5-minute window sliding every minute is the sum of five 1-minute panes
(:func:`sliding_windows`), instead of counting every event into five windows — the pane
technique of Li et al., "No pane, no gain" (SIGMOD Record 34(1), 2005).

Views
-----
==============  ==================  =====================  ==================================
view            key                 pane length            measures
==============  ==================  =====================  ==================================
``traffic``     ``""`` (the site)   ``traffic_ms``         requests, bytes, status classes,
                                                           errors (≥ 400), server errors
``pages``       ``url_path`` of a   ``page_pane_ms`` (the  requests, server errors
                content page        trending slide)
``visitors``    ``""``              ``traffic_ms``         HLL sketch of ``client_host``
``clients``     ``client_host``     ``clients_ms``         requests, bytes
==============  ==================  =====================  ==================================

Every pane row has :data:`PANE_SCHEMA`; measures a view does not have are 0 (or a null
sketch). Panes are aligned on the epoch (UTC), as ``pyspark.sql.functions.window`` aligns
windows, so a pane's windows are exactly Spark's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from logstream.analytics.pages import is_content_page
from logstream.analytics.traffic import ERROR_STATUS_MIN, STATUS_CLASSES

__all__ = [
    "MEASURES",
    "PANE_SCHEMA",
    "PANE_VIEWS",
    "PaneSpec",
    "merge_panes",
    "partial_panes",
    "sliding_windows",
    "traffic_windows",
]

#: The views, in the order of :data:`PANE_SCHEMA`'s ``view`` values.
PANE_VIEWS = ("traffic", "pages", "visitors", "clients")

#: The additive measures of a pane, in schema order.
MEASURES = (
    "requests",
    "bytes",
    *(f"status_{c}" for c in STATUS_CLASSES),
    "errors",
    "server_errors",
)

PANE_SCHEMA = StructType(
    [
        StructField("view", StringType(), False),
        StructField("key", StringType(), False),
        StructField("start_ms", LongType(), False),
        StructField("end_ms", LongType(), False),
        *(StructField(m, LongType(), False) for m in MEASURES),
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
        return {
            "traffic": self.traffic_ms,
            "pages": self.page_pane_ms,
            "visitors": self.traffic_ms,
            "clients": self.clients_ms,
        }[view]


def _start(t_ms: Column, length_ms: int) -> Column:
    return t_ms - F.pmod(t_ms, F.lit(length_ms))


def partial_panes(events: DataFrame, spec: PaneSpec) -> DataFrame:
    """The panes of ``events``, every view in one aggregation.

    Parameters
    ----------
    events : DataFrame
        Batch DataFrame (inside ``foreachBatch`` for a stream) with ``event_time``
        (timestamp), ``client_host``, ``url_path``, ``status`` (int), ``bytes_sent`` (bigint).
    spec : PaneSpec
        Pane lengths and views.

    Returns
    -------
    DataFrame
        :data:`PANE_SCHEMA`: one row per ``(view, key, start_ms)`` with at least one event;
        ``start_ms``/``end_ms`` are epoch milliseconds (end exclusive), measures are counts
        (requests, status classes, errors) and bytes; ``sketch`` is the HLL sketch
        (``hll_sketch_agg``, lgConfigK 12) of the visitors view, null for the others.
    """
    t_ms = F.unix_millis("event_time")
    rows = []
    for view in spec.views:
        key: Column = F.lit("")
        if view == "pages":
            key = F.col("url_path")
        elif view == "clients":
            key = F.col("client_host")
        row = F.struct(
            F.lit(view).alias("view"),
            key.alias("key"),
            _start(t_ms, spec.length_ms(view)).alias("start_ms"),
            F.lit(spec.length_ms(view)).cast("bigint").alias("length_ms"),
        )
        rows.append(F.when(is_content_page(), row) if view == "pages" else row)
    status = F.col("status")
    per_view = events.select(
        F.explode(F.filter(F.array(*rows), lambda r: r.isNotNull())).alias("p"),
        "client_host",
        "status",
        "bytes_sent",
    )
    visitors = F.col("p.view") == "visitors"
    agg = per_view.groupBy(
        F.col("p.view").alias("view"),
        F.col("p.key").alias("key"),
        F.col("p.start_ms").alias("start_ms"),
        F.col("p.length_ms").alias("length_ms"),
    ).agg(
        F.count("*").alias("requests"),
        F.sum("bytes_sent").alias("bytes"),
        *[
            F.count_if(F.floor(status / 100) == int(c[0])).alias(f"status_{c}")
            for c in STATUS_CLASSES
        ],
        F.count_if(status >= ERROR_STATUS_MIN).alias("errors"),
        F.count_if(status >= SERVER_ERROR_STATUS_MIN).alias("server_errors"),
        F.hll_sketch_agg(F.when(visitors, F.col("client_host"))).alias("sketch"),
    )
    return agg.select(
        "view",
        "key",
        "start_ms",
        (F.col("start_ms") + F.col("length_ms")).alias("end_ms"),
        *[F.col(m).cast("bigint").alias(m) for m in MEASURES],
        F.when(F.col("view") == "visitors", F.col("sketch")).alias("sketch"),
    )


def merge_panes(open_panes: DataFrame, partial: DataFrame | None = None) -> DataFrame:
    """Merge a micro-batch's panes into the open panes: measures add up, sketches union.

    Parameters
    ----------
    open_panes : DataFrame
        :data:`PANE_SCHEMA` rows: the panes carried from earlier micro-batches.
    partial : DataFrame, optional
        :data:`PANE_SCHEMA` rows: this micro-batch's :func:`partial_panes`.

    Returns
    -------
    DataFrame
        :data:`PANE_SCHEMA` plus ``touched`` (boolean: the pane has events of ``partial``),
        one row per ``(view, key, start_ms)``; sketches are merged with ``hll_union_agg``.
    """
    frames = open_panes.withColumn("touched", F.lit(False))
    if partial is not None:
        frames = frames.unionByName(partial.withColumn("touched", F.lit(True)))
    return frames.groupBy("view", "key", "start_ms", "end_ms").agg(
        *[F.sum(m).cast("bigint").alias(m) for m in MEASURES],
        F.hll_union_agg("sketch", True).alias("sketch"),
        F.max("touched").alias("touched"),
    )


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
    return panes.where(F.col("view") == "traffic").select(
        F.timestamp_millis("start_ms").alias("window_start"),
        F.timestamp_millis("end_ms").alias("window_end"),
        "requests",
        "bytes",
        *[f"status_{c}" for c in STATUS_CLASSES],
        "errors",
        (F.col("errors") / F.col("requests")).alias("error_rate"),
    )


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
        :func:`merge_panes`).

    Raises
    ------
    ValueError
        When the slide does not divide the window.
    """
    if window_ms % slide_ms:
        raise ValueError(f"the slide ({slide_ms} ms) must divide the window ({window_ms} ms)")
    n = window_ms // slide_ms
    offsets = F.array(*[F.lit(k * slide_ms) for k in range(n)])
    touched = F.col("touched") if "touched" in panes.columns else F.lit(False)
    return (
        panes.where(F.col("view") == view)
        .select(
            "key",
            "requests",
            "server_errors",
            "start_ms",
            touched.alias("touched"),
            F.explode(offsets).alias("k"),
        )
        .groupBy("key", (F.col("start_ms") - F.col("k")).alias("w"))
        .agg(
            F.sum("requests").cast("bigint").alias("requests"),
            F.sum("server_errors").cast("bigint").alias("server_errors"),
            F.count("*").cast("int").alias("panes"),
            F.max("touched").alias("touched"),
        )
        .select(
            "key",
            F.col("w").alias("start_ms"),
            (F.col("w") + F.lit(window_ms)).alias("end_ms"),
            "requests",
            "server_errors",
            "panes",
            "touched",
        )
    )


def views_in(spec_views: Iterable[str]) -> tuple[str, ...]:
    """The known views of ``spec_views``, in :data:`PANE_VIEWS` order."""
    chosen = set(spec_views)
    return tuple(v for v in PANE_VIEWS if v in chosen)
