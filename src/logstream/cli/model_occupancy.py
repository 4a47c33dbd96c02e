"""``logstream model train occupancy`` and ``logstream model evaluate occupancy``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from logstream.cli.app import MasterOption, err_console
from logstream.cli.model import (
    ModelOutOption,
    OverwriteOption,
    VersionOption,
    evaluate_app,
    print_metrics,
    train_app,
)
from logstream.config import SparkSettings
from logstream.errors import ConfigError

__all__ = ["evaluate_occupancy", "train_occupancy"]


@train_app.command("occupancy")
def train_occupancy(
    train: Annotated[
        list[Path],
        typer.Option(
            "--train",
            metavar="FILE",
            help="A labelled reading file (the UCI layout, e.g. occupancy_datatraining.txt.gz); "
            "repeat for more.",
        ),
    ],
    out: ModelOutOption,
    features: Annotated[
        str,
        typer.Option(
            "--features",
            help="Comma-separated metrics: temperature, humidity, light, co2, humidity_ratio.",
        ),
    ] = "temperature,light,co2",
    classifiers: Annotated[
        str,
        typer.Option(
            "--classifiers",
            help="Comma-separated candidates of the cross-validation: logistic_regression, "
            "random_forest, gbt.",
        ),
    ] = "logistic_regression,random_forest,gbt",
    folds: Annotated[int, typer.Option("--folds", help="Cross-validation folds (≥ 2).")] = 3,
    folds_by: Annotated[
        str,
        typer.Option(
            "--folds-by",
            help="'day': a reading's fold is its day mod --folds (whole days held out); "
            "'random': random folds by --seed.",
        ),
    ] = "day",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the folds and the forest.")] = 7,
    test: Annotated[
        list[Path] | None,
        typer.Option("--test", help="Labelled files scored after training (repeatable)."),
    ] = None,
    version: VersionOption = None,
    overwrite: OverwriteOption = False,
    master: MasterOption = None,
) -> None:
    """Fit the occupancy classifier (assembler, scaler, the classifier the cross-validation
    ranks best) on labelled readings and save it as a versioned model directory.

    Example: logstream model train occupancy --train datatraining.txt.gz --out models/occupancy
    """
    from logstream.ml import occupancy as occ

    names = occ.check_features(features.split(","))
    from logstream.ml.model import check_classifiers, check_out, check_version, save_model

    candidates = check_classifiers(classifiers.split(","), folds)
    if folds_by not in ("day", "random"):
        raise ConfigError(f"--folds-by {folds_by!r}: use day or random")
    the_version = check_version(version)
    train_paths = occ.check_inputs(train, "--train")
    test_paths = occ.check_inputs(test or [], "--test")
    check_out(out, overwrite)

    from logstream.session import get_spark

    spark = get_spark(SparkSettings.build(master=master))
    model, info = occ.train_occupancy(
        spark,
        train_paths,
        names,
        candidates,
        folds,
        seed,
        "day" if folds_by == "day" else "random",
        test_paths,
        the_version,
    )
    save_model(model, out, info, overwrite)
    print_metrics(
        f"occupancy model {info.version}: {info.classifier} on {', '.join(names)}", info.metrics
    )
    err_console.print(f"model in {out}")


@evaluate_app.command("occupancy")
def evaluate_occupancy(
    model: Annotated[Path, typer.Option("--model", help="An occupancy model directory.")],
    test: Annotated[
        list[Path], typer.Option("--test", help="Labelled reading files (repeatable).")
    ],
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the figures as JSON here.")
    ] = None,
    master: MasterOption = None,
) -> None:
    """Score labelled reading files with a saved occupancy model: accuracy, precision, recall
    and the confusion counts, per file.

    Example: logstream model evaluate occupancy --model models/occupancy --test datatest.txt.gz
    """
    from logstream.ml import occupancy as occ
    from logstream.ml.model import load_model, read_model_info

    info = read_model_info(model, occ.KIND)  # checked before the JVM starts
    info.check_columns(occ.READING_TYPES, "the readings")
    paths = occ.check_inputs(test, "--test")

    from logstream.session import get_spark

    spark = get_spark(SparkSettings.build(master=master))
    pipeline, info = load_model(model, occ.KIND)
    results = occ.evaluate(spark, pipeline, paths, info.version)
    for name, metrics in results.items():
        print_metrics(f"{name} (occupancy model {info.version})", metrics)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        doc = {"model": str(model), "version": info.version, "files": results}
        json_out.write_text(json.dumps(doc, indent=2) + "\n")
