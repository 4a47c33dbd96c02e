"""What a small micro-batch classifies per distinct value, on the driver, memoised.

The Spark forms classify a micro-batch's *distinct* user agents and hosts in Python workers
(``mapInPandas`` over ua-parser and the GeoIP database) and join the answers back
(:mod:`logstream.pipeline.ingest.panels`), and join the reference tables by broadcast
(:class:`logstream.reference.Enricher`). For a micro-batch folded on the driver
(:mod:`logstream.analytics.arrow`) the same functions run here, once per distinct value and
process: a user agent seen in an earlier micro-batch is not classified again.

* :func:`agent_classes`: :func:`logstream.reference.agent_class_column` in Python's ``re``
  (the first class, in the table's order, one of whose patterns is found; ``other``;
  ``unknown`` without a user agent). A table whose patterns Python cannot compile as Java
  does is refused here (:class:`AgentRules` raises), and the micro-batch goes to Spark.
* :func:`families`: :func:`logstream.analytics.useragents.classify` (ua-parser).
* :func:`countries`: :func:`logstream.analytics.geo.locate` (geoip2fast).
* :func:`sections` and :func:`organisations`: the longest matching prefix and network of a
  sections or networks :class:`~logstream.reference.Table`
  (:class:`logstream.reference.Enricher`'s joins).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

import pyarrow as pa

from logstream.analytics.arrow.panes import texts
from logstream.reference.tables import Table

__all__ = [
    "AgentRules",
    "agent_classes",
    "countries",
    "families",
    "organisations",
    "sections",
]

#: Distinct values remembered per classifier (a long-running process sees many).
_MEMO = 200_000

_STRING = pa.string()
_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = re.compile(rf"^{_OCTET}(\.{_OCTET}){{3}}$")


class AgentRules:
    """An agents table's classes as Python regular expressions, in match order.

    Parameters
    ----------
    table : Table
        An agents table (``(pattern, agent_class)`` rows).

    Raises
    ------
    re.error
        When a pattern is not a valid Python regular expression (Spark's Java dialect has
        constructs Python lacks, e.g. ``\\p{L}``): such a table is classified by Spark.
    """

    def __init__(self, table: Table) -> None:
        patterns: dict[str, list[str]] = {}
        for pattern, cls in table.rows:
            patterns.setdefault(str(cls), []).append(str(pattern))
        self.classes = [
            (cls, re.compile("|".join(f"(?:{p})" for p in pats))) for cls, pats in patterns.items()
        ]
        self.classify = functools.lru_cache(maxsize=_MEMO)(self._classify)

    def _classify(self, user_agent: str | None) -> str:
        if user_agent is None:
            return "unknown"
        for cls, regex in self.classes:
            if regex.search(user_agent):
                return cls
        return "other"


@functools.lru_cache(maxsize=8)
def agent_rules(table: Table) -> AgentRules:
    """The :class:`AgentRules` of ``table`` (built once per table version)."""
    return AgentRules(table)


def _mapped(
    values: pa.ChunkedArray | pa.Array,
    lookup: Callable[[str | None], str | None],
    out_type: pa.DataType = _STRING,
) -> pa.Array:
    """``lookup`` of each distinct value of ``values``, mapped back to every row."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    encoded = values.dictionary_encode()
    answers = pa.array([lookup(v) for v in texts(encoded.dictionary)], out_type)
    if encoded.indices.null_count:
        answers = pa.concat_arrays([answers, pa.array([lookup(None)], out_type)])
        index = encoded.indices.fill_null(len(encoded.dictionary))
    else:
        index = encoded.indices
    return answers.take(index)


def agent_classes(user_agents: pa.ChunkedArray | pa.Array, table: Table) -> pa.Array:
    """The agent class of each user agent by the agents ``table``."""
    return _mapped(user_agents, agent_rules(table).classify)


@functools.lru_cache(maxsize=_MEMO)
def _families(user_agent: str, crawler: bool) -> tuple[str, str]:
    from logstream.analytics.useragents import classify

    browser, _, system, _ = classify(user_agent, crawler)
    return system, browser


def families(
    user_agents: pa.ChunkedArray | pa.Array, table: Table | None
) -> tuple[pa.Array, pa.Array]:
    """GoAccess's OS and browser families of each user agent (``Unknown`` without one), a
    crawler by the agents ``table`` being ``Crawlers`` in both
    (:func:`logstream.pipeline.ingest.panels.panel_columns`)."""
    from logstream.analytics.useragents import UNKNOWN
    from logstream.reference import CRAWLER_CLASS

    rules = agent_rules(table) if table is not None else None

    def pair(ua: str | None) -> tuple[str, str]:
        if ua is None:
            return UNKNOWN, UNKNOWN
        crawler = rules is not None and rules.classify(ua) == CRAWLER_CLASS
        return _families(ua, crawler)

    systems = _mapped(user_agents, lambda ua: pair(ua)[0])
    browsers = _mapped(user_agents, lambda ua: pair(ua)[1])
    return systems, browsers


@functools.lru_cache(maxsize=_MEMO)
def _country(host: str | None) -> str:
    from logstream.analytics.geo import locate

    return locate(host)[0]


def countries(hosts: pa.ChunkedArray | pa.Array) -> pa.Array:
    """The country of each client host, as GoAccess names it
    (:func:`~logstream.analytics.geo.locate`)."""
    return _mapped(hosts, _country)


@functools.lru_cache(maxsize=8)
def _prefixes(table: Table) -> list[tuple[int, dict[str, str]]]:
    by_length: dict[int, dict[str, str]] = {}
    for prefix, section in table.rows:
        by_length.setdefault(len(str(prefix)), {}).setdefault(str(prefix), str(section))
    return sorted(by_length.items(), reverse=True)


def sections(paths: pa.ChunkedArray | pa.Array, table: Table) -> pa.Array:
    """The section of each URL path by a sections ``table``: the longest prefix's; ``other``
    when none matches; ``unknown`` without a path."""
    lengths = _prefixes(table)

    @functools.lru_cache(maxsize=_MEMO)
    def section(path: str | None) -> str:
        if path is None:
            return "unknown"
        for length, prefixes in lengths:
            found = prefixes.get(path[:length])
            if found is not None and len(path) >= length:
                return found
        return "other"

    return _mapped(paths, section)


def _ipv4(host: str | None) -> int | None:
    if host is None or not _IPV4.match(host):
        return None
    a, b, c, d = (int(x) for x in host.split("."))
    return ((a * 256 + b) * 256 + c) * 256 + d


@functools.lru_cache(maxsize=8)
def _networks(table: Table) -> list[tuple[int, dict[int, str]]]:
    by_length: dict[int, dict[int, str]] = {}
    for start, length, org, _country in table.rows:
        by_length.setdefault(int(length), {}).setdefault(int(start), str(org))  # type: ignore[arg-type]
    return sorted(by_length.items(), reverse=True)


def organisations(hosts: pa.ChunkedArray | pa.Array, table: Table) -> pa.Array:
    """The organisation of each client host by a networks ``table``: the longest matching
    network's; null for a host name, an IPv6 client or no match."""
    lengths = _networks(table)

    def organisation(host: str | None) -> str | None:
        ip = _ipv4(host)
        if ip is None:
            return None
        for length, networks in lengths:
            found = networks.get(ip - ip % (1 << (32 - length)))
            if found is not None:
                return found
        return None

    return _mapped(hosts, organisation)
