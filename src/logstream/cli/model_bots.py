"""``logstream model train bots`` and ``logstream model evaluate bots``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from logstream.cli.app import FormatOption, MasterOption
from logstream.cli.model import (
    ModelOutOption,
    OverwriteOption,
    VersionOption,
    evaluate_app,
    print_metrics,
    train_app,
)

_ClassifiersOption = Annotated[
    str,
    typer.Option(
        "--classifiers",
        help="Candidates of the cross-validation, comma-separated: logistic_regression, "
        "random_forest, gbt.",
    ),
]


def _window_ms(text: str) -> int:
    from logstream.pipeline.config import interval_seconds, spark_interval

    return int(interval_seconds(spark_interval(text)) * 1000)


@train_app.command("bots")
def train_bots(
    inputs: Annotated[
        list[str],
        typer.Option(
            "--input",
            help="Real Combined logs (files, directories or quoted globs; repeatable): the "
            "agent classes of their user agents are the labels.",
        ),
    ],
    out: ModelOutOption,
    log_format: FormatOption = "auto",
    synthetic_lines: Annotated[
        int,
        typer.Option(
            "--synthetic-lines",
            min=0,
            help="Generated Combined lines (with labelled crawlers) added to the training rows.",
        ),
    ] = 20_000,
    clients_window: Annotated[
        str, typer.Option("--clients-window", help="The client window the features cover.")
    ] = "5 minutes",
    held_out: Annotated[
        float,
        typer.Option(
            "--held-out",
            help="Share of the real clients kept out of training and measured on.",
        ),
    ] = 0.25,
    classifiers: _ClassifiersOption = "logistic_regression,random_forest,gbt",
    folds: Annotated[int, typer.Option("--folds", min=2, help="Cross-validation folds.")] = 3,
    seed: Annotated[int, typer.Option("--seed", help="Seed of folds, split and forest.")] = 7,
    version: VersionOption = None,
    overwrite: OverwriteOption = False,
    master: MasterOption = None,
) -> None:
    """Train the crawler and bot model on per-client window features (request rate, distinct
    pages, error ratio, bytes, static share, inter-arrival time, robots.txt), labelled by
    agent class, and report precision and recall on held-out real clients.

    Example: logstream model train bots --input access.log.gz --out out/models/bots
    """
    from logstream.config import SparkSettings
    from logstream.ml.bots import train_bots as train
    from logstream.ml.model import check_classifiers, check_out, check_version
    from logstream.session import get_spark
    from logstream.sources import expand_inputs

    candidates = check_classifiers(classifiers.split(","), folds)
    window_ms = _window_ms(clients_window)
    version = check_version(version)
    check_out(out, overwrite)  # before minutes of training
    expand_inputs(inputs)  # a missing path stops before the JVM starts
    spark = get_spark(SparkSettings.build(master=master))
    result = train(
        spark,
        inputs,
        out.expanduser().absolute(),
        log_format=log_format,
        synthetic_lines=synthetic_lines,
        clients_ms=window_ms,
        held_out_share=held_out,
        folds=folds,
        seed=seed,
        candidates=candidates,
        version=version,
        overwrite=overwrite,
    )
    info = result.info
    typer.echo(f"bots model {info.version}: {info.classifier} chosen by {folds}-fold CV")
    print_metrics(
        "cross-validated area under ROC:",
        {k.removeprefix("cv_auc_"): v for k, v in info.metrics.items() if k.startswith("cv_auc_")},
    )
    print_metrics("labelled client windows:", dict(result.rows))
    print_metrics("held-out real clients (bot class):", result.held_out)
    typer.echo(f"saved to {out}")


@evaluate_app.command("bots")
def evaluate_bots(
    model: Annotated[Path, typer.Option("--model", help="A bots model directory.")],
    inputs: Annotated[
        list[str], typer.Option("--input", help="Combined logs to score (repeatable).")
    ],
    log_format: FormatOption = "auto",
    clients_window: Annotated[
        str, typer.Option("--clients-window", help="The client window the features cover.")
    ] = "5 minutes",
    rows: Annotated[
        str,
        typer.Option(
            "--rows",
            help="held-out: only the clients training kept out (its split, saved with the "
            "model); all: every labelled window, training rows included.",
        ),
    ] = "held-out",
    master: MasterOption = None,
) -> None:
    """Score the labelled client windows of logs with a saved bot model: precision, recall,
    accuracy and the confusion counts of the bot class, on the held-out split of training by
    default (--rows all: every labelled window)."""
    from logstream.config import SparkSettings
    from logstream.errors import ConfigError
    from logstream.ml.bots import EVALUATION_ROWS, KIND, describe_rows
    from logstream.ml.bots import evaluate_bots as evaluate
    from logstream.ml.model import read_model_info
    from logstream.session import get_spark
    from logstream.sources import expand_inputs

    chosen = rows.strip().lower().replace("-", "_")
    if chosen not in EVALUATION_ROWS:
        raise ConfigError(f"--rows {rows!r}: use held-out or all")
    info = read_model_info(model, KIND)  # before the JVM starts
    if chosen == "held_out" and not info.split:
        raise ConfigError(
            f"bots model {info.version} records no training split (saved by an older "
            "logstream), so its held-out rows are unknown: give --rows all (training rows "
            "included) or retrain the model"
        )
    window_ms = _window_ms(clients_window)
    expand_inputs(inputs)
    spark = get_spark(SparkSettings.build(master=master))
    metrics = evaluate(spark, model, inputs, log_format, window_ms, rows=chosen)
    typer.echo(f"rows scored: {describe_rows(info, chosen)}")
    print_metrics(f"bots model {info.version} ({info.classifier}), bot class:", metrics)
