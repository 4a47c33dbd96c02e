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
import re
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from logstream.analytics.alerts import SITE_SERIES
from logstream.analytics.alerts.batch import score_series
from logstream.analytics.arrow import classify
from logstream.analytics.arrow.panes import (
    ARROW_PANE_SCHEMA,
    TIMESTAMP,
    daily_rows,
    dimension_rows,
    fold_events,
    merge_panes,
    panel_rows,
    sliding_windows,
    top_client_rows,
    traffic_rows,
    trending_rows,
    visitor_rows,
)
from logstream.analytics.arrow.sessions import (
    ARROW_PARTS_SCHEMA,
    closed_rows,
    merge_sessions,
    quantiles,
    session_parts,
    session_stats,
    split_closed,
)
from logstream.analytics.arrow.sketches import hll_estimate, kll_merge
from logstream.analytics.pages import is_content_page
from logstream.analytics.panes import DAILY_VIEW, DIMENSION_VIEWS, PANEL_VIEWS
from logstream.parsing import REASON_COLUMN
from logstream.pipeline.ingest.panels import AGENT_PANELS, _item_columns
from logstream.pipeline.ingest.settings import DIMENSION_OUTPUTS, INGEST_QUERY, iso_ms
from logstream.pipeline.ingest.watermark import (
    FUTURE_REASON,
    ahead_bound_ms,
    ahead_detail,
    quantile_index,
    since_of,
)
from logstream.pipeline.state import SnapshotMeta
from logstream.reference.enrich import first_segment
from logstream.schema import EVENT_COLUMNS, EVENT_SCHEMA, QUARANTINE_SCHEMA
from logstream.serving import IngestBatchWrite
from logstream.serving.store import ALERTS_KEPT, SESSIONS_KEPT
from logstream.sources.integrity import CORRUPT_FILE_REASON, spark_file_uri

if TYPE_CHECKING:
    from logstream.pipeline.ingest.context import StageContext

__all__ = ["DriverParts", "batch_rows", "deliver_on_driver", "driver_eligible"]

#: Late and quarantined rows kept as examples per micro-batch (as the Spark steps keep).
_EXAMPLES_PER_BATCH = 5
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


@functools.cache
def _projection(
    views: tuple[str, ...],
    static_extensions: tuple[str, ...],
    site_host: str | None,
    default_section: bool,
) -> tuple[Column, ...]:
    """:func:`batch_rows`' columns (built once: a Column costs Py4J round trips)."""
    items = _item_columns(
        tuple(v for v in (*PANEL_VIEWS, DAILY_VIEW) if v in views), static_extensions, site_host
    )
    columns = [
        *(F.col(c) for c in EVENT_COLUMNS),
        F.when(F.col(REASON_COLUMN).isNotNull(), F.col("raw_line")).alias("raw_line"),
        F.col(REASON_COLUMN),
        F.unix_millis("event_time").alias("t_ms"),
        F.unix_micros("event_time").alias("t_us"),
        is_content_page().alias("is_page"),
        *(c.alias(n) for n, c in items.items()),
    ]
    if default_section:
        columns.append(first_segment(F.col("url_path")).alias("section"))
    return tuple(columns)


