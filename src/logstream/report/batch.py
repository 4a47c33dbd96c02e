"""The batch report: GoAccess-class statistics of a set of log files (book Ch. 7, "Batch
Analytics").

:func:`build_report` parses each line once and aggregates each event once: one hash
aggregation keyed by (view, key, day) counts every table of the report (status codes, hours,
URLs, content pages per day, hosts per day, the reference dimensions) in one pass over the
events, the pane idea of the streaming pipeline applied to the whole input
(:func:`_view_counts`); visitor sessions are :func:`logstream.analytics.sessions` (Spark's
session windows) over the same cached events. Only bounded results reach the driver: a handful of totals,
at most 600 status codes, ``top`` rows per table, one row per hour and per day. The keys of the
returned dictionary are stable (see :data:`REPORT_KEYS`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from logstream import analytics
from logstream.analytics.visitors import local_day
from logstream.parsing import REASON_COLUMN, quarantine
from logstream.reference import CRAWLER_CLASS, Enricher, ReferenceTables
from logstream.schema import QUARANTINE_SCHEMA
from logstream.sources.integrity import CORRUPT_FILE_REASON, spark_file_uri

__all__ = ["QUARANTINE_EXAMPLES", "REPORT_KEYS", "build_report", "iso_instant"]

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
)

#: Quarantined lines shown as examples in the report.
QUARANTINE_EXAMPLES = 5


def iso_instant(epoch_seconds: int | None, time_zone: str = "UTC") -> str | None:
    """Format an epoch instant as ISO 8601 with its offset in ``time_zone``."""
    if epoch_seconds is None:
        return None
    return datetime.fromtimestamp(epoch_seconds, UTC).astimezone(ZoneInfo(time_zone)).isoformat()


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict() for row in df.collect()]


def build_report(
    parsed: DataFrame,
    *,
    top: int = 10,
    time_zone: str = "UTC",
    log_format: str = "",
    inputs: list[str] | None = None,
    quarantine_path: str | None = None,
    duplicates_dropped: int | None = None,
    corrupt_files: dict[str, str] | None = None,
    reference: ReferenceTables | None = None,
) -> dict[str, Any]:
    """Compute the batch report from parsed lines.

    Parameters
    ----------
    parsed : DataFrame
        Output of :func:`logstream.parsing.parse` (events and quarantine candidates).
    top : int
        Rows in each top-N table, ≥ 1.
    time_zone : str
        IANA zone for the report's calendar: days of unique visitors and content pages, and
        the labels of hourly traffic. Event times stay UTC instants.
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

    Returns
    -------
    dict
        Keys :data:`REPORT_KEYS`. ``general`` holds ``total_requests``, ``valid_requests``,
        ``failed_requests``, ``unique_visitors``, ``unique_urls``, ``unique_not_found``,
        ``bandwidth_bytes`` (bytes), ``first_event`` and ``last_event`` (ISO 8601), plus the
        echoed settings, ``duplicates_dropped`` and ``corrupt_files``; ``status_codes`` maps a
        status (as text)
        to requests;
        ``status_classes`` maps ``"2xx"`` to requests; the ``top_*`` and ``hourly`` entries are
        lists of row dictionaries; ``sessions`` summarises visitor sessions (30-minute gap,
        :func:`~logstream.analytics.sessions`): ``sessions``, ``median_duration_s`` and
        ``p95_duration_s`` (seconds, KLL estimates), ``bounce_rate`` (0–1) and
        ``pages_per_session``; ``reference`` holds ``crawler_share`` (0–1: requests of the
        ``crawler`` agent class over valid requests), ``agent_classes``, ``sections`` and
        (with a networks table) ``networks``: the top ``top`` keys by requests, each with
        ``requests``, ``bytes``, ``errors`` (status ≥ 400) and ``error_rate``; and
        ``tables``: each table's source and version (SHA-256).

    Raises
    ------
    ValueError
        When ``top`` < 1.
    """
    if top < 1:
        raise ValueError(f"top must be at least 1, got {top}")
    # the cache holds what the report reads: the raw text of quarantined lines only, and the
    # event columns of the views and sessions (a third of the parsed row)
    parsed = parsed.select(
        *_CACHED_COLUMNS,
        F.when(F.col(REASON_COLUMN).isNotNull(), F.col("raw_line")).alias("raw_line"),
        "source_file",
        REASON_COLUMN,
    ).persist(StorageLevel.MEMORY_AND_DISK)
    tables = (reference if reference is not None else ReferenceTables()).current
    try:
        counts = _view_counts(_events_of(parsed), time_zone, tables)
        counts = counts.persist(StorageLevel.MEMORY_AND_DISK)  # a row per key: small
        try:
            report = _build(
                parsed,
                counts,
                top,
                time_zone,
                log_format,
                inputs or [],
                quarantine_path,
                corrupt_files or {},
            )
            report["reference"] = _reference(counts, tables, top)
        finally:
            counts.unpersist()
    finally:
        parsed.unpersist()
    report["general"]["duplicates_dropped"] = duplicates_dropped
    return report


#: The event columns the report reads.
_CACHED_COLUMNS = ("client_host", "user_agent", "event_time", "url_path", "status", "bytes_sent")


def _events_of(parsed: DataFrame) -> DataFrame:
    """The parsed events of the report's cache (its :data:`_CACHED_COLUMNS`)."""
    return parsed.where(F.col(REASON_COLUMN).isNull()).select(*_CACHED_COLUMNS)


