"""The planner: the source's offset, and how it follows files across rotation.

:func:`scan` turns the previous offset and what the followed patterns match now into the next
offset (the offset's fields are described in :mod:`logstream.sources.follow`): a renamed file
keeps its identity, a ``copytruncate`` copy continues its original from where it was read,
and what could not be read is counted as lost. It runs on the driver, in Spark's Python
planner process.
"""

from __future__ import annotations

import json
import logging
import math
import os
import stat
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass

from logstream.sources.follow.files import (
    DEFAULT_LINE_BYTES,
    FINGERPRINT_BYTES,
    FileId,
    _compressed,
    _crc_before,
    _discover,
    _fingerprint,
    _first_line_end,
    _glob_base,
    _ident,
    _is_glob,
    _last_line_end,
    _line_bytes,
    _locate,
    _open_head,
    _same_start,
    _stat,
)

log = logging.getLogger("logstream.sources.follow")


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
        file = _open_head(path, ident)
    except OSError as exc:
        log.warning("cannot open %s to follow it: %s", path, exc)
        return None
    if file is None:
        return None
    try:
        holds = False
        if f is not None:
            offset, fplen = int(f["offset"]), int(f.get("fplen") or 0)
            holds = (
                file.stat.st_size >= max(offset, fplen)
                and (not fplen or _fingerprint(file.head[:fplen]) == f.get("fp"))
                and (offset == 0 or _crc_before(file.fd, offset) == int(f["crc"]))
            )
    finally:
        os.close(file.fd)
    return _Found(dict(f) if f is not None else {}, file.path, file.stat, file.head, holds)


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
    file = _open_head(path, ident) if fplen else None
    if file is None:
        return None
    try:
        if len(file.head) < fplen or _fingerprint(file.head[:fplen]) != f.get("fp"):
            return None
        if file.stat.st_size >= offset:
            crc = _crc_before(file.fd, offset) if offset else 0
            if crc != int(f["crc"]):
                return None
            base = offset
        else:
            base = file.stat.st_size
            crc = _crc_before(file.fd, base) or 0
    finally:
        os.close(file.fd)
    entry = _entry(
        ident, file.path, base, 0, crc, fp=f["fp"], fplen=fplen, lb=int(f.get("lb") or 0),
        base=base,
    )  # fmt: skip
    return _Found(entry, file.path, file.stat, file.head, True)


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
    file = _open_head(found.path, ident)
    if file is None:  # vanished just now: looked at again next time
        return 0
    fd, f["path"] = file.fd, file.path
    try:
        size = file.stat.st_size
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
            head = file.head
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


def read_to_end(checkpoint: str | os.PathLike[str], path: str | os.PathLike[str]) -> bool:
    """Whether a query's last committed micro-batch read ``path`` to its last whole line.

    The file is found in the offset of that micro-batch (the query's offset log, its single
    source a follow source) by identity and fingerprint: an inode that now holds other bytes
    is another file. A writer uses it before it deletes a rotated file (logrotate's
    ``compress`` of ``access.log.1``), so that nothing is deleted unread.

    Parameters
    ----------
    checkpoint : path-like
        The query's checkpoint directory (``STATE_DIR/ingest`` for ``logstream run``).
    path : path-like
        The followed file.

    Returns
    -------
    bool
        True when the file is gone or holds no whole line (nothing to read), or when the last
        committed offset has reached its last ``\\n``; False otherwise, also before any
        micro-batch committed.
    """
    file = _open_head(os.fspath(path))
    if file is None:  # gone: nothing left to read
        return True
    try:
        st, head = file.stat, file.head
        if not stat.S_ISREG(st.st_mode):  # not a followed file
            return True
        # the tail and the head only: the file may be large, and a writer asks again and again
        target = _last_line_end(file.fd, 0, st.st_size)
    finally:
        os.close(file.fd)
    if target == 0:  # no whole line: nothing to read (an empty file is not followed yet)
        return True
    root = os.fspath(checkpoint)
    try:
        commits = [int(n) for n in os.listdir(os.path.join(root, "commits")) if n.isdigit()]
    except FileNotFoundError:
        return False
    if not commits:
        return False
    with open(os.path.join(root, "offsets", str(max(commits))), encoding="utf-8") as fh:
        offset = json.loads(fh.read().splitlines()[2])  # a version line, metadata, the source
    ident = _ident(st)
    done = [
        int(f["offset"])
        for f in offset.get("files", [])
        if (int(f["dev"]), int(f["ino"])) == ident
        and f.get("fplen")
        and _fingerprint(head[: int(f["fplen"])]) == f.get("fp")
    ]
    return bool(done) and done[0] >= target
