"""``logstream batch``: the batch report."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer

from logstream.cli.app import (
    ConfOption,
    FormatOption,
    MasterOption,
    ReferenceOption,
    RemoteOption,
    app,
    spark_conf,
)
from logstream.cli.filter_options import (
    FilterOption,
    GrepOption,
    SinceOption,
    UntilOption,
    VhostFromPathOption,
    build_filter,
    check_vhost_pattern,
)
from logstream.config import SparkSettings, remote_default, short_input, validate_time_zone
from logstream.errors import ConfigError

PathsArgument = Annotated[
    list[str],
    typer.Argument(metavar="PATH", help="Log files (plain or .gz), directories or quoted globs."),
]
TopOption = Annotated[int, typer.Option("--top", "-n", min=1, help="Rows in each top-N table.")]
JsonOption = Annotated[
    Path | None,
    typer.Option("--json", metavar="FILE", help="Also write the report as JSON to this file."),
]
HtmlOption = Annotated[
    Path | None,
    typer.Option(
        "--html", metavar="FILE", help="Also write a self-contained HTML report (works offline)."
    ),
]
QuarantineOption = Annotated[
    Path | None,
    typer.Option(
        "--quarantine",
        metavar="DIR",
        help="Directory for unparseable lines (JSON Lines: raw_line, source_file, reason); "
        "overwritten. Default: not written, only counted.",
    ),
]
TimeZoneOption = Annotated[
    str | None,
    typer.Option(
        "--time-zone",
        metavar="ZONE",
        help="IANA zone for calendar days and hours in the report. Default: the log's own "
        "offset (each line's date as written; hours in its most common offset), as GoAccess.",
        show_default=False,
    ),
]
DropDuplicatesOption = Annotated[
    bool,
    typer.Option(
        "--drop-duplicates",
        help="Count identical lines once, as 'logstream run' does (a shipper's retries); "
        "the report says how many were dropped. Default: every line counts.",
    ),
]
StrictOption = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="Stop with an error on a corrupt or truncated input file. Default: quarantine "
        "it as corrupt_file and count its readable lines.",
    ),
]
MaxLineOption = Annotated[
    int,
    typer.Option(
        "--max-line-bytes",
        metavar="BYTES",
        min=1024,
        max=16 * 1024 * 1024,
        help="A longer line is quarantined as line_too_long (its first 1,024 characters "
        "kept), before the format reads it.",
    ),
]
NoPanelOption = Annotated[
    list[str] | None,
    typer.Option(
        "--no-panel",
        metavar="PANEL",
        help="Leave out one of GoAccess's panels (repeatable): visitors, requests, "
        "static_requests, not_found, hosts, os, browsers, virtual_hosts, referrers, "
        "referring_sites, remote_user, geolocation. Default: every panel.",
        show_default=False,
    ),
]
StaticExtOption = Annotated[
    list[str] | None,
    typer.Option(
        "--static-ext",
        metavar="EXT",
        help="Count this extension as a static file too (repeatable, e.g. .webp), besides "
        "GoAccess's list (.css, .js, .png, … see docs/report.md).",
        show_default=False,
    ),
]
SiteHostOption = Annotated[
    str | None,
    typer.Option(
        "--site-host",
        metavar="HOST",
        help="Your own site's host name (www.example.com): its referrals leave the referrer "
        "panels (GoAccess's --hide-referer).",
        show_default=False,
    ),
]
HeavyHittersOption = Annotated[
    bool,
    typer.Option(
        "--heavy-hitters",
        help="Also rank the top pages, clients and referrers with count-min sketches (bounded "
        "state: a sketch and 4 × --top candidates a day), each count with its error bound, "
        "under heavy_hitters in the JSON (docs/report.md). Off by default.",
    ),
]
ReturningOption = Annotated[
    bool,
    typer.Option(
        "--returning-visitors",
        help="Also count each day's new and returning visitors with Bloom filters (bounded "
        "state: one filter a day, no false negative), under returning_visitors in the JSON "
        "(docs/report.md). Off by default.",
    ),
]
CompareOption = Annotated[
    str | None,
    typer.Option(
        "--compare",
        metavar="PERIOD",
        help="Also compare each table's items with another period: previous (the range of "
        "--since/--until just before it), day or week (that range a day or a week "
        "earlier), or START..END; under comparison in the JSON.",
        show_default=False,
    ),
]
ThresholdOption = Annotated[
    float,
    typer.Option(
        "--change-threshold",
        min=0.0,
        help="With --compare: flag an item up or down when its hits changed by more than "
        "this fraction of the previous period's.",
    ),
]
QuietOption = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        help="Do not print the tables, nor the progress bar shown on a terminal.",
    ),
]


@app.command()
def batch(
    paths: PathsArgument,
    log_format: FormatOption = "auto",
    top: TopOption = 10,
    json_path: JsonOption = None,
    html_path: HtmlOption = None,
    quarantine_path: QuarantineOption = None,
    time_zone: TimeZoneOption = None,
    drop_duplicates: DropDuplicatesOption = False,
    strict: StrictOption = False,
    max_line_bytes: MaxLineOption = 64 * 1024,
    reference: ReferenceOption = None,
    no_panel: NoPanelOption = None,
    static_ext: StaticExtOption = None,
    site_host: SiteHostOption = None,
    heavy_hitters: HeavyHittersOption = False,
    returning: ReturningOption = False,
    since: SinceOption = None,
    until: UntilOption = None,
    filters: FilterOption = None,
    greps: GrepOption = None,
    vhost_from_path: VhostFromPathOption = None,
    compare: CompareOption = None,
    change_threshold: ThresholdOption = 0.5,
    quiet: QuietOption = False,
    master: MasterOption = None,
    remote: RemoteOption = None,
    conf: ConfOption = None,
) -> None:
    """Analyse log files in batch: a GoAccess-style report.

    It starts from the book's "most popular URLs per day".

    Example: logstream batch ../shared/data/NASA_access_log_Jul95_day09.log.gz --top 5
    """
    # the filter and the sites are checked before anything else starts (no JVM on a typo)
    flt = build_filter(since, until, filters, greps)
    previous = flt.previous(compare) if compare else None
    site_pattern = check_vhost_pattern(vhost_from_path)
    from pyspark.sql import Observation
    from pyspark.sql import functions as F
    from rich.console import Console

    from logstream.parsing import parse, resolve_format
    from logstream.parsing.detect import check_sample
    from logstream.reference import ReferenceTables, parse_reference_options
    from logstream.report.filtering import Filtering, filtered_report, filtered_rows
    from logstream.report.panels import PANELS, check_panels
    from logstream.report.progress import progress_enabled
    from logstream.session import get_spark
    from logstream.sources import (
        drop_duplicate_lines,
        expand_inputs,
        input_files,
        read_lines,
        sample_lines,
    )
    from logstream.sources.files import head_lines, skipped_files
    from logstream.sources.integrity import check_files, raise_if_corrupt

    if time_zone is not None:
        validate_time_zone(time_zone)
    try:
        check_panels(no_panel or [], static_ext or [])
    except ValueError as e:
        raise ConfigError(str(e)) from e
    extra = spark_conf(conf)  # a bad --conf stops before anything is read
    inputs = expand_inputs(paths)
    _check_outputs(json_path, html_path)
    tables = ReferenceTables(parse_reference_options(reference))  # checked before Spark starts
    files = input_files(inputs)
    if log_format != "auto" and files:  # a wrong --format: one line now, not empty tables
        check_sample(resolve_format(log_format), head_lines(files[0]))
    # Spark skips hidden and metadata names without a word: logstream counts and names them
    skipped = skipped_files(inputs)
    if strict:  # before the JVM starts: a corrupt file is an error
        raise_if_corrupt(check_files(files))
    # otherwise the compressed inputs are read to their end while Spark starts and works
    checking = ThreadPoolExecutor(max_workers=1)
    corrupt = checking.submit(check_files, files)
    sizes = [_size(f) for f in files]  # bytes, once: the session, the waves, the bar
    spark = get_spark(_settings(master, remote, extra, inputs, files, sizes))
    _balance_input(spark, extra, files, sizes)
    console = Console() if progress_enabled(quiet) else None  # the bar, on a terminal
    progress = _progress(spark, console, sizes, heavy_hitters, returning)
    options = {
        "time_zone": time_zone,
        "reference": tables,
        "panels": [p for p in PANELS if p not in (no_panel or [])],
        "static_extensions": static_ext or [],
        "site_host": site_host,
    }
    with progress:
        lines = read_lines(spark, inputs)
        fmt = resolve_format(log_format, sample_lines(lines) if log_format == "auto" else None)
        if drop_duplicates:
            # counted in the report's one pass over the input, as the stream's metric: read − kept
            read, kept = Observation("read"), Observation("kept")
            lines = lines.observe(read, F.count("*").alias("lines"))
            lines = drop_duplicate_lines(lines).observe(kept, F.count("*").alias("lines"))
        report = filtered_report(
            lines,
            fmt,
            Filtering(flt, previous, site_pattern, change_threshold, max_line_bytes),
            top,
            {**options, **_format_options(fmt)},
            inputs=[str(p) for p in paths],
            quarantine_path=str(quarantine_path.absolute()) if quarantine_path else None,
            corrupt_files=corrupt.result() if not strict else {},
            on_step=progress.step,
        )
        if heavy_hitters or returning:
            parsed = parse(lines, fmt, max_line_bytes=max_line_bytes)
            rows = filtered_rows(parsed, flt, site_pattern).rows
            report.update(_extras(rows, fmt.fields, top, heavy_hitters, returning, progress.step))
    checking.shutdown()
    report["general"]["skipped_files"] = skipped
    if drop_duplicates:
        report["general"]["duplicates_dropped"] = read.get["lines"] - kept.get["lines"]
    _show_and_write(report, quiet=quiet, json_path=json_path, html_path=html_path)


def _check_outputs(*paths: Path | None) -> None:
    """Refuse, before Spark starts, an output file whose directory does not exist."""
    for out in paths:
        if out is not None and not out.parent.exists():
            raise ConfigError(
                f"cannot write {str(out)!r}: directory {str(out.parent)!r} does not exist"
            )


def _settings(
    master: str | None,
    remote: str | None,
    extra: dict[str, str],
    inputs: list[str],
    files: list[str],
    sizes: list[int],
) -> SparkSettings:
    """The session's settings: ``--remote`` else ``$SPARK_REMOTE``, as PySpark; a short run
    (the quicker JIT) on a small local input of ``files`` of ``sizes`` bytes (remote inputs'
    sizes are not looked at)."""
    local = all("://" not in str(i) or str(i).startswith("file:") for i in inputs)
    short = local and short_input(zip(files, sizes, strict=True))
    given = remote_default(remote)
    return SparkSettings.build(master=master, extra=extra, short_run=short, **given)


def _format_options(fmt: Any) -> dict[str, Any]:
    """:func:`~logstream.report.build_report`'s options that the log format decides."""
    return {
        "log_format": fmt.name,
        "protocol_required": "protocol" in fmt.fields,
        "fields": fmt.fields,
    }


