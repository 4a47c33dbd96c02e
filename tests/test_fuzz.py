"""The fuzz drill: a corpus of hostile input never fails a job, and every line read is counted
once — as an event (on time or late) or as a quarantined line — per file (issue 1/6, item 6).

The corpus (> 100,000 lines, seeded) holds real NASA lines cut at random places, random bytes,
NULs, invalid UTF-8, CR-only and mixed line endings, 1 MB fields, lines of other formats, an
empty file, a binary file and a truncated gzip. It goes through ``logstream batch`` and through
``logstream run --trigger available-now``; the expected line count of each file is computed
here, independently, the way Hadoop's line reader splits (``\\n``, ``\\r\\n`` and ``\\r`` end a
line; a final line needs no terminator).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import subprocess
import sys
import zlib
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from tests.oracle import read_lines as nasa_lines

ENV = {**os.environ, "LOGSTREAM_SPARK_UI": "false"}
_TERMINATOR = re.compile(rb"\r\n|\r|\n")


def count_lines(data: bytes) -> int:
    """Lines as Spark's text source reads them from ``data``."""
    if not data:
        return 0
    parts = _TERMINATOR.split(data)
    return len(parts) - (1 if parts[-1] == b"" else 0)


def build_corpus(nasa: list[str], directory: Path, seed: int = 11) -> dict[str, int]:
    """Write the corpus files into ``directory``; return each file's expected line count."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    files: dict[str, bytes] = {}
    real = [line.encode() for line in nasa]
    files["real.log"] = b"\n".join(rng.sample(real, 35_000)) + b"\n"
    files["truncated-lines.log"] = b"\n".join(
        line[: rng.randrange(len(line))] for line in rng.sample(real, 20_000)
    )
    files["random-bytes.log"] = rng.randbytes(1_500_000)
    files["nul.log"] = b"\n".join(
        line[:k] + b"\x00" * rng.randrange(1, 4) + line[k:]
        for line in rng.sample(real, 5_000)
        for k in [rng.randrange(len(line))]
    )
    files["invalid-utf8.log"] = b"\n".join(
        line.replace(b"GET", rng.choice([b"G\xff\xfeT", b"\xc3\x28", b"\xed\xa0\x80"]))
        for line in rng.sample(real, 5_000)
    )
    files["cr-only.log"] = b"\r".join(rng.sample(real, 6_000)) + b"\r"
    files["mixed-endings.log"] = b"".join(
        line + rng.choice([b"\n", b"\r\n", b"\r", b"\n\n"]) for line in rng.sample(real, 6_000)
    )
    huge = b"x" * 1_000_000
    files["huge-fields.log"] = b"\n".join(
        [
            b'h - - [09/Jul/1995:00:00:01 -0400] "GET /' + huge + b' HTTP/1.0" 200 1',
            b'h - - [09/Jul/1995:00:00:01 -0400] "GET /a HTTP/1.0" 200 ' + b"9" * 1_000_000,
            b"h" * 1_000_000 + b' - - [09/Jul/1995:00:00:01 -0400] "GET /a HTTP/1.0" 200 1',
            b'h - - [09/Jul/1995:00:00:01 -0400] "' + b"\\\\" * 500_000 + b'" 200 1',
            b'h - - [09/Jul/1995:00:00:01 -0400] "GET /' + b"a b " * 250_000 + b'HTTP/1.0" 200 1',
        ]
        * 4
    )
    other = [
        b'1.2.3.4 - - [17/May/2015:10:05:03 +0000] "GET /x HTTP/1.1" 200 7 "-" "curl/7.0"',
        b'{"host": "1.2.3.4", "time": "1995-07-09T00:00:01Z", "status": 200}',
        b"2015/05/17 10:05:03 [error] 1234#0: *1 open() failed (2: No such file)",
        b"Jul  9 00:00:01 host sshd[123]: Failed password for root from 1.2.3.4",
        b"1.2.3.4|&|2015-02-15 10:00AM|&|x|&|y",
        b"#Fields: date time s-ip cs-method cs-uri-stem",
    ]
    files["other-formats.log"] = b"\n".join(rng.choice(other) for _ in range(12_000)) + b"\n"
    files["empty.log"] = b""
    files["binary.bin"] = rng.randbytes(100_000)
    whole = gzip.compress(b"\n".join(rng.sample(real, 8_000)) + b"\n", mtime=0)
    files["truncated.log.gz"] = whole[: len(whole) // 2]

    expected = {}
    for i, (name, data) in enumerate(sorted(files.items())):
        path = directory / name
        path.write_bytes(data)
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
        if name.endswith(".gz"):  # whole lines before the cut (tests/report/test_bad_input.py)
            data = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data)
            data = data[: data.rfind(b"\n") + 1]
        expected[name] = count_lines(data)
    return expected


@pytest.fixture(scope="module")
def corpus(nasa_day, tmp_path_factory) -> tuple[Path, dict[str, int]]:
    directory = tmp_path_factory.mktemp("fuzz") / "in"
    expected = build_corpus(nasa_lines(nasa_day), directory)
    assert sum(expected.values()) > 100_000
    return directory, expected


def assert_clean(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, done.stderr[-4000:]
    for marker in ("Traceback", "Exception in thread", "\tat "):
        assert marker not in done.stderr, done.stderr[-4000:]


def test_logstream_batch_counts_every_line_of_the_corpus_once(corpus, tmp_path):
    directory, expected = corpus
    done = subprocess.run(
        [
            sys.executable, "-m", "logstream", "batch", str(directory), "--format", "common",
            "--json", str(tmp_path / "r.json"), "--quarantine", str(tmp_path / "q"), "--quiet",
        ],
        capture_output=True, text=True, timeout=600, env=ENV,
    )  # fmt: skip
    assert_clean(done)
    report = json.loads((tmp_path / "r.json").read_text())
    g = report["general"]
    assert g["valid_requests"] + g["failed_requests"] == g["total_requests"]
    assert g["total_requests"] == sum(expected.values())
    assert g["corrupt_files"] == 1
    per_file: Counter[str] = Counter()
    for part in (tmp_path / "q").glob("*.json"):
        for line in part.open(encoding="utf-8"):
            row = json.loads(line)
            if row["reason"] != "corrupt_file":
                per_file[Path(row["source_file"]).name] += 1
    # every quarantined line names its file: the real lines all parse, the foreign ones none
    assert per_file["real.log"] == 0
    for name in ("other-formats.log", "random-bytes.log", "binary.bin"):
        assert per_file[name] == expected[name] > 0, name


def test_logstream_run_counts_every_line_of_every_file_once(spark, corpus, tmp_path):
    directory, expected = corpus
    done = subprocess.run(
        [
            sys.executable, "-m", "logstream", "run", "--input-dir", str(directory),
            "--output-dir", str(tmp_path / "out"), "--state-dir", str(tmp_path / "state"),
            "--format", "common", "--trigger", "available-now",
            "--max-files-per-trigger", "3", "--quiet",
        ],
        capture_output=True, text=True, timeout=900, env=ENV,
    )  # fmt: skip
    assert_clean(done)
    out = tmp_path / "out"
    got: Counter[str] = Counter()
    for name in ("events", "late_events", "quarantine"):
        df = spark.read.parquet(str(out / name))
        if name == "quarantine":
            df = df.where(F.col("reason") != "corrupt_file")
        for row in df.groupBy("source_file").count().collect():
            got[Path(row["source_file"]).name] += row["count"]
    assert {k: v for k, v in got.items() if v} == {k: v for k, v in expected.items() if v}
    corrupt = spark.read.parquet(str(out / "quarantine")).where(F.col("reason") == "corrupt_file")
    assert [Path(r.source_file).name for r in corrupt.collect()] == ["truncated.log.gz"]
