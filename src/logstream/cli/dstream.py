"""``logstream dstream``: the DStream edition (Spark Streaming)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from logstream.cli.app import MasterOption, app, err_console
from logstream.errors import ConfigError

dstream_app = typer.Typer(
    help="The DStream edition (Spark Streaming, deprecated by Spark: see docs/dstream.md).",
    no_args_is_help=True,
)
app.add_typer(dstream_app, name="dstream")


@dstream_app.command("wordcount")
def wordcount_command(
    socket: Annotated[
        str | None,
        typer.Option(
            "--socket", metavar="HOST:PORT", help="Read lines from a TCP server (a receiver)."
        ),
    ] = None,
    directory: Annotated[
        Path | None,
        typer.Option("--dir", help="Read the files moved into DIR after the start."),
    ] = None,
    batch: Annotated[str, typer.Option("--batch", help="Batch interval (1s, 500ms).")] = "1s",
    duration: Annotated[
        str | None,
        typer.Option("--duration", help="Stop gracefully after this long; default: Ctrl-C."),
    ] = None,
    save: Annotated[
        str | None,
        typer.Option(
            "--save",
            metavar="PREFIX",
            help="Also save each batch's counts as text files PREFIX-<batch time ms>/ "
            "(saveAsTextFiles).",
        ),
    ] = None,
    master: MasterOption = None,
) -> None:
    """Count the words of each batch and print them (the Spark Streaming guide's quick
    example). One source: --socket or --dir.

    Example: logstream dstream wordcount --socket localhost:9999
    """
    from logstream.config import SparkSettings
    from logstream.dstream import parse_socket, streaming_context, word_counts
    from logstream.pipeline import interval_seconds
    from logstream.session import get_spark

    if (socket is None) == (directory is None):
        raise ConfigError("give exactly one source: --socket HOST:PORT or --dir DIR")
    if directory is not None and not directory.is_dir():
        raise ConfigError(f"--dir {str(directory)!r} is not a directory; create it first")
    try:
        batch_s = interval_seconds(batch)
        duration_s = interval_seconds(duration) if duration else None
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    address = parse_socket(socket) if socket is not None else None
    spark = get_spark(SparkSettings.build(master=master))
    ssc = streaming_context(spark.sparkContext, batch_s, notice=err_console.print)
    if address is not None:
        lines = ssc.socketTextStream(*address)
        source = f"tcp://{address[0]}:{address[1]}"
    else:
        lines = ssc.textFileStream(str(Path(directory).absolute()))  # type: ignore[arg-type]
        source = str(directory)
    counts = word_counts(lines)
    counts.pprint()
    if save is not None:
        counts.saveAsTextFiles(str(Path(save).absolute()))
    stop = threading.Event()

    def handle(signum: int, _frame: Any) -> None:
        err_console.print(f"received {signal.Signals(signum).name}: stopping after this batch")
        stop.set()

    previous = {s: signal.signal(s, handle) for s in (signal.SIGINT, signal.SIGTERM)}
    err_console.print(f"counting words of {source} every {batch_s:g} s")
    ssc.start()
    try:
        stop.wait(duration_s)
    finally:
        # gracefully: the data received so far is processed before the context stops
        ssc.stop(stopSparkContext=True, stopGraceFully=True)
        for s, h in previous.items():
            signal.signal(s, h)
    err_console.print("stopped")
