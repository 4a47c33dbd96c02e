"""``logstream dstream``: the DStream edition (Spark Streaming)."""

from __future__ import annotations

import signal
import threading
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer

from logstream.cli.app import MasterOption, app, err_console
from logstream.errors import ConfigError
from logstream.units import plural

dstream_app = typer.Typer(
    help="The DStream edition (Spark Streaming, deprecated by Spark).\n\nSee docs/dstream.md.",
    no_args_is_help=True,
)
app.add_typer(dstream_app, name="dstream")


#: Options shared by the dstream commands.
SocketOption = Annotated[
    str | None,
    typer.Option(
        "--socket", metavar="HOST:PORT", help="Read lines from a TCP server (a receiver)."
    ),
]
DirOption = Annotated[
    Path | None,
    typer.Option("--dir", help="Read the files moved into DIR after the start."),
]
FormatOption = Annotated[
    str, typer.Option("--format", help="common, combined or a LogFormat string.")
]
StoreOption = Annotated[Path, typer.Option("--store", help="SQLite serving store file.")]
DurationOption = Annotated[
    str | None,
    typer.Option("--duration", help="Stop gracefully after this long; default: Ctrl-C."),
]


def _watch(ssc: Any, address: tuple[str, int] | None) -> Any:
    """With a socket source, report its lost connection once instead of Spark's stack trace
    per restart (:func:`logstream.dstream.receiver.watch_receiver`); None for --dir."""
    if address is None:
        return None
    from logstream.dstream.receiver import watch_receiver

    return watch_receiver(ssc, f"tcp://{address[0]}:{address[1]}", err_console.print)


def _run_until_stopped(ssc: Any, duration_s: float | None, receiver: Any = None) -> None:
    """Start ``ssc`` and stop it gracefully after ``duration_s`` (None: never) or at SIGINT /
    SIGTERM: the data received so far is processed before the context and Spark stop.
    ``receiver`` (:func:`_watch`) is told first, so that the stop is not a lost connection."""
    stop = threading.Event()

    def handle(signum: int, _frame: Any) -> None:
        err_console.print(f"received {signal.Signals(signum).name}: stopping after this batch")
        stop.set()

    previous = {s: signal.signal(s, handle) for s in (signal.SIGINT, signal.SIGTERM)}
    ssc.start()
    try:
        stop.wait(duration_s)
    finally:
        if receiver is not None:
            receiver.stopping = True
        ssc.stop(stopSparkContext=True, stopGraceFully=True)
        for s, h in previous.items():
            signal.signal(s, h)
    err_console.print("stopped")


def receiver_conf(receiver: bool, max_rate: int | None, backpressure: bool) -> dict[str, str]:
    """Spark settings of ``dstream run``'s source (static: set before the context starts).

    With a receiver (``--socket``) the write-ahead log is on: a receiver's blocks live in
    executor memory, and the log (in the checkpoint) lets a recovered batch read the same
    lines again (the guide's "Fault-tolerance Semantics"); without it a restart gives
    re-generated batch times other lines. ``max_rate`` (lines/s) and ``backpressure`` are the
    guide's rate controls ("Setting the Right Batch Interval", "Deploying Applications").

    Examples
    --------
    >>> receiver_conf(True, 500, True)["spark.streaming.receiver.maxRate"]
    '500'
    >>> receiver_conf(False, None, False)
    {}
    """
    conf: dict[str, str] = {}
    if receiver:
        conf["spark.streaming.receiver.writeAheadLog.enable"] = "true"
    if max_rate is not None:
        conf["spark.streaming.receiver.maxRate"] = str(max_rate)
    if backpressure:
        conf["spark.streaming.backpressure.enabled"] = "true"
    return conf


def _source(socket: str | None, directory: Path | None) -> tuple[str, int] | None:
    """Check the one source of a DStream command; the socket's address, or None for --dir."""
    from logstream.dstream import parse_socket

    if (socket is None) == (directory is None):
        raise ConfigError("give exactly one source: --socket HOST:PORT or --dir DIR")
    if directory is not None and not directory.is_dir():
        raise ConfigError(f"--dir {str(directory)!r} is not a directory; create it first")
    return parse_socket(socket) if socket is not None else None


