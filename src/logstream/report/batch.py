"""The batch report: GoAccess-class statistics of a set of log files (book Ch. 7, "Batch
Analytics").

:func:`build_report` reads and parses each line once and aggregates it once
(:func:`logstream.report.views.view_counts`: every table's items, every visitor, every
half-hour of a visit in one hash aggregation, the pane idea of the streaming pipeline applied
to the whole input). When that aggregation has at most ``driver_rows`` rows
(:data:`logstream.report.driver.DRIVER_ROWS`), they reach the driver in one Arrow collect and
the tables, sessions and quarantine examples are computed there
(:mod:`logstream.report.driver`); past it, every ranked table is read in one more Spark job
(:func:`logstream.report.items.ranked_tables`), and only bounded results reach the driver: a
handful of totals, a row per hour and status code, ``top`` rows per table, one row per day.
The keys of the returned dictionary are stable (see :data:`REPORT_KEYS`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from logstream.connect import job_description
from logstream.parsing.detect import LOG_OFFSET_REGEX
from logstream.reference import ReferenceTables
from logstream.report.driver import DRIVER_ROWS, DriverRows, collect_rows
from logstream.report.items import TableRows, ranked_tables
from logstream.report.panels import PANELS, assemble_panels
from logstream.report.reference import reference_section
from logstream.report.sessions import SESSION_GAP_S, session_summary
from logstream.report.views import count_host_days, persisted, view_counts
from logstream.schema import QUARANTINE_SCHEMA
from logstream.session import conf_set
from logstream.sources.integrity import CORRUPT_FILE_REASON, spark_file_uri

__all__ = ["LOG_OFFSET_REGEX", "QUARANTINE_EXAMPLES", "REPORT_KEYS", "build_report", "iso_instant"]

#: Top-level keys of the report, in order.
REPORT_KEYS: tuple[str, ...] = (
    "general",
    "status_codes",
    "status_classes",
    "top_urls",
    "top_content_pages_by_day",
    "hourly",
    "top_hosts",
    "top_not_found",
    "sessions",
    "quarantine",
    "reference",
    *PANELS,
)

#: Quarantined lines shown as examples in the report.
QUARANTINE_EXAMPLES = 5


_FIXED_OFFSET = re.compile(r"^([+-])(\d\d):(\d\d)$")


def _zone(time_zone: str) -> tzinfo:
    """An IANA zone, or a fixed offset written ``±HH:MM`` (the log's own, :func:`build_report`)."""
    fixed = _FIXED_OFFSET.match(time_zone)
    if fixed:
        sign = -1 if fixed[1] == "-" else 1
        return timezone(sign * timedelta(hours=int(fixed[2]), minutes=int(fixed[3])))
    return ZoneInfo(time_zone)


def iso_instant(epoch_seconds: int | None, time_zone: str = "UTC") -> str | None:
    """Format an epoch instant as ISO 8601 with its offset in ``time_zone`` (an IANA name or a
    fixed offset ``±HH:MM``)."""
    if epoch_seconds is None:
        return None
    return datetime.fromtimestamp(epoch_seconds, UTC).astimezone(_zone(time_zone)).isoformat()


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict() for row in df.collect()]


