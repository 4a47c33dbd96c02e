"""Step 5 of the micro-batch, the panel columns: what GoAccess's panels key each event by.

The stream counts GoAccess's panels as pane views of the one aggregation
(:data:`~logstream.analytics.panes.PANEL_VIEWS` and
:data:`~logstream.analytics.panes.DAILY_VIEW`). Each view is keyed by a column this step adds
to the micro-batch's events, with the batch report's definitions
(:mod:`logstream.analytics.requests`, :mod:`logstream.report.panels`), so that the stream's
windows, summed over a log, equal the report's items:

==================  ===============  ========================================================
view                column           the event's item (null: not in the panel)
==================  ===============  ========================================================
``requests``        ``p_request``    its request target, when neither static nor answered 404
``static_requests`` ``p_static``     its request target, when static and not answered 404
``not_found``       ``p_not_found``  its request target, when answered 404
``hosts``           ``p_host``       its client host
``os``              ``p_os``         its user agent's OS family (``Unknown`` without one)
``browsers``        ``p_browser``    its user agent's browser family (``Unknown`` without)
``virtual_hosts``   ``p_vhost``      its virtual host (``%v``)
``referrers``       ``p_referrer``   its referrer, unless it is your own site
``referring_sites`` ``p_site``       the referrer's host, unless it is your own site
``remote_user``     ``p_user``       its authenticated user (``%u``)
``geolocation``     ``p_country``    its client's country (``Unresolved`` for a host name)
``visitors_daily``  ``p_visitor``    its visitor: client host ``\\n`` user agent; ``""`` for a
                                     4xx answer (no visitor, as in GoAccess)
==================  ===============  ========================================================

The user agents and the client hosts are classified once per micro-batch: the distinct ones
go through ua-parser (:func:`~logstream.analytics.useragents.agent_families`) and the GeoIP
lookup (:func:`~logstream.analytics.geo.host_locations`), each one ``mapInPandas`` over a row
per distinct value, joined back: by broadcast, or in a small micro-batch analysed in one
partition by a join inside the aggregation's own stage (a broadcast is a Spark job of its own,
0.3–0.9 s of a 3,000-line micro-batch's wall time here).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from logstream.analytics.geo import UNKNOWN as UNKNOWN_COUNTRY
from logstream.analytics.geo import host_locations
from logstream.analytics.panes import DAILY_VIEW, PANEL_VIEWS, gathered
from logstream.analytics.requests import (
    event_request_target,
    is_static_target,
    referring_site,
    shown_referrer,
)
from logstream.analytics.useragents import UNKNOWN, agent_families
from logstream.reference import CRAWLER_CLASS, agent_class_column
from logstream.reference.tables import Table

__all__ = ["AGENT_PANELS", "PANEL_INPUTS", "panel_columns"]

#: The panel views that classify user agents: they read the batch's ``agents`` table (its
#: crawlers are the ``Crawlers`` family).
AGENT_PANELS = ("os", "browsers")

#: The event columns the panel views read, beyond the analytics' own.
PANEL_INPUTS = ("referrer", "query_string", "method", "protocol", "user", "virtual_host")


def panel_columns(
    events: DataFrame,
    views: Collection[str],
    tables: Mapping[str, Table],
    static_extensions: tuple[str, ...] = (),
    site_host: str | None = None,
    single_partition: bool = False,
    protocol_required: bool = False,
) -> DataFrame:
    """``events`` with the key column of each panel view in ``views``.

    Parameters
    ----------
    events : DataFrame
        Batch DataFrame of a micro-batch's events: ``client_host``, ``url_path``, ``status``,
        ``user_agent`` and :data:`PANEL_INPUTS` (the canonical event schema's).
    views : collection of str
        The pane views computed; the columns of the panel views among them are added.
    tables : mapping of str to Table
        The micro-batch's reference tables: its ``agents`` table names the crawlers.
    static_extensions : tuple of str
        Extensions counted as static files besides GoAccess's (``--static-ext``).
    site_host : str, optional
        Your own site's host (``--site-host``): its referrals leave the referrer panels.
    single_partition : bool
        The distinct user agents and hosts are found in one partition, with no shuffle
        (:func:`~logstream.analytics.panes.gathered`: a small micro-batch).
    protocol_required : bool
        The log format has a protocol: a request without a valid one is keyed ``-``, as
        GoAccess keys it (:func:`~logstream.analytics.requests.request_target`).

    Returns
    -------
    DataFrame
        ``events``' columns, then the ``p_*`` columns of the table above (strings) for the
        panel views in ``views``.
    """
    wanted = [v for v in (*PANEL_VIEWS, DAILY_VIEW) if v in views]
    if not wanted:
        return events
    df = events
    added: dict[str, Column] = {}
    if "os" in wanted or "browsers" in wanted:
        df, families = _agent_families(df, tables.get("agents"), single_partition)
        added["p_os"] = F.coalesce(families["os"], F.lit(UNKNOWN))
        added["p_browser"] = F.coalesce(families["browser"], F.lit(UNKNOWN))
    if "geolocation" in wanted:
        df, country = _countries(df, single_partition)
        added["p_country"] = F.coalesce(country, F.lit(UNKNOWN_COUNTRY))
    added.update(
        _item_columns(tuple(wanted), tuple(static_extensions), site_host, protocol_required)
    )
    return df.select(*(F.col(c) for c in events.columns), *(c.alias(n) for n, c in added.items()))


@functools.cache
def _item_columns(
    wanted: tuple[str, ...],
    static_extensions: tuple[str, ...],
    site_host: str | None,
    protocol_required: bool = False,
) -> dict[str, Column]:
    """The ``p_*`` columns of the views in ``wanted`` that need no join, by name. Built once
    and kept (a Column costs Py4J round trips to build: the same for every micro-batch)."""
    status = F.col("status")
    target, _ = event_request_target(protocol_required=protocol_required)
    is_404 = status == 404
    static_target = is_static_target(target, static_extensions)
    referrer = F.col("referrer")
    site = referring_site(referrer)
    shown = shown_referrer(referrer, site, site_host)
    visitor = F.concat_ws("\n", F.col("client_host"), F.coalesce(F.col("user_agent"), F.lit("-")))
    columns = {
        "requests": F.when(~is_404 & ~static_target, target),
        "static_requests": F.when(~is_404 & static_target, target),
        "not_found": F.when(is_404, target),
        "referrers": F.when(shown, referrer),
        "referring_sites": F.when(shown & (site != ""), site),
        "hosts": F.col("client_host"),
        "remote_user": F.col("user"),
        "virtual_hosts": F.col("virtual_host"),
        DAILY_VIEW: F.when(status.between(400, 499), F.lit("")).otherwise(visitor),
    }
    return {PANEL_VIEWS.get(view, "p_visitor"): columns[view] for view in wanted if view in columns}


def _agent_families(
    df: DataFrame, agents: Table | None, single_partition: bool
) -> tuple[DataFrame, dict[str, Column]]:
    """``df`` joined with its distinct user agents' OS and browser families (null without a
    user agent)."""
    with_agent = df.select("user_agent").where(F.col("user_agent").isNotNull())
    distinct = gathered(with_agent, single_partition).distinct()
    crawler = (
        agent_class_column(agents, F.col("user_agent")) == CRAWLER_CLASS
        if agents is not None
        else F.lit(False)
    )
    named = agent_families(distinct, crawler).select(
        F.col("user_agent").alias("_p_ua"),
        F.col("os").alias("_p_os"),
        F.col("browser").alias("_p_browser"),
    )
    joined = _joined(df, named, F.col("user_agent") == F.col("_p_ua"), single_partition)
    return joined, {"os": F.col("_p_os"), "browser": F.col("_p_browser")}


def _countries(df: DataFrame, single_partition: bool) -> tuple[DataFrame, Column]:
    """``df`` joined with its distinct client hosts' countries."""
    hosts = gathered(df.select("client_host"), single_partition).distinct()
    located = host_locations(hosts).select(
        F.col("client_host").alias("_p_host"), F.col("country").alias("_p_country")
    )
    joined = _joined(df, located, F.col("client_host") == F.col("_p_host"), single_partition)
    return joined, F.col("_p_country")


def _joined(df: DataFrame, found: DataFrame, on: Column, single_partition: bool) -> DataFrame:
    """``df`` left-joined with the classified distinct values ``found``: broadcast (a Spark job
    of its own that builds the table), or, in one partition, a join in the stage itself (both
    sides gathered: no exchange, no extra job)."""
    if single_partition:
        # a hint, or Spark broadcasts the small side anyway (its size is known)
        return gathered(df, True).join(gathered(found, True).hint("shuffle_hash"), on, "left")
    return df.join(F.broadcast(found), on, "left")
