"""The batch report: GoAccess-class statistics of a set of log files (book Ch. 7, "Batch
Analytics").

:func:`build_report` runs the analytics functions of :mod:`logstream.analytics` over parsed
lines and returns plain, JSON-ready Python data. Only bounded results reach the driver: a
handful of totals, at most 600 status codes, ``top`` rows per table, one row per hour and per
day. The keys of the returned dictionary are stable (see :data:`REPORT_KEYS`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from logstream import analytics
from logstream.parsing import REASON_COLUMN, events, quarantine
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
    parsed = parsed.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        report = _build(
            parsed, top, time_zone, log_format, inputs or [], quarantine_path, corrupt_files or {}
        )
        report["reference"] = _reference(
            events(parsed), reference if reference is not None else ReferenceTables(), top
        )
    finally:
        parsed.unpersist()
    report["general"]["duplicates_dropped"] = duplicates_dropped
    return report


_DIMENSIONS = {"agent_classes": "agent_class", "sections": "section", "networks": "organisation"}


def _reference(ev: DataFrame, reference: ReferenceTables, top: int) -> dict[str, Any]:
    """Traffic per agent class, section and network: one aggregation over the union of the
    three projections, top ``top`` keys of each."""
    tables = reference.current
    enriched = Enricher(ev.sparkSession).enrich(
        ev.select("client_host", "user_agent", "url_path", "status", "bytes_sent"), tables
    )
    names = [n for n in _DIMENSIONS if n != "networks" or "networks" in tables]
    rows = (
        enriched.select(
            F.explode(
                F.array(
                    *(
                        F.struct(
                            F.lit(n).alias("dimension"),
                            F.coalesce(F.col(_DIMENSIONS[n]), F.lit("unknown")).alias("key"),
                        )
                        for n in names
                    )
                )
            ).alias("d"),
            "status",
            "bytes_sent",
        )
        .groupBy(F.col("d.dimension").alias("dimension"), F.col("d.key").alias("key"))
        .agg(
            F.count("*").alias("requests"),
            F.sum("bytes_sent").alias("bytes"),
            F.count_if(F.col("status") >= 400).alias("errors"),
        )
    )
    rows = rows.persist(StorageLevel.MEMORY_AND_DISK)  # small: a row per key
    try:
        return _reference_rows(rows, names, tables, top)
    finally:
        rows.unpersist()


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
    top: int,
    time_zone: str,
    log_format: str,
    inputs: list[str],
    quarantine_path: str | None,
    corrupt_files: dict[str, str],
) -> dict[str, Any]:
    ev = events(parsed)
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
    summary = (
        analytics.general_summary(ev, time_zone)
        .select(
            "*",
            F.unix_seconds("first_event").alias("first_s"),
            F.unix_seconds("last_event").alias("last_s"),
        )
        .first()
    )
    assert summary is not None  # a global aggregate always has one row
    valid = int(summary["valid_requests"])
    general = {
        "total_requests": valid + failed,
        "valid_requests": valid,
        "failed_requests": failed,
        "unique_visitors": int(summary["unique_visitors"]),
        "unique_urls": int(summary["unique_urls"]),
        "unique_not_found": int(summary["unique_not_found"]),
        "bandwidth_bytes": int(summary["bandwidth_bytes"]),
        "first_event": iso_instant(summary["first_s"]),
        "last_event": iso_instant(summary["last_s"]),
        "time_zone": time_zone,
        "log_format": log_format,
        "inputs": inputs,
        "corrupt_files": len(corrupt_files),
    }

    status_codes = {str(r["status"]): r["requests"] for r in _rows(analytics.status_counts(ev))}
    status_classes = {
        r["status_class"]: r["requests"] for r in _rows(analytics.status_class_counts(ev))
    }

    by_day: dict[str, list[dict[str, Any]]] = {}
    for r in _rows(analytics.top_content_pages_by_day(ev, top, time_zone)):
        by_day.setdefault(r["day"].isoformat(), []).append(
            {"rank": r["rank"], "url_path": r["url_path"], "requests": r["requests"]}
        )

    hourly = [
        {
            "hour": iso_instant(r["start_s"], time_zone),
            "requests": r["requests"],
            "bytes": r["bytes"],
            "error_rate": round(r["error_rate"], 6),
        }
        for r in _rows(
            analytics.traffic_per_window(ev, "1 hour")
            .select(
                F.unix_seconds("window_start").alias("start_s"), "requests", "bytes", "error_rate"
            )
            .orderBy("start_s")
        )
    ]

    visits = (
        analytics.sessions(ev)
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
        "top_urls": _rows(analytics.top_urls(ev, top)),
        "top_content_pages_by_day": [{"day": d, "pages": p} for d, p in by_day.items()],
        "hourly": hourly,
        "top_hosts": _rows(analytics.top_hosts(ev, top)),
        "top_not_found": _rows(analytics.top_not_found(ev, top)),
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
