"""Room occupancy from sensor readings: train in batch, score on the stream (book Ch. 15;
Spark guide "MLlib Operations" on streaming DataFrames).

The model predicts the UCI data set's ``occupancy`` label (0 free, 1 occupied) from a
reading's metrics. Batch and stream share everything up to the model: the readings are
parsed by :func:`~logstream.devices.readings.parse_readings` (quarantined lines left out) and
scored by :func:`score_readings`, a ``PipelineModel.transform`` that is the same projection on
a batch or a streaming DataFrame, so a reading gets the same prediction and probability in
both (``tests/ml/test_occupancy.py`` checks every row).

**Features.** The default is :data:`DEFAULT_FEATURES`, ``temperature``, ``light`` and
``co2``. With all five metrics the cross-validation prefers a random forest (AUC 0.9985 on
the training week) that scores worse on the held-out periods (accuracy 0.950 on
``occupancy_datatest``, 0.954 on ``occupancy_datatest2``): humidity and the humidity ratio
drift between the three periods and the forest splits on them. Temperature, light and CO2
give 0.977 and 0.974 (``docs/devices.md`` has the commands and the figures).

**Folds by day.** The readings come a minute apart, so neighbouring readings are nearly the
same row; random folds put them on both sides of a split and reward memorising the week.
:func:`train_occupancy` therefore assigns each reading the fold *day since the epoch mod
folds* (``CrossValidator``'s ``foldCol``): a validation fold holds whole days the model was
not fitted on, as the held-out files do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from logstream.devices.readings import METRICS, READING_SCHEMA, parse_readings
from logstream.errors import ConfigError, InputPathError
from logstream.ml.model import (
    CLASSIFIERS,
    ModelInfo,
    binary_metrics,
    check_classifiers,
    check_version,
    fit_classifier,
    prediction_columns,
)

if TYPE_CHECKING:
    from pyspark.ml import PipelineModel
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "DEFAULT_FEATURES",
    "KIND",
    "LABEL",
    "READING_TYPES",
    "SCORE_COLUMNS",
    "check_features",
    "check_inputs",
    "evaluate",
    "read_readings",
    "score_readings",
    "train_occupancy",
]

#: The model kind in ``logstream-model.json``.
KIND = "occupancy"
#: The label column: the reading's true occupancy (0/1, null where the data has none).
LABEL = "occupancy"
#: The features of a model trained without ``--features`` (see the module docstring).
DEFAULT_FEATURES = ("temperature", "light", "co2")
#: The reading schema's columns and Spark SQL types, checked against a model's features.
READING_TYPES = {f.name: f.dataType.simpleString() for f in READING_SCHEMA.fields}
#: The columns :func:`score_readings` adds.
SCORE_COLUMNS = ("prediction", "probability", "model_version")


def check_features(names: Sequence[str]) -> tuple[str, ...]:
    """Check feature names against the reading metrics, before the JVM starts.

    Parameters
    ----------
    names : sequence of str
        Metric names (:data:`~logstream.devices.readings.METRICS`), blanks ignored.

    Returns
    -------
    tuple of str
        The names, stripped, in the given order.

    Raises
    ------
    ConfigError
        When a name is not a metric, is repeated, or none is given; the message names the
        value and the valid names.
    """
    out = tuple(n.strip() for n in names if n.strip())
    bad = [n for n in out if n not in METRICS]
    if bad or not out or len(set(out)) != len(out):
        what = f"unknown {bad}" if bad else ("none given" if not out else "a name is repeated")
        raise ConfigError(
            f"--features {','.join(names)!r}: {what}; use names from {', '.join(METRICS)}"
        )
    return out


def check_inputs(paths: Sequence[Path], option: str) -> list[Path]:
    """Refuse a missing input file before the JVM starts.

    Raises
    ------
    InputPathError
        Naming the option and the first file that does not exist.
    """
    for path in paths:
        if not Path(path).is_file():
            raise InputPathError(f"{option} {str(path)!r} does not exist (a file of readings)")
    return [Path(p).expanduser().absolute() for p in paths]


def read_readings(spark: SparkSession, paths: Sequence[Path], fmt: str = "csv") -> DataFrame:
    """Read reading files in batch, parsed as the device pipeline parses them.

    Parameters
    ----------
    paths : sequence of Path
        CSV (the UCI layout) or JSON-lines files, gzipped or not.
    fmt : {"csv", "json"}

    Returns
    -------
    DataFrame
        :data:`~logstream.devices.readings.READING_SCHEMA` columns, the lines that parse
        (quarantined lines are left out); each file is a device unless its lines name one.
    """
    from pyspark.sql import functions as F

    lines = spark.read.text([str(p) for p in paths]).select(
        "value", F.col("_metadata.file_path").alias("source_file")
    )
    parsed = parse_readings(lines, fmt)
    return parsed.where(F.col("quarantine_reason").isNull()).drop("raw_line", "quarantine_reason")


def score_readings(model: PipelineModel, readings: DataFrame, version: str) -> DataFrame:
    """Score readings with an occupancy model, batch or streaming alike.

    Parameters
    ----------
    model : PipelineModel
        A fitted occupancy pipeline (:func:`train_occupancy`).
    readings : DataFrame
        Rows with the model's feature columns (double; a null feature is scored as NaN).
    version : str
        The model's version, written with every prediction.

    Returns
    -------
    DataFrame
        ``readings``' columns, then ``prediction`` (int, 0 free or 1 occupied),
        ``probability`` (double, 0–1: the model's P(occupied)) and ``model_version``
        (string). A stateless projection: on a streaming DataFrame it keeps the watermark.
    """
    from pyspark.sql import functions as F

    return model.transform(readings).select(
        *(F.col(c) for c in readings.columns),
        *prediction_columns("prediction", "probability", version),
    )


def evaluate(
    spark: SparkSession, model: PipelineModel, paths: Sequence[Path], version: str = ""
) -> dict[str, dict[str, float]]:
    """Score labelled reading files, one at a time.

    Returns
    -------
    dict of str to dict
        By file name (``occupancy_datatest.txt.gz``): ``rows``, ``tp``, ``fp``, ``tn``, ``fn``,
        ``accuracy``, ``precision``, ``recall``
        (:func:`~logstream.ml.model.binary_metrics`; readings without a label left out).
    """
    return {
        Path(p).name: binary_metrics(
            score_readings(model, read_readings(spark, [p]), version), LABEL
        )
        for p in paths
    }


def _stem(path: Path) -> str:
    return Path(path).name.split(".")[0]


def train_occupancy(
    spark: SparkSession,
    train: Sequence[Path],
    features: Sequence[str] = DEFAULT_FEATURES,
    candidates: Sequence[str] = CLASSIFIERS,
    folds: int = 3,
    seed: int = 7,
    fold_by: Literal["day", "random"] = "day",
    test: Sequence[Path] = (),
    version: str | None = None,
) -> tuple[PipelineModel, ModelInfo]:
    """Fit the occupancy classifier on labelled readings (:func:`fit_classifier`) and
    describe it.

    Parameters
    ----------
    train : sequence of Path
        Labelled reading files (readings without a label are left out).
    features : sequence of str
        Metrics, checked by :func:`check_features`.
    candidates, folds, seed
        As :func:`~logstream.ml.model.fit_classifier`.
    fold_by : {"day", "random"}
        ``day``: a reading's fold is its UTC day since the epoch mod ``folds`` (see the module
        docstring); ``random``: random folds by ``seed``.
    test : sequence of Path
        Labelled files scored after training: their accuracy goes to the metrics.
    version : str, optional
        Default: :func:`~logstream.ml.model.default_version`.

    Returns
    -------
    (PipelineModel, ModelInfo)
        The model and its metadata: ``metrics`` holds ``cv_auc.<candidate>`` (mean
        cross-validated area under ROC) and ``accuracy.<file stem>`` of every test file.

    Raises
    ------
    ConfigError
        For a bad feature name, fewer than 2 folds, an unknown classifier or version, or
        training data with a single class.
    """
    import pyspark
    from pyspark.sql import functions as F

    names = check_features(features)
    check_classifiers(candidates, folds)
    version = check_version(version)
    readings = read_readings(spark, train).where(F.col(LABEL).isNotNull())
    fold_col = None
    if fold_by == "day":
        fold_col = "fold"
        day = F.unix_date(F.to_date("event_time"))
        readings = readings.withColumn(fold_col, F.pmod(day, F.lit(folds)).cast("int"))
    readings = readings.cache()
    try:
        classes = {r[0] for r in readings.select(LABEL).distinct().collect()}
        if classes != {0, 1}:
            raise ConfigError(
                f"training readings {[str(p) for p in train]} have labels {sorted(classes)}: "
                "the classifier needs both 0 and 1"
            )
        fitted = fit_classifier(readings, names, LABEL, folds, seed, candidates, fold_col=fold_col)
    finally:
        readings.unpersist()
    info = ModelInfo(
        kind=KIND,
        version=version,
        features={n: READING_TYPES[n] for n in names},
        label=LABEL,
        classifier=fitted.classifier,
        metrics={f"cv_auc.{k}": v for k, v in fitted.cv_auc.items()},
        trained_on=[str(p) for p in train],
        spark_version=pyspark.__version__,
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    if test:
        scores = evaluate(spark, fitted.model, test, version)
        metrics = dict(info.metrics)
        for path, m in zip(test, scores.values(), strict=True):
            metrics[f"accuracy.{_stem(path)}"] = m["accuracy"]
        info = replace(info, metrics=metrics)
    return fitted.model, info
