"""The report's ranked tables, every one of them from one Spark job: the top URLs, hosts,
not-found paths and content pages of each day, GoAccess's panels and the reference
dimensions.

The rows of the report's one aggregation (:func:`logstream.report.views.view_counts`) are
projected into the table items they belong to (``F.inline`` of an array of structs, as the
aggregation itself projects the lines), and one aggregation sums every table's items at once,
keyed by the table and the item's 64-bit hash (:func:`~logstream.report.views.item_hash`),
so that an item's visitors (its ``pair`` rows, which carry only the hash) add up with its
hits and bytes (its named rows). One exchange by table serves two windows: each item's rank
among its siblings and each table's totals. Only the ranked rows reach the driver: ``depth``
items a table (a family's children too), every day of the visitors panel, every reference
class.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from logstream.analytics.geo import host_locations
from logstream.analytics.topk import ranking_window
from logstream.analytics.useragents import agent_families
from logstream.reference import CRAWLER_CLASS, Enricher
from logstream.reference.tables import Table
from logstream.report.views import PAIR_PANELS, item_hash

__all__ = ["ITEM_TABLES", "TableRows", "ranked_tables"]

#: The tables :func:`ranked_tables` ranks besides GoAccess's panels: the report's top tables
#: and its reference dimensions.
ITEM_TABLES = (
    "top_urls",
    "top_not_found",
    "top_hosts",
    "top_pages",
    "agent_classes",
    "sections",
    "networks",
)
#: The panels whose items are families with children (versions, countries), and the columns
#: naming a visitor's child and family in each.
NESTED = {
    "os": ("os_version", "os"),
    "browsers": ("browser_version", "browser"),
    "geolocation": ("geo_country", "geo_continent"),
}
#: The tables of which every row is collected (a row per day, per reference class).
_WHOLE = ("visitors", "agent_classes", "sections", "networks")
_PANEL_OF_CODE = {code: panel for panel, code in PAIR_PANELS.items()}
_NAMED_COLUMNS = (
    "os",
    "os_version",
    "browser",
    "browser_version",
    "geo_country",
    "geo_continent",
    "agent_class",
    "organisation",
    "section",
)


class TableRows:
    """The collected rows of :func:`ranked_tables`, by table.

    Attributes
    ----------
    rows : dict
        Table → list of row dictionaries (``grp``, ``data``, ``parent``, ``mp``, ``hits``,
        ``visitors``, ``bytes``, ``errors``, ``rank``), in rank order within each group.
    totals : dict
        Table → ``{"hits", "visitors", "bytes", "errors", "items"}`` over its top-level items.
    """

    def __init__(self, collected: list[dict[str, Any]]) -> None:
        self.rows: dict[str, list[dict[str, Any]]] = {}
        self.totals: dict[str, dict[str, int]] = {}
        for r in sorted(collected, key=lambda r: (r["table"], r["grp"] or "", r["rank"])):
            self.rows.setdefault(r["table"], []).append(r)
            if r["total_items"] is not None:
                self.totals[r["table"]] = {
                    k: int(r[f"total_{k}"] or 0)
                    for k in ("hits", "visitors", "bytes", "errors", "items")
                }

    def top(self, table: str, n: int | None = None, parent: str | None = None) -> list[dict]:
        """The first ``n`` (all with None) rows of ``table`` whose parent is ``parent``."""
        found = [r for r in self.rows.get(table, []) if r["parent"] == parent]
        return found if n is None else found[:n]

    def total(self, table: str, key: str) -> int:
        """A table's total ``key`` (0 for a table with no row)."""
        return self.totals.get(table, {}).get(key, 0)


def ranked_tables(
    counts: DataFrame,
    panels: Sequence[str],
    depth: int,
    tables: dict[str, Table],
    with_agents: bool | None,
) -> TableRows:
    """Rank every table of the report in one job.

    Parameters
    ----------
    counts : DataFrame
        The rows of :func:`~logstream.report.views.view_counts` (persisted).
    panels : sequence of str
        GoAccess's panels shown. The not-found and visitors panels are ranked in any case
        (the report's ``general`` reads their totals).
    depth : int
        Items kept per table and group (children per family too).
    tables : dict
        The reference tables (:class:`~logstream.reference.ReferenceTables` ``current``).
    with_agents : bool or None
        The log has user agents (the format's fields); None: look at the rows.

    Returns
    -------
    TableRows
    """
    view = F.col("view")
    by_agent, agents_known = _agents(counts.where(view == "agent"), panels, tables, with_agents)
    rows = [
        _hosts(counts.where(view == "host"), panels, tables),
        by_agent,
        _sectioned(counts.where(view == "url"), tables),
        counts.where(view.isin("day", "request", "page", "referrer", "user", "vhost", "pair")),
    ]
    union = _aligned(rows[0])
    for part in rows[1:]:
        union = union.unionByName(_aligned(part))
    shown = set(panels) | {"not_found", "visitors"}
    if not agents_known:  # a log without user agents: no OS or browser panel, as GoAccess
        shown -= {"os", "browsers"}
    entries = _entries(shown, "networks" in tables)
    items = (
        union.select(F.inline(F.array(*entries)))
        .where(F.col("table").isNotNull())
        .groupBy("table", "grp", "parent", "key")
        .agg(
            F.max("data").alias("data"),
            F.max("mp").alias("mp"),
            *(F.sum(m).alias(m) for m in ("hits", "visitors", "bytes", "errors")),
        )
    )
    root = F.col("parent").isNull()
    by_table = Window.partitionBy("table")
    siblings = ranking_window(["data", "mp"], ["table", "grp", "parent"], ["hits"])
    metrics = ("hits", "visitors", "bytes", "errors")
    ranked = items.drop("key").select(
        "*",
        *(F.sum(F.when(root, F.col(m))).over(by_table).alias(f"total_{m}") for m in metrics),
        F.count_if(root).over(by_table).alias("total_items"),
        F.row_number().over(siblings).alias("rank"),
    )
    kept = ranked.where((F.col("rank") <= depth) | F.col("table").isin(*_WHOLE))
    return TableRows([r.asDict() for r in kept.collect()])


