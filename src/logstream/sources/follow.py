"""Follow growing, rotating log files like ``tail -F``, exactly once.

A streaming source written with PySpark's Python Data Source API
(:class:`pyspark.sql.datasource.DataSource`, :class:`~pyspark.sql.datasource.DataSourceStreamReader`
with admission control and ``Trigger.AvailableNow``; PySpark 4.2+). It reads the lines appended
to log files that a server keeps writing, across rename rotation (``access.log`` →
``access.log.1``, new ``access.log``) and ``copytruncate``; Spark's file source cannot: it reads
each file once, when it first appears.

The offset of the source is a JSON-serialisable dict that Spark writes to the query's offset log
before each micro-batch (it also appears as ``sources[].startOffset``/``endOffset`` in the
query's progress)::

    {
      "v": 1,
      "files": [  # sorted by (dev, ino)
        {"dev": 64768, "ino": 1311, "path": "/var/log/nginx/access.log",
         "offset": 48213, "gen": 0, "crc": 2584019622}
      ],
      "truncations": 0,   # running count of files found truncated or rewritten
      "lost_bytes": 0,    # running count of bytes that disappeared unread
      "lost_files": 0     # running count of files that disappeared before their end
    }

* ``dev``, ``ino``: the file's identity (``st_dev``, ``st_ino``); a file is followed by its
  identity, not by its name;
* ``path``: where the planner last saw it (a hint: the reader looks the inode up again in the
  same directory when the path now holds another file);
* ``offset``: bytes read, always just after a ``\\n``, so a micro-batch holds whole lines only;
* ``gen``: how many times this identity was found truncated (or rewritten): a micro-batch whose
  end has a higher ``gen`` than its start reads the file from byte 0;
* ``crc``: CRC-32 of the (up to) 64 bytes before ``offset``. When they no longer match, the file
  was truncated and written again past the old offset (``copytruncate`` racing the planner), or
  the inode was reused by a new file; both count as a truncation and restart at byte 0.

Planning (:func:`scan`, :func:`plan_ranges`) runs on the driver, in Spark's Python planner
process; reading (:meth:`FollowStreamReader.read`) runs in the executors' Python workers, which
must see the same files (see ``docs/follow.md``).
"""

from __future__ import annotations

import glob
import json
import logging
import math
import os
import stat
import zlib
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    SupportsTriggerAvailableNow,
)

from logstream.errors import InputPathError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "COMPRESSED_SUFFIXES",
    "FOLLOW_SOURCE",
    "FileRange",
    "FollowDataSource",
    "FollowStreamReader",
    "check_follow_paths",
    "follow_lines",
    "initial_offset",
    "plan_ranges",
    "read_range",
    "scan",
    "snapshot",
]

log = logging.getLogger(__name__)

#: The short name the source is registered under: ``spark.readStream.format(FOLLOW_SOURCE)``.
FOLLOW_SOURCE = "logstream_follow"

#: Rotated files compressed by logrotate (``access.log.2.gz``): never read as new input, even
#: when the followed glob matches them (their lines were read before compression).
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".zstd", ".lz4", ".lzma", ".zip", ".z")

#: Output schema: one line without its line ending, and the ``file://`` URI of its file.
SCHEMA = "value string, source_file string"

#: Bytes before an offset whose CRC-32 is kept to detect a file rewritten under the same identity.
TAIL_BYTES = 64

_GLOB_CHARS = set("*?[")
_BLOCK = 64 * 1024  # planner: bytes read at a time when searching for a newline
_READ_CHUNK = 4 * 1024 * 1024  # reader: bytes per Arrow record batch (cut at a newline)
_MIN_SPLIT = 1024 * 1024
_MAX_SPLIT = 64 * 1024 * 1024

FileId = tuple[int, int]


# --------------------------------------------------------------------------- paths


def _is_glob(path: str) -> bool:
    return bool(_GLOB_CHARS & set(path))


def _glob_base(pattern: str) -> Path:
    """The longest leading directory of ``pattern`` without glob characters."""
    parts = Path(pattern).parts
    base: list[str] = []
    for part in parts[:-1]:
        if _is_glob(part):
            break
        base.append(part)
    return Path(*base) if base else Path(".")


