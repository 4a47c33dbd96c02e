"""Where replayed lines go: the sink interface, plus in-memory and file sinks.

The replay loop calls :meth:`LineSink.write` for every line, :meth:`LineSink.flush` before it
sleeps (and at least every few tens of milliseconds), :meth:`LineSink.tick` while it waits, and
:meth:`LineSink.close` at the end. The TCP server (:mod:`logstream.replay.tcp`) and the chunk
directory (:mod:`logstream.replay.chunks`) are sinks too.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from logstream.errors import ConfigError
from logstream.replay.reader import ENCODING, ENCODING_ERRORS

__all__ = ["FileSink", "LineSink", "ListSink", "RotatingFileSink"]


class LineSink:
    """Base class of the sinks; every method but :meth:`write` is optional."""

    def start(self) -> None:
        """Get ready before the first line (the TCP sink waits for a client here)."""

    def write(self, line: str) -> None:
        """Accept one line, without its line ending (it may be buffered until :meth:`flush`)."""
        raise NotImplementedError

    def write_at(self, line: str, event_s: float | None) -> None:
        """Accept one line with its event time (epoch seconds, None when unknown).

        The replay calls this; sinks that act on event time (:class:`RotatingFileSink`)
        override it, the others just :meth:`write`.
        """
        self.write(line)

    def flush(self) -> float:
        """Deliver buffered lines.

        Returns
        -------
        float
            Seconds spent waiting for a consumer (a TCP client) rather than delivering; the
            replay pushes its schedule back by as much, so a pause causes no burst.
        """
        return 0.0

    def tick(self) -> None:
        """Let time-based work happen (rotate a chunk that is old enough)."""

    def stop(self) -> None:
        """Ask blocking waits to end (safe from any thread); undeliverable lines are dropped."""

    def close(self) -> None:
        """Flush and release everything; the sink is not used afterwards."""
        self.flush()

    def status(self) -> str:
        """A short description for the progress display (``2 clients``, ``12 chunks``)."""
        return ""

    def info(self) -> dict[str, object]:
        """Counters for the replay summary (JSON-serialisable)."""
        return {}


class ListSink(LineSink):
    """Keep every line in a list (tests, notebooks).

    Attributes
    ----------
    lines : list of str
        The lines written, in order.
    flushes : int
        How many times :meth:`flush` was called.
    """

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.flushes = 0

    def write(self, line: str) -> None:
        """Append ``line``."""
        self.lines.append(line)

    def flush(self) -> float:
        """Count the call; nothing is buffered."""
        self.flushes += 1
        return 0.0

    def info(self) -> dict[str, object]:
        """Return ``{"lines": n}``."""
        return {"lines": len(self.lines)}


class FileSink(LineSink):
    """Write lines to a file (gzip when the name ends in ``.gz``) or to standard output.

    Parameters
    ----------
    path : str or path-like
        The file, created or truncated; ``-`` writes to standard output.

    Raises
    ------
    ConfigError
        When the file's directory does not exist or the file cannot be created.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.lines_written = 0
        self._fh: BinaryIO
        self._own = self.path != "-"
        if not self._own:
            self._fh = sys.stdout.buffer
            return
        target = Path(self.path)
        if not target.parent.is_dir():
            raise ConfigError(
                f"cannot write {self.path!r}: directory {str(target.parent)!r} does not exist"
            )
        try:
            if self.path.endswith(".gz"):
                self._fh = gzip.GzipFile(filename=self.path, mode="wb", mtime=0)  # type: ignore[assignment]
            else:
                self._fh = open(self.path, "wb")
        except OSError as exc:
            raise ConfigError(f"cannot write {self.path!r}: {exc.strerror}") from exc

    def write(self, line: str) -> None:
        """Write ``line`` and a ``\\n``."""
        self._fh.write((line + "\n").encode(ENCODING, ENCODING_ERRORS))
        self.lines_written += 1

    def flush(self) -> float:
        """Flush the file buffer."""
        self._fh.flush()
        return 0.0

    def close(self) -> None:
        """Flush, and close the file (standard output is only flushed)."""
        self._fh.flush()
        if self._own:
            self._fh.close()

    def info(self) -> dict[str, object]:
        """Return the path and the number of lines written."""
        return {"path": self.path, "lines": self.lines_written}


