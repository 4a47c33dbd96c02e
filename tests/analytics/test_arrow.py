"""The driver's Arrow analytics compute what the Spark forms compute, on real data.

The live path (:mod:`logstream.pipeline.ingest.driver`) folds small micro-batches with
:mod:`logstream.analytics.arrow`; the Spark steps and the batch report use the Spark forms.
Each test here runs both on the same input and compares them row for row.
"""

from __future__ import annotations

import gzip
import random
from collections import Counter

import pyarrow as pa
import pytest
from crawleruseragents import CRAWLER_USER_AGENTS_DATA
from pyspark.sql import functions as F

from logstream.analytics.arrow import classify, sketches
from logstream.analytics.arrow.panes import fold_events, merge_panes
from logstream.analytics.arrow.sessions import (
    closed_rows,
    merge_sessions,
    session_parts,
    split_closed,
)
from logstream.analytics.panes import PaneSpec, fold_panes
from logstream.analytics.sessions import (
    SESSION_PARTS_SCHEMA,
    merged_sessions,
    split_sessions,
)
from logstream.analytics.sessions import session_parts as spark_parts
from logstream.parsing import compile_format, events, parse
from logstream.reference import Enricher, agent_class_column
from logstream.reference.tables import ReferenceTables, load_table
from logstream.sources import read_lines

VIEWS = (
    "traffic",
    "pages",
    "visitors",
    "clients",
    "requests",
    "not_found",
    "static_requests",
    "hosts",
)


def _elastic_agents(combined_log) -> list[str]:
    with gzip.open(combined_log, "rt", encoding="utf-8", errors="replace") as fh:
        return sorted({line.rsplit('"', 2)[-2] for line in fh if line.count('"') >= 6})


@pytest.fixture(scope="module")
def nasa_events(spark, nasa_day):
    """The NASA day's first 12,000 events, with the columns both folds read."""
    from logstream.analytics.pages import is_content_page
    from logstream.pipeline.ingest.panels import _item_columns

    ev = events(parse(read_lines(spark, [nasa_day]), compile_format("common"))).limit(12_000)
    items = _item_columns(("requests", "static_requests", "not_found", "hosts"), (), None)
    ev = ev.select(
        "*",
        F.unix_millis("event_time").alias("t_ms"),
        is_content_page().alias("is_page"),
        *(c.alias(n) for n, c in items.items()),
    ).coalesce(1)
    return ev.withColumn("_i", F.monotonically_increasing_id()).cache()


def _halves(frame):
    """The first 6,000 rows and the rest, in the file's order."""
    return frame.where("_i < 6000").drop("_i"), frame.where("_i >= 6000").drop("_i")


def _pane_rows(rows) -> Counter:
    return Counter(
        tuple(r[c] for c in ("view", "key", "start_ms", "end_ms", "requests", "bytes"))
        + tuple(r[f"status_{c}xx"] for c in "12345")
        + tuple(r[c] for c in ("errors", "server_errors", "touched"))
        for r in rows
    )


def test_a_sketch_pane_has_the_same_bytes_however_the_events_are_chunked(nasa_events):
    """A replay may collect the same rows in other Arrow chunks (a partition a chunk): the
    visitors' sketches take their hosts sorted, so their bytes are the same (Arrow gives a
    table's distinct values in an order that depends on its chunks and threads)."""
    spec = PaneSpec(views=("visitors",))
    table = nasa_events.drop("_i").toArrow().combine_chunks()
    whole = fold_events(table, spec).sort_by("start_ms")["sketch"].to_pylist()
    assert len(whole) > 100
    chunked = pa.Table.from_batches(table.to_batches(max_chunksize=97))
    for _ in range(5):
        assert fold_events(chunked, spec).sort_by("start_ms")["sketch"].to_pylist() == whole