def batch_rows(stage: StageContext, parsed: DataFrame) -> pa.Table | None:
    """The micro-batch's rows as one Arrow table, or None when it has more than
    ``driver_rows`` lines (then nothing is kept: the Spark steps deliver it).

    One Spark job. A plan with a stateful operator (``--dedup``) runs whole first (every
    state partition must commit the batch), then is read from its cache.

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
    )
    limit = s.driver_rows
    with stage._timed("parse"):
        if stage.stateful_input:
            parsed = parsed.persist()
            stage._cached.append(parsed)
            if parsed.count() > limit:
                return None
            return parsed.select(*columns).toArrow()
        rows = parsed.select(*columns).limit(limit + 1).toArrow()
    return None if rows.num_rows > limit else rows


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


def _iso(epoch_ms: pa.ChunkedArray | pa.Array) -> list[str]:
    """ISO 8601 UTC text to the second of epoch milliseconds (:func:`iso_ms`)."""
    seconds = np.floor_divide(pc.fill_null(epoch_ms, 0).to_numpy(), 1000)
    stamps = pa.array(seconds, pa.timestamp("s", tz="UTC"))
    text = pc.strftime(stamps, format="%Y-%m-%dT%H:%M:%SZ")
    return pc.if_else(pc.is_null(epoch_ms), pa.scalar(None, pa.string()), text).to_pylist()


def _complete(stage: StageContext, output: str, start_ms: pa.ChunkedArray) -> np.ndarray:
    """:meth:`StageContext._complete` over Arrow: rows whose window holds every event."""
    since = stage.since.get(output)
    values = start_ms.to_numpy()
    return np.ones(len(values), dtype=bool) if since is None else values > since


def _views(table: pa.Table, *views: str) -> np.ndarray:
    return pc.is_in(table["view"], pa.array(list(views), pa.string())).to_numpy(
        zero_copy_only=False
    )


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
    ahead_rows: pa.Table | None = None
    is_event = pc.is_null(rows[REASON_COLUMN]).to_numpy(zero_copy_only=False)
    t_ms = pc.fill_null(rows["t_ms"], 0).to_numpy()
    if is_event.any():  # an event far ahead of its micro-batch never moves the watermark
        times = t_ms[is_event]
        k = quantile_index(len(times))
        bound = ahead_bound_ms(int(np.partition(times, k)[k]), s.watermark_ms)
        ahead = is_event & (t_ms > bound)
        if ahead.any():
            reason = pc.if_else(pa.array(ahead), FUTURE_REASON, rows[REASON_COLUMN])
            rows = rows.set_column(
                rows.schema.get_field_index(REASON_COLUMN), REASON_COLUMN, reason
            )
            stage.ahead_detail = ahead_detail(bound)
            is_event &= ~ahead
            with stage._timed("parse"):  # their raw text, which the rows do not carry
                ahead_rows = (
                    parsed.where(
                        F.col(REASON_COLUMN).isNull() & (F.unix_millis("event_time") > F.lit(bound))
                    )
                    .select("raw_line", "source_file")
                    .toArrow()
                )
    t_us = pc.fill_null(rows["t_us"], 0).to_numpy()
    is_late = np.zeros(rows.num_rows, dtype=bool)
    if watermark_ms is not None:
        is_late = is_event & (t_us <= watermark_ms * 1000)
    on_time_mask = is_event & ~is_late
    event_times = t_ms[is_event]
    write = IngestBatchWrite(
        batch_id=batch_id,
        events=int(on_time_mask.sum()),
        late_events=int(is_late.sum()),
        quarantined=int((~is_event).sum()),
        corrupt_files=len(corrupt),
        max_event_time_ms=int(event_times.max()) if len(event_times) else None,
    )
    if not (write.events or write.late_events or write.quarantined or write.corrupt_files):
        return None, prev, {}
    newest = max(prev.max_event_ms or 0, write.max_event_time_ms or 0) or None
    next_watermark = s.watermark_at(newest)
    since = since_of(prev, s.outputs)
    stage.since = since
    meta = SnapshotMeta(batch_id, newest, prev.final_until_ms, list(s.outputs), since)
    spec = s.pane_spec()
    views = tuple(spec.views)
    on_time = rows.filter(pa.array(on_time_mask))
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
    _publish_events(
        stage, rows, on_time, is_event, is_late, watermark_ms, corrupt, write, ahead_rows
    )
    if next_watermark is not None:
        closes = s.closes_windows(prev.final_until_ms, next_watermark)
        if folded is not None:
            newly_final = _newly_final(folded["end_ms"], prev.final_until_ms, next_watermark)
            finals = folded.filter(pa.array(newly_final))
            if closes:
                _publish_windows(stage, finals, folded, windows, prev, next_watermark, write)
            keep_from = next_watermark - (s.trending_ms - s.trending_slide_ms)
            end = folded["end_ms"].to_numpy()
            keep = (end > next_watermark) | (_views(folded, "pages") & (end > keep_from))
            parts["panes"] = folded.filter(pa.array(keep)).drop(["touched"])
            if "alerts" in s.outputs:
                with stage._timed("alerts"):
                    parts["series"] = _score_alerts(
                        stage, finals if closes else None, state["series"], next_watermark, write
                    )
        if "sessions" in s.outputs:
            with stage._timed("sessions"):
                parts["sessions"] = _close_sessions(
                    stage, on_time, state["sessions"], next_watermark, write, closes
                )
        final_until = max(prev.final_until_ms or 0, next_watermark)
        meta = SnapshotMeta(batch_id, newest, final_until, list(s.outputs), since)
    stage._step("published_windows", batch_id)
    return write, meta, parts


def _newly_final(end_ms: pa.ChunkedArray, final_until: int | None, watermark: int) -> np.ndarray:
    """Panes and windows ending in ``(final_until, watermark]``: final in this batch."""
    end = end_ms.to_numpy()
    newly = end <= watermark
    if final_until is not None:
        newly &= end > final_until
    return newly


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
            complete |= _views(merged, view) & _complete(stage, output, start)
    limited = _views(merged, "clients", *DIMENSION_VIEWS, *PANEL_VIEWS)
    recent = ~limited | (merged["end_ms"].to_numpy() > horizon_ms)
    live = merged.filter(pa.array(touched & recent & complete))
    ws, we = _iso(live["start_ms"]), _iso(live["end_ms"])
    view = live["view"].to_pylist()
    key = live["key"].to_pylist()
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
            & _complete(stage, "trending_pages", windows["start_ms"])
        )
        pages = windows.filter(pa.array(changed))
        write.pages = list(
            zip(
                _iso(pages["start_ms"]),
                _iso(pages["end_ms"]),
                pages["key"].to_pylist(),
                pages["requests"].to_pylist(),
                strict=True,
            )
        )
    write.daily_visitors = []
    if "traffic_by_panel" in s.outputs and DAILY_VIEW in s.pane_spec().views:
        of_view = merged.filter(
            pa.array(_views(merged, DAILY_VIEW) & _complete(stage, "traffic_by_panel", start))
        )
        days = daily_rows(of_view)
        days = days.filter(days["touched"])
        write.daily_visitors = list(
            zip(
                days["day"].to_pylist(),
                _iso(days["start_ms"]),
                _iso(days["end_ms"]),
                days["requests"].to_pylist(),
                days["visitors"].to_pylist(),
                days["bytes"].to_pylist(),
                strict=True,
            )
        )


# -- step 7: publish ----------------------------------------------------------------------


@functools.cache
def _arrow_schema(name: str) -> pa.Schema:
    """The Arrow schema of an output written by Arrow, from its Spark schema."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructField, StructType, TimestampType

    schema = {
        "events": EVENT_SCHEMA,
        "late_events": StructType(
            [*EVENT_SCHEMA.fields, StructField("watermark", TimestampType())]
        ),
        "quarantine": QUARANTINE_SCHEMA,
    }[name]
    return to_arrow_schema(schema, timezone="UTC")


