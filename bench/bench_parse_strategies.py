"""Compare native ways to apply one compiled LogFormat in Spark, in one run.

* ``regexp_extract`` once per field (the obvious port: N regex matches per line);
* ``regexp_replace`` into U+0001-joined fields, then ``split`` (one match per line) — what
  :mod:`logstream.parsing.parser` does;
* the same with the regular expression in its earlier spelling: ``\\s`` inside its
  character classes (a chain of tests a character in Java's engine, where the white space
  written out is one table lookup) and possessive runs inside the repeated groups
  (:mod:`logstream.parsing.logformat`'s notes on its classes).

Input: the real NASA day replicated ``--copies`` times in one plain file, read once and
cached; each way written to the ``noop`` sink twice, the second (warm) round kept. Prints
lines/s of each and their ratio and writes ``bench/results/parse-strategies.json``.

Usage: python bench/bench_parse_strategies.py [--copies 10] [--out FILE]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness


def main() -> None:
    parser = harness.parser(__doc__, "parse-strategies")
    parser.add_argument("--copies", type=int, default=10)
    args = parser.parse_args()
    with harness.scratch("bench-parse-") as tmp:
        (tmp / "nasa.log").write_bytes(harness.nasa_day_bytes() * args.copies)
        spark = harness.spark_session()
        timings = compare(spark, tmp / "nasa.log")
    n = harness.NASA_DAY_LINES * args.copies
    for name, secs in timings.items():
        print(f"{name:26s} {n / secs:12,.0f} lines/s")
    ratio = timings["regexp_extract_per_field"] / timings["replace_split"]
    print(f"ratio replace_split / regexp_extract = {ratio:.2f}x")
    spelling = timings["replace_split_earlier_spelling"] / timings["replace_split"]
    print(f"ratio replace_split / its earlier spelling = {spelling:.2f}x")
    result = {
        "input": f"NASA 1995-07-09 x {args.copies} in one file, cached",
        "lines": n,
        "lines_per_s": {name: round(n / secs) for name, secs in timings.items()},
        "ratio_replace_split_to_regexp_extract": round(ratio, 2),
        "ratio_replace_split_to_earlier_spelling": round(spelling, 2),
        "machine": harness.machine(),
    }
    harness.write_result(result, args.out, show=False)


def earlier_spelling(regex: str) -> str:
    """A compiled format's regular expression as it was written before its classes spelt out
    white space: ``\\s`` inside and outside classes, possessive runs in the repeated groups
    (``tests/parsing/test_regex_classes.py`` holds both spellings to the same matches)."""
    from logstream.parsing.logformat import _SPACE

    return (
        regex.replace(f"[^{_SPACE}", "[^\\s")
        .replace(f"[{_SPACE}]*$", "\\s*$")
        .replace("]+|\\\\[^\\x01]", "]++|\\\\[^\\x01]")
    )


def compare(spark, path: Path) -> dict[str, float]:
    """Seconds of each way over the lines of ``path`` (the second, warm round)."""
    from pyspark.sql import functions as F

    from logstream.parsing import compile_format, parse

    lines = spark.read.text(str(path)).withColumn("source_file", F.lit("x")).cache()
    lines.count()
    fmt = compile_format("common")

    sep = "\x01"
    fields = list(fmt.fields)

    def extract():
        # one regexp_extract per field: N regex matches per line
        return lines.select(
            *[F.regexp_extract("value", fmt.regex, i + 1).alias(n) for i, n in enumerate(fields)]
        )

    def replace_split(regex: str = fmt.regex):
        # one regexp_replace rewriting the line to U+0001-joined groups, then split
        joined = "".join(f"{sep}${i}" for i in range(1, len(fields) + 1))
        parts = F.split(F.regexp_replace("value", regex, joined), sep)
        return lines.select(*[F.get(parts, i + 1).alias(n) for i, n in enumerate(fields)])

    def full_parse():
        # what logstream runs: replace+split plus try_* typing and quarantine reasons
        return parse(lines, fmt)

    runs = [
        ("regexp_extract_per_field", extract),
        ("replace_split", replace_split),
        ("replace_split_earlier_spelling", lambda: replace_split(earlier_spelling(fmt.regex))),
        ("logstream_parse_typed", full_parse),
    ]
    timings: dict[str, float] = {}
    for name, build in runs * 2:  # the second round (warm JIT) is kept
        t0 = time.perf_counter()
        build().write.format("noop").mode("overwrite").save()
        timings[name] = time.perf_counter() - t0
    lines.unpersist()
    return timings


if __name__ == "__main__":
    harness.run(main)
