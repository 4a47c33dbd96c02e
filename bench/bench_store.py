"""Serving store on SQLite and on PostgreSQL: micro-batch commit latency and dashboard reads.

* ``commit``: :meth:`ServingStore.commit_ingest_batch` of ``--batches`` micro-batches, each
  the size of a busy minute of a real site (5 traffic windows, 300 trending-page rows, 200
  client rows, 60 reference-data rows, 20 closed sessions, 2 session-statistics windows;
  synthetic values: the cost depends on the rows, not on what they say), one writer:
  milliseconds per commit (median, p95).
* ``reads``: ``--readers`` threads each calling :func:`read_snapshot` (every query of a
  dashboard refresh, range "all") for ``--seconds`` while one writer keeps committing a
  micro-batch every 100 ms: refreshes per second over all readers, and their median latency.

PostgreSQL is a throwaway local cluster of Debian's binaries with the server's durable
defaults (fsync, synchronous commit; ``tests/serving/conftest.py``); SQLite is the store as
the pipeline opens it (WAL, ``synchronous=NORMAL``). Both on the same disk and cores.

Results go to stdout and bench/results/store.json.

Usage: python bench/bench_store.py [--batches 200] [--readers 8] [--seconds 10] [--out FILE]
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness


def payload(batch_id: int) -> Any:
    """A micro-batch write the size of a busy minute (see the module docstring)."""
    from logstream.serving import IngestBatchWrite

    def iso(minute: int) -> str:
        return f"1995-07-{9 + minute // 1440:02d}T{minute // 60 % 24:02d}:{minute % 60:02d}:00Z"

    m = batch_id
    windows = [(iso(m + k), iso(m + k + 1)) for k in range(5)]
    return IngestBatchWrite(
        batch_id=batch_id,
        events=3000,
        max_event_time_ms=(805248000 + 60 * m) * 1000,
        traffic=[(s, e, 600, 9_000_000, 0, 540, 40, 15, 5, 20) for s, e in windows],
        pages=[(iso(m), iso(m + 5), f"/page/{p}.html", 100 - p % 100) for p in range(300)],
        clients=[(iso(m), iso(m + 5), f"host{c}.example.com", 15, 120_000) for c in range(200)],
        visitors=[(s, e, 250, None) for s, e in windows],
        dimensions=[
            ("sections", f"/s{k}", s, e, 50, 750_000, 0, 45, 3, 1, 1, 2)
            for s, e in windows
            for k in range(12)
        ],
        sessions=[
            ("h", "agent", iso(m), iso(m + 1), 60, 5, 4, 50_000, "/", "/x", 0) for _ in range(20)
        ],
        session_stats=[
            (iso(m + k), iso(m + k + 60), 40, 10, 160, 90, 600, b"k" * 200) for k in (0, 1)
        ],
        prune_trending_before=iso(m - 120),
    )


def bench_commit(store: Any, batches: int) -> dict[str, float]:
    """Milliseconds per :meth:`commit_ingest_batch` of ``batches`` micro-batches, one writer."""
    times = []
    for b in range(batches):
        write = payload(b)
        start = time.perf_counter()
        assert store.commit_ingest_batch("ingest", write)
        times.append((time.perf_counter() - start) * 1000)
    return {
        "batches": batches,
        "commit_ms_median": round(statistics.median(times), 2),
        "commit_ms_p95": round(harness.p95(times), 2),
    }


def bench_reads(store: Any, target: str, first: int, readers: int, seconds: float) -> dict:
    """Dashboard refreshes per second of ``readers`` threads while a writer commits."""
    from logstream.dashboard.data import Filters, read_snapshot

    stop = threading.Event()
    latencies: list[float] = []
    lock = threading.Lock()
    states: set[str] = set()

    def reader() -> None:
        while not stop.is_set():
            start = time.perf_counter()
            snap = read_snapshot(target, Filters(time_range="all"))
            elapsed = (time.perf_counter() - start) * 1000
            with lock:
                latencies.append(elapsed)
                states.add(snap.state)

    def writer() -> None:
        b = first
        while not stop.wait(0.1):
            store.commit_ingest_batch("ingest", payload(b))
            b += 1

    threads = [threading.Thread(target=reader) for _ in range(readers)]
    threads.append(threading.Thread(target=writer))
    for t in threads:
        t.start()
    time.sleep(seconds)  # the measured interval
    stop.set()
    for t in threads:
        t.join()
    return {
        "readers": readers,
        "refreshes_per_s": round(len(latencies) / seconds, 1),
        "refresh_ms_median": round(statistics.median(latencies), 1),
        "states": sorted(states),
    }


def main() -> None:
    parser = harness.parser(__doc__.splitlines()[0], "store")
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--readers", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()

    from tests.serving.conftest import postgres_cluster

    from logstream.serving import open_store

    settings = {k: v for k, v in vars(args).items() if k != "out"}
    results: dict[str, Any] = {"machine": harness.machine(), "args": settings}
    with tempfile.TemporaryDirectory() as tmp, postgres_cluster(durable=True) as server:
        targets = {"sqlite": f"sqlite:///{tmp}/store.db", "postgresql": server.new_database()}
        for name, url in targets.items():
            store = open_store(url)
            try:
                part = bench_commit(store, args.batches)
                part |= bench_reads(store, url, args.batches, args.readers, args.seconds)
            finally:
                store.close()
            results[name] = part
            print(name, json.dumps(part), flush=True)
    harness.write_result(results, args.out, show=False)


if __name__ == "__main__":
    harness.run(main)
