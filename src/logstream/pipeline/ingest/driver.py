"""The live path: a small micro-batch parsed in one Spark job and folded on the driver.

A live micro-batch holds a few thousand lines; in Spark its time is the fixed cost of each
job it runs (planning, code generation, scheduling, an output commit), about 0.1–0.3 s a job
on a small machine, and the steps of :mod:`logstream.pipeline.ingest` run about fifteen. So
a micro-batch of at most :attr:`AnalyticsSettings.driver_rows` lines is delivered here
instead, with **one** Spark job:

1. **Rows** (:func:`batch_rows`). The parsed lines, with what the analytics read of each
   (``t_ms``, the content-page flag, the default section, GoAccess's panel keys: the shared
   Spark definitions of :mod:`logstream.analytics`), are collected as one Arrow table
   (``toArrow``), at most ``driver_rows + 1`` of them: a micro-batch that has more goes to
   the Spark steps (:class:`~logstream.pipeline.ingest.IngestStage`), the rows read are
   dropped, and nothing was written.
2. **Classify** the distinct user agents and hosts (:mod:`logstream.analytics.arrow.classify`,
   memoised), and the reference tables' keys.
3. **Split** by the watermark of snapshot ``N − 1`` (the same rule as
   :mod:`~logstream.pipeline.ingest.watermark`), **fold** the on-time events into the open
   panes (:mod:`logstream.analytics.arrow.panes`), **serve** the windows the batch changed
   (step 6 of the Spark steps), **publish** the events, late events, quarantine and the
   windows the new watermark made final as Parquet written by Arrow
   (:meth:`~logstream.sinks.route.OutputPublisher.publish_table`), **score** the final
   minutes (the detector's own steps, :mod:`logstream.analytics.alerts`), **merge** the
   sessions (:mod:`logstream.analytics.arrow.sessions`), **commit** the store and write
   the **snapshot** with Arrow, in the same order, with the same step hooks, the same
   exactly-once rules (batch-id directories, the store's ledger, the snapshot last) and the
   same files as the Spark steps: the two paths alternate freely on one state directory.

The state between micro-batches stays in the driver's memory as Arrow tables, with the
snapshot on disk as its record (:class:`~logstream.pipeline.state.StateSnapshots`).
``tests/pipeline/test_parity.py`` checks that both paths give every window, session and alert
of the batch report; ``bench/bench_live_path.py`` measures them against Spark's own
micro-batch.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from logstream.analytics.arrow import classify
from logstream.analytics.arrow.panes import (
    ARROW_PANE_SCHEMA,
    daily_rows,
    fold_events,
    merge_panes,
    sliding_windows,
    texts,
)
from logstream.analytics.arrow.sketches import hll_estimate
from logstream.analytics.pages import is_content_page
from logstream.analytics.panes import DAILY_VIEW, DIMENSION_VIEWS, PANEL_VIEWS
from logstream.filters import FILTERED_REASON
from logstream.parsing import REASON_COLUMN
from logstream.pipeline.ingest.driver_publish import (
    close_sessions,
    complete_mask,
    iso_texts,
    newly_final,
    of_views,
    publish_events,
    publish_windows,
    score_alerts,
)
from logstream.pipeline.ingest.panels import AGENT_PANELS, _item_columns
from logstream.pipeline.ingest.publish import run_concurrently
from logstream.pipeline.ingest.settings import DIMENSION_OUTPUTS, INGEST_QUERY, iso_ms
from logstream.pipeline.ingest.skew import arrow_skew, warn_once
from logstream.pipeline.ingest.watermark import (
    FUTURE_REASON,
    ahead_bound_ms,
    ahead_detail,
    is_quarantined,
    quantile_index,
    since_of,
)
from logstream.pipeline.state import SnapshotMeta
from logstream.reference.enrich import first_segment
from logstream.schema import EVENT_COLUMNS
from logstream.serving import IngestBatchWrite

if TYPE_CHECKING:
    from logstream.pipeline.ingest.context import StageContext
    from logstream.pipeline.ingest.settings import AnalyticsSettings

__all__ = ["DriverParts", "batch_rows", "deliver_on_driver", "driver_eligible", "warm_up"]

log = logging.getLogger(__name__)

#: The measures of a live view's row, in the store's order.
_LIVE_MEASURES = ("requests", "bytes", *(f"status_{c}xx" for c in "12345"), "errors")
#: A part of the state as the driver keeps it: Arrow tables.
DriverParts = dict[str, pa.Table]


def driver_eligible(stage: StageContext) -> bool:
    """Whether the running micro-batch of ``stage`` may be delivered on the driver: the path
    is on (``driver_rows`` > 0), no bot model (its features and model are Spark's), and the
    batch's agents table, when the views read it, is one that Python's regular expressions
    compile (:class:`~logstream.analytics.arrow.classify.AgentRules`)."""
    s = stage.settings
    views = s.pane_spec().views
    if s.driver_rows <= 0 or "client_pages" in views:
        return False
    agents = stage._tables.get("agents")
    if agents is not None and ("agents" in views or any(v in views for v in AGENT_PANELS)):
        try:
            classify.agent_rules(agents)
        except re.error:
            return False
    return True


def warm_up(settings: AnalyticsSettings) -> None:
    """Load what the live path's first micro-batch uses (Arrow's compute kernels, the sketch
    library, the user-agent rules and the GeoIP database the views read): run in a thread
    while the JVM starts, so that the first micro-batch does not wait for them."""
    import datasketches  # noqa: F401
    import pyarrow.compute  # noqa: F401

    views = settings.pane_spec().views
    if "geolocation" in views:
        classify.countries(pa.array(["192.0.2.1"]))
    if "os" in views or "browsers" in views:
        classify.families(pa.array(["Mozilla/5.0"]), None)


@functools.cache
def _projection(
    views: tuple[str, ...],
    static_extensions: tuple[str, ...],
    site_host: str | None,
    default_section: bool,
    protocol_required: bool = False,
) -> tuple[Column, ...]:
    """:func:`batch_rows`' columns (built once: a Column costs Py4J round trips)."""
    items = _item_columns(
        tuple(v for v in (*PANEL_VIEWS, DAILY_VIEW) if v in views and v not in _ON_DRIVER),
        static_extensions,
        site_host,
        protocol_required,
    )
    columns = [
        *(F.col(c) for c in EVENT_COLUMNS),
        F.when(is_quarantined(), F.col("raw_line")).alias("raw_line"),
        F.col(REASON_COLUMN),
        F.unix_millis("event_time").alias("t_ms"),
        F.unix_micros("event_time").alias("t_us"),
        is_content_page().alias("is_page"),
        *(c.alias(n) for n, c in items.items()),
    ]
    if default_section:
        columns.append(first_segment(F.col("url_path")).alias("section"))
    return tuple(columns)


