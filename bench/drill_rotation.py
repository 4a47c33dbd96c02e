"""The rotation drill: Debian's ``logrotate`` rotates a log that a writer appends real NASA
lines to, the pipeline follows it and is killed once, and every line is accounted for.

A writer process appends the real NASA day (1995-07-09; for more lines than its 35,272, the
day again with its dates shifted by whole days) to ``access.log`` as a server does: opened
with ``O_APPEND``, ``--rate`` lines a second, some lines written in two ``write`` calls. The
drill forces ``--rotations`` rotations with the real binary (``logrotate -f``), spread over
the lines, each once the pipeline has read the lines written before the previous one (a real
server's rotations are hours apart; with ``delaycompress`` the previous rotation is
compressed at the next one and must have been read by then). Both modes use ``rotate 5``,
``compress``, ``delaycompress`` and the glob ``access.log*``:

``create``
    logrotate renames ``access.log`` and creates a new one; its ``postrotate`` sends the
    writer SIGHUP and the writer opens the new file between two lines.
``copytruncate``
    logrotate copies ``access.log`` to ``access.log.1`` and truncates it in place; the writer
    never reopens. Lines the writer appends between logrotate's copy and its truncation are
    in neither file: logrotate loses them (and a line whose two writes straddle the
    truncation is cut in two). The writer records where each line ended, and the drill
    measures the copy's size right after logrotate returns, so it knows those lines exactly.

Meanwhile ``logstream run --follow "LOGDIR/access.log*" --trigger "1 second"`` is SIGKILLed
(its process group) once at a seeded moment and started again on the same state. When the
writer is done and the pipeline has read both files to their last line (its checkpoint says
so), it is stopped with SIGTERM and must exit 0. Then the events, late events and
quarantined lines are compared with the lines written, as multisets of parsed rows:

* ``create``: every line counted exactly once;
* ``copytruncate``: no line counted twice, and the lines missing are exactly the lines
  logrotate lost; the pipeline's ``lost_bytes`` is compared with the bytes logrotate lost.

Usage::

    python bench/drill_rotation.py                 # both modes, 150,000 lines at 500 lines/s
    python bench/drill_rotation.py --mode copytruncate --lines 20000 --rate 1000
    python bench/drill_rotation.py --queries none  # the source's accounting alone, ingest only

Results in ``bench/results/drill-rotation.json``. ``tests/pipeline/test_rotation_drill.py``
runs a short form of both modes in the suite (4,000 lines, three rotations, ``--queries none``).
"""

from __future__ import annotations

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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness

MODES = ("create", "copytruncate")
#: Lines written before the writer waits for the pipeline's first micro-batch.
WARM_LINES = 100


@dataclass
class RotationResult:
    """What one rotation drill did and found (byte and line counts)."""

    mode: str
    lines: int
    rotations: int
    kills: int
    seed: int
    rate: float
    kill_moments_s: list[float] = field(default_factory=list)
    copy_sizes: list[int] = field(default_factory=list)
    #: Rotations whose new ``access.log.1`` got the inode of the one it replaced (deleted
    #: when compressed): the source sees that file rewritten in place, a truncation.
    reused_inodes: int = 0
    events: int = 0
    late_events: int = 0
    quarantined: int = 0
    counted_twice: int = 0
    missing: int = 0
    lost_by_logrotate: int = 0
    lost_bytes_by_logrotate: int = 0
    cut_lines: int = 0
    missing_not_lost_by_logrotate: int = 0
    reported_lost_bytes: int = 0
    reported_lost_lines: int = 0
    reported_truncations: int = 0
    seconds: float = 0.0

    @property
    def exact(self) -> bool:
        """``create``: every line once; ``copytruncate``: nothing twice, nothing missing but
        what logrotate lost, and no more lost bytes reported than logrotate lost."""
        if self.mode == "create":
            return self.counted_twice == 0 and self.missing == 0 and self.events > 0
        return (
            self.counted_twice == 0
            and self.missing_not_lost_by_logrotate == 0
            and self.reported_lost_bytes <= self.lost_bytes_by_logrotate
            and self.events > 0
        )


def drill_warm(text: list[str]) -> int:
    return min(WARM_LINES, len(text))


