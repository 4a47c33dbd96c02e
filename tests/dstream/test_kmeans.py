"""Streaming k-means on the DStream edition: with ``queueStream`` and one RDD per five
event-minutes of the real NASA day, the centers, weights and assignments recorded after every
batch equal an independent NumPy computation of MLlib's decaying mini-batch update."""

from __future__ import annotations

import gzip
import json
import math
import sqlite3
from collections import defaultdict
from itertools import groupby

import numpy as np
import pytest

from logstream.analytics.pages import is_content_path
from logstream.dstream import streaming_context
from logstream.dstream.kmeans import FEATURES, KMeansSettings, build_kmeans_streams, client_features
from logstream.dstream.weblog import parse_line
from logstream.parsing import compile_format

BATCHES = 8
MINUTES_PER_BATCH = 5


def batch_vectors(lines: list[str]) -> np.ndarray:
    """Each client's behaviour vector over ``lines``, computed here without Spark."""
    fmt = compile_format("common")
    rx = fmt.python_regex
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for line in lines:
        r = parse_line(line, rx, fmt.fields)
        if r is None:
            continue
        t = totals[r[0]]
        t[0] += 1
        t[1] += r[3]
        t[2] += r[2] >= 400
        t[3] += is_content_path(r[1])
    return np.array([client_features(tuple(t)) for t in totals.values()])


def mllib_update(centers, weights, points, decay):
    """StreamingKMeansModel.update (mllib, time unit "batches"), in NumPy."""
    d2 = ((points[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2)
    label = d2.argmin(axis=1)
    counts = np.bincount(label, minlength=len(centers))
    weights = weights * decay
    centers = centers.copy()
    for i in np.flatnonzero(counts):
        updated = weights[i] + counts[i]
        lam = counts[i] / max(updated, 1e-16)
        weights[i] = updated
        centers[i] = centers[i] * (1 - lam) + (lam / counts[i]) * points[label == i].sum(axis=0)
    assert weights.min() >= 1e-8 * weights.max()  # no dying cluster: MLlib would split one
    return centers, weights, counts


def test_streaming_kmeans_equals_the_mllib_update_rule_computed_independently(
    spark, nasa_day, tmp_path
):
    with gzip.open(nasa_day, "rt", encoding="utf-8", errors="replace") as fh:
        lines = [line.rstrip("\n") for line in fh]
    minute = lambda line: line[line.index("[") + 1 : line.index("[") + 18]  # noqa: E731
    minutes = [list(g) for _, g in groupby(lines, key=minute)]
    batches = [
        [x for m in minutes[i : i + MINUTES_PER_BATCH] for x in m]
        for i in range(0, BATCHES * MINUTES_PER_BATCH, MINUTES_PER_BATCH)
    ]
    settings = KMeansSettings(k=3, half_life_batches=2.0, seed=7)
    assert settings.decay == pytest.approx(math.sqrt(0.5))

    sc = spark.sparkContext
    ssc = streaming_context(sc, 0.5)
    db = tmp_path / "store.db"
    model = build_kmeans_streams(
        ssc.queueStream([sc.parallelize(b, 2) for b in batches]), settings, db
    )
    centers = np.array(model.latestModel().centers, dtype=float)  # the random initial centers
    weights = np.ones(settings.k)

    def recorded() -> int:
        try:
            with sqlite3.connect(db, timeout=5) as conn:
                sql = "SELECT COUNT(DISTINCT batch_time) FROM dstream_kmeans"
                return conn.execute(sql).fetchone()[0]
        except sqlite3.Error:
            return 0

    ssc.start()
    try:
        for _ in range(600):
            if recorded() >= BATCHES:
                break
            ssc.awaitTerminationOrTimeout(0.5)
        else:
            pytest.fail("the k-means batches did not all complete")
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=False)

    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT batch_time, cluster, weight, center, points FROM dstream_kmeans "
            "ORDER BY batch_time, cluster"
        ).fetchall()
    by_batch = [list(g) for _, g in groupby(rows, key=lambda r: r[0])][:BATCHES]
    moved = 0.0
    for i, (batch, got) in enumerate(zip(batches, by_batch, strict=True)):
        points = batch_vectors(batch)
        assert points.shape[1] == len(FEATURES)
        before = centers
        centers, weights, counts = mllib_update(centers, weights, points, settings.decay)
        assert [r[4] for r in got] == counts.tolist(), i  # assigned by the centers before
        assert sum(r[4] for r in got) == len(points)  # every client of the batch, once
        np.testing.assert_allclose([r[2] for r in got], weights, rtol=1e-9)
        np.testing.assert_allclose([json.loads(r[3]) for r in got], centers, rtol=1e-9, atol=1e-12)
        moved = max(moved, float(np.abs(centers - before).max()))
    assert moved > 0.01  # the clusters drift with the traffic


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--socket", "localhost:9", "--half-life", "0"], "half life 0 must be above 0"),
        (["--socket", "localhost:9", "--k", "1"], "--k"),
        (["--dir", "{tmp}/missing"], "is not a directory"),
    ],
)
def test_dstream_kmeans_rejects_bad_options_before_spark_starts(args, message, tmp_path, capsys):
    from logstream.cli import main

    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert main(["dstream", "kmeans", *args, "--store", str(tmp_path / "s.db")]) == 2
    assert message in capsys.readouterr().err