#: Panel keys that are an event column, or made of them: made on the driver from the rows
#: rather than sent by Spark a second time (a fifth of a backfill's Arrow bytes).
_ON_DRIVER = {
    "hosts": "client_host",
    "remote_user": "user",
    "virtual_hosts": "virtual_host",
    DAILY_VIEW: None,
}


def _driver_items(rows: pa.Table, views: tuple[str, ...]) -> pa.Table:
    """``rows`` with the panel keys of :data:`_ON_DRIVER`: the same values as
    :func:`~logstream.pipeline.ingest.panels._item_columns`' Spark columns (the visitor
    ``client_host + "\n" + user agent or "-"``, ``""`` for a 4xx status, as ``concat_ws``
    makes it)."""
    for view, column in _ON_DRIVER.items():
        if view not in views:
            continue
        if column is not None:
            rows = rows.append_column(PANEL_VIEWS[view], rows[column])
            continue
        agent = pc.fill_null(rows["user_agent"], "-")
        visitor = pc.binary_join_element_wise(
            rows["client_host"], agent, "\n", null_handling="skip"
        )
        status = rows["status"]
        client_error = pc.fill_null(
            pc.and_(pc.greater_equal(status, 400), pc.less_equal(status, 499)), False
        )
        rows = rows.append_column("p_visitor", pc.if_else(client_error, "", visitor))
    return rows