def drill_lines(count: int) -> list[str]:
    """``count`` real NASA lines: the day, then the day again shifted by whole days."""
    from logstream.replay.timeshift import find_clf_time, shift_line

    day = harness.nasa_day_lines()
    lines: list[str] = []
    for k in range(-(-count // len(day))):
        for line in day[: count - len(lines)]:
            found = find_clf_time(line) if k else None
            lines.append(shift_line(line, found, k * 86_400) if found else line)
    return lines


def counted(db: Path) -> int:
    """Lines the pipeline has committed (on-time + late + quarantined); 0 before the store."""
    names = "('events', 'late_events', 'quarantined')"
    return int(
        harness.store_value(db, f"SELECT SUM(value) FROM counters WHERE name IN {names}", 1.0) or 0
    )


# --------------------------------------------------------------------------- the writer


def write(lines_file: Path, log: Path, rate: float, seed: int, ledger: Path, db: Path) -> None:
    """The writer process: append with ``O_APPEND``, some lines in two writes, reopen on
    SIGHUP (between lines), and record where each line ended.

    The ledger (JSON) holds per line its generation (a new one after each truncation or
    reopen), the file position after its last byte, and whether a truncation fell between
    its two writes; per generation the bytes written to it; and for each cut line where its
    first write ended and its size. ``written`` (a file beside it) is the count of lines
    written so far.
    """
    lines = lines_file.read_text(encoding="utf-8").splitlines()
    rng = random.Random(seed)
    reopen = [False]
    signal.signal(signal.SIGHUP, lambda *_: reopen.__setitem__(0, True))
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    fd = os.open(log, flags, 0o644)
    gens, ends, cut = [], [], []
    heads: list[tuple[int, int, int]] = []  # cut lines: generation, end and size of 1st write
    gen, pos = 0, os.fstat(fd).st_size
    sizes = [pos]  # per generation, the bytes written to it before it ended
    progress = ledger.with_name("written")
    start = time.monotonic()
    for i, line in enumerate(lines):
        if i == WARM_LINES:  # the pipeline runs (its JVM started) before the pace starts
            while counted(db) < WARM_LINES:
                time.sleep(0.1)
            start = time.monotonic() - i / rate
        if reopen[0]:
            reopen[0] = False
            os.close(fd)
            fd = os.open(log, flags, 0o644)
            gen, pos = gen + 1, os.fstat(fd).st_size
            sizes.append(pos)
        data = (line + "\n").encode()
        at = rng.randrange(1, len(data)) if rng.random() < 0.3 else len(data)
        split = False
        for n, part in enumerate(p for p in (data[:at], data[at:]) if p):
            os.write(fd, part)
            now = os.lseek(fd, 0, os.SEEK_CUR)
            if now != pos + len(part):  # truncated since the last write: a new generation
                if n > 0:  # the line's first write ended at pos in the old generation
                    split = True
                    heads.append((gen, pos, at))
                gen += 1
                sizes.append(0)
            pos = sizes[gen] = now
        gens.append(gen)
        ends.append(pos)
        cut.append(split)
        if i % 200 == 199 or i == len(lines) - 1:
            progress.with_suffix(".tmp").write_text(str(i + 1))
            progress.with_suffix(".tmp").replace(progress)
        delay = start + (i + 1) / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    os.close(fd)
    ledger.write_text(
        json.dumps({"gen": gens, "end": ends, "cut": cut, "sizes": sizes, "heads": heads})
    )


def written(work: Path) -> int:
    try:
        return int((work / "written").read_text() or 0)
    except (OSError, ValueError):
        return 0


# --------------------------------------------------------------------------- the pipeline


def command(root: Path, trigger: str, queries: str = "all") -> list[str]:
    """``logstream run`` following ``root/logs/access.log*``, its state under ``root``,
    computing ``queries`` (``--queries``)."""
    follow = ("--follow", str(root / "logs" / "access.log*"))
    options = ("--trigger", trigger, "--queries", queries, "--no-dashboard")
    return harness.run_argv(root, *follow, *options)


def _start(root: Path, queries: str) -> subprocess.Popen:
    return subprocess.Popen(
        command(root, "1 second", queries),
        env=harness.bench_env(),
        stdout=subprocess.DEVNULL,
        stderr=(root / "pipeline.log").open("ab"),
        start_new_session=True,
    )


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM, no clean-up
    proc.wait()


def logrotate_config(work: Path, mode: str, writer_pid: int) -> Path:
    """A logrotate configuration for ``work/logs/access.log`` in ``mode``."""
    how = "copytruncate" if mode == "copytruncate" else "create 0644"
    post = (
        f"    postrotate\n        kill -HUP {writer_pid} 2>/dev/null || true\n    endscript\n"
        if mode == "create"
        else ""
    )
    conf = work / "logrotate.conf"
    conf.write_text(
        f"{work / 'logs' / 'access.log'} {{\n    rotate 5\n    compress\n    delaycompress\n"
        f"    missingok\n    {how}\n{post}}}\n"
    )
    conf.chmod(0o644)
    return conf


def rotate(work: Path, conf: Path) -> None:
    """Force one rotation with the real binary."""
    subprocess.run(
        ["logrotate", "-f", "-s", str(work / "logrotate.state"), str(conf)],
        check=True,
        capture_output=True,
        timeout=60,
    )


def read_to_end(work: Path, path: Path) -> bool:
    """Whether the pipeline's last committed micro-batch read ``path`` to its last line
    (:func:`logstream.sources.follow.read_to_end` on its checkpoint)."""
    from logstream.sources.follow import read_to_end as committed_to_end

    return committed_to_end(work / "state" / "ingest", path)


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


def wait_for(condition: Any, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.1)


# --------------------------------------------------------------------------- the drill


def drill(
    spark: Any,
    mode: str = "copytruncate",
    lines: int = 150_000,
    rate: float = 500.0,
    rotations: int = 6,
    kills: int = 1,
    seed: int = 5,
    work: Path | None = None,
    queries: str = "all",
) -> RotationResult:
    """Run the drill in one mode (see the module docstring) and return what it found.

    Parameters
    ----------
    spark : SparkSession
        Reads the outputs back and parses the lines written, as a batch.
    mode : {"create", "copytruncate"}
    lines : int
        Lines the writer appends (real NASA lines, see :func:`drill_lines`).
    rate : float
        Lines per second.
    rotations : int
        Forced rotations, spread evenly over the lines.
    kills : int
        SIGKILLs of the pipeline while the writer writes (seeded moments).
    seed : int
        Seed of the kill moments and of the lines written in two parts.
    work : Path, optional
        Working directory (a temporary one by default).
    queries : str
        The pipeline's ``--queries``: ``"all"`` (every default output), or ``"none"`` for
        the source's accounting alone (events, late events, quarantine and the store's
        ledger and counters), as the suite's short form runs it.

    Raises
    ------
    RuntimeError
        When the writer, logrotate or the pipeline fails, or a wait times out.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if shutil.which("logrotate") is None:
        raise RuntimeError("the drill needs Debian's logrotate: apt-get install logrotate")
    work = work or Path(tempfile.mkdtemp(prefix=f"drill-rotation-{mode}-"))
    text = drill_lines(lines)
    result = RotationResult(mode, len(text), rotations, kills, seed, rate)
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    lines_file = work / "lines.txt"
    lines_file.write_text("".join(line + "\n" for line in text), encoding="utf-8")
    db = work / "out" / "logstream.db"
    ledger = work / "ledger.json"
    t0 = time.monotonic()
    proc = _start(work, queries)
    wait_for(lambda: proc.poll() is None and db.exists(), "the pipeline's store", 180)
    writer = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--write",
            str(lines_file),
            str(logs / "access.log"),
            str(rate),
            str(seed),
            str(ledger),
            str(db),
        ]
    )
    conf = logrotate_config(work, mode, writer.pid)
    rng = random.Random(seed)
    expected_s = len(text) / rate
    moments = sorted(rng.uniform(0.2, 0.8) * expected_s for _ in range(kills))
    kill_at: list[float] = []
    marks = [len(text) * (k + 1) // (rotations + 1) for k in range(rotations)]
    try:
        wait_for(lambda: counted(db) >= drill_warm(text), "the first micro-batch", 300)
        ready = time.monotonic()
        kill_at = [ready + m for m in moments]
        while marks or kill_at:
            if writer.poll() not in (None, 0):
                raise RuntimeError("the writer failed")
            if kill_at and time.monotonic() >= kill_at[0]:
                kill_at.pop(0)
                _kill(proc)
                result.kill_moments_s.append(round(time.monotonic() - t0, 2))
                proc = _start(work, queries)
            elif marks and (written(work) >= marks[0] or writer.poll() == 0):
                # the previous rotation, compressed by this one, was read to its end
                wait_for(lambda: read_to_end(work, logs / "access.log.1"),
                         "access.log.1 read to its end", 600)  # fmt: skip
                before = _inode(logs / "access.log.1")
                rotate(work, conf)
                if mode == "copytruncate":
                    result.copy_sizes.append((logs / "access.log.1").stat().st_size)
                if before is not None and before == _inode(logs / "access.log.1"):
                    result.reused_inodes += 1
                marks.pop(0)
            else:
                time.sleep(0.05)
        if writer.wait(timeout=30 * expected_s + 600) != 0:
            raise RuntimeError("the writer failed")
        for name in ("access.log", "access.log.1"):  # the running pipeline reads the rest
            wait_for(lambda n=name: read_to_end(work, logs / n), f"{name} read", 600)
        proc.send_signal(signal.SIGTERM)  # a clean stop between micro-batches
        if proc.wait(timeout=300) != 0:
            raise RuntimeError(f"the pipeline exited {proc.returncode} on SIGTERM")
    finally:
        _kill(proc)
        if writer.poll() is None:
            writer.kill()
    result.seconds = round(time.monotonic() - t0, 1)
    _account(spark, work, text, json.loads(ledger.read_text()), result)
    return result


def logrotate_losses(
    text: list[str], ledger: dict[str, list], copy_sizes: list[int]
) -> tuple[list[int], int, int]:
    """The lines logrotate's ``copytruncate`` lost, from the writer's ledger and the copies.

    Generation ``g`` ended with the ``g``-th truncation; its copy holds its first
    ``copy_sizes[g]`` bytes. A line of that generation ending past them was written between
    logrotate's copy and its truncation, and a line cut by the truncation is lost too (the
    head of a cut line that made it into the copy is an unterminated last line there, which
    no reader can take for a line: its bytes count as lost).

    Returns
    -------
    tuple
        Indexes of the lost lines, bytes lost (the generations' bytes past their copies, and
        the cut lines' heads inside them), and how many lines were cut in two.
    """
    copies = len(copy_sizes)
    lost = [
        i
        for i, (gen, end, cut) in enumerate(
            zip(ledger["gen"], ledger["end"], ledger["cut"], strict=True)
        )
        if cut or (gen < copies and end > copy_sizes[gen])
    ]
    lost_bytes = sum(
        max(0, size - copy) for size, copy in zip(ledger["sizes"], copy_sizes, strict=False)
    )
    for gen, end, size in ledger.get("heads", []):
        if gen < copies:
            lost_bytes += max(0, min(end, copy_sizes[gen]) - (end - size))
    return lost, lost_bytes, sum(ledger["cut"])


def _account(
    spark: Any, work: Path, text: list[str], ledger: dict[str, list], result: RotationResult
) -> None:
    """Compare what the pipeline counted with what was written (multisets of parsed rows)."""
    from pyspark.sql import functions as F

    from logstream.parsing import compile_format, events, parse

    with sqlite3.connect(work / "out" / "logstream.db") as conn:
        got = dict(conn.execute("SELECT name, value FROM counters").fetchall())
        state = dict(
            conn.execute("SELECT key, value FROM pipeline_state WHERE key LIKE 'follow_%'")
        )
    result.events = int(got.get("events", 0))
    result.late_events = int(got.get("late_events", 0))
    result.quarantined = int(got.get("quarantined", 0))
    result.reported_lost_bytes = int(state.get("follow_lost_bytes", 0))
    result.reported_lost_lines = int(state.get("follow_lost_lines", 0))
    result.reported_truncations = int(state.get("follow_truncations", 0))
    lost, result.lost_bytes_by_logrotate, result.cut_lines = (
        logrotate_losses(text, ledger, result.copy_sizes)
        if result.mode == "copytruncate"
        else ([], 0, 0)
    )
    result.lost_by_logrotate = len(lost)

    def rows(values: list[str]) -> Any:
        frame = spark.createDataFrame([(v,) for v in values], "value string")
        frame = frame.select("value", F.lit(None).cast("string").alias("source_file"))
        return events(parse(frame, compile_format("common")))

    out = work / "out"
    cols = [
        "client_host",
        "event_time",
        "method",
        "url_path",
        "query_string",
        "protocol",
        "status",
        "bytes_sent",
    ]
    frames = []
    for name in ("events", "late_events"):
        path = out / name
        if path.exists():
            spark.catalog.refreshByPath(str(path))
            frames.append(spark.read.parquet(str(path)).select(*cols))
    seen = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    want = rows(text).select(*cols)
    result.counted_twice = seen.exceptAll(want).count()
    missing = want.exceptAll(seen)
    result.missing = missing.count()
    lost_rows = rows([text[i] for i in lost]).select(*cols)
    result.missing_not_lost_by_logrotate = missing.exceptAll(lost_rows).count()


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--write":  # the writer process
        lines_file, log, rate, seed, ledger, db = sys.argv[2:8]
        write(Path(lines_file), Path(log), float(rate), int(seed), Path(ledger), Path(db))
        return 0
    parser = harness.parser(__doc__, "drill-rotation")
    parser.add_argument("--mode", choices=[*MODES, "both"], default="both")
    parser.add_argument("--lines", type=int, default=150_000)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--rotations", type=int, default=6)
    parser.add_argument("--kills", type=int, default=1)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--queries", default="all", help="the pipeline's --queries")
    args = parser.parse_args()
    spark = harness.spark_session(master="local[2]", app_name="drill-rot")
    report: dict[str, Any] = {"machine": harness.machine()}
    ok = True
    for mode in MODES if args.mode == "both" else (args.mode,):
        result = drill(
            spark, mode, args.lines, args.rate, args.rotations, args.kills, args.seed,
            queries=args.queries,
        )  # fmt: skip
        report[mode] = {**asdict(result), "exact": result.exact}
        ok = ok and result.exact
        print(json.dumps(report[mode], indent=2), flush=True)
    harness.write_result(report, args.out, show=False)
    return 0 if ok else 1


if __name__ == "__main__":
    harness.run(main)
