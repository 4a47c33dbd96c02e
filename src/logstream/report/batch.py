"""The batch report: GoAccess-class statistics of a set of log files (book Ch. 7, "Batch
Analytics").

:func:`build_report` reads and parses each line once and aggregates it once: one hash
aggregation keyed by view and key (:func:`_view_counts`) counts every table of the report
(status codes, hours, URLs, content pages per day, hosts per day, the reference dimensions),
the per-minute visit summaries that merge into sessions, and the quarantined lines, in one pass
over the input: the pane idea of the streaming pipeline, applied to the whole input. Only
bounded results reach the driver: a handful of totals, at most 600 status codes, ``top`` rows
per table, one row per hour and per day. The keys of the returned dictionary are stable (see
:data:`REPORT_KEYS`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from logstream import analytics
from logstream.analytics.requests import event_request_target
from logstream.analytics.sessions import summary_session
from logstream.analytics.visitors import local_day
from logstream.connect import job_description
from logstream.parsing import REASON_COLUMN
from logstream.parsing.detect import LOG_OFFSET_REGEX
from logstream.reference import ReferenceTables
from logstream.report.panels import PANEL_COLUMNS, PANELS, build_panels, panel_inputs, panel_views
from logstream.report.reference import reference_section
from logstream.schema import QUARANTINE_SCHEMA
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
    on_step: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Compute the batch report from parsed lines.

    Parameters
    ----------
    parsed : DataFrame
        Output of :func:`logstream.parsing.parse` (events and quarantine candidates).
    top : int
        Rows in each top-N table, ≥ 1.
    time_zone : str, optional
        IANA zone for the report's calendar: days of unique visitors and content pages, the
        labels of hourly traffic and the first and last event. Default (None): the log's own
        offsets, as GoAccess does: each line's day is the date written in it (its offset,
        :data:`LOG_OFFSET_REGEX`; UTC for a line without one, such as epoch times), and the
        hours, first and last event are shown in the most common offset of the lines, which
        ``general.time_zone`` names (``-04:00``). Event times stay UTC instants.
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
        Input files that could not be read to their end, with the error
        (:func:`logstream.sources.integrity.check_files`); their readable lines are in
        ``parsed``. Reported in ``general.corrupt_files`` (a count) and
        ``quarantine.corrupt_files``, and written to ``quarantine_path`` with reason
        ``corrupt_file``.
    reference : ReferenceTables, optional
        Reference tables (:mod:`logstream.reference`); default: the built-in agent classes
        and first-segment sections. The events are enriched by the same broadcast joins as
        in ``logstream run``.
    panels, static_extensions, site_host
        GoAccess's panels to compute (default: all), extensions counted as static besides
        GoAccess's, your own site's host: :func:`logstream.report.panels.panel_views`.
    protocol_required : bool
        The log format has a protocol (``"protocol" in CompiledFormat.fields``, as
        ``logstream batch`` passes it): a request without a valid one is GoAccess's request
        ``-`` (:func:`logstream.analytics.requests.request_target`).
    on_step : callable, optional
        Called with the name of each step of the work as it starts (the keys of
        :data:`logstream.report.progress.REPORT_STEPS`, in that order: ``read, parse,
        aggregate``, ``tables`` …), for a progress display.

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
        ``p95_duration_s`` (seconds, KLL estimates), ``bounce_rate`` (0–1) and
        ``pages_per_session``; ``reference`` holds ``crawler_share`` (0–1: requests of the
        ``crawler`` agent class over valid requests), ``agent_classes``, ``sections`` and
        (with a networks table) ``networks``: the top ``top`` keys by requests, each with
        ``requests``, ``bytes``, ``errors`` (status ≥ 400) and ``error_rate``; and
        ``tables``: each table's source and version (SHA-256); and each panel of ``panels``
        in GoAccess's layout (:func:`logstream.report.panels.build_panels`).

    Raises
    ------
    ValueError
        When ``top`` < 1.
    """
    if top < 1:
        raise ValueError(f"top must be at least 1, got {top}")
    tables = (reference if reference is not None else ReferenceTables()).current
    # the input is read and parsed once: every table, the sessions and the quarantine come from
    # the rows of one aggregation, which is small (a row per key) and cached
    panels = [p for p in PANELS if p in panels]
    step = _ON_STEP.set(on_step)
    views = _view_counts(
        parsed, time_zone, tables, panels, static_extensions, site_host, protocol_required
    )
    counts = views.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        report = _build(
            counts, top, time_zone, log_format, inputs or [], quarantine_path, corrupt_files or {}
        )
        _describe(counts, "reference")
        report["reference"] = reference_section(counts, tables, top)
        _describe(counts, "panels")
        report.update(build_panels(counts, panels, top, tables.get("agents")))
    finally:
        counts.unpersist()
        job_description(parsed.sparkSession, None)
        _ON_STEP.reset(step)
    report["general"]["duplicates_dropped"] = duplicates_dropped
    return report