def build_report(
    parsed: DataFrame,
    *,
    top: int = 10,
    time_zone: str | None = None,
    log_format: str = "",
    inputs: list[str] | None = None,
    quarantine_path: str | None = None,
    duplicates_dropped: int | None = None,
    corrupt_files: dict[str, str] | None = None,
    reference: ReferenceTables | None = None,
    panels: Sequence[str] = PANELS,
    static_extensions: Sequence[str] = (),
    site_host: str | None = None,
    protocol_required: bool = False,
    fields: Collection[str] | None = None,
    on_step: Callable[[str], None] | None = None,
    driver_rows: int = DRIVER_ROWS,
) -> dict[str, Any]:
    """Compute the batch report from parsed lines: one pass over them, then a few small jobs
    (the module's docstring).

    Parameters
    ----------
    parsed : DataFrame
        Output of :func:`logstream.parsing.parse` (events and quarantine candidates).
    top : int
        Rows in each top-N table, ≥ 1.
    time_zone : str, optional
        IANA zone of the report's calendar (days of visitors, hours, first and last event).
        None: the log's own offsets, as GoAccess (a line's day is the date written in it,
        :data:`LOG_OFFSET_REGEX`, UTC without one; times shown in the most common offset,
        ``general.time_zone``). Event times stay UTC instants.
    log_format : str
        Name of the format used, echoed in ``general``.
    inputs : list of str, optional
        Input paths, echoed in ``general``.
    quarantine_path : str, optional
        When given, quarantined lines are written there as JSON Lines (overwritten).
    duplicates_dropped : int, optional
        Lines removed before parsing as copies of another line
        (:func:`logstream.sources.drop_duplicate_lines`), echoed in ``general``; ``None``
        when every line was kept.
    corrupt_files : dict of str to str, optional
        Input files not readable to their end, with the error (their readable lines are in
        ``parsed``): counted in ``general``, named in ``quarantine``, written to
        ``quarantine_path`` with reason ``corrupt_file``.
    reference : ReferenceTables, optional
        Reference tables (:mod:`logstream.reference`); default: the built-in ones.
    panels, static_extensions, site_host
        GoAccess's panels to compute (default: all), extensions counted as static besides
        GoAccess's, your own site's host (its referrals leave the referrer panels).
    protocol_required : bool
        The log format has a protocol (``"protocol" in CompiledFormat.fields``, as
        ``logstream batch`` passes it): a request without a valid one is GoAccess's request
        ``-`` (:func:`logstream.analytics.requests.request_target`).
    fields : collection of str, optional
        The event fields of the log format (``CompiledFormat.fields``): the views of fields
        it lacks are left out of the one aggregation. None: every view, and a log without
        user agents is told by its rows.
    on_step : callable, optional
        Called with the name of each step of the work as it starts (the keys of
        :data:`logstream.report.progress.REPORT_STEPS`, in that order: ``read, parse,
        aggregate``, ``tables`` …), for a progress display.
    driver_rows : int
        The most rows of the aggregation whose tables the driver computes (pandas,
        :mod:`logstream.report.driver`); past it, Spark does.

    Returns
    -------
    dict
        Keys :data:`REPORT_KEYS`. ``general`` holds ``total_requests``, ``valid_requests``,
        ``failed_requests``, ``unique_visitors`` (GoAccess's: distinct client host, calendar
        day and user agent, 4xx answers left out; the visitors panel's total),
        ``hosts_per_day`` (distinct client hosts of each calendar day, summed over the days),
        ``unique_urls`` (distinct paths), ``unique_not_found`` (GoAccess's: distinct requests
        answered 404, keyed as the ``not_found`` panel keys them: the request with its method
        and protocol), ``bandwidth_bytes`` (bytes), ``first_event`` and ``last_event``
        (ISO 8601, in the report's zone), ``time_zone`` (the ``time_zone`` given, or the
        log's most common offset, ``±HH:MM``), ``time_zone_source`` (``option`` or ``log``),
        ``log_offsets`` (with the log's offsets: requests per offset written in the lines,
        ``±HH:MM``), plus the echoed settings, ``duplicates_dropped`` and ``corrupt_files``;
        ``status_codes`` maps a status (as text) to requests;
        ``status_classes`` maps ``"2xx"`` to requests; the ``top_*`` and ``hourly`` entries are
        lists of row dictionaries; ``sessions`` summarises visitor sessions (30-minute gap,
        :func:`~logstream.analytics.sessions`): ``sessions``, ``median_duration_s`` and
        ``p95_duration_s`` (seconds, exact: the smallest duration at least half, 95 %, of
        the sessions do not exceed), ``bounce_rate`` (0–1) and ``pages_per_session``;
        ``reference`` holds ``crawler_share`` (0–1: requests of the ``crawler`` agent class
        over valid requests), ``agent_classes``, ``sections`` and (with a networks table)
        ``networks``: the top ``top`` keys by requests, each with ``requests``, ``bytes``,
        ``errors`` (status ≥ 400) and ``error_rate``; and ``tables``: each table's source
        and version (SHA-256); and each panel of ``panels`` in GoAccess's layout
        (:func:`logstream.report.panels.assemble_panels`).

    Raises
    ------
    ValueError
        When ``top`` < 1.
    """
    if top < 1:
        raise ValueError(f"top must be at least 1, got {top}")
    step = _ON_STEP.set(on_step)
    try:
        counts, host_days, rows = _count(
            parsed, time_zone, static_extensions, site_host, protocol_required, fields
        )
        tables = (reference if reference is not None else ReferenceTables()).current
        driver = _on_driver(counts, tables) if rows <= driver_rows else None
        general = (time_zone, log_format, inputs or [], len(corrupt_files or {}))
        report = _tables(counts, driver, host_days, top, tables, panels, fields, general)
        quarantined = (report.pop("_small"), quarantine_path, corrupt_files or {})
        report["quarantine"] = _quarantine(counts, driver, *quarantined)
        _describe(counts, "sessions")
        report["sessions"] = _sessions(counts, driver)
    finally:
        _release(locals().get("counts"), parsed, step)
    report["general"]["duplicates_dropped"] = duplicates_dropped
    return {key: report[key] for key in REPORT_KEYS if key in report}