def _view_counts(ev: DataFrame, time_zone: str, tables: dict[str, Any]) -> DataFrame:
    """Every table of the report from one aggregation: each event is projected into the views
    it belongs to (``F.inline`` of an array of structs, Spark's ``Expand``), and one hash
    aggregation keyed by (view, key, day) counts them all in one pass (the pane idea of
    :func:`logstream.analytics.panes.fold_panes`, over the whole input).

    Views and keys: ``status`` (the status code), ``hour`` (epoch seconds of the UTC hour),
    ``url`` (every path), ``page_day`` (content pages per calendar day of ``time_zone``),
    ``host_day`` (client hosts per calendar day), and the reference dimensions
    (:data:`_DIMENSIONS`: agent class, section, network; ``unknown`` without a value).

    Returns
    -------
    DataFrame
        ``view``, ``key`` (string), ``day`` (date, null outside the per-day views),
        ``requests``, ``bytes`` (bytes), ``errors`` (status ≥ 400), ``not_found`` (status 404)
        (bigint), ``first_event``, ``last_event`` (timestamp).
    """
    day = local_day(time_zone)
    no_day = F.lit(None).cast("date")
    url = F.col("url_path")

    def view(name: str, key: Column, on_day: Column = no_day, when: Column | None = None) -> Column:
        label = F.lit(name) if when is None else F.when(when, F.lit(name))
        return F.struct(label.alias("view"), key.alias("key"), on_day.alias("day"))

    views = [
        view("status", F.col("status").cast("string")),
        view("hour", F.floor(F.unix_seconds("event_time") / 3600).cast("bigint").cast("string")),
        view("url", url, when=url.isNotNull()),
        view("page_day", url, day, when=analytics.is_content_page()),
        view("host_day", F.col("client_host"), day),
    ]
    dimensions = [n for n in _DIMENSIONS if n != "networks" or "networks" in tables]
    enriched = ev
    if dimensions:
        enriched = Enricher(ev.sparkSession).enrich(ev, tables)
        views += [view(n, F.coalesce(F.col(_DIMENSIONS[n]), F.lit("unknown"))) for n in dimensions]
    status = F.col("status")
    return (
        enriched.select(F.inline(F.array(*views)), "event_time", "status", "bytes_sent")
        .where(F.col("view").isNotNull())
        .groupBy("view", "key", "day")
        .agg(
            F.count("*").alias("requests"),
            F.coalesce(F.sum("bytes_sent"), F.lit(0)).cast("bigint").alias("bytes"),
            F.count_if(status >= analytics.ERROR_STATUS_MIN).alias("errors"),
            F.count_if(status == 404).alias("not_found"),
            F.min("event_time").alias("first_event"),
            F.max("event_time").alias("last_event"),
        )
    )


