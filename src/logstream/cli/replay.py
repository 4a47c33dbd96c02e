"""``logstream replay``: replay real logs as a live stream (TCP server, chunk directory, a
growing, rotated log file, or a Kafka topic)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from logstream.cli.app import app, err_console
from logstream.errors import ConfigError
from logstream.units import plural

if TYPE_CHECKING:
    from logstream.replay.sinks import LineSink

TcpOption = Annotated[
    str | None,
    typer.Option(
        "--tcp",
        metavar="HOST:PORT",
        help="Serve lines to TCP clients on HOST:PORT (Spark's socket source connects here). "
        "HOST defaults to 127.0.0.1 (loopback only).",
    ),
]
DirOption = Annotated[
    Path | None,
    typer.Option(
        "--dir",
        help="Write rotated chunk files into DIR, each published by an atomic rename "
        "(for Spark's file source).",
    ),
]
ChunkLinesOption = Annotated[
    int, typer.Option("--chunk-lines", min=1, help="With --dir: lines per chunk at most.")
]
ChunkSecondsOption = Annotated[
    str,
    typer.Option(
        "--chunk-seconds",
        metavar="SPAN",
        help="With --dir: publish a chunk after this long (5s, 1m).",
    ),
]
FileOption = Annotated[
    Path | None,
    typer.Option(
        "--file",
        help="Append lines to this growing log file as a web server does, rotated by "
        "--rotate-every (for logstream run --follow).",
    ),
]
RotateEveryOption = Annotated[
    str,
    typer.Option(
        "--rotate-every",
        metavar="DURATION",
        help="With --file: rotate it like logrotate (NAME.1, then NAME.2.gz …) every this "
        "much event time (1h, 3h, 1d).",
    ),
]
KafkaOption = Annotated[
    str | None,
    typer.Option(
        "--kafka",
        metavar="HOST:PORT",
        help="Publish each line as one message to Kafka's --topic (key null, round-robin "
        "over the partitions; for logstream run --kafka).",
    ),
]
TopicOption = Annotated[
    str | None, typer.Option("--topic", metavar="TOPIC", help="With --kafka: the topic.")
]
PartitionsOption = Annotated[
    int,
    typer.Option(
        "--partitions",
        min=1,
        help="With --kafka: partitions of the topic when it is created here.",
    ),
]
WaitOption = Annotated[
    bool,
    typer.Option(
        "--wait/--no-wait",
        help="With --tcp: pause while no client is connected (default), or drop lines.",
    ),
]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")]


def make_sink(
    tcp: str | None,
    directory: Path | None,
    *,
    chunk_lines: int,
    chunk_seconds: str,
    wait: bool,
    file: Path | None = None,
    rotate_every: str = "3h",
    kafka: str | None = None,
    topic: str | None = None,
    partitions: int = 1,
) -> LineSink:
    """Build the TCP, chunk-directory, rotating-file or Kafka sink named by the options (one)."""
    from logstream.replay import (
        ChunkDirSink,
        RotatingFileSink,
        TcpLineServer,
        parse_duration,
        parse_host_port,
    )

    if sum(x is not None for x in (tcp, directory, file, kafka)) != 1:
        raise ConfigError(
            "give exactly one output: --tcp HOST:PORT, --dir DIR, --file PATH or "
            "--kafka HOST:PORT --topic TOPIC"
        )
    if (topic is not None) != (kafka is not None):
        raise ConfigError("--kafka HOST:PORT and --topic TOPIC go together: give both")
    if kafka is not None:
        from logstream.replay.kafka import KafkaLineSink
        from logstream.sinks.spec import sink_spec

        assert topic is not None
        try:
            spec = sink_spec(f"kafka://{kafka}/{topic}")  # checks HOST:PORT and the topic
        except ConfigError:
            raise ConfigError(
                f"--kafka {kafka!r} --topic {topic!r}: give the brokers as HOST:PORT[,HOST:PORT…] "
                "and a topic of letters, digits, '.', '_' and '-' (e.g. --kafka 127.0.0.1:9092 "
                "--topic weblog)"
            ) from None
        return KafkaLineSink(spec.bootstrap, spec.topic, partitions)
    if file is not None:
        if file.is_dir():
            raise ConfigError(f"--file {str(file)!r} is a directory; give the log file's path")
        every = parse_duration(rotate_every, option="--rotate-every")
        return RotatingFileSink(file, rotate_every_s=every)
    if tcp is not None:
        host, port = parse_host_port(tcp)
        return TcpLineServer(host, port, wait_for_client=wait)
    assert directory is not None
    return ChunkDirSink(
        directory,
        chunk_lines=chunk_lines,
        chunk_seconds=parse_duration(chunk_seconds, option="--chunk-seconds"),
    )


def describe_sink(sink: object) -> str:
    """``tcp://HOST:PORT``, the chunk directory or the rotating file, for messages."""
    from logstream.replay import RotatingFileSink, TcpLineServer
    from logstream.replay.kafka import KafkaLineSink

    if isinstance(sink, KafkaLineSink):
        return f"kafka://{sink.bootstrap}/{sink.topic}"
    if isinstance(sink, TcpLineServer):
        return f"tcp://{sink.address[0]}:{sink.address[1]}"
    if isinstance(sink, RotatingFileSink):
        return f"{sink.path} (rotated every {sink.rotate_every_s:g} s of event time)"
    return f"chunks in {getattr(sink, 'directory', '?')}"


