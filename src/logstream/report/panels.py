"""GoAccess's panels in the batch report: daily visitors, hosts, static files, not-found
requests, operating systems, browsers, referrers, referring sites, remote users and geolocation.

Each panel holds GoAccess's metrics per item: ``hits`` (requests), ``visitors`` and ``bytes``.
The definitions are GoAccess's (1.7, ``src/parser.c`` and ``src/gstorage.c``), so that the
two reports agree on the same log:

* a **visitor** is a client host, a calendar day (the date written in the line) and a user
  agent; requests answered with a 4xx status do not make a visitor (GoAccess's default,
  ``4xx-to-unique-count false``). An item's ``visitors`` counts the distinct visitors among
  its requests;
* a **request** is the request's target with its query string, ``%xx``-decoded, and with its
  method and protocol (``GET /a.css HTTP/1.1``);
* a **not-found** request is one answered 404; a **static** request is any other whose target
  ends with a static extension (:data:`STATIC_EXTENSIONS`, case-insensitive; a target with a
  query string after the extension is not static); the **requests** panel (GoAccess's
  "requested files") holds the others: neither answered 404 nor static;
* a **referring site** is the referrer's host: the text after its first ``//`` up to the next
  ``/``. With ``site_host`` the site's own referrals are left out of both referrer panels
  (GoAccess's ``--hide-referer``);
* **operating systems** and **browsers** are families with versions as children
  (:mod:`logstream.analytics.useragents`): a visitor's user agent names one child, so a
  family's visitors are the sum of its children's;
* **geolocation** is the client's continent with its countries as children
  (:mod:`logstream.analytics.geo`: GoAccess's names, ``NA North America`` and
  ``US United States``); a host name is ``Unresolved``, never looked up.

Where logstream differs on purpose: the referrers panel leaves out requests with no referrer
(GoAccess lists them as ``-``), and the visitors panel's days are ISO dates (``2015-05-17``,
GoAccess writes ``20150517``).

The panels are rows of the report's one aggregation (:func:`panel_views`, in
:func:`logstream.report.batch._view_counts`): each line is projected into the panels it
belongs to, keyed by the panel's item and its visitor (host, day and user agent; one 64-bit
hash for the item panels). A second, small aggregation counts every panel's items at once,
each row of the first projected into the items it belongs to, and one pair of windows ranks
them and sums each panel's totals (:func:`build_panels`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from logstream.analytics.geo import host_locations
from logstream.analytics.requests import (
    STATIC_EXTENSIONS,
    event_request_target,
    is_static_target,
    referring_site,
    shown_referrer,
)
from logstream.analytics.topk import ranking_window
from logstream.analytics.useragents import agent_families
from logstream.config import PANEL_TITLES, PANELS, check_panels
from logstream.reference import CRAWLER_CLASS, agent_class_column
from logstream.reference.tables import Table

__all__ = [
    "PANELS",
    "STATIC_EXTENSIONS",
    "build_panels",
    "check_panels",
    "panel_inputs",
    "panel_views",
]

#: The event columns the panels read, beyond the report's own.
PANEL_COLUMNS = ("query_string", "method", "protocol", "referrer", "user", "virtual_host")

#: The rows of :func:`panel_views` each panel is read from.
_AGENT_VIEW = "p_agent"  # key: user agent ("-" for none), key2: host; for _FROM_AGENTS
_ITEM_VIEWS = {  # key: the item, at: the visitor (a hash of host, day and user agent)
    "requests": "p_request",
    "static_requests": "p_static",
    "not_found": "p_404",
    "referrers": "p_referrer",
    "referring_sites": "p_site",
    "remote_user": "p_user",
    "virtual_hosts": "p_vhost",
}
_FROM_AGENTS = ("visitors", "hosts", "os", "browsers", "geolocation")
#: The panels of requests, keyed by target, method and protocol.
_REQUEST_PANELS = ("requests", "static_requests", "not_found")
#: The per-line columns of :func:`panel_inputs`, read by :func:`panel_views`.
_P_AGENT, _P_VISITOR, _P_TARGET = "_p_agent", "_p_visitor", "_p_target"
_P_METHOD_PROTOCOL, _P_SITE = "_p_method_protocol", "_p_site"
#: The panels whose items are families with children (versions, countries).
_NESTED = ("os", "browsers", "geolocation")


def panel_views(
    view: Callable[..., Column],
    day: Column,
    is_event: Column,
    *,
    panels: Sequence[str],
    static_extensions: Sequence[str] = (),
    site_host: str | None = None,
) -> list[Column]:
    """The rows each line adds to the report's aggregation for ``panels``.

    Parameters
    ----------
    view : callable
        ``view(name, key, key2, key3, on_day=, at=, when=, key4=)`` of
        :func:`logstream.report.batch._view_counts`: one struct per view.
    day : Column
        The line's calendar day.
    is_event : Column
        The line parsed (it is not quarantined).
    panels : sequence of str
        The panels shown (of :data:`PANELS`).
    static_extensions : sequence of str
        Extensions added to :data:`STATIC_EXTENSIONS`.
    site_host : str, optional
        Your own site's host: its referrals leave the referrer panels.

    Returns
    -------
    list of Column
        Structs for ``F.inline``: ``p_agent`` (user agent, host, day) when a panel of visitors,
        hosts, OS or browsers is shown; ``p_request``, ``p_static`` and ``p_404`` (the
        request, ``method protocol``, the visitor's hash in ``at``); ``p_referrer``,
        ``p_site`` and ``p_user`` (the item, the visitor's hash).
    """
    host, agent = F.col("client_host"), F.col(_P_AGENT)
    visitor = F.col(_P_VISITOR)
    out = []
    if any(p in panels for p in _FROM_AGENTS):
        out.append(view(_AGENT_VIEW, agent, host, on_day=day, when=is_event))
    if any(p in panels for p in _REQUEST_PANELS):
        target, method_protocol = F.col(_P_TARGET), F.col(_P_METHOD_PROTOCOL)
        is_404 = F.col("status") == 404
        static_target = is_static_target(target, static_extensions)
        is_static = ~is_404 & static_target
        for panel, when in (
            ("requests", ~is_404 & ~static_target),
            ("static_requests", is_static),
            ("not_found", is_404),
        ):
            if panel in panels:
                view_name = _ITEM_VIEWS[panel]
                out.append(
                    view(view_name, target, key4=method_protocol, at=visitor, when=is_event & when)
                )
    referrer = F.col("referrer")
    site = F.col(_P_SITE)
    shown = shown_referrer(referrer, site, site_host)
    for panel, key, when in (
        ("referrers", referrer, shown),
        ("referring_sites", site, shown & (site != "")),
        ("remote_user", F.col("user"), F.col("user").isNotNull()),
        ("virtual_hosts", F.col("virtual_host"), F.col("virtual_host").isNotNull()),
    ):
        if panel in panels:
            out.append(view(_ITEM_VIEWS[panel], key, at=visitor, when=is_event & when))
    return out


def panel_inputs(
    day: Column, panels: Sequence[str], protocol_required: bool = False
) -> dict[str, Column]:
    """The columns :func:`panel_views` reads, computed once per line before the views: the
    views are the fields of one generator's array, where Spark evaluates an expression each
    time it is written. ``protocol_required``: the format has a protocol, so a request without
    a valid one is ``-`` (:func:`~logstream.analytics.requests.request_target`)."""
    if not panels:
        return {}
    agent = F.coalesce(F.col("user_agent"), F.lit("-"))
    # an item's visitors are distinct (host, day, user agent): one 64-bit hash in the
    # aggregation's key instead of three strings (two visitors of one item collide with a
    # probability below n²/2⁶⁵: 3 × 10⁻⁸ for a million)
    out = {_P_AGENT: agent, _P_VISITOR: F.xxhash64(F.col("client_host"), day, agent)}
    target, method_protocol = event_request_target(protocol_required=protocol_required)
    out[_P_TARGET], out[_P_METHOD_PROTOCOL] = target, method_protocol
    out[_P_SITE] = referring_site(F.col("referrer"))
    return out


def build_panels(
    counts: DataFrame, panels: Sequence[str], top: int, agents: Table | None
) -> dict[str, Any]:
    """The panels from the rows of the report's aggregation.

    Parameters
    ----------
    counts : DataFrame
        The rows of :func:`logstream.report.batch._view_counts` (with ``uniq``: the requests
        that count towards visitors).
    panels : sequence of str
        The panels to build.
    top : int
        Items per panel, and children per item (the visitors panel has every day).
    agents : Table, optional
        The agents reference table: its crawler class is the ``Crawlers`` family.

    Returns
    -------
    dict
        Panel name → ``{"metadata": {"hits", "visitors", "bytes", "items"}, "data": [...]}``;
        each item of ``data`` has ``data`` (its key), ``hits``, ``visitors``, ``bytes``, plus
        ``method`` and ``protocol`` for requests and ``items`` (its children, the same shape)
        for ``os``, ``browsers`` and ``geolocation``. Totals in ``metadata`` cover every item,
        not only the top.
    """
    if not panels:
        return {}
    flat = _panel_items(counts, panels, agents)
    # one exchange (by panel) serves both windows: the panel's totals over its top-level
    # items, and each item's rank among its siblings (top_n_per_group's order: hits, highest
    # first, ties by the other columns)
    root = F.col("parent").isNull()
    by_panel = Window.partitionBy("panel")
    siblings = ranking_window(flat.columns, ["panel", "parent"], ["hits"])
    ranked = flat.select(
        "*",
        *(F.sum(F.when(root, F.col(m))).over(by_panel).alias(f"total_{m}") for m in _METRICS),
        F.count_if(root).over(by_panel).alias("total_items"),
        F.row_number().over(siblings).alias("rank"),
    )
    rows = ranked.where((F.col("rank") <= top) | (F.col("panel") == "visitors")).collect()
    return _assemble([r.asDict() for r in rows], panels)


def _assemble(rows: list[dict[str, Any]], panels: Sequence[str]) -> dict[str, Any]:
    """The panels' JSON from the collected rows of :func:`build_panels`."""
    out: dict[str, Any] = {
        p: {"metadata": {"hits": 0, "visitors": 0, "bytes": 0, "items": 0}, "data": []}
        for p in panels
    }
    children: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        if r["total_hits"] is not None:  # each row of a panel carries the panel's totals
            totals = {k: int(r[f"total_{k}"]) for k in ("hits", "visitors", "bytes", "items")}
            out[r["panel"]]["metadata"] = totals
        item: dict[str, Any] = {
            "data": r["data"],
            "hits": int(r["hits"]),
            "visitors": int(r["visitors"]),
            "bytes": int(r["bytes"]),
        }
        if r["method"] is not None:
            item["method"], item["protocol"] = r["method"], r["protocol"]
        if r["parent"] is None:
            out[r["panel"]]["data"].append(item)
        else:
            children.setdefault((r["panel"], r["parent"]), []).append(item)
    for name, panel in out.items():
        if name == "visitors":
            panel["data"].sort(key=lambda i: i["data"] or "")
        else:
            panel["data"].sort(key=lambda i: (-i["hits"], i["data"] or ""))
        if name in _NESTED:
            for item in panel["data"]:
                item["items"] = sorted(
                    children.get((name, item["data"]), []),
                    key=lambda i: (-i["hits"], i["data"] or ""),
                )
    return out


def _panel_items(counts: DataFrame, panels: Sequence[str], agents: Table | None) -> DataFrame:
    """One row per panel item: ``panel``, ``data``, ``parent`` (the family of an OS or browser
    version, the continent of a country; null for a top-level item), ``method``, ``protocol``
    (strings); ``hits``, ``visitors``, ``bytes`` (bigint).

    One aggregation: each row of ``counts`` is one visitor of one item (its key holds the
    visitor), so it is projected into the items it belongs to (a row of the agent view into
    its day, host, OS version and family, browser version and family, country and continent)
    and every item's metrics are summed at once. A family's visitors are counted from the same
    rows as its children's, so they are the sum of its children's.
    """
    view = F.col("view")
    visitor = F.count_if(F.col("uniq") > 0).alias("visitors")
    sums = (F.sum("requests").alias("hits"), visitor, F.sum("bytes").alias("bytes"))
    metrics = (F.col("requests"), F.col("uniq"), F.col("bytes"))
    parts: list[DataFrame] = []
    item_views = [_ITEM_VIEWS[p] for p in panels if p in _ITEM_VIEWS]
    if item_views:
        names = F.create_map(*(F.lit(x) for p, v in _ITEM_VIEWS.items() for x in (v, p)))
        parts.append(
            counts.where(view.isin(item_views)).select(
                names[view].alias("panel"),
                F.col("key").alias("data"),
                F.lit(None).cast("string").alias("parent"),
                "key4",
                *metrics,
            )
        )
    if any(p in panels for p in _FROM_AGENTS):
        classified, with_agents = _classified(counts.where(view == _AGENT_VIEW), panels, agents)
        # a log without user agents (a Common log) leaves the OS and browser panels empty, as
        # GoAccess and the stream do: no "Unknown" item holding every hit
        shown = [p for p in panels if with_agents or p not in _AGENT_FAMILIES]
        if entries := _agent_entries(shown):
            agent_rows = _located(classified, shown)
            parts.append(agent_rows.select(F.inline(F.array(*entries)), *metrics))
    if not parts:  # only panels that the log cannot fill
        return counts.sparkSession.createDataFrame([], _ITEM_SCHEMA)
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    key4 = F.col("key4")
    return (
        union.groupBy("panel", "data", "parent", "key4")
        .agg(*sums)
        .select(
            "panel",
            "data",
            "parent",
            F.when(key4 != "", F.substring_index(key4, " ", 1)).alias("method"),
            F.when(F.instr(key4, " ") > 0, F.substring_index(key4, " ", -1)).alias("protocol"),
            *_METRICS,
        )
    )


_METRICS = ("hits", "visitors", "bytes")
#: The panels of user-agent families (left empty for a log without user agents).
_AGENT_FAMILIES = ("os", "browsers")
#: :func:`_panel_items`' rows.
_ITEM_SCHEMA = (
    "panel string, data string, parent string, method string, protocol string, "
    "hits bigint, visitors bigint, bytes bigint"
)


def _agent_entries(panels: Sequence[str]) -> list[Column]:
    """The items a row of the agent view belongs to, as structs (``panel``, ``data``,
    ``parent``, ``key4``) for ``F.inline``: its day, its host, and for each panel of families
    its child (``Unknown`` for a null name) under its family, and the family itself."""
    unknown = F.lit("Unknown")
    none = F.lit(None).cast("string")

    def entry(panel: str, data: Column, parent: Column = none) -> Column:
        return F.struct(
            F.lit(panel).alias("panel"),
            data.alias("data"),
            parent.alias("parent"),
            none.alias("key4"),
        )

    out = []
    if "visitors" in panels:
        out.append(entry("visitors", F.col("day").cast("string")))
    if "hosts" in panels:
        out.append(entry("hosts", F.col("key2")))
    for panel, child, family in (
        ("os", "os_version", "os"),
        ("browsers", "browser_version", "browser"),
        ("geolocation", "country", "continent"),
    ):
        if panel in panels:  # a visitor names one child: its user agent's version, its country
            parent = F.coalesce(F.col(family), unknown)
            out += [entry(panel, F.coalesce(F.col(child), unknown), parent), entry(panel, parent)]
    return out


def _classified(
    agent_rows: DataFrame, panels: Sequence[str], agents: Table | None
) -> tuple[DataFrame, bool]:
    """``agent_rows`` with their user agent's OS and browser (the columns of
    :data:`~logstream.analytics.useragents.FAMILY_SCHEMA`; null when the row has none), when
    an OS or browser panel is shown: the distinct user agents are classified once. The flag
    says whether any row has a user agent (True when neither panel is shown)."""
    if "os" not in panels and "browsers" not in panels:
        return agent_rows, True
    with_agent = agent_rows.where(F.col("key") != "-")
    if with_agent.isEmpty():  # a log without user agents (NASA's CLF): no Python worker
        return agent_rows, False
    distinct = with_agent.select(F.col("key").alias("user_agent")).distinct()
    crawler = (
        agent_class_column(agents, F.col("user_agent")) == CRAWLER_CLASS
        if agents is not None
        else F.lit(False)
    )
    named = agent_families(distinct, crawler)
    joined = agent_rows.join(named, agent_rows["key"] == named["user_agent"], "left")
    return joined.drop("user_agent"), True


def _located(agent_rows: DataFrame, panels: Sequence[str]) -> DataFrame:
    """``agent_rows`` with their host's ``country`` and ``continent``
    (:func:`logstream.analytics.geo.host_locations`: the distinct client hosts located once),
    when the geolocation panel is shown."""
    if "geolocation" not in panels:
        return agent_rows
    hosts = agent_rows.select(F.col("key2").alias("client_host")).distinct()
    located = host_locations(hosts)
    return agent_rows.join(located, agent_rows["key2"] == located["client_host"], "left").drop(
        "client_host"
    )


#: The versions shown under each family in the terminal and HTML reports (the JSON has
#: ``top``).
SHOWN_CHILDREN = 3


def shown_panels(
    report: dict[str, Any],
) -> Iterator[tuple[str, str, list[tuple[str, str]], list[dict[str, Any]]]]:
    """The report's panels as tables for the terminal and HTML reports, in :data:`PANELS`'s
    order: ``(name, title, columns, rows)``, with columns ``(key, header)`` and flat rows (a
    family, an OS, browser or continent, followed by its first :data:`SHOWN_CHILDREN`
    children, ``└ Chrome 32.0.1700``)."""
    for name in PANELS:
        if name not in report:
            continue
        first = "day" if name == "visitors" else "data"
        columns = [("data", first)]
        if name in _REQUEST_PANELS:
            columns.append(("request", "method · protocol"))
        columns += [("hits", "hits"), ("visitors", "visitors"), ("bytes", "bytes")]
        rows: list[dict[str, Any]] = []
        for item in report[name]["data"]:
            request = " ".join(p for p in (item.get("method"), item.get("protocol")) if p)
            rows.append({**item, "request": request})
            for child in item.get("items", [])[:SHOWN_CHILDREN]:
                rows.append({**child, "data": f"  └ {child['data']}"})
        yield name, PANEL_TITLES[name], columns, rows