def crawler_share(rows: TableRows) -> float | None:
    """Requests of the crawler agent class over all requests (0–1), None without any."""
    total = rows.total("agent_classes", "hits")
    crawlers = sum(r["hits"] for r in rows.top("agent_classes") if r["data"] == CRAWLER_CLASS)
    return round(crawlers / total, 6) if total else None


def _hosts(hosts: DataFrame, panels: Sequence[str], tables: dict[str, Table]) -> DataFrame:
    """The rows of the client hosts (``s1``), with their country and continent
    (``geo_country``, ``geo_continent``: the geolocation panel, each host located once in
    the Python workers) and its network (the reference dimension)."""
    if "geolocation" in panels:
        located = host_locations(hosts.select(F.col("s1").alias("client_host"))).select(
            F.col("client_host").alias("_host"),
            F.col("country").alias("geo_country"),
            F.col("continent").alias("geo_continent"),
        )
        hosts = hosts.join(located, hosts["s1"].eqNullSafe(located["_host"]), "left").drop("_host")
    if "networks" not in tables:
        return hosts
    enriched = Enricher(hosts.sparkSession).enrich(
        hosts.select(
            "*",
            F.col("s1").alias("client_host"),
            F.lit(None).cast("string").alias("user_agent"),
            F.lit(None).cast("string").alias("url_path"),
        ),
        {"networks": tables["networks"]},
    )
    return enriched.select(*hosts.columns, "organisation")


def _agents(
    agents: DataFrame, panels: Sequence[str], tables: dict[str, Table], with_agents: bool | None
) -> tuple[DataFrame, bool]:
    """The rows of the user agents (``s2``; ``-`` for none), with their agent class (the
    reference dimension) and, when an OS or browser panel is shown, its OS and browser
    (:data:`~logstream.analytics.useragents.FAMILY_SCHEMA`' columns: each user agent
    classified once, in the Python workers). The flag says whether the log has user agents
    (True when neither panel is shown): a log without them has no OS or browser panel, as in
    GoAccess."""
    known = F.when(F.col("s2") != "-", F.col("s2"))
    used = {k: t for k, t in tables.items() if k == "agents"}
    enriched = Enricher(agents.sparkSession).enrich(
        agents.select(
            "*",
            F.lit(None).cast("string").alias("client_host"),
            known.alias("user_agent"),
            F.lit(None).cast("string").alias("url_path"),
        ),
        used,
    )
    agents = enriched.select(*agents.columns, "agent_class")
    if "os" not in panels and "browsers" not in panels:
        return agents, True
    named = agents.where(F.col("s2") != "-")
    if with_agents is False or (with_agents is None and named.isEmpty()):
        return agents, False
    crawler = F.col("agent_class") == CRAWLER_CLASS
    families = agent_families(named.select(F.col("s2").alias("user_agent"), "agent_class"), crawler)
    joined = agents.join(families, agents["s2"] == families["user_agent"], "left")
    return joined.drop("user_agent"), True


def _sectioned(url_rows: DataFrame, tables: dict[str, Table]) -> DataFrame:
    """The rows of the paths (``s1``) with their section (the reference dimension)."""
    used = {k: t for k, t in tables.items() if k == "sections"}
    enriched = Enricher(url_rows.sparkSession).enrich(
        url_rows.select(
            "*",
            F.lit(None).cast("string").alias("client_host"),
            F.lit(None).cast("string").alias("user_agent"),
            F.col("s1").alias("url_path"),
        ),
        used,
    )
    return enriched.drop(
        "client_host", "user_agent", "url_path", "organisation", "country", "agent_class"
    )


#: The columns :func:`_aligned` gives every part of the union, with their type.
_UNION_COLUMNS = {
    "view": "string",
    "s1": "string",
    "s2": "string",
    "s3": "string",
    "l1": "bigint",
    "l3": "bigint",
    **{m: "bigint" for m in ("requests", "bytes", "errors", "not_found", "visitors")},
    **dict.fromkeys(_NAMED_COLUMNS, "string"),
}