def check_follow_paths(paths: Sequence[str | os.PathLike[str]]) -> list[str]:
    """Check the files and globs to follow, at start, and return them as absolute paths.

    Parameters
    ----------
    paths : sequence of str or path-like
        Log files or glob patterns (``*``, ``?``, ``[...]``, ``**``; quote them so the shell
        does not expand them); ``file:`` URIs are local paths. A file or glob that matches
        nothing yet is accepted: the log may appear later.

    Returns
    -------
    list of str
        Absolute local paths and patterns, in the given order, without repeats.

    Raises
    ------
    InputPathError
        When no path is given, a path is a remote URI (``hdfs://``, ``s3a://``) or a directory,
        or the directory a file or glob lives in does not exist. The message names the path and
        the fix.
    """
    if not paths:
        raise InputPathError("nothing to follow: name at least one log file or quoted glob")
    checked: list[str] = []
    for raw in paths:
        path = os.fspath(raw)
        if "://" in path and not path.startswith("file:"):
            raise InputPathError(
                f"cannot follow {path!r}: the follow source reads local files only; ship remote "
                "logs to Kafka or to a watched directory and use that source instead"
            )
        if path.startswith("file:"):
            path = unquote(urlparse(path).path)
        p = Path(path).expanduser().absolute()
        if _is_glob(str(p)):
            base = _glob_base(str(p))
            if not base.is_dir():
                raise InputPathError(
                    f"cannot follow {path!r}: its directory {str(base)!r} does not exist; "
                    "create it or fix the pattern (quote it so the shell does not expand it)"
                )
        elif p.is_dir():
            raise InputPathError(
                f"cannot follow {path!r}: it is a directory; give a log file or a quoted glob "
                f"such as {str(p / '*.log')!r}"
            )
        elif not p.parent.is_dir():
            raise InputPathError(
                f"cannot follow {path!r}: its directory {str(p.parent)!r} does not exist; "
                "create it or fix the path (a file that does not exist yet is fine)"
            )
        if str(p) not in checked:
            checked.append(str(p))
    return checked


def _compressed(path: str) -> bool:
    return path.lower().endswith(COMPRESSED_SUFFIXES)


def _ident(st: os.stat_result) -> FileId:
    return (st.st_dev, st.st_ino)


def _stat(path: str) -> os.stat_result | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _discover(patterns: Sequence[str]) -> dict[FileId, tuple[str, os.stat_result]]:
    """Regular, uncompressed files the patterns match now, by identity (first name wins)."""
    found: dict[FileId, tuple[str, os.stat_result]] = {}
    for pattern in patterns:
        names = sorted(glob.glob(pattern, recursive=True)) if _is_glob(pattern) else [pattern]
        for name in names:
            if _compressed(name):
                continue
            st = _stat(name)
            if st is not None:
                found.setdefault(_ident(st), (name, st))
    return found


