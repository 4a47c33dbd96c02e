"""Benchmark: does the dashboard stay responsive with a week of per-minute data in the store?

Fills a serving store with a synthetic week (direct SQL into the store's schema, created by
:class:`~logstream.serving.ServingStore` so its indexes are there):

* 10,080 traffic windows (1 minute) with a daily cycle, status classes and bytes;
* trending pages: the top 20 of a 200-page Zipf site for each 5-minute window sliding every
  minute (10,080 windows, 201,600 rows; the live pipeline keeps only the last hours);
* 10,080 unique-visitor rows with 300-byte sketches;
* progress rows: one ingest batch every ``--batch-seconds`` of the week plus the three window
  queries (4 rows per batch; 483,840 rows at 5 s), the matching ledger rows, counters and
  examples.

Then times, for every time range (15 min … 7 days, all) and with the URL-prefix and
status filters: :func:`~logstream.dashboard.data.read_snapshot` (the SQL) and
:func:`~logstream.dashboard.app.refresh_outputs` plus the JSON encoding Dash applies (the
whole server side of one refresh). ``--compare-indexes`` repeats the timings without the
indexes the dashboard relies on; ``--browser`` also loads the page in Chromium (Playwright,
``/usr/bin/chromium``) and times the switch to "all".

Run from the repository root::

    .venv/bin/python bench/bench_dashboard.py
    .venv/bin/python bench/bench_dashboard.py --compare-indexes --browser

Exit status 0 when every refresh (server side, median) is under ``--budget`` seconds (1 s).
Writes ``bench/results/dashboard.json`` (``--out``).
"""

from __future__ import annotations

import json
import math
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from plotly.utils import PlotlyJSONEncoder

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness
from logstream.dashboard.app import refresh_outputs
from logstream.dashboard.data import TIME_RANGES, Filters, read_snapshot
from logstream.dashboard.server import start_dashboard_thread
from logstream.serving import ServingStore

