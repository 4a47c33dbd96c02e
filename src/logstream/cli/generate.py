"""``logstream generate``: synthetic traffic to a file, a TCP server or a chunk directory."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from logstream.cli.app import app, err_console
from logstream.cli.replay import (
    ChunkLinesOption,
    ChunkSecondsOption,
    DirOption,
    QuietOption,
    TcpOption,
    WaitOption,
    describe_sink,
    make_sink,
)
from logstream.errors import ConfigError
from logstream.units import plural

if TYPE_CHECKING:
    from logstream.generate import TrafficGenerator
    from logstream.replay.sinks import LineSink


def parse_start(text: str) -> datetime:
    """Read ``--start``: ISO 8601 (``2024-07-01T00:00:00-04:00``; no offset means UTC) or ``now``.

    Raises
    ------
    ConfigError
        When ``text`` is not an ISO 8601 date-time.
    """
    if text.strip().lower() == "now":
        return datetime.now(UTC).replace(microsecond=0)
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(
            f"--start {text!r} is not an ISO 8601 date-time such as 2024-07-01T00:00:00+00:00"
        ) from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


RateOption = Annotated[
    float, typer.Option("--rate", help="Mean lines per simulated second (daily average).")
]
DurationOption = Annotated[
    str,
    typer.Option(
        "--duration",
        metavar="SPAN",
        help="Simulated time to cover (90s, 10m, 1h, 2d); 0 for no limit.",
    ),
]
LinesOption = Annotated[
    int | None, typer.Option("--lines", min=1, help="Stop after this many lines.")
]
StartOption = Annotated[
    str,
    typer.Option(
        "--start",
        metavar="TIME",
        show_default=False,
        help="Start of simulated time: ISO 8601 with an offset (written in every line), or "
        "'now'. Default: 2024-07-01 at 00:00 UTC.",
    ),
]
ZipfOption = Annotated[
    float, typer.Option("--zipf", help="Zipf exponent of page popularity (rank k ∝ k^-s).")
]
FlashCrowdOption = Annotated[
    list[str] | None,
    typer.Option(
        "--flash-crowd",
        metavar="SPEC",
        help="A page suddenly trending. SPEC is START, DURATION, MULTIPLIER and an optional "
        "PAGE, comma-separated: from START after the start, for DURATION, the request rate "
        "is MULTIPLIER× and the extra requests are for PAGE (default: the page of popularity "
        "rank 25). Repeatable. Example: 30m,10m,8",
    ),
]


def _share(flag: str, help: str, most: float = 1.0) -> Any:
    """A ``--…-fraction`` option: a share from 0 to ``most`` (its help says so)."""
    return typer.Option(flag, min=0.0, max=most, metavar="SHARE", help=f"{help} (0–{most:g})")


CrawlerOption = Annotated[
    float, _share("--crawler-fraction", "Share of requests made by crawlers.")
]
Ipv6Option = Annotated[float, _share("--ipv6-fraction", "Share of IPv6 visitors.")]
NotFoundOption = Annotated[
    float,
    _share("--not-found-fraction", "Share of 404 answers (broken links), besides scanner bursts."),
]
ServerErrorOption = Annotated[float, _share("--server-error-fraction", "Share of 5xx.")]
ScanOption = Annotated[
    float,
    _share("--scan-fraction", "Share of lines that are scanner probes in 404 bursts.", 0.49),
]
OutOption = Annotated[
    str | None,
    typer.Option(
        "--out",
        "-o",
        metavar="FILE",
        help="Write to this file as fast as possible (.gz compresses; - is standard output).",
    ),
]
SpeedupOption = Annotated[
    float | None,
    typer.Option(
        "--speedup",
        metavar="X",
        help="With --tcp/--dir: simulated seconds per wall second (default 1: real time).",
    ),
]


@app.command()
def generate(
    log_format: Annotated[
        str, typer.Option("--format", "-f", help="Log format: combined or common.")
    ] = "combined",
    rate: RateOption = 20.0,
    duration: DurationOption = "1h",
    lines: LinesOption = None,
    seed: Annotated[int, typer.Option("--seed", help="Same seed, same output.")] = 0,
    start: StartOption = "2024-07-01T00:00:00+00:00",
    pages: Annotated[int, typer.Option("--pages", min=1, help="Pages of the site.")] = 300,
    zipf: ZipfOption = 1.0,
    flash_crowd: FlashCrowdOption = None,
    crawler_fraction: CrawlerOption = 0.12,
    ipv6_fraction: Ipv6Option = 0.2,
    not_found_fraction: NotFoundOption = 0.02,
    server_error_fraction: ServerErrorOption = 0.003,
    scan_fraction: ScanOption = 0.01,
    out: OutOption = None,
    tcp: TcpOption = None,
    directory: DirOption = None,
    speedup: SpeedupOption = None,
    chunk_lines: ChunkLinesOption = 10_000,
    chunk_seconds: ChunkSecondsOption = "5s",
    wait: WaitOption = True,
    quiet: QuietOption = False,
) -> None:
    """Generate synthetic web traffic, reproducible by --seed.

    The traffic looks like a real site's.

    Example: logstream generate --rate 50 --duration 2h --seed 7 --flash-crowd 1h,10m,8
    """
    from logstream.generate import FlashCrowd, TrafficConfig, TrafficGenerator
    from logstream.replay import parse_duration

    outputs = [o for o in (out, tcp, directory) if o is not None]
    if len(outputs) != 1:
        raise ConfigError("give exactly one output: --out FILE, --tcp HOST:PORT or --dir DIR")
    if speedup is not None and out is not None:
        raise ConfigError("--speedup paces --tcp and --dir; --out is written as fast as possible")
    config = TrafficConfig(
        rate_per_s=rate,
        duration_s=parse_duration(duration, option="--duration") or None,
        max_lines=lines,
        seed=seed,
        start=parse_start(start),
        log_format=log_format.strip().lower(),
        n_pages=pages,
        zipf_exponent=zipf,
        crawler_fraction=crawler_fraction,
        ipv6_fraction=ipv6_fraction,
        not_found_fraction=not_found_fraction,
        server_error_fraction=server_error_fraction,
        scan_fraction=scan_fraction,
        flash_crowds=tuple(FlashCrowd.parse(spec) for spec in flash_crowd or ()),
    )
    generator = TrafficGenerator(config)
    for crowd, page in zip(config.flash_crowds, generator.flash_pages, strict=True):
        err_console.print(
            f"flash crowd: {page} ×{crowd.multiplier:g} from +{crowd.start_offset_s:g} s "
            f"for {crowd.duration_s:g} s"
        )
    if out is not None:
        _write_file(generator, out, quiet)
        return
    paced = make_sink(
        tcp, directory, chunk_lines=chunk_lines, chunk_seconds=chunk_seconds, wait=wait
    )
    err_console.print(
        f"generating to {describe_sink(paced)} at speedup {speedup or 1:g}"
        + (" (waiting for a client)" if tcp and wait else "")
    )
    _send_paced(generator, paced, speedup or 1.0, quiet)


def _write_file(generator: TrafficGenerator, out: str, quiet: bool) -> None:
    """Write every line of ``generator`` to ``out`` as fast as possible (``-``: standard
    output), then say how many and how fast unless ``quiet``."""
    from logstream.replay import FileSink

    sink = FileSink(out)
    started = time.perf_counter()
    count = 0
    try:
        for text in generator.lines():
            sink.write(text)
            count += 1
    finally:
        sink.close()
    elapsed = time.perf_counter() - started
    if not quiet and out != "-":
        err_console.print(
            f"wrote {plural(count, 'line')} to {out} in {elapsed:.2f} s "
            f"({count / elapsed if elapsed else 0:,.0f} lines/s)"
        )


def _send_paced(generator: TrafficGenerator, sink: LineSink, speedup: float, quiet: bool) -> None:
    """Send ``generator``'s records to ``sink`` at ``speedup`` simulated seconds per wall
    second, with the progress display unless ``quiet``."""
    from logstream.replay import Replayer, ReplayOptions
    from logstream.replay.progress import ReplayProgress

    replayer = Replayer(generator.records, sink, ReplayOptions(speedup=speedup))
    if quiet:
        result = replayer.run()
    else:
        with ReplayProgress(err_console, "generate") as progress:
            replayer.progress = progress
            result = replayer.run()
    err_console.print(f"sent {plural(result.lines_sent, 'line')} in {result.wall_seconds:.1f} s")