def _find_inode(directory: str, ident: FileId) -> tuple[str, os.stat_result] | None:
    """The file with identity ``ident`` in ``directory``, whatever its name now, or None."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return None
    for entry in entries:
        try:
            if entry.inode() != ident[1] and not entry.is_symlink():
                continue
        except OSError:
            continue
        st = _stat(entry.path)
        if st is not None and _ident(st) == ident:
            return entry.path, st
    return None


def _locate(path: str, ident: FileId) -> tuple[str, os.stat_result] | None:
    """Where the file ``ident`` last seen at ``path`` is now: there, or renamed beside it."""
    st = _stat(path)
    if st is not None and _ident(st) == ident:
        return path, st
    return _find_inode(os.path.dirname(path), ident)


def _open(path: str, ident: FileId) -> tuple[int, str] | None:
    """Open the file ``ident`` last seen at ``path`` (or renamed beside it), checking identity.

    Returns the descriptor and the path it was opened by, or None when the file is gone. A
    rename between looking the file up and opening it is retried, so rotation never makes the
    file look gone.
    """
    for _ in range(5):
        where = _locate(path, ident)
        if where is None:
            return None
        try:
            fd = os.open(where[0], os.O_RDONLY)
        except FileNotFoundError:
            continue
        if _ident(os.fstat(fd)) == ident:
            return fd, where[0]
        os.close(fd)
    return None


def _uri(path: str) -> str:
    return Path(path).as_uri()


# --------------------------------------------------------------------------- byte search


def _crc_before(fd: int, offset: int) -> int | None:
    """CRC-32 of the (up to) :data:`TAIL_BYTES` bytes before ``offset``; None if cut short."""
    lo = max(0, offset - TAIL_BYTES)
    data = os.pread(fd, offset - lo, lo)
    if len(data) != offset - lo:
        return None
    return zlib.crc32(data)


def _last_line_end(fd: int, lo: int, hi: int) -> int:
    """Position just after the last ``\\n`` in bytes ``[lo, hi)``, or ``lo`` if none."""
    pos = hi
    while pos > lo:
        start = max(lo, pos - _BLOCK)
        data = os.pread(fd, pos - start, start)
        i = data.rfind(b"\n")
        if i >= 0:
            return start + i + 1
        pos = start
    return lo


def _first_line_end(fd: int, lo: int, hi: int) -> int:
    """Position just after the first ``\\n`` in bytes ``[lo, hi)``, or ``lo`` if none."""
    pos = lo
    while pos < hi:
        data = os.pread(fd, min(_BLOCK, hi - pos), pos)
        if not data:
            break
        i = data.find(b"\n")
        if i >= 0:
            return pos + i + 1
        pos += len(data)
    return lo


# --------------------------------------------------------------------------- planning


def initial_offset() -> dict[str, Any]:
    """The offset of a query that has read nothing: every file will be read from byte 0."""
    return {"v": 1, "files": [], "truncations": 0, "lost_bytes": 0, "lost_files": 0}


def _entry(ident: FileId, path: str, offset: int, gen: int, crc: int) -> dict[str, Any]:
    return {
        "dev": ident[0],
        "ino": ident[1],
        "path": path,
        "offset": offset,
        "gen": gen,
        "crc": crc,
    }


def snapshot(patterns: Sequence[str], start: Mapping[str, Any] | None = None) -> dict[FileId, int]:
    """Sizes of the files a ``Trigger.AvailableNow`` run may read: what exists now.

    Parameters
    ----------
    patterns : sequence of str
        As returned by :func:`check_follow_paths`.
    start : mapping, optional
        The run's start offset: the directories of the files it follows are looked at too
        (a followed file may have been renamed there, out of the patterns' reach).

    Returns
    -------
    dict of (int, int) to int
        Size in bytes of every regular file the patterns match and of every regular file in
        their directories and in those of ``start``'s files, by identity ``(st_dev, st_ino)``.
        :func:`scan` given these ``caps`` reads no byte written later.
    """
    matches = _discover(patterns)
    caps = {ident: st.st_size for ident, (_, st) in matches.items()}
    dirs = {os.path.dirname(path) for path, _ in matches.values()}
    dirs |= {str(_glob_base(p)) if _is_glob(p) else os.path.dirname(p) for p in patterns}
    dirs |= {os.path.dirname(f["path"]) for f in (start or {}).get("files", [])}
    for directory in sorted(dirs):
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            st = _stat(entry.path)
            if st is not None:
                caps.setdefault(_ident(st), st.st_size)
    return caps


def scan(
    start: Mapping[str, Any],
    patterns: Sequence[str],
    max_bytes: int | None = None,
    caps: Mapping[FileId, int] | None = None,
    seen: MutableMapping[FileId, int] | None = None,
) -> dict[str, Any]:
    """Plan the end offset of the next micro-batch from ``start`` (driver side).

    Every followed file is found again by its identity: at its last path, under a name the
    patterns match, or renamed in the same directory. New files the patterns match are followed
    from byte 0 (never compressed ones, see :data:`COMPRESSED_SUFFIXES`). Each file advances to
    the last ``\\n`` before its current size, so a line still being written waits.

    Parameters
    ----------
    start : mapping
        The previous offset (:func:`initial_offset` or an earlier result; JSON round trip ok).
    patterns : sequence of str
        Absolute files and globs, as returned by :func:`check_follow_paths`.
    max_bytes : int, optional
        Admission control: at most this many bytes (of all files together) in the micro-batch,
        but always at least one whole line when one is available; None reads all available.
        Files already followed come first, then the oldest modified, so a rotated file is
        finished before its successor is started.
    caps : mapping of (int, int) to int, optional
        ``Trigger.AvailableNow``: read no file beyond its size here (from :func:`snapshot`)
        and start no file missing here.
    seen : mutable mapping of (int, int) to int, optional
        The planner's memory of the last size seen per file, updated in place; it measures
        ``lost_bytes`` when a file disappears or is truncated before being read to its end.

    Returns
    -------
    dict
        The end offset (format in the module docstring): ``start`` itself when nothing changed,
        so that Spark runs no micro-batch.

    Notes
    -----
    * Disappeared: a followed file found nowhere is dropped from the offset; the bytes seen
      but never read are added to ``lost_bytes`` and, if any, ``lost_files`` grows by one.
    * Inode reused: a followed file found only under a name the patterns do not match (a
      rotated name) whose bytes before the offset changed is another file that was given the
      deleted file's inode (e.g. logrotate compressed and deleted ``access.log.1``, then
      ``copytruncate`` created a new ``access.log.1``): it is dropped, not read.
    * Inode reused under a matched name: a followed file found under another name the
      patterns match (``access.log.1`` before, ``access.log`` now) whose bytes before the
      offset changed is a new file that was given a deleted file's inode (logrotate's
      ``delaycompress`` deleted ``access.log.1``, then the server created ``access.log``): it
      is read from byte 0, ``gen`` grows by one, and the old file's unread bytes count as lost.
    * Truncated: a file smaller than its offset, or whose bytes before the offset changed
      (``crc``), under the same name, is read again from byte 0: ``gen`` and ``truncations``
      grow by one, and
      the bytes seen past the old offset count as lost (``copytruncate`` moved them to the
      copy, which is a new file).
    """
    if seen is None:
        seen = {}
    truncations = int(start.get("truncations", 0))
    lost_bytes = int(start.get("lost_bytes", 0))
    lost_files = int(start.get("lost_files", 0))
    tracked = {(int(f["dev"]), int(f["ino"])): f for f in start.get("files", [])}
    matches = _discover(patterns)

    # where is every file now?
    located: dict[FileId, tuple[dict[str, Any], str, os.stat_result]] = {}
    for ident, f in tracked.items():
        where = matches.get(ident) or _locate(f["path"], ident)
        if where is None:
            unread = max(0, seen.pop(ident, f["offset"]) - f["offset"])
            if unread:
                log.warning("%s disappeared with %d bytes unread", f["path"], unread)
                lost_bytes += unread
                lost_files += 1
            continue
        located[ident] = (dict(f), where[0], where[1])
    for ident, (path, st) in matches.items():
        if ident not in located and ident not in tracked and (caps is None or ident in caps):
            located[ident] = (_entry(ident, path, 0, 0, 0), path, st)

    remaining = math.inf if max_bytes is None else max(0, int(max_bytes))
    taken = False
    entries = []
    # budget order: files followed before, then new ones; oldest modification first (a
    # renamed file before its successor)
    order = sorted(
        located, key=lambda i: (i not in tracked, located[i][2].st_mtime_ns, located[i][1])
    )
    for ident in order:
        f, path, _ = located[ident]
        try:
            opened = _open(path, ident)
        except OSError as exc:
            log.warning("cannot open %s to follow it: %s", path, exc)
            opened = None
        if opened is None:  # vanished just now (or unreadable): look again next time
            if ident in tracked:
                entries.append(f)
            continue
        fd, path = opened
        try:
            renamed = f["path"] != path
            f["path"] = path
            size = os.fstat(fd).st_size
            old = f["offset"]
            rewritten = old > 0 and (size < old or _crc_before(fd, old) != f["crc"])
            if rewritten and ident not in matches:
                # found only beside its old path, under a name the patterns do not match, with
                # other bytes: the followed file was deleted and its inode reused by another
                # (logrotate's compress, then copytruncate's copy): stop following it
                unread = max(0, seen.pop(ident, old) - old)
                log.warning(
                    "%s now holds another file (its inode was reused): no longer followed", path
                )
                if unread:
                    lost_bytes += unread
                    lost_files += 1
                continue
            if rewritten:
                lost = max(0, seen.get(ident, old) - old)
                if renamed:  # under another matched name: a new file reusing a deleted inode
                    log.info("%s reuses the inode of a deleted followed file: reading it", path)
                    if lost:
                        lost_files += 1
                else:
                    log.warning("%s was truncated or rewritten: reading it again from 0", path)
                    truncations += 1
                lost_bytes += lost
                f.update(offset=0, gen=f["gen"] + 1, crc=0)
            seen[ident] = size
            begin = f["offset"]
            limit = size if caps is None else min(size, max(begin, caps.get(ident, begin)))
            end = begin
            if limit > begin and remaining > 0:
                end = _last_line_end(fd, begin, min(limit, begin + remaining))
            if end == begin and limit > begin and not taken and max_bytes is not None:
                end = _first_line_end(fd, begin, limit)  # at least one whole line per batch
            if end > begin:
                taken = True
                remaining -= end - begin
                crc = _crc_before(fd, end)
                f.update(offset=end, crc=0 if crc is None else crc)
            entries.append(f)
        finally:
            os.close(fd)

    files = [
        _entry((int(f["dev"]), int(f["ino"])), f["path"], f["offset"], f["gen"], f["crc"])
        for f in sorted(entries, key=lambda f: (int(f["dev"]), int(f["ino"])))
    ]
    end_offset = {
        "v": 1,
        "files": files,
        "truncations": truncations,
        "lost_bytes": lost_bytes,
        "lost_files": lost_files,
    }
    return dict(start) if end_offset == dict(start) else end_offset


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
    """

    path: str
    dev: int
    ino: int
    lo: int
    hi: int
    crc: int
    split_lo: int
    split_hi: int


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
        For each file of ``end``: from its offset in ``start`` (byte 0 when it is new there or
        its ``gen`` grew: truncated) to its offset in ``end``, in splits; files of ``start``
        first, then new ones; empty ranges are left out. The result depends only on the two
        offsets, so a micro-batch replayed after a restart reads the same lines.
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
        lo = offset if gen == int(f["gen"]) else 0
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
                )
            )
    return ranges


