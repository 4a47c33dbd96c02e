"""The reader: a micro-batch's byte ranges, read as Arrow record batches of whole lines.

:func:`plan_ranges` cuts the bytes between two offsets into :class:`FileRange` partitions;
:func:`read_range` reads one in an executor's Python worker, from the followed file or, after a
``copytruncate``, from its copy.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import InputPartition

if TYPE_CHECKING:
    import pyarrow as pa

from logstream.sources.follow.files import (
    _LINE_CAP,
    _MAX_SPLIT,
    _MIN_SPLIT,
    _READ_CHUNK,
    _crc_before,
    _fingerprint,
    _first_line_end,
    _open,
    _open_head,
    _uri,
)
from logstream.sources.follow.offsets import _neighbours

log = logging.getLogger("logstream.sources.follow")


@dataclass(frozen=True)
class FileRange(InputPartition):
    """One Spark task's bytes of one file: the whole lines starting in ``[split_lo, split_hi)``.

    Attributes
    ----------
    path : str
        Where the planner last saw the file.
    dev, ino : int
        Its identity; the reader checks it and looks the inode up if the path changed.
    lo, hi : int
        The micro-batch's byte range of the file; ``hi`` is just after a ``\\n``.
    crc : int
        CRC-32 of the bytes before ``hi`` (as in the offset), checked before reading.
    split_lo, split_hi : int
        This task's share of ``[lo, hi)``: the lines that start in it (a line crossing
        ``split_hi`` belongs to this split, as in Hadoop's line reader).
    fp : str
        The file's fingerprint (as in the offset; "" when unknown) over its first ``fplen``
        bytes: a micro-batch replayed after a ``copytruncate`` reads the range from the copy.
    fplen : int
    """

    path: str
    dev: int
    ino: int
    lo: int
    hi: int
    crc: int
    split_lo: int
    split_hi: int
    fp: str = ""
    fplen: int = 0


def plan_ranges(
    start: Mapping[str, Any],
    end: Mapping[str, Any],
    split_bytes: int | None = None,
    parallelism: int = 1,
) -> list[FileRange]:
    """The byte ranges a micro-batch reads, from its start and end offsets (no file access).

    Parameters
    ----------
    start, end : mapping
        Offsets from :func:`scan`, as Spark logged them.
    split_bytes : int, optional
        Ranges longer than this are split into several tasks. None: the micro-batch's bytes
        divided by ``parallelism``, kept within 1 MiB and 64 MiB.
    parallelism : int
        Tasks that can run at once (Spark's default parallelism), for ``split_bytes=None``.

    Returns
    -------
    list of FileRange
        For each file of ``end``: from its offset in ``start`` (from its ``base`` when it is
        new there or its ``gen`` grew: byte 0 for a new or truncated file, the offset its
        original had for a copy that continues it) to its offset in ``end``, in splits;
        files of ``start`` first, then new ones; empty ranges are left out. The result
        depends only on the two offsets, so a micro-batch replayed after a restart reads the
        same lines.
    """
    before = {
        (int(f["dev"]), int(f["ino"])): (int(f["offset"]), int(f["gen"]))
        for f in start.get("files", [])
    }
    whole: list[tuple[dict[str, Any], int, int]] = []
    # files followed before first (a rotated file's tail before its successor), then new ones
    files = end.get("files", [])
    for f in sorted(files, key=lambda f: (int(f["dev"]), int(f["ino"])) not in before):
        offset, gen = before.get((int(f["dev"]), int(f["ino"])), (0, -1))
        lo = offset if gen == int(f["gen"]) else int(f.get("base") or 0)
        if int(f["offset"]) > lo:
            whole.append((f, lo, int(f["offset"])))
    if split_bytes is None:
        total = sum(hi - lo for _, lo, hi in whole)
        split_bytes = min(_MAX_SPLIT, max(_MIN_SPLIT, -(-total // max(1, parallelism))))
    ranges: list[FileRange] = []
    for f, lo, hi in whole:
        for a in range(lo, hi, max(1, split_bytes)):
            ranges.append(
                FileRange(
                    f["path"],
                    int(f["dev"]),
                    int(f["ino"]),
                    lo,
                    hi,
                    int(f["crc"]),
                    a,
                    min(hi, a + split_bytes),
                    str(f.get("fp") or ""),
                    int(f.get("fplen") or 0),
                )
            )
    return ranges


def _line_start(fd: int, pos: int, lo: int, hi: int) -> int:
    """The first position at or after ``pos`` where a line starts, within ``[lo, hi]``."""
    if pos <= lo:
        return lo
    if pos >= hi:
        return hi
    end = _first_line_end(fd, pos - 1, hi)
    return end if end > pos - 1 else hi


def _arrow_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema([pa.field("value", pa.string()), pa.field("source_file", pa.string())])


def _lines_batch(block: bytes, uri: str, schema: pa.Schema) -> pa.RecordBatch:
    """Arrow batch of the lines of ``block`` (whole lines, ending with ``\\n``)."""
    import pyarrow as pa

    text = block.decode("utf-8", errors="replace")
    lines = text.split("\n")
    lines.pop()  # after the last "\n"
    if "\r" in text:
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    return pa.RecordBatch.from_arrays(
        [pa.array(lines, pa.string()), pa.array([uri] * len(lines), pa.string())], schema=schema
    )


def _range_copy(part: FileRange) -> tuple[int, str] | None:
    """A file beside ``part``'s that holds its bytes: same fingerprint, same CRC-32 before
    ``hi`` (opened; None when there is none)."""
    if not part.fplen:
        return None
    directory = os.path.dirname(part.path)
    for ident, (path, _) in sorted(_neighbours({directory}, {}).items()):
        file = _open_head(path, ident)
        if file is None:
            continue
        head = file.head[: part.fplen]
        if _fingerprint(head) == part.fp and _crc_before(file.fd, part.hi) == part.crc:
            log.info(
                "%s holds bytes %d-%d of %s: read there", file.path, part.lo, part.hi, part.path
            )
            return file.fd, file.path
        os.close(file.fd)
    return None


def read_range(part: FileRange) -> Iterator[pa.RecordBatch]:
    """Read the lines of one :class:`FileRange` as Arrow batches (executor side).

    Parameters
    ----------
    part : FileRange

    Yields
    ------
    pyarrow.RecordBatch
        ``value`` (string, one line without ``\\n`` or ``\\r\\n``; bytes that are not UTF-8
        become U+FFFD) and ``source_file`` (string, the ``file://`` URI the file has now).

    Notes
    -----
    The file is opened by path and its identity checked; if the path now holds another file,
    the inode is looked up in the same directory. When the file vanished or its bytes before
    ``hi`` changed since planning (a micro-batch replayed after a ``copytruncate``), the range
    is read from a file in the same directory with the same fingerprint and the same bytes
    before ``hi`` (the copy). Without one, it yields nothing and logs a warning: reading on
    would give lines that are not those the offset log promised.
    """
    opened = _open(part.path, (part.dev, part.ino))
    if opened is not None and _crc_before(opened[0], part.hi) != part.crc:
        os.close(opened[0])
        opened = None
    if opened is None:
        opened = _range_copy(part)
    if opened is None:
        log.warning(
            "%s (inode %d) vanished or changed before bytes %d-%d were read",
            part.path, part.ino, part.lo, part.hi,
        )  # fmt: skip
        return
    fd, path = opened
    try:
        begin = _line_start(fd, part.split_lo, part.lo, part.hi)
        stop = _line_start(fd, part.split_hi, part.lo, part.hi)
        uri = _uri(path)
        schema = _arrow_schema()
        carry = b""
        skipping = False  # inside a line longer than _LINE_CAP, past its kept start
        pos = begin
        while pos < stop:
            data = os.pread(fd, min(_READ_CHUNK, stop - pos), pos)
            if not data:
                log.warning("%s shrank while bytes %d-%d were read", path, begin, stop)
                return
            pos += len(data)
            if skipping:
                end = data.find(b"\n")
                if end < 0:
                    continue
                data, skipping = data[end:], False
            if carry:
                data, carry = carry + data, b""
            cut = data.rfind(b"\n") + 1
            if cut < len(data):
                data, carry = data[:cut], data[cut:]
                if len(carry) > _LINE_CAP:  # its start says enough: line_too_long
                    carry, skipping = carry[:_LINE_CAP], True
            if data:
                yield _lines_batch(data, uri, schema)
    finally:
        os.close(fd)