FilesArgument = Annotated[
    list[str],
    typer.Argument(
        metavar="PATH",
        help="Log files (plain or .gz), replayed in this order; directories and "
        "quoted globs are expanded in name order.",
    ),
]
SpeedupOption = Annotated[
    float | None,
    typer.Option(
        "--speedup",
        help="Event seconds per wall second: 600 replays ten minutes "
        "of log per second, 1440 a day in a minute. Default 1 (real time).",
    ),
]
RateOption = Annotated[
    float | None,
    typer.Option(
        "--rate",
        metavar="EVENTS_PER_S",
        help="Send at a fixed rate (lines per second) instead of by event time.",
    ),
]
LoopOption = Annotated[
    bool,
    typer.Option(
        "--loop",
        help="Replay again and again, each pass's event times shifted past the previous pass.",
    ),
]
ShiftToNowOption = Annotated[
    bool,
    typer.Option(
        "--shift-to-now",
        help="Rebase event times so the first line is now "
        "(the time text is rewritten in the line's own offset).",
    ),
]
LateFractionOption = Annotated[
    float,
    typer.Option(
        "--late-fraction",
        min=0.0,
        max=1.0,
        help="Fraction of lines to send late, 0–1 (seeded, see --seed).",
    ),
]
LateByOption = Annotated[
    str | None,
    typer.Option(
        "--late-by",
        metavar="DURATION",
        help="How late: the line is sent once the replay's event time "
        "has passed its own by this much (90s, 10m, 1h).",
    ),
]
DeviceFromFileOption = Annotated[
    bool,
    typer.Option(
        "--device-from-file",
        help="Prefix each line with its file's name and a comma: sensor readings replayed "
        "as one device per file (logstream devices run).",
    ),
]
LimitOption = Annotated[
    int | None, typer.Option("--limit", min=1, help="Stop after sending this many lines.")
]
SummaryOption = Annotated[
    Path | None,
    typer.Option(
        "--summary",
        help="Write a JSON summary here at the end: counts, and the "
        "line number and event time of every late line.",
    ),
]


@app.command()
def replay(
    files: FilesArgument,
    tcp: TcpOption = None,
    directory: DirOption = None,
    file: FileOption = None,
    rotate_every: RotateEveryOption = "3h",
    kafka: KafkaOption = None,
    topic: TopicOption = None,
    partitions: PartitionsOption = 1,
    speedup: SpeedupOption = None,
    rate: RateOption = None,
    loop: LoopOption = False,
    shift_to_now: ShiftToNowOption = False,
    late_fraction: LateFractionOption = 0.0,
    late_by: LateByOption = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the late-line draw.")] = 0,
    device_from_file: DeviceFromFileOption = False,
    limit: LimitOption = None,
    summary_path: SummaryOption = None,
    chunk_lines: ChunkLinesOption = 10_000,
    chunk_seconds: ChunkSecondsOption = "5s",
    wait: WaitOption = True,
    quiet: QuietOption = False,
) -> None:
    """Replay log files live, paced by their own event time.

    Example: logstream replay access.log.gz --tcp localhost:9999 --speedup 1440
    """
    from logstream.replay import (
        Replayer,
        ReplayOptions,
        expand_files,
        iter_file_records,
        parse_duration,
    )
    from logstream.replay.progress import ReplayProgress

    inputs = expand_files(files)
    options = ReplayOptions(
        speedup=speedup,
        rate_per_s=rate,
        loop=loop,
        shift_to_now=shift_to_now,
        late_fraction=late_fraction,
        late_by_seconds=parse_duration(late_by, option="--late-by") if late_by else 0.0,
        seed=seed,
        limit_lines=limit,
    )
    if summary_path is not None and not summary_path.parent.is_dir():
        raise ConfigError(
            f"cannot write --summary {str(summary_path)!r}: its directory does not exist"
        )
    sink = make_sink(
        tcp,
        directory,
        chunk_lines=chunk_lines,
        chunk_seconds=chunk_seconds,
        wait=wait,
        file=file,
        rotate_every=rotate_every,
        kafka=kafka,
        topic=topic,
        partitions=partitions,
    )
    pace = (
        f"rate {options.rate_per_s:g} lines/s"
        if options.rate_per_s
        else f"speedup {options.speedup:g}"
    )
    err_console.print(
        f"replaying {len(inputs)} file{'s' if len(inputs) != 1 else ''} to {describe_sink(sink)} "
        f"at {pace}" + (" (waiting for a client)" if tcp and wait else "")
    )
    replayer = Replayer(lambda: iter_file_records(inputs, device_from_file), sink, options)
    progress = None if quiet else ReplayProgress(err_console, "replay")
    replayer.progress = progress
    try:
        if progress is not None:
            with progress:
                result = replayer.run()
        else:
            result = replayer.run()
    finally:
        if summary_path is not None:
            replayer.summary.write_json(summary_path)
    reached = result.event_time_reached
    err_console.print(
        f"sent {plural(result.lines_sent, 'line')} in {result.wall_seconds:.1f} s "
        f"({result.rate_per_s:,.0f} lines/s), event time reached "
        f"{reached.isoformat() if reached else '—'}"
        + (f", {result.late_lines:,} late" if options.late_fraction else "")
    )
