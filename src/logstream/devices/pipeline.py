"""The device pipeline (``logstream devices run``): sensor readings → registry join → per-device
windows, threshold alerts and device state, each a streaming query with its own checkpoint
and an exactly-once Parquet file sink (book Ch. 8–9 and 13).

Outputs under ``OUTPUT_DIR``:

==================  =============================================================  ===========
output              columns                                                        written
==================  =============================================================  ===========
``device_windows``  :func:`~logstream.devices.readings.device_windows`             when the
                                                                                   watermark
                                                                                   passes the
                                                                                   window
``device_alerts``   :func:`~logstream.devices.readings.threshold_alerts`           per reading
``device_events``   :func:`~logstream.devices.state.device_transitions`            per change
``alerts_near_``    :func:`~logstream.devices.join.alerts_near_changes`: a         per pair
``changes``         stream–stream join of the two above
``quarantine``      ``raw_line``, ``source_file``, ``reason``, ``detail``          per line
``predictions``     with ``--model`` only: ``device``, ``room``, ``event_time``,   per reading
                    the model's feature columns, ``prediction`` (int 0/1),
                    ``probability`` (double, P(occupied)), ``occupancy`` (the
                    true label or null), ``model_version``
==================  =============================================================  ===========

With a model (``--model``, an occupancy model directory: :mod:`logstream.ml.occupancy`) the
readings are scored once per query with ``PipelineModel.transform`` — a stateless projection
of the streaming DataFrame — and ``device_windows`` is computed from the scored readings, so
it also carries each window's running confusion matrix (``predicted_readings``, ``tp``,
``fp``, ``tn``, ``fn``, ``accuracy``: :data:`~logstream.devices.readings.CONFUSION_COLUMNS`)
without another stateful query. The model's metadata is checked against the reading schema
before any query starts (:func:`check_device_model`). Adding or removing ``--model`` changes
the schema of ``device_windows`` and of its state: a checkpoint written with the other choice
is refused (start over with a new ``--state-dir`` and ``--output-dir``).
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pyspark.sql import functions as F

from logstream.config import config_error
from logstream.devices.join import alerts_near_changes
from logstream.devices.readings import (
    METRICS,
    REGISTRY_COLUMNS,
    device_windows,
    parse_readings,
    threshold_alerts,
    with_registry,
)
from logstream.devices.state import StateConfig, device_transitions
from logstream.errors import ConfigError, InputPathError
from logstream.pipeline.config import interval_seconds, spark_interval, trigger_value
from logstream.session import is_worker_start_timeout

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from logstream.ml.model import ModelInfo

__all__ = [
    "DEVICE_OUTPUTS",
    "MODEL_OUTPUTS",
    "DeviceConfig",
    "check_device_model",
    "load_registry",
    "run_device_queries",
    "start_device_queries",
]

#: The queries of the device pipeline and their Parquet outputs.
DEVICE_OUTPUTS = (
    "device_windows",
    "device_alerts",
    "device_events",
    "alerts_near_changes",
    "quarantine",
)
#: The queries added by ``--model`` (after :data:`DEVICE_OUTPUTS`).
MODEL_OUTPUTS = ("predictions",)


class DeviceConfig(BaseModel):
    """Options of ``logstream devices run``.

    Parameters
    ----------
    input : str
        A reading file, a directory of them, or a quoted glob (``"data/occupancy_*.txt.gz"``).
    format : {"csv", "json"}
        Reading lines (:mod:`logstream.devices.readings`).
    registry : Path, optional
        Device registry, CSV or Parquet: ``device``, ``room``, ``type`` and optional
        thresholds ``<metric>_max``.
    output_dir, state_dir : Path
        Parquet outputs; one checkpoint per query.
    window : str
        Tumbling window of the per-device statistics (default 5 minutes).
    watermark : str
        Event-time delay after which a window is final and a reading late (default 2 minutes).
    silent_after, offline_after : str
        Event time without a reading after which a device is silent, then offline.
    trigger : str
        ``available-now`` or a processing-time interval.
    max_files_per_trigger : int, optional
        Input files per micro-batch (default: all that are there).
    join_within : str
        Largest distance between an alert and an occupancy change joined to it.
    model : Path, optional
        An occupancy model directory (``logstream model train occupancy``): score every
        reading (the ``predictions`` output) and add the confusion matrix to
        ``device_windows``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: str
    format: Literal["csv", "json"] = "csv"
    registry: Path | None = None
    output_dir: Path = Path("out/devices")
    state_dir: Path = Path("out/devices-state")
    window: str = "5 minutes"
    watermark: str = "2 minutes"
    silent_after: str = "3 minutes"
    offline_after: str = "10 minutes"
    trigger: str = "available-now"
    max_files_per_trigger: int | None = Field(default=None, ge=1)
    join_within: str = "10 minutes"
    model: Path | None = None

    @field_validator("window", "watermark", "silent_after", "offline_after", "join_within")
    @classmethod
    def _interval(cls, value: str) -> str:
        return spark_interval(value)

    @field_validator("trigger")
    @classmethod
    def _trigger(cls, value: str) -> str:
        return trigger_value(value)

    @field_validator("output_dir", "state_dir", "registry", "model")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        return None if value is None else value.expanduser().absolute()

    @model_validator(mode="after")
    def _states(self) -> DeviceConfig:
        self.state_config()  # silent ≤ offline
        return self

    def state_config(self) -> StateConfig:
        """The silences in milliseconds."""
        return StateConfig(
            silent_after_ms=int(interval_seconds(self.silent_after) * 1000),
            offline_after_ms=int(interval_seconds(self.offline_after) * 1000),
        )

    @classmethod
    def build(cls, **values: object) -> DeviceConfig:
        """Construct from keyword values; a bad value raises :class:`ConfigError` naming it."""
        try:
            return cls(**values)  # type: ignore[arg-type]
        except ValidationError as exc:
            raise config_error(exc, "invalid devices option") from exc