def _release(counts: DataFrame | None, parsed: DataFrame, step: Any) -> None:
    """After the report: the persisted counts dropped, the job description and the step
    callback of :func:`build_report` reset."""
    if counts is not None:
        counts.unpersist()
    job_description(parsed.sparkSession, None)
    _ON_STEP.reset(step)


def _count(
    parsed: DataFrame,
    time_zone: str | None,
    static_extensions: Sequence[str],
    site_host: str | None,
    protocol_required: bool,
    fields: Collection[str] | None,
) -> tuple[DataFrame, Observation, int]:
    """The one aggregation of :func:`logstream.report.views.view_counts`, persisted, under
    :data:`REPORT_CONF`, the observation of its hosts per day and its number of rows."""
    with conf_set(parsed.sparkSession, REPORT_CONF):
        every, host_days = count_host_days(
            view_counts(
                parsed,
                time_zone=time_zone,
                static_extensions=static_extensions,
                site_host=site_host,
                protocol_required=protocol_required,
                fields=fields,
            )
        )
        counts = persisted(every)
        _describe(counts, "read, parse, aggregate")  # the first job computes the aggregation
        rows = counts.count()
    return counts, host_days, rows


def _on_driver(counts: DataFrame, tables: dict[str, Any]) -> DriverRows | None:
    """The aggregation's rows on the driver; None when a text of them is not valid UTF-8 (a
    raw line of bytes that are not text), which Arrow refuses: Spark's path decodes it as its
    ``collect`` does, with replacement characters."""
    import pyarrow as pa

    try:
        return DriverRows(collect_rows(counts, tables))
    except pa.ArrowException:
        return None


def _sessions(counts: DataFrame, driver: DriverRows | None) -> dict[str, Any]:
    """The report's ``sessions``: from the visit buckets, on the driver or by Spark."""
    if driver is not None:
        return driver.sessions(SESSION_GAP_S)
    return session_summary(counts.where(F.col("view") == "visit"))


def _tables(
    counts: DataFrame,
    driver: DriverRows | None,
    host_days: Observation,
    top: int,
    tables: dict[str, Any],
    panels: Sequence[str],
    fields: Collection[str] | None,
    general: tuple[Any, ...],
) -> dict[str, Any]:
    """The report but its quarantine and sessions: the small views, then every ranked
    table (its reference section and GoAccess's panels), on the driver or in one job."""
    panels = [p for p in PANELS if p in panels]
    small = driver.small() if driver is not None else _small_views(counts)
    _describe(counts, "tables")
    with_agents = None if fields is None else "user_agent" in fields
    if driver is not None:
        ranked = driver.tables(panels, top, tables, with_agents)
    else:
        ranked = ranked_tables(counts, panels, top, tables, with_agents)
    report = _build(small, ranked, int(host_days.get["host_days"]), top, *general)
    _describe(counts, "reference")
    report["reference"] = reference_section(ranked, tables, top)
    _describe(counts, "panels")
    report.update(assemble_panels(ranked, panels, top))
    report["_small"] = small
    return report