def batch_rows(stage: StageContext, parsed: DataFrame, *, counted: bool = False) -> pa.Table | None:
    """The micro-batch's rows as one Arrow table, or None when it has more than
    ``driver_rows`` lines (then nothing is kept: the Spark steps deliver it).

    One Spark job. A plan with a stateful operator (``--dedup``) runs whole first (every
    state partition must commit the batch), then is read from its cache. Rows past Spark's
    ``spark.driver.maxResultSize`` also return None (the job fails before anything is
    written). ``counted``: the batch's lines were counted (a directory source's files,
    ``IngestStage._driver_fit``), so the rows are collected as the tasks make them; else a
    limit of ``driver_rows + 1`` bounds them, which Spark plans as one more task that
    gathers every row (31 NASA days, warm, 2 cores: 2.4 s with the limit, 1.9 s without).

    Returns
    -------
    pyarrow.Table or None
        :data:`~logstream.schema.EVENT_COLUMNS`, ``raw_line`` (quarantined lines only),
        ``quarantine_reason``, ``t_ms`` and ``t_us`` (epoch ms and µs of ``event_time``),
        ``is_page`` (bool), the panel keys of the views computed (``p_*``,
        :mod:`logstream.pipeline.ingest.panels`), ``section`` (without a sections table).
    """
    s = stage.settings
    views = s.pane_spec().views
    columns = _projection(
        tuple(views),
        tuple(s.static_extensions),
        s.site_host,
        "sections" in views and "sections" not in stage._tables,
        s.protocol_required,
    )
    limit = s.driver_rows
    with stage._timed("parse"):
        if stage.stateful_input:
            parsed = parsed.persist()
            stage._cached.append(parsed)
            if parsed.count() > limit:
                return None
            return _driver_items(parsed.select(*columns).toArrow(), tuple(views))
        try:
            projected = parsed.select(*columns)
            rows = (projected if counted else projected.limit(limit + 1)).toArrow()
        except Exception as error:  # a source without files, lines larger than thought
            if "maxResultSize" not in str(error):
                raise
            log.info("micro-batch past spark.driver.maxResultSize: the Spark steps deliver it")
            return None
    return None if rows.num_rows > limit else _driver_items(rows, tuple(views))


def _classified(stage: StageContext, rows: pa.Table, views: tuple[str, ...]) -> pa.Table:
    """``rows`` with the keys classified on the driver: agent class, section and organisation
    by the batch's reference tables, OS and browser families, country."""
    tables = stage._tables
    added: dict[str, pa.Array] = {}
    if "agents" in views:
        added["agent_class"] = classify.agent_classes(rows["user_agent"], tables["agents"])
    if "sections" in views and "sections" in tables:
        added["section"] = classify.sections(rows["url_path"], tables["sections"])
    if "networks" in views and "networks" in tables:
        added["organisation"] = classify.organisations(rows["client_host"], tables["networks"])
    if "os" in views or "browsers" in views:
        systems, browsers = classify.families(rows["user_agent"], tables.get("agents"))
        added["p_os"], added["p_browser"] = systems, browsers
    if "geolocation" in views:
        added["p_country"] = classify.countries(rows["client_host"])
    for name, column in added.items():
        rows = rows.append_column(name, column)
    return rows


