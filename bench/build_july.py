"""Build the 31-day NASA input: the real 1995-07-09 day replicated across July.

Each output file is the complete real day (35,272 lines) with its date text rewritten from
``09/Jul/1995`` to day D, so times of day, offsets (-0400), hosts and URLs stay real. The 31
files hold 1,093,432 lines (~ 100 MB plain). Output is plain text, which Spark can split.

Usage: python bench/build_july.py [--out bench/data/nasa-july] [--days 31]
"""

from __future__ import annotations

import argparse
import gzip
import os
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parent / "data" / "nasa-july"
DAY_FILE = "NASA_access_log_Jul95_day09.log.gz"


def data_dir() -> Path:
    default = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    return Path(os.environ.get("LOGSTREAM_DATA_DIR", default))


def build_july(out: Path = DEFAULT_OUT, days: int = 31) -> list[Path]:
    """Write ``days`` files (July 1..days) into ``out``; reuse them when already complete.

    Returns
    -------
    list of Path
        The files, in day order.
    """
    source = data_dir() / DAY_FILE
    if not source.is_file():
        raise SystemExit(f"missing {source}: set LOGSTREAM_DATA_DIR to the shared data folder")
    out.mkdir(parents=True, exist_ok=True)
    with gzip.open(source, "rb") as fh:
        day = fh.read()
    assert day.count(b"[09/Jul/1995:") == 35272
    paths = []
    for d in range(1, days + 1):
        path = out / f"access_1995-07-{d:02d}.log"
        body = day.replace(b"[09/Jul/1995:", f"[{d:02d}/Jul/1995:".encode())
        if not (path.is_file() and path.stat().st_size == len(body)):
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_bytes(body)
            tmp.replace(path)
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--days", type=int, default=31)
    args = parser.parse_args()
    paths = build_july(args.out, args.days)
    print(f"{len(paths)} files, {35272 * len(paths):,} lines in {args.out}")


if __name__ == "__main__":
    main()
