"""Cluster drift of streaming k-means over the real NASA day (book Ch. 28).

The DStream edition's k-means (``logstream.dstream.kmeans``) is fed the 1995-07-09 NASA day
through ``queueStream``, one RDD per hour of event time (24 batches), and the centers and
weights recorded after each batch are printed and saved to
``bench/results/kmeans-drift.json``. Usage::

    python bench/kmeans_drift.py --k 3 --half-life 3

One run, ``local[2]``.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from itertools import groupby
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness

DAY = harness.NASA_DAY_FILE


def main() -> None:
    parser = harness.parser(__doc__.splitlines()[0], "kmeans-drift")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--half-life", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    from logstream.dstream import streaming_context
    from logstream.dstream.kmeans import FEATURES, KMeansSettings, build_kmeans_streams

    lines = harness.nasa_day_lines()
    hour = lambda line: line[line.index("[") + 1 : line.index("[") + 15]  # noqa: E731
    hours = [(h, list(g)) for h, g in groupby(lines, key=hour)]

    spark = harness.spark_session(master="local[2]", app_name="kmeans")
    sc = spark.sparkContext
    settings = KMeansSettings(k=args.k, half_life_batches=args.half_life, seed=args.seed)
    with harness.scratch("kmeans-") as tmp:
        db = tmp / "store.db"
        ssc = streaming_context(sc, 1.0)
        build_kmeans_streams(
            ssc.queueStream([sc.parallelize(g, 2) for _, g in hours]), settings, db
        )
        ssc.start()
        count = "SELECT COUNT(DISTINCT batch_time) FROM dstream_kmeans"
        while True:
            ssc.awaitTerminationOrTimeout(1.0)
            with sqlite3.connect(db) as conn:
                if conn.execute(count).fetchone()[0] >= len(hours):
                    break
        ssc.stop(stopSparkContext=True, stopGraceFully=False)
        with sqlite3.connect(db) as conn:
            rows = conn.execute(
                "SELECT batch_time, cluster, weight, center, points FROM dstream_kmeans "
                "ORDER BY batch_time, cluster"
            ).fetchall()
    batches = [list(g) for _, g in groupby(rows, key=lambda r: r[0])][: len(hours)]
    out = []
    print(f"hour (-0400)     clients  per cluster: points, weight, center ({', '.join(FEATURES)})")
    for (label, _), batch in zip(hours, batches, strict=True):
        clusters = [
            {
                "cluster": r[1],
                "points": r[4],
                "weight": round(r[2], 2),
                "center": [round(x, 3) for x in json.loads(r[3])],
            }
            for r in batch
        ]
        out.append({"hour": label, "clusters": clusters})
        cells = "  ".join(f"{c['points']:>4} {c['weight']:>7.1f} {c['center']}" for c in clusters)
        print(f"{label}  {sum(c['points'] for c in clusters):>6}  {cells}")
    result = {
        "input": f"{DAY}: 24 batches, one per hour of event time (queueStream)",
        "k": settings.k,
        "half_life_batches": settings.half_life_batches,
        "decay": settings.decay,
        "features": list(FEATURES),
        "hours": out,
    }
    harness.write_result(result, args.out, show=False)


if __name__ == "__main__":
    harness.run(main)
