"""Bad input never fails ``logstream batch``: a truncated ``.gz`` counts its readable lines and
is quarantined as ``corrupt_file``; input with no valid line gives a report of zeros (issue
1/6, defects 4 and 5)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from tests.conftest import NO_PANELS

from logstream.cli import main
from logstream.sources.integrity import check_file, files_of_batch, spark_file_uri

ENV = {**os.environ, "LOGSTREAM_SPARK_UI": "false"}


def batch(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "logstream", "batch", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=ENV,
    )


@pytest.fixture(scope="module")
def bad_inputs(nasa_day, tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("bad-input")
    cut = tmp / "cut.log.gz"  # the first 30,000 bytes of the real day: a copy cut short
    cut.write_bytes(nasa_day.read_bytes()[:30_000])
    noise = tmp / "random.bin"
    noise.write_bytes(random.Random(5).randbytes(200_000))
    fake = tmp / "not-gzip.log.gz"
    fake.write_bytes(random.Random(6).randbytes(5_000))
    return {"cut": cut, "random": noise, "fake": fake}


def complete_lines(path: Path) -> int:
    """Whole lines zlib decompresses from a truncated gzip file (as ``zcat | wc -l``)."""
    return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(path.read_bytes()).count(b"\n")


def test_a_truncated_gzip_counts_its_readable_lines_and_is_reported(bad_inputs, tmp_path):
    cut = bad_inputs["cut"]
    done = batch(
        str(cut), "--format", "common", "--json", str(tmp_path / "r.json"),
        "--quarantine", str(tmp_path / "q"), "--quiet", *NO_PANELS,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "\tat " not in done.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    g = report["general"]
    # Spark's gzip decoder returns every whole line before the cut (the partial one is lost)
    assert g["total_requests"] == g["valid_requests"] == complete_lines(cut) > 2000
    assert g["corrupt_files"] == 1
    (entry,) = report["quarantine"]["corrupt_files"]
    assert entry["source_file"] == spark_file_uri(cut)
    assert "truncated gz" in entry["error"]
    rows = [json.loads(line) for f in (tmp_path / "q").glob("*.json") for line in f.open()]
    corrupt = [r for r in rows if r["reason"] == "corrupt_file"]
    assert corrupt == [
        {"source_file": spark_file_uri(cut), "reason": "corrupt_file", "detail": entry["error"]}
    ]


def test_strict_makes_a_corrupt_file_an_error_before_spark_starts(bad_inputs):
    done = batch(str(bad_inputs["cut"]), str(bad_inputs["fake"]), "--format", "common", "--strict")
    assert done.returncode == 2
    assert "2 input file(s) cannot be read to their end" in done.stderr
    assert "drop --strict" in done.stderr and "Traceback" not in done.stderr


def test_input_with_no_valid_line_is_a_report_of_zeros(spark, bad_inputs, tmp_path, capsys):
    # in process, on the shared session: the command's exit status is what main() returns (its
    # standard error as a separate process is the test of the truncated file above)
    code = main([
        "batch", str(bad_inputs["random"]), str(bad_inputs["fake"]), "--format", "common",
        "--json", str(tmp_path / "r.json"), "--html", str(tmp_path / "r.html"), "--quiet",
    ])  # fmt: skip
    assert code == 0, capsys.readouterr().err[-3000:]
    report = json.loads((tmp_path / "r.json").read_text())
    g = report["general"]
    noise = bad_inputs["random"].read_bytes()
    lines = len(noise.replace(b"\r\n", b"\n").replace(b"\r", b"\n").splitlines())
    assert (g["valid_requests"], g["failed_requests"], g["total_requests"]) == (0, lines, lines)
    assert g["corrupt_files"] == 1  # not-gzip.log.gz: no line at all
    assert g["unique_visitors"] == g["bandwidth_bytes"] == 0 and g["first_event"] is None
    assert report["sessions"]["sessions"] == 0 and report["sessions"]["median_duration_s"] is None
    assert report["hourly"] == [] and report["top_urls"] == []
    assert sum(report["quarantine"]["reasons"].values()) == lines
    assert "Corrupt files" in (tmp_path / "r.html").read_text()


def test_check_file_tells_whole_truncated_and_foreign_files_apart(bad_inputs, nasa_day):
    assert check_file(nasa_day) is None
    assert check_file(bad_inputs["random"]) is None  # plain bytes are lines
    assert check_file(bad_inputs["cut"]).startswith("truncated gz:")
    assert check_file(bad_inputs["fake"]).startswith("corrupt gz:")


@pytest.mark.parametrize("cut_at", [6_500, 30_000])
def test_a_truncated_gzip_reports_the_bytes_actually_read(nasa_day, tmp_path, cut_at):
    # cut within the first 64 KiB of content (6,500 bytes of gzip hold 59,186 bytes, 543
    # lines: the file had 62,564 bytes and was reported as "read 0 bytes") and beyond
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(nasa_day.read_bytes()[:cut_at])
    content = len(zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(cut.read_bytes()))
    assert content > 0
    error = check_file(cut)
    assert error.startswith("truncated gz:")
    assert error.endswith(f"(read {content:,} bytes of its content)"), (error, content)


def test_the_files_of_a_micro_batch_are_read_from_the_source_log(tmp_path):
    log = tmp_path / "sources" / "0"
    log.mkdir(parents=True)
    (log / "3").write_text(
        'v1\n{"path":"file:///in/a%20b.log.gz","timestamp":1,"batchId":3}\n'
        '{"path":"file:///in/c.log","timestamp":2,"batchId":3}\n'
    )
    (log / "9.compact").write_text('v1\n{"path":"file:///in/d.log","timestamp":1,"batchId":9}\n')
    assert files_of_batch(tmp_path, 3) == ["/in/a b.log.gz", "/in/c.log"]
    assert files_of_batch(tmp_path, 9) == ["/in/d.log"]
    assert files_of_batch(tmp_path, 4) is None
