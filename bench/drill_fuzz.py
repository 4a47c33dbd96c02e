"""The fuzz drill: a corpus of hostile input never fails a job, and every line read is counted
once — as an event (on time or late) or as a quarantined line — per file.

The corpus (seeded; 106,891 lines at ``--scale 1``) holds real NASA lines cut at random
places, random bytes, NULs, invalid UTF-8, CR-only and mixed line endings, 1 MB fields, lines
of other formats, an empty file, a binary file and a truncated gzip (:func:`build_corpus`).
It goes through ``logstream batch`` (:func:`run_batch`, or :func:`start_batch` and
:func:`finish_batch` to run it beside something else) and through ``logstream run
--trigger available-now --max-files-per-trigger 3`` (:func:`run_stream`); the expected line
count of each file is computed here, independently, the way Hadoop's line reader splits
(``\\n``, ``\\r\\n`` and ``\\r`` end a line; a final line needs no terminator).

Usage::

    python bench/drill_fuzz.py                  # the whole corpus; prints the counts
    python bench/drill_fuzz.py --scale 0.5 --out /tmp/fuzz.json

``tests/test_fuzz.py`` runs the same corpus at ``--scale 0.2`` (every kind of file, the 1 MB
fields whole) with the same assertions; run the long form after changing the parser, the
sources or the quarantine.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness

_TERMINATOR = re.compile(rb"\r\n|\r|\n")

#: The five 1 MB-field lines (a path, a size, a host, an escaped request, a request of many
#: words); the corpus repeats them four times at ``scale`` 1.
_HUGE = b"x" * 1_000_000
HUGE_FIELDS = (
    b'h - - [09/Jul/1995:00:00:01 -0400] "GET /' + _HUGE + b' HTTP/1.0" 200 1',
    b'h - - [09/Jul/1995:00:00:01 -0400] "GET /a HTTP/1.0" 200 ' + b"9" * 1_000_000,
    b"h" * 1_000_000 + b' - - [09/Jul/1995:00:00:01 -0400] "GET /a HTTP/1.0" 200 1',
    b'h - - [09/Jul/1995:00:00:01 -0400] "' + b"\\\\" * 500_000 + b'" 200 1',
    b'h - - [09/Jul/1995:00:00:01 -0400] "GET /' + b"a b " * 250_000 + b'HTTP/1.0" 200 1',
)

#: Lines of other log formats (combined, JSON, nginx error, syslog, IIS, a custom one).
OTHER_FORMATS = (
    b'1.2.3.4 - - [17/May/2015:10:05:03 +0000] "GET /x HTTP/1.1" 200 7 "-" "curl/7.0"',
    b'{"host": "1.2.3.4", "time": "1995-07-09T00:00:01Z", "status": 200}',
    b"2015/05/17 10:05:03 [error] 1234#0: *1 open() failed (2: No such file)",
    b"Jul  9 00:00:01 host sshd[123]: Failed password for root from 1.2.3.4",
    b"1.2.3.4|&|2015-02-15 10:00AM|&|x|&|y",
    b"#Fields: date time s-ip cs-method cs-uri-stem",
)


def count_lines(data: bytes) -> int:
    """Lines as Spark's text source reads them from ``data``."""
    if not data:
        return 0
    parts = _TERMINATOR.split(data)
    return len(parts) - (1 if parts[-1] == b"" else 0)


def build_corpus(
    nasa: list[str], directory: Path, seed: int = 11, scale: float = 1.0
) -> dict[str, int]:
    """Write the corpus files into ``directory``; return each file's expected line count.

    Parameters
    ----------
    nasa : list of str
        Real log lines to sample from (the NASA day, 35,272 lines).
    directory : Path
        Created when missing; the files get increasing modification times (sorted names).
    seed : int
        Seed of every random choice.
    scale : float
        Fraction of each file's lines (or random bytes); the 1 MB fields stay 1 MB, repeated
        ``max(1, round(4 * scale))`` times. 1.0: 106,891 lines; 0.2: 21,335.

    Returns
    -------
    dict
        File name → lines Spark's text source reads from it (a truncated gzip: its whole
        lines before the cut, as ``tests/report/test_bad_input.py`` reads them).
    """

    def n(count: int) -> int:
        return max(1, round(count * scale))

    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    files: dict[str, bytes] = {}
    real = [line.encode() for line in nasa]
    files["real.log"] = b"\n".join(rng.sample(real, n(35_000))) + b"\n"
    files["truncated-lines.log"] = b"\n".join(
        line[: rng.randrange(len(line))] for line in rng.sample(real, n(20_000))
    )
    files["random-bytes.log"] = rng.randbytes(n(1_500_000))
    files["nul.log"] = b"\n".join(
        line[:k] + b"\x00" * rng.randrange(1, 4) + line[k:]
        for line in rng.sample(real, n(5_000))
        for k in [rng.randrange(len(line))]
    )
    files["invalid-utf8.log"] = b"\n".join(
        line.replace(b"GET", rng.choice([b"G\xff\xfeT", b"\xc3\x28", b"\xed\xa0\x80"]))
        for line in rng.sample(real, n(5_000))
    )
    files["cr-only.log"] = b"\r".join(rng.sample(real, n(6_000))) + b"\r"
    files["mixed-endings.log"] = b"".join(
        line + rng.choice([b"\n", b"\r\n", b"\r", b"\n\n"]) for line in rng.sample(real, n(6_000))
    )
    files["huge-fields.log"] = b"\n".join(list(HUGE_FIELDS) * max(1, round(4 * scale)))
    files["other-formats.log"] = (
        b"\n".join(rng.choice(OTHER_FORMATS) for _ in range(n(12_000))) + b"\n"
    )
    files["empty.log"] = b""
    files["binary.bin"] = rng.randbytes(n(100_000))
    whole = gzip.compress(b"\n".join(rng.sample(real, n(8_000))) + b"\n", mtime=0)
    files["truncated.log.gz"] = whole[: len(whole) // 2]

    expected = {}
    for i, (name, data) in enumerate(sorted(files.items())):
        path = directory / name
        path.write_bytes(data)
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
        if name.endswith(".gz"):  # whole lines before the cut
            data = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data)
            data = data[: data.rfind(b"\n") + 1]
        expected[name] = count_lines(data)
    return expected


