"""The report's two ways to its tables give one report: the driver's (pandas on the one
aggregation's rows, when they are few) and Spark's (every ranked table in one job), on the real
NASA day and on the real Apache Combined log (referrers, user agents, sessions, quarantine)."""

from __future__ import annotations

import pytest
from tests.conftest import data_file

from logstream.parsing import compile_format, parse
from logstream.report import build_report
from logstream.report.driver import DRIVER_ROWS
from logstream.sources import read_lines

ALL = 10_000  # every item of every table: a difference anywhere shows


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("NASA_access_log_Jul95_day09.log.gz", "common"),
        ("elastic_apache_logs_combined_2015.log.gz", "combined"),
    ],
)
def test_the_driver_s_tables_equal_spark_s(spark, name, fmt):
    parsed = parse(read_lines(spark, [str(data_file(name))]), compile_format(fmt), time_text=True)
    on_driver = build_report(parsed, top=ALL, log_format=fmt)
    in_spark = build_report(parsed, top=ALL, log_format=fmt, driver_rows=0)
    assert on_driver["general"]["total_requests"] > 9_000
    assert on_driver["sessions"]["sessions"] > 0
    for key in sorted(set(on_driver) | set(in_spark)):
        if isinstance(on_driver.get(key), dict) and "data" in on_driver[key]:
            pairs = zip(on_driver[key]["data"], in_spark[key]["data"], strict=True)
            assert [a for a, b in pairs if a != b] == [], key  # the first items that differ
        assert on_driver.get(key) == in_spark.get(key), key
    assert DRIVER_ROWS >= 100_000  # the real logs above take the driver's path by default


@pytest.mark.parametrize("driver_rows", [DRIVER_ROWS, 0])
def test_quarantine_examples_come_in_the_order_of_the_input(spark, tmp_path, nasa_day, driver_rows):
    # Spark packs the largest file first: the smaller first file's bad lines still come first
    import gzip

    day = gzip.decompress(nasa_day.read_bytes()).decode().splitlines()
    files = []
    for i, (size, bad) in enumerate(((200, 3), (20_000, 3))):
        lines = day[:size] + [f"bad line {i}.{k}" for k in range(bad)]
        path = tmp_path / f"{i}.log"
        path.write_text("\n".join(lines) + "\n")
        files.append(str(path))
    parsed = parse(read_lines(spark, files), compile_format("common"), time_text=True)
    report = build_report(parsed, log_format="common", driver_rows=driver_rows)
    shown = [e["raw_line"] for e in report["quarantine"]["examples"]]
    assert shown == ["bad line 0.0", "bad line 0.1", "bad line 0.2", "bad line 1.0", "bad line 1.1"]
