"""Does the dashboard slow the pipeline? Micro-batch durations with and without 20 clients.

``logstream run --dashboard`` streams the real NASA day (then the day again, shifted a day at
a time) cut into files of ``--lines-per-file`` lines (one micro-batch each,
``--max-files-per-trigger 1``, the default 1-second trigger), while this script alternates
``--phases`` phases of ``--per-phase`` micro-batches: no client, then ``--clients``
concurrent dashboard clients, and so on. A client is what a
browser tab does: it loads the page (``/``, ``/_dash-layout``, ``/_dash-dependencies``), then
runs the page's refresh callback (``POST /_dash-update-component``, the range "all") every
``--think-s`` seconds (the page's own refresh period, 2 s), or back to back with
``--think-s 0``.

The durations come from the store's ``progress`` table (``batch_duration_ms`` of each
``ingest`` micro-batch, from Spark's progress). A micro-batch counts for a phase when it ran
wholly inside it; the first ``--warmup`` micro-batches of the run (the JVM's warm-up) are left
out. The figure is the ratio of the medians, loaded over unloaded: issue 56 asks for at most
1.3 (before the dashboard had its own process, 20 clients took micro-batches from 3.4 s to
13.8–23.1 s).

Usage::

    python bench/bench_dashboard_load.py            # writes bench/results/dashboard-load.json
    python bench/bench_dashboard_load.py --clients 20 --think-s 0    # back to back

Exit status 0 when the ratio is at most ``--budget`` (1.3).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness


@dataclass
class LoadResult:
    """What the run measured."""

    clients: int
    think_s: float
    batches_per_phase: int
    lines: int
    batches_unloaded_ms: list[int] = field(default_factory=list)
    batches_loaded_ms: list[int] = field(default_factory=list)
    refreshes: int = 0
    refresh_errors: int = 0
    refresh_median_ms: float | None = None

    @property
    def ratio(self) -> float | None:
        """Median loaded over median unloaded micro-batch duration."""
        if not self.batches_loaded_ms or not self.batches_unloaded_ms:
            return None
        return statistics.median(self.batches_loaded_ms) / statistics.median(
            self.batches_unloaded_ms
        )


def write_input(directory: Path, files: int, per_file: int) -> int:
    """``files`` files of ``per_file`` lines: the NASA day, then the day again shifted by a
    day (``09/Jul/1995`` → the 10th …) as often as needed, in time order; returns the lines."""
    day = harness.nasa_day_lines()
    lines: list[str] = []
    shift = 0
    while len(lines) < files * per_file:
        stamp = f"[{9 + shift:02d}/Jul/1995:"
        lines += [line.replace("[09/Jul/1995:", stamp) for line in day]
        shift += 1
    harness.write_chunks(lines[: files * per_file], directory, per_file)
    return files * per_file


def _component_values(layout: Any) -> dict[tuple[str, str], Any]:
    """Every ``(id, prop)`` of a Dash layout (JSON) with its value."""
    found: dict[tuple[str, str], Any] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            props = node.get("props")
            if isinstance(props, dict) and isinstance(props.get("id"), str):
                for prop, value in props.items():
                    found[(props["id"], prop)] = value
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(layout)
    return found


def refresh_request(port: int) -> bytes:
    """The body of the page's main refresh callback (the one with the most outputs), as a
    browser sends it on a tick, with the range "all"."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/_dash-layout")
    values = _component_values(json.loads(conn.getresponse().read()))
    conn.request("GET", "/_dash-dependencies")
    callbacks = json.loads(conn.getresponse().read())
    conn.close()
    main = max(callbacks, key=lambda c: len(c["output"].split("...")))

    def with_values(items: list[dict[str, str]]) -> list[dict[str, Any]]:
        out = []
        for item in items:
            value = values.get((item["id"], item["property"]))
            if item["id"] == "range":
                value = "all"
            out.append({"id": item["id"], "property": item["property"], "value": value})
        return out

    outputs = [
        {"id": o.split(".")[0], "property": o.split(".")[1]}
        for o in main["output"].strip(".").split("...")
    ]
    body = {
        "output": main["output"],
        "outputs": outputs,
        "inputs": with_values(main["inputs"]),
        "changedPropIds": ["tick.n_intervals"],
        "state": with_values(main.get("state", [])),
    }
    return json.dumps(body).encode()


