"""Versioned model files and the cross-validated classifier shared by logstream's models.

A **model file** is a directory::

    MODEL_DIR/
    ├── logstream-model.json   kind, version, input schema, label, classifier, metrics
    └── spark/                 the fitted pyspark.ml PipelineModel (MLlib persistence)

The JSON is read without Spark, so a model that does not fit the input — another kind, a
missing feature column, a column of another type, a newer format — is refused at start, before
the JVM starts, with a message naming the mismatch (:func:`read_model_info`,
:meth:`ModelInfo.check_columns`).

The classifier (:func:`fit_classifier`) is a ``pyspark.ml`` Pipeline — ``VectorAssembler``,
``StandardScaler``, then a classifier chosen by k-fold ``CrossValidator`` among logistic
regression, a random forest and gradient-boosted trees (the Spark ML guide, "ML Tuning:
model selection"; the book's Ch. 15). The grid varies the pipeline's ``stages``, so the
model selection picks the classifier itself, not only its parameters.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from logstream.errors import ConfigError, InputPathError

if TYPE_CHECKING:
    from pyspark.ml import PipelineModel
    from pyspark.sql import Column, DataFrame

__all__ = [
    "META_FILE",
    "MODEL_FORMAT",
    "Fitted",
    "ModelInfo",
    "binary_metrics",
    "check_classifiers",
    "check_out",
    "check_version",
    "confusion_counts",
    "default_version",
    "fit_classifier",
    "load_model",
    "prediction_columns",
    "read_model_info",
    "save_model",
]

#: The metadata file of a model directory.
META_FILE = "logstream-model.json"
#: The version of the model-directory layout this logstream reads and writes.
MODEL_FORMAT = 2  # 2: ``split`` (the held-out split of training); format 1 is still read
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class ModelInfo:
    """What a model file says about itself (``logstream-model.json``).

    Attributes
    ----------
    kind : str
        What the model scores: ``occupancy`` (sensor readings) or ``bots`` (client windows).
    version : str
        The model's version, chosen at training (default: the UTC time of training,
        ``20261124T183000Z``).
    features : dict of str to str
        Input columns and their Spark SQL types (``{"light": "double", …}``), in the order
        the pipeline assembles them.
    label : str
        The label column it was trained on (0/1).
    classifier : str
        The classifier the cross-validation chose (``logistic_regression``,
        ``random_forest``, ``gbt``).
    metrics : dict of str to float
        Figures measured at training (cross-validated area under ROC, held-out accuracy …).
    trained_on : list of str
        The training inputs.
    split : dict
        How training split its rows, so that an evaluation can score the same held-out rows
        (bots: ``by``, ``hash_seed``, ``buckets``, ``held_out_buckets``, ``held_out_share``,
        ``seed``); empty for a model of format 1 or one trained without a split.
    spark_version, created_at : str
    format : int
        :data:`MODEL_FORMAT` when written.
    """

    kind: str
    version: str
    features: dict[str, str]
    label: str
    classifier: str
    metrics: dict[str, float] = field(default_factory=dict)
    trained_on: list[str] = field(default_factory=list)
    split: dict[str, Any] = field(default_factory=dict)
    spark_version: str = ""
    created_at: str = ""
    format: int = MODEL_FORMAT

    def check_columns(self, columns: Mapping[str, str], what: str) -> None:
        """Refuse an input that lacks a feature column or has it with another type.

        Parameters
        ----------
        columns : mapping of str to str
            The input's columns and Spark SQL types (``DataFrame.dtypes`` as a dict).
        what : str
            The input, for the message (``the device readings``).

        Raises
        ------
        ConfigError
            Naming every missing or mistyped column and the model's version.
        """
        problems = []
        for name, dtype in self.features.items():
            if name not in columns:
                problems.append(f"column {name!r} ({dtype}) is missing")
            elif columns[name] != dtype:
                problems.append(f"column {name!r} is {columns[name]}, the model needs {dtype}")
        if problems:
            raise ConfigError(
                f"the {self.kind} model {self.version} does not fit {what}: "
                + "; ".join(problems)
                + " (train a model on inputs of this schema: logstream model train)"
            )


def read_model_info(path: Path, kind: str) -> ModelInfo:
    """Read and check a model directory's metadata, without Spark.

    Parameters
    ----------
    path : Path
        The model directory.
    kind : str
        The kind the caller scores (``occupancy`` or ``bots``).

    Returns
    -------
    ModelInfo

    Raises
    ------
    InputPathError
        When the directory or its metadata or Spark model does not exist.
    ConfigError
        When the metadata is not valid JSON, is of a newer format, or is a model of another
        kind; the message names the value and the fix.
    """
    meta = path / META_FILE
    if not path.is_dir():
        raise InputPathError(
            f"model {str(path)!r} does not exist: train one with logstream model train {kind}"
        )
    if not meta.is_file() or not (path / "spark").is_dir():
        raise InputPathError(
            f"model {str(path)!r} is not a logstream model directory (no {META_FILE} and spark/): "
            f"train one with logstream model train {kind}"
        )
    try:
        data: dict[str, Any] = json.loads(meta.read_text())
        info = ModelInfo(**data)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"model {str(path)!r}: {META_FILE} is not valid: {exc}") from exc
    if info.format > MODEL_FORMAT:
        raise ConfigError(
            f"model {str(path)!r} has format {info.format}; this logstream reads format "
            f"{MODEL_FORMAT} (upgrade logstream or retrain the model)"
        )
    if info.kind != kind:
        raise ConfigError(
            f"model {str(path)!r} is a {info.kind!r} model; this needs a {kind!r} model "
            f"(logstream model train {kind})"
        )
    return info


def load_model(path: Path, kind: str) -> tuple[PipelineModel, ModelInfo]:
    """Read a model directory: its checked metadata and its fitted pipeline.

    Raises
    ------
    InputPathError, ConfigError
        As :func:`read_model_info`.
    """
    from pyspark.ml import PipelineModel

    info = read_model_info(path, kind)
    return PipelineModel.load(str(path / "spark")), info


def save_model(model: PipelineModel, path: Path, info: ModelInfo, overwrite: bool = False) -> None:
    """Write ``model`` and ``info`` as a model directory (see the module docstring).

    Raises
    ------
    ConfigError
        When ``path`` exists and ``overwrite`` is false, or the version is not 1–64 letters,
        digits, ``.``, ``_`` or ``-``.
    """
    check_version(info.version)
    if check_out(path, overwrite).exists():
        shutil.rmtree(path)
    model.write().save(str(path / "spark"))
    # not sort_keys: ``features`` keeps the order the pipeline assembles them in
    (path / META_FILE).write_text(json.dumps(asdict(info), indent=2) + "\n")


def default_version() -> str:
    """A version from the UTC time: ``20261124T183000Z``."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def check_version(version: str | None) -> str:
    """The version to write (default: :func:`default_version`), checked before training.

    Raises
    ------
    ConfigError
        When it is not 1–64 letters, digits, ``.``, ``_`` or ``-``.
    """
    version = version or default_version()
    if not _VERSION.match(version):
        raise ConfigError(f"--version {version!r}: use 1-64 letters, digits, '.', '_' or '-'")
    return version


