"""A progress bar a user can read for long Spark work: the input read, then the steps by name.

``logstream batch`` on millions of lines, or ``logstream run`` starting with a backlog, is
one long piece of Spark work whose stages appear as it goes: a bar counting Spark's tasks
filled again and again as new stages raised its total (0/1, 1/2, 2/6 … 85/85). This bar has
a fixed total instead, the work's named steps (:data:`REPORT_STEPS` for the batch report):

* while the first step reads the input, the bar moves with the input's parts read, the
  tasks of the first Spark stage (one per file, or per split of a large plain file), and
  names the input's size (``reading 35.5 MB: 3 of 8 parts``);
* then it names each step as the work reaches it (``the sessions, step 4 of 6``) and moves
  one step at a time.

It only moves forward, and is shown only on a terminal and without ``--quiet``
(:func:`progress_enabled`). Spark's public status tracker
(:meth:`pyspark.SparkContext.statusTracker`) is polled from a background thread.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

from logstream.units import human_bytes

if TYPE_CHECKING:
    from pyspark import SparkContext

__all__ = ["REPORT_STEPS", "StepCounts", "StepProgress", "progress_enabled"]

#: The batch report's steps, in order, as :func:`logstream.report.build_report` names its
#: Spark jobs, with what the bar says of each.
REPORT_STEPS: dict[str, str] = {
    "read, parse, aggregate": "reading",
    "tables": "the tables",
    "quarantine": "the quarantine",
    "sessions": "the sessions",
    "reference": "the reference tables",
    "panels": "GoAccess's panels",
}


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
class StepCounts:
    """One poll: the step, how far the work is (``completed`` of ``total``, in steps: the
    first step's fraction is its input's parts read) and the parts of the input read."""

    step: str
    completed: float
    total: int
    parts_done: int
    parts: int
    text: str


class StepProgress:
    """A progress bar over named steps (see the module docstring).

    Use as a context manager around the Spark work, and call :meth:`step` as the work
    reaches each step (``build_report(on_step=…)``). With ``console=None`` nothing is drawn
    (the counts still go to ``on_poll``).

    Parameters
    ----------
    sc : SparkContext
    console : rich.console.Console, optional
        Where to draw the bar; None: no bar.
    steps : mapping of str to str
        The steps in order: the name :meth:`step` is called with → what the bar says.
    input_bytes : int, optional
        Size of the input (bytes), named while the first step reads it.
    interval_s : float
        Seconds between polls.
    on_poll : callable, optional
        Called with each :class:`StepCounts`, from the polling thread, and once at the end.
    until : callable, optional
        Polled with the tracker: once it returns True the work is over (``logstream run``'s
        first micro-batch has ended) and the bar goes.
    advance_when_read : bool
        Move on to the second step by itself once the stage that reads the input has ended
        (every part read), for work that does not call :meth:`step`.
    """

    def __init__(
        self,
        sc: SparkContext,
        console: Console | None = None,
        *,
        steps: dict[str, str] | None = None,
        input_bytes: int | None = None,
        interval_s: float = 0.25,
        on_poll: Callable[[StepCounts], None] | None = None,
        until: Callable[[], bool] | None = None,
        advance_when_read: bool = False,
    ) -> None:
        self._tracker = sc.statusTracker()
        self._console = console
        self._steps: Sequence[tuple[str, str]] = list((steps or REPORT_STEPS).items())
        self._input_bytes = input_bytes
        self._interval_s = interval_s
        self._on_poll = on_poll
        self._until = until
        self._advance_when_read = advance_when_read
        self._index = 0
        self._first_stage: int | None = None  # the stage that reads the input
        self._parts = (0, 0)  # its tasks done, its tasks
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._progress: Progress | None = None
        self._task: Any = None
        self._done = False

    def step(self, name: str) -> None:
        """The work has reached step ``name``; a step before the current one, or a name that
        is not a step, changes nothing (the bar only moves forward)."""
        names = [n for n, _ in self._steps]
        if name in names:
            with self._lock:
                self._index = max(self._index, names.index(name))

    def poll(self) -> StepCounts:
        """Read the tracker once and say where the work is."""
        tracker = self._tracker
        with self._lock:
            index = self._index
            if index == 0:  # the input's parts: the tasks of the first stage seen
                active = list(tracker.getActiveStageIds())
                if self._first_stage is None and active:
                    self._first_stage = min(active)
                if self._first_stage is not None:
                    info = tracker.getStageInfo(self._first_stage)
                    if info is not None:
                        done, total = self._parts
                        self._parts = (
                            max(done, info.numCompletedTasks),
                            max(total, info.numTasks),
                        )
                    read = self._parts[1] and self._parts[0] >= self._parts[1]
                    more = self._advance_when_read and len(self._steps) > 1
                    if more and read and self._first_stage not in active:
                        self._index = index = 1  # the input is read: the next step
            done, parts = self._parts
        total = len(self._steps)
        if self._done:
            return StepCounts("done", total, total, parts, parts, "done")
        fraction = min(done / parts, 1.0) if index == 0 and parts else 0.0
        name, said = self._steps[index]
        if index == 0:
            size = f" {human_bytes(self._input_bytes)}" if self._input_bytes else ""
            text = f"{said}{size}" + (f": {done:,} of {parts:,} parts" if parts else "")
        else:
            text = f"{said}, step {index + 1} of {total}"
        return StepCounts(name, index + fraction, total, done, parts, text)

    def _update(self, counts: StepCounts) -> None:
        if self._on_poll is not None:
            self._on_poll(counts)
        if self._progress is not None:
            self._progress.update(
                self._task, completed=counts.completed, total=counts.total, description=counts.text
            )

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                if self._until is not None and self._until():
                    self._finish()
                    return
                self._update(self.poll())
            except Exception:  # the context is stopping: the bar is only a sign of life
                return

    def _finish(self) -> None:
        """The work is over: the last count, and the bar goes (it is transient)."""
        self._done = True
        self._update(self.poll())
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __enter__(self) -> StepProgress:
        if self._console is not None:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TaskProgressColumn(),
                TimeElapsedColumn(),
                console=self._console,
                transient=True,
            )
            self._task = self._progress.add_task(self._steps[0][1], total=len(self._steps))
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
        if self._progress is None and self._done:  # ended by ``until``
            return
        self._done = exc[0] is None  # every step done
        try:
            self._update(self.poll())
        except Exception:
            pass
        if self._progress is not None:
            self._progress.stop()