# --------------------------------------------------------------------------- reading


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
    the inode is looked up in the same directory. A file that vanished, or whose bytes before
    ``hi`` changed since planning (truncated in between), yields nothing and logs a warning:
    reading on would give lines that are not those the offset log promised.
    """
    opened = _open(part.path, (part.dev, part.ino))
    if opened is None:
        log.warning("%s (inode %d) vanished before its lines were read", part.path, part.ino)
        return
    fd, path = opened
    try:
        if _crc_before(fd, part.hi) != part.crc:
            log.warning("%s changed before bytes %d-%d were read", path, part.lo, part.hi)
            return
        begin = _line_start(fd, part.split_lo, part.lo, part.hi)
        stop = _line_start(fd, part.split_hi, part.lo, part.hi)
        uri = _uri(path)
        schema = _arrow_schema()
        carry = b""
        pos = begin
        while pos < stop:
            data = os.pread(fd, min(_READ_CHUNK, stop - pos), pos)
            if not data:
                log.warning("%s shrank while bytes %d-%d were read", path, begin, stop)
                return
            pos += len(data)
            if carry:
                data, carry = carry + data, b""
            cut = data.rfind(b"\n") + 1
            if cut < len(data):
                data, carry = data[:cut], data[cut:]
            if data:
                yield _lines_batch(data, uri, schema)
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- Spark glue


class FollowStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Stream reader of :class:`FollowDataSource` (planner on the driver, reads on executors).

    Parameters
    ----------
    options : mapping of str to str
        ``paths`` (JSON list of absolute files and globs, from :func:`check_follow_paths`),
        ``maxBytesPerTrigger`` (optional, bytes), ``splitBytes`` (optional, bytes per task)
        and ``parallelism`` (tasks at once, to size the splits when ``splitBytes`` is unset).
    """

    def __init__(self, options: Mapping[str, str]) -> None:
        self.patterns: list[str] = json.loads(options["paths"])
        max_bytes = options.get("maxBytesPerTrigger")
        self.max_bytes = int(max_bytes) if max_bytes else None
        split_bytes = options.get("splitBytes")
        self.split_bytes = int(split_bytes) if split_bytes else None
        self.parallelism = int(options.get("parallelism") or 1)
        self._available_now = False
        self._caps: dict[FileId, int] | None = None
        self._seen: dict[FileId, int] = {}

    def initialOffset(self) -> dict:
        """Nothing read yet: files present at the first micro-batch are read from byte 0."""
        return initial_offset()

    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMaxBytes(maxBytesPerTrigger)`` when the option is set, else all available."""
        if self.max_bytes:
            return ReadMaxBytes(self.max_bytes)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """An ``availableNow`` run reads what exists when it starts, nothing written later.

        The sizes are recorded (:func:`snapshot`) at the first :meth:`latestOffset` call, which
        follows at once and knows which files the run resumes following.
        """
        self._available_now = True
        self._caps = None

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """End offset of the next micro-batch (see :func:`scan`); ``start`` if nothing new."""
        if self._available_now and self._caps is None:
            self._caps = snapshot(self.patterns, start)
        max_bytes = limit.max_bytes if isinstance(limit, ReadMaxBytes) else None
        return scan(start, self.patterns, max_bytes, self._caps, self._seen)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """One task per file range, split for parallelism, see :func:`plan_ranges`."""
        return plan_ranges(start, end, self.split_bytes, self.parallelism)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Lines of one range as Arrow batches (see :func:`read_range`)."""
        assert isinstance(partition, FileRange)
        return read_range(partition)

    def commit(self, end: dict) -> None:
        """Nothing to release: the offsets live in Spark's checkpoint."""


