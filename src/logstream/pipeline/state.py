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
    by one Spark job, or by Arrow on the driver) and ``meta.json`` (``max_event_ms``: the
    newest event time so far; ``final_until_ms``: the watermark up to which windows were
    published; ``batch_id``; the outputs computed; ``files``: the SHA-256 of each file of
    ``state/``).

Integrity. logstream's own state is never read past damage: every read checks the files
against the digests ``meta.json`` recorded at the write, and Spark reads them with
``ignoreCorruptFiles`` off whatever the session says (that setting is for input files).
A damaged, truncated or missing file, or a snapshot directory without its ``meta.json``,
raises :class:`~logstream.errors.StateCorruptError` naming the file and the way to recover.

In memory. A micro-batch delivered on the driver (:mod:`logstream.pipeline.ingest.driver`)
keeps the state it wrote as Arrow tables: the next one reads them from memory instead of
the file, as long as they are the newest snapshot's.

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

import hashlib
import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from logstream.errors import StateCorruptError

__all__ = ["KEEP", "SnapshotMeta", "StateSnapshots", "recovery_hint"]


def _rows(directory: Path) -> int:
    """Rows of the Parquet files in ``directory``, from their footers (no Spark job)."""
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(f).num_rows for f in directory.glob("*.parquet"))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _data_files(directory: Path) -> list[Path]:
    """The files of a snapshot's ``state/`` that hold its rows (not Spark's markers)."""
    return sorted(
        p for p in directory.iterdir() if p.is_file() and not p.name.startswith((".", "_"))
    )