def check_classifiers(candidates: Sequence[str], folds: int) -> tuple[str, ...]:
    """Check ``--classifiers`` and ``--folds`` before the JVM starts.

    Raises
    ------
    ConfigError
        For an unknown or repeated classifier, none, or fewer than 2 folds.
    """
    out = tuple(c.strip() for c in candidates if c.strip())
    bad = [c for c in out if c not in CLASSIFIERS]
    if bad or not out or len(set(out)) != len(out):
        what = f"unknown {bad}" if bad else ("none given" if not out else "a name is repeated")
        raise ConfigError(
            f"--classifiers {','.join(candidates)!r}: {what}; use names from "
            + ", ".join(CLASSIFIERS)
        )
    if folds < 2:
        raise ConfigError(f"--folds {folds}: cross-validation needs at least 2 folds")
    return out


def check_out(path: Path, overwrite: bool) -> Path:
    """Check a model directory to write before training (:func:`save_model` checks again).

    Raises
    ------
    ConfigError
        When ``path`` exists and ``overwrite`` is false.
    """
    if path.exists() and not overwrite:
        raise ConfigError(f"model {str(path)!r} exists: choose another --out or add --overwrite")
    return path


@dataclass(frozen=True)
class Fitted:
    """A fitted classifier and how the cross-validation chose it.

    Attributes
    ----------
    model : PipelineModel
        Assembler, scaler and the chosen classifier, refitted on all the training rows.
    classifier : str
        The chosen classifier's name.
    cv_auc : dict of str to float
        Mean cross-validated area under ROC of every candidate, by name.
    """

    model: PipelineModel
    classifier: str
    cv_auc: dict[str, float]