class RotatingFileSink(LineSink):
    """Append lines to a log file as a web server does, and rotate it as logrotate does.

    The file grows line by line (flushed at each :meth:`flush`, so a follower sees whole lines
    and, between flushes, possibly a last line without its ``\\n``). Every ``rotate_every_s``
    seconds of **event time** (the replayed lines' own timestamps, so the rotation falls on the
    same log lines at any speed-up) it is rotated the way ``logrotate`` with ``rotate KEEP``,
    ``compress`` and ``delaycompress`` rotates a server log:

    1. ``NAME.K.gz`` → ``NAME.(K+1).gz`` for the older rotations (beyond ``keep``: deleted);
    2. ``NAME.1`` (the previous rotation, left uncompressed so a reader can finish it) is
       compressed into ``NAME.2.gz`` and deleted;
    3. ``NAME`` → ``NAME.1`` by rename, and a new, empty ``NAME`` is created.

    This is what ``logstream run --follow "NAME*"`` reads exactly once (docs/follow.md).

    Parameters
    ----------
    path : str or path-like
        The growing log (``out/demo/landing/access.log``); its directory is created when
        missing. An existing file is appended to.
    rotate_every_s : float, default 10800
        Event seconds per file (3 hours). A line without an event time never rotates.
    keep : int, default 4
        Rotations kept besides the live file (``NAME.1`` and ``NAME.2.gz`` … ``NAME.KEEP.gz``).
    before_compress : callable, optional
        Called with the path of ``NAME.1`` before step 2 compresses and deletes it; it may
        block, pausing the writer, until a follower has read the file to its end (the demo's
        pipeline, :func:`logstream.sources.follow.read_to_end`).

    Raises
    ------
    ConfigError
        When the directory cannot be created, ``path`` is a directory, or a limit is not
        positive.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        rotate_every_s: float = 10_800.0,
        keep: int = 4,
        before_compress: Callable[[Path], None] | None = None,
    ) -> None:
        if rotate_every_s <= 0:
            raise ConfigError(f"rotation period must be positive, got {rotate_every_s!r} s")
        if keep < 1:
            raise ConfigError(f"rotations kept must be at least 1, got {keep!r}")
        self.path = Path(path)
        self.rotate_every_s = float(rotate_every_s)
        self.keep = keep
        self.before_compress = before_compress
        self.lines_written = 0
        self.rotations = 0
        self._period: int | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh: BinaryIO = open(self.path, "ab")
        except OSError as exc:
            raise ConfigError(f"cannot write {str(self.path)!r}: {exc.strerror}") from exc

    def _rotated(self, n: int) -> Path:
        name = f"{self.path.name}.{n}" + ("" if n == 1 else ".gz")
        return self.path.with_name(name)

    def rotate(self) -> None:
        """Rotate now (steps 1–3 of the class docstring)."""
        self._fh.flush()
        self._fh.close()
        self._rotated(self.keep).unlink(missing_ok=True)
        for n in range(self.keep - 1, 1, -1):
            if self._rotated(n).exists():
                os.replace(self._rotated(n), self._rotated(n + 1))
        first = self._rotated(1)
        if first.exists():
            if self.before_compress is not None:
                self.before_compress(first)
            if self.keep >= 2:
                with open(first, "rb") as src, gzip.open(self._rotated(2), "wb") as dst:
                    shutil.copyfileobj(src, dst)
            first.unlink()
        os.replace(self.path, first)
        self._fh = open(self.path, "ab")
        self.rotations += 1

    def write_at(self, line: str, event_s: float | None) -> None:
        """Rotate first when ``event_s`` starts a new period, then write ``line``."""
        if event_s is not None:
            period = int(event_s // self.rotate_every_s)
            if self._period is not None and period > self._period:
                self.rotate()
            if self._period is None or period > self._period:
                self._period = period
        self.write(line)

    def write(self, line: str) -> None:
        """Append ``line`` and a ``\\n`` (buffered until :meth:`flush`)."""
        self._fh.write((line + "\n").encode(ENCODING, ENCODING_ERRORS))
        self.lines_written += 1

    def flush(self) -> float:
        """Hand the buffered lines to the file system (a follower sees them now)."""
        self._fh.flush()
        return 0.0

    def close(self) -> None:
        """Flush and close the live file (it is not rotated)."""
        self._fh.flush()
        self._fh.close()

    def status(self) -> str:
        """``3 rotations``."""
        return f"{self.rotations} rotations"

    def info(self) -> dict[str, object]:
        """Return the path, lines written and rotations."""
        return {"path": str(self.path), "lines": self.lines_written, "rotations": self.rotations}