def _view_counts(
    parsed: DataFrame,
    time_zone: str | None,
    tables: dict[str, Any],
    panels: Sequence[str] = (),
    static_extensions: Sequence[str] = (),
    site_host: str | None = None,
    protocol_required: bool = False,
) -> DataFrame:
    """Every table of the report from one aggregation of the parsed lines.

    Each line is projected into the views it belongs to (``F.inline`` of an array of structs:
    a row per view), and one hash aggregation keyed by the view and its keys counts them all
    in one pass: the pane idea of :func:`logstream.analytics.panes.fold_panes`, over the whole
    input. Views of an event: ``hour`` (key: the UTC hour, epoch seconds // 3600; ``key2``:
    the status code; ``key3``, with ``time_zone`` None: the offset written in the line, in
    seconds east of UTC, 0 without one), ``url`` (the path, null included), ``page_day`` (content
    pages per calendar day of ``time_zone``, or of the line's own offset when None),
    ``host_day`` (client hosts per calendar day, ``key2`` the user agent, ``-`` for none:
    each row a GoAccess visitor when ``uniq`` > 0), ``not_found_request`` (a request
    answered 404, keyed as GoAccess keys it: the target, ``key4`` its method and protocol),
    ``visit`` (a
    client host and user agent, ``key2``, per UTC minute: the summaries that merge into
    sessions, :func:`logstream.analytics.sessions.session_parts`). The reference dimensions
    are read from these rows, not from the events
    (:func:`logstream.report.reference.reference_section`). Each quarantined line
    is a row of its own in the view ``bad``: its raw text, source file (``key2``), reason
    (``key3``) and position in the input (``at``), so the quarantine keeps every copy in input
    order. The rows of GoAccess's ``panels`` come from
    :func:`logstream.report.panels.panel_views`.

    Returns
    -------
    DataFrame
        ``view``, ``key``, ``key2``, ``key3``, ``key4`` (string), ``day`` (date), ``at``
        (bigint: the minute of a ``visit``, epoch milliseconds; the position of a ``bad``
        line), the keys (null where a view has none); ``requests`` (lines), ``bytes``
        (bytes), ``errors`` (status ≥ 400), ``not_found`` (status 404), ``pages`` (content
        pages), ``uniq`` (requests that make a GoAccess visitor: status not 4xx) (bigint);
        ``first_ms``, ``last_ms`` (bigint: epoch milliseconds of the first and last event).
    """
    is_event = F.col(REASON_COLUMN).isNull()
    url = F.col("url_path")
    t_ms = F.unix_millis("event_time")
    offset, day = _calendar(time_zone)
    status_text = F.col("status").cast("string")
    view = _view_maker(is_event)
    views = [
        view(
            "hour", F.floor(F.unix_seconds("event_time") / 3600).cast("string"), status_text, offset
        ),
        view("url", url),
        view("page_day", url, on_day=day, when=is_event & F.col("_page")),
        view(
            "host_day",
            F.col("client_host"),
            F.coalesce(F.col("user_agent"), F.lit("-")),
            on_day=day,
        ),
        _not_found_request(view, is_event, protocol_required),
        view(
            "visit",
            F.col("client_host"),
            F.coalesce("user_agent", F.lit("")),
            at=t_ms - F.pmod(t_ms, F.lit(60_000)),
        ),
        view(
            "bad",
            F.col("raw_line"),
            F.col("source_file"),
            F.col(REASON_COLUMN),
            at=F.monotonically_increasing_id(),  # the order of the input
            when=~is_event,
        ),
        *panel_views(
            view,
            day,
            is_event,
            panels=panels,
            static_extensions=static_extensions,
            site_host=site_host,
        ),
    ]
    rows = parsed.select(
        *_EVENT_COLUMNS,
        *(c for c in PANEL_COLUMNS if panels or c in _REQUEST_COLUMNS),
        "raw_line",
        "source_file",
        REASON_COLUMN,
        analytics.is_content_page().alias("_page"),
    )
    if time_zone is None:  # the offset read once per line, then used by two views
        rows = rows.withColumn("_offset_s", _line_offset_seconds(F.col("raw_line")))
    rows = rows.withColumns(panel_inputs(day, panels, protocol_required))
    return _count_views(
        rows.select(F.inline(F.array(*views)), "status", "bytes_sent", "_page", t_ms.alias("_t"))
    )


