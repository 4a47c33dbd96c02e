"""The report's ``reference`` section: traffic per agent class, site section and network,
from the rows of the report's one aggregation (:func:`logstream.report.batch._view_counts`)."""

from __future__ import annotations

from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from logstream import analytics
from logstream.reference import CRAWLER_CLASS, Enricher

__all__ = ["reference_section"]


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict() for row in df.collect()]


_DIMENSIONS = {"agent_classes": "agent_class", "sections": "section", "networks": "organisation"}


def _dimensions(tables: dict[str, Any]) -> list[str]:
    """The reference dimensions the report shows (networks only with a networks table)."""
    return [n for n in _DIMENSIONS if n != "networks" or "networks" in tables]


#: The view of :func:`_view_counts` each reference dimension is read from, and the event
#: column its key fills (a section depends only on the path, an agent class only on the user
#: agent, a network only on the host).
_DIMENSION_SOURCES = {
    "sections": ("url", "url_path", "sections"),
    "agent_classes": ("visit", "user_agent", "agents"),
    "networks": ("host_day", "client_host", "networks"),
}


def reference_section(counts: DataFrame, tables: dict[str, Any], top: int) -> dict[str, Any]:
    """Traffic per agent class, section and network, top ``top`` keys of each.

    Each dimension is a function of one event column, so it is computed on the rows of
    :func:`_view_counts` keyed by that column (about ten thousand paths, a few million visit
    summaries, a million host-days on 10M lines) rather than on every event: the same broadcast
    joins as ``logstream run`` (:class:`~logstream.reference.Enricher`), then a sum per key
    (``unknown`` without a value).
    """
    names = _dimensions(tables)
    enricher = Enricher(counts.sparkSession)
    parts = []
    for name in names:
        view, column, kind = _DIMENSION_SOURCES[name]
        # a visit's user agent is key2, "" when there was none
        key = F.when(F.col("key2") != "", F.col("key2")) if view == "visit" else F.col("key")
        rows = counts.where(F.col("view") == view).select(
            *(
                (key if c == column else F.lit(None).cast("string")).alias(c)
                for c in ("client_host", "user_agent", "url_path")
            ),
            "requests",
            "bytes",
            "errors",
        )
        used = {k: t for k, t in tables.items() if k == kind}
        enriched = enricher.enrich(rows, used)
        parts.append(
            enriched.groupBy(
                F.lit(name).alias("dimension"),
                F.coalesce(F.col(_DIMENSIONS[name]), F.lit("unknown")).alias("key"),
            ).agg(*(F.sum(c).alias(c) for c in ("requests", "bytes", "errors")))
        )
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    union = union.persist(StorageLevel.MEMORY_AND_DISK)  # a row per key, read twice
    try:
        return _reference_rows(union, names, tables, top)
    finally:
        union.unpersist()


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
