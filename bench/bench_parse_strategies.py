"""Compare two native ways to apply one compiled LogFormat in Spark, in one run.

* ``regexp_extract`` once per field (the obvious port: N regex matches per line);
* ``regexp_replace`` into U+0001-joined fields, then ``split`` (one match per line) — what
  :mod:`logstream.parsing.parser` does.

Input: the real NASA day replicated ``--copies`` times in one plain file. Prints lines/s of
each and their ratio.

Usage: python bench/bench_parse_strategies.py [--copies 10]
"""

from __future__ import annotations

import argparse
import gzip
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.build_july import DAY_FILE, data_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--copies", type=int, default=10)
    args = parser.parse_args()

    from pyspark.sql import functions as F

    from logstream.config import SparkSettings
    from logstream.parsing import compile_format, parse
    from logstream.session import get_spark

    with gzip.open(data_dir() / DAY_FILE, "rb") as fh:
        day = fh.read()
    tmp = Path(tempfile.mkdtemp()) / "nasa.log"
    tmp.write_bytes(day * args.copies)
    n = 35272 * args.copies

    spark = get_spark(SparkSettings(ui_enabled=False))
    lines = spark.read.text(str(tmp)).withColumn("source_file", F.lit("x")).cache()
    lines.count()
    fmt = compile_format("common")

    sep = "\x01"
    fields = list(fmt.fields)

    def extract():
        # one regexp_extract per field: N regex matches per line
        return lines.select(
            *[F.regexp_extract("value", fmt.regex, i + 1).alias(n) for i, n in enumerate(fields)]
        )

    def replace_split():
        # one regexp_replace rewriting the line to U+0001-joined groups, then split
        joined = "".join(f"{sep}${i}" for i in range(1, len(fields) + 1))
        parts = F.split(F.regexp_replace("value", fmt.regex, joined), sep)
        return lines.select(*[F.get(parts, i + 1).alias(n) for i, n in enumerate(fields)])

    def full_parse():
        # what logstream runs: replace+split plus try_* typing and quarantine reasons
        return parse(lines, fmt)

    runs = [
        ("regexp_extract_per_field", extract),
        ("replace_split", replace_split),
        ("logstream_parse_typed", full_parse),
    ]
    timings: dict[str, float] = {}
    for name, build in runs * 2:  # the second round (warm JIT) is kept
        t0 = time.perf_counter()
        build().write.format("noop").mode("overwrite").save()
        timings[name] = time.perf_counter() - t0
    for name, secs in timings.items():
        print(f"{name:26s} {n / secs:12,.0f} lines/s (all {len(fields)} fields)")
    print(
        "ratio replace_split / regexp_extract = "
        f"{timings['regexp_extract_per_field'] / timings['replace_split']:.2f}x"
    )


if __name__ == "__main__":
    main()
    from pyspark.sql import SparkSession

    if (active := SparkSession.getActiveSession()) is not None:
        active.stop()  # let Spark's listener bus drain before Python exits
