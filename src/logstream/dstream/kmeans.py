"""Streaming k-means on the DStream edition: clusters of client behaviour that drift with the
traffic (book Ch. 28, "decaying clusters"; ``pyspark.mllib.clustering.StreamingKMeans``).

Every batch, each client's requests of the batch become one behaviour vector
(:data:`FEATURES`), and ``StreamingKMeans.trainOn`` folds the batch into the model with the
mini-batch update rule of MLlib: each point is assigned to its nearest center; every
cluster's weight is first multiplied by the decay factor, then a center moves toward the mean
of its new points by ``n / (decayed weight + n)``. A decay of 1 keeps all history (the
centers are running means), a decay of 0 keeps only the last batch; ``half_life_batches``
sets it so that a batch's weight halves after that many batches. The centers and weights
after each batch go to the serving store (table ``dstream_kmeans``), so the drift of the
clusters over the day can be read and plotted.

The model lives on the driver (``StreamingKMeans.latestModel()``); it is not recovered from a
checkpoint, so this job has none: a restart learns again from its initial centers.
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from logstream.analytics.pages import is_content_path
from logstream.dstream.weblog import _iso, parsed_requests

if TYPE_CHECKING:
    from pyspark.streaming import DStream

__all__ = ["FEATURES", "KMeansSettings", "build_kmeans_streams", "client_features"]

#: The behaviour vector of a client in one batch, in order.
FEATURES = (
    "log_requests",  # ln(1 + requests in the batch)
    "log_mean_bytes",  # ln(1 + bytes per request)
    "error_share",  # share of responses with status >= 400
    "content_share",  # share of requests for content pages (.html, .htm, /), not assets
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS dstream_kmeans (
    batch_time TEXT NOT NULL, cluster INTEGER NOT NULL, weight REAL NOT NULL,
    center TEXT NOT NULL, points INTEGER NOT NULL, PRIMARY KEY (batch_time, cluster));
"""


@dataclass(frozen=True)
class KMeansSettings:
    """Options of ``logstream dstream kmeans``.

    Attributes
    ----------
    k : int
        Clusters (≥ 2).
    half_life_batches : float
        Batches after which a batch's weight in the model has halved (``setHalfLife``);
        ``math.inf`` keeps all history (decay 1).
    seed : int
        Seed of the random initial centers (``setRandomCenters``: standard normal
        coordinates, weight 1 each, so the first points move a center almost all the way).
    log_format : str
        ``common``, ``combined`` or a ``LogFormat`` string.
    """

    k: int = 4
    half_life_batches: float = 60.0
    seed: int = 42
    log_format: str = "common"

    def __post_init__(self) -> None:
        if self.k < 2:
            raise ValueError(f"k {self.k} must be at least 2")
        if not self.half_life_batches > 0:
            raise ValueError(f"half life {self.half_life_batches:g} must be above 0 batches")

    @property
    def decay(self) -> float:
        """The decay factor per batch: ``0.5 ** (1 / half_life_batches)``."""
        return 0.5 ** (1.0 / self.half_life_batches)


def client_features(totals: tuple[int, int, int, int]) -> list[float]:
    """One client's :data:`FEATURES` from its batch totals ``(requests, bytes, errors,
    content pages)``.

    Examples
    --------
    >>> [round(x, 3) for x in client_features((4, 4000, 1, 2))]
    [1.609, 6.909, 0.25, 0.5]
    """
    requests, size, errors, content = totals
    return [
        math.log1p(requests),
        math.log1p(size / requests),
        errors / requests,
        content / requests,
    ]


def _add(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(x + y for x, y in zip(a, b, strict=True))


def build_kmeans_streams(lines: DStream, settings: KMeansSettings, store_path: Path | str) -> Any:
    """Build the streaming k-means graph on ``lines``; return the ``StreamingKMeans``.

    Parameters
    ----------
    lines : DStream of str
        Access-log lines (socket, text files, queue).
    settings : KMeansSettings
    store_path : path
        SQLite store; each batch's centers go to ``dstream_kmeans``: ``batch_time`` (ISO,
        UTC), ``cluster`` (0 … k−1), ``weight`` (decayed points), ``center`` (JSON list in
        :data:`FEATURES` order), ``points`` (the batch's clients assigned to it). Written with
        ``INSERT OR REPLACE`` by (batch time, cluster): a replayed batch rewrites its rows.

    Returns
    -------
    pyspark.mllib.clustering.StreamingKMeans
        Its ``latestModel()`` is the model after the last batch.
    """
    from pyspark.mllib.clustering import StreamingKMeans

    store_file = str(Path(store_path).absolute())
    with sqlite3.connect(store_file, timeout=30) as conn:
        conn.executescript(_SCHEMA)

    def totals(r: Any) -> tuple[str, tuple[int, int, int, int]]:
        return (r[0], (1, r[3], int(r[2] >= 400), int(is_content_path(r[1]))))

    vectors = (
        parsed_requests(lines, settings.log_format)
        .map(totals)
        .reduceByKey(_add)
        .map(lambda kv: client_features(kv[1]))
    )
    model = StreamingKMeans(k=settings.k, decayFactor=settings.decay).setRandomCenters(
        len(FEATURES), 1.0, settings.seed
    )
    # Output operations of a batch run one after the other, in the order they are registered
    # (and at run time, unlike a transform(), whose function runs when the batch's RDDs are
    # generated, maybe before the previous batch's update): the assignment by the centers
    # before the update, the update (trainOn), then the record.
    vectors.cache()
    assigned: dict[datetime, dict[int, int]] = {}

    def assign(t: datetime, rdd: Any) -> None:
        before = model.latestModel()
        assigned[t] = dict(rdd.map(before.predict).countByValue())

    def record(t: datetime, rdd: Any) -> None:
        points = assigned.pop(t, {})
        latest = model.latestModel()
        rows = [
            (_iso(t), i, float(w), json.dumps([float(x) for x in c]), int(points.get(i, 0)))
            for i, (c, w) in enumerate(zip(latest.centers, latest.clusterWeights, strict=True))
        ]
        with sqlite3.connect(store_file, timeout=60) as conn:
            conn.executemany("INSERT OR REPLACE INTO dstream_kmeans VALUES (?, ?, ?, ?, ?)", rows)

    vectors.foreachRDD(assign)
    model.trainOn(vectors)
    vectors.foreachRDD(record)
    return model
