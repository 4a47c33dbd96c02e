"""The DStream edition beside Structured Streaming on the same replay (the book's comparison
of Part II and Part III).

The first lines of the real 1995-07-09 NASA day are replayed into a directory at
``--speedup`` event seconds per wall second while ``logstream dstream run --dir`` watches it
(batches of processing time); then ``logstream run --trigger available-now`` reads the same
files (micro-batches, windows of event time). Both stores are compared: request totals and
status classes must be equal; the trending pages differ by design (a DStream window holds
what *arrived* in its last seconds, the Structured Streaming window what *happened* in five
event-minutes). Prints a table and writes ``bench/results/editions-side-by-side.json``::

    python bench/editions_side_by_side.py --lines 6000 --speedup 720

One run, 2 cores.
"""

from __future__ import annotations

import gzip
import sqlite3
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness

DAY = harness.NASA_DAY_FILE
LOGSTREAM = harness.LOGSTREAM


def main() -> None:
    parser = harness.parser(__doc__.splitlines()[0], "editions-side-by-side")
    parser.add_argument("--lines", type=int, default=6000)
    parser.add_argument("--speedup", type=float, default=720.0)
    parser.add_argument("--batch", default="5s")
    args = parser.parse_args()
    data = harness.data_dir()
    with gzip.open(harness.data_file(DAY), "rt", encoding="utf-8", errors="replace") as fh:
        head = [next(fh) for _ in range(args.lines)]
    stamp = lambda line: datetime.strptime(line.split("[", 1)[1][:26], "%d/%b/%Y:%H:%M:%S %z")  # noqa: E731
    span_s = (stamp(head[-1]) - stamp(head[0])).total_seconds()
    feed_s = span_s / args.speedup
    with harness.scratch("editions-") as work:
        landing = work / "landing"
        landing.mkdir()
        dstream_db, stream_db = work / "dstream.db", work / "stream.db"
        dstream = subprocess.Popen(
            [
                *LOGSTREAM,
                *("dstream", "run", "--dir", str(landing), "--batch", args.batch),
                *("--window", "30s", "--slide", args.batch, "--store", str(dstream_db)),
                *("--checkpoint", str(work / "dstream-checkpoint")),
                *("--duration", f"{feed_s + 60:.0f}s"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(work / "dstream.log", "w"),
        )
        time.sleep(20)  # the JVM and the StreamingContext start; files must come after
        started = time.perf_counter()
        subprocess.run(
            [
                *(*LOGSTREAM, "replay", str(data / DAY), "--dir", str(landing)),
                *("--speedup", str(args.speedup), "--quiet"),
                *("--limit", str(args.lines)),
            ],
            check=True,
        )
        took = time.perf_counter() - started
        print(f"replayed {args.lines} lines ({span_s / 3600:.1f} h) in {took:.0f} s")
        dstream.wait()
        subprocess.run(
            [
                *(*LOGSTREAM, "run", "--input-dir", str(landing), "--format", "common"),
                *("--trigger", "available-now", "--no-dashboard"),
                *("--output-dir", str(work / "out"), "--state-dir", str(work / "state")),
                *("--store", f"sqlite:///{stream_db}"),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        with sqlite3.connect(dstream_db) as conn:
            d_status = dict(
                conn.execute(
                    "SELECT status_class, SUM(requests) FROM dstream_status GROUP BY 1"
                ).fetchall()
            )
            d_batches = conn.execute("SELECT COUNT(*) FROM dstream_batches").fetchone()[0]
            d_top = conn.execute(
                "SELECT batch_time, url_path, requests FROM dstream_trending "
                "WHERE batch_time = (SELECT batch_time FROM dstream_trending "
                "GROUP BY batch_time ORDER BY SUM(requests) DESC LIMIT 1) "
                "ORDER BY requests DESC LIMIT 3"
            ).fetchall()
        with sqlite3.connect(stream_db) as conn:
            sums = conn.execute(
                "SELECT SUM(status_1xx), SUM(status_2xx), SUM(status_3xx), SUM(status_4xx), "
                "SUM(status_5xx) FROM traffic_per_minute"
            ).fetchone()
            s_status = {f"{i + 1}xx": n for i, n in enumerate(sums) if n}
        # every final window is in the Parquet output (the store keeps the recent ones)
        import pyarrow.dataset as ds

        windows = ds.dataset(work / "out" / "trending_pages", format="parquet").to_table()
        frame = windows.to_pandas()
        busiest = frame.groupby("window_start")["requests"].sum().idxmax()
        s_top = [
            (str(busiest), r.url_path, int(r.requests))
            for r in frame[frame.window_start == busiest]
            .sort_values("requests", ascending=False)
            .head(3)
            .itertuples()
        ]
    result = {
        "input": (
            f"{DAY}, first {args.lines} lines ({span_s / 3600:.1f} h of event time), "
            f"replayed at {args.speedup:g}x into a directory"
        ),
        "dstream": {"batches": d_batches, "status_classes": d_status, "busiest_window": d_top},
        "structured": {"status_classes": s_status, "busiest_window": s_top},
        "status_classes_equal": d_status == s_status,
    }
    harness.write_result(result, args.out)


if __name__ == "__main__":
    harness.run(main)