#: The candidate classifiers of :func:`fit_classifier`, in grid order.
CLASSIFIERS = ("logistic_regression", "random_forest", "gbt")


def fit_classifier(
    train: DataFrame,
    features: Sequence[str],
    label: str,
    folds: int = 3,
    seed: int = 7,
    candidates: Sequence[str] = CLASSIFIERS,
    weight: str | None = None,
    fold_col: str | None = None,
) -> Fitted:
    """Fit VectorAssembler → StandardScaler → the classifier that k-fold cross-validation
    ranks best by area under ROC.

    Parameters
    ----------
    train : DataFrame
        Batch rows with the ``features`` columns (numeric) and ``label`` (0/1).
    features : sequence of str
        Feature columns, in the order they are assembled.
    label : str
    folds : int
        Cross-validation folds (≥ 2).
    seed : int
        Seed of the folds and of the random forest (the same inputs give the same model).
    candidates : sequence of str
        Names from :data:`CLASSIFIERS`.
    weight : str, optional
        A column of instance weights (class balancing), for every candidate.
    fold_col : str, optional
        An integer column 0 … ``folds`` − 1 naming each row's fold (``CrossValidator``'s
        ``foldCol``): folds by day or by client keep correlated rows out of each other's
        validation folds. Default: random folds by ``seed``.

    Returns
    -------
    Fitted

    Raises
    ------
    ValueError
        For an unknown candidate or fewer than 2 folds.

    Notes
    -----
    ``VectorAssembler`` runs with ``handleInvalid="keep"`` (a null feature becomes NaN and is
    scored, not dropped: scoring never loses a row).
    """
    from pyspark.ml import Pipeline
    from pyspark.ml.classification import (
        GBTClassifier,
        LogisticRegression,
        RandomForestClassifier,
    )
    from pyspark.ml.evaluation import BinaryClassificationEvaluator
    from pyspark.ml.feature import StandardScaler, VectorAssembler
    from pyspark.ml.tuning import CrossValidator, ParamGridBuilder

    if folds < 2:
        raise ValueError(f"folds must be at least 2, got {folds}")
    unknown = set(candidates) - set(CLASSIFIERS)
    if unknown:
        raise ValueError(f"unknown classifiers {sorted(unknown)}: use {list(CLASSIFIERS)}")
    assembler = VectorAssembler(
        inputCols=list(features), outputCol="raw_features", handleInvalid="keep"
    )
    scaler = StandardScaler(
        inputCol="raw_features", outputCol="features", withMean=True, withStd=True
    )
    common: dict[str, Any] = {"featuresCol": "features", "labelCol": label}
    if weight:
        common["weightCol"] = weight
    make = {
        "logistic_regression": lambda: LogisticRegression(maxIter=100, regParam=0.0, **common),
        "random_forest": lambda: RandomForestClassifier(
            numTrees=40, maxDepth=6, seed=seed, **common
        ),
        "gbt": lambda: GBTClassifier(maxIter=30, maxDepth=4, seed=seed, **common),
    }
    pipeline = Pipeline(stages=[assembler, scaler, make[candidates[0]]()])
    stage_sets = [[assembler, scaler, make[name]()] for name in candidates]
    grid = ParamGridBuilder().addGrid(pipeline.stages, stage_sets).build()
    evaluator = BinaryClassificationEvaluator(labelCol=label, metricName="areaUnderROC")
    if weight:
        evaluator.setWeightCol(weight)
    cv = CrossValidator(
        estimator=pipeline,
        estimatorParamMaps=grid,
        evaluator=evaluator,
        numFolds=folds,
        seed=seed,
        parallelism=1,
    )
    if fold_col:
        cv.setFoldCol(fold_col)
    fitted = cv.fit(train)
    scores = {name: float(m) for name, m in zip(candidates, fitted.avgMetrics, strict=True)}
    best = max(range(len(candidates)), key=lambda i: fitted.avgMetrics[i])
    return Fitted(model=fitted.bestModel, classifier=candidates[best], cv_auc=scores)