def _publish_events(
    stage: StageContext,
    rows: pa.Table,
    on_time: pa.Table,
    is_event: np.ndarray,
    is_late: np.ndarray,
    watermark_ms: int | None,
    corrupt: dict[str, str],
    write: IngestBatchWrite,
    ahead_rows: pa.Table | None = None,
) -> None:
    """The events, late events and quarantined lines (``events_task`` of the Spark steps);
    ``ahead_rows``: the raw text and file of the events the in-batch rule quarantined."""
    batch_id = write.batch_id
    out = stage.output_dir
    with stage._timed("events"):
        if write.events:
            stage.publish.publish_table(
                _conform(on_time.select(list(EVENT_COLUMNS)), "events"),
                out / "events",
                batch_id,
                stage._spark,
            )
            stage._step("published_events", batch_id)
        if write.late_events:
            late = rows.filter(pa.array(is_late)).select(list(EVENT_COLUMNS))
            assert watermark_ms is not None
            mark = pa.array(np.full(late.num_rows, watermark_ms * 1000, dtype=np.int64))
            late = late.append_column("watermark", pc.cast(mark, TIMESTAMP))
            stage.publish.publish_table(
                _conform(late, "late_events"), out / "late_events", batch_id, stage._spark
            )
            stage._step("published_late_events", batch_id)
            first = late.slice(0, _EXAMPLES_PER_BATCH)
            event_ms = pc.cast(pc.cast(first["event_time"], pa.int64()), pa.int64())
            write.late_examples = [
                (batch_id, t, iso_ms(watermark_ms), host, path, source)
                for t, host, path, source in zip(
                    _iso(pc.divide(event_ms, 1000)),
                    first["client_host"].to_pylist(),
                    first["url_path"].to_pylist(),
                    first["source_file"].to_pylist(),
                    strict=True,
                )
            ]
        if write.quarantined or corrupt:
            bad = rows.filter(pa.array(~is_event))
            if ahead_rows is not None:  # their raw text, read for them
                has_text = pc.is_valid(bad["raw_line"])
                bad = bad.filter(has_text)
                ahead = pa.table(
                    {
                        "raw_line": ahead_rows["raw_line"],
                        "source_file": ahead_rows["source_file"],
                        REASON_COLUMN: pa.array([FUTURE_REASON] * ahead_rows.num_rows),
                    }
                )
                bad = pa.concat_tables(
                    [bad.select(["raw_line", "source_file", REASON_COLUMN]), ahead],
                    promote_options="permissive",
                )
            detail = pa.nulls(bad.num_rows, pa.string())
            if stage.ahead_detail is not None:
                detail = pc.if_else(
                    pc.equal(bad[REASON_COLUMN], FUTURE_REASON), stage.ahead_detail, detail
                )
            quarantine = pa.table(
                {
                    "raw_line": bad["raw_line"],
                    "source_file": bad["source_file"],
                    "reason": bad[REASON_COLUMN],
                    "detail": detail,
                }
            )
            files = [
                (None, spark_file_uri(f), CORRUPT_FILE_REASON, e)
                for f, e in sorted(corrupt.items())
            ]
            if files:
                quarantine = pa.concat_tables(
                    [
                        quarantine,
                        pa.table(
                            {
                                name: pa.array([r[i] for r in files], pa.string())
                                for i, name in enumerate(quarantine.column_names)
                            }
                        ),
                    ]
                )
            stage.publish.publish_table(
                _conform(quarantine, "quarantine"), out / "quarantine", batch_id, stage._spark
            )
            stage._step("published_quarantine", batch_id)
            examples = files[:_EXAMPLES_PER_BATCH]
            if write.quarantined:
                examples += [
                    tuple(r.values()) for r in quarantine.slice(0, _EXAMPLES_PER_BATCH).to_pylist()
                ]
            write.quarantine_examples = [(batch_id, *r) for r in examples[:_EXAMPLES_PER_BATCH]]


