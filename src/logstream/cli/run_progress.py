"""``logstream run``'s progress lines and its closing summary (standard error)."""

from __future__ import annotations

import contextlib
import glob
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from logstream.monitoring.kafka import KAFKA_LOST
from logstream.units import plural

__all__ = [
    "BACKLOG_BYTES",
    "backlog_bytes",
    "backlog_progress",
    "follow_losses_text",
    "kafka_text",
    "print_summary",
    "progress_printer",
]


def follow_losses_text(losses: dict[str, int] | None) -> str:
    """``; N bytes (~M lines) lost to rotation …`` when the follow source lost any, else ``""``.

    ``losses`` has the follow source's running ``lost_bytes`` and ``lost_lines`` (an
    estimate), as a progress row's ``follow_losses`` or, with a ``follow_`` prefix, as
    :meth:`~logstream.serving.ServingStore.follow_losses` returns them.
    """
    if not losses:
        return ""
    lost = losses.get("lost_bytes", losses.get("follow_lost_bytes", 0))
    lines = losses.get("lost_lines", losses.get("follow_lost_lines", 0))
    if not lost:
        return ""
    return (
        f"; [yellow]{plural(lost, 'byte')} (~{plural(lines, 'line')}) lost to rotation"
        "[/yellow] (docs/follow.md)"
    )


def kafka_text(kafka: dict[str, Any] | None) -> str:
    """``; Kafka lag 120`` (and the messages lost, when any) of a progress row's Kafka
    source (:func:`logstream.monitoring.kafka.kafka_progress`), else ``""``. Spark reports no
    newest offsets for a micro-batch planned before a restart (read again from its offset
    log): its lag is ``–``, and the line says why."""
    if not kafka:
        return ""
    if kafka.get("lag") is None:
        text = (
            "; Kafka lag – (Spark reports no newest offsets for a micro-batch planned before "
            "a restart)"
        )
    else:
        text = f"; Kafka lag {kafka['lag']:,}"
    if kafka.get("lost"):
        text += (
            f"; [yellow]{plural(kafka['lost'], 'message')} deleted before they were read"
            "[/yellow] (docs/kafka.md)"
        )
    return text


def _input_rate(row: dict[str, Any]) -> str:
    """``in 1,234/s``; for a micro-batch whose input Spark could not time (the first of a run:
    ``input_rows_per_s`` None with rows), a dash and why."""
    rate = row.get("input_rows_per_s")
    if rate is None and row.get("num_input_rows"):
        return "in –/s (first micro-batch: no earlier trigger to time it)"
    return f"in {rate or 0:,.0f}/s"


def progress_printer(console: Console, ref: list[Any]) -> Any:
    """A progress listener printing one line per micro-batch of a query with input (or a new
    follow loss): rows, rates, duration, watermark, state rows and the running totals.

    ``ref`` holds the pipeline once it exists (empty before: nothing is printed).
    """
    reported = [0]  # lost bytes printed so far: a loss found in an empty micro-batch shows too

    def show(row: dict[str, Any]) -> None:
        lost = (row.get("follow_losses") or {}).get("lost_bytes", 0)
        if not ref or not (row.get("num_input_rows") or lost > reported[0]):
            return
        reported[0] = max(reported[0], lost)
        totals = ref[0].totals
        state_rows = row.get("state_rows") or 0  # the deduplication operator's (Spark)
        ingest = getattr(ref[0], "ingest", None)
        if ingest is not None:  # open panes, sessions and series of the analytics snapshot
            state_rows += ingest.state.last_rows or 0
        watermark = row.get("watermark")
        if row["query"] == "ingest":
            # logstream's own event-time watermark (Spark's, with deduplication on, is the
            # arrival-time watermark of that operator)
            watermark = (
                None
                if totals.watermark_ms is None
                else datetime.fromtimestamp(totals.watermark_ms / 1000, UTC).isoformat()
            )
        console.print(
            f"[bold]{row['query']}[/bold] batch {row['batch_id']}: "
            f"{plural(row['num_input_rows'], 'row')}, " + _input_rate(row) + ", "
            f"processed {row.get('processed_rows_per_s') or 0:,.0f}/s, "
            f"{row['batch_duration_ms']:,} ms; watermark {watermark or '-'}; "
            f"state rows {state_rows:,}; events {totals.events:,}, "
            f"late {totals.late_events:,}, quarantined {totals.quarantined:,}"
            + (f", filtered {totals.filtered:,}" if totals.filtered else "")
            + (
                f"; {plural(dups, 'duplicate')} dropped"
                if (dups := row.get("duplicates_dropped"))
                else ""
            )
            + follow_losses_text(row.get("follow_losses"))
            + kafka_text(row.get("kafka"))
        )

    return show