def start_batch(directory: Path, work: Path) -> subprocess.Popen[bytes]:
    """Start ``logstream batch`` over the corpus (its own process group; its standard output
    and error in ``work``); :func:`finish_batch` waits for it and reads what it wrote."""
    with (work / "batch.stdout").open("wb") as out, (work / "batch.stderr").open("wb") as err:
        return subprocess.Popen(
            [
                *harness.LOGSTREAM, "batch", str(directory), "--format", "common",
                "--json", str(work / "r.json"), "--quarantine", str(work / "q"), "--quiet",
            ],
            stdout=out, stderr=err, env=harness.bench_env(), start_new_session=True,
        )  # fmt: skip


def finish_batch(
    proc: subprocess.Popen[bytes], work: Path, timeout: float = 1800
) -> tuple[subprocess.CompletedProcess, dict, Counter]:
    """Wait for the batch of :func:`start_batch` (killed with its process group after
    ``timeout`` seconds).

    Returns
    -------
    tuple
        The finished process (its output as text), its JSON report (empty when it wrote none)
        and the quarantined lines per file name (corrupt files left out).
    """
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    done = subprocess.CompletedProcess(
        proc.args,
        proc.returncode,
        (work / "batch.stdout").read_text(errors="replace"),
        (work / "batch.stderr").read_text(errors="replace"),
    )
    report_file = work / "r.json"
    report = json.loads(report_file.read_text()) if report_file.exists() else {}
    per_file: Counter[str] = Counter()
    for part in (work / "q").glob("*.json"):
        for line in part.open(encoding="utf-8"):
            row = json.loads(line)
            if row["reason"] != "corrupt_file":
                per_file[Path(row["source_file"]).name] += 1
    return done, report, per_file


def run_batch(directory: Path, work: Path) -> tuple[subprocess.CompletedProcess, dict, Counter]:
    """``logstream batch`` over the corpus, to its end (:func:`start_batch`,
    :func:`finish_batch`)."""
    return finish_batch(start_batch(directory, work), work)


def run_stream(
    spark: Any, directory: Path, work: Path
) -> tuple[subprocess.CompletedProcess, Counter, list[str]]:
    """``logstream run --trigger available-now --max-files-per-trigger 3`` over the corpus.

    Returns
    -------
    tuple
        The finished process, the lines counted per file name (events, late events and
        quarantined lines; corrupt files left out) and the names of the files quarantined as
        corrupt. ``spark`` only reads the Parquet outputs back.
    """
    from pyspark.sql import functions as F

    done = subprocess.run(
        harness.run_argv(
            work, "--input-dir", str(directory), "--trigger", "available-now",
            "--max-files-per-trigger", "3",
        ),
        capture_output=True, text=True, timeout=2700, env=harness.bench_env(),
    )  # fmt: skip
    got: Counter[str] = Counter()
    corrupt: list[str] = []
    if done.returncode != 0:
        return done, got, corrupt
    out = work / "out"
    for name in ("events", "late_events", "quarantine"):
        df = spark.read.parquet(str(out / name))
        if name == "quarantine":
            df = df.where(F.col("reason") != "corrupt_file")
        for row in df.groupBy("source_file").count().collect():
            got[Path(row["source_file"]).name] += row["count"]
    quarantine = spark.read.parquet(str(out / "quarantine"))
    corrupt = [
        Path(r.source_file).name
        for r in quarantine.where(F.col("reason") == "corrupt_file").collect()
    ]
    return done, got, corrupt


def main() -> int:
    parser = harness.parser(__doc__)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the corpus")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--out", type=Path, help="also write the result as JSON here")
    args = parser.parse_args()
    spark = harness.spark_session(master="local[2]", app_name="drill-fuzz")
    with tempfile.TemporaryDirectory(prefix="drill-fuzz-") as tmp:
        work = Path(tmp)
        expected = build_corpus(harness.nasa_day_lines(), work / "in", args.seed, args.scale)
        (work / "batch").mkdir()
        batch, report, quarantined = run_batch(work / "in", work / "batch")
        stream, counted, corrupt = run_stream(spark, work / "in", work / "run")
    nonzero = {k: v for k, v in expected.items() if v}
    general = report.get("general", {})
    result = {
        "machine": harness.machine(),
        "scale": args.scale,
        "seed": args.seed,
        "lines": sum(expected.values()),
        "expected": expected,
        "batch_exit": batch.returncode,
        "batch_total_requests": general.get("total_requests"),
        "batch_quarantined_per_file": dict(quarantined),
        "run_exit": stream.returncode,
        "run_counted_per_file": dict(counted),
        "run_corrupt_files": corrupt,
        "exact": batch.returncode == stream.returncode == 0
        and general.get("total_requests") == sum(expected.values())
        and {k: v for k, v in counted.items() if v} == nonzero
        and corrupt == ["truncated.log.gz"],
    }
    if args.out:
        harness.write_result(result, args.out)
    else:
        print(json.dumps(result, indent=2))
    return 0 if result["exact"] else 1


if __name__ == "__main__":
    harness.run(main)