START = datetime(2025, 1, 6, tzinfo=UTC)
MINUTES = 7 * 24 * 60
TOP = 20
PAGES = 200
#: Secondary indexes of the store the dashboard's queries use (dropped by --compare-indexes).
#: Traffic and visitors are read by primary-key range, progress and ledger newest-first by
#: ``seq`` / ``rowid``; only "the latest complete trending window" needs an index.
DASHBOARD_INDEXES = ("trending_by_end",)


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def fill(path: Path, batch_seconds: int, seed: int = 7) -> dict[str, int]:
    """Write the synthetic week into a new store at ``path``; return the row counts."""
    rng = random.Random(seed)
    ServingStore(path)  # schema, WAL, indexes
    conn = sqlite3.connect(path)
    sections = ["shuttle", "history", "news", "facts", "software"]
    pages = ["/"] + [f"/{rng.choice(sections)}/page{i}.html" for i in range(1, PAGES)]
    weights = [1 / (k + 1) ** 1.1 for k in range(PAGES)]
    traffic, visitors, trending = [], [], []
    for m in range(MINUTES):
        start = START + timedelta(minutes=m)
        hour = (m / 60) % 24
        level = 200 + 150 * math.sin((hour - 9) / 24 * 2 * math.pi)
        requests = max(1, int(rng.gauss(level, level * 0.1)))
        s4 = int(requests * rng.uniform(0.005, 0.03))
        s5 = int(requests * rng.uniform(0.0, 0.004))
        s3 = int(requests * rng.uniform(0.05, 0.12))
        s2 = requests - s3 - s4 - s5
        traffic.append(
            (
                iso(start),
                iso(start + timedelta(minutes=1)),
                requests,
                requests * rng.randint(8_000, 25_000),
                0,
                s2,
                s3,
                s4,
                s5,
                s4 + s5,
            )
        )
        visitors.append(
            (
                iso(start),
                iso(start + timedelta(minutes=1)),
                max(1, requests // 6),
                rng.randbytes(300),
            )
        )
        w_start, w_end = start - timedelta(minutes=4), start + timedelta(minutes=1)
        hits = rng.choices(range(PAGES), weights, k=requests)
        counts: dict[int, int] = {}
        for h in hits:
            counts[h] = counts.get(h, 0) + 1
        for k, n in sorted(counts.items(), key=lambda kv: -kv[1])[:TOP]:
            trending.append((iso(w_start), iso(w_end), pages[k], n * 5))
    progress, ledger = [], []
    batches = MINUTES * 60 // batch_seconds
    for b in range(batches):
        wall = START + timedelta(seconds=b * batch_seconds)
        stamp = wall.strftime("%Y-%m-%dT%H:%M:%S.000Z")
        event = iso(wall)
        mark = iso(wall - timedelta(minutes=10))
        rows = rng.randint(500, 2000)
        ledger.append(("ingest", b, stamp, rows, 0, 0))
        progress.append(
            ("ingest", b, stamp, rows / batch_seconds, rows / 0.8, 800, rows, None, None,
             None, None, None)
        )  # fmt: skip
        for q, state in (("traffic_per_minute", 11), ("unique_visitors", 11),
                         ("trending_pages", 450)):  # fmt: skip
            progress.append(
                (q, b, stamp, rows / batch_seconds, rows / 0.3, 300, rows, mark, event, state,
                 state * 400, 0)
            )  # fmt: skip
    with conn:
        conn.executemany(f"INSERT INTO traffic_per_minute VALUES ({','.join('?' * 10)})", traffic)
        conn.executemany("INSERT INTO unique_visitors VALUES (?, ?, ?, ?)", visitors)
        conn.executemany(
            "INSERT INTO trending_pages(window_start, window_end, url_path, requests) "
            "VALUES (?, ?, ?, ?)",
            trending,
        )
        conn.executemany(
            "INSERT INTO progress(query, batch_id, timestamp, input_rows_per_s, "
            "processed_rows_per_s, batch_duration_ms, num_input_rows, watermark, "
            "max_event_time, state_rows, state_memory_bytes, dropped_by_watermark) "
            f"VALUES ({','.join('?' * 12)})",
            progress,
        )
        conn.executemany("INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?)", ledger)
        events = sum(r[2] for r in traffic)
        conn.executemany(
            "INSERT INTO counters VALUES (?, ?)",
            [("events", events), ("late_events", 1234), ("quarantined", 56)],
        )
        conn.executemany(
            "INSERT INTO late_examples(batch_id, event_time, watermark, client_host, url_path, "
            "source_file) VALUES (?, ?, ?, ?, ?, ?)",
            [(b, iso(START), iso(START), "h.example", "/", "f.log") for b in range(20)],
        )
        conn.executemany(
            "INSERT INTO quarantine_examples(batch_id, raw_line, source_file, reason) "
            "VALUES (?, ?, ?, ?)",
            [(b, "garbage line", "f.log", "format_mismatch") for b in range(20)],
        )
        end_ms = int((START + timedelta(minutes=MINUTES)).timestamp() * 1000) - 1000
        conn.executemany(
            "INSERT INTO pipeline_state VALUES (?, ?)",
            [
                ("max_event_time_ms", str(end_ms)),
                ("watermark_delay_ms", "600000"),
                ("traffic_window", "60 seconds"),
                ("trending_window", "300 seconds"),
                ("trending_slide", "60 seconds"),
                ("top", "10"),
            ],
        )
    conn.execute("ANALYZE")
    conn.close()
    return {
        "traffic_windows": len(traffic),
        "trending_rows": len(trending),
        "visitor_rows": len(visitors),
        "progress_rows": len(progress),
        "ledger_rows": len(ledger),
    }


def timed(fn, repeat: int) -> dict[str, float]:
    """Median and max wall time of ``fn()`` over ``repeat`` calls, in milliseconds."""
    fn()  # warm the page cache
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return {"median_ms": round(statistics.median(times), 1), "max_ms": round(max(times), 1)}


def cases() -> list[tuple[str, Filters]]:
    out = [(f"range={key}", Filters.build(key)) for key in TIME_RANGES]
    out.append(("range=7d prefix=/shuttle/", Filters.build("7d", "/shuttle/")))
    out.append(("range=7d status=4xx,5xx", Filters.build("7d", "", ["4xx", "5xx"])))
    out.append(("range=all prefix=/nothing/", Filters.build("all", "/nothing/")))
    return out


def measure(path: Path, repeat: int) -> list[dict[str, object]]:
    results = []
    for name, f in cases():
        snap = read_snapshot(path, f)
        assert snap.state == "ok", snap.message

        def refresh(f: Filters = f) -> str:
            out = refresh_outputs(path, f.time_range, f.url_prefix, list(f.status_classes))
            return json.dumps(out, cls=PlotlyJSONEncoder)

        payload = refresh()
        results.append(
            {
                "case": name,
                "points": len(snap.traffic.times) if snap.traffic else 0,
                "bucket_s": snap.traffic.bucket_s if snap.traffic else None,
                "queries": timed(lambda f=f: read_snapshot(path, f), repeat),
                "refresh": timed(refresh, repeat),
                "payload_kib": round(len(payload) / 1024, 1),
            }
        )
    return results


def browser(path: Path) -> dict[str, float]:
    """Load the page in headless Chromium; time the first full render and the switch to
    "all" (until the requests chart holds the new points)."""
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    from playwright.sync_api import sync_playwright

    args = [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--disable-sync",
        "--disable-quic",
    ]
    points = (
        "() => { const g = document.querySelector('#graph-requests .js-plotly-plot');"
        " return g && g.data && g.data.length ? g.data[0].x.length : 0; }"
    )
    with start_dashboard_thread(path, refresh_s=2.0) as server, sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=args)
        page = b.new_page(viewport={"width": 1400, "height": 1000})
        t0 = time.perf_counter()
        page.goto(server.url)
        page.wait_for_function(f"({points})() > 0", timeout=60_000)
        first = time.perf_counter() - t0
        before = page.evaluate(points)
        t0 = time.perf_counter()
        page.check("#range input[value='all']")
        page.wait_for_function(f"({points})() !== {before}", timeout=60_000)
        switch = time.perf_counter() - t0
        b.close()
    return {"first_render_s": round(first, 2), "switch_to_all_s": round(switch, 2)}


