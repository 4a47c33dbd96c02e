"""Reference data: tables are validated with messages naming the row and the fix; the batch
report and the stream enrich the real elastic Combined log exactly as an independent Python
computation does; a table changed mid-stream changes the enrichment from the next micro-batch
on; and a micro-batch replayed after a crash enriches with the version it first used."""

from __future__ import annotations

import gzip
import ipaddress
import re
import sqlite3
from collections import Counter
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from logstream.errors import ConfigError, InputPathError
from logstream.parsing import parse, resolve_format
from logstream.pipeline import Pipeline, PipelineConfig
from logstream.reference import (
    ReferenceTables,
    builtin_agent_rules,
    load_table,
    parse_reference_options,
)
from logstream.report import build_report
from logstream.sources import read_lines
from tests.pipeline.helpers import config, run_to_end, write_chunks

NETWORKS = (
    "network,organisation,country\n"
    "66.249.64.0/19,Google,US\n"
    "66.249.73.135,Googlebot 135,US\n"  # a single address: the longest prefix wins
    "83.149.9.0/24,ISP A,RU\n"
    "2001:db8::/32,documentation,\n"  # IPv6: skipped
)
RULES = [(re.compile(p), c) for p, c in builtin_agent_rules()]


def agent_class(ua: str | None) -> str:
    if ua is None:
        return "unknown"
    return next((c for r, c in RULES if r.search(ua)), "other")


def organisation(host: str) -> str:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return "unknown"
    best = None
    for line in NETWORKS.splitlines()[1:]:
        net, org, _ = line.split(",")
        net = ipaddress.ip_network(net, strict=False)
        if ip.version == net.version and ip in net and (best is None or net.prefixlen > best[0]):
            best = (net.prefixlen, org)
    return "unknown" if best is None else best[1]


def section(path: str | None, table: dict[str, str]) -> str:
    if path is None:
        return "unknown"
    hits = [p for p in table if path.startswith(p)]
    return table[max(hits, key=len)] if hits else "other"