class FollowDataSource(DataSource):
    """Python data source ``logstream_follow``: lines appended to local log files.

    Options: ``paths`` (JSON list), ``maxBytesPerTrigger``, ``splitBytes``, ``parallelism``; use
    :func:`follow_lines` rather than this class, it checks the paths and sets them.
    """

    @classmethod
    def name(cls) -> str:
        """The registered short name, :data:`FOLLOW_SOURCE`."""
        return FOLLOW_SOURCE

    def schema(self) -> str:
        """``value string, source_file string``."""
        return SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        """A :class:`FollowStreamReader` over the ``paths`` option."""
        return FollowStreamReader(self.options)


def follow_lines(
    spark: SparkSession, paths: Sequence[str], max_bytes_per_trigger: int | None = None
) -> DataFrame:
    """Follow growing, rotating log files as a stream of lines, like ``tail -F``, exactly once.

    Parameters
    ----------
    spark : SparkSession
    paths : sequence of str
        Log files or quoted glob patterns (see :func:`check_follow_paths`). Files present at
        the query's first micro-batch are read from their start.
    max_bytes_per_trigger : int, optional
        Admission control: a micro-batch reads at most this many bytes (but at least one whole
        line), so a backlog is read in several micro-batches. Trigger ``availableNow`` honours
        it too. None: everything available.

    Returns
    -------
    DataFrame
        Streaming DataFrame with ``value`` (string, one line without ``\\n``/``\\r\\n``) and
        ``source_file`` (string, ``file://`` URI of the file the line was read from: its name
        at reading time, e.g. ``file:///var/log/nginx/access.log.1`` after a rotation).

    Raises
    ------
    InputPathError
        As :func:`check_follow_paths`.
    ValueError
        When ``max_bytes_per_trigger`` is not positive.

    Notes
    -----
    Registers :class:`FollowDataSource` with ``spark.dataSource.register`` (again on each
    call: registering the same class twice is harmless). Run the query with a checkpoint: the
    offsets (file identities and byte offsets) are in its offset log, so a restart resumes
    exactly after the last committed micro-batch. Limits: ``docs/follow.md``.
    """
    checked = check_follow_paths(paths)
    if max_bytes_per_trigger is not None and max_bytes_per_trigger <= 0:
        raise ValueError(f"max_bytes_per_trigger must be positive, got {max_bytes_per_trigger}")
    spark.dataSource.register(FollowDataSource)
    try:
        parallelism = spark.sparkContext.defaultParallelism
    except Exception:  # Spark Connect has no SparkContext
        parallelism = os.cpu_count() or 2
    reader = spark.readStream.format(FOLLOW_SOURCE).option("paths", json.dumps(checked))
    if max_bytes_per_trigger is not None:
        reader = reader.option("maxBytesPerTrigger", str(int(max_bytes_per_trigger)))
    reader = reader.option("parallelism", str(parallelism))
    return reader.load()
