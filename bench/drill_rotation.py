"""The rotation drill: follow a log that a writer appends to and rotates, kill the pipeline
twice, and count every line exactly once.

A writer process appends the real NASA day (1995-07-09, 35,272 lines) to ``access.log`` line
by line at ``--rate`` lines/s (after its first 100 lines it waits until the pipeline has read
them), and rotates it as logrotate would:

1. at a quarter of the lines, by rename (``access.log`` → ``access.log.1``, new
   ``access.log``);
2. at half, by rename again, after compressing the previous rotation (``access.log.1`` →
   ``access.log.2.gz``, deleted);
3. at three quarters, by ``copytruncate`` (``access.log`` copied to ``access.log.1``, then
   truncated to 0). ``copytruncate`` loses the lines written between the reader's last
   micro-batch and the truncation (docs/follow.md, "Limits"), so the writer waits until the
   pipeline has read every line written so far before it copies.

Before each rename the writer also waits until the pipeline has read a line of the current
file: a follower down for two rotations in a row never saw the file rotated in between (it is
renamed to a name the pattern does not match before anyone looked), and logrotate's
``compress`` without ``delaycompress`` deletes a rotated file it may not have finished
(docs/follow.md, "Limits"). Real rotations are hours apart; the drill's are seconds apart.

Meanwhile ``logstream run --follow LOGDIR/access.log --trigger "1 second"`` is SIGKILLed (its
whole process group) ``--kills`` times at seeded random moments and started again on the
same state. When the writer is done, the running pipeline is stopped with SIGTERM and one
``--trigger available-now`` start reads what is left. Then: on-time events must equal the
lines written, and every final ``traffic_per_minute`` window must equal the batch computation
over the same lines.

Usage::

    python bench/drill_rotation.py --kills 2 --seed 5     # bench/results/drill-rotation.json

Not in the test suite (two minutes for one kill; the suite's time budget):
``tests/pipeline/test_follow_run.py`` runs the same rotations over several clean restarts,
``tests/pipeline/test_recovery.py`` kills at every write of a micro-batch. Run it after
changing the follow source.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
DAY_FILE = "NASA_access_log_Jul95_day09.log.gz"
#: Lines written before the writer waits for the pipeline's first micro-batch: a follower
#: cannot know a file renamed before it first looked (it follows the names it is given).
WARM_LINES = 100


@dataclass
class RotationResult:
    """What a rotation drill did and found."""

    lines: int
    kills: int
    seed: int
    kill_moments_s: list[float] = field(default_factory=list)
    events: int = 0
    late_events: int = 0
    quarantined: int = 0
    final_windows: int = 0
    window_differences: int = 0
    seconds: float = 0.0

    @property
    def exact(self) -> bool:
        """Every line counted once and every final window equal to the batch computation."""
        return (
            self.events == self.lines
            and self.late_events == 0
            and self.quarantined == 0
            and self.window_differences == 0
            and self.final_windows > 0
        )


def data_dir() -> Path:
    default = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    return Path(os.environ.get("LOGSTREAM_DATA_DIR", default))


def day_lines(max_lines: int | None = None) -> list[str]:
    source = data_dir() / DAY_FILE
    if not source.is_file():
        raise SystemExit(f"missing {source}: set LOGSTREAM_DATA_DIR to the shared data folder")
    with gzip.open(source, "rt", encoding="utf-8", errors="replace") as fh:
        return fh.read().splitlines()[:max_lines]


def counted(db: Path) -> int:
    """Lines the pipeline has committed (on-time + late + quarantined); 0 before the store."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            rows = conn.execute(
                "SELECT SUM(value) FROM counters "
                "WHERE name IN ('events', 'late_events', 'quarantined')"
            ).fetchone()
    except sqlite3.Error:
        return 0
    return int(rows[0] or 0)