_DIMENSIONS = {"agent_classes": "agent_class", "sections": "section", "networks": "organisation"}


def _reference(counts: DataFrame, tables: dict[str, Any], top: int) -> dict[str, Any]:
    """Traffic per agent class, section and network (rows of :func:`_view_counts`), top
    ``top`` keys of each."""
    names = [n for n in _DIMENSIONS if n != "networks" or "networks" in tables]
    rows = counts.where(F.col("view").isin(*names)).select(
        F.col("view").alias("dimension"), "key", "requests", "bytes", "errors"
    )
    return _reference_rows(rows, names, tables, top)


def _reference_rows(
    rows: DataFrame, names: list[str], tables: dict[str, Any], top: int
) -> dict[str, Any]:
    out: dict[str, Any] = {n: [] for n in names}
    total = crawlers = 0
    for r in _rows(analytics.top_n_per_group(rows, ["dimension"], ["requests"], top)):
        out[r["dimension"]].append(
            {
                _DIMENSIONS[r["dimension"]]: r["key"],
                "requests": r["requests"],
                "bytes": int(r["bytes"] or 0),
                "errors": r["errors"],
                "error_rate": round(r["errors"] / r["requests"], 6),
            }
        )
    for r in _rows(
        rows.where(F.col("dimension") == "agent_classes").agg(
            F.sum("requests").alias("total"),
            F.sum(F.when(F.col("key") == CRAWLER_CLASS, F.col("requests"))).alias("crawlers"),
        )
    ):
        total, crawlers = int(r["total"] or 0), int(r["crawlers"] or 0)
    return {
        "crawler_share": round(crawlers / total, 6) if total else None,
        **out,
        "tables": {k: {"source": t.source, "version": t.digest} for k, t in sorted(tables.items())},
    }