def _progress(spark: Any, console: Any, sizes: list[int], heavy: bool, returning: bool) -> Any:
    """The report's progress bar (:class:`~logstream.report.progress.StepProgress`): the input's
    bytes (``sizes``, one a file) read, then the report's steps, with the opt-in ones asked
    for."""
    from logstream.connect import is_connect, not_through_connect
    from logstream.report.progress import REPORT_STEPS, StepProgress

    if is_connect(spark):  # the bar polls the SparkContext's status tracker
        if console is not None:
            not_through_connect("no progress bar (it reads the SparkContext's job status)")
        return _NoProgress()
    steps = dict(REPORT_STEPS)
    if heavy:
        steps["heavy hitters"] = "the heavy hitters"
    if returning:
        steps["returning visitors"] = "the returning visitors"
    return StepProgress(spark.sparkContext, console, steps=steps, input_bytes=sum(sizes))


class _NoProgress(nullcontext):
    """No progress bar (through Spark Connect): the steps are not shown."""

    def step(self, name: str) -> None:
        """Nothing to show."""


#: How Spark cuts input files into partitions.
_MIN_PARTITIONS = "spark.sql.files.minPartitionNum"
_SPLIT_KEYS = (
    _MIN_PARTITIONS,
    "spark.sql.files.maxPartitionBytes",
    "spark.sql.files.openCostInBytes",
    "spark.sql.leafNodeDefaultParallelism",  # Spark's default minPartitionNum
)


