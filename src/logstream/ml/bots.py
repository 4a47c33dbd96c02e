"""Crawler and bot detection: per-client window features, labels from agent classes, a
cross-validated classifier, and scoring — the same functions in batch and on the stream.

Features
--------
One row per client (``client_host``) and tumbling client window (``--clients-window``,
default 5 minutes), computed from the panes of the fused aggregation
(:func:`logstream.analytics.panes.fold_panes`, views ``clients`` and ``client_pages``), so
the stream adds no aggregation of its own: the features of a window are final when the
watermark passes its end, like every other window.

=======================  ==========================================================  =======
feature                  definition                                                  unit
=======================  ==========================================================  =======
``request_rate``         requests / window length                                    req/s
``distinct_pages``       distinct ``url_path`` (exact: the client's                  count
                         ``client_pages`` panes)
``error_ratio``          responses ≥ 400 / requests                                  0–1
``bytes_per_request``    bytes sent / requests                                       bytes
``static_share``         static assets (images, CSS, scripts, fonts) / requests      0–1
``mean_interarrival_s``  (last − first request) / (requests − 1); the window length  s
                         for a single request
``robots``               1 when ``/robots.txt`` was fetched in the window, else 0    0/1
=======================  ==========================================================  =======

Labels
------
From the agent classes of the reference data (:mod:`logstream.reference`, the built-in
``crawler-user-agents`` patterns and HTTP tools): a client window is a **bot** (1) when most
of its requests come from ``crawler`` or ``tool`` user agents, **human** (0) when most come
from ``browser`` ones, and unlabelled otherwise (``other`` or no user agent). The model sees
only the features, never the user agent, so it can flag bots that pretend to be browsers.

Model
-----
:func:`logstream.ml.model.fit_classifier` with folds by client (no client in both a training
and a validation fold). Saved as a model directory of kind ``bots``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from logstream.analytics.panes import CLIENT_PAGE_SEP, PaneSpec, fold_panes, pane_start
from logstream.ml.kinds import BOT_FEATURES, KIND
from logstream.ml.model import (
    CLASSIFIERS,
    ModelInfo,
    binary_metrics,
    check_version,
    fit_classifier,
    load_model,
    prediction_columns,
    save_model,
)
from logstream.reference.tables import CRAWLER_CLASS

if TYPE_CHECKING:
    from pyspark.ml import PipelineModel
    from pyspark.sql import SparkSession

__all__ = [
    "BOT_FEATURES",
    "BOT_LABEL",
    "BOT_SCORE_COLUMNS",
    "EVALUATION_ROWS",
    "KIND",
    "BotTraining",
    "bot_labels",
    "bot_pane_spec",
    "client_features",
    "client_fold",
    "describe_rows",
    "enriched_events",
    "evaluate_bots",
    "held_out_clients",
    "labelled_features",
    "score_features",
    "train_bots",
    "training_split",
]

#: The label column: 1 bot, 0 human, null unlabelled.
BOT_LABEL = "is_bot"
#: Agent classes whose requests are a bot's, and a human's.
BOT_CLASSES = (CRAWLER_CLASS, "tool")
HUMAN_CLASSES = ("browser",)
#: The columns of ``bot_scores/`` (:func:`score_features`).
BOT_SCORE_COLUMNS = (
    "window_start",
    "window_end",
    "client_host",
    "requests",
    *BOT_FEATURES,
    "bot_probability",
    "is_bot",
    "model_version",
)


def bot_pane_spec(clients_ms: int = 300_000) -> PaneSpec:
    """The pane views the bot features read: ``clients`` and ``client_pages``."""
    return PaneSpec(clients_ms=clients_ms, views=("clients", "client_pages"))


def client_features(panes: DataFrame) -> DataFrame:
    """The bot features of every client window in ``panes`` (see the module docstring).

    Parameters
    ----------
    panes : DataFrame
        :data:`~logstream.analytics.panes.PANE_SCHEMA` rows (other views are ignored): the
        ``clients`` panes and the ``client_pages`` panes of the same windows (one per client
        and path; a client without them gets ``distinct_pages`` 0).

    Returns
    -------
    DataFrame
        ``client_host`` (string), ``start_ms``, ``end_ms`` (bigint, epoch ms),
        ``window_start``, ``window_end`` (timestamp), ``requests``, ``bytes`` (bigint), then
        the :data:`BOT_FEATURES` (double).
    """
    clients = panes.where(F.col("view") == "clients").select(
        F.col("key").alias("client_host"),
        "start_ms",
        "end_ms",
        "requests",
        "bytes",
        "errors",
        "static_requests",
        "robots_requests",
        "first_ms",
        "last_ms",
    )
    pages = (
        panes.where(F.col("view") == "client_pages")
        .groupBy(F.substring_index("key", CLIENT_PAGE_SEP, 1).alias("client_host"), "start_ms")
        .agg(F.count("*").alias("pages"))
    )
    n = F.col("requests").cast("double")
    window_s = (F.col("end_ms") - F.col("start_ms")) / 1000.0
    return clients.join(pages, ["client_host", "start_ms"], "left").select(
        "client_host",
        "start_ms",
        "end_ms",
        F.timestamp_millis("start_ms").alias("window_start"),
        F.timestamp_millis("end_ms").alias("window_end"),
        "requests",
        "bytes",
        (n / window_s).alias("request_rate"),
        F.coalesce(F.col("pages"), F.lit(0)).cast("double").alias("distinct_pages"),
        (F.col("errors") / n).alias("error_ratio"),
        (F.col("bytes") / n).alias("bytes_per_request"),
        (F.col("static_requests") / n).alias("static_share"),
        F.when(n > 1, (F.col("last_ms") - F.col("first_ms")) / 1000.0 / (n - 1))
        .otherwise(window_s)
        .alias("mean_interarrival_s"),
        F.when(F.col("robots_requests") > 0, 1.0).otherwise(0.0).alias("robots"),
    )


def bot_labels(events: DataFrame, clients_ms: int = 300_000) -> DataFrame:
    """The label of every client window from the agent classes of its requests.

    Parameters
    ----------
    events : DataFrame
        Events with ``event_time``, ``client_host`` and ``agent_class``
        (:meth:`logstream.reference.Enricher.enrich`).
    clients_ms : int
        The client window, ms.

    Returns
    -------
    DataFrame
        ``client_host``, ``start_ms`` (bigint), ``is_bot`` (int: 1 when bot requests are the
        majority, 0 when browser requests are, null otherwise).
    """
    cls = F.col("agent_class")
    counts = events.groupBy(
        "client_host", pane_start(F.unix_millis("event_time"), clients_ms).alias("start_ms")
    ).agg(
        F.count_if(cls.isin(*BOT_CLASSES)).alias("bot"),
        F.count_if(cls.isin(*HUMAN_CLASSES)).alias("human"),
        F.count("*").alias("n"),
    )
    label = (
        F.when(F.col("bot") * 2 > F.col("n"), F.lit(1))
        .when(F.col("human") * 2 > F.col("n"), F.lit(0))
        .otherwise(F.lit(None))
    )
    return counts.select("client_host", "start_ms", label.cast("int").alias(BOT_LABEL))


def labelled_features(events: DataFrame, clients_ms: int = 300_000) -> DataFrame:
    """Features and labels of every client window of a batch of enriched events: the
    training and evaluation rows.

    Parameters
    ----------
    events : DataFrame
        Batch events with ``event_time``, ``client_host``, ``url_path``, ``status``,
        ``bytes_sent`` and ``agent_class``.

    Returns
    -------
    DataFrame
        :func:`client_features`' columns and ``is_bot`` (int, null when unlabelled).
    """
    panes = fold_panes(None, events, bot_pane_spec(clients_ms))
    return client_features(panes).join(
        bot_labels(events, clients_ms), ["client_host", "start_ms"], "left"
    )


def score_features(
    model: PipelineModel, features: DataFrame, version: str, extra: Sequence[str] = ()
) -> DataFrame:
    """Score client windows with a bot model: ``model.transform`` and the output columns.

    Parameters
    ----------
    model : PipelineModel
        A model of kind ``bots`` (:func:`logstream.ml.model.load_model`).
    features : DataFrame
        :func:`client_features` rows (batch or inside ``foreachBatch``).
    version : str
        The model's version, written with every score.
    extra : sequence of str
        More columns of ``features`` to keep (a label when evaluating; not ``is_bot``, the
        prediction's name).

    Returns
    -------
    DataFrame
        :data:`BOT_SCORE_COLUMNS`: ``is_bot`` (int 0/1, the prediction), ``bot_probability``
        (double, P(bot)), ``model_version`` (string), then ``extra``.
    """
    return model.transform(features).select(
        "window_start",
        "window_end",
        "client_host",
        "requests",
        *BOT_FEATURES,
        *prediction_columns(BOT_LABEL, "bot_probability", version),
        *extra,
    )


def enriched_events(
    spark: SparkSession, paths: Sequence[str], log_format: str = "auto"
) -> DataFrame:
    """Parse log files in batch and add their agent classes (the built-in agents table).

    Returns
    -------
    DataFrame
        The event schema (:mod:`logstream.schema`) and ``agent_class``.

    Raises
    ------
    InputPathError
        When a path matches no file.
    LogFormatError
        When the format cannot be compiled or detected.
    """
    from logstream.parsing import events, parse, resolve_format
    from logstream.reference import Enricher, ReferenceTables
    from logstream.sources import read_lines, sample_lines

    lines = read_lines(spark, paths)
    fmt = resolve_format(log_format, sample_lines(lines) if log_format == "auto" else None)
    agents = ReferenceTables().current["agents"]
    return Enricher(spark).enrich(events(parse(lines, fmt)), {"agents": agents})


def client_fold(folds: int, seed: int) -> Column:
    """A fold number 0 … ``folds`` − 1 by a hash of ``client_host``: a client's windows stay
    in one fold."""
    return F.pmod(F.xxhash64(F.col("client_host"), F.lit(seed)), F.lit(folds)).cast("int")


@dataclass(frozen=True)
class BotTraining:
    """What :func:`train_bots` fitted and measured.

    Attributes
    ----------
    info : ModelInfo
        The metadata saved with the model (its ``metrics`` hold the figures below).
    held_out : dict of str to float
        :func:`~logstream.ml.model.binary_metrics` on the held-out clients of the real logs.
    rows : dict of str to int
        Labelled client windows: ``real_train``, ``synthetic_train``, ``held_out``.
    """

    info: ModelInfo
    held_out: dict[str, float]
    rows: dict[str, int]


def train_bots(
    spark: SparkSession,
    inputs: Sequence[str],
    out: Path,
    log_format: str = "auto",
    synthetic_lines: int = 20_000,
    clients_ms: int = 300_000,
    held_out_share: float = 0.25,
    folds: int = 3,
    seed: int = 7,
    candidates: Sequence[str] = CLASSIFIERS,
    version: str | None = None,
    overwrite: bool = False,
) -> BotTraining:
    """Train a bot model on real logs plus the generator's labelled crawlers, measure it on
    held-out real clients, and save it.

    Parameters
    ----------
    inputs : sequence of str
        Real log files (Combined: the labels need user agents).
    out : Path
        The model directory written.
    synthetic_lines : int
        Lines of generated Combined traffic added to the training rows (its crawlers and
        tools come from published user agents and address blocks; 0: none).
    held_out_share : float
        Share of the real clients (by a hash of ``client_host``) kept out of training and
        measured on (0 < share < 1).

    Returns
    -------
    BotTraining

    Raises
    ------
    ConfigError
        When the real logs have no labelled bot or human window (no user agents), or a
        value is out of range.
    """
    import tempfile

    import pyspark

    from logstream.errors import ConfigError
    from logstream.generate import TrafficConfig, generate_lines

    if not 0 < held_out_share < 1:
        raise ConfigError(f"held-out share {held_out_share}: use a number between 0 and 1")
    version = check_version(version)  # before the training
    # the events feed both the panes and the labels: parsed and enriched once
    events = enriched_events(spark, inputs, log_format).persist()
    real = labelled_features(events, clients_ms).where(F.col(BOT_LABEL).isNotNull())
    # the held-out clients by hash, so that no client is on both sides; the split is saved
    # with the model, so that `model evaluate bots` scores the same held-out rows
    split = training_split(held_out_share, seed)
    real = real.withColumn("_held", held_out_clients(split)).cache()
    cached = [real]
    train = real.where(~F.col("_held"))
    test = real.where(F.col("_held"))
    counts = {"real_train": train.count(), "held_out": test.count(), "synthetic_train": 0}
    events.unpersist()  # real is cached
    labels = {r[0] for r in train.select(BOT_LABEL).distinct().collect()}
    if labels != {0, 1}:
        raise ConfigError(
            f"the logs {list(inputs)} have no labelled {'bot' if 1 not in labels else 'human'} "
            "client windows: bot labels need user agents (a Combined log)"
        )
    with tempfile.TemporaryDirectory(prefix="logstream-bots-") as tmp:
        if synthetic_lines:
            path = Path(tmp) / "synthetic.log"
            config = TrafficConfig(max_lines=synthetic_lines, duration_s=None, seed=seed)
            with path.open("w") as fh:
                fh.writelines(line + "\n" for line in generate_lines(config))
            generated = enriched_events(spark, [str(path)], "combined").persist()
            synthetic = labelled_features(generated, clients_ms).where(F.col(BOT_LABEL).isNotNull())
            synthetic = synthetic.withColumn("_held", F.lit(False)).cache()
            cached.append(synthetic)
            counts["synthetic_train"] = synthetic.count()
            generated.unpersist()
            train = train.unionByName(synthetic)
        rows = train.withColumn("_fold", client_fold(folds, seed))
        fitted = fit_classifier(
            rows, list(BOT_FEATURES), BOT_LABEL, folds, seed, candidates, fold_col="_fold"
        )
        held_out = binary_metrics(fitted.model.transform(test), BOT_LABEL)
    metrics: dict[str, float] = {f"cv_auc_{k}": v for k, v in fitted.cv_auc.items()}
    metrics |= {f"held_out_{k}": float(v) for k, v in held_out.items()}
    info = ModelInfo(
        kind=KIND,
        version=version,
        features=dict(BOT_FEATURES),
        label=BOT_LABEL,
        classifier=fitted.classifier,
        metrics=metrics,
        trained_on=[*inputs, *([f"synthetic:{synthetic_lines}"] if synthetic_lines else [])],
        split=split,
        spark_version=pyspark.__version__,
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    save_model(fitted.model, out, info, overwrite=overwrite)
    for frame in cached:
        frame.unpersist()
    return BotTraining(info=info, held_out=held_out, rows=counts)


#: The rows ``evaluate_bots`` scores: the held-out split of training, or every labelled row.
EVALUATION_ROWS = ("held_out", "all")


def training_split(held_out_share: float, seed: int) -> dict[str, Any]:
    """The held-out split of :func:`train_bots`, as saved in the model's ``split``: the
    clients whose ``xxhash64(client_host, seed + 1) mod 1000`` is below
    ``held_out_share × 1000``."""
    buckets = 1000
    return {
        "by": "client_host",
        "hash_seed": seed + 1,
        "buckets": buckets,
        "held_out_buckets": int(held_out_share * buckets),
        "held_out_share": held_out_share,
        "seed": seed,
    }


def held_out_clients(split: Mapping[str, Any]) -> Column:
    """True for a row of a held-out client of ``split`` (:func:`training_split`)."""
    hashed = F.xxhash64(F.col(split["by"]), F.lit(int(split["hash_seed"])))
    return F.pmod(hashed, F.lit(int(split["buckets"]))) < int(split["held_out_buckets"])


def describe_rows(info: ModelInfo, rows: str) -> str:
    """What :func:`evaluate_bots` scores with ``rows``, in words (the CLI prints it)."""
    if rows == "all":
        return "all labelled client windows (the training rows included)"
    split = info.split
    return (
        f"the held-out split: the {split['held_out_share']:.0%} of clients (by a hash of "
        f"{split['by']}, seed {split['seed']}) that training kept out"
    )


def evaluate_bots(
    spark: SparkSession,
    model_dir: Path,
    inputs: Sequence[str],
    log_format: str = "auto",
    clients_ms: int = 300_000,
    rows: str = "held_out",
) -> dict[str, float]:
    """Score the labelled client windows of ``inputs`` with a saved bot model.

    Parameters
    ----------
    rows : str
        ``held_out`` (default): only the windows of the clients the training kept out, by the
        split saved with the model (:func:`training_split`): on the training logs these are
        the rows the model never saw, and the figures equal the model's ``held_out_*``
        metrics. ``all``: every labelled window, training rows included (optimistic on the
        training logs).

    Returns
    -------
    dict of str to float
        :func:`~logstream.ml.model.binary_metrics` (precision and recall of the bot class).

    Raises
    ------
    InputPathError, ConfigError
        As :func:`~logstream.ml.model.load_model`; a ConfigError too for ``held_out`` with a
        model that records no split (trained by an older logstream).
    """
    from logstream.errors import ConfigError

    if rows not in EVALUATION_ROWS:
        raise ConfigError(f"rows {rows!r}: use one of {', '.join(EVALUATION_ROWS)}")
    model, info = load_model(model_dir, KIND)
    if rows == "held_out" and not info.split:
        raise ConfigError(
            f"bots model {info.version} records no training split (it was saved by an older "
            "logstream), so its held-out rows are unknown: evaluate all rows with --rows all "
            "(training rows included), or retrain the model"
        )
    events = enriched_events(spark, inputs, log_format).persist()  # read by panes and labels
    try:
        frame = labelled_features(events, clients_ms).withColumnRenamed(BOT_LABEL, "label")
        if rows == "held_out":
            frame = frame.where(held_out_clients(info.split))
        scored = score_features(model, frame, info.version, extra=["label"])
        return binary_metrics(scored, "label", prediction=BOT_LABEL)
    finally:
        events.unpersist()