def _calendar(time_zone: str | None) -> tuple[Column, Column]:
    """The offset written in a line (``key3`` of the ``hour`` view: seconds east of UTC, as
    text; null with a ``time_zone``) and the line's calendar day: the date written in it
    (``time_zone`` None), else its day in ``time_zone``."""
    if time_zone is None:  # each line's calendar day is the date written in it
        offset = F.col("_offset_s").cast("string")  # seconds east of UTC
        day = F.date_from_unix_date(
            F.floor((F.unix_seconds("event_time") + F.col("_offset_s")) / 86_400).cast("int")
        )
        return offset, day
    return F.lit(None).cast("string"), local_day(time_zone)


def _view_maker(is_event: Column) -> Callable[..., Column]:
    """``view(name, key, key2, key3, on_day=, at=, when=, key4=)``: the struct of one view
    of a line for :func:`_view_counts` (its name null unless ``when``, by default the line
    is an event)."""
    none = F.lit(None).cast("string")

    def view(
        name: str,
        key: Column,
        key2: Column = none,
        key3: Column = none,
        on_day: Column | None = None,
        at: Column | None = None,
        when: Column = is_event,
        key4: Column = none,
    ) -> Column:
        return F.struct(
            F.when(when, F.lit(name)).alias("view"),
            key.alias("key"),
            key2.alias("key2"),
            key3.alias("key3"),
            key4.alias("key4"),
            (F.lit(None).cast("date") if on_day is None else on_day).alias("day"),
            (F.lit(None).cast("bigint") if at is None else at).alias("at"),
        )

    return view


def _not_found_request(
    view: Callable[..., Column], is_event: Column, protocol_required: bool
) -> Column:
    """The ``not_found_request`` view: a request answered 404 as GoAccess keys it (its target,
    ``key4`` its method and protocol: :func:`logstream.analytics.requests.request_target`),
    computed for those lines only (a CASE evaluates no other branch)."""
    is_404 = F.col("status") == 404
    target, method_protocol = event_request_target(protocol_required=protocol_required)
    return view(
        "not_found_request",
        F.when(is_404, target),
        key4=F.when(is_404, method_protocol),
        when=is_event & is_404,
    )


