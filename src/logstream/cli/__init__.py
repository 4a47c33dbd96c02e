"""The ``logstream`` command line: one module per command, all registered on one Typer app."""

from __future__ import annotations

import sys

import typer
from rich.markup import escape
from typer.exceptions import TyperException

from logstream.cli import batch as _batch  # noqa: F401  (registers the command)
from logstream.cli import connect as _connect  # noqa: F401
from logstream.cli import dashboard as _dashboard  # noqa: F401
from logstream.cli import data as _data  # noqa: F401
from logstream.cli import devices as _devices  # noqa: F401
from logstream.cli import dstream as _dstream  # noqa: F401
from logstream.cli import generate as _generate  # noqa: F401
from logstream.cli import model as _model  # noqa: F401
from logstream.cli import model_bots as _model_bots  # noqa: F401
from logstream.cli import model_occupancy as _model_occupancy  # noqa: F401
from logstream.cli import replay as _replay  # noqa: F401
from logstream.cli import rules as _rules  # noqa: F401
from logstream.cli import run as _run  # noqa: F401
from logstream.cli import sql as _sql  # noqa: F401
from logstream.cli.app import app, err_console
from logstream.errors import LogstreamError

__all__ = ["app", "main"]


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit status.

    A :class:`~logstream.errors.LogstreamError` prints its message without a traceback and
    exits with its ``exit_status``: 2 for a bad option, path or format, 1 for a fault that
    stopped a run (:class:`~logstream.errors.RunFault`); usage errors exit 2 as click reports
    them.
    """
    try:
        result = app(args=argv, standalone_mode=False)
    except LogstreamError as exc:
        # the message as written (a path or a Spark text may hold "[…]", rich's markup)
        err_console.print(f"[bold red]error:[/bold red] {escape(str(exc))}", highlight=False)
        return exc.exit_status
    except typer.Exit as exc:
        return exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        err_console.print("aborted")
        return 130
    except TyperException as exc:  # usage errors: typer's vendored click prints them
        show = getattr(exc, "show", None)
        if show is not None:
            show()
        else:  # pragma: no cover
            err_console.print(exc.format_message())
        return exc.exit_code
    # typer returns (rather than raises) the status of an interrupted command: 130 for Ctrl-C
    return result if isinstance(result, int) else 0


def entry_point() -> None:  # pragma: no cover - console script
    """Console-script entry: ``sys.exit(main())``."""
    sys.exit(main())