def test_the_fold_sums_exactly_past_float_precision_and_groups_a_null_key():
    """The fold sums measures by ``np.bincount`` (float64) only where that is exact: a pane's
    bytes above 2**53 are summed in int64 to the byte; a null host is a pane of its own."""
    big = (1 << 53) + 1  # float64 cannot hold it: 2**53 + 1 rounds to 2**53
    table = pa.table(
        {
            "t_ms": pa.array([0, 1_000, 2_000, 61_000, 62_000], pa.int64()),
            "client_host": pa.array(["a", "a", None, "a", None]),
            "status": pa.array([200, 404, 500, 200, 302], pa.int32()),
            "bytes_sent": pa.array([big, big, 7, big, 5], pa.int64()),
        }
    )
    rows = fold_events(table, PaneSpec(views=("traffic", "clients"))).to_pylist()
    got = {
        (r["view"], r["key"], r["start_ms"]): (r["requests"], r["bytes"], r["errors"]) for r in rows
    }
    assert got == {  # traffic panes of a minute, clients panes of five
        ("traffic", "", 0): (3, 2 * big + 7, 2),
        ("traffic", "", 60_000): (2, big + 5, 0),
        ("clients", "a", 0): (3, 3 * big, 1),
        ("clients", None, 0): (2, 12, 1),
    }


@pytest.mark.parametrize("older_batch", [False, True], ids=["in-order", "older-batch"])
def test_the_arrow_fold_equals_spark_fold_panes_on_the_nasa_day(spark, nasa_events, older_batch):
    spec = PaneSpec(views=VIEWS)
    first, rest = _halves(nasa_events)
    if older_batch:  # open panes of the later half: most of the batch's pass the merge by
        first, rest = rest, first
    # Spark: the first half's panes, then the second half folded into them
    open_panes = fold_panes(None, first, spec, True).drop("touched")
    expected = fold_panes(open_panes, rest, spec, True)
    # Arrow: the same two steps
    arrow_open = fold_events(first.toArrow(), spec).drop(["touched"])
    got = merge_panes(arrow_open, fold_events(rest.toArrow(), spec), spec.views)
    want = expected.toArrow()
    assert _pane_rows(got.to_pylist()) == _pane_rows(want.to_pylist())
    assert got.num_rows == want.num_rows > 10_000
    estimates = {
        (r["start_ms"]): r["v"]
        for r in expected.where("view = 'visitors'")
        .select("start_ms", F.hll_sketch_estimate("sketch").alias("v"))
        .collect()
    }
    mine = {
        r["start_ms"]: sketches.hll_estimate(r["sketch"])
        for r in got.to_pylist()
        if r["view"] == "visitors"
    }
    assert mine == estimates and len(mine) > 100


def test_sketches_read_both_ways_with_spark(spark):
    hosts = [f"10.{i // 250}.{i % 250}.1" for i in range(2_500)]
    mine = sketches.hll_of(hosts)
    theirs = (
        spark.createDataFrame([(h,) for h in hosts], "h string")
        .coalesce(1)
        .agg(F.hll_sketch_agg("h").alias("s"))
        .first()["s"]
    )
    assert bytes(theirs) == mine  # one aggregation of the same strings: the same bytes
    estimate = spark.createDataFrame([(mine,)], "s binary").select(F.hll_sketch_estimate("s"))
    assert estimate.first()[0] == sketches.hll_estimate(mine) == sketches.hll_estimate(theirs)
    durations = [random.Random(7).randint(0, 5000) for _ in range(150)]
    kll = sketches.kll_of(durations)
    read = (
        spark.createDataFrame([(kll,)], "s binary")
        .select(
            F.kll_sketch_get_n_bigint("s"),
            F.kll_sketch_get_quantile_bigint("s", F.lit(0.5)),
            F.kll_sketch_get_quantile_bigint("s", F.lit(0.95)),
        )
        .first()
    )
    assert tuple(read) == (150, sketches.kll_quantile(kll, 0.5), sketches.kll_quantile(kll, 0.95))
    spark_kll = (
        spark.createDataFrame([(d,) for d in durations], "d bigint")
        .agg(F.kll_sketch_agg_bigint("d").alias("s"))
        .first()["s"]
    )
    assert sketches.kll_n(sketches.kll_merge([bytes(spark_kll), kll])) == 300


def test_agent_classes_equal_spark_on_real_user_agents(spark, combined_log):
    table = ReferenceTables().current["agents"]  # the built-in table
    agents = _elastic_agents(combined_log) + [
        example for d in CRAWLER_USER_AGENTS_DATA for example in d.get("instances", [])[:2]
    ]
    frame = spark.createDataFrame([(a,) for a in agents], "user_agent string")
    expected = {
        r["user_agent"]: r["c"]
        for r in frame.select(
            "user_agent", agent_class_column(table, F.col("user_agent")).alias("c")
        ).collect()
    }
    got = classify.agent_classes(pa.array(agents), table).to_pylist()
    assert dict(zip(agents, got, strict=True)) == expected
    assert Counter(got)["crawler"] > 500 and Counter(got)["browser"] > 100