class Clients:
    """``n`` browser-like clients of the dashboard on ``port``, refreshing while ``on``."""

    def __init__(self, n: int, port: int, think_s: float) -> None:
        self.n, self.port, self.think_s = n, port, think_s
        self.on = threading.Event()
        self.done = threading.Event()
        self.times_ms: list[float] = []
        self.errors = 0
        self.body = refresh_request(port)
        self.threads = [threading.Thread(target=self._client, daemon=True) for _ in range(n)]
        for thread in self.threads:
            thread.start()

    def _client(self) -> None:
        conn: http.client.HTTPConnection | None = None
        while not self.done.is_set():
            if not self.on.wait(0.2):
                continue
            try:
                if conn is None:  # a new tab: the page, its layout and callbacks
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
                    for path in ("/", "/_dash-layout", "/_dash-dependencies"):
                        conn.request("GET", path)
                        conn.getresponse().read()
                t0 = time.perf_counter()
                conn.request(
                    "POST",
                    "/_dash-update-component",
                    self.body,
                    {"Content-Type": "application/json"},
                )
                resp = conn.getresponse()
                resp.read()
                if resp.status != 200:
                    self.errors += 1
                else:
                    self.times_ms.append((time.perf_counter() - t0) * 1000)
            except (OSError, http.client.HTTPException):
                self.errors += 1
                conn = None
            if self.think_s:
                self.done.wait(self.think_s)

    def stop(self) -> None:
        self.done.set()
        for thread in self.threads:
            thread.join(130)


def batches(store: Path) -> list[tuple[float, float, int]]:
    """``(start, end, duration_ms)`` of each ingest micro-batch with rows, from the store's
    progress rows (epoch seconds)."""
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=10) as conn:
        rows = conn.execute(
            "SELECT timestamp, batch_duration_ms FROM progress WHERE query = 'ingest' "
            "AND num_input_rows > 0 ORDER BY batch_id"
        ).fetchall()
    found = []
    for stamp, duration_ms in rows:
        start = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        found.append((start, start + duration_ms / 1000, int(duration_ms)))
    return found


def measure(args: Any, work: Path) -> LoadResult:
    """Run the pipeline with its dashboard and the alternating phases (module docstring)."""
    landing = work / "landing"
    lines = write_input(
        landing, args.warmup + args.phases * args.per_phase + 2, args.lines_per_file
    )
    port = free_port()
    store = work / "store.db"
    cmd = harness.run_argv(
        work,
        *("--input-dir", str(landing), "--max-files-per-trigger", "1"),
        *("--store", f"sqlite:///{store}", "--dashboard", "--port", str(port)),
    )
    result = LoadResult(args.clients, args.think_s, args.per_phase, lines)
    err = (work / "run.err").open("w")
    proc = subprocess.Popen(
        cmd, env=harness.bench_env(), stdout=subprocess.DEVNULL, stderr=err,
        start_new_session=True,
    )  # fmt: skip
    phases: list[tuple[float, float, bool]] = []
    clients = None

    def wait_for(batches_done: int) -> None:
        deadline = time.monotonic() + 1800
        query = "SELECT COUNT(*) FROM progress WHERE query = 'ingest' AND num_input_rows > 0"
        while (harness.store_value(store, query) or 0) < batches_done:
            if proc.poll() is not None or time.monotonic() > deadline:
                said = (work / "run.err").read_text()[-3000:]
                raise SystemExit(f"the run ended or stalled:\n{said}")
            time.sleep(0.5)

    try:
        wait_for(args.warmup)
        clients = Clients(args.clients, port, args.think_s)
        loaded = False
        for i in range(args.phases):
            (clients.on.set if loaded else clients.on.clear)()
            start = time.time()
            wait_for(args.warmup + (i + 1) * args.per_phase)
            phases.append((start, time.time(), loaded))
            loaded = not loaded
        clients.on.clear()
    finally:
        if clients is not None:
            clients.stop()
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(180)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        err.close()
    for start, end, duration_ms in batches(store):
        for p_start, p_end, p_loaded in phases:
            if p_start <= start and end <= p_end:
                (result.batches_loaded_ms if p_loaded else result.batches_unloaded_ms).append(
                    duration_ms
                )
    if clients is not None:
        result.refreshes = len(clients.times_ms)
        result.refresh_errors = clients.errors
        if clients.times_ms:
            result.refresh_median_ms = round(statistics.median(clients.times_ms), 1)
    return result


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    parser = harness.parser(__doc__, "dashboard-load")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--think-s", type=float, default=2.0, help="seconds between refreshes")
    parser.add_argument("--per-phase", type=int, default=6, help="micro-batches a phase")
    parser.add_argument("--phases", type=int, default=6, help="alternating, unloaded first")
    parser.add_argument("--lines-per-file", type=int, default=2940, help="one micro-batch")
    parser.add_argument("--warmup", type=int, default=3, help="micro-batches left out")
    parser.add_argument("--budget", type=float, default=1.3)
    args = parser.parse_args()
    with harness.scratch("bench-dashboard-load-") as work:
        result = measure(args, work)
    ratio = result.ratio
    report = {
        **asdict(result),
        "median_unloaded_ms": statistics.median(result.batches_unloaded_ms)
        if result.batches_unloaded_ms
        else None,
        "median_loaded_ms": statistics.median(result.batches_loaded_ms)
        if result.batches_loaded_ms
        else None,
        "ratio": round(ratio, 3) if ratio is not None else None,
        "budget": args.budget,
        "machine": harness.machine(),
    }
    harness.write_result(report, args.out)
    return 0 if ratio is not None and ratio <= args.budget else 1


if __name__ == "__main__":
    harness.run(main)
