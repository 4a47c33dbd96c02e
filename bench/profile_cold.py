"""Where a cold ``logstream`` process spends its JVM's time: Java Flight Recorder, by activity.

Issue #40's target 4 (first data of ``make run`` ≤ 10 s; ``logstream batch`` on the NASA day
≤ 1.5× a session's start) is about one cold JVM: the same micro-batch takes ten times longer
in a fresh process than in a warm one. This runs one whole process, either ``logstream run
--trigger available-now`` on the NASA day's first ``--lines`` lines (one micro-batch) or
``logstream batch`` on the NASA day (``--command batch``), with the JDK's own profiler
(``-XX:StartFlightRecording``, ``settings=profile``: a Java stack sample of every running
thread about every 10–20 ms), then reads the recording with the JDK's ``jfr`` tool and
reports:

* the process's wall seconds and (``run``) its first micro-batch's milliseconds;
* the JIT compilers' total compile time and count (``jdk.CompilerStatistics``), on a 2-core
  machine the largest consumer of CPU in a cold process, and the classes loaded;
* the Java CPU samples by activity (:data:`ACTIVITIES`: the innermost frame that names one
  decides) and by thread (executor tasks, the stream execution thread, the others).

Usage::

    python bench/profile_cold.py                      # bench/results/profile-cold.json
    python bench/profile_cold.py --command batch --out /tmp/cold-batch.json
    python bench/profile_cold.py --conf spark.sql.icu.caseMappings.enabled=true \\
        --out /tmp/icu.json                           # try a Spark setting

One run, this machine (2 cores). The recording adds its own overhead (a few percent).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness

#: (activity, a substring of a frame's ``class.method``), in the order they are tried on
#: each frame from the innermost out: the first frame that matches names the sample's activity.
ACTIVITIES: tuple[tuple[str, str], ...] = (
    ("janino compile", "org/codehaus/"),
    ("icu", "com/ibm/icu/"),
    ("lambda bootstrap", "InnerClassLambdaMetafactory"),
    ("lambda bootstrap", "MethodHandleNatives.linkCallSite"),
    ("class loading", "ClassLoader.loadClass"),
    ("class loading", "URLClassPath"),
    ("class loading", "defineClass"),
    ("hadoop conf", "hadoop/conf/Configuration"),
    ("scala reflection", "scala/reflect/runtime"),
    ("closure serialisation", "ClosureCleaner"),
    ("closure serialisation", "ObjectOutputStream"),
    ("task deserialisation", "ObjectInputStream"),
    ("bytecode reading", "xbean/asm"),
    ("code generation", "doGenCode"),
    ("code generation", "doConsume"),
    ("code generation", "doProduce"),
    ("code generation", "genCode"),
    ("code generation", "CodeGenerator"),
    ("analysis", "catalyst/analysis"),
    ("optimisation", "catalyst/optimizer"),
    ("physical planning", "QueryPlanner"),
    ("physical planning", "SparkStrategies"),
    ("physical planning", "execution/adaptive"),
    ("physical planning", "QueryExecution"),
    ("running tasks", "BufferedRowIterator"),
    ("running tasks", "GeneratedClass"),
    ("parquet", "org/apache/parquet"),
    ("arrow", "org/apache/arrow"),
    ("rocksdb", "rocksdb"),
    ("py4j", "py4j"),
    ("scheduler", "org/apache/spark/scheduler"),
)


def jfr_tool() -> Path:
    """The JDK's ``jfr`` beside the ``java`` Spark runs."""
    from logstream.jvm import java_binary

    java = java_binary()
    if java is None or not (java.parent / "jfr").exists():
        raise SystemExit("no JDK `jfr` tool beside `java`: install a JDK (openjdk-17-jdk)")
    return java.parent / "jfr"


def activity(frames: list[str]) -> str:
    """The activity of one stack (innermost frame first): :data:`ACTIVITIES`, else other."""
    for frame in frames:
        for name, marker in ACTIVITIES:
            if marker in frame:
                return name
    return "other"