def _ahead_of_batch(
    stage: StageContext, rows: pa.Table, parsed: DataFrame, batch_id: int
) -> tuple[pa.Table, np.ndarray, pa.Table | None]:
    """The in-batch rule (:func:`~.watermark.ahead_bound_ms`): ``rows`` with the events far
    ahead of their micro-batch quarantined as ``future_event_time``, which rows are events,
    and those events' raw text and file (None when there is none: their rows do not carry
    it, so ``parsed`` is read again for them, rarely)."""
    is_event = pc.is_null(rows[REASON_COLUMN]).to_numpy(zero_copy_only=False)
    if not is_event.any():
        return rows, is_event, None
    t_ms = pc.fill_null(rows["t_ms"], 0).to_numpy()
    times = t_ms[is_event]
    k = quantile_index(len(times))
    delay = stage.settings.watermark_ms
    bound = ahead_bound_ms(np.sort(np.partition(times, k)[k:]), delay)
    detail = None if bound is None else ahead_detail(bound)
    sources = rows["source_file"].to_numpy(zero_copy_only=False)[is_event]
    skew = arrow_skew(times, sources, delay)
    if skew is not None:  # a minority ahead, between the lines: a clock set wrong
        bound = skew.cut_ms - 1 if bound is None else min(bound, skew.cut_ms - 1)
        detail = skew.detail()
        warn_once(stage, skew, batch_id)
    if bound is None:
        return rows, is_event, None
    ahead = is_event & (t_ms > bound)
    if not ahead.any():
        return rows, is_event, None
    reason = pc.if_else(pa.array(ahead), FUTURE_REASON, rows[REASON_COLUMN])
    rows = rows.set_column(rows.schema.get_field_index(REASON_COLUMN), REASON_COLUMN, reason)
    stage.ahead_detail = detail
    with stage._timed("parse"):
        ahead_rows = (
            parsed.where(
                F.col(REASON_COLUMN).isNull() & (F.unix_millis("event_time") > F.lit(bound))
            )
            .select("raw_line", "source_file")
            .toArrow()
        )
    return rows, is_event & ~ahead, ahead_rows