def _conform(table: pa.Table, name: str) -> pa.Table:
    """``table`` in the Arrow schema of output ``name``."""
    return table.cast(_arrow_schema(name))


def _publish_windows(
    stage: StageContext,
    finals: pa.Table,
    merged: pa.Table,
    windows: pa.Table | None,
    prev: SnapshotMeta,
    next_watermark: int,
    write: IngestBatchWrite,
) -> None:
    """The windows that became final, an output each (``publish_windows`` of the Spark
    steps): each exactly once, in one micro-batch."""
    s = stage.settings
    out = stage.output_dir
    batch_id = write.batch_id

    def publish(rows: pa.Table, output: str) -> None:
        with stage._timed("windows"):
            stage.publish.publish_table(rows, out / output, batch_id, stage._spark)

    def complete(output: str, table: pa.Table = finals) -> pa.Table:
        return table.filter(pa.array(_complete(stage, output, table["start_ms"])))

    if "traffic_per_minute" in s.outputs:
        publish(traffic_rows(complete("traffic_per_minute")), "traffic_per_minute")
    if "unique_visitors" in s.outputs:
        publish(visitor_rows(complete("unique_visitors")), "unique_visitors")
    if windows is not None:
        final = windows.filter(
            pa.array(_newly_final(windows["end_ms"], prev.final_until_ms, next_watermark))
        )
        publish(trending_rows(complete("trending_pages", final)), "trending_pages")
    for output, view in DIMENSION_OUTPUTS.items():
        if output in s.outputs:
            publish(dimension_rows(complete(output), view), output)
    if "traffic_by_panel" in s.outputs:
        publish(panel_rows(complete("traffic_by_panel")), "traffic_by_panel")
    if "top_clients" in s.outputs:
        publish(top_client_rows(complete("top_clients"), s.top), "top_clients")


