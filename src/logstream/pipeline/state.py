"""The analytics state carried from one micro-batch to the next, one snapshot per batch id.

The ingest stage merges each micro-batch into state that outlives it: the **open panes**
(:mod:`logstream.analytics.panes` rows whose window the watermark has not passed, plus the
final content-page panes that sliding windows still open need), the **open sessions**
(:func:`logstream.analytics.sessions.merge_sessions`) and the anomaly detector's **series
state** (:func:`logstream.analytics.alerts.score_minutes`). Micro-batch ``N`` reads the
snapshot of the last micro-batch before it and writes its own, ``N``:

``STATE_DIR/analytics/batch_id=N/``
    ``state/`` (one Parquet file: a ``part`` column naming the part of each row, ``panes``,
    ``sessions`` or ``series``, and one struct column per part, so the whole state is written
    by one Spark job) and ``meta.json`` (``max_event_ms``: the newest event time so far;
    ``final_until_ms``: the watermark up to which windows were published; ``batch_id``; the
    outputs computed).

Delivery. A snapshot is written to a hidden staging directory and renamed into place in one
atomic ``rename``, *after* every output and the serving store of micro-batch ``N`` are
written: its presence means "micro-batch N is delivered". A replay of ``N`` after a crash
finds it and skips the batch; without it, the batch is computed again from snapshot ``N − 1``
— the same inputs, so the same results — and each output skips what it already published
(:func:`logstream.sinks.publish_batch`) and the store what its ledger holds. This is the
batch-id idempotence of ``foreachBatch`` writers (Spark guide, "Using foreachBatch"), applied
to state: the state is small (bounded by the watermark), so a snapshot per micro-batch costs
less than Spark's state store operations for the panes of a backfill (docs/streaming.md,
"Why panes, not a streaming aggregation").

Only the last :data:`KEEP` snapshots are kept.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

__all__ = ["KEEP", "SnapshotMeta", "StateSnapshots"]


def _rows(directory: Path) -> int:
    """Rows of the Parquet files in ``directory``, from their footers (no Spark job)."""
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(f).num_rows for f in directory.glob("*.parquet"))


#: Snapshots kept (the newest ones): a replay needs only the one before it.
KEEP = 3

_PREFIX = "batch_id="


@dataclass(frozen=True)
class SnapshotMeta:
    """What a snapshot says besides its frames.

    Attributes
    ----------
    batch_id : int
        The micro-batch that wrote it (-1: the empty state before the first).
    max_event_ms : int or None
        Newest event time of every micro-batch up to this one, epoch ms.
    final_until_ms : int or None
        Windows ending at or before this instant (epoch ms) are final and published.
    outputs : list of str or None
        The analytics outputs computed up to this micro-batch (None: before the first).
    since_ms : dict of str to int
        For an output turned on after the first micro-batch: the newest event time before
        it was turned on (epoch ms). Only its windows starting after this instant hold every
        event, so only those are published.
    """

    batch_id: int = -1
    max_event_ms: int | None = None
    final_until_ms: int | None = None
    outputs: list[str] | None = None
    since_ms: dict[str, int] = field(default_factory=dict)


class StateSnapshots:
    """Read and write the per-micro-batch snapshots under ``root``.

    Parameters
    ----------
    spark : SparkSession
    root : Path
        ``STATE_DIR/analytics``.
    schemas : dict of str to StructType
        The parts of a snapshot and their schemas.
    """

    def __init__(self, spark: SparkSession, root: Path, schemas: dict[str, StructType]) -> None:
        self.spark = spark
        self.root = root
        self.schemas = schemas
        self.schema = StructType(
            [
                StructField("part", StringType(), False),
                *(StructField(name, schema, True) for name, schema in schemas.items()),
            ]
        )
        #: Rows of the last snapshot written (from its Parquet footer).
        self.last_rows = 0
        # the projection that tags a part's rows, per part and columns: the same expressions
        # every micro-batch, built once (a Column costs Py4J round trips to build)
        self._tagged: dict[tuple[str, tuple[str, ...]], tuple[Column, ...]] = {}
        self._part_filters = {part: F.col("part") == part for part in schemas}

    def _dir(self, batch_id: int) -> Path:
        return self.root / f"{_PREFIX}{batch_id:010d}"

    def _ids(self) -> list[int]:
        if not self.root.is_dir():
            return []
        return sorted(
            int(p.name[len(_PREFIX) :]) for p in self.root.glob(f"{_PREFIX}*") if p.is_dir()
        )

    def done(self, batch_id: int) -> bool:
        """Whether micro-batch ``batch_id`` wrote its snapshot (so it is fully delivered)."""
        return (self._dir(batch_id) / "meta.json").is_file()

    def latest_before(self, batch_id: int) -> SnapshotMeta:
        """The meta of the newest snapshot written by a micro-batch before ``batch_id``."""
        earlier = [i for i in self._ids() if i < batch_id]
        if not earlier:
            return SnapshotMeta()
        meta = json.loads((self._dir(earlier[-1]) / "meta.json").read_text(encoding="utf-8"))
        return SnapshotMeta(**meta)

    def read(self, meta: SnapshotMeta, part: str, spark: SparkSession | None = None) -> DataFrame:
        """Frame ``part`` of the snapshot ``meta`` describes (empty when absent), in ``spark``
        (default: the session given at construction; a micro-batch passes its own, so that
        the state is planned with the micro-batch's settings)."""
        spark = spark if spark is not None else self.spark
        schema = self.schemas[part]
        path = self._dir(meta.batch_id) / "state"
        if meta.batch_id < 0 or not path.is_dir():
            return spark.createDataFrame([], schema)
        return (
            spark.read.schema(self.schema)
            .parquet(str(path))
            .where(self._part_filters[part])
            .select(f"{part}.*")
        )

    def _tagging(self, name: str, columns: tuple[str, ...]) -> tuple[Column, ...]:
        """The projection of part ``name``'s rows (``columns``) into the snapshot's schema."""
        key = (name, columns)
        if key not in self._tagged:
            self._tagged[key] = (
                F.lit(name).alias("part"),
                *(
                    F.struct(*columns).alias(other)
                    if other == name
                    else F.lit(None).cast(schema).alias(other)
                    for other, schema in self.schemas.items()
                ),
            )
        return self._tagged[key]

    def write(self, meta: SnapshotMeta, parts: dict[str, DataFrame | None]) -> None:
        """Write snapshot ``meta.batch_id`` atomically; then drop all but the newest ones.

        ``parts`` maps a part to its frame (its schema's columns) or None (an empty part).
        """
        final = self._dir(meta.batch_id)
        if final.exists():
            return
        staging = self.root / f".staging-{final.name}"
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir(parents=True)
        rows: DataFrame | None = None
        for name, frame in parts.items():
            if frame is None:
                continue
            tagged = frame.select(*self._tagging(name, tuple(frame.columns)))
            rows = tagged if rows is None else rows.unionByName(tagged)
        if rows is None:
            rows = self.spark.createDataFrame([], self.schema)
        rows.coalesce(1).write.parquet(str(staging / "state"))
        (staging / "meta.json").write_text(json.dumps(asdict(meta)), encoding="utf-8")
        staging.rename(final)
        self.last_rows = _rows(final / "state")
        for old in self._ids()[:-KEEP]:
            shutil.rmtree(self._dir(old), ignore_errors=True)
