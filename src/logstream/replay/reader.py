"""Stream log lines from plain or gzip files, in order, in constant memory.

Lines are decoded as UTF-8 with ``surrogateescape``, so bytes that are not valid UTF-8 survive
a round trip unchanged: a replayed or chunked line holds exactly the bytes of the input line.
A line ends at ``\\n``; a ``\\r`` before it (CRLF files) is dropped, and the sinks end every
line with ``\\n``.
"""

from __future__ import annotations

import glob
import gzip
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from logstream.errors import InputPathError
from logstream.replay.timeshift import ClfTime, find_clf_time, find_iso_time

__all__ = [
    "ENCODING",
    "ENCODING_ERRORS",
    "Record",
    "expand_files",
    "iter_file_records",
    "iter_lines",
    "open_log",
]

ENCODING = "utf-8"
#: Error handler that round-trips any byte (used to decode and to encode lines).
ENCODING_ERRORS = "surrogateescape"
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True, slots=True)
class Record:
    """One line on its way to a sink.

    Attributes
    ----------
    text : str
        The line, without its line ending.
    event_s : float or None
        The line's own event time, seconds since the Unix epoch (UTC); None when it cannot be
        read (the replay then uses the previous line's time).
    source : str
        Where the line comes from (a file path, or ``generate``).
    line_number : int
        1-based line number within ``source``.
    clf_time : ClfTime or None
        Where the time text is in ``text`` (to rewrite it); None when unknown.
    """

    text: str
    event_s: float | None
    source: str
    line_number: int
    clf_time: ClfTime | None = None


def expand_files(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Resolve replay inputs to files, keeping the order given.

    Parameters
    ----------
    paths : sequence of str or path-like
        Files, directories (their non-hidden files, sorted by name) or glob patterns (sorted).

    Returns
    -------
    list of pathlib.Path

    Raises
    ------
    InputPathError
        When no path is given, or a path does not exist, or a directory or glob has no file.
    """
    if not paths:
        raise InputPathError("no input given: name at least one log file to replay")
    files: list[Path] = []
    for raw in paths:
        text = os.fspath(raw)
        p = Path(text).expanduser()
        if p.is_file():
            files.append(p)
        elif p.is_dir():
            found = sorted(
                f for f in p.iterdir() if f.is_file() and not f.name.startswith((".", "_"))
            )
            if not found:
                raise InputPathError(f"input directory {text!r} holds no log file")
            files.extend(found)
        elif set("*?[") & set(text):
            found = sorted(
                Path(m) for m in glob.glob(os.path.expanduser(text)) if Path(m).is_file()
            )
            if not found:
                raise InputPathError(f"input glob {text!r} matches no file: check the pattern")
            files.extend(found)
        else:
            raise InputPathError(
                f"input {text!r} does not exist: give a log file (plain or .gz), a directory "
                "or a quoted glob"
            )
    return files


def open_log(path: str | os.PathLike[str]) -> BinaryIO:
    """Open a log file for binary reading, decompressing gzip when its magic bytes say so.

    Parameters
    ----------
    path : str or path-like
        A plain or gzip file (the content decides, not the extension).

    Returns
    -------
    BinaryIO
        A buffered binary stream of the (decompressed) content.

    Raises
    ------
    InputPathError
        When the file cannot be opened.
    """
    try:
        raw = open(path, "rb")
    except OSError as exc:
        raise InputPathError(f"cannot read {os.fspath(path)!r}: {exc.strerror}") from exc
    if raw.peek(2)[:2] == _GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def iter_lines(path: str | os.PathLike[str]) -> Iterator[str]:
    """Yield the lines of one file, without line endings, in constant memory.

    Parameters
    ----------
    path : str or path-like
        A plain or gzip log file.

    Yields
    ------
    str
        One line, ``\\n`` and a preceding ``\\r`` removed; undecodable bytes kept as
        surrogates (see :data:`ENCODING_ERRORS`).
    """
    with open_log(path) as fh:
        for raw in fh:
            if raw.endswith(b"\n"):
                raw = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
            yield raw.decode(ENCODING, ENCODING_ERRORS)


def iter_file_records(
    files: Sequence[str | os.PathLike[str]], device_from_file: bool = False
) -> Iterator[Record]:
    """Yield every line of ``files``, in order, with its event time read.

    Parameters
    ----------
    files : sequence of str or path-like
        Plain or gzip files, read one after the other.
    device_from_file : bool
        Prefix each line with its file's name without extensions and a comma: the device of
        a sensor reading (``occupancy_datatest,"2015-02-02 14:19:00",…``; see
        :mod:`logstream.devices.readings`).

    Yields
    ------
    Record
        ``event_s`` from the line's CLF time, else its first ``yyyy-mm-dd hh:mm:ss`` time
        (UTC; a reading: not rewritten by ``--shift-to-now``); None when it has neither.
    """
    for path in files:
        source = os.fspath(path)
        prefix = Path(source).name.split(".")[0] + "," if device_from_file else ""
        for number, text in enumerate(iter_lines(path), start=1):
            found = find_clf_time(text)
            event_s = None if found is None else float(found.epoch_s)
            if found is None:
                event_s = find_iso_time(text)
            yield Record(
                text=prefix + text,
                event_s=event_s,
                source=source,
                line_number=number,
                clf_time=None if found is None or prefix else found,
            )