def deliver_on_driver(
    stage: StageContext,
    rows: pa.Table,
    batch_id: int,
    prev: SnapshotMeta,
    corrupt: dict[str, str],
    parsed: DataFrame,
) -> tuple[IngestBatchWrite | None, SnapshotMeta, DriverParts]:
    """Steps 3 to 7 of the micro-batch (see :mod:`logstream.pipeline.ingest`) on the driver.

    ``rows`` are :func:`batch_rows`' of ``parsed``, which is read again only for the raw text
    of events the in-batch rule quarantines (:func:`~.watermark.ahead_bound_ms`: rare).

    Returns
    -------
    tuple
        The batch's store write (None: no line and no corrupt file), the meta of its
        snapshot, and the state parts of the snapshot (Arrow tables).
    """
    s = stage.settings
    watermark_ms = s.watermark_at(prev.max_event_ms)
    rows, is_event, ahead_rows = _ahead_of_batch(stage, rows, parsed, batch_id)
    t_ms = pc.fill_null(rows["t_ms"], 0).to_numpy()
    t_us = pc.fill_null(rows["t_us"], 0).to_numpy()
    is_late = np.zeros(rows.num_rows, dtype=bool)
    if watermark_ms is not None:
        is_late = is_event & (t_us <= watermark_ms * 1000)
    on_time_mask = is_event & ~is_late
    is_filtered = pc.fill_null(pc.equal(rows[REASON_COLUMN], FILTERED_REASON), False)
    is_filtered = is_filtered.to_numpy(zero_copy_only=False)
    event_times = t_ms[is_event]
    write = IngestBatchWrite(
        batch_id=batch_id,
        events=int(on_time_mask.sum()),
        late_events=int(is_late.sum()),
        quarantined=int((~is_event & ~is_filtered).sum()),
        filtered=int(is_filtered.sum()),
        corrupt_files=len(corrupt),
        max_event_time_ms=int(event_times.max()) if len(event_times) else None,
    )
    if not (rows.num_rows or write.corrupt_files):
        return None, prev, {}
    newest = max(prev.max_event_ms or 0, write.max_event_time_ms or 0) or None
    next_watermark = s.watermark_at(newest)
    since = since_of(prev, s.outputs)
    stage.since = since
    meta = SnapshotMeta(batch_id, newest, prev.final_until_ms, list(s.outputs), since)
    spec = s.pane_spec()
    views = tuple(spec.views)
    # (every line on time, the common case: the rows themselves, not a copy)
    on_time = rows if on_time_mask.all() else rows.filter(pa.array(on_time_mask))
    state = stage.state.read_tables(prev)
    parts: DriverParts = {}
    folded: pa.Table | None = None
    windows: pa.Table | None = None
    if next_watermark is not None:  # 5. aggregate once
        horizon_ms = next_watermark + s.watermark_ms - s.retention_ms
        write.prune_trending_before = iso_ms(horizon_ms)
        write.final_before = iso_ms(next_watermark)
        if views:
            with stage._timed("live_views"):
                batch = ARROW_PANE_SCHEMA.empty_table()
                if write.events:
                    if any(v in DIMENSION_VIEWS for v in views):
                        write.reference_versions = {
                            k: t.digest for k, t in sorted(stage._tables.items())
                        }
                    batch = fold_events(_classified(stage, on_time, views), spec)
                folded = merge_panes(state["panes"], batch, views)
                if "trending_pages" in s.outputs:
                    windows = sliding_windows(folded, "pages", s.trending_ms, s.trending_slide_ms)
                if write.events:
                    _live_views(stage, folded, windows, write, s.on_boundary(horizon_ms))
            if write.events:  # 6. its windows, to the store before the rest
                with stage._timed("store"):
                    stage.store.commit_ingest_views(INGEST_QUERY, write)
                stage._step("committed_views", batch_id)
    # 7. publish
    publish_events(
        stage,
        rows,
        on_time,
        is_event | is_filtered,
        is_late,
        watermark_ms,
        corrupt,
        write,
        ahead_rows,
    )
    if next_watermark is not None:
        _final_steps(stage, folded, windows, on_time, state, parts, prev, next_watermark, write)
        final_until = max(prev.final_until_ms or 0, next_watermark)
        meta = SnapshotMeta(batch_id, newest, final_until, list(s.outputs), since)
    stage._step("published_windows", batch_id)
    return write, meta, parts


def _final_steps(
    stage: StageContext,
    folded: pa.Table | None,
    windows: pa.Table | None,
    on_time: pa.Table,
    state: DriverParts,
    parts: DriverParts,
    prev: SnapshotMeta,
    next_watermark: int,
    write: IngestBatchWrite,
) -> None:
    """Step 7 after the events: the windows final in this batch published, the detector's
    scoring and the sessions' merge, into ``parts`` (the state's new parts)."""
    s = stage.settings
    closes = s.closes_windows(prev.final_until_ms, next_watermark)
    # the final windows, the detector's scoring and the sessions' merge on two threads:
    # the detector is Python, the rest mostly Arrow and Parquet, which release the GIL
    tasks: list[Callable[[], None]] = []
    if folded is not None:
        newly = newly_final(folded["end_ms"], prev.final_until_ms, next_watermark)
        if "alerts" in s.outputs:

            def alerts() -> None:
                with stage._timed("alerts"):
                    parts["series"] = score_alerts(
                        stage,
                        folded,
                        newly if closes else None,
                        state["series"],
                        next_watermark,
                        write,
                    )

            tasks.append(alerts)
        if closes:
            tasks.append(
                lambda: publish_windows(stage, folded, newly, windows, prev, next_watermark, write)
            )
        keep_from = next_watermark - (s.trending_ms - s.trending_slide_ms)
        end = folded["end_ms"].to_numpy()
        keep = (end > next_watermark) | (of_views(folded, "pages") & (end > keep_from))
        parts["panes"] = folded.filter(pa.array(keep)).drop(["touched"])
    if "sessions" in s.outputs:

        def sessions() -> None:
            with stage._timed("sessions"):
                parts["sessions"] = close_sessions(
                    stage, on_time, state["sessions"], next_watermark, write, closes
                )

        tasks.append(sessions)
    run_concurrently(tasks, 2, stage._spark)


