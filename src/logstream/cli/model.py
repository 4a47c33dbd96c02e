"""``logstream model``: train, evaluate and inspect the models scored on the streams.

The commands are grouped by what they do, then by model kind::

    logstream model train occupancy …     logstream model train bots …
    logstream model evaluate occupancy …  logstream model evaluate bots …
    logstream model show MODEL_DIR

(:mod:`logstream.cli.model_occupancy`, :mod:`logstream.cli.model_bots`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from logstream.cli.app import app

__all__ = [
    "ModelOutOption",
    "OverwriteOption",
    "VersionOption",
    "evaluate_app",
    "model_app",
    "print_metrics",
    "train_app",
]

model_app = typer.Typer(
    help="Models scored on the streams: room occupancy and bots.\n\n"
    "Room occupancy from sensor readings, bots from web logs (docs/ml.md).",
    no_args_is_help=True,
)
train_app = typer.Typer(
    help="Fit a model in batch and save it as a versioned model directory.", no_args_is_help=True
)
evaluate_app = typer.Typer(
    help="Score labelled data with a saved model: accuracy, precision, recall.",
    no_args_is_help=True,
)
model_app.add_typer(train_app, name="train")
model_app.add_typer(evaluate_app, name="evaluate")
app.add_typer(model_app, name="model")

ModelOutOption = Annotated[
    Path,
    typer.Option(
        "--out", help="The model directory to write (MLlib model + logstream-model.json)."
    ),
]
VersionOption = Annotated[
    str | None,
    typer.Option("--version", help="The model's version (default: the UTC time of training)."),
]
OverwriteOption = Annotated[
    bool, typer.Option("--overwrite", help="Replace an existing model directory.")
]


def print_metrics(title: str, metrics: dict[str, float]) -> None:
    """Print figures as ``name value`` lines under ``title`` (whole numbers without decimals)."""
    typer.echo(title)
    for name, value in metrics.items():
        text = str(int(value)) if float(value).is_integer() else f"{value:.4f}"
        typer.echo(f"  {name:<20} {text}")


@model_app.command("show")
def show(model: Annotated[Path, typer.Argument(help="A model directory.")]) -> None:
    """Print a model directory's metadata: kind, version, input schema, classifier, metrics."""
    from logstream.errors import InputPathError
    from logstream.ml.model import META_FILE

    meta = model / META_FILE
    if not meta.is_file():
        raise InputPathError(
            f"model {str(model)!r} has no {META_FILE}: is it a logstream model directory?"
        )
    typer.echo(json.dumps(json.loads(meta.read_text()), indent=2))