def _count_views(projected: DataFrame) -> DataFrame:
    """The one aggregation of :func:`_view_counts` over the lines projected into views."""
    status = F.col("status")
    return (
        projected.where(F.col("view").isNotNull())
        .groupBy("view", "key", "key2", "key3", "key4", "day", "at")
        .agg(
            F.count("*").alias("requests"),
            F.coalesce(F.sum("bytes_sent"), F.lit(0)).cast("bigint").alias("bytes"),
            F.count_if(status >= analytics.ERROR_STATUS_MIN).alias("errors"),
            F.count_if(status == 404).alias("not_found"),
            F.count_if("_page").alias("pages"),
            F.count_if((status < 400) | (status >= 500)).alias("uniq"),
            F.min("_t").alias("first_ms"),
            F.max("_t").alias("last_ms"),
        )
    )


def _line_offset_seconds(raw_line: Column) -> Column:
    """The UTC offset written in a line (:data:`LOG_OFFSET_REGEX`) in seconds east of UTC, 0
    when the line has none (epoch times): native expressions that read the line's text once
    (each reference to the extracted text would run the regular expression again)."""
    written = F.regexp_extract(raw_line, LOG_OFFSET_REGEX, 1)  # ±HHMM, ±HH:MM, Z or ""
    # ±HHMM: "+0000" appended for Z or none, the colon and the Z dropped, five characters kept
    hhmm = F.substring(F.regexp_replace(F.concat(written, F.lit("+0000")), "[:Z]", ""), 1, 5)
    # the offset is what the local midnight of 1970-01-01 lacks to be the epoch
    # (try_: an impossible offset such as +9900 counts as none instead of failing the job)
    midnight = F.try_to_timestamp(
        F.concat(F.lit("1970-01-01 00:00:00"), hhmm), F.lit("yyyy-MM-dd HH:mm:ssZ")
    )
    return -F.coalesce(F.unix_seconds(midnight), F.lit(0))


