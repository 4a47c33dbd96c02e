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
      "v": 2,
      "files": [  # sorted by (dev, ino)
        {"dev": 64768, "ino": 1311, "path": "/var/log/nginx/access.log",
         "offset": 48213, "gen": 0, "crc": 2584019622,
         "fp": "9f2c41d07a3be115", "fplen": 1024, "lb": 102, "base": 0}
      ],
      "truncations": 0,   # running count of files found truncated or replaced in place
      "lost_bytes": 0,    # running count of bytes seen but never read (gone, or erased)
      "lost_lines": 0,    # the same, as an estimate of lines (bytes / the file's ``lb``)
      "lost_files": 0     # running count of files that disappeared before their end
    }

* ``dev``, ``ino``: the file's identity (``st_dev``, ``st_ino``); a file is followed by its
  identity, not by its name;
* ``fp``, ``fplen``: the fingerprint (64-bit BLAKE2b, hex) of the file's first ``fplen`` bytes,
  at most :data:`FINGERPRINT_BYTES`, as the log shippers identify files (Filebeat's
  ``fingerprint``, Vector's ``checksum``): a file whose first bytes match a followed file *is*
  that file, whatever its name or inode (a ``copytruncate`` copy), and an inode whose first
  bytes changed holds another file;
* ``path``: where the planner last saw it (a hint: the reader looks the inode up again in the
  same directory when the path now holds another file);
* ``offset``: bytes read, always just after a ``\\n``, so a micro-batch holds whole lines only;
* ``gen``: how many times this identity was found truncated (or holding other bytes): a
  micro-batch whose end has a higher ``gen`` than its start reads the file from ``base``;
* ``base``: where this identity's reading started: 0, or, for a copy that continues a
  followed file (``copytruncate``), the offset that file had been read to;
* ``crc``: CRC-32 of the (up to) 64 bytes before ``offset``: with ``fp``, it tells a file that
  still holds what was read from one truncated and written again;
* ``lb``: the file's average bytes per line, from its first bytes (for ``lost_lines``).

Version 1 offsets (no ``fp``, ``fplen``, ``lb``, ``base``, ``lost_lines``) are read, and the
fingerprints filled in at the next micro-batch.

Planning (:func:`scan`, :func:`plan_ranges`) runs on the driver, in Spark's Python planner
process; reading (:meth:`FollowStreamReader.read`) runs in the executors' Python workers, which
must see the same files (see ``docs/follow.md``).
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
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
    "rotation_warnings",
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

#: Bytes at the start of a file whose fingerprint identifies it, as the log shippers do
#: (Filebeat's ``fingerprint`` file identity reads 1024, Vector's ``checksum`` 256): a copy
#: of a followed file is that file, whatever its name or inode. A file shorter than this is
#: fingerprinted over the bytes it has, and again as it grows.
FINGERPRINT_BYTES = 1024

#: Bytes per line assumed for a lost-line estimate when a file's own average is unknown.
DEFAULT_LINE_BYTES = 120

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


def rotation_warnings(patterns: Sequence[str]) -> list[str]:
    """Warnings for followed files whose first rotated name no pattern matches.

    Parameters
    ----------
    patterns : sequence of str
        As returned by :func:`check_follow_paths`.

    Returns
    -------
    list of str
        One message per literal file (no glob) when neither ``FILE.1`` (logrotate's name)
        nor ``FILE-YYYYMMDD`` (its ``dateext``) is matched: a file rotated while logstream is
        stopped, or twice between two micro-batches, is then never read. Each names the
        fix: follow the quoted glob ``FILE*``.
    """
    warnings = []
    for path in patterns:
        if _is_glob(path) or any(path.startswith((f"{p}.", f"{p}-")) for p in patterns):
            continue  # a glob, or itself the rotated name of a followed file
        rotated = (f"{path}.1", f"{path}-20260101")
        if not any(fnmatch.fnmatchcase(r, p) for r in rotated for p in patterns):
            warnings.append(
                f"following {path} alone: a rotation while logstream is stopped (or two "
                f"between micro-batches) loses the lines of the file rotated away; follow "
                f'"{path}*" (quoted) so that its rotated names are matched too (docs/follow.md)'
            )
    return warnings


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
    return {
        "v": 2,
        "files": [],
        "truncations": 0,
        "lost_bytes": 0,
        "lost_lines": 0,
        "lost_files": 0,
    }


def _entry(
    ident: FileId,
    path: str,
    offset: int = 0,
    gen: int = 0,
    crc: int = 0,
    *,
    fp: str = "",
    fplen: int = 0,
    lb: int = 0,
    base: int = 0,
) -> dict[str, Any]:
    return {
        "dev": ident[0],
        "ino": ident[1],
        "path": path,
        "offset": offset,
        "gen": gen,
        "crc": crc,
        "fp": fp,
        "fplen": fplen,
        "lb": lb,
        "base": base,
    }


def _normal(f: Mapping[str, Any]) -> dict[str, Any]:
    """An entry in the current form, whatever the offset's version (1 had no fingerprint)."""
    return _entry(
        (int(f["dev"]), int(f["ino"])),
        f["path"],
        int(f["offset"]),
        int(f["gen"]),
        int(f["crc"]),
        fp=f.get("fp") or "",
        fplen=int(f.get("fplen") or 0),
        lb=int(f.get("lb") or 0),
        base=int(f.get("base") or 0),
    )


def _fingerprint(head: bytes) -> str:
    """The fingerprint of a file's first bytes: 64-bit BLAKE2b, as hex."""
    return hashlib.blake2b(head, digest_size=8).hexdigest()


def _line_bytes(head: bytes) -> int:
    """Average bytes per line in ``head`` (0 when it holds no whole line): the estimate that
    turns lost bytes into lost lines."""
    lines = head.count(b"\n")
    return len(head[: head.rfind(b"\n") + 1]) // lines if lines else 0


def _same_start(a: bytes, b: bytes) -> bool:
    """Whether two files begin with the same bytes, over the shorter of the two heads."""
    n = min(len(a), len(b))
    return n > 0 and a[:n] == b[:n]


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


@dataclass
class _Found:
    """A followed file as one :func:`scan` finds it."""

    entry: dict[str, Any]
    path: str
    st: os.stat_result
    head: bytes
    #: followed before (or a copy that continues a followed file): read before new files
    continuing: bool


@dataclass
class _Totals:
    """The running loss counts of the offset."""

    truncations: int = 0
    lost_bytes: int = 0
    lost_lines: int = 0
    lost_files: int = 0

    def lose(self, nbytes: int, line_bytes: int, whole_file: bool) -> None:
        if nbytes <= 0:
            return
        self.lost_bytes += nbytes
        self.lost_lines += -(-nbytes // (line_bytes or DEFAULT_LINE_BYTES))
        self.lost_files += int(whole_file)


def _inspect(path: str, ident: FileId, f: Mapping[str, Any] | None = None) -> _Found | None:
    """Open the file ``ident`` (at ``path`` or renamed beside it) and read its head.

    With ``f`` (its entry), ``continuing`` tells whether it still holds the bytes the entry
    describes: at least ``fplen`` and ``offset`` bytes, the first ``fplen`` with fingerprint
    ``fp`` and the 64 before ``offset`` with CRC-32 ``crc``. None when the file is gone.
    """
    try:
        opened = _open(path, ident)
    except OSError as exc:
        log.warning("cannot open %s to follow it: %s", path, exc)
        return None
    if opened is None:
        return None
    fd, path = opened
    try:
        st = os.fstat(fd)
        head = os.pread(fd, FINGERPRINT_BYTES, 0)
        holds = False
        if f is not None:
            offset, fplen = int(f["offset"]), int(f.get("fplen") or 0)
            holds = (
                st.st_size >= max(offset, fplen)
                and (not fplen or _fingerprint(head[:fplen]) == f.get("fp"))
                and (offset == 0 or _crc_before(fd, offset) == int(f["crc"]))
            )
    finally:
        os.close(fd)
    return _Found(dict(f) if f is not None else {}, path, st, head, holds)


def _continuation(path: str, ident: FileId, f: Mapping[str, Any]) -> _Found | None:
    """The file ``ident`` as the continuation of the followed file ``f``, or None.

    It is one when its first ``fplen`` bytes have ``f``'s fingerprint (a copy, as
    ``copytruncate`` makes, or the same bytes under any name and inode) and, when it is at
    least ``offset`` bytes long, the bytes before ``offset`` have ``f``'s CRC-32. Its entry
    starts (``base``) at ``offset``: the bytes before it were read from ``f``'s file. A copy
    shorter than ``offset`` was read whole (logrotate copied it before the writer's last
    lines, which were read from the original): it starts at its end.
    """
    fplen, offset = int(f.get("fplen") or 0), int(f["offset"])
    opened = _open(path, ident) if fplen else None
    if opened is None:
        return None
    fd, path = opened
    try:
        st = os.fstat(fd)
        head = os.pread(fd, FINGERPRINT_BYTES, 0)
        if len(head) < fplen or _fingerprint(head[:fplen]) != f.get("fp"):
            return None
        if st.st_size >= offset:
            crc = _crc_before(fd, offset) if offset else 0
            if crc != int(f["crc"]):
                return None
            base = offset
        else:
            base = st.st_size
            crc = _crc_before(fd, base) or 0
    finally:
        os.close(fd)
    entry = _entry(
        ident, path, base, 0, crc, fp=f["fp"], fplen=fplen, lb=int(f.get("lb") or 0), base=base
    )
    return _Found(entry, path, st, head, True)


def _neighbours(
    directories: set[str], skip: Mapping[FileId, Any]
) -> dict[FileId, tuple[str, os.stat_result]]:
    """Regular, uncompressed files in ``directories`` whose identity is not in ``skip``."""
    found: dict[FileId, tuple[str, os.stat_result]] = {}
    for directory in sorted(directories):
        try:
            names = sorted(e.path for e in os.scandir(directory))
        except OSError:
            continue
        for name in names:
            st = None if _compressed(name) else _stat(name)
            if st is not None and _ident(st) not in skip:
                found.setdefault(_ident(st), (name, st))
    return found


def _locate_followed(
    tracked: Mapping[FileId, dict[str, Any]],
    matches: Mapping[FileId, tuple[str, os.stat_result]],
) -> tuple[dict[FileId, _Found], dict[FileId, _Found | None], list[dict[str, Any]]]:
    """Find every followed file again: intact, broken (gone: None, or rewritten), or not
    openable just now (kept as it is, looked at again next time)."""
    intact: dict[FileId, _Found] = {}
    broken: dict[FileId, _Found | None] = {}
    unopened: list[dict[str, Any]] = []
    for ident, f in tracked.items():
        where = matches.get(ident) or _locate(f["path"], ident)
        found = None if where is None else _inspect(where[0], ident, f)
        if found is None and where is not None:
            unopened.append(dict(f))
        elif found is not None and found.continuing:
            found.entry["path"] = found.path
            intact[ident] = found
        else:
            broken[ident] = found
    return intact, broken, unopened


def _continue_broken(
    tracked: Mapping[FileId, dict[str, Any]],
    matches: Mapping[FileId, tuple[str, os.stat_result]],
    intact: dict[FileId, _Found],
    broken: Mapping[FileId, _Found | None],
    seen: MutableMapping[FileId, int],
    totals: _Totals,
) -> dict[FileId, FileId]:
    """Continue each broken followed file in a copy of its bytes, or count what it lost.

    The copy is looked for by fingerprint among the files the patterns match and those in the
    broken file's directory (whatever their names), including the rewritten files
    themselves (an inode reused by the next copy). A file whose inode now holds other bytes
    is then followed again from byte 0 when the patterns match it (a truncation when under
    the same name), else dropped. Returns the copies found: each one's identity, to that of
    the file it continues.
    """
    claimed: dict[FileId, FileId] = {}
    candidates: dict[FileId, tuple[str, os.stat_result]] = {}
    if any(int(tracked[i].get("fplen") or 0) for i in broken):
        directories = {os.path.dirname(tracked[i]["path"]) for i in broken}
        candidates = {i: w for i, w in matches.items() if i not in tracked}
        candidates.update(_neighbours(directories, {**tracked, **intact}))
        candidates.update({i: (b.path, b.st) for i, b in broken.items() if b is not None})
    for ident in sorted(broken):
        f = tracked[ident]
        copy = None
        for cid, (cpath, _) in sorted(candidates.items()):
            if cid not in claimed and (copy := _continuation(cpath, cid, f)) is not None:
                claimed[cid] = ident
                if cid in tracked:  # a reused inode: its range restarts at base, not 0
                    copy.entry["gen"] = int(tracked[cid]["gen"]) + 1
                intact[cid] = copy
                log.info("%s continues %s (same first bytes): read on from byte %d",
                         copy.path, f["path"], copy.entry["base"])  # fmt: skip
                break
        offset = int(f["offset"])
        last_seen = seen.pop(ident, offset)
        kept = offset if copy is None else max(offset, copy.st.st_size)
        unread = max(0, last_seen - kept)
        if unread:
            log.warning(
                "%s lost %d bytes unread (%s)", f["path"], unread,
                "the copy of its rotation ends before them" if copy else "gone or rewritten",
            )  # fmt: skip
        totals.lose(unread, int(f.get("lb") or 0), whole_file=copy is None)
    for ident, found in sorted(broken.items()):
        if found is None or ident in claimed:
            continue
        if ident not in matches:
            log.warning(
                "%s now holds another file (its inode was reused): no longer followed", found.path
            )
            continue
        if found.path == tracked[ident]["path"]:
            log.warning("%s was truncated or rewritten: reading it again from 0", found.path)
            totals.truncations += 1
        else:  # under another matched name: a new file reusing a deleted inode
            log.info("%s reuses the inode of a deleted followed file: reading it", found.path)
        found.entry = _entry(ident, found.path, gen=int(tracked[ident]["gen"]) + 1)
        found.continuing = True
        intact[ident] = found
    return claimed


def _start_new(
    matches: Mapping[FileId, tuple[str, os.stat_result]],
    skip: set[FileId],
    intact: dict[FileId, _Found],
    caps: Mapping[FileId, int] | None,
) -> None:
    """Follow the files the patterns match for the first time, from byte 0.

    A file that begins with the bytes of a followed file is that file's copy (``copytruncate``
    between its copy and its truncation, or a backup): it is not read. An empty file is
    followed once it has bytes. Larger files first, so of two copies found together the
    original is followed.
    """
    order = sorted(
        (i for i in matches if i not in skip and (caps is None or i in caps)),
        key=lambda i: (-matches[i][1].st_size, matches[i][0]),
    )
    for ident in order:
        found = _inspect(matches[ident][0], ident)
        if found is None or not found.head:
            continue
        twin = next((o for o in intact.values() if _same_start(found.head, o.head)), None)
        if twin is not None:
            log.info("%s begins as %s does: a copy, not read", found.path, twin.path)
            continue
        found.entry = _entry(ident, found.path)
        intact[ident] = found


def _advance(
    found: _Found,
    ident: FileId,
    remaining: float,
    first_line: bool,
    caps: Mapping[FileId, int] | None,
    seen: MutableMapping[FileId, int],
) -> int:
    """Move ``found``'s offset to its last whole line within ``remaining`` bytes (at least
    one line when ``first_line``), and its fingerprint over up to
    :data:`FINGERPRINT_BYTES`; returns the bytes taken."""
    f = found.entry
    opened = _open(found.path, ident)
    if opened is None:  # vanished just now: looked at again next time
        return 0
    fd, f["path"] = opened
    try:
        size = os.fstat(fd).st_size
        seen[ident] = size
        begin = int(f["offset"])
        limit = size if caps is None else min(size, max(begin, caps.get(ident, begin)))
        end = begin
        if limit > begin and remaining > 0:
            end = _last_line_end(fd, begin, int(min(limit, begin + remaining)))
        if end == begin and limit > begin and first_line:
            end = _first_line_end(fd, begin, limit)
        if end > begin:
            crc = _crc_before(fd, end)
            f.update(offset=end, crc=0 if crc is None else crc)
        fplen = int(f.get("fplen") or 0)
        if fplen < FINGERPRINT_BYTES and (end > begin or not f.get("fp")) and size > fplen:
            head = os.pread(fd, FINGERPRINT_BYTES, 0)
            f.update(fp=_fingerprint(head), fplen=len(head), lb=_line_bytes(head) or f["lb"])
    finally:
        os.close(fd)
    return end - begin


def scan(
    start: Mapping[str, Any],
    patterns: Sequence[str],
    max_bytes: int | None = None,
    caps: Mapping[FileId, int] | None = None,
    seen: MutableMapping[FileId, int] | None = None,
) -> dict[str, Any]:
    """Plan the end offset of the next micro-batch from ``start`` (driver side).

    Every followed file is found again by its identity (at its last path, under a name the
    patterns match, or renamed in the same directory) and checked by its fingerprint. A file
    whose bytes are gone (deleted, truncated, or its inode given to another file) continues
    in a copy of them when one exists (:func:`_continue_broken`). New files the patterns
    match are followed from byte 0, unless they begin as a followed file does (a copy);
    never compressed ones (see :data:`COMPRESSED_SUFFIXES`). Each file advances to the last
    ``\\n`` before its current size, so a line still being written waits.

    Parameters
    ----------
    start : mapping
        The previous offset (:func:`initial_offset` or an earlier result; JSON round trip ok;
        version 1 offsets, without fingerprints, are read too).
    patterns : sequence of str
        Absolute files and globs, as returned by :func:`check_follow_paths`.
    max_bytes : int, optional
        Admission control: at most this many bytes (of all files together) in the micro-batch,
        but always at least one whole line when one is available; None reads all available.
        Files already followed come first, then the oldest modified, so a rotated file is
        finished before its successor is started.
    caps : mapping of (int, int) to int, optional
        ``Trigger.AvailableNow``: read no file beyond its size here (from :func:`snapshot`)
        and start no file missing here; a copy continuing a followed file has that file's cap.
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
    * ``copytruncate``: ``access.log`` shrinks below its offset (or holds other bytes before
      it); the copy ``access.log.1`` begins with its fingerprint, so it continues from the
      offset (the lines written between the last micro-batch and the copy are read from
      it) and ``access.log`` is read again from byte 0: ``truncations`` grows by one, nothing
      is read twice. Bytes the planner saw in ``access.log`` past the copy's end (written
      between logrotate's copy and its truncation) count as lost.
    * Disappeared, or rewritten without a copy: the bytes seen but never read are added to
      ``lost_bytes`` (and an estimate of their lines to ``lost_lines``); ``lost_files`` grows
      by one.
    * Inode reused: a followed file found only under a name the patterns do not match whose
      bytes changed is another file given the deleted file's inode: it is dropped, not read.
      Under another matched name, it is a new file, read from byte 0 (``gen`` grows by one).
    """
    if seen is None:
        seen = {}
    totals = _Totals(
        int(start.get("truncations", 0)),
        int(start.get("lost_bytes", 0)),
        int(start.get("lost_lines", 0)),
        int(start.get("lost_files", 0)),
    )
    tracked = {(int(f["dev"]), int(f["ino"])): f for f in start.get("files", [])}
    matches = _discover(patterns)
    intact, broken, unopened = _locate_followed(tracked, matches)
    claimed = _continue_broken(tracked, matches, intact, broken, seen, totals)
    if caps is not None and claimed:  # a copy may read what its original could
        caps = {**caps, **{c: caps[o] for c, o in claimed.items() if o in caps}}
    _start_new(matches, set(tracked) | set(claimed), intact, caps)

    remaining = math.inf if max_bytes is None else max(0, int(max_bytes))
    taken = False
    # budget order: files followed before, then new ones; oldest modification first (a
    # renamed file before its successor)
    order = sorted(
        intact,
        key=lambda i: (not intact[i].continuing, intact[i].st.st_mtime_ns, intact[i].path),
    )
    for ident in order:
        got = _advance(intact[ident], ident, remaining, not taken and max_bytes is not None,
                       caps, seen)  # fmt: skip
        remaining -= got
        taken = taken or got > 0
    entries = [found.entry for found in intact.values()] + unopened
    files = [_normal(f) for f in sorted(entries, key=lambda f: (int(f["dev"]), int(f["ino"])))]
    end_offset = {"v": 2, "files": files, **vars(totals)}
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


def _range_copy(part: FileRange) -> tuple[int, str] | None:
    """A file beside ``part``'s that holds its bytes: same fingerprint, same CRC-32 before
    ``hi`` (opened; None when there is none)."""
    if not part.fplen:
        return None
    directory = os.path.dirname(part.path)
    for ident, (path, _) in sorted(_neighbours({directory}, {}).items()):
        opened = _open(path, ident)
        if opened is None:
            continue
        fd, path = opened
        head = os.pread(fd, part.fplen, 0)
        if _fingerprint(head) == part.fp and _crc_before(fd, part.hi) == part.crc:
            log.info("%s holds bytes %d-%d of %s: read there", path, part.lo, part.hi, part.path)
            return fd, path
        os.close(fd)
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