def print_summary(console: Console, pipeline: Any, outputs: str) -> None:
    """The closing line: events, late, quarantined, duplicates, micro-batches, ``outputs``
    (where they are) and the follow source's losses."""
    t = pipeline.totals
    if pipeline.cfg.dedup:
        dedup = f"{pipeline.store.counters()['duplicates']:,} duplicate lines dropped"
    else:
        dedup = "deduplication off"
    console.print(
        f"done: {t.events:,} on-time events, {t.late_events:,} late, {t.quarantined:,} "
        f"quarantined, {f'{t.filtered:,} filtered, ' if t.filtered else ''}{dedup}, "
        f"in {plural(t.batches, 'micro-batch')}; {outputs}"
        + (follow_losses_text(pipeline.store.follow_losses()) if pipeline.cfg.follow else "")
        + (
            f"; {plural(int(lost), 'Kafka message')} deleted before they were read"
            if pipeline.cfg.source == "kafka" and (lost := pipeline.store.get_state(KAFKA_LOST))
            else ""
        )
    )


#: A backlog this large (bytes) when ``logstream run`` starts gets a progress bar.
BACKLOG_BYTES = 4 * 1024 * 1024

#: The steps of a run's first micro-batch over a backlog, as its bar names them.
BACKLOG_STEPS = {"read": "reading the backlog", "outputs": "the first micro-batch's outputs"}


def backlog_bytes(cfg: Any) -> int:
    """The bytes a run's first micro-batch reads: the files of ``--input-dir`` or of
    ``--follow`` when its checkpoint has committed no micro-batch yet (a first start, as a
    backfill); 0 for another source or a run that continues."""
    from logstream.pipeline.identity import committed_queries

    if committed_queries(cfg.state_dir):  # a restart reads what came since, not a backlog
        return 0
    if cfg.source == "dir" and cfg.input_dir is not None:
        files = [p for p in Path(cfg.input_dir).rglob("*") if not p.name.startswith((".", "_"))]
    elif cfg.source == "follow":
        files = [Path(f) for pattern in cfg.follow or () for f in glob.glob(pattern)]
    else:
        return 0
    total = 0
    for path in files:
        with contextlib.suppress(OSError):
            if path.is_file():
                total += path.stat().st_size
    return total


def backlog_progress(
    spark: Any, cfg: Any, console: Console, quiet: bool, finished: Callable[[], bool]
) -> contextlib.AbstractContextManager[Any]:
    """``logstream run``'s bar over a backlog, as ``logstream batch``'s: the backlog's parts
    read of their number, then the first micro-batch's outputs, until ``finished`` (its
    progress line is printed). Only on a terminal, without ``--quiet``, for a first start
    with at least :data:`BACKLOG_BYTES` to read; otherwise nothing."""
    from logstream.connect import is_connect
    from logstream.report.progress import StepProgress

    size = backlog_bytes(cfg)
    if quiet or not console.is_terminal or size < BACKLOG_BYTES or is_connect(spark):
        return contextlib.nullcontext()  # through Spark Connect: no SparkContext to poll
    return StepProgress(
        spark.sparkContext,
        console,
        steps=BACKLOG_STEPS,
        input_bytes=size,
        until=finished,
        advance_when_read=True,
    )