def confusion_counts(label: Column, prediction: Column) -> list[Column]:
    """The aggregates ``tp``, ``fp``, ``tn``, ``fn`` (bigint) of 0/1 labels and predictions:
    counts of rows labelled and predicted 1, labelled 0 and predicted 1, and so on (a null
    label counts in none). Batch or streaming aggregations alike."""
    from pyspark.sql import functions as F

    y, p = label.cast("int"), prediction.cast("int")
    return [
        F.count_if((y == 1) & (p == 1)).alias("tp"),
        F.count_if((y == 0) & (p == 1)).alias("fp"),
        F.count_if((y == 0) & (p == 0)).alias("tn"),
        F.count_if((y == 1) & (p == 0)).alias("fn"),
    ]


def prediction_columns(prediction: str, probability: str, version: str) -> list[Column]:
    """The output columns of a fitted classifier's ``transform``: the prediction as an int
    (0/1) named ``prediction``, P(1) (double) named ``probability``, and ``model_version``
    (string, ``version``)."""
    from pyspark.ml.functions import vector_to_array
    from pyspark.sql import functions as F

    return [
        F.col("prediction").cast("int").alias(prediction),
        vector_to_array(F.col("probability"))[1].alias(probability),
        F.lit(version).alias("model_version"),
    ]


def binary_metrics(
    predictions: DataFrame, label: str, prediction: str = "prediction"
) -> dict[str, float]:
    """Confusion counts, accuracy, precision and recall of 0/1 predictions, in one Spark job.

    Parameters
    ----------
    predictions : DataFrame
        Rows with ``label`` and ``prediction`` (0/1; a null label is left out).

    Returns
    -------
    dict of str to float
        ``rows``, ``tp``, ``fp``, ``tn``, ``fn`` (counts), ``accuracy``, ``precision``,
        ``recall`` (0–1; precision or recall is 0 when its denominator is).
    """
    from pyspark.sql import functions as F

    row = (
        predictions.where(F.col(label).isNotNull())
        .agg(*confusion_counts(F.col(label), F.col(prediction)))
        .first()
    )
    assert row is not None
    tp, fp, tn, fn = (int(row[k]) for k in ("tp", "fp", "tn", "fn"))
    rows = tp + fp + tn + fn
    return {
        "rows": rows,
        "tp": tp,
        "fp": fp,
        "tn": tn,
        "fn": fn,
        "accuracy": (tp + tn) / rows if rows else 0.0,
        "precision": tp / (tp + fp) if tp + fp else 0.0,
        "recall": tp / (tp + fn) if tp + fn else 0.0,
    }
