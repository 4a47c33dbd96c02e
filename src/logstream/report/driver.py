"""The batch report's tables and sessions on the driver, from its one aggregation's rows.

The one aggregation (:func:`logstream.report.views.view_counts`) leaves a row per item of
every table, per visitor's half-hour and per content page and day: a few rows per hundred
lines of a log (40,000 for the NASA day, 1.35 million for 284 days of it). When they are at
most :data:`DRIVER_ROWS`, they reach the driver in one Spark job, as Arrow, and the report's
tables and quarantine examples are computed here with pandas and the sessions with numpy
(the visits never become pandas): no further Spark job,
whose planning and first run in a new JVM cost more than the work (the NASA day: 5 of the
report's 15 seconds). Past that, the same is computed by Spark
(:func:`logstream.report.items.ranked_tables`, :func:`logstream.report.sessions.
session_summary`); both give the same report, which ``tests/report/test_report_paths.py``
holds them to.

The definitions are those of :mod:`logstream.report.items` (the tables and their items),
:mod:`logstream.report.sessions` (sessions merged as Spark's session windows merge them) and
:mod:`logstream.report.panels`; an item's rank orders by hits, highest first, ties by its
text and its method and protocol (ascending, no text first), as Spark's window does.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from logstream.reference import CRAWLER_CLASS
from logstream.reference.enrich import first_segment
from logstream.reference.tables import Table
from logstream.report.items import NESTED, TableRows
from logstream.report.views import PAIR_PANELS, item_hash

__all__ = ["DRIVER_ROWS", "DriverRows", "collect_rows"]

#: The most rows of the one aggregation computed on the driver (about 400 MB of pandas).
DRIVER_ROWS = 2_000_000

_REQUEST_PANELS = ("requests", "static_requests", "not_found")
_WHOLE = ("visitors", "agent_classes", "sections", "networks")
_EPOCH = date(1970, 1, 1)
#: The columns of an item's entry, and their types.
_ITEM_TYPES = {
    **dict.fromkeys(("table", "grp", "parent", "data", "mp", "key"), object),
    **dict.fromkeys(("hits", "visitors", "bytes", "errors"), "int64"),
}


def collect_rows(counts: DataFrame, tables: dict[str, Table]) -> pa.Table:
    """The one aggregation's rows as Arrow (one job), with what the driver cannot compute as
    Spark does: ``h`` (the 64-bit hash a ``pair`` row keys a named row's item by: a request's
    text and method and protocol, a referrer, a user, a virtual host), ``h2`` (a referrer's
    site's) and ``section`` (a path's first segment, the default sections)."""
    view = F.col("view")
    s1, s2 = F.col("s1"), F.col("s2")
    h: Column = (
        F.when(view == "request", item_hash(s1, s2))
        .when(view.isin("referrer", "user", "vhost"), item_hash(s1))
        .otherwise(F.lit(None).cast("bigint"))
    )
    extra = [h.alias("h"), F.when(view == "referrer", item_hash(s2)).alias("h2")]
    if "sections" not in tables:
        extra.append(F.when(view == "url", first_segment(s1)).alias("section"))
    return counts.select("*", *extra).toArrow()


class DriverRows:
    """The one aggregation's rows on the driver (:func:`collect_rows`), and what the report
    reads of them.

    Parameters
    ----------
    rows : pyarrow.Table
        :func:`collect_rows`' output.
    """

    def __init__(self, rows: pa.Table) -> None:
        self.rows = rows
        self._views: dict[str, pd.DataFrame] = {}
        # each row's view as a small integer: one comparison of 1.4 M texts a view cost 50 ms
        encoded = pc.dictionary_encode(rows["view"]).combine_chunks()
        self._codes = encoded.indices
        self._code = {name: i for i, name in enumerate(encoded.dictionary.to_pylist())}
        # every view's texts converted now, so that a text pandas cannot hold (bytes that are
        # not UTF-8) fails here, where the report takes Spark's path instead
        for name in self._code:
            if name != "visit":
                self.view(name)

    def _mask(self, name: str) -> pa.Array:
        return pc.equal(self._codes, self._code.get(name, -1))

    def view(self, name: str) -> pd.DataFrame:
        """The rows of one view (an empty frame without any), cut out in Arrow and converted
        once: the visits, most of the rows, are read as numbers (:meth:`sessions`)."""
        found = self._views.get(name)
        if found is None:
            part = self.rows.filter(self._mask(name))
            found = part.to_pandas() if part.num_rows else pd.DataFrame(columns=["l1", "requests"])
            self._views[name] = found
        return found

    def small(self) -> list[dict[str, Any]]:
        """The rows of :func:`logstream.report.batch._small_views`: a row per hour, status
        and offset, and per quarantine reason."""
        out: list[dict[str, Any]] = []
        for r in self.view("hour").itertuples(index=False):
            out.append(
                {
                    "view": "hour",
                    "reason": None,
                    "hour": int(r.l1),
                    "status": int(r.l2),
                    "offset": None if pd.isna(r.l3) else int(r.l3),
                    "requests": int(r.requests),
                    "bytes": int(r.bytes),
                    "errors": int(r.errors),
                    "first_ms": int(r.first_ms),
                    "last_ms": int(r.last_ms),
                }
            )
        bad = self.view("bad")
        if len(bad):
            for reason, n in bad.groupby("s3")["requests"].sum().items():
                out.append({"view": "bad", "reason": reason, "requests": int(n)})
        return out

    def examples(self, n: int) -> list[dict[str, Any]]:
        """The first ``n`` quarantined lines, in the order of the input: by file, then by
        position (``l1``, whose partitions Spark packs largest first, not in file order)."""
        bad = self.view("bad")
        if not len(bad):
            return []
        first = bad.sort_values(["s2", "l1"], kind="stable").head(n)
        return [
            {"raw_line": r.s1, "source_file": r.s2, "reason": r.s3, "detail": None}
            for r in first.itertuples(index=False)
        ]

    def sessions(self, gap_s: int) -> dict[str, Any]:
        """:func:`logstream.report.sessions.session_summary` of the ``visit`` rows (numpy:
        one sort, then running maxima and segment reductions)."""
        out: dict[str, Any] = {
            "gap_s": gap_s,
            "sessions": 0,
            "median_duration_s": None,
            "p95_duration_s": None,
            "bounce_rate": None,
            "pages_per_session": None,
        }
        mask = self._mask("visit")
        user, first, last, pages = (
            pc.filter(self.rows[c], mask).to_numpy().astype(np.int64, copy=False)
            for c in ("l1", "first_ms", "last_ms", "pages")
        )
        if not len(user):
            return out
        # a visitor's summaries in time order (stable, as Spark's session windows sort them)
        order = np.lexsort((first, user))
        user, first, last, pages = user[order], first[order], last[order], pages[order]
        same = user[1:] == user[:-1]
        # the session's end so far: the running maximum of ``last`` within each visitor, as
        # one running maximum over (visitor's ordinal, rank of ``last``) packed in an int64
        ends, rank = np.unique(last, return_inverse=True)
        visitor = np.concatenate(([0], np.cumsum(~same)))
        reach = ends[np.maximum.accumulate((visitor << 31) | rank) & 0x7FFF_FFFF]
        # a summary opens a session unless it starts at most gap_s after the session's end
        new = np.ones(len(user), dtype=bool)
        new[1:] = ~same | (first[1:] > reach[:-1] + gap_s * 1000)
        opens = np.flatnonzero(new)
        seconds = np.sort(np.maximum.reduceat(last, opens) // 1000 - first[opens] // 1000)
        pages = np.add.reduceat(pages, opens)
        count = len(seconds)

        def quantile(q_num: int, q_den: int) -> int:
            # the smallest duration that at least q of the sessions do not exceed
            return int(seconds[max(0, -(-count * q_num // q_den) - 1)])

        out.update(
            sessions=count,
            median_duration_s=quantile(1, 2),
            p95_duration_s=quantile(19, 20),
            bounce_rate=round(int((pages <= 1).sum()) / count, 6),
            pages_per_session=round(int(pages.sum()) / count, 3),
        )
        return out

    def tables(
        self,
        panels: Sequence[str],
        depth: int,
        tables: dict[str, Table],
        with_agents: bool | None,
    ) -> TableRows:
        """:func:`logstream.report.items.ranked_tables`, on the driver."""
        shown = set(panels) | {"not_found", "visitors"}
        agents, agents_known = self._agents(panels, tables, with_agents)
        if not agents_known:
            shown -= {"os", "browsers"}
        parts = [
            *self._paths(tables),
            *self._hosts(shown, tables),
            *_agent_items(agents, shown),
            *self._requests(shown),
            *self._others(shown),
        ]
        day = self.view("day")
        if len(day):
            parts.append(_items("visitors", day, _iso_days(day["l1"]), visitors=day["visitors"]))
        page = self.view("page")
        if len(page):
            parts.append(_items("top_pages", page, page["s1"], grp=_iso_days(page["l1"])))
        parts = [p for p in parts if len(p)]
        if not parts:
            return TableRows([])
        return TableRows(_ranked(_stacked(parts), depth))

    # -- the items of each table --------------------------------------------------------------

    def _paths(self, tables: dict[str, Table]) -> list[pd.DataFrame]:
        url = self.view("url")
        url = url[url["s1"].notna()] if len(url) else url
        if not len(url):
            return []
        if "sections" in tables:
            from logstream.analytics.arrow.classify import sections

            section = sections(pa.array(url["s1"].tolist(), pa.string()), tables["sections"])
            named = pd.Series(section.to_pylist(), index=url.index)
        else:
            named = url["section"]
        found = url[url["not_found"] > 0]
        return [
            _items("top_urls", url, url["s1"]),
            _items("top_not_found", found, found["s1"], hits=found["not_found"]),
            _items("sections", url, named, errors=url["errors"]),
        ]

    def _hosts(self, shown: set[str], tables: dict[str, Table]) -> list[pd.DataFrame]:
        host = self.view("host")
        if not len(host):
            return []
        out = [_items("top_hosts", host, host["s1"])]
        if "hosts" in shown:
            out.append(_items("hosts", host, host["s1"], visitors=host["visitors"]))
        if "geolocation" in shown:
            from logstream.analytics.geo import locate

            places = {h: locate(h) for h in host["s1"].unique()}
            country = host["s1"].map(lambda h: places[h][0])
            continent = host["s1"].map(lambda h: places[h][1])
            out += _nested("geolocation", host, country, continent)
        if "networks" in tables:
            from logstream.analytics.arrow.classify import organisations

            orgs = organisations(pa.array(host["s1"].tolist(), pa.string()), tables["networks"])
            named = pd.Series(orgs.to_pylist(), index=host.index).fillna("unknown")
            out.append(_items("networks", host, named, errors=host["errors"]))
        return out

    def _agents(
        self, panels: Sequence[str], tables: dict[str, Table], with_agents: bool | None
    ) -> tuple[pd.DataFrame, bool]:
        agent = self.view("agent").copy()
        known = agent["s2"].where(agent["s2"] != "-") if len(agent) else pd.Series(dtype=object)
        table = tables.get("agents")
        if table is not None:
            from logstream.analytics.arrow.classify import agent_rules

            classify = agent_rules(table).classify
            agent["agent_class"] = [classify(None if pd.isna(a) else a) for a in known]
        else:
            agent["agent_class"] = ["unknown" if pd.isna(a) else "other" for a in known]
        if "os" not in panels and "browsers" not in panels:
            return agent, True
        if with_agents is False or (with_agents is None and not known.notna().any()):
            return agent, False
        from logstream.analytics.useragents import classify

        named = {
            a: classify(a, c == CRAWLER_CLASS)
            for a, c in zip(known, agent["agent_class"], strict=True)
            if not pd.isna(a)
        }
        for i, column in enumerate(("browser", "browser_version", "os", "os_version")):
            agent[column] = [named[a][i] if not pd.isna(a) else None for a in known]
        return agent, True

    def _requests(self, shown: set[str]) -> list[pd.DataFrame]:
        request = self.view("request")
        out = []
        for panel in _REQUEST_PANELS:
            if panel not in shown or not len(request):
                continue
            rows = request[request["l1"] == PAIR_PANELS[panel]]
            out.append(_items(panel, rows, rows["s1"], mp=rows["s2"], key=rows["h"]))
        return out

    def _others(self, shown: set[str]) -> list[pd.DataFrame]:
        out = []
        pair = self.view("pair")
        for panel, code in PAIR_PANELS.items():
            if panel in shown and len(pair):
                rows = pair[pair["l3"] == code]
                none = pd.Series([None] * len(rows), index=rows.index, dtype=object)
                out.append(
                    _items(
                        panel, rows, none, hits=0, size=0, visitors=rows["visitors"], key=rows["l1"]
                    )
                )
        for panel, name, column, key in (
            ("referrers", "referrer", "s1", "h"),
            ("referring_sites", "referrer", "s2", "h2"),
            ("remote_user", "user", "s1", "h"),
            ("virtual_hosts", "vhost", "s1", "h"),
        ):
            rows = self.view(name)
            if panel in shown and len(rows):
                if column == "s2":
                    rows = rows[rows["s2"] != ""]
                out.append(_items(panel, rows, rows[column], key=rows[key]))
        return out


def _items(
    table: str,
    rows: pd.DataFrame,
    data: pd.Series,
    *,
    hits: pd.Series | int | None = None,
    visitors: pd.Series | int = 0,
    size: pd.Series | int | None = None,
    errors: pd.Series | int = 0,
    grp: pd.Series | None = None,
    parent: pd.Series | None = None,
    mp: pd.Series | None = None,
    key: pd.Series | None = None,
) -> pd.DataFrame:
    """One table's entries from ``rows``: the columns of :data:`_ITEM_TYPES` (``key``: the item's
    hash for the pair panels, else its text, method and protocol)."""
    n = len(rows)
    none = pd.Series([None] * n, index=rows.index, dtype=object)
    frame = pd.DataFrame(
        {
            "table": table,
            "grp": none if grp is None else grp,
            "parent": none if parent is None else parent,
            "data": data,
            "mp": none if mp is None else mp,
            "hits": rows["requests"] if hits is None else hits,
            "visitors": visitors,
            "bytes": rows["bytes"] if size is None else size,
            "errors": errors,
            "key": none if key is None else key,
        },
        index=rows.index,
    )
    return frame.astype(_ITEM_TYPES)


def _nested(
    table: str, rows: pd.DataFrame, child: pd.Series, family: pd.Series
) -> list[pd.DataFrame]:
    """A panel of families with children (``Unknown`` for a missing name)."""
    child, family = child.fillna("Unknown"), family.fillna("Unknown")
    return [
        _items(table, rows, child, parent=family, visitors=rows["visitors"]),
        _items(table, rows, family, visitors=rows["visitors"]),
    ]


def _agent_items(agent: pd.DataFrame, shown: set[str]) -> list[pd.DataFrame]:
    if not len(agent):
        return []
    out = [_items("agent_classes", agent, agent["agent_class"], errors=agent["errors"])]
    for panel, (child, family) in NESTED.items():
        if panel in shown and panel != "geolocation":
            out += _nested(panel, agent, agent[child], agent[family])
    return out


def _stacked(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Frames of the same columns one after the other, column by column: ``pd.concat`` tests
    every value of an object column for a missing one (0.9 s of 750,000 items, 284 days)."""
    frames = [f for f in frames if len(f)] or frames[:1]  # an empty one's dtypes are not kept
    columns = frames[0].columns
    return pd.DataFrame({c: np.concatenate([f[c].to_numpy() for f in frames]) for c in columns})


