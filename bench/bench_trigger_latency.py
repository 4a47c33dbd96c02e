"""Benchmark: line-to-alert latency of ``logstream rules`` under each trigger.

Same input, same rules, one run per trigger: Spark's rate source makes ``--rate`` real log lines
a second (the TWiki log, whose 401s are ``auth_failure`` alerts: about 8 % of the lines), each
stamped with the time it was made (``generated_at`` → the alert's ``received_at``).
``logstream rules`` runs in a subprocess (its own JVM, ``local[2]``) and its sink is timed:

* ``console``: the bench reads the subprocess's stdout and stamps each alert line on arrival;
* ``webhook``: a local ``http.server`` stamps each POST on arrival (micro-batch triggers only:
  PySpark's ``foreach`` fails under the continuous trigger).

Latency of an alert = arrival time − the time its line was made. Alerts of the first
``--warmup`` seconds are left out (JVM and code generation warming up). The real-time trigger
is tried too; ``logstream rules`` refuses it at start (Spark 4.2 runs real-time mode on Kafka
sources only) and the refusal is recorded.

Run from the repository root (real data in ``../shared/data`` or ``$LOGSTREAM_DATA_DIR``)::

    .venv/bin/python bench/bench_trigger_latency.py            # 1,000 lines/s, 60 s per run
    .venv/bin/python bench/bench_trigger_latency.py --seconds 20 --only continuous:1s

Writes ``bench/results/trigger-latency.json`` and prints a table.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness

SAMPLE = "monitorware_twiki_access_log_2004.log.gz"
#: (label, trigger, sink): the runs, in order.
RUNS: tuple[tuple[str, str, str], ...] = (
    ("continuous 1 s → console", "continuous:1s", "console"),
    ("continuous 100 ms → console", "continuous:100ms", "console"),
    ("processing-time 0 → console", "0s", "console"),
    ("processing-time 1 s → console", "1s", "console"),
    ("processing-time 0 → webhook", "0s", "webhook"),
    ("processing-time 1 s → webhook", "1s", "webhook"),
    ("real-time 5 s → console", "real-time:5s", "console"),
)


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def run_once(trigger: str, sink: str, rate: int, seconds: float, sample: Path) -> dict:
    """Run ``logstream rules`` for ``seconds`` after its first alert; return raw arrivals."""
    arrivals: list[tuple[float, dict]] = []  # console: (arrival, alert)
    posts: list[tuple[float, list]] = []  # webhook: (arrival, alerts)
    with contextlib.ExitStack() as stack:
        sink_arg = "console"
        if sink == "webhook":
            sink_arg, posts = stack.enter_context(harness.webhook_receiver())
        seen = lambda: bool(arrivals or posts)  # noqa: E731
        result = _run_rules(trigger, sink_arg, rate, seconds, sample, arrivals, seen)
    arrivals.extend((now, row) for now, rows in posts for row in rows)
    return result | {"arrivals": list(arrivals)}


def _run_rules(
    trigger: str,
    sink_arg: str,
    rate: int,
    seconds: float,
    sample: Path,
    arrivals: list,
    seen: Callable[[], bool],
) -> dict:
    """``logstream rules`` into ``sink_arg`` for ``seconds`` after ``seen()`` (the first
    alert); console alerts are appended to ``arrivals``."""
    cmd = [sys.executable, "-m", "logstream", "rules", "--source", "rate", "--rate", str(rate)]
    cmd += ["--rate-sample", str(sample), "--format", "common", "--trigger", trigger]
    cmd += ["--sink", sink_arg, "--master", "local[2]", "--duration", f"{seconds + 120:.0f}s"]
    env = {**os.environ, "PYTHONPATH": str(harness.REPO / "src")}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            now = time.time()
            text = raw.decode("utf-8", "replace").strip().strip("|").strip()
            if text.startswith('{"rule"'):
                arrivals.append((now, json.loads(text)))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    errors: list[str] = []
    threading.Thread(
        target=lambda: errors.append(proc.stderr.read().decode("utf-8", "replace")),  # type: ignore[union-attr]
        daemon=True,
    ).start()
    started = time.monotonic()
    while not seen() and proc.poll() is None and time.monotonic() - started < 180:
        time.sleep(0.1)
    if seen():
        time.sleep(seconds)
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    reader.join(timeout=5)
    time.sleep(0.5)
    return {"returncode": proc.returncode, "stderr": "".join(errors)}


def summarise(arrivals: list[tuple[float, dict]], warmup: float) -> dict:
    """Percentiles of arrival − generation for the lines made ``warmup`` seconds or more after
    the first alert arrived (a rate source that starts late first catches up with a burst of
    lines stamped in the past; those are start-up, not steady-state latency)."""
    made = [(_stamp(row["received_at"]), now) for now, row in arrivals]
    if not made:
        return {"alerts": 0}
    first_arrival = min(now for _, now in made)
    kept = sorted((t, (now - t) * 1000) for t, now in made if t >= first_arrival + warmup)
    latencies = sorted(ms for _, ms in kept)
    if len(latencies) < 3:
        return {"alerts": len(latencies)}
    q = statistics.quantiles(latencies, n=100, method="inclusive")
    third = len(kept) // 3
    return {
        "alerts": len(latencies),
        "p50_ms": round(q[49], 1),
        "p90_ms": round(q[89], 1),
        "p99_ms": round(q[98], 1),
        "max_ms": round(latencies[-1], 1),
        "min_ms": round(latencies[0], 1),
        # a median that grows from the first to the last third means the query falls behind
        "p50_first_third_ms": round(statistics.median(ms for _, ms in kept[:third]), 1),
        "p50_last_third_ms": round(statistics.median(ms for _, ms in kept[-third:]), 1),
        "generated_span_s": round(kept[-1][0] - kept[0][0], 1),
    }


def main() -> int:
    parser = harness.parser(__doc__.splitlines()[0], "trigger-latency")
    parser.add_argument("--rate", type=int, default=1000, help="lines per second")
    parser.add_argument("--seconds", type=float, default=60.0, help="measured run length")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds left out first")
    parser.add_argument("--only", action="append", help="run only these --trigger values")
    args = parser.parse_args()
    sample = harness.data_file(SAMPLE)
    results = []
    for label, trigger, sink in RUNS:
        if args.only and trigger not in args.only:
            continue
        print(f"{label}: running {args.seconds:.0f} s …", file=sys.stderr, flush=True)
        raw = run_once(trigger, sink, args.rate, args.seconds + args.warmup, sample)
        row = {"run": label, "trigger": trigger, "sink": sink}
        row.update(summarise(raw["arrivals"], args.warmup))
        if not raw["arrivals"]:
            lines = [ln for ln in raw["stderr"].splitlines() if "error" in ln.lower()]
            row["refused"] = " ".join(lines)[-600:] or f"exit {raw['returncode']}, no alert"
        results.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)

    header = f"{'run':32} {'alerts':>7} {'p50 ms':>9} {'p90 ms':>9} {'p99 ms':>9} {'max ms':>9}"
    print(header)
    for r in results:
        if "p50_ms" in r:
            print(
                f"{r['run']:32} {r['alerts']:>7} {r['p50_ms']:>9} {r['p90_ms']:>9} "
                f"{r['p99_ms']:>9} {r['max_ms']:>9}"
            )
        else:
            print(f"{r['run']:32} refused or no alert: {r.get('refused', '')[:120]}")
    out = {
        "benchmark": "bench/bench_trigger_latency.py",
        "when": datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": harness.machine(),
        "load_average_at_end": os.getloadavg(),
        "rate_lines_per_s": args.rate,
        "seconds_per_run": args.seconds,
        "warmup_s": args.warmup,
        "sample": SAMPLE,
        "latency": "sink arrival time - time the rate source made the line (generated_at)",
        "results": results,
    }
    harness.write_result(out, args.out, show=False)
    return 0


if __name__ == "__main__":
    harness.run(main)
