"""The live path's publishing (step 7 and its helpers): Arrow tables to outputs and store.

The writes of a micro-batch delivered on the driver (:mod:`logstream.pipeline.ingest.driver`):
the events, late events and quarantined lines, the windows the new watermark made final, the
detector's alerts and the closed sessions, each published exactly once by batch id
(:meth:`~logstream.sinks.route.OutputPublisher.publish_table`), with the rows of the store's
transaction: the Spark steps' :mod:`.publish`, :mod:`.alerts` and :mod:`.sessions`, over Arrow.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from logstream.analytics.alerts import SITE_SERIES
from logstream.analytics.alerts.batch import score_series
from logstream.analytics.arrow.panes import (
    TIMESTAMP,
    dimension_rows,
    panel_rows,
    texts,
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
from logstream.analytics.arrow.sketches import kll_merge
from logstream.analytics.panes import DAILY_VIEW, PANEL_VIEWS
from logstream.parsing import REASON_COLUMN
from logstream.pipeline.ingest.settings import DIMENSION_OUTPUTS, iso_ms
from logstream.pipeline.ingest.watermark import FUTURE_REASON
from logstream.pipeline.state import SnapshotMeta
from logstream.schema import EVENT_COLUMNS, EVENT_SCHEMA, QUARANTINE_SCHEMA
from logstream.serving import IngestBatchWrite
from logstream.serving.store import ALERTS_KEPT, SESSIONS_KEPT
from logstream.sources.integrity import CORRUPT_FILE_REASON, spark_file_uri

if TYPE_CHECKING:
    from logstream.pipeline.ingest.context import StageContext

__all__ = [
    "close_sessions",
    "complete_mask",
    "iso_texts",
    "newly_final",
    "of_views",
    "publish_events",
    "publish_windows",
    "rows_of",
    "score_alerts",
]

#: Late and quarantined rows kept as examples per micro-batch (as the Spark steps keep).
_EXAMPLES_PER_BATCH = 5


def iso_texts(epoch_ms: pa.ChunkedArray | pa.Array) -> list[str]:
    """ISO 8601 UTC text to the second of epoch milliseconds (:func:`iso_ms`)."""
    values = pc.fill_null(epoch_ms, 0).to_numpy()
    seconds = np.floor_divide(values, 1000).astype("datetime64[s]")
    text = np.char.add(np.datetime_as_string(seconds, unit="s"), "Z").tolist()
    if epoch_ms.null_count:
        text = [
            None if n else t for t, n in zip(text, pc.is_null(epoch_ms).to_pylist(), strict=True)
        ]
    return text


def rows_of(table: pa.Table) -> list[dict[str, Any]]:
    """``table``'s rows as dicts, strings that are not UTF-8 repaired (:func:`texts`)."""
    values = {
        name: texts(col) if pa.types.is_string(col.type) else col.to_pylist()
        for name, col in zip(table.column_names, table.columns, strict=True)
    }
    return [dict(zip(values, row, strict=True)) for row in zip(*values.values(), strict=True)]


def complete_mask(stage: StageContext, output: str, start_ms: pa.ChunkedArray) -> np.ndarray:
    """:meth:`StageContext._complete` over Arrow: rows whose window holds every event."""
    since = stage.since.get(output)
    values = start_ms.to_numpy()
    return np.ones(len(values), dtype=bool) if since is None else values > since


def of_views(table: pa.Table, *views: str) -> np.ndarray:
    """The rows of ``table`` (panes) of any of ``views``."""
    return pc.is_in(table["view"], pa.array(list(views), pa.string())).to_numpy(
        zero_copy_only=False
    )


def newly_final(end_ms: pa.ChunkedArray, final_until: int | None, watermark: int) -> np.ndarray:
    """Panes and windows ending in ``(final_until, watermark]``: final in this batch."""
    end = end_ms.to_numpy()
    newly = end <= watermark
    if final_until is not None:
        newly &= end > final_until
    return newly


@functools.cache
def arrow_schema(name: str) -> pa.Schema:
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


def publish_events(
    stage: StageContext,
    rows: pa.Table,
    on_time: pa.Table,
    not_quarantined: np.ndarray,
    is_late: np.ndarray,
    watermark_ms: int | None,
    corrupt: dict[str, str],
    write: IngestBatchWrite,
    ahead_rows: pa.Table | None = None,
) -> None:
    """The events, late events and quarantined lines (``events_task`` of the Spark steps);
    ``not_quarantined``: the rows that are events or lines the filter left out (counted, not
    quarantined); ``ahead_rows``: the raw text and file of the events the in-batch rule
    quarantined."""
    batch_id = write.batch_id
    out = stage.output_dir
    with stage._timed("events"):
        if write.events:
            stage.publish.publish_table(
                conformed(on_time.select(list(EVENT_COLUMNS)), "events"),
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
                conformed(late, "late_events"), out / "late_events", batch_id, stage._spark
            )
            stage._step("published_late_events", batch_id)
            first = late.slice(0, _EXAMPLES_PER_BATCH)
            event_ms = pc.cast(pc.cast(first["event_time"], pa.int64()), pa.int64())
            write.late_examples = [
                (batch_id, t, iso_ms(watermark_ms), host, path, source)
                for t, host, path, source in zip(
                    iso_texts(pc.divide(event_ms, 1000)),
                    texts(first["client_host"]),
                    texts(first["url_path"]),
                    texts(first["source_file"]),
                    strict=True,
                )
            ]
        if write.quarantined or corrupt:
            bad = rows.filter(pa.array(~not_quarantined))
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
                conformed(quarantine, "quarantine"), out / "quarantine", batch_id, stage._spark
            )
            stage._step("published_quarantine", batch_id)
            examples = files[:_EXAMPLES_PER_BATCH]
            if write.quarantined:
                first = quarantine.slice(0, _EXAMPLES_PER_BATCH)
                examples += list(zip(*(texts(first[c]) for c in first.column_names), strict=True))
            write.quarantine_examples = [(batch_id, *r) for r in examples[:_EXAMPLES_PER_BATCH]]