def test_sections_and_networks_equal_the_enricher(spark, nasa_day):
    sections = load_table(
        "sections",
        b"prefix,section\n/shuttle/,shuttle\n/shuttle/missions/,missions\n/images/,images\n",
        "s.csv",
    )
    networks = load_table(
        "networks",
        b"network,organisation,country\n199.0.0.0/8,Net199,US\n199.75.0.0/16,Net199.75,US\n"
        b"192.136.0.0/16,Net192,US\n",
        "n.csv",
    )
    ev = events(parse(read_lines(spark, [nasa_day]), compile_format("common"))).limit(5_000)
    enriched = (
        Enricher(spark)
        .enrich(
            ev.select("client_host", "user_agent", "url_path"),
            {"sections": sections, "networks": networks},
        )
        .collect()
    )
    paths = pa.array([r["url_path"] for r in enriched])
    hosts = pa.array([r["client_host"] for r in enriched])
    assert classify.sections(paths, sections).to_pylist() == [r["section"] for r in enriched]
    orgs = classify.organisations(hosts, networks).to_pylist()
    assert orgs == [r["organisation"] for r in enriched]
    assert Counter(orgs)["Net199"] > 0 and Counter(orgs)["Net199.75"] > 0


def _parts_rows(rows) -> Counter:
    def page(p):
        return None if p is None else (p["t_ms"], p["page"])

    return Counter(
        (
            r["client_host"],
            r["agent"],
            r["first_ms"],
            r["last_ms"],
            r["requests"],
            r["pages"],
            r["bytes"],
            page(r["entry"]),
            page(r["exit"]),
        )
        for r in rows
    )


def test_sessions_merge_and_close_as_spark_does(spark, nasa_events):
    first, rest = _halves(nasa_events)
    parts_a = spark_parts(first)
    parts_b = spark_parts(rest)
    arrow_a = session_parts(first.toArrow())
    arrow_b = session_parts(rest.toArrow())
    assert _parts_rows(arrow_a.to_pylist()) == _parts_rows(parts_a.toArrow().to_pylist())
    gap_s = 1800
    watermark = max(r["last_ms"] for r in arrow_b.to_pylist()) - 600_000
    merged = merged_sessions(
        parts_b, parts_a.select(*SESSION_PARTS_SCHEMA.fieldNames()), gap_s, True
    )
    closed, still_open = split_sessions(merged, gap_s, watermark)
    got = merge_sessions(arrow_b, arrow_a, gap_s * 1000)
    got_closed, got_open = split_closed(got, gap_s * 1000, watermark)
    assert _parts_rows(got_open.to_pylist()) == _parts_rows(still_open.toArrow().to_pylist())
    want = Counter(tuple(r.values()) for r in closed.toArrow().to_pylist())
    mine = Counter(tuple(r.values()) for r in closed_rows(got_closed).to_pylist())
    assert mine == want and sum(want.values()) > 300


@pytest.mark.parametrize("log", ["nasa_day", "combined_log"])
def test_the_panel_keys_made_on_the_driver_equal_the_spark_columns(spark, request, log):
    from logstream.analytics.panes import DAILY_VIEW, PANEL_VIEWS
    from logstream.pipeline.ingest.driver import _ON_DRIVER, _driver_items
    from logstream.pipeline.ingest.panels import _item_columns

    fmt = "common" if log == "nasa_day" else "combined"
    parsed = parse(read_lines(spark, [request.getfixturevalue(log)]), compile_format(fmt))
    views = tuple(_ON_DRIVER)
    spark_items = _item_columns(views, (), None, True)
    both = parsed.select("*", *(c.alias(f"spark_{n}") for n, c in spark_items.items()))
    rows = _driver_items(both.toArrow(), views)
    for view in views:
        name = PANEL_VIEWS.get(view, "p_visitor")
        assert rows[name].to_pylist() == rows[f"spark_{name}"].to_pylist(), view
    visitors = rows["p_visitor"].to_pylist()
    assert "" in visitors and any("\n" in v for v in visitors)  # 4xx lines, and the rest
    if log == "combined_log":
        assert any(not v.endswith("\n-") for v in visitors if v)  # real user agents
    assert DAILY_VIEW in views
