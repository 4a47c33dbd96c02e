"""``logstream generate``: synthetic traffic to a file, a TCP server or a chunk directory."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated

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


@app.command()
def generate(
    log_format: Annotated[
        str, typer.Option("--format", "-f", help="Log format: combined or common.")
    ] = "combined",
    rate: Annotated[
        float, typer.Option("--rate", help="Mean lines per simulated second (daily average).")
    ] = 20.0,
    duration: Annotated[
        str,
        typer.Option(
            "--duration", help="Simulated time to cover (90s, 10m, 1h, 2d); 0 for no limit."
        ),
    ] = "1h",
    lines: Annotated[
        int | None, typer.Option("--lines", min=1, help="Stop after this many lines.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Same seed, same output.")] = 0,
    start: Annotated[
        str,
        typer.Option(
            "--start",
            help="Start of simulated time, ISO 8601 with offset (written in every line), or 'now'.",
        ),
    ] = "2024-07-01T00:00:00+00:00",
    pages: Annotated[int, typer.Option("--pages", min=1, help="Pages of the site.")] = 300,
    zipf: Annotated[
        float, typer.Option("--zipf", help="Zipf exponent of page popularity (rank k ∝ k^-s).")
    ] = 1.0,
    flash_crowd: Annotated[
        list[str] | None,
        typer.Option(
            "--flash-crowd",
            metavar="SPEC",
            help="START,DURATION,MULTIPLIER[,PAGE]: a page suddenly trending: from START after "
            "the start, for DURATION, "
            "the request rate is MULTIPLIER× and the extra requests are for PAGE "
            "(default: the page of popularity rank 25). Repeatable. "
            "Example: 30m,10m,8,/news/launch.html",
        ),
    ] = None,
    crawler_fraction: Annotated[
        float,
        typer.Option(
            "--crawler-fraction",
            min=0.0,
            max=1.0,
            metavar="SHARE",
            help="Share of requests made by crawlers.",
        ),
    ] = 0.12,
    ipv6_fraction: Annotated[
        float,
        typer.Option(
            "--ipv6-fraction", min=0.0, max=1.0, metavar="SHARE", help="Share of IPv6 visitors."
        ),
    ] = 0.2,
    not_found_fraction: Annotated[
        float,
        typer.Option(
            "--not-found-fraction",
            min=0.0,
            max=1.0,
            metavar="SHARE",
            help="Share of 404 answers (broken links), besides scanner bursts.",
        ),
    ] = 0.02,
    server_error_fraction: Annotated[
        float,
        typer.Option(
            "--server-error-fraction", min=0.0, max=1.0, metavar="SHARE", help="Share of 5xx."
        ),
    ] = 0.003,
    scan_fraction: Annotated[
        float,
        typer.Option(
            "--scan-fraction",
            min=0.0,
            max=0.49,
            metavar="SHARE",
            help="Share of lines that are scanner probes in 404 bursts.",
        ),
    ] = 0.01,
    out: Annotated[
        str | None,
        typer.Option(
            "--out",
            "-o",
            help="Write to this file as fast as possible (.gz compresses; - is standard output).",
        ),
    ] = None,
    tcp: TcpOption = None,
    directory: DirOption = None,
    speedup: Annotated[
        float | None,
        typer.Option(
            "--speedup",
            help="With --tcp/--dir: simulated seconds per wall second (default 1: real time).",
        ),
    ] = None,
    chunk_lines: ChunkLinesOption = 10_000,
    chunk_seconds: ChunkSecondsOption = "5s",
    wait: WaitOption = True,
    quiet: QuietOption = False,
) -> None:
    """Generate synthetic web traffic, reproducible by --seed.

    The traffic looks like a real site's.

    Example: logstream generate --rate 50 --duration 2h --seed 7 --out /tmp/site.log
    --flash-crowd 1h,10m,8
    """
    from logstream.generate import FlashCrowd, TrafficConfig, TrafficGenerator
    from logstream.replay import FileSink, Replayer, ReplayOptions, parse_duration
    from logstream.replay.progress import ReplayProgress

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
        return

    paced = make_sink(
        tcp, directory, chunk_lines=chunk_lines, chunk_seconds=chunk_seconds, wait=wait
    )
    err_console.print(
        f"generating to {describe_sink(paced)} at speedup {speedup or 1:g}"
        + (" (waiting for a client)" if tcp and wait else "")
    )
    replayer = Replayer(generator.records, paced, ReplayOptions(speedup=speedup or 1.0))
    if quiet:
        result = replayer.run()
    else:
        with ReplayProgress(err_console, "generate") as progress:
            replayer.progress = progress
            result = replayer.run()
    err_console.print(f"sent {plural(result.lines_sent, 'line')} in {result.wall_seconds:.1f} s")