def _score_alerts(
    stage: StageContext,
    finals: pa.Table | None,
    state: pa.Table,
    next_watermark: int,
    write: IngestBatchWrite,
) -> pa.Table:
    """The final minutes of the site and of each content page scored against the detectors'
    state (:func:`logstream.analytics.alerts.score_minutes`' steps, on the driver); returns
    the detectors' new state. ``finals`` None: the watermark passed no minute."""
    if finals is None:
        return state
    minutes = finals.filter(
        pa.array(
            _views(finals, "traffic", "pages") & _complete(stage, "alerts", finals["start_ms"])
        )
    )
    is_site = pc.equal(minutes["view"], "traffic")
    series = pc.if_else(is_site, pa.scalar(SITE_SERIES), minutes["key"])
    alerts, new_state = score_series(
        series.to_pylist(),
        minutes["start_ms"].to_pylist(),
        minutes["requests"].to_pylist(),
        minutes["server_errors"].to_pylist(),
        state,
        next_watermark,
        stage.settings.alerts,
    )
    if alerts.num_rows:
        ordered = alerts.sort_by(
            [("window_start", "ascending"), ("series", "ascending"), ("metric", "ascending")]
        )
        stage.publish.publish_table(
            ordered, stage.output_dir / "alerts", write.batch_id, stage._spark
        )
        first = ordered.slice(0, ALERTS_KEPT)
        start_ms = pc.divide(pc.cast(first["window_start"], pa.int64()), 1000)
        end_ms = pc.divide(pc.cast(first["window_end"], pa.int64()), 1000)
        write.alerts = [
            (
                r["series"],
                r["metric"],
                ws,
                we,
                r["value"],
                r["mean"],
                r["std"],
                r["z"],
                r["direction"],
            )
            for r, ws, we in zip(first.to_pylist(), _iso(start_ms), _iso(end_ms), strict=True)
        ]
    return new_state


def _close_sessions(
    stage: StageContext,
    on_time: pa.Table,
    open_sessions: pa.Table,
    next_watermark: int,
    write: IngestBatchWrite,
    closes: bool,
) -> pa.Table:
    """:func:`logstream.pipeline.ingest.sessions.close_sessions` on the driver: returns the
    open sessions of the new snapshot."""
    s = stage.settings
    parts = session_parts(on_time) if write.events else ARROW_PARTS_SCHEMA.empty_table()
    if not closes:
        return pa.concat_tables([open_sessions.cast(ARROW_PARTS_SCHEMA), parts])
    merged = merge_sessions(parts, open_sessions, s.session_gap_ms)
    closed, still_open = split_closed(merged, s.session_gap_ms, next_watermark)
    since = stage.since.get("sessions")
    if since is not None:  # a visitor seen before `since` may have started earlier
        closed = closed.filter(pc.greater(closed["first_ms"], since + s.session_gap_ms))
    if not closed.num_rows:
        return still_open
    rows = closed_rows(closed)
    stage.publish.publish_table(rows, stage.output_dir / "sessions", write.batch_id, stage._spark)
    window_ms = int(_seconds(s.session_stats_window) * 1000)
    fresh = [
        (iso_ms(ws), iso_ms(we), n, bounces, pages, *quantiles(sketch), sketch)
        for ws, we, n, bounces, pages, sketch in session_stats(rows, window_ms)
    ]
    latest = rows.sort_by([("session_end", "descending"), ("client_host", "ascending")]).slice(
        0, SESSIONS_KEPT
    )
    start_ms = pc.divide(pc.cast(latest["session_start"], pa.int64()), 1000)
    end_ms = pc.divide(pc.cast(latest["session_end"], pa.int64()), 1000)
    write.sessions_closed = rows.num_rows
    write.sessions = [
        (
            r["client_host"],
            r["user_agent"],
            ws,
            we,
            r["duration_s"],
            r["requests"],
            r["pages"],
            r["bytes"],
            r["entry_page"],
            r["exit_page"],
            int(r["bounce"]),
        )
        for r, ws, we in zip(latest.to_pylist(), _iso(start_ms), _iso(end_ms), strict=True)
    ][::-1]
    write.session_stats = _merged_stats(stage, fresh)
    return still_open


def _merged_stats(stage: StageContext, fresh: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """This batch's session statistics merged with the store's rows of the same windows
    (:func:`logstream.pipeline.ingest.sessions.merged_session_stats`, on the driver)."""
    stored = {r[0]: r for r in stage.store.session_stats_rows(r[0] for r in fresh)}
    out = []
    for ws, we, n, bounces, pages, median, p95, sketch in fresh:
        old = stored.get(ws)
        if old is not None:
            sketch = kll_merge([bytes(old[5]), sketch])
            n, bounces, pages = n + old[2], bounces + old[3], pages + old[4]
            median, p95 = quantiles(sketch)
        out.append((ws, we, n, bounces, pages, median, p95, sketch))
    return out


@functools.cache
def _seconds(interval: str) -> float:
    from logstream.pipeline.config import interval_seconds

    return interval_seconds(interval)