def _live_views(
    stage: StageContext,
    merged: pa.Table,
    windows: pa.Table | None,
    write: IngestBatchWrite,
    horizon_ms: int,
) -> None:
    """:func:`logstream.pipeline.ingest.live.live_views` over Arrow panes."""
    s = stage.settings
    view_output = {
        "traffic": "traffic_per_minute",
        "visitors": "unique_visitors",
        "clients": "top_clients",
        **{view: output for output, view in DIMENSION_OUTPUTS.items()},
        **dict.fromkeys(PANEL_VIEWS, "traffic_by_panel"),
    }
    touched = merged["touched"].to_numpy(zero_copy_only=False)
    start = merged["start_ms"]
    complete = np.zeros(merged.num_rows, dtype=bool)
    for view, output in view_output.items():
        if output in s.outputs:
            complete |= of_views(merged, view) & complete_mask(stage, output, start)
    limited = of_views(merged, "clients", *DIMENSION_VIEWS, *PANEL_VIEWS)
    recent = ~limited | (merged["end_ms"].to_numpy() > horizon_ms)
    live = merged.filter(pa.array(touched & recent & complete))
    ws, we = iso_texts(live["start_ms"]), iso_texts(live["end_ms"])
    view = live["view"].to_pylist()
    key = texts(live["key"])
    measures = [live[m].to_pylist() for m in _LIVE_MEASURES]
    sketches = live["sketch"].to_pylist()
    traffic, visitors, clients, dimensions = [], [], [], []
    for i, v in enumerate(view):
        values = tuple(m[i] for m in measures)
        if v == "traffic":
            traffic.append((ws[i], we[i], *values))
        elif v == "visitors":
            visitors.append((ws[i], we[i], hll_estimate(sketches[i]), None))
        elif v == "clients":
            clients.append((ws[i], we[i], key[i], values[0], values[1]))
        elif v in DIMENSION_VIEWS or v in PANEL_VIEWS:
            dimensions.append((v, key[i], ws[i], we[i], *values))
    write.traffic, write.visitors, write.clients = traffic, visitors, clients
    write.dimensions = dimensions
    write.pages = []
    if windows is not None:
        changed = (
            windows["touched"].to_numpy(zero_copy_only=False)
            & (windows["end_ms"].to_numpy() > horizon_ms)
            & complete_mask(stage, "trending_pages", windows["start_ms"])
        )
        pages = windows.filter(pa.array(changed))
        write.pages = list(
            zip(
                iso_texts(pages["start_ms"]),
                iso_texts(pages["end_ms"]),
                texts(pages["key"]),
                pages["requests"].to_pylist(),
                strict=True,
            )
        )
    write.daily_visitors = []
    if "traffic_by_panel" in s.outputs and DAILY_VIEW in s.pane_spec().views:
        of_view = merged.filter(
            pa.array(of_views(merged, DAILY_VIEW) & complete_mask(stage, "traffic_by_panel", start))
        )
        days = daily_rows(of_view)
        days = days.filter(days["touched"])
        write.daily_visitors = list(
            zip(
                days["day"].to_pylist(),
                iso_texts(days["start_ms"]),
                iso_texts(days["end_ms"]),
                days["requests"].to_pylist(),
                days["visitors"].to_pylist(),
                days["bytes"].to_pylist(),
                strict=True,
            )
        )