def _aligned(rows: DataFrame) -> DataFrame:
    """``rows`` with the columns every projection reads (:data:`_UNION_COLUMNS`; a column a
    part lacks is null)."""
    present = set(rows.columns)
    return rows.select(
        *(
            (F.col(c) if c in present else F.lit(None)).cast(kind).alias(c)
            for c, kind in _UNION_COLUMNS.items()
        )
    )


def _entries(shown: set[str], networks: bool) -> list[Column]:
    """The structs of the items one row of the counts belongs to, for ``F.inline`` (see the
    module docstring): ``table``, ``grp``, ``parent``, ``key`` (the item's hash), ``data``,
    ``mp`` (a request's method and protocol), ``hits``, ``visitors``, ``bytes``, ``errors``."""
    view = F.col("view")
    none = F.lit(None).cast("string")
    zero = F.lit(0).cast("bigint")
    s1, s2 = F.col("s1"), F.col("s2")
    requests, size, errors = F.col("requests"), F.col("bytes"), F.col("errors")
    counted = F.col("visitors")

    def entry(
        table: str | Column,
        when: Column,
        data: Column,
        *,
        hits: Column = requests,
        visitors: Column = zero,
        size: Column = size,
        key: Column | None = None,
        grp: Column = none,
        parent: Column = none,
        mp: Column = none,
        with_errors: bool = False,
    ) -> Column:
        table_col = F.lit(table) if isinstance(table, str) else table
        return F.struct(
            F.when(when, table_col).alias("table"),
            grp.alias("grp"),
            parent.alias("parent"),
            (item_hash(data) if key is None else key).alias("key"),
            data.alias("data"),
            mp.alias("mp"),
            hits.cast("bigint").alias("hits"),
            visitors.cast("bigint").alias("visitors"),
            size.alias("bytes"),
            (errors if with_errors else zero).alias("errors"),
        )

    is_request, is_host, is_agent = view == "request", view == "host", view == "agent"
    is_url = view == "url"
    out = [
        entry("top_urls", is_url & s1.isNotNull(), s1),
        entry(
            "top_not_found",
            is_url & s1.isNotNull() & (F.col("not_found") > 0),
            s1,
            hits=F.col("not_found"),
        ),
        entry("top_hosts", is_host, s1),
        entry("top_pages", view == "page", s1, grp=_iso_day(F.col("l1"))),
        entry("agent_classes", is_agent, F.col("agent_class"), with_errors=True),
        entry("sections", is_url, F.col("section"), with_errors=True),
    ]
    if networks:
        out.append(
            entry(
                "networks",
                is_host,
                F.coalesce("organisation", F.lit("unknown")),
                with_errors=True,
            )
        )
    kinds = F.create_map(
        *(
            F.lit(x)
            for p in ("requests", "static_requests", "not_found")
            for x in (PAIR_PANELS[p], p)
        )
    )
    request_panel = F.try_element_at(kinds, F.col("l1"))
    shown_requests = [p for p in ("requests", "static_requests", "not_found") if p in shown]
    if shown_requests:
        out.append(
            entry(
                request_panel,
                is_request & request_panel.isin(*shown_requests),
                s1,
                mp=s2,
                key=item_hash(s1, s2),
            )
        )
    codes = F.create_map(*(F.lit(x) for code, p in _PANEL_OF_CODE.items() for x in (code, p)))
    pair_panel = F.try_element_at(codes, F.col("l3"))
    out.append(
        entry(
            pair_panel,
            (view == "pair") & pair_panel.isin(*shown),
            none,
            hits=zero,
            size=zero,
            visitors=F.col("visitors"),
            key=F.col("l1"),
        )
    )
    if "visitors" in shown:
        out.append(entry("visitors", view == "day", _iso_day(F.col("l1")), visitors=counted))
    if "hosts" in shown:
        out.append(entry("hosts", is_host, s1, visitors=counted))
    for panel, (child, family) in NESTED.items():
        if panel in shown:
            unknown = F.lit("Unknown")
            parent = F.coalesce(F.col(family), unknown)
            child_name = F.coalesce(F.col(child), unknown)
            rows_of = is_host if panel == "geolocation" else is_agent
            out += [
                entry(panel, rows_of, child_name, visitors=counted, parent=parent),
                entry(panel, rows_of, parent, visitors=counted),
            ]
    for panel, name, column, when in (
        ("referrers", "referrer", s1, s1.isNotNull()),
        ("referring_sites", "referrer", s2, s2 != ""),
        ("remote_user", "user", s1, s1.isNotNull()),
        ("virtual_hosts", "vhost", s1, s1.isNotNull()),
    ):
        if panel in shown:
            out.append(entry(panel, (view == name) & when, column))
    return out


def _iso_day(days: Column) -> Column:
    """Days since 1970-01-01 as an ISO date (``1995-07-09``); null for a value that is not a
    day (the struct of an item is computed for every row, its table null for most)."""
    return F.date_from_unix_date(days.try_cast("int")).cast("string")