def _offset_text(seconds: int | None) -> str:
    """``-14400`` → ``-04:00``; None (no offset written: UTC) → ``+00:00``."""
    seconds = seconds or 0
    sign = "-" if seconds < 0 else "+"
    hours, minutes = divmod(abs(seconds) // 60, 60)
    return f"{sign}{hours:02d}:{minutes:02d}"


#: The event columns the report reads.
_EVENT_COLUMNS = ("client_host", "user_agent", "event_time", "url_path", "status", "bytes_sent")
#: The columns of a request as GoAccess keys it (``not_found_request``), beyond the path.
_REQUEST_COLUMNS = ("query_string", "method", "protocol")


def _build(
    counts: DataFrame,
    top: int,
    time_zone: str | None,
    log_format: str,
    inputs: list[str],
    quarantine_path: str | None,
    corrupt_files: dict[str, str],
) -> dict[str, Any]:
    """The report from the rows of :func:`_view_counts`: the Spark jobs in order (totals, the
    small views, pages per day, quarantine, the top tables, sessions)."""
    view = F.col("view")
    _describe(counts, "read, parse, aggregate")  # the first action computes the aggregation
    summary = _summary(counts)
    _describe(counts, "tables")
    small = _small_views(counts)
    reasons = dict(sorted((r["key"], r["requests"]) for r in small if r["view"] == "bad"))
    failed = sum(reasons.values())
    offsets: dict[str, int] = {}
    from_log = time_zone is None
    if time_zone is None:  # the log's own: the offset most lines were written in
        offsets = _written_offsets(small)
        time_zone = min(offsets.items(), key=lambda kv: (-kv[1], kv[0]))[0] if offsets else "UTC"
    valid = int(summary["valid_requests"] or 0)
    general = {
        "total_requests": valid + failed,
        "valid_requests": valid,
        "failed_requests": failed,
        "unique_visitors": int(summary["unique_visitors"]),
        "hosts_per_day": int(summary["hosts_per_day"]),
        "unique_urls": int(summary["unique_urls"]),
        "unique_not_found": int(summary["unique_not_found"]),
        "bandwidth_bytes": int(summary["bandwidth_bytes"] or 0),
        "first_event": _iso_ms(summary["first_ms"], time_zone),
        "last_event": _iso_ms(summary["last_ms"], time_zone),
        "time_zone": time_zone,
        "time_zone_source": "log" if from_log else "option",
        **({"log_offsets": dict(sorted(offsets.items()))} if from_log else {}),
        "log_format": log_format,
        "inputs": inputs,
        "corrupt_files": len(corrupt_files),
    }
    status_codes, status_classes, hourly = _status_and_hours(small, time_zone)
    by_day = _pages_by_day(counts, top)
    urls = counts.where((view == "url") & F.col("key").isNotNull())
    top_urls = urls.select(F.col("key").alias("url_path"), "requests", "bytes")
    not_found = urls.where(F.col("not_found") > 0).select(
        F.col("key").alias("url_path"), F.col("not_found").alias("requests")
    )
    hosts = (
        counts.where(view == "host_day")
        .groupBy(F.col("key").alias("client_host"))
        .agg(F.sum("requests").alias("requests"), F.sum("bytes").alias("bytes"))
    )
    quarantine = _quarantine(counts, failed, reasons, quarantine_path, corrupt_files)

    _describe(counts, "tables")
    return {
        "general": general,
        "status_codes": status_codes,
        "status_classes": status_classes,
        "top_urls": _rows(_top(top_urls, "url_path", top)),
        "top_content_pages_by_day": [{"day": d, "pages": p} for d, p in by_day.items()],
        "hourly": hourly,
        "top_hosts": _rows(_top(hosts, "client_host", top)),
        "top_not_found": _rows(_top(not_found, "url_path", top)),
        "sessions": _sessions(counts.where(view == "visit")),
        "quarantine": quarantine,
    }


def _summary(counts: DataFrame) -> Any:
    """The totals of the report: one global aggregate (one ``Row``)."""
    view = F.col("view")
    summary = counts.agg(
        F.sum(F.when(view == "hour", F.col("requests"))).alias("valid_requests"),
        # GoAccess's visitors: a host_day row is one (host, day, user agent)
        F.count_if((view == "host_day") & (F.col("uniq") > 0)).alias("unique_visitors"),
        F.count_distinct(
            F.when((view == "host_day") & F.col("key").isNotNull(), F.struct("key", "day"))
        ).alias("hosts_per_day"),
        F.count_if((view == "url") & F.col("key").isNotNull()).alias("unique_urls"),
        F.count_if(view == "not_found_request").alias("unique_not_found"),
        F.sum(F.when(view == "hour", F.col("bytes"))).alias("bandwidth_bytes"),
        F.min(F.when(view == "hour", F.col("first_ms"))).alias("first_ms"),
        F.max(F.when(view == "hour", F.col("last_ms"))).alias("last_ms"),
    ).first()
    assert summary is not None  # a global aggregate always has one row
    return summary


def _small_views(counts: DataFrame) -> list[dict[str, Any]]:
    """The small views in one collect: a row per hour, status code and written offset (one
    or two a log), per quarantine reason."""
    view = F.col("view")
    return _rows(
        counts.where(view.isin("hour", "bad"))
        .groupBy(
            "view",
            F.when(view == "bad", F.col("key3")).otherwise(F.col("key")).alias("key"),
            F.when(view == "hour", F.col("key2")).alias("status"),
            F.when(view == "hour", analytics.status_class(F.col("key2").cast("int"))).alias(
                "status_class"
            ),
            F.when(view == "hour", F.col("key3")).alias("offset"),
        )
        .agg(*(F.sum(c).alias(c) for c in ("requests", "bytes", "errors")))
    )


def _written_offsets(small: list[dict[str, Any]]) -> dict[str, int]:
    """Requests per UTC offset written in the lines (``±HH:MM``), from :func:`_small_views`."""
    offsets: dict[str, int] = {}
    for r in small:
        if r["view"] == "hour":
            written = _offset_text(None if r["offset"] is None else int(r["offset"]))
            offsets[written] = offsets.get(written, 0) + r["requests"]
    return offsets


def _status_and_hours(
    small: list[dict[str, Any]], time_zone: str
) -> tuple[dict[str, int], dict[str, int], list[dict[str, Any]]]:
    """The ``status_codes``, ``status_classes`` and ``hourly`` tables of the report."""
    per_code: dict[int, int] = {}
    per_class: dict[str, int] = {}
    per_hour: dict[int, list[int]] = {}  # requests, bytes, errors
    for r in small:
        if r["view"] == "hour":
            code = int(r["status"])
            per_code[code] = per_code.get(code, 0) + r["requests"]
            per_class[r["status_class"]] = per_class.get(r["status_class"], 0) + r["requests"]
            sums = per_hour.setdefault(int(r["key"]), [0, 0, 0])
            for i, c in enumerate(("requests", "bytes", "errors")):
                sums[i] += r[c]
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


def _pages_by_day(counts: DataFrame, top: int) -> dict[str, list[dict[str, Any]]]:
    """The ``top`` content pages of each day (ISO date → ranked rows), in day order."""
    pages = counts.where(F.col("view") == "page_day").select(
        "day", F.col("key").alias("url_path"), "requests"
    )
    by_day: dict[str, list[dict[str, Any]]] = {}
    ranked = analytics.top_n_per_group(pages, ["day"], ["requests"], top).orderBy("day", "rank")
    for r in _rows(ranked):
        by_day.setdefault(r["day"].isoformat(), []).append(
            {"rank": r["rank"], "url_path": r["url_path"], "requests": r["requests"]}
        )
    return by_day


def _quarantine(
    counts: DataFrame,
    failed: int,
    reasons: dict[str, int],
    quarantine_path: str | None,
    corrupt_files: dict[str, str],
) -> dict[str, Any]:
    """The report's ``quarantine`` section; writes every quarantined line, in the order of the
    input, and the corrupt files to ``quarantine_path`` (JSON Lines) when it is given."""
    bad = (
        counts.where(F.col("view") == "bad")
        .orderBy("at")
        .select(
            F.col("key").alias("raw_line"),
            F.col("key2").alias("source_file"),
            F.col("key3").alias("reason"),
            F.lit(None).cast("string").alias("detail"),
        )
    )
    _describe(counts, "quarantine")
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


def _sessions(visits: DataFrame, gap_s: int = 1800) -> dict[str, Any]:
    """The session summary from the ``visit`` rows of :func:`_view_counts` (a visitor's
    requests per minute): merged by Spark's session windows exactly as
    :func:`logstream.analytics.sessions` merges single requests (book Ch. 2, "how long was the
    user session?")."""
    _describe(visits, "sessions")
    merged = visits.groupBy(
        summary_session(gap_s), F.col("key").alias("client_host"), F.col("key2").alias("agent")
    ).agg(
        F.min("first_ms").alias("first_ms"),
        F.max("last_ms").alias("last_ms"),
        F.sum("pages").alias("pages"),
    )
    seconds = F.floor(F.col("last_ms") / 1000) - F.floor(F.col("first_ms") / 1000)
    row = (
        merged.agg(
            F.count("*").alias("sessions"),
            F.avg((F.col("pages") <= 1).cast("double")).alias("bounce_rate"),
            F.avg("pages").alias("pages_per_session"),
            F.kll_sketch_agg_bigint(seconds.cast("bigint")).alias("sketch"),
        )
        .select("*", *analytics.duration_quantiles("sketch"))
        .drop("sketch")
        .first()
    )
    assert row is not None
    return {
        "gap_s": gap_s,
        "sessions": int(row["sessions"]),
        "median_duration_s": row["median_duration_s"],
        "p95_duration_s": row["p95_duration_s"],
        "bounce_rate": None if row["bounce_rate"] is None else round(row["bounce_rate"], 6),
        "pages_per_session": None
        if row["pages_per_session"] is None
        else round(row["pages_per_session"], 3),
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


def _top(rows: DataFrame, key: str, n: int) -> DataFrame:
    """The ``n`` rows with the most requests, ties by ``key``."""
    return rows.orderBy(F.col("requests").desc(), F.col(key)).limit(n)
