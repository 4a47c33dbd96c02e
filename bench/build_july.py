"""Build the 31-day NASA input: the real 1995-07-09 day replicated across July.

Each output file is the complete real day (35,272 lines) with its date text rewritten from
``09/Jul/1995`` to day D, so times of day, offsets (-0400), hosts and URLs stay real. The 31
files hold 1,093,432 lines (~ 100 MB plain). Output is plain text, which Spark can split.

``--days N`` replicates the day over N days from 1995-07-01 (past July into the next months:
284 days, to 1996-04-09, are the 10,017,248 lines of the batch target of issue 13), each
count in a folder of its own (:func:`input_dir`), so a reader of the folder gets N days.

Usage: python bench/build_july.py [--days 31] [--out DIR]
"""

from __future__ import annotations

import argparse
import gzip
import os
from datetime import date, timedelta
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parent / "data" / "nasa-july"
DAY_FILE = "NASA_access_log_Jul95_day09.log.gz"
#: Common Log Format month names (English, whatever the locale).
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def input_dir(days: int) -> Path:
    """The folder of the ``days``-day input: ``bench/data/nasa-july`` for 31 days, else
    ``bench/data/nasa-<days>d``."""
    return DEFAULT_OUT if days == 31 else DEFAULT_OUT.parent / f"nasa-{days}d"


def data_dir() -> Path:
    default = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    return Path(os.environ.get("LOGSTREAM_DATA_DIR", default))


def build_july(out: Path = DEFAULT_OUT, days: int = 31) -> list[Path]:
    """Write ``days`` files (1995-07-01 onwards, a file a day) into ``out``; reuse them when
    already complete.

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
    for d in range(days):
        when = date(1995, 7, 1) + timedelta(days=d)
        path = out / f"access_{when.isoformat()}.log"
        clf = f"[{when.day:02d}/{_MONTHS[when.month - 1]}/{when.year}:"
        body = day.replace(b"[09/Jul/1995:", clf.encode())
        if not (path.is_file() and path.stat().st_size == len(body)):
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_bytes(body)
            tmp.replace(path)
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--days", type=int, default=31)
    parser.add_argument("--out", type=Path, help="default: bench/data/nasa-july for 31 days")
    args = parser.parse_args()
    out = args.out or input_dir(args.days)
    paths = build_july(out, args.days)
    print(f"{len(paths)} files, {35272 * len(paths):,} lines in {out}")


if __name__ == "__main__":
    main()
