"""A progress bar for long Spark work (``logstream batch`` on millions of lines), driven by
Spark's public status tracker (:meth:`pyspark.SparkContext.statusTracker`).

A background thread polls the tracker: the stages of the running jobs, with their tasks
done of their total. The bar counts the tasks of every stage seen since it started (a stage
that ends keeps its count), so it only moves forward; its text names the active stages. It
is shown only on a terminal and without ``--quiet``: :func:`progress_enabled`.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

if TYPE_CHECKING:
    from pyspark import SparkContext

__all__ = ["SparkProgress", "TaskCounts", "progress_enabled"]


def progress_enabled(quiet: bool, stream: IO[str] | None = None) -> bool:
    """Whether to show a progress bar: not with ``--quiet``, and only when ``stream``
    (default standard output) is a terminal, so that a redirected or piped output stays
    free of it."""
    stream = sys.stdout if stream is None else stream
    if quiet:
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or unusual stream
        return False


@dataclass(frozen=True)
class TaskCounts:
    """One poll of the status tracker: tasks done and known over the stages seen so far,
    and the ids of the stages running now."""

    completed: int
    total: int
    active_stages: tuple[int, ...]


class SparkProgress:
    """Poll ``sc.statusTracker()`` from a background thread and show a Rich progress bar.

    Use as a context manager around the Spark work. With ``console=None`` nothing is shown
    (the counts are still polled and passed to ``on_poll``: a test or a caller's own
    display); the bar is transient, so it is gone when the work ends.

    Parameters
    ----------
    sc : SparkContext
    console : rich.console.Console, optional
        Where to draw the bar; None: no bar.
    interval_s : float
        Seconds between polls.
    on_poll : callable, optional
        Called with each :class:`TaskCounts`, from the polling thread, and once more at the
        end.
    """

    def __init__(
        self,
        sc: SparkContext,
        console: Console | None = None,
        *,
        interval_s: float = 0.25,
        on_poll: Callable[[TaskCounts], None] | None = None,
    ) -> None:
        self._tracker = sc.statusTracker()
        self._console = console
        self._interval_s = interval_s
        self._on_poll = on_poll
        self._stages: dict[int, tuple[int, int]] = {}  # stage id -> (completed, total)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._progress: Progress | None = None
        self._task: Any = None

    def poll(self) -> TaskCounts:
        """Read the tracker once: the tasks of every stage seen since the start.

        Stages are found while they are active; one that is no longer active keeps its
        last count, brought up to date while Spark still knows it.
        """
        tracker = self._tracker
        active = tuple(sorted(tracker.getActiveStageIds()))
        for stage_id in set(active) | set(self._stages):
            info = tracker.getStageInfo(stage_id)
            if info is None:  # forgotten by Spark (retained stages): keep the last count
                continue
            done, total = info.numCompletedTasks, info.numTasks
            before = self._stages.get(stage_id, (0, 0))
            self._stages[stage_id] = (max(done, before[0]), max(total, before[1]))
        completed = sum(min(d, t) for d, t in self._stages.values())
        total = sum(t for _, t in self._stages.values())
        return TaskCounts(completed, total, active)

    def _update(self, counts: TaskCounts) -> None:
        if self._on_poll is not None:
            self._on_poll(counts)
        if self._progress is not None:
            stages = ", ".join(str(s) for s in counts.active_stages) or "–"
            self._progress.update(
                self._task,
                completed=counts.completed,
                total=max(counts.total, 1),
                description=f"Spark stage {stages}",
            )

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self._update(self.poll())
            except Exception:  # the context is stopping: the bar is only a sign of life
                return

    def __enter__(self) -> SparkProgress:
        if self._console is not None:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("tasks"),
                TimeElapsedColumn(),
                console=self._console,
                transient=True,
            )
            self._task = self._progress.add_task("Spark: starting", total=None)
            self._progress.start()
        if self._progress is not None or self._on_poll is not None:  # else nothing to show
            self._thread = threading.Thread(target=self._run, name="spark-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is None:
            return
        self._thread.join()
        try:
            self._update(self.poll())  # the last count: every task of the work done
        except Exception:
            pass
        if self._progress is not None:
            self._progress.stop()