def conformed(table: pa.Table, name: str) -> pa.Table:
    """``table`` in the Arrow schema of output ``name``."""
    return table.cast(arrow_schema(name))


def publish_windows(
    stage: StageContext,
    merged: pa.Table,
    final: np.ndarray,
    windows: pa.Table | None,
    prev: SnapshotMeta,
    next_watermark: int,
    write: IngestBatchWrite,
) -> None:
    """The windows that became final, an output each (``publish_windows`` of the Spark
    steps): each exactly once, in one micro-batch. ``final`` marks the panes of ``merged``
    final in this batch (:func:`newly_final`)."""
    s = stage.settings
    out = stage.output_dir
    batch_id = write.batch_id

    def publish(rows: pa.Table, output: str) -> None:
        with stage._timed("windows"):
            stage.publish.publish_table(rows, out / output, batch_id, stage._spark)

    def complete(output: str, *views: str) -> pa.Table:
        """The final and complete panes of ``views``: one filter, so that a backfill's
        panes (every view's, almost all final) are not copied once more, or once an output."""
        keep = final & complete_mask(stage, output, merged["start_ms"]) & of_views(merged, *views)
        return merged.filter(pa.array(keep))

    if "traffic_per_minute" in s.outputs:
        publish(traffic_rows(complete("traffic_per_minute", "traffic")), "traffic_per_minute")
    if "unique_visitors" in s.outputs:
        publish(visitor_rows(complete("unique_visitors", "visitors")), "unique_visitors")
    if windows is not None:
        keep = newly_final(windows["end_ms"], prev.final_until_ms, next_watermark)
        keep &= complete_mask(stage, "trending_pages", windows["start_ms"])
        publish(trending_rows(windows.filter(pa.array(keep))), "trending_pages")
    for output, view in DIMENSION_OUTPUTS.items():
        if output in s.outputs:
            publish(dimension_rows(complete(output, view), view), output)
    if "traffic_by_panel" in s.outputs:
        panels = complete("traffic_by_panel", *PANEL_VIEWS, DAILY_VIEW)
        publish(panel_rows(panels), "traffic_by_panel")
    if "top_clients" in s.outputs:
        publish(top_client_rows(complete("top_clients", "clients"), s.top), "top_clients")


def score_alerts(
    stage: StageContext,
    merged: pa.Table,
    final: np.ndarray | None,
    state: pa.Table,
    next_watermark: int,
    write: IngestBatchWrite,
) -> pa.Table:
    """The final minutes of the site and of each content page (the panes of ``merged`` that
    ``final`` marks) scored against the detectors' state
    (:func:`logstream.analytics.alerts.score_minutes`' steps, on the driver); returns the
    detectors' new state. ``final`` None: the watermark passed no minute."""
    if final is None:
        return state
    minutes = merged.filter(
        pa.array(
            final
            & of_views(merged, "traffic", "pages")
            & complete_mask(stage, "alerts", merged["start_ms"])
        )
    )
    is_site = pc.equal(minutes["view"], "traffic")
    series = pc.if_else(is_site, pa.scalar(SITE_SERIES), minutes["key"])
    alerts, new_state = score_series(
        texts(series),
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
            for r, ws, we in zip(
                rows_of(first), iso_texts(start_ms), iso_texts(end_ms), strict=True
            )
        ]
    return new_state


def close_sessions(
    stage: StageContext,
    on_time: pa.Table,
    open_sessions: pa.Table,
    next_watermark: int,
    write: IngestBatchWrite,
    closes: bool,
) -> pa.Table:
    """:func:`logstream.pipeline.ingest.sessions.close_sessions` on the driver: returns the
    open sessions of the new snapshot.

    Unlike the Spark steps, the summaries are merged into the open sessions in every
    micro-batch, not only in one that closes sessions: on the driver the merge costs
    milliseconds, and the snapshot written every micro-batch then holds one row per open
    session instead of up to a minute's summaries beside them (the NASA day fed at 10,000
    lines/s: 27,000 rows instead of 3,300). Merging is associative, so the sessions are the
    same.
    """
    s = stage.settings
    parts = session_parts(on_time) if write.events else ARROW_PARTS_SCHEMA.empty_table()
    merged = merge_sessions(parts, open_sessions, s.session_gap_ms)
    if not closes:
        return merged
    closed, still_open = split_closed(merged, s.session_gap_ms, next_watermark)
    since = stage.since.get("sessions")
    if since is not None:  # a visitor seen before `since` may have started earlier
        closed = closed.filter(pc.greater(closed["first_ms"], since + s.session_gap_ms))
    if not closed.num_rows:
        return still_open
    rows = closed_rows(closed)
    stage.publish.publish_table(rows, stage.output_dir / "sessions", write.batch_id, stage._spark)
    window_ms = int(seconds_of(s.session_stats_window) * 1000)
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
        for r, ws, we in zip(rows_of(latest), iso_texts(start_ms), iso_texts(end_ms), strict=True)
    ][::-1]
    write.session_stats = merged_stats(stage, fresh)
    return still_open


def merged_stats(stage: StageContext, fresh: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
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
def seconds_of(interval: str) -> float:
    from logstream.pipeline.config import interval_seconds

    return interval_seconds(interval)
