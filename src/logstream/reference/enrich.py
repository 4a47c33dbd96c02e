"""Enrich events with reference data: broadcast joins and native expressions only.

* **networks**: ``client_host`` as an IPv4 number (:func:`ipv4_number`); for each prefix
  length the table holds, one broadcast hash join on the host's network at that length;
  the longest match wins (``coalesce`` from the longest length down). A host name or an IPv6
  client matches nothing.
* **agents**: the batch's distinct user agents are classified with one ``rlike`` per class
  (the class's patterns joined into one alternation, compiled once), then joined back to the
  events with a broadcast hash join: the regular expressions run once per distinct user
  agent, not once per event.
* **sections**: for each prefix length the table holds, one broadcast hash join on the
  path's first characters; the longest prefix wins. Without a table, the section is the
  path's first segment.

The broadcast tables are built once per table version and kept (:class:`Enricher`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from logstream.reference.tables import Table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "ENRICHMENT_COLUMNS",
    "Enricher",
    "agent_class_column",
    "first_segment",
    "ipv4_number",
]

#: Columns :meth:`Enricher.enrich` adds, in order.
ENRICHMENT_COLUMNS = ("organisation", "country", "agent_class", "section")

_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = rf"^{_OCTET}(\.{_OCTET}){{3}}$"


def ipv4_number(host: Column) -> Column:
    """A dotted IPv4 address as its 32-bit number (bigint); null for anything else.

    Examples
    --------
    ``192.0.2.1`` → 3221225985; ``burger.letters.com`` → null.
    """
    parts = F.split(host, r"\.")
    number = F.lit(0).cast("bigint")
    for i in range(4):
        number = number * 256 + F.try_element_at(parts, F.lit(i + 1)).try_cast("bigint")
    return F.when(host.rlike(_IPV4), number)


def first_segment(url_path: Column) -> Column:
    """The default section: the path's first segment with its slashes (``/shuttle/``), ``/``
    for a file at the root, ``unknown`` without a path. String functions, no regular
    expression (a regex per event costs about a third more).

    Examples
    --------
    ``/shuttle/missions/a.html`` → ``/shuttle/``; ``/ksc.html`` → ``/``.
    """
    rest = F.substring(url_path, 2, 1 << 30)
    first = F.concat(F.lit("/"), F.substring_index(rest, "/", 1), F.lit("/"))
    return F.when(url_path.isNull(), F.lit("unknown")).otherwise(
        F.when(F.instr(rest, "/") > 0, first).otherwise(F.lit("/"))
    )


def agent_class_column(table: Table, user_agent: Column) -> Column:
    """The agent class of ``user_agent`` by ``table`` (an agents :class:`Table`): the first
    class, in the table's order, one of whose patterns is found in it; ``other`` when none
    is; ``unknown`` when there is no user agent."""
    patterns: dict[str, list[str]] = {}
    for pattern, cls in table.rows:
        patterns.setdefault(str(cls), []).append(str(pattern))
    expr: Column | None = None
    for cls, pats in patterns.items():
        cond = user_agent.rlike("|".join(f"(?:{p})" for p in pats))
        expr = F.when(cond, F.lit(cls)) if expr is None else expr.when(cond, F.lit(cls))
    classified = F.lit("other") if expr is None else expr.otherwise(F.lit("other"))
    return F.when(user_agent.isNull(), F.lit("unknown")).otherwise(classified)


class Enricher:
    """Adds :data:`ENRICHMENT_COLUMNS` to events, with broadcast frames kept per version.

    Parameters
    ----------
    spark : SparkSession
    """

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self._frames: dict[tuple[str, str], dict[int, DataFrame]] = {}

    def enrich(self, events: DataFrame, tables: Mapping[str, Table]) -> DataFrame:
        """Enrich ``events`` with ``tables`` (``{kind: Table}``, from
        :meth:`~logstream.reference.ReferenceTables.for_batch`).

        Parameters
        ----------
        events : DataFrame
            Batch DataFrame with ``client_host``, ``user_agent``, ``url_path`` (strings).
        tables : mapping of str to Table
            The versions to use; a kind left out gets its default.

        Returns
        -------
        DataFrame
            ``events``' columns, then ``organisation`` and ``country`` (null without a
            networks table or a match), ``agent_class`` (never null: ``unknown`` without a
            user agent, ``other`` when no pattern matches), ``section`` (never null:
            ``other`` when no prefix matches, ``unknown`` without a path).
        """
        columns = [F.col(c) for c in events.columns]
        df = events
        org: Column = F.lit(None).cast("string")
        country: Column = F.lit(None).cast("string")
        if "networks" in tables:
            df, org, country = self._networks(df, tables["networks"])
        if "agents" in tables:
            df, agent = self._agents(df, tables["agents"])
        else:
            agent = F.when(F.col("user_agent").isNull(), "unknown").otherwise("other")
        if "sections" in tables:
            df, section = self._sections(df, tables["sections"])
        else:
            section = first_segment(F.col("url_path"))
        return df.select(
            *columns,
            org.alias("organisation"),
            country.alias("country"),
            agent.alias("agent_class"),
            section.alias("section"),
        )

    # -- the joins -------------------------------------------------------------------------

    def _by_length(
        self, table: Table, build: dict[int, list[tuple[object, ...]]]
    ) -> dict[int, DataFrame]:
        key = (table.kind, table.digest)
        frames = self._frames.get(key)
        if frames is None:
            import pandas as pd  # here: a run without reference tables does not load it

            names = {"networks": ("n", "o", "c"), "sections": ("p", "s")}[table.kind]
            types = {"n": "bigint", "o": "string", "c": "string", "p": "string", "s": "string"}
            # from pandas (Arrow): a LocalRelation, broadcast from the driver without a job
            frames = {
                length: self.spark.createDataFrame(
                    pd.DataFrame(rows, columns=[f"_{n}{length}" for n in names]),
                    ", ".join(f"_{n}{length} {types[n]}" for n in names),
                )
                for length, rows in build.items()
            }
            self._frames[key] = frames
        return frames

    def _networks(self, df: DataFrame, table: Table) -> tuple[DataFrame, Column, Column]:
        build: dict[int, list[tuple[object, ...]]] = {}
        for start, length, org, country in table.rows:
            build.setdefault(int(length), []).append((start, org, country))  # type: ignore[arg-type]
        frames = self._by_length(table, build)
        df = df.withColumn("_ip", ipv4_number(F.col("client_host")))
        ip = F.col("_ip")
        org_cols, country_case = [], None
        for length in sorted(frames, reverse=True):
            network = ip - F.pmod(ip, F.lit(1 << (32 - length)))
            df = df.join(F.broadcast(frames[length]), network == F.col(f"_n{length}"), "left")
            org_l = F.col(f"_o{length}")
            org_cols.append(org_l)
            hit = org_l.isNotNull()
            country_case = (
                F.when(hit, F.col(f"_c{length}"))
                if country_case is None
                else country_case.when(hit, F.col(f"_c{length}"))
            )
        if not org_cols:
            return df, F.lit(None).cast("string"), F.lit(None).cast("string")
        assert country_case is not None
        return df, F.coalesce(*org_cols), country_case

    def _agents(self, df: DataFrame, table: Table) -> tuple[DataFrame, Column]:
        ua = F.col("user_agent")
        classes = (
            df.select(ua.alias("_ua"))
            .where(F.col("_ua").isNotNull())
            .distinct()
            .select("_ua", agent_class_column(table, F.col("_ua")).alias("_agent_class"))
        )
        df = df.join(F.broadcast(classes), ua == F.col("_ua"), "left")
        return df, F.coalesce(F.col("_agent_class"), F.lit("unknown"))

    def _sections(self, df: DataFrame, table: Table) -> tuple[DataFrame, Column]:
        build: dict[int, list[tuple[object, ...]]] = {}
        for prefix, section in table.rows:
            build.setdefault(len(str(prefix)), []).append((prefix, section))
        frames = self._by_length(table, build)
        path = F.col("url_path")
        sections = []
        for length in sorted(frames, reverse=True):
            df = df.join(
                F.broadcast(frames[length]),
                F.substring(path, 1, length) == F.col(f"_p{length}"),
                "left",
            )
            sections.append(F.col(f"_s{length}"))
        section = F.coalesce(*sections, F.lit("other"))
        return df, F.when(path.isNull(), F.lit("unknown")).otherwise(section)
