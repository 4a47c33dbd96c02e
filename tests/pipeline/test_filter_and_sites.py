"""``logstream run`` with a filter at ingest and a site per file (--vhost-from-path), on
both paths of the micro-batch: what the filter leaves out is counted, never dropped without
a word (on-time + late + quarantined + filtered = lines read), and each site's totals in the
store equal its own files' batch report with the same filter; "all sites" is their sum."""

from __future__ import annotations

import gzip
import os
import sqlite3
import zlib

import pytest
from tests.conftest import COMBINED, data_file
from tests.pipeline.helpers import config, pipeline_for, run_to_end

from logstream.dashboard.data import read_snapshot
from logstream.dashboard.explore_data import site_rows
from logstream.dashboard.layout import kpi_cards
from logstream.filters import EventFilter
from logstream.parsing import compile_format, parse
from logstream.report import build_report
from logstream.report.filtering import filtered_rows
from logstream.sources import read_lines

SITES = ("www.a.example", "b.example", "shop.c.example")
#: The site of a file: the name before ``.partN.log``.
SITE_FROM_PATH = r"/([^/]+)\.part\d+\.log$"
FILTER = ["status < 400 OR url_path LIKE '/blog/%'"]
GREP = ["HTTP/1\\.[01]"]


@pytest.fixture(scope="module")
def site_files(tmp_path_factory):
    """The elastic log's 10,000 lines served by three sites (a line's site from its CRC-32),
    a file per site, read in turn (a micro-batch each)."""
    with gzip.open(data_file(COMBINED), "rt", encoding="utf-8", errors="replace") as fh:
        lines = [line.rstrip("\n") for line in fh]
    root = tmp_path_factory.mktemp("sites") / "in"
    root.mkdir()
    files: dict[str, list] = {}
    for i, site in enumerate(SITES):
        path = root / f"{site}.part0.log"
        path.write_text("".join(f"{x}\n" for x in lines if zlib.crc32(x.encode()) % 3 == i))
        os.utime(path, (1_000_000 + 10 * i, 1_000_000 + 10 * i))
        files[site] = [path]
    return root, files


def _run(spark, tmp, root, on_driver: bool):
    """The live path follows the three files, a glob per site (``--follow`` repeated); the
    Spark steps read them as a directory, a file per micro-batch."""
    sources = (
        {"source": "follow", "follow": tuple(str(root / f"{s}.part*.log") for s in SITES)}
        if on_driver
        else {}
    )
    cfg = config(
        tmp,
        root,
        log_format="combined",
        watermark="5 days",  # the sites' files interleave in time: nothing is late
        store_retention="30 days",
        queries="traffic_per_minute,traffic_by_panel",
        vhost_from_path=SITE_FROM_PATH,
        filter=FILTER,
        grep=GREP,
        **sources,
    )
    if on_driver:
        cfg = cfg.model_copy(update={"input_dir": None, "max_files_per_trigger": None})
    pipeline = run_to_end(pipeline_for(spark, cfg, spark_steps=not on_driver))
    assert pipeline.ingest.paths["driver" if on_driver else "spark"] >= 1
    assert pipeline.ingest.paths["spark" if on_driver else "driver"] == 0
    return cfg


@pytest.fixture(scope="module", params=["driver", "spark"])
def stream(request, spark, site_files, tmp_path_factory):
    root, _ = site_files
    cfg = _run(spark, tmp_path_factory.mktemp(request.param), root, request.param == "driver")
    store = sqlite3.connect(cfg.store_path)
    counters = dict(store.execute("SELECT name, value FROM counters").fetchall())
    sites = {
        key: (requests, size)
        for key, requests, size in store.execute(
            "SELECT key, SUM(requests), SUM(bytes) FROM traffic_by_dimension "
            "WHERE dimension = 'virtual_hosts' GROUP BY key"
        )
    }
    reasons = {
        r["reason"] for r in spark.read.parquet(str(cfg.output_dir / "quarantine")).collect()
    }
    return {"counters": counters, "sites": sites, "path": cfg.store_path, "reasons": reasons}


@pytest.fixture(scope="module")
def own_reports(spark, site_files):
    """Each site's own report: its two files alone, with the same filter."""
    _, files = site_files
    flt = EventFilter.build(filters=FILTER, greps=GREP)
    out = {}
    for site, paths in files.items():
        parsed = parse(read_lines(spark, [str(p) for p in paths]), compile_format("combined"))
        rows = filtered_rows(parsed, flt)
        report = build_report(rows.rows, top=1, panels=())
        report["general"]["filtered_out"] = rows.left_out()
        out[site] = report["general"]
    return out


def test_the_filter_counts_what_it_leaves_out(stream, own_reports):
    c = stream["counters"]
    assert c["events"] + c["late_events"] + c["quarantined"] + c["filtered"] == 10_000
    assert c["filtered"] == sum(g["filtered_out"] for g in own_reports.values()) > 0
    assert c["events"] == sum(g["valid_requests"] for g in own_reports.values())
    assert c["late_events"] == c["quarantined"] == 0
    assert "filtered" not in stream["reasons"]  # counted, never quarantined
    cards = {card.id: card for card in kpi_cards(read_snapshot(stream["path"]))}
    assert cards["kpi-filtered"].children[1].children == f"{c['filtered']:,}"  # the dashboard


def test_each_sites_totals_equal_its_own_files_report(stream, own_reports):
    want = {s: (g["valid_requests"], g["bandwidth_bytes"]) for s, g in own_reports.items()}
    assert stream["sites"] == want
    assert all(requests > 1000 for requests, _ in want.values())


def test_the_all_sites_row_is_the_sum_of_the_sites(stream, own_reports):
    rows = site_rows(stream["path"], None)
    by_site = {r.site: (r.requests, r.bytes) for r in rows}
    assert by_site.pop("all sites") == (
        sum(g["valid_requests"] for g in own_reports.values()),
        sum(g["bandwidth_bytes"] for g in own_reports.values()),
    )
    assert by_site == stream["sites"]


def test_the_batch_report_takes_the_same_sites_from_the_paths(spark, site_files, own_reports):
    """``logstream batch --vhost-from-path`` over the three files at once: its virtual hosts
    panel has each site's own report, and its total their sum."""
    root, _ = site_files
    parsed = parse(read_lines(spark, [str(root)]), compile_format("combined"))
    flt = EventFilter.build(filters=FILTER, greps=GREP)
    report = build_report(
        filtered_rows(parsed, flt, SITE_FROM_PATH).rows, top=10, panels=("virtual_hosts",)
    )
    panel = report["virtual_hosts"]
    got = {i["data"]: (i["hits"], i["bytes"]) for i in panel["data"]}
    assert got == {s: (g["valid_requests"], g["bandwidth_bytes"]) for s, g in own_reports.items()}
    assert panel["metadata"]["hits"] == report["general"]["valid_requests"]