#: The report's shuffle settings: many partitions, which adaptive execution coalesces to
#: about the advisory size, so that no task's aggregation outgrows its memory and spills
#: (10M NASA lines, 2 cores, 2 GiB: the one aggregation's second stage spilled 2.1 GiB with
#: logstream's 4 partitions and took 39 s of executor time; with these, nothing and 12.5 s).
REPORT_CONF = {
    "spark.sql.shuffle.partitions": "200",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": "16m",
    # the persisted rows coalesced too (Spark keeps a cached plan's partitions otherwise)
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
}


def _small_views(counts: DataFrame) -> list[dict[str, Any]]:
    """The small views in one collect (the first job, which computes the aggregation): a row
    per hour, status code and written offset (one or two a log), per quarantine reason."""
    view = F.col("view")
    hour, bad = view == "hour", view == "bad"
    return _rows(
        counts.where(hour | bad)
        .groupBy(
            "view",
            F.when(bad, F.col("s3")).alias("reason"),
            F.when(hour, F.col("l1")).alias("hour"),
            F.when(hour, F.col("l2")).alias("status"),
            F.when(hour, F.col("l3")).alias("offset"),
        )
        .agg(
            *(F.sum(c).alias(c) for c in ("requests", "bytes", "errors")),
            F.min("first_ms").alias("first_ms"),
            F.max("last_ms").alias("last_ms"),
        )
    )


def _build(
    small: list[dict[str, Any]],
    ranked: TableRows,
    host_days: int,
    top: int,
    time_zone: str | None,
    log_format: str,
    inputs: list[str],
    corrupt: int,
) -> dict[str, Any]:
    """The report's ``general`` section and its top tables, from the small views and the
    ranked tables."""
    hours = [r for r in small if r["view"] == "hour"]
    failed = sum(r["requests"] for r in small if r["view"] == "bad")
    offsets: dict[str, int] = {}
    from_log = time_zone is None
    if time_zone is None:  # the log's own: the offset most lines were written in
        offsets = _written_offsets(hours)
        time_zone = min(offsets.items(), key=lambda kv: (-kv[1], kv[0]))[0] if offsets else "UTC"
    valid = sum(r["requests"] for r in hours)
    general = {
        "total_requests": valid + failed,
        "valid_requests": valid,
        "failed_requests": failed,
        "unique_visitors": ranked.total("visitors", "visitors"),
        "hosts_per_day": host_days,
        "unique_urls": ranked.total("top_urls", "items"),
        "unique_not_found": ranked.total("not_found", "items"),
        "bandwidth_bytes": sum(r["bytes"] for r in hours),
        "first_event": _iso_ms(min((r["first_ms"] for r in hours), default=None), time_zone),
        "last_event": _iso_ms(max((r["last_ms"] for r in hours), default=None), time_zone),
        "time_zone": time_zone,
        "time_zone_source": "log" if from_log else "option",
        **({"log_offsets": dict(sorted(offsets.items()))} if from_log else {}),
        "log_format": log_format,
        "inputs": inputs,
        "corrupt_files": corrupt,
    }
    status_codes, status_classes, hourly = _status_and_hours(hours, time_zone)
    by_day: dict[str, list[dict[str, Any]]] = {}
    for r in ranked.rows.get("top_pages", []):
        by_day.setdefault(r["grp"], []).append(
            {"rank": r["rank"], "url_path": r["data"], "requests": r["hits"]}
        )
    return {
        "general": general,
        "status_codes": status_codes,
        "status_classes": status_classes,
        "top_urls": [
            {"url_path": r["data"], "requests": r["hits"], "bytes": r["bytes"]}
            for r in ranked.top("top_urls", top)
        ],
        "top_content_pages_by_day": [
            {"day": day, "pages": pages} for day, pages in sorted(by_day.items())
        ],
        "hourly": hourly,
        "top_hosts": [
            {"client_host": r["data"], "requests": r["hits"], "bytes": r["bytes"]}
            for r in ranked.top("top_hosts", top)
        ],
        "top_not_found": [
            {"url_path": r["data"], "requests": r["hits"]} for r in ranked.top("top_not_found", top)
        ],
    }


def _written_offsets(hours: list[dict[str, Any]]) -> dict[str, int]:
    """Requests per UTC offset written in the lines (``±HH:MM``), from the hour rows."""
    offsets: dict[str, int] = {}
    for r in hours:
        written = _offset_text(None if r["offset"] is None else int(r["offset"]))
        offsets[written] = offsets.get(written, 0) + r["requests"]
    return offsets