def load_registry(path: Path) -> list[tuple[object, ...]]:
    """Read and check a device registry (CSV with a header, or Parquet).

    Returns
    -------
    list of tuple
        One row per device in :data:`~logstream.devices.readings.REGISTRY_COLUMNS` order;
        thresholds are floats or None.

    Raises
    ------
    InputPathError
        When the file does not exist.
    ConfigError
        When a column is missing or unknown (a misspelt threshold column: the message names
        it and the known columns, :data:`~logstream.devices.readings.REGISTRY_COLUMNS`), a
        row has more fields than the header, a device is empty or repeated, or a threshold is
        not a number; the message names the row.
    """
    from logstream.reference.tables import read_rows

    if not path.is_file():
        raise InputPathError(f"device registry {str(path)!r} does not exist")
    data = path.read_bytes()
    rows = read_rows("devices", data, str(path))
    columns = _registry_header(data, str(path), rows)
    unknown = [c for c in columns if c not in REGISTRY_COLUMNS]
    if unknown:  # a typo (temprature_max) would silently drop the threshold the user meant
        raise ConfigError(
            f"device registry {path}: unknown column{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(c) for c in unknown)}; the known columns are "
            f"{', '.join(REGISTRY_COLUMNS)}"
        )
    if columns and not {"device", "room"} <= set(columns):
        raise ConfigError(f"device registry {path}: the header must name device and room")
    out, seen = [], set()
    for i, row in enumerate(rows, start=1):
        device = (row.get("device") or "").strip()
        if not device or device in seen:
            what = "is empty" if not device else f"{device!r} is repeated"
            raise ConfigError(f"device registry {path}: row {i}: device {what}")
        seen.add(device)
        values: list[object] = [device, (row.get("room") or "").strip() or "unknown"]
        values.append((row.get("type") or "").strip() or "unknown")
        for m in METRICS:
            text = (row.get(f"{m}_max") or "").strip()
            try:
                values.append(float(text) if text else None)
            except ValueError as exc:
                raise ConfigError(
                    f"device registry {path}: row {i}: {m}_max {text!r} is not a number"
                ) from exc
        out.append(tuple(values))
    return out


def _registry_header(data: bytes, name: str, rows: list[dict[str, str | None]]) -> list[str]:
    """The registry's column names, as written (a CSV's header row even without data rows)."""
    if rows:
        if None in rows[0] or any(None in row for row in rows):  # csv.DictReader's extras
            row = next(i for i, r in enumerate(rows, start=1) if None in r)
            raise ConfigError(f"device registry {name}: row {row} has more fields than the header")
        return list(rows[0])
    if name.endswith(".csv"):
        import csv
        import io

        return next(csv.reader(io.StringIO(data.decode("utf-8-sig", "replace"))), [])
    import pyarrow as pa
    import pyarrow.parquet as pq

    return list(pq.read_schema(pa.BufferReader(data)).names)  # read_rows read it already