def _balance_input(spark: Any, extra: dict[str, str], files: list[str], sizes: list[int]) -> None:
    """The input (``files`` of ``sizes`` bytes) read in full waves of tasks
    (:func:`~logstream.sources.files.balanced_partitions`), unless ``--conf`` sets how Spark
    cuts files or the session is a Spark Connect one (whose cores the client does not see)."""
    from logstream.connect import is_connect
    from logstream.sources.files import balanced_partitions, splittable

    if is_connect(spark) or any(key in extra for key in _SPLIT_KEYS):
        return
    pieces = [(size, splittable(f)) for f, size in zip(files, sizes, strict=True)]
    minimum = balanced_partitions(pieces, spark.sparkContext.defaultParallelism)
    if minimum is not None:
        spark.conf.set(_MIN_PARTITIONS, str(minimum))


def _size(path: str) -> int:
    """The size of an input file, bytes (0 when it cannot be read: it is reported later)."""
    try:
        return Path(path).stat().st_size
    except OSError:
        return 0


def _extras(
    rows: Any,
    fields: tuple[str, ...],
    top: int,
    heavy: bool,
    returning: bool,
    step: Any,
) -> dict[str, Any]:
    """The opt-in sections of the report (``heavy_hitters``, ``returning_visitors``) of the
    filtered ``rows``, each announced to ``step`` (the progress bar's) as it starts."""
    from dataclasses import asdict

    from logstream.analytics.returning import returning_visitors
    from logstream.parsing import events

    out: dict[str, Any] = {}
    if heavy:
        step("heavy hitters")
        out["heavy_hitters"] = _heavy_hitters(rows, fields, top)
    if returning:
        step("returning visitors")
        out["returning_visitors"] = [asdict(d) for d in returning_visitors(events(rows))]
    return out