# -- tables ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "text", "message"),
    [
        ("networks", "network,organisation\n10.0.0.0/33,x\n", "row 1: network '10.0.0.0/33'"),
        ("networks", "network,org\n10.0.0.0/8,x\n", "missing column(s) organisation"),
        ("sections", "prefix,section\n/a/,A\nshuttle/,S\n", "row 2: prefix 'shuttle/' must"),
        ("sections", "prefix,section\n/a/,\n", "row 1: section is empty"),
        ("agents", "pattern,agent_class\nbot(,crawler\n", "row 1: pattern 'bot('"),
    ],
)
def test_a_bad_table_names_the_row_and_the_fix(kind, text, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_table(kind, text.encode(), f"{kind}.csv")


def test_tables_from_csv_and_parquet_are_the_same(tmp_path):
    csv_table = load_table("networks", NETWORKS.encode(), "n.csv")
    assert [r[2] for r in csv_table.rows] == ["Google", "Googlebot 135", "ISP A"]  # no IPv6
    assert csv_table.rows[1][:2] == (int(ipaddress.ip_address("66.249.73.135")), 32)
    rows = [line.split(",") for line in NETWORKS.splitlines()]
    table = pa.table({c: [r[i] for r in rows[1:]] for i, c in enumerate(rows[0])})
    pq.write_table(table, tmp_path / "n.parquet")
    data = (tmp_path / "n.parquet").read_bytes()
    assert load_table("networks", data, "n.parquet").rows == csv_table.rows


def test_reference_options_are_checked(tmp_path):
    (tmp_path / "s.csv").write_text("prefix,section\n/a/,A\n")
    assert parse_reference_options([f"sections={tmp_path / 's.csv'}"]) == {
        "sections": tmp_path / "s.csv"
    }
    with pytest.raises(ConfigError, match="unknown table kind 'geo'"):
        parse_reference_options(["geo=x.csv"])
    with pytest.raises(ConfigError, match="is not KIND=PATH"):
        parse_reference_options(["sections"])
    with pytest.raises(InputPathError, match=r"missing\.csv"):
        parse_reference_options([f"sections={tmp_path / 'missing.csv'}"])
    with pytest.raises(ConfigError, match="needs a networks table"):
        PipelineConfig.build(input_dir=tmp_path, queries="traffic_by_network")
    assert "traffic_by_network" not in PipelineConfig.build(input_dir=tmp_path).queries
    with_networks = PipelineConfig.build(
        input_dir=tmp_path, reference={"networks": tmp_path / "s.csv"}
    )
    assert "traffic_by_network" in with_networks.queries


# -- the batch report -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def elastic_lines(combined_log) -> list[str]:
    with gzip.open(combined_log, "rt", encoding="utf-8") as fh:
        return [line.rstrip("\n") for line in fh]


def test_batch_report_enriches_like_python(spark, combined_log, tmp_path):
    (tmp_path / "n.csv").write_text(NETWORKS)
    tables = ReferenceTables({"networks": tmp_path / "n.csv"})
    parsed = parse(read_lines(spark, [combined_log]), resolve_format("combined"))
    # (GoAccess's panels are not this test's: left out, as --no-panel does)
    report = build_report(parsed, top=20, reference=tables, panels=())["reference"]
    rows = (
        parsed.where("quarantine_reason IS NULL")
        .select("client_host", "user_agent", "url_path")
        .collect()
    )
    classes = Counter(agent_class(r["user_agent"]) for r in rows)
    networks = Counter(organisation(r["client_host"]) for r in rows)
    # without a sections table: the first path segment
    segments = Counter(re.match(r"(/[^/]*/)?", r["url_path"]).group(1) or "/" for r in rows)
    assert {r["agent_class"]: r["requests"] for r in report["agent_classes"]} == classes
    assert {r["organisation"]: r["requests"] for r in report["networks"]} == networks
    top = {r["section"]: r["requests"] for r in report["sections"]}
    assert len(top) == min(20, len(segments)) and all(segments[k] == v for k, v in top.items())
    assert min(top.values()) >= max([v for k, v in segments.items() if k not in top] or [0])
    assert report["crawler_share"] == round(classes["crawler"] / len(rows), 6)
    assert 0.15 < report["crawler_share"] < 0.25  # Googlebot, archive.org, Ezooms, …
    assert report["tables"]["networks"]["source"] == str(tmp_path / "n.csv")


# -- the stream: refresh and replay -----------------------------------------------------------

SECTIONS = {
    "v1": "prefix,section\n/blog/,blog\n/presentations/,talks\n",
    "v2": "prefix,section\n/blog/,journal\n/presentations/,talks\n/images/,images\n",
    "v3": "prefix,section\n/blog/,diary\n/presentations/,talks\n",
}


class Crash(RuntimeError):
    pass


@pytest.fixture(scope="module")
def stream(spark, elastic_lines, tmp_path_factory):
    """Five micro-batches of 2,000 lines. The sections table changes after batch 1 (v1 → v2);
    batch 3 crashes after its events are published, the table changes again (v3), and the
    restarted pipeline replays batch 3, then runs batch 4."""
    tmp = tmp_path_factory.mktemp("reference-stream")
    write_chunks(elastic_lines, tmp / "in", per_file=2000)
    sections, networks = tmp / "sections.csv", tmp / "networks.csv"
    sections.write_text(SECTIONS["v1"])
    networks.write_text(NETWORKS)
    cfg = config(
        tmp,
        tmp / "in",
        log_format="combined",
        reference={"sections": sections, "networks": networks},
        store_retention="30 days",  # the store keeps every window of the 4-day log
        # the enriched outputs only: the others read no reference table
        queries="traffic_by_section,traffic_by_agent,traffic_by_network",
    )

    def hook(name: str, batch_id: int) -> None:
        if name == "snapshot_written" and batch_id == 1:
            sections.write_text(SECTIONS["v2"])
        if name == "published_events" and batch_id == 3:
            sections.write_text(SECTIONS["v3"])
            raise Crash("killed after publishing the events of batch 3")

    first = Pipeline(spark, cfg)
    first.ingest.step_hook = hook
    with pytest.raises(Exception, match="killed after publishing"):
        run_to_end(first)
    second = Pipeline(spark, cfg)
    run_to_end(second)
    events = spark.read.parquet(str(cfg.output_dir / "events")).select(
        "batch_id", "event_time", "client_host", "url_path", "user_agent"
    )
    return {"cfg": cfg, "events": events.collect(), "spark": spark}


def _minute(t: datetime) -> str:
    return t.replace(second=0, microsecond=0, tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_changed_table_enriches_from_the_next_batch_and_a_replay_as_before(stream):
    version = {0: "v1", 1: "v1", 2: "v2", 3: "v2", 4: "v3"}  # batch 3: replayed with v2
    expected = Counter()
    for r in stream["events"]:
        table = dict(line.split(",") for line in SECTIONS[version[r["batch_id"]]].split()[1:])
        expected[section(r["url_path"], table)] += 1
    assert sorted({r["batch_id"] for r in stream["events"]}) == [0, 1, 2, 3, 4]
    store = sqlite3.connect(stream["cfg"].store_path)
    got = Counter()
    for key, requests in store.execute(
        "SELECT key, requests FROM traffic_by_dimension WHERE dimension = 'sections'"
    ):
        got[key] += requests
    assert got == expected
    assert {"blog", "journal", "diary"} <= set(got)
    # each micro-batch's versions are recorded before it writes; the newest one is served
    snapshots = stream["cfg"].state_dir / "reference"
    assert len(list(snapshots.glob("sections-*.csv"))) == 3
    assert [p.name for p in (snapshots / "batches").iterdir()] == ["4.json"]
    (served,) = store.execute(
        "SELECT value FROM pipeline_state WHERE key = 'reference_versions'"
    ).fetchone()
    assert set(eval(served)) == {"agents", "networks", "sections"}


@pytest.mark.parametrize(
    ("output", "column", "classify"),
    [
        ("traffic_by_agent", "agent_class", lambda r: agent_class(r["user_agent"])),
        ("traffic_by_network", "organisation", lambda r: organisation(r["client_host"])),
    ],
)
def test_final_windows_per_key_equal_python(stream, output, column, classify):
    expected = Counter((_minute(r["event_time"]), classify(r)) for r in stream["events"])
    spark = stream["spark"]
    rows = spark.read.parquet(str(stream["cfg"].output_dir / output)).collect()
    got = {(_minute(r["window_start"]), r[column]): r["requests"] for r in rows}
    assert len({k[0] for k in got}) > 60  # final one-minute windows of the run
    assert got == {k: expected[k] for k in got}
    assert {k for k in expected if k[0] <= max(m for m, _ in got)} == set(got)
