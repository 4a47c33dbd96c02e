"""Build the multi-day NASA input: the real 1995-07-09 day replicated across July and on.

Each file is the complete real day (35,272 lines) with its date text rewritten to its own day
(:func:`bench.harness.july_files`). 31 days (the default) are 1,093,432 lines, about 100 MB of
plain text, which Spark can split, in ``bench/data/nasa-july``; ``--days 284`` (to
1996-04-09) are the 10,017,248 lines of the 10M-line comparison, in ``bench/data/nasa-284d``.

Usage: python bench/build_july.py [--days 31] [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness


def main() -> None:
    parser = harness.parser(__doc__, days=True)
    parser.add_argument("--out", type=Path, help="default: bench/data/nasa-july for 31 days")
    args = parser.parse_args()
    paths = harness.july_files(args.days, args.out)
    print(f"{len(paths)} files, {harness.NASA_DAY_LINES * len(paths):,} lines in {paths[0].parent}")


if __name__ == "__main__":
    harness.run(main)
