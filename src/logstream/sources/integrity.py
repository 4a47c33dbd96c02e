"""Corrupt and truncated compressed inputs: found, reported, never a failed job.

Log rotation and copying leave truncated ``.gz`` files every day (a copy taken while gzip was
still writing, a transfer cut short). Spark's text source decompresses by extension and, with
``spark.sql.files.ignoreCorruptFiles`` (set by :func:`logstream.session.session_conf`), keeps
the lines it read before the error and skips the rest of the file instead of failing the job.
So **the readable part of a truncated file counts**: its lines are parsed like any others
(the last one, cut in the middle, is usually quarantined as ``format_mismatch``).

Spark skips silently, though. :func:`check_files` reads every compressed input to its end with
Python's own decompressor (in threads: zlib and bz2 release the GIL) and returns the files that
fail, with the error; the batch report and the ingest stage quarantine each one with reason
``corrupt_file`` and count it. ``--strict`` makes a corrupt file an error instead
(:class:`~logstream.errors.CorruptInputError`).

Checked: ``.gz`` (gzip, also several members) and ``.bz2``. Other codecs Spark reads by
extension (``.deflate``, ``.lz4``, ``.snappy``, ``.zst``) are not checked. A plain file is
checked only for being readable: any bytes are lines (invalid UTF-8 becomes U+FFFD).
"""

from __future__ import annotations

import bz2
import gzip
import json
import os
import zlib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote, unquote, urlparse

from logstream.errors import CorruptInputError

__all__ = [
    "CHECKED_SUFFIXES",
    "CORRUPT_FILE_REASON",
    "OPENERS",
    "check_file",
    "check_files",
    "files_of_batch",
    "local_path",
    "raise_if_corrupt",
    "spark_file_uri",
]

#: The quarantine reason of a file that cannot be read to its end.
CORRUPT_FILE_REASON = "corrupt_file"

#: How Python opens a compressed file Spark reads by its suffix (binary mode, ``"rb"``); a
#: suffix not here is read as it is.
OPENERS = {".gz": gzip.open, ".bz2": bz2.open}
#: Compressed formats whose integrity is checked.
CHECKED_SUFFIXES = tuple(OPENERS)

_CHUNK = 1 << 16


def local_path(uri: str) -> Path | None:
    """``file:/x``, ``file:///x`` or ``/x`` → ``Path("/x")``; None for a remote URI."""
    if uri.startswith("file:"):
        return Path(unquote(urlparse(uri).path))
    if "://" in uri:
        return None
    return Path(uri)


def spark_file_uri(path: str | os.PathLike[str]) -> str:
    """A local path as the URI Spark's ``_metadata.file_path`` gives (``file:/tmp/a%20b.log``);
    a URI is returned unchanged."""
    text = os.fspath(path)
    if "://" in text or text.startswith("file:"):
        return text
    return "file:" + quote(str(Path(text).absolute()))


def check_file(path: Path) -> str | None:
    """Read ``path`` to its end as its extension says; return the error, or None when whole.

    Returns
    -------
    str or None
        A one-line description such as ``"truncated gzip: Compressed file ended before the
        end-of-stream marker was reached (read 212,992 bytes of its content)"``; None for a
        readable file.
    """
    suffix = path.suffix.lower()
    opener = OPENERS.get(suffix)
    read = 0
    try:
        if opener is None:
            with open(path, "rb") as fh:
                fh.read(1)
            return None
        with opener(path, "rb") as fh:
            # read1, not read: read() gathers several decompressor outputs into one chunk and
            # drops them all when the stream ends early, so a file cut within its first
            # 64 KiB would show "read 0 bytes"; read1 returns each output as it comes, and the
            # EOFError arrives on a call that has nothing more to give
            while chunk := fh.read1(_CHUNK):
                read += len(chunk)
    except EOFError as exc:
        return f"truncated {suffix[1:]}: {exc} (read {read:,} bytes of its content)"
    except (gzip.BadGzipFile, zlib.error, OSError, ValueError) as exc:
        kind = "not a readable file" if opener is None else f"corrupt {suffix[1:]}"
        return f"{kind}: {exc}"
    return None


def check_files(files: Iterable[str | os.PathLike[str]], workers: int = 2) -> dict[str, str]:
    """Check compressed files (and the readability of the others) in ``workers`` threads.

    Parameters
    ----------
    files : iterable of str or path-like
        Local paths or ``file:`` URIs; remote URIs are skipped.
    workers : int
        Threads; decompression releases the GIL, so they overlap with each other and Spark.

    Returns
    -------
    dict of str to str
        The corrupt files, by the name given, with their error.
    """
    named = [(str(f), local_path(str(f))) for f in files]
    named = [(name, path) for name, path in named if path is not None]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        errors = pool.map(lambda item: check_file(item[1]), named)
        return {name: err for (name, _), err in zip(named, errors, strict=True) if err}


def raise_if_corrupt(corrupt: dict[str, str]) -> None:
    """Raise :class:`~logstream.errors.CorruptInputError` naming the corrupt files, if any."""
    if corrupt:
        shown = "; ".join(f"{f}: {e}" for f, e in sorted(corrupt.items())[:5])
        more = f" (and {len(corrupt) - 5} more)" if len(corrupt) > 5 else ""
        raise CorruptInputError(
            f"{len(corrupt)} input file(s) cannot be read to their end: {shown}{more}. Replace "
            "or remove them, or drop --strict to quarantine them and count their readable lines"
        )


def files_of_batch(checkpoint: Path, batch_id: int) -> list[str] | None:
    """The files Spark's file source read in micro-batch ``batch_id`` of a query.

    Read from the source's log in the checkpoint (``CHECKPOINT/sources/0/N``, or the compacted
    ``N.compact`` that also holds the earlier batches): a text file starting ``v1`` followed by
    one JSON object per file (``path``, ``timestamp``, ``batchId``). Spark writes it before
    the micro-batch runs and keeps it until later compactions, so it is there for the batch
    and for a replay of it. This lists files that yielded no line at all (a ``.gz`` corrupt
    from its first byte), which the rows of the micro-batch cannot tell.

    Returns
    -------
    list of str or None
        Local paths; None when the log is missing or not in the format above (the caller
        then skips the integrity check of that micro-batch).
    """
    log_dir = checkpoint / "sources" / "0"
    for name in (str(batch_id), f"{batch_id}.compact"):
        path = log_dir / name
        if not path.is_file():
            continue
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
            if not lines or lines[0] != "v1":
                return None
            entries = [json.loads(line) for line in lines[1:] if line.strip()]
            files = [e["path"] for e in entries if e.get("batchId") == batch_id]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return [str(p) for f in files if (p := local_path(f)) is not None]
    return None
