"""Find real logs, or fetch the public NASA logs from the Internet Traffic Archive.

:func:`fetch` downloads with a progress bar, resumes an interrupted download (HTTP ``Range``
on the ``.part`` file), verifies the result (SHA-256 when one is known, and always the gzip
stream's own CRC by reading it through) and moves it into place only when it is whole.

:func:`find_logs` is the order ``logstream run`` uses: an explicit path, then the configured
data directory, then the download cache, then a download; with none of these it says so and
the caller falls back to the generator (labelled synthetic).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import urllib.error
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path

from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

from logstream.config import data_dir
from logstream.errors import LogstreamError

__all__ = [
    "DATASETS",
    "NASA_DAY_FILE",
    "DataFetchError",
    "Dataset",
    "cache_dir",
    "fetch",
    "find_logs",
]

#: The complete real NASA day in the shared data directory.
NASA_DAY_FILE = "NASA_access_log_Jul95_day09.log.gz"

_CHUNK = 1 << 16


class DataFetchError(LogstreamError):
    """Raised when a data set cannot be downloaded or fails verification."""


@dataclass(frozen=True)
class Dataset:
    """A downloadable log.

    Attributes
    ----------
    name : str
        Name used on the command line (``nasa``).
    url : str
        Where it is published.
    filename : str
        Name of the file in the cache.
    sha256 : str or None
        Expected SHA-256 of the file, when known; the gzip CRC is checked in any case.
    description : str
        One line for ``--help``.
    """

    name: str
    url: str
    filename: str
    sha256: str | None
    description: str


DATASETS: dict[str, Dataset] = {
    "nasa": Dataset(
        name="nasa",
        url="https://ita.ee.lbl.gov/traces/NASA_access_log_Jul95.gz",
        filename="NASA_access_log_Jul95.gz",
        # The archive publishes no checksum and this project's machines have no internet to
        # record one: the gzip CRC is verified, and the SHA-256 of the first good download
        # is written beside the file (``.sha256``) and checked on every later use.
        sha256=None,
        description="NASA Kennedy Space Center WWW server, July 1995 (1.89M requests, 20 MB)",
    ),
}


def cache_dir() -> Path:
    """Where downloads go: ``$LOGSTREAM_CACHE_DIR`` or ``~/.cache/logstream``."""
    default = Path.home() / ".cache" / "logstream"
    return Path(os.environ.get("LOGSTREAM_CACHE_DIR", default)).expanduser()


def _verify_gzip(path: Path) -> None:
    try:
        with gzip.open(path, "rb") as fh:
            while fh.read(1 << 20):
                pass
    except (OSError, EOFError, zlib.error) as exc:
        raise DataFetchError(
            f"{path} is not a whole gzip file ({exc}); delete it and retry"
        ) from exc


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(
    dataset: Dataset,
    dest_dir: Path | None = None,
    *,
    url: str | None = None,
    sha256: str | None = None,
    timeout_s: float = 30.0,
    show_progress: bool = True,
) -> Path:
    """Download ``dataset`` into ``dest_dir`` (default :func:`cache_dir`), resuming if possible.

    Parameters
    ----------
    dataset : Dataset
    dest_dir : Path, optional
    url : str, optional
        Override of ``dataset.url`` (a mirror, or a local server in tests).
    sha256 : str, optional
        Expected SHA-256, overriding ``dataset.sha256``.
    timeout_s : float
        Socket timeout, seconds.
    show_progress : bool
        Draw a rich progress bar (bytes, bytes/s).

    Returns
    -------
    Path
        The verified file. An existing verified file is returned without a download.

    Raises
    ------
    DataFetchError
        When the server cannot be reached (no network), answers with an error, or the file
        fails its checksum or gzip check (the bad file is removed).
    """
    dest_dir = dest_dir or cache_dir()
    dest_dir.mkdir(parents=True, exist_ok=True)
    final = dest_dir / dataset.filename
    part = final.with_name(final.name + ".part")
    sidecar = final.with_name(final.name + ".sha256")
    expected = (
        sha256 or dataset.sha256 or (sidecar.read_text().strip() if sidecar.exists() else None)
    )
    if final.exists():
        if expected and _sha256(final) != expected:
            final.unlink()
        else:
            return final
    source = url or dataset.url
    offset = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(source, headers={"User-Agent": "logstream"})
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout_s)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:  # the .part is already whole
            response = None
        else:
            raise DataFetchError(
                f"downloading {source} failed: HTTP {exc.code} {exc.reason}"
            ) from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DataFetchError(
            f"cannot reach {source} ({reason}): no network? Put the log in "
            f"$LOGSTREAM_DATA_DIR or pass a path; `logstream run` falls back to synthetic traffic"
        ) from exc
    if response is not None:
        with response:
            resumed = response.status == 206
            if not resumed:
                offset = 0
            length = response.headers.get("Content-Length")
            total = offset + int(length) if length is not None else None
            with (
                part.open("ab" if resumed else "wb") as out,
                Progress(
                    "[progress.description]{task.description}",
                    BarColumn(),
                    DownloadColumn(),
                    TransferSpeedColumn(),
                    disable=not show_progress,
                    transient=True,
                ) as progress,
            ):
                task = progress.add_task(
                    f"{dataset.name} {'(resumed)' if resumed else ''}",
                    total=total,
                    completed=offset,
                )
                try:
                    while block := response.read(_CHUNK):
                        out.write(block)
                        progress.advance(task, len(block))
                except (TimeoutError, OSError) as exc:
                    raise DataFetchError(
                        f"download of {source} broke off after {out.tell():,} bytes ({exc}): "
                        "run the same command again to resume"
                    ) from exc
            if total is not None and part.stat().st_size < total:
                raise DataFetchError(
                    f"download of {source} ended at {part.stat().st_size:,} of {total:,} bytes: "
                    "run the same command again to resume"
                )
    digest = _sha256(part)
    if expected and digest != expected:
        part.unlink()
        raise DataFetchError(
            f"{dataset.filename}: SHA-256 {digest} does not match the expected {expected}; "
            "the partial file was removed, run again to download it afresh"
        )
    try:
        _verify_gzip(part)
    except DataFetchError:
        part.unlink()
        raise
    part.rename(final)
    sidecar.write_text(digest + "\n")
    return final


def find_logs(explicit: list[Path] | None = None) -> tuple[list[Path], str]:
    """Locate real logs for the demo, in order of preference.

    Returns
    -------
    (list of Path, str)
        The files and where they came from: ``"explicit"``, ``"data-dir"`` or ``"cache"``.
        An empty list means nothing was found locally (the caller may :func:`fetch`, then
        fall back to the generator).

    Raises
    ------
    DataFetchError
        When an explicit path does not exist (an explicit choice is never second-guessed).
    """
    if explicit:
        missing = [p for p in explicit if not p.exists()]
        if missing:
            raise DataFetchError(f"log file {str(missing[0])!r} does not exist")
        return list(explicit), "explicit"
    shared = data_dir() / NASA_DAY_FILE
    if shared.is_file():
        return [shared], "data-dir"
    cached = cache_dir() / DATASETS["nasa"].filename
    if cached.is_file():
        return [cached], "cache"
    return [], "none"
