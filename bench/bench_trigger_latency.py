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
is tried too; ``logstream rules`` refuses it at start (Spark 4.3 runs real-time mode on Kafka
sources only) and the refusal is recorded.

Run from the repository root (real data in ``../shared/data`` or ``$LOGSTREAM_DATA_DIR``)::

    .venv/bin/python bench/bench_trigger_latency.py            # 1,000 lines/s, 60 s per run
    .venv/bin/python bench/bench_trigger_latency.py --seconds 20 --only continuous:1s

Writes ``bench/results/trigger-latency.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from logstream.config import data_dir

REPO = Path(__file__).resolve().parents[1]
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


class _Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        now = time.time()
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.arrivals.extend((now, row) for row in json.loads(body))  # type: ignore[attr-defined]
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def run_once(trigger: str, sink: str, rate: int, seconds: float, sample: Path) -> dict:
    """Run ``logstream rules`` for ``seconds`` after its first alert; return raw arrivals."""
    arrivals: list[tuple[float, dict]] = []
    httpd = None
    sink_arg = "console"
    if sink == "webhook":
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
        httpd.arrivals = arrivals  # type: ignore[attr-defined]
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        sink_arg = f"http://127.0.0.1:{httpd.server_address[1]}/alerts"
    cmd = [sys.executable, "-m", "logstream", "rules", "--source", "rate", "--rate", str(rate)]
    cmd += ["--rate-sample", str(sample), "--format", "common", "--trigger", trigger]
    cmd += ["--sink", sink_arg, "--master", "local[2]", "--duration", f"{seconds + 120:.0f}s"]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
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
    while not arrivals and proc.poll() is None and time.monotonic() - started < 180:
        time.sleep(0.1)
    if arrivals:
        time.sleep(seconds)
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    reader.join(timeout=5)
    if httpd is not None:
        httpd.shutdown()
        httpd.server_close()
    time.sleep(0.5)
    return {"arrivals": list(arrivals), "returncode": proc.returncode, "stderr": "".join(errors)}


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=1000, help="lines per second")
    parser.add_argument("--seconds", type=float, default=60.0, help="measured run length")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds left out first")
    parser.add_argument("--only", action="append", help="run only these --trigger values")
    parser.add_argument("--json", default=str(REPO / "bench" / "results" / "trigger-latency.json"))
    args = parser.parse_args()
    sample = data_dir() / SAMPLE
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
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_average_at_end": os.getloadavg(),
        "rate_lines_per_s": args.rate,
        "seconds_per_run": args.seconds,
        "warmup_s": args.warmup,
        "sample": SAMPLE,
        "latency": "sink arrival time - time the rate source made the line (generated_at)",
        "results": results,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