def recovery_hint(snapshot: Path, checkpoint: Path | None = None) -> str:
    """How to recover from a damaged snapshot ``snapshot`` (``…/analytics/batch_id=N``): the
    micro-batch is replayed from the snapshot before it, which writes the same state again
    (its outputs and store writes are skipped as delivered)."""
    batch_id = int(snapshot.name.split("=", 1)[1])
    commits = (
        (checkpoint / "commits" / str(batch_id))
        if checkpoint
        else Path("STATE/ingest/commits") / str(batch_id)
    )
    return (
        f"delete {snapshot} and {commits}, then start again: micro-batch {batch_id} is "
        "replayed from the snapshot before it and writes the same state (its outputs and "
        "store rows are kept as delivered)"
    )


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
    #: SHA-256 of each file of the snapshot's ``state/`` (None: a snapshot written before
    #: digests were recorded, read unchecked).
    files: dict[str, str] | None = None
    #: The checkpoint's offset-log entry the batch was delivered over
    #: (:mod:`logstream.pipeline.checkpoint`; None when unknown).
    offsets: str | None = None


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
        #: The ingest query's checkpoint (for the recovery hint of a damaged snapshot).
        self.checkpoint: Path | None = None
        # the newest snapshot as Arrow tables, when the driver wrote it: (batch_id, parts)
        self._memory: tuple[int, dict[str, Any]] | None = None
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

    def newest_id(self) -> int | None:
        """The batch id of the newest snapshot, or None before any."""
        ids = self._ids()
        return ids[-1] if ids else None

    def meta(self, batch_id: int) -> SnapshotMeta:
        """The meta of snapshot ``batch_id`` (which must exist: :meth:`done`)."""
        return self.latest_before(batch_id + 1)

    def snapshot_dir(self, batch_id: int) -> Path:
        """The directory of snapshot ``batch_id``."""
        return self._dir(batch_id)

    # -- what a batch is delivered over (logstream.pipeline.checkpoint) ---------------------

    def _pending_path(self, batch_id: int) -> Path:
        return self.root / "pending" / str(batch_id)

    def pending(self, batch_id: int) -> str | None:
        """The offset-log entry recorded when micro-batch ``batch_id`` began to be delivered
        (None when none was)."""
        try:
            return self._pending_path(batch_id).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def record_pending(self, batch_id: int, entry: str) -> None:
        """Record the offset-log entry micro-batch ``batch_id`` is delivered over, before
        anything of it is written (atomically: a rename)."""
        path = self._pending_path(batch_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{batch_id}.tmp")
        tmp.write_text(entry, encoding="utf-8")
        tmp.replace(path)

    def recorded_offsets(self) -> dict[int, str]:
        """Offset-log entries recorded at delivery: the kept snapshots' and the pending
        records', by batch id (:func:`logstream.pipeline.checkpoint.restore_offsets`)."""
        found: dict[int, str] = {}
        ids = self._ids()
        for batch_id in ids:
            try:
                meta = self.meta(batch_id)
            except StateCorruptError:
                if batch_id == ids[-1]:
                    raise
                continue  # an older snapshot's record: not needed to start
            if meta.offsets is not None:
                found[batch_id] = meta.offsets
        pending = self.root / "pending"
        if pending.is_dir():
            for path in pending.iterdir():
                if path.name.isdigit():
                    found[int(path.name)] = path.read_text(encoding="utf-8")
        return found

    def latest_before(self, batch_id: int) -> SnapshotMeta:
        """The meta of the newest snapshot written by a micro-batch before ``batch_id``.

        Raises
        ------
        StateCorruptError
            When that snapshot's ``meta.json`` is missing or unreadable.
        """
        earlier = [i for i in self._ids() if i < batch_id]
        if not earlier:
            return SnapshotMeta()
        directory = self._dir(earlier[-1])
        try:
            meta = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
            return SnapshotMeta(**meta)
        except (OSError, ValueError, TypeError) as error:
            raise StateCorruptError(
                f"the analytics snapshot {directory} cannot be read ({_reason(error)}): "
                + recovery_hint(directory, self.checkpoint)
            ) from None

    def check(self) -> None:
        """Check the newest snapshot (the one the next micro-batch reads) before a start.

        Raises
        ------
        StateCorruptError
            When its ``meta.json`` or one of its files is missing or damaged.
        """
        newest = self.newest_id()
        if newest is not None:
            self.verify(self.meta(newest))

    def verify(self, meta: SnapshotMeta) -> None:
        """Check snapshot ``meta``'s files against the digests its write recorded.

        Raises
        ------
        StateCorruptError
            When a file is missing, or its bytes are not those written.
        """
        if meta.batch_id < 0 or meta.files is None:
            return
        directory = self._dir(meta.batch_id)
        state = directory / "state"
        found = {p.name: p for p in _data_files(state)} if state.is_dir() else {}
        for name, digest in meta.files.items():
            path = found.get(name)
            problem = None
            if path is None:
                problem = f"{state / name} is missing"
            elif _digest(path) != digest:
                problem = f"{path} is not the file written (its SHA-256 differs)"
            if problem is not None:
                raise StateCorruptError(
                    f"the analytics snapshot {directory} is damaged: {problem}; "
                    + recovery_hint(directory, self.checkpoint)
                )

    def read(self, meta: SnapshotMeta, part: str, spark: SparkSession | None = None) -> DataFrame:
        """Frame ``part`` of the snapshot ``meta`` describes (empty when absent), in ``spark``
        (default: the session given at construction; a micro-batch passes its own, so that
        the state is planned with the micro-batch's settings)."""
        spark = spark if spark is not None else self.spark
        schema = self.schemas[part]
        path = self._dir(meta.batch_id) / "state"
        if meta.batch_id < 0 or not path.is_dir():
            return spark.createDataFrame([], schema)
        self.verify(meta)
        return (
            spark.read.schema(self.schema)
            .option("ignoreCorruptFiles", "false")
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

    def read_tables(self, meta: SnapshotMeta) -> dict[str, Any]:
        """Every part of snapshot ``meta`` as an Arrow table (empty when absent): from memory
        when the driver wrote it, else from its file (checked, :meth:`verify`).

        Raises
        ------
        StateCorruptError
            When the file is damaged.
        """
        import pyarrow.parquet as pq

        if self._memory is not None and self._memory[0] == meta.batch_id:
            return dict(self._memory[1])
        schemas = self._arrow_schemas()
        path = self._dir(meta.batch_id) / "state"
        if meta.batch_id < 0 or not path.is_dir():
            return {name: schema.empty_table() for name, schema in schemas.items()}
        self.verify(meta)
        try:
            table = pq.read_table([str(f) for f in _data_files(path)], schema=self._arrow_schema())
        except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
            directory = self._dir(meta.batch_id)
            raise StateCorruptError(
                f"the analytics snapshot {directory} cannot be read ({_reason(error)}): "
                + recovery_hint(directory, self.checkpoint)
            ) from None
        return {name: _part_of(table, name, schemas[name]) for name in schemas}

    def _arrow_schema(self) -> Any:
        """The snapshot file's schema in Arrow, every field nullable (as Spark reads one)."""
        return _nullable(self.schema)

    def _arrow_schemas(self) -> dict[str, Any]:
        return {n: _nullable(s) for n, s in self.schemas.items()}

    def write(self, meta: SnapshotMeta, parts: dict[str, Any]) -> None:
        """Write snapshot ``meta.batch_id`` atomically; then drop all but the newest ones.

        ``parts`` maps a part to its rows (its schema's columns) or None (an empty part):
        Spark DataFrames (one Spark job writes them) or Arrow tables (written by Arrow, and
        kept in memory for :meth:`read_tables`). With no part at all (a run without
        analytics), Arrow writes the empty file: no Spark job (a 31-day backfill without
        analytics, 2 cores: 0.9 s less).
        """
        import pyarrow as pa

        final = self._dir(meta.batch_id)
        if final.exists():
            return
        staging = self.root / f".staging-{final.name}"
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir(parents=True)
        arrow = all(p is None or isinstance(p, pa.Table) for p in parts.values())
        if arrow:
            self._write_arrow(staging / "state", parts)
        else:
            self._write_spark(staging / "state", parts)
        files = {p.name: _digest(p) for p in _data_files(staging / "state")}
        meta = SnapshotMeta(**{**asdict(meta), "files": files})
        (staging / "meta.json").write_text(json.dumps(asdict(meta)), encoding="utf-8")
        staging.rename(final)
        self.last_rows = _rows(final / "state")
        self._pending_path(meta.batch_id).unlink(missing_ok=True)  # the snapshot records it
        if arrow:
            schemas = self._arrow_schemas()
            self._memory = (
                meta.batch_id,
                {
                    n: (parts.get(n) if parts.get(n) is not None else schemas[n].empty_table())
                    for n in schemas
                },
            )
        else:
            self._memory = None
        for old in self._ids()[:-KEEP]:
            shutil.rmtree(self._dir(old), ignore_errors=True)

    def _write_spark(self, path: Path, parts: dict[str, Any]) -> None:
        rows: DataFrame | None = None
        for name, frame in parts.items():
            if frame is None:
                continue
            tagged = frame.select(*self._tagging(name, tuple(frame.columns)))
            rows = tagged if rows is None else rows.unionByName(tagged)
        if rows is None:
            rows = self.spark.createDataFrame([], self.schema)
        rows.coalesce(1).write.parquet(str(path))

    def _write_arrow(self, path: Path, parts: dict[str, Any]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = self._arrow_schema()
        tables = []
        for name, table in parts.items():
            if table is None or not table.num_rows:
                continue
            n = table.num_rows
            columns = []
            for field_ in schema:
                if field_.name == "part":
                    columns.append(pa.array([name] * n, pa.string()))
                elif field_.name == name:
                    struct_type = field_.type
                    columns.append(
                        pa.StructArray.from_arrays(
                            [table[f.name].combine_chunks().cast(f.type) for f in struct_type],
                            fields=list(struct_type),
                        )
                    )
                else:
                    columns.append(pa.nulls(n, field_.type))
            tables.append(pa.table(columns, schema=schema))
        path.mkdir(parents=True)
        table = pa.concat_tables(tables) if tables else schema.empty_table()
        pq.write_table(table, path / "part-00000.parquet")


def _nullable(schema: StructType) -> Any:
    """``schema`` in Arrow with every field, nested ones too, nullable."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    def loose(t: Any) -> Any:
        if pa.types.is_struct(t):
            return pa.struct([pa.field(f.name, loose(f.type), True) for f in t])
        return t

    arrow = to_arrow_schema(schema, timezone="UTC")
    return pa.schema([pa.field(f.name, loose(f.type), True) for f in arrow])


def _part_of(table: Any, name: str, schema: Any) -> Any:
    """Part ``name`` of a snapshot's Arrow table, its struct column as a table of ``schema``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = table.filter(pc.equal(table["part"], name))
    struct = rows[name].combine_chunks() if rows.num_rows else None
    if struct is None:
        return schema.empty_table()
    return pa.table([struct.field(f.name) for f in schema], schema=schema)


def _reason(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:200] if text else type(error).__name__