def _build(
    parsed: DataFrame,
    counts: DataFrame,
    top: int,
    time_zone: str,
    log_format: str,
    inputs: list[str],
    quarantine_path: str | None,
    corrupt_files: dict[str, str],
) -> dict[str, Any]:
    bad = quarantine(parsed)
    if corrupt_files:
        bad = bad.unionByName(
            parsed.sparkSession.createDataFrame(
                [
                    (None, spark_file_uri(f), CORRUPT_FILE_REASON, e)
                    for f, e in sorted(corrupt_files.items())
                ],
                QUARANTINE_SCHEMA,
            )
        )

    reasons = {
        r["reason"]: r["lines"]
        for r in _rows(
            parsed.where(F.col(REASON_COLUMN).isNotNull())
            .groupBy(F.col(REASON_COLUMN).alias("reason"))
            .agg(F.count("*").alias("lines"))
        )
    }
    failed = sum(reasons.values())
    view = F.col("view")
    summary = counts.agg(
        F.sum(F.when(view == "hour", F.col("requests"))).alias("valid_requests"),
        F.count_if((view == "host_day") & F.col("key").isNotNull()).alias("unique_visitors"),
        F.count_if(view == "url").alias("unique_urls"),
        F.count_if((view == "url") & (F.col("not_found") > 0)).alias("unique_not_found"),
        F.sum(F.when(view == "hour", F.col("bytes"))).alias("bandwidth_bytes"),
        F.unix_seconds(F.min("first_event")).alias("first_s"),
        F.unix_seconds(F.max("last_event")).alias("last_s"),
    ).first()
    assert summary is not None  # a global aggregate always has one row
    valid = int(summary["valid_requests"] or 0)
    general = {
        "total_requests": valid + failed,
        "valid_requests": valid,
        "failed_requests": failed,
        "unique_visitors": int(summary["unique_visitors"]),
        "unique_urls": int(summary["unique_urls"]),
        "unique_not_found": int(summary["unique_not_found"]),
        "bandwidth_bytes": int(summary["bandwidth_bytes"] or 0),
        "first_event": iso_instant(summary["first_s"]),
        "last_event": iso_instant(summary["last_s"]),
        "time_zone": time_zone,
        "log_format": log_format,
        "inputs": inputs,
        "corrupt_files": len(corrupt_files),
    }

    # the small views (a row per status code, per hour) in one collect
    small = _rows(
        counts.where(view.isin("status", "hour")).select(
            "view", F.col("key").cast("bigint").alias("key"), "requests", "bytes", "errors"
        )
    )
    codes = sorted((r["key"], r["requests"]) for r in small if r["view"] == "status")
    status_codes = {str(code): n for code, n in codes}
    status_classes: dict[str, int] = {}
    for code, n in codes:
        label = f"{code // 100}xx"
        status_classes[label] = status_classes.get(label, 0) + n
    status_classes = dict(sorted(status_classes.items()))
    hourly = [
        {
            "hour": iso_instant(r["key"] * 3600, time_zone),
            "requests": r["requests"],
            "bytes": r["bytes"],
            "error_rate": round(r["errors"] / r["requests"], 6),
        }
        for r in sorted((r for r in small if r["view"] == "hour"), key=lambda r: r["key"])
    ]

    pages = counts.where(view == "page_day").select(
        "day", F.col("key").alias("url_path"), "requests"
    )
    by_day: dict[str, list[dict[str, Any]]] = {}
    for r in _rows(
        analytics.top_n_per_group(pages, ["day"], ["requests"], top).orderBy("day", "rank")
    ):
        by_day.setdefault(r["day"].isoformat(), []).append(
            {"rank": r["rank"], "url_path": r["url_path"], "requests": r["requests"]}
        )
    urls = counts.where(view == "url")
    top_urls = urls.select(F.col("key").alias("url_path"), "requests", "bytes")
    not_found = urls.where(F.col("not_found") > 0).select(
        F.col("key").alias("url_path"), F.col("not_found").alias("requests")
    )
    hosts = (
        counts.where(view == "host_day")
        .groupBy(F.col("key").alias("client_host"))
        .agg(F.sum("requests").alias("requests"), F.sum("bytes").alias("bytes"))
    )

    visits = (
        analytics.sessions(_events_of(parsed))
        .agg(
            F.count("*").alias("sessions"),
            F.avg(F.col("bounce").cast("double")).alias("bounce_rate"),
            F.avg("pages").alias("pages_per_session"),
            F.kll_sketch_agg_bigint("duration_s").alias("sketch"),
        )
        .select("*", *analytics.duration_quantiles("sketch"))
        .drop("sketch")
        .first()
    )
    assert visits is not None
    sessions = {
        "gap_s": 1800,
        "sessions": int(visits["sessions"]),
        "median_duration_s": visits["median_duration_s"],
        "p95_duration_s": visits["p95_duration_s"],
        "bounce_rate": None if visits["bounce_rate"] is None else round(visits["bounce_rate"], 6),
        "pages_per_session": None
        if visits["pages_per_session"] is None
        else round(visits["pages_per_session"], 3),
    }

    examples = _rows(quarantine(parsed).limit(QUARANTINE_EXAMPLES)) if failed else []
    if quarantine_path:
        bad.write.mode("overwrite").json(quarantine_path)

    return {
        "general": general,
        "status_codes": status_codes,
        "status_classes": status_classes,
        "top_urls": _rows(_top(top_urls, "url_path", top)),
        "top_content_pages_by_day": [{"day": d, "pages": p} for d, p in by_day.items()],
        "hourly": hourly,
        "top_hosts": _rows(_top(hosts, "client_host", top)),
        "top_not_found": _rows(_top(not_found, "url_path", top)),
        "sessions": sessions,
        "quarantine": {
            "failed_lines": failed,
            "reasons": reasons,
            "examples": examples,
            "corrupt_files": [
                {"source_file": spark_file_uri(f), "error": e}
                for f, e in sorted(corrupt_files.items())
            ],
            "path": quarantine_path,
        },
    }


def _top(rows: DataFrame, key: str, n: int) -> DataFrame:
    """The ``n`` rows with the most requests, ties by ``key``."""
    return rows.orderBy(F.col("requests").desc(), F.col(key)).limit(n)