def _offset_text(seconds: int | None) -> str:
    """``-14400`` → ``-04:00``; None (no offset written: UTC) → ``+00:00``."""
    seconds = seconds or 0
    sign = "-" if seconds < 0 else "+"
    hours, minutes = divmod(abs(seconds) // 60, 60)
    return f"{sign}{hours:02d}:{minutes:02d}"


def _status_and_hours(
    hours: list[dict[str, Any]], time_zone: str
) -> tuple[dict[str, int], dict[str, int], list[dict[str, Any]]]:
    """The ``status_codes``, ``status_classes`` and ``hourly`` tables of the report."""
    per_code: dict[int, int] = {}
    per_hour: dict[int, list[int]] = {}  # requests, bytes, errors
    for r in hours:
        code = int(r["status"])
        per_code[code] = per_code.get(code, 0) + r["requests"]
        sums = per_hour.setdefault(int(r["hour"]), [0, 0, 0])
        for i, c in enumerate(("requests", "bytes", "errors")):
            sums[i] += r[c]
    per_class: dict[str, int] = {}
    for code, n in per_code.items():
        name = f"{code // 100}xx"
        per_class[name] = per_class.get(name, 0) + n
    status_codes = {str(code): n for code, n in sorted(per_code.items())}
    status_classes = dict(sorted(per_class.items()))
    hourly = [
        {
            "hour": iso_instant(hour * 3600, time_zone),
            "requests": requests,
            "bytes": size,
            "error_rate": round(errors / requests, 6),
        }
        for hour, (requests, size, errors) in sorted(per_hour.items())
    ]
    return status_codes, status_classes, hourly


def _quarantine(
    counts: DataFrame,
    driver: DriverRows | None,
    small: list[dict[str, Any]],
    quarantine_path: str | None,
    corrupt_files: dict[str, str],
) -> dict[str, Any]:
    """The report's ``quarantine`` section; writes every quarantined line, in the order of the
    input, and the corrupt files to ``quarantine_path`` (JSON Lines) when it is given."""
    reasons = dict(sorted((r["reason"], r["requests"]) for r in small if r["view"] == "bad"))
    failed = sum(reasons.values())
    bad = (
        counts.where(F.col("view") == "bad")
        .orderBy("s2", "l1")  # by file, then position (Spark packs the largest pieces first)
        .select(
            F.col("s1").alias("raw_line"),
            F.col("s2").alias("source_file"),
            F.col("s3").alias("reason"),
            F.lit(None).cast("string").alias("detail"),
        )
    )
    _describe(counts, "quarantine")
    if driver is not None:
        examples = driver.examples(QUARANTINE_EXAMPLES)
    else:
        examples = _rows(bad.limit(QUARANTINE_EXAMPLES)) if failed else []
    if quarantine_path:
        if corrupt_files:
            bad = bad.unionByName(
                counts.sparkSession.createDataFrame(
                    [
                        (None, spark_file_uri(f), CORRUPT_FILE_REASON, e)
                        for f, e in sorted(corrupt_files.items())
                    ],
                    QUARANTINE_SCHEMA,
                )
            )
        bad.write.mode("overwrite").json(quarantine_path)
    return {
        "failed_lines": failed,
        "reasons": reasons,
        "examples": examples,
        "corrupt_files": [
            {"source_file": spark_file_uri(f), "error": e} for f, e in sorted(corrupt_files.items())
        ],
        "path": quarantine_path,
    }


#: :func:`build_report`'s ``on_step``, for :func:`_describe` (the report's steps are in
#: several functions).
_ON_STEP: ContextVar[Callable[[str], None] | None] = ContextVar("on_step", default=None)


def _describe(frame: DataFrame, step: str) -> None:
    """Name the Spark jobs that follow (the Spark UI's job descriptions, read by
    ``bench/profile_batch.py``): ``logstream batch: STEP``; and tell ``on_step``."""
    job_description(frame.sparkSession, f"logstream batch: {step}")
    if (on_step := _ON_STEP.get()) is not None:
        on_step(step)


def _iso_ms(epoch_ms: int | None, time_zone: str = "UTC") -> str | None:
    return None if epoch_ms is None else iso_instant(epoch_ms // 1000, time_zone)