def write(lines_file: Path, logdir: Path, rate: float, db: Path) -> None:
    """The writer process: append, rotate, wait for the reader before copytruncate."""
    lines = lines_file.read_text(encoding="utf-8").splitlines()
    log = logdir / "access.log"
    marks = {len(lines) // 4: "rename", len(lines) // 2: "compress+rename"}
    marks[3 * len(lines) // 4] = "copytruncate"
    fh = log.open("a", encoding="utf-8")
    warm = min(WARM_LINES, len(lines))
    reached = 0  # the line of the last rotation
    start = time.monotonic()
    for i, line in enumerate(lines):
        if i == warm:  # the pipeline follows access.log before the first rotation
            while counted(db) < warm:
                time.sleep(0.2)
            start = time.monotonic() - i / rate
        action = marks.get(i)
        if action in ("rename", "compress+rename"):
            # the reader has reached the current file: it follows it under its next name
            # (a reader down across two rotations never saw the file rotated in between)
            while counted(db) <= reached:
                time.sleep(0.2)
            reached = i
        if action == "rename":
            fh.close()
            log.rename(logdir / "access.log.1")
            fh = log.open("a", encoding="utf-8")
        elif action == "compress+rename":
            fh.close()
            old = logdir / "access.log.1"
            with old.open("rb") as src, gzip.open(logdir / "access.log.2.gz", "wb") as gz:
                shutil.copyfileobj(src, gz)
            old.unlink()
            log.rename(old)
            fh = log.open("a", encoding="utf-8")
        elif action == "copytruncate":
            while counted(db) < i:  # lossless only when the reader has caught up
                time.sleep(0.2)
            fh.flush()
            shutil.copy(log, logdir / "access.log.1")
            fh.truncate(0)
            fh.seek(0)
        fh.write(line + "\n")
        fh.flush()
        delay = start + (i + 1) / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    fh.close()


def command(root: Path, trigger: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "logstream",
        "run",
        "--follow",
        str(root / "logs" / "access.log"),
        "--format",
        "common",
        "--output-dir",
        str(root / "out"),
        "--state-dir",
        str(root / "state"),
        "--trigger",
        trigger,
        "--no-dashboard",
        "--quiet",
    ]


def _env() -> dict[str, str]:
    return {**os.environ, "LOGSTREAM_SPARK_UI": "false"}


def _start(root: Path) -> subprocess.Popen:
    return subprocess.Popen(
        command(root, "1 second"),
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM, no clean-up
    proc.wait()


def drill(
    spark: Any,
    kills: int = 2,
    seed: int = 5,
    work: Path | None = None,
    max_lines: int | None = None,
    rate: float = 1000.0,
) -> RotationResult:
    """Run the drill (see the module docstring) and return what it found.

    Parameters
    ----------
    spark : SparkSession
        Reads the outputs back and computes the batch windows.
    kills : int
        SIGKILLs of the pipeline while the writer writes.
    seed : int
        Seed of the kill moments (uniform over what is left of the writer's expected time
        once the pipeline has committed its first micro-batch).
    work : Path, optional
        Working directory (a temporary one by default).
    max_lines : int, optional
        Only the day's first lines (the suite's short form).
    rate : float
        Lines per second the writer appends.
    """
    from pyspark.sql import functions as F

    from logstream import analytics
    from logstream.parsing import compile_format, events, parse

    work = work or Path(tempfile.mkdtemp(prefix="drill-rotation-"))
    lines = day_lines(max_lines)
    result = RotationResult(lines=len(lines), kills=kills, seed=seed)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    lines_file = work / "lines.txt"
    lines_file.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    db = work / "out" / "logstream.db"
    t0 = time.monotonic()
    writer_args = [str(lines_file), str(work / "logs"), str(rate), str(db)]
    writer = subprocess.Popen([sys.executable, __file__, "--write", *writer_args])
    rng = random.Random(seed)
    expected_s = len(lines) / rate
    proc = _start(work)
    try:
        while counted(db) == 0:  # the kills land once the pipeline runs (JVM started)
            if writer.poll() is not None and writer.returncode != 0:
                raise RuntimeError("the writer failed")
            time.sleep(0.2)
        ready = time.monotonic()
        left = expected_s  # the writer starts its pace again once the pipeline runs
        moments = sorted(rng.uniform(0.1 * left, 0.9 * left) for _ in range(kills))
        result.kill_moments_s = [round(ready - t0 + m, 2) for m in moments]
        for moment in moments:
            time.sleep(max(0.0, ready + moment - time.monotonic()))
            _kill(proc)
            proc = _start(work)
        if writer.wait(timeout=30 * expected_s + 600) != 0:
            raise RuntimeError("the writer failed")
        proc.send_signal(signal.SIGTERM)  # a clean stop, then one start that drains the rest
        proc.wait(timeout=300)
    finally:
        _kill(proc)
        if writer.poll() is None:
            writer.kill()
    done = subprocess.run(
        command(work, "available-now"), env=_env(), capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    result.seconds = round(time.monotonic() - t0, 1)
    with sqlite3.connect(db) as conn:
        got = dict(conn.execute("SELECT name, value FROM counters").fetchall())
        watermark_ms = (
            int(
                conn.execute(
                    "SELECT value FROM pipeline_state WHERE key = 'max_event_time_ms'"
                ).fetchone()[0]
            )
            - 600_000
        )
    result.events = int(got.get("events", 0))
    result.late_events = int(got.get("late_events", 0))
    result.quarantined = int(got.get("quarantined", 0))
    source = spark.createDataFrame([(line,) for line in lines], "value string").select(
        "value", F.lit(None).cast("string").alias("source_file")
    )
    batch = analytics.traffic_per_window(
        events(parse(source, compile_format("common"))), "1 minute"
    )
    final = batch.where(F.col("window_end") <= F.timestamp_millis(F.lit(watermark_ms)))
    stream_path = str(work / "out" / "traffic_per_minute")
    spark.catalog.refreshByPath(stream_path)
    stream = spark.read.parquet(stream_path).drop("batch_id")
    final = final.select(*stream.columns)
    result.final_windows = stream.count()
    result.window_differences = (
        stream.exceptAll(final).count()
        + final.exceptAll(stream).count()
        + abs(result.final_windows - final.count())
    )
    return result


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--write":  # the writer process
        lines_file, logdir, rate, db = sys.argv[2:6]
        write(Path(lines_file), Path(logdir), float(rate), Path(db))
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kills", type=int, default=2)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--lines", type=int, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS / "drill-rotation.json")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from logstream.config import SparkSettings
    from logstream.session import get_spark

    spark = get_spark(SparkSettings(master="local[2]", ui_enabled=False, app_name="drill-rot"))
    result = drill(spark, args.kills, args.seed, max_lines=args.lines, rate=args.rate)
    report = {**asdict(result), "exact": result.exact, "machine": {"cores": os.cpu_count()}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    sys.exit(0 if result.exact else 1)


if __name__ == "__main__":
    main()