def thread_kind(name: str) -> str:
    if name.startswith("Executor task launch"):
        return "executor tasks"
    if name.startswith("stream execution thread"):
        return "stream execution"
    return "driver (other threads)"


def read_recording(recording: Path) -> dict[str, Any]:
    """The samples by activity and thread, the JIT's and the class loader's totals."""

    jfr = str(jfr_tool())

    def jfr_print(*options: str) -> str:
        argv = [jfr, "print", *options, str(recording)]
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout

    printed = jfr_print("--json", "--stack-depth", "200", "--events", "jdk.ExecutionSample")
    samples = json.loads(printed)["recording"]["events"]
    by_activity: Counter[str] = Counter()
    by_thread: dict[str, Counter[str]] = defaultdict(Counter)
    for sample in samples:
        values = sample["values"]
        frames = [
            f"{f['method']['type']['name']}.{f['method']['name']}"
            for f in values["stackTrace"]["frames"]
        ]
        kind = activity(frames)
        by_activity[kind] += 1
        by_thread[thread_kind(values["sampledThread"]["javaName"] or "")][kind] += 1
    stats = jfr_print("--events", "jdk.CompilerStatistics,jdk.ClassLoadingStatistics")

    def last(field: str) -> str:
        found = re.findall(rf"(?<![A-Za-z]){field} = (.+)", stats)
        return found[-1].strip() if found else ""

    return {
        "java_cpu_samples": len(samples),
        "samples_by_activity": dict(by_activity.most_common()),
        "samples_by_thread": {
            k: dict(v.most_common(8))
            for k, v in sorted(by_thread.items(), key=lambda kv: -sum(kv[1].values()))
        },
        "jit_compile_time": last("totalTimeSpent"),
        "jit_compiles": int(last("compileCount").replace(",", "") or 0),
        "classes_loaded": int(last("loadedClassCount").replace(",", "") or 0),
    }


def profile(command: str, lines: int, conf: list[str]) -> dict[str, Any]:
    """One cold process of ``command`` under the recorder (see the module docstring)."""
    with harness.scratch("profile-cold-") as tmp:
        recording = tmp / "cold.jfr"
        options = [f"spark.driver.defaultJavaOptions=-XX:StartFlightRecording="
                   f"filename={recording},settings=profile", *conf]  # fmt: skip
        extra = [arg for c in options for arg in ("--conf", c)]
        if command == "run":
            harness.write_chunks(harness.nasa_day_lines()[:lines], tmp / "in", per_file=lines)
            argv = harness.run_argv(tmp, "--input-dir", str(tmp / "in"), "--no-dashboard")
            argv += ["--trigger", "available-now", *extra]
            argv.remove("--quiet")  # its progress line holds the micro-batch's duration
            what = f"logstream run: the NASA day's first {lines:,} lines, one micro-batch"
        else:
            day = harness.data_file(harness.NASA_DAY_FILE)
            argv = [*harness.LOGSTREAM, "batch", str(day), "--format", "common", "--quiet"]
            argv += ["--json", str(tmp / "report.json"), *extra]
            what = f"logstream batch: the NASA day, {harness.NASA_DAY_LINES:,} lines"
        t0 = time.perf_counter()
        done = subprocess.run(argv, env=harness.bench_env(), capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            raise SystemExit(done.stderr[-3000:])
        batch = harness.BATCH_LINE.search(done.stdout + done.stderr)  # its only micro-batch
        return {
            "input": what,
            "conf": conf,
            "wall_s": round(wall, 2),
            **({"first_batch_ms": int(batch[3].replace(",", ""))} if batch else {}),
            **read_recording(recording),
            "machine": harness.machine(),
        }


def main() -> None:
    parser = harness.parser(__doc__, "profile-cold")
    parser.add_argument("--command", choices=["run", "batch"], default="run")
    parser.add_argument("--lines", type=int, default=3000, help="lines of the run's micro-batch")
    parser.add_argument("--conf", action="append", default=[], help="a Spark setting KEY=VALUE")
    args = parser.parse_args()
    harness.write_result(profile(args.command, args.lines, args.conf), args.out)


if __name__ == "__main__":
    harness.run(main)