def _make_dirs(*options: tuple[str, Path]) -> None:
    """Create each ``(option, directory)`` before Spark starts; one that cannot be created is
    a ConfigError naming the option, the path and the reason."""
    for option, path in options:
        if option == "--store" and str(path).startswith(("postgresql:", "postgres:")):
            raise ConfigError(
                f"--store {str(path)!r}… is a PostgreSQL URL: the DStream edition writes a "
                "SQLite file only; give a file path (e.g. --store out/dstream/logstream.db), or "
                "use logstream run --store postgresql://… for a PostgreSQL store"
            )
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"{option}: cannot create directory {str(path)!r} ({exc.strerror}); "
                "give a writable path"
            ) from exc


def _lines(ssc: Any, address: tuple[str, int] | None, directory: Path | None) -> Any:
    """The DStream of lines: a socket receiver, or the files moved into ``directory``."""
    if address is not None:
        return ssc.socketTextStream(*address)
    return ssc.textFileStream(str(Path(directory).absolute()))  # type: ignore[arg-type]


@dstream_app.command("wordcount")
def wordcount_command(
    socket: SocketOption = None,
    directory: DirOption = None,
    batch: Annotated[str, typer.Option("--batch", help="Batch interval (1s, 500ms).")] = "1s",
    duration: DurationOption = None,
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
    from logstream.dstream import streaming_context, word_counts
    from logstream.pipeline import interval_seconds
    from logstream.session import get_spark

    address = _source(socket, directory)
    try:
        batch_s = interval_seconds(batch)
        duration_s = interval_seconds(duration) if duration else None
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    spark = get_spark(SparkSettings.build(master=master))
    ssc = streaming_context(spark.sparkContext, batch_s, notice=err_console.print)
    lines = _lines(ssc, address, directory)
    source = f"tcp://{address[0]}:{address[1]}" if address else str(directory)
    counts = word_counts(lines)
    counts.pprint()
    if save is not None:
        counts.saveAsTextFiles(str(Path(save).absolute()))
    receiver = _watch(ssc, address)
    err_console.print(f"counting words of {source} every {batch_s:g} s")
    _run_until_stopped(ssc, duration_s, receiver)


@dstream_app.command("run")
def run_command(
    socket: SocketOption = None,
    directory: DirOption = None,
    log_format: FormatOption = "common",
    batch: Annotated[str, typer.Option("--batch", help="Batch interval.")] = "1s",
    window: Annotated[
        str, typer.Option("--window", help="Trending pages' window (processing time).")
    ] = "5m",
    slide: Annotated[str, typer.Option("--slide", help="Trending pages' slide.")] = "1m",
    top: Annotated[int, typer.Option("--top", min=1, help="Trending pages kept per slide.")] = 10,
    idle_batches: Annotated[
        int,
        typer.Option(
            "--host-idle-batches", min=1, help="Evict a host after this many idle batches."
        ),
    ] = 1800,
    checkpoint: Annotated[
        Path, typer.Option("--checkpoint", help="Checkpoint directory (getOrCreate recovers).")
    ] = Path("out/dstream/checkpoint"),
    store: StoreOption = Path("out/dstream/logstream.db"),
    duration: DurationOption = None,
    listed_hosts: Annotated[
        Path | None,
        typer.Option(
            "--listed-hosts",
            metavar="FILE",
            help="Count each batch's requests from the hosts of FILE (one per line; "
            "a transform() join with a static RDD).",
        ),
    ] = None,
    max_rate: Annotated[
        int | None,
        typer.Option(
            "--max-rate",
            min=1,
            help="Lines/s the socket receiver accepts at most (spark.streaming.receiver.maxRate).",
        ),
    ] = None,
    backpressure: Annotated[
        bool,
        typer.Option(
            "--backpressure",
            help="Let Spark lower the receiver's rate to what the batches can process "
            "(Spark Streaming's backpressure).",
        ),
    ] = False,
    master: MasterOption = None,
) -> None:
    """Web-log analytics on DStreams: status classes per batch, trending pages with
    reduceByKeyAndWindow and its inverse, per-host totals with updateStateByKey, written
    idempotently to the serving store; recovers from its checkpoint (StreamingContext.getOrCreate).

    Example: logstream dstream run --socket localhost:9999 --batch 1s --window 5m --slide 1m
    """
    from logstream.config import SparkSettings
    from logstream.dstream import (
        DEPRECATION_NOTICE,
        DStreamSettings,
        build_weblog_streams,
        progress_listener,
        read_listed_hosts,
        streaming_context,
    )
    from logstream.parsing import compile_format
    from logstream.pipeline import interval_seconds
    from logstream.session import get_spark

    address = _source(socket, directory)
    try:
        settings = DStreamSettings(
            log_format=log_format,
            batch_s=interval_seconds(batch),
            window_s=interval_seconds(window),
            slide_s=interval_seconds(slide),
            top=top,
            host_idle_batches=idle_batches,
            listed_hosts=read_listed_hosts(listed_hosts) if listed_hosts else (),
        )
        duration_s = interval_seconds(duration) if duration else None
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    compile_format(log_format)  # a bad format fails here, before the JVM starts
    if directory is not None and (max_rate is not None or backpressure):
        raise ConfigError(
            "--max-rate and --backpressure limit a receiver: they apply to --socket, not --dir"
        )
    _make_dirs(("--store", store.parent), ("--checkpoint", checkpoint))
    extra = receiver_conf(address is not None, max_rate, backpressure)
    spark = get_spark(SparkSettings.build(master=master, extra=extra))
    sc = spark.sparkContext

    def create() -> Any:
        ssc = streaming_context(sc, settings.batch_s, notice=err_console.print)
        build_weblog_streams(_lines(ssc, address, directory), settings, store)
        ssc.checkpoint(str(checkpoint.absolute()))
        return ssc

    from pyspark.streaming import StreamingContext

    recovering = checkpoint.exists() and any(checkpoint.iterdir())
    if recovering:  # getOrCreate builds the context itself: its deprecation warning is ours too
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore", message="DStream is deprecated", category=FutureWarning
            )
            ssc = StreamingContext.getOrCreate(str(checkpoint.absolute()), create)
        err_console.print(DEPRECATION_NOTICE)
    else:
        ssc = StreamingContext.getOrCreate(str(checkpoint.absolute()), create)
    ssc.addStreamingListener(progress_listener(store))
    receiver = _watch(ssc, address)
    err_console.print(
        ("recovered from " if recovering else "checkpoint in ")
        + f"{checkpoint}; store {store}; batches of {settings.batch_s:g} s"
    )
    _run_until_stopped(ssc, duration_s, receiver)


