"""The followed files: paths and globs, identities, fingerprints and byte search.

The lowest layer of :mod:`logstream.sources.follow`: what a pattern matches, how a file is
known (its inode and the fingerprint of its first bytes), how it is opened again by identity,
and where its lines end.
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import logging
import os
import stat
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from logstream.errors import InputPathError

if TYPE_CHECKING:
    pass


log = logging.getLogger("logstream.sources.follow")

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
#: reader: the bytes of a line kept at most, one more than --max-line-bytes allows, so a
#: longer line is still quarantined as line_too_long while its memory stays bounded
_LINE_CAP = 16 * 1024 * 1024 + 1


_MIN_SPLIT = 1024 * 1024


_MAX_SPLIT = 64 * 1024 * 1024


FileId = tuple[int, int]


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
    opened = _open_checked(path, ident)
    return None if opened is None else (opened[0], opened[1])


def _open_checked(path: str, ident: FileId) -> tuple[int, str, os.stat_result] | None:
    """:func:`_open`, with the status of the file it opened."""
    for _ in range(5):
        where = _locate(path, ident)
        if where is None:
            return None
        try:
            fd = os.open(where[0], os.O_RDONLY)
        except FileNotFoundError:
            continue
        st = os.fstat(fd)
        if _ident(st) == ident:
            return fd, where[0], st
        os.close(fd)
    return None


@dataclass(frozen=True)
class OpenFile:
    """A file opened to follow it (:func:`_open_head`); the caller closes ``fd``.

    Attributes
    ----------
    fd : int
        The open descriptor.
    path : str
        The path it was opened by (where the file is now).
    stat : os.stat_result
        Its status when it was opened (``st_size`` in bytes).
    head : bytes
        Its first :data:`FINGERPRINT_BYTES` bytes (fewer in a shorter file; none in a file
        that is not regular).
    """

    fd: int
    path: str
    stat: os.stat_result
    head: bytes


def _open_head(path: str, ident: FileId | None = None) -> OpenFile | None:
    """Open a file, read its status and its head: the one place the follow source does.

    Parameters
    ----------
    path : str
        Where the file is, or was last seen.
    ident : FileId, optional
        Its identity: the file is looked for beside ``path`` after a rename, and opened only
        when it is that file (:func:`_open`). None: the file at ``path``, whatever it is.

    Returns
    -------
    OpenFile or None
        None when the file is gone (with ``ident``), or cannot be opened (without).

    Raises
    ------
    OSError
        With ``ident``, when the file is there but cannot be opened or read.
    """
    if ident is None:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        where, st = path, None
    else:
        opened = _open_checked(path, ident)
        if opened is None:
            return None
        fd, where, st = opened
    try:
        st = st or os.fstat(fd)
        # a directory or a device is no followed file: nothing of it is read
        head = os.pread(fd, FINGERPRINT_BYTES, 0) if stat.S_ISREG(st.st_mode) else b""
    except BaseException:
        os.close(fd)
        raise
    return OpenFile(fd, where, st, head)


def _uri(path: str) -> str:
    return Path(path).as_uri()


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
