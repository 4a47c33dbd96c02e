"""Write lines into a directory as rotated chunk files, published by atomic rename.

This is the contract of Spark's file source (``spark.readStream.text(dir)``): a file must be
complete when it appears, because Spark lists the directory and reads each new file once.
Each chunk is written under a hidden temporary name (``.chunk-00000001.log.tmp``; Spark ignores
names starting with ``.`` or ``_``) in the same directory, then renamed with :func:`os.replace`,
which is atomic on a POSIX file system. Chunk names are zero-padded sequence numbers, so they
sort in the order they were written; a new run continues after the highest existing number.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import BinaryIO

from logstream.errors import ConfigError
from logstream.replay.clock import Clock, SystemClock
from logstream.replay.reader import ENCODING, ENCODING_ERRORS
from logstream.replay.sinks import LineSink

__all__ = ["ChunkDirSink"]


class ChunkDirSink(LineSink):
    """Rotate lines into chunk files every ``chunk_seconds`` or ``chunk_lines``.

    Parameters
    ----------
    directory : str or path-like
        Where chunks appear; created (with parents) when missing.
    chunk_lines : int, default 10000
        A chunk is published as soon as it holds this many lines.
    chunk_seconds : float, default 5.0
        A chunk is published once this many seconds (on ``clock``) have passed since its first
        line, even when it holds fewer lines.
    prefix : str, default ``chunk``
        Chunk names are ``{prefix}-{sequence:08d}{suffix}``.
    suffix : str, default ``.log``
    clock : Clock, optional
        Defaults to the system clock.

    Raises
    ------
    ConfigError
        When ``directory`` is a file or cannot be created, or a limit is not positive.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        chunk_lines: int = 10_000,
        chunk_seconds: float = 5.0,
        prefix: str = "chunk",
        suffix: str = ".log",
        clock: Clock | None = None,
    ) -> None:
        if chunk_lines < 1:
            raise ConfigError(f"--chunk-lines must be at least 1, got {chunk_lines}")
        if not chunk_seconds > 0:
            raise ConfigError(f"--chunk-seconds must be positive, got {chunk_seconds}")
        if not prefix or prefix.startswith((".", "_")) or "/" in prefix:
            raise ConfigError(f"chunk prefix {prefix!r} must be a visible file-name start")
        self.directory = Path(directory)
        if self.directory.exists() and not self.directory.is_dir():
            raise ConfigError(f"--dir {str(self.directory)!r} is a file, not a directory")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"cannot create --dir {str(self.directory)!r}: {exc.strerror}"
            ) from exc
        self.chunk_lines = chunk_lines
        self.chunk_seconds = chunk_seconds
        self.prefix = prefix
        self.suffix = suffix
        self.clock = clock or SystemClock()
        self._pattern = re.compile(rf"{re.escape(prefix)}-(\d+){re.escape(suffix)}")
        self._next = self._first_free_number()
        self._fh: BinaryIO | None = None
        self._tmp: Path | None = None
        self._final: Path | None = None
        self._lines_in_chunk = 0
        self._opened_at = 0.0
        self.chunks_written = 0
        self.lines_written = 0
        self.last_published: Path | None = None

    def _first_free_number(self) -> int:
        numbers = [
            int(m.group(1))
            for name in os.listdir(self.directory)
            if (m := self._pattern.fullmatch(name))
        ]
        return max(numbers, default=0) + 1

    def _open(self) -> BinaryIO:
        name = f"{self.prefix}-{self._next:08d}{self.suffix}"
        self._next += 1
        self._final = self.directory / name
        self._tmp = self.directory / f".{name}.tmp"
        self._fh = open(self._tmp, "wb")
        self._lines_in_chunk = 0
        self._opened_at = self.clock.monotonic()
        return self._fh

    def _publish(self) -> None:
        if self._fh is None:
            return
        self._fh.close()
        self._fh = None
        assert self._tmp is not None and self._final is not None
        os.replace(self._tmp, self._final)
        self.last_published = self._final
        self.chunks_written += 1

    def write(self, line: str) -> None:
        """Append ``line`` to the open chunk, opening or publishing chunks as the limits say."""
        fh = self._fh or self._open()
        fh.write((line + "\n").encode(ENCODING, ENCODING_ERRORS))
        self._lines_in_chunk += 1
        self.lines_written += 1
        if self._lines_in_chunk >= self.chunk_lines:
            self._publish()

    def flush(self) -> float:
        """Publish the open chunk if it is old enough (nothing else: the rest stays hidden)."""
        self.tick()
        return 0.0

    def tick(self) -> None:
        """Publish the open chunk once ``chunk_seconds`` have passed since it was opened."""
        if self._fh is not None and self.clock.monotonic() - self._opened_at >= self.chunk_seconds:
            self._publish()

    def close(self) -> None:
        """Publish the last chunk (a chunk with no line is never created)."""
        self._publish()

    def status(self) -> str:
        """``N chunks in DIR``."""
        return f"{self.chunks_written} chunks in {self.directory}"

    def info(self) -> dict[str, object]:
        """Directory, chunk count and line count for the replay summary."""
        return {
            "directory": str(self.directory),
            "chunks_written": self.chunks_written,
            "lines_written": self.lines_written,
        }