@dstream_app.command("kmeans")
def kmeans_command(
    socket: SocketOption = None,
    directory: DirOption = None,
    log_format: FormatOption = "common",
    batch: Annotated[str, typer.Option("--batch", help="Batch interval.")] = "10s",
    k: Annotated[int, typer.Option("--k", min=2, help="Clusters.")] = 4,
    half_life: Annotated[
        float,
        typer.Option(
            "--half-life",
            help="Batches after which a batch's weight in the model has halved (decay).",
        ),
    ] = 60.0,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the initial centers.")] = 42,
    store: StoreOption = Path("out/dstream/logstream.db"),
    duration: DurationOption = None,
    master: MasterOption = None,
) -> None:
    """Streaming k-means of client behaviour (mllib StreamingKMeans with decay): per batch,
    each client's requests, bytes per request, error and content-page shares become a vector;
    the clusters' centers and weights after each batch go to the store (dstream_kmeans).

    Example: logstream dstream kmeans --socket localhost:9999 --batch 10s --k 4 --half-life 30
    """
    from logstream.config import SparkSettings
    from logstream.dstream import streaming_context
    from logstream.dstream.kmeans import FEATURES, KMeansSettings, build_kmeans_streams
    from logstream.parsing import compile_format
    from logstream.pipeline import interval_seconds
    from logstream.session import get_spark

    address = _source(socket, directory)
    try:
        settings = KMeansSettings(
            k=k, half_life_batches=half_life, seed=seed, log_format=log_format
        )
        batch_s = interval_seconds(batch)
        duration_s = interval_seconds(duration) if duration else None
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    compile_format(log_format)  # a bad format fails here, before the JVM starts
    _make_dirs(("--store", store.parent))
    spark = get_spark(SparkSettings.build(master=master))
    ssc = streaming_context(spark.sparkContext, batch_s, notice=err_console.print)
    build_kmeans_streams(_lines(ssc, address, directory), settings, store)
    receiver = _watch(ssc, address)
    err_console.print(
        f"{plural(settings.k, 'cluster')} of ({', '.join(FEATURES)}) per client, decay "
        f"{settings.decay:.4f} per {batch_s:g} s batch; centers in {store} (dstream_kmeans)"
    )
    _run_until_stopped(ssc, duration_s, receiver)