def _iso_days(days: pd.Series) -> pd.Series:
    """Days since 1970-01-01 as ISO dates (each distinct day formatted once)."""
    names = {d: (_EPOCH + timedelta(days=int(d))).isoformat() for d in days.unique()}
    return days.map(names)


def _ranked(items: pd.DataFrame, depth: int) -> list[dict[str, Any]]:
    """Every table's items summed, ranked among their siblings and totalled per table (the
    windows of :func:`logstream.report.items.ranked_tables`); the rows kept as dictionaries."""
    items = items.copy()
    for c in ("hits", "visitors", "bytes", "errors"):
        items[c] = items[c].fillna(0).astype("int64")
    by_key = items["key"].notna()
    keys = ["table", "grp", "parent"]
    # a pair panel's item is its hash (its visitors come from its pairs, its text and hits
    # from its named rows); any other item is its text and method and protocol
    keyed = (
        items[by_key]
        .groupby([*keys, "key"], dropna=False, sort=False)
        .agg(
            data=("data", "first"),
            mp=("mp", "first"),
            hits=("hits", "sum"),
            visitors=("visitors", "sum"),
            bytes=("bytes", "sum"),
            errors=("errors", "sum"),
        )
        .reset_index()
        .drop(columns="key")
    )
    named = (
        items[~by_key]
        .groupby([*keys, "data", "mp"], dropna=False, sort=False)
        .agg(
            hits=("hits", "sum"),
            visitors=("visitors", "sum"),
            bytes=("bytes", "sum"),
            errors=("errors", "sum"),
        )
        .reset_index()
    )
    merged = _stacked([keyed, named]).astype(
        {"data": object, "mp": object, "grp": object, "parent": object}
    )
    merged = merged.where(merged.notna(), None)
    # nulls first, as Spark orders them ascending: a null sorts before any text, even ""

    def nulls_first(c: str) -> dict[str, pd.Series]:
        return {f"_{c}0": merged[c].notna(), f"_{c}1": merged[c].fillna("")}

    order = {
        **nulls_first("grp"),
        **nulls_first("parent"),
        "_h": -merged["hits"],
        **nulls_first("data"),
        **nulls_first("mp"),
    }
    merged = merged.assign(**order).sort_values(["table", *order], kind="stable")
    merged["rank"] = merged.groupby(keys, dropna=False, sort=False).cumcount() + 1
    root = merged[merged["parent"].isna()]
    totals = root.groupby("table").agg(
        total_hits=("hits", "sum"),
        total_visitors=("visitors", "sum"),
        total_bytes=("bytes", "sum"),
        total_errors=("errors", "sum"),
        total_items=("hits", "size"),
    )
    kept = merged[(merged["rank"] <= depth) | merged["table"].isin(_WHOLE)]
    kept = kept.drop(columns=[*order]).join(totals, on="table")
    return [
        {k: (None if _missing(v) else _plain(v)) for k, v in row.items()}
        for row in kept.to_dict("records")
    ]


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))


def _plain(value: Any) -> Any:
    return int(value) if isinstance(value, np.integer) else value