def _registry_frame(spark: SparkSession, path: Path | None) -> DataFrame | None:
    if path is None:
        return None
    import pandas as pd

    rows = load_registry(path)
    schema = ", ".join(
        f"{c} {'double' if c.endswith('_max') else 'string'}" for c in REGISTRY_COLUMNS
    )
    return spark.createDataFrame(pd.DataFrame(rows, columns=list(REGISTRY_COLUMNS)), schema)


def _input_path(text: str) -> str:
    path = Path(text).expanduser()
    if any(c in text for c in "*?["):
        if not path.parent.is_dir():
            raise InputPathError(f"--input {text!r}: directory {str(path.parent)!r} does not exist")
        return str(path.absolute())
    if not path.exists():
        raise InputPathError(
            f"--input {text!r} does not exist: give a reading file, a directory of them or a "
            "quoted glob"
        )
    return str(path.absolute())


def reading_lines(
    spark: SparkSession, input_path: str, max_files_per_trigger: int | None = None
) -> DataFrame:
    """The lines of the reading files of ``--input``, as a stream.

    Parameters
    ----------
    spark : SparkSession
    input_path : str
        One file, a directory of files or a glob (``"data/occupancy_*.txt.gz"``).
    max_files_per_trigger : int, optional
        Files per micro-batch at most.

    Returns
    -------
    DataFrame
        Streaming ``value`` (a line) and ``source_file`` (its file's URI).

    Raises
    ------
    InputPathError
        When the input does not exist.

    Notes
    -----
    Spark's file source reads a directory or a glob: one file is read as its directory,
    filtered to its name (``pathGlobFilter``, its glob characters escaped), as ``logstream
    sql`` reads one; given as such, Spark refused it ("Option 'basePath' must be a
    directory").
    """
    path = _input_path(input_path)
    reader = spark.readStream.format("text")
    if max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", max_files_per_trigger)
    if Path(path).is_file():
        escaped = re.sub(r"([*?\[\]{}\\])", r"\\\1", Path(path).name)
        reader = reader.option("pathGlobFilter", escaped)
        path = str(Path(path).parent)
    return reader.load(path).select("value", F.col("_metadata.file_path").alias("source_file"))


def check_device_model(cfg: DeviceConfig) -> ModelInfo | None:
    """Check ``cfg.model`` without Spark: an occupancy model whose features are reading
    columns of the types it was trained on, and checkpoints made with the same choice of
    scoring or not.

    Returns
    -------
    ModelInfo or None
        None without a model.

    Raises
    ------
    InputPathError
        When the model directory does not exist or is not a model directory.
    ConfigError
        When it is another kind of model, of a newer format, needs a column the readings lack
        or have with another type (the message names each), or the state directory holds
        checkpoints of a run with the other choice.
    """
    from logstream.ml.model import read_model_info
    from logstream.ml.occupancy import KIND, READING_TYPES

    info = None
    if cfg.model is not None:
        info = read_model_info(cfg.model, KIND)
        info.check_columns(READING_TYPES, "the device readings")
    windows = cfg.state_dir / "device_windows"
    predictions = cfg.state_dir / MODEL_OUTPUTS[0]
    if windows.is_dir() and predictions.is_dir() != (info is not None):
        was = "with" if predictions.is_dir() else "without"
        raise ConfigError(
            f"--state-dir {str(cfg.state_dir)!r} holds checkpoints of a run {was} --model: "
            "device_windows' schema differs with a model; use a new --state-dir and "
            "--output-dir (or run as before)"
        )
    return info