def _heavy_hitters(parsed: Any, fields: tuple[str, ...], top: int) -> dict[str, Any]:
    """The count-min top ``top`` of the pages, clients and referrers the format has
    (:func:`logstream.analytics.heavy.heavy_hitters`, day panes), as JSON values."""
    from dataclasses import asdict

    from logstream.analytics.heavy import heavy_hitters
    from logstream.parsing import events

    rows = events(parsed)
    return {
        column: asdict(heavy_hitters(rows, column, top))
        for column in ("url_path", "client_host", "referrer")
        if column in fields
    }


def _show_and_write(
    report: dict[str, Any], *, quiet: bool, json_path: Path | None, html_path: Path | None
) -> None:
    """Print the report's tables (unless ``quiet``) and the skipped files' warning, then write
    the JSON and HTML reports asked for."""
    from rich.console import Console
    from rich.markup import escape

    from logstream.report import render_html, render_terminal
    from logstream.sources.files import skipped_note

    if not quiet:
        render_terminal(report)
        if "comparison" in report:
            from logstream.comparison import print_comparison

            print_comparison(report["comparison"])
    note = skipped_note(report["general"]["skipped_files"])
    if note:  # after the tables, with the report's summary (on standard error: not a table)
        Console(stderr=True, highlight=False).print(f"[yellow]warning:[/yellow] {escape(note)}")
    if json_path:
        json_path.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    if html_path:
        html_path.write_text(render_html(report), encoding="utf-8")