def print_report(report: dict[str, object]) -> None:
    """The figures as a table (``--json`` writes them all)."""
    print(f"store: {report['store_mib']} MiB, filled in {report['fill_s']} s; {report['machine']}")
    print("rows: " + ", ".join(f"{k} {v:,}" for k, v in report["rows"].items()))  # type: ignore[union-attr]
    for key in ("with_indexes", "without_indexes"):
        if key not in report:
            continue
        print(f"\n{key.replace('_', ' ')}: median / max of the timed calls, ms")
        print(f"{'case':34} {'points':>6} {'bucket':>6} {'queries':>13} {'refresh':>13} {'KiB':>6}")
        for r in report[key]:  # type: ignore[attr-defined]
            q, f = r["queries"], r["refresh"]
            print(
                f"{r['case']:34} {r['points']:>6} {r['bucket_s'] or 0:>5}s "
                f"{q['median_ms']:>6} /{q['max_ms']:>5} {f['median_ms']:>6} /{f['max_ms']:>5} "
                f"{r['payload_kib']:>6}"
            )
    if "browser" in report:
        print(f"\nbrowser (Chromium, headless): {report['browser']}")


def main() -> int:
    parser = harness.parser(__doc__.splitlines()[0], "dashboard")
    parser.add_argument("--store", type=Path, help="Store file to (re)create (default: temp).")
    parser.add_argument("--batch-seconds", type=int, default=5, help="Trigger interval, s.")
    parser.add_argument("--repeat", type=int, default=7, help="Timed calls per case.")
    parser.add_argument("--budget", type=float, default=1.0, help="Seconds per refresh.")
    parser.add_argument("--compare-indexes", action="store_true")
    parser.add_argument("--browser", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = args.store or Path(tmp) / "week.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        t0 = time.perf_counter()
        counts = fill(path, args.batch_seconds)
        fill_s = time.perf_counter() - t0
        report: dict[str, object] = {
            "machine": harness.machine(),
            "sqlite": sqlite3.sqlite_version,
            "store_mib": round(path.stat().st_size / 2**20, 1),
            "fill_s": round(fill_s, 1),
            "rows": counts,
            "with_indexes": measure(path, args.repeat),
        }
        if args.browser:
            report["browser"] = browser(path)
        if args.compare_indexes:
            conn = sqlite3.connect(path)
            for name in DASHBOARD_INDEXES:
                conn.execute(f"DROP INDEX IF EXISTS {name}")
            conn.execute("ANALYZE")
            conn.close()
            report["without_indexes"] = measure(path, args.repeat)

    print_report(report)
    worst = max(r["refresh"]["median_ms"] for r in report["with_indexes"])  # type: ignore[index]
    print(f"\nslowest refresh (server side, median): {worst:.0f} ms; budget {args.budget:g} s")
    harness.write_result(report, args.out, show=False)
    return 0 if worst < args.budget * 1000 else 1


if __name__ == "__main__":
    harness.run(main)
