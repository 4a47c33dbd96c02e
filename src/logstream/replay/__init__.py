"""Replay real logs as a live stream, for Spark's socket and file sources.

``logstream replay`` reads plain or gzip logs in order and in constant memory, paces each line
by its own event time (divided by a speed-up) or at a fixed rate, and sends it to TCP clients
(:class:`TcpLineServer`, what ``spark.readStream.format("socket")`` connects to) or into
rotated chunk files (:class:`ChunkDirSink`, the contract of Spark's file source). It can loop,
rebase event times to the present, and send a seeded fraction of lines late to exercise
watermarks. See ``docs/replay.md``.

Examples
--------
>>> from logstream.replay import ListSink, ReplayOptions, replay_files
>>> sink = ListSink()
>>> summary = replay_files(["day.log.gz"], sink, ReplayOptions(speedup=1440))  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from logstream.replay.chunks import ChunkDirSink
from logstream.replay.clock import Clock, ManualClock, SystemClock
from logstream.replay.engine import LateLine, Replayer, ReplayOptions, ReplaySummary
from logstream.replay.pacing import Pacer
from logstream.replay.reader import Record, expand_files, iter_file_records, iter_lines, open_log
from logstream.replay.sinks import FileSink, LineSink, ListSink, RotatingFileSink
from logstream.replay.tcp import DEFAULT_HOST, TcpLineServer, parse_host_port
from logstream.replay.timeshift import ClfTime, find_clf_time, format_clf_time, shift_line
from logstream.replay.units import parse_duration

__all__ = [
    "DEFAULT_HOST",
    "ChunkDirSink",
    "ClfTime",
    "Clock",
    "FileSink",
    "LateLine",
    "LineSink",
    "ListSink",
    "ManualClock",
    "Pacer",
    "Record",
    "ReplayOptions",
    "ReplaySummary",
    "Replayer",
    "RotatingFileSink",
    "SystemClock",
    "TcpLineServer",
    "expand_files",
    "find_clf_time",
    "format_clf_time",
    "iter_file_records",
    "iter_lines",
    "open_log",
    "parse_duration",
    "parse_host_port",
    "replay_files",
    "shift_line",
]


def replay_files(
    paths: Sequence[str | os.PathLike[str]],
    sink: LineSink,
    options: ReplayOptions | None = None,
    *,
    clock: Clock | None = None,
    progress: Callable[[ReplaySummary], None] | None = None,
) -> ReplaySummary:
    """Replay log files into ``sink`` and return the summary.

    Parameters
    ----------
    paths : sequence of str or path-like
        Files (plain or gzip), directories or globs, replayed in this order.
    sink : LineSink
    options : ReplayOptions, optional
        Default: real-time pacing (``speedup = 1``), one pass.
    clock : Clock, optional
    progress : callable, optional
        See :class:`Replayer`.

    Returns
    -------
    ReplaySummary

    Raises
    ------
    InputPathError
        When a path does not exist (checked before the sink is started).
    """
    files = expand_files(paths)
    return Replayer(
        lambda: iter_file_records(files), sink, options, clock=clock, progress=progress
    ).run()
