"""Where replayed lines go: the sink interface, plus in-memory and file sinks.

The replay loop calls :meth:`LineSink.write` for every line, :meth:`LineSink.flush` before it
sleeps (and at least every few tens of milliseconds), :meth:`LineSink.tick` while it waits, and
:meth:`LineSink.close` at the end. The TCP server (:mod:`logstream.replay.tcp`) and the chunk
directory (:mod:`logstream.replay.chunks`) are sinks too.
"""

from __future__ import annotations

import gzip
import os
import sys
from pathlib import Path
from typing import BinaryIO

from logstream.errors import ConfigError
from logstream.replay.reader import ENCODING, ENCODING_ERRORS

__all__ = ["FileSink", "LineSink", "ListSink"]


class LineSink:
    """Base class of the sinks; every method but :meth:`write` is optional."""

    def start(self) -> None:
        """Get ready before the first line (the TCP sink waits for a client here)."""

    def write(self, line: str) -> None:
        """Accept one line, without its line ending (it may be buffered until :meth:`flush`)."""
        raise NotImplementedError

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