def start_device_queries(
    spark: SparkSession, cfg: DeviceConfig, only: Collection[str] | None = None
) -> list[StreamingQuery]:
    """Start the queries of the device pipeline: the five of :data:`DEVICE_OUTPUTS`, and
    ``predictions`` with a model (see the module docstring); with ``only``, those of them.

    Raises
    ------
    InputPathError
        When the input, the registry or the model does not exist.
    ConfigError
        When the registry is invalid or the model does not fit (:func:`check_device_model`).
    """
    info = check_device_model(cfg)
    registry = _registry_frame(spark, cfg.registry)
    lines = reading_lines(spark, cfg.input, cfg.max_files_per_trigger)
    parsed = parse_readings(lines, cfg.format, detail=True)
    readings = with_registry(
        parsed.where(F.col("quarantine_reason").isNull()).drop(
            "raw_line", "quarantine_reason", "quarantine_detail"
        ),
        registry,
    ).withWatermark("event_time", cfg.watermark)
    bad = parsed.where(F.col("quarantine_reason").isNotNull()).select(
        "raw_line",
        "source_file",
        F.col("quarantine_reason").alias("reason"),
        F.col("quarantine_detail").alias("detail"),  # which field failed and why
    )
    alerts = threshold_alerts(readings)
    transitions = device_transitions(readings, cfg.state_config())
    scored = readings
    if cfg.model is not None and info is not None:
        from logstream.ml.model import load_model
        from logstream.ml.occupancy import KIND, score_readings

        model, info = load_model(cfg.model, KIND)
        scored = score_readings(model, readings, info.version)
    frames = {
        "device_windows": device_windows(scored, cfg.window),
        "device_alerts": alerts,
        "device_events": transitions,
        "alerts_near_changes": alerts_near_changes(alerts, transitions, cfg.join_within),
        "quarantine": bad,
    }
    if info is not None:
        frames["predictions"] = scored.select(
            "device",
            "room",
            "event_time",
            *info.features,
            "prediction",
            "probability",
            "occupancy",
            "model_version",
        )
    queries = []
    for name, frame in frames.items():
        if only is not None and name not in only:
            continue
        writer = (
            frame.writeStream.queryName(name)
            .format("parquet")
            .outputMode("append")
            .option("path", str(cfg.output_dir / name))
            .option("checkpointLocation", str(cfg.state_dir / name))
        )
        if cfg.trigger == "available-now":
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=cfg.trigger)
        queries.append(writer.start())
    return queries


#: Restarts of one query whose Python worker did not connect back in time.
WORKER_RESTARTS = 3


def run_device_queries(
    spark: SparkSession,
    cfg: DeviceConfig,
    *,
    stop: threading.Event | None = None,
    deadline: float | None = None,
    notice: Callable[[str], Any] = print,
) -> list[StreamingQuery]:
    """Start the device queries and wait until every one ended (available-now), one failed,
    ``stop`` is set or ``deadline`` (``time.monotonic()``) passes; the caller stops them.

    A query whose first micro-batch failed because Spark's Python worker did not connect
    back in time (:func:`logstream.session.is_worker_start_timeout`: the two
    ``transformWithStateInPandas`` queries start one each on the driver, and Spark waits
    10 s) is restarted from its checkpoint, at most :data:`WORKER_RESTARTS` times, with a
    notice: the micro-batch it was planning is replayed, so its output is the same.

    Returns
    -------
    list of StreamingQuery
        The queries as they ended (a restarted one replaces the failed one); a failed one has
        its ``exception()``.
    """
    stop = stop or threading.Event()
    queries = start_device_queries(spark, cfg)
    try:
        _await_device_queries(spark, cfg, queries, stop, deadline, notice)
    except BaseException:
        for q in queries:
            q.stop()
        raise
    return queries


def _await_device_queries(
    spark: SparkSession,
    cfg: DeviceConfig,
    queries: list[StreamingQuery],
    stop: threading.Event,
    deadline: float | None,
    notice: Callable[[str], Any],
) -> None:
    """The wait of :func:`run_device_queries`: in steps, so a signal is seen at once."""
    from pyspark.errors import StreamingQueryException

    restarts: Counter[str] = Counter()
    while not stop.is_set():
        for i, q in enumerate(queries):
            while (
                not q.isActive
                and is_worker_start_timeout(q.exception())
                and restarts[q.name] < WORKER_RESTARTS
            ):
                restarts[q.name] += 1
                notice(
                    f"device query {q.name}: a Python worker did not connect back within "
                    f"Spark's 10 s (a busy machine): restarted from its checkpoint "
                    f"({restarts[q.name]} of {WORKER_RESTARTS})"
                )
                q = queries[i] = start_device_queries(spark, cfg, only={q.name})[0]
        active = [q for q in queries if q.isActive]
        failed = any(q.exception() is not None for q in queries if not q.isActive)
        remaining = None if deadline is None else deadline - time.monotonic()
        if not active or failed or (remaining is not None and remaining <= 0):
            break
        # Spark takes a positive timeout only (0.0 raised VALUE_NOT_POSITIVE at --duration's end)
        step = 0.5 if remaining is None else min(0.5, max(0.01, remaining))
        try:
            active[0].awaitTermination(step)
        except StreamingQueryException:
            continue  # restarted above when its worker did not connect back, else reported
