"""GoAccess's panels in the batch report equal Debian's ``goaccess`` on the real elastic
Combined log, panel by panel (docs/report.md, "GoAccess's panels"); the stream's
``traffic_by_panel``, summed over the same log, equals the report, and the live dashboard
shows each panel with the report's numbers."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
import subprocess
import time
import zlib
from pathlib import Path

import pytest
from tests.conftest import COMBINED, data_file
from tests.dashboard.helpers import chromium
from tests.pipeline.helpers import config, run_to_end, write_chunks

from logstream.analytics.geo import locate
from logstream.dashboard import start_dashboard_thread
from logstream.parsing import compile_format, parse
from logstream.pipeline import Pipeline
from logstream.report import build_report
from logstream.report.panels import PANELS
from logstream.sources import read_lines

#: Every item of every panel (the elastic log has at most 1,753 of one kind).
ALL = 5000

#: GoAccess 1.7 keeps an (item, visitor) pair as one 64-bit key whose halves it orders by size
#: (``u64encode`` in ``src/gkhash.c``): item a's visitor b and item b's visitor a are one key,
#: and the second is not counted. On the elastic log that costs each item below one visitor
#: (the banner one of its 488, the site's root one of its 123): GoAccess run on the item's
#: lines alone counts them all (test_goaccess_counts_the_lost_visitor_on_the_items_lines_alone).
GOACCESS_PAIR_COLLISIONS = {
    ("static_requests", "/images/web/2009/banner.png", "GET", "HTTP/1.1"): 1,
    ("requests", "/", "GET", "HTTP/1.1"): 1,
    ("requests", "/blog/tags/release", "GET", "HTTP/1.1"): 1,
    ("requests", "/misc/rcfiles/zshrc", "GET", "HTTP/1.1"): 1,
}

#: GoAccess cuts a Google referrer after its search terms (``extract_keyphrase`` writes a NUL
#: into the referrer at the next ``&``); logstream keeps the referrer as written.
GOOGLE = (  # found anywhere in the referrer
    "http://www.google.",
    "https://www.google.",
    "http://webcache.googleusercontent.com/",
    "https://webcache.googleusercontent.com/",
    "http://translate.googleusercontent.com/",
    "https://translate.googleusercontent.com/",
)


def goaccess_binary() -> str:
    found = shutil.which("goaccess")
    if not found:
        pytest.fail("goaccess is missing: apt-get install goaccess (.ci/run does)", pytrace=False)
    return found


@pytest.fixture(scope="module")
def goaccess(tmp_path_factory):
    out = tmp_path_factory.mktemp("goaccess") / "report.json"
    subprocess.run(
        [
            goaccess_binary(),
            "-",  # GoAccess 1.7 reads no gzip: the lines come on standard input
            "--log-format=COMBINED",
            "--enable-panel=REFERRERS",
            f"--max-items={ALL}",
            "--no-progress",
            "-o",
            str(out),
        ],
        input=gzip.decompress(data_file(COMBINED).read_bytes()),
        check=True,
        capture_output=True,
    )
    # a few user agents and referrers hold bytes that are not UTF-8 (GoAccess copies them)
    return json.loads(out.read_bytes().decode("utf-8", "replace"))


#: The elastic log's lines served by three virtual hosts (each line's host from its CRC-32),
#: written as Apache's ``vhost_combined`` (``%v:%p`` before the Combined fields).
VHOSTS = ("www.semicomplete.com", "semicomplete.com", "blog.example.org")


@pytest.fixture(scope="module")
def vhost_log(tmp_path_factory):
    with gzip.open(data_file(COMBINED), "rt", encoding="utf-8", errors="replace") as fh:
        lines = [line.rstrip("\n") for line in fh]
    path = tmp_path_factory.mktemp("vhosts") / "other_vhosts_access.log"
    path.write_text(
        "".join(f"{VHOSTS[zlib.crc32(line.encode()) % 3]}:80 {line}\n" for line in lines)
    )
    return path


@pytest.fixture(scope="module")
def ours_vhosts(spark, vhost_log):
    """The report's virtual hosts panel, the format detected (``vcombined``)."""
    parsed = parse(read_lines(spark, [str(vhost_log)]), compile_format("vcombined"))
    return build_report(parsed, top=ALL, log_format="vcombined", panels=("virtual_hosts",))


@pytest.fixture(scope="module")
def ours(spark):
    parsed = parse(read_lines(spark, [str(data_file(COMBINED))]), compile_format("combined"))
    return build_report(parsed, top=ALL, log_format="combined")


def goaccess_items(panel: dict) -> dict[tuple, tuple[int, int, int]]:
    """Items by (data, method, protocol). A target ending in a bare ``?`` is keyed without it,
    as logstream's parser reads an empty query string as none."""
    return {
        (bare(i["data"]), i.get("method"), i.get("protocol")): (
            i["hits"]["count"],
            i["visitors"]["count"],
            i["bytes"]["count"],
        )
        for i in panel["data"]
    }


def our_items(panel: dict) -> dict[tuple, tuple[int, int, int]]:
    return {
        (i["data"], i.get("method"), i.get("protocol")): (i["hits"], i["visitors"], i["bytes"])
        for i in panel["data"]
    }


def bare(target: str) -> str:
    return target[:-1] if target.endswith("?") and "?" not in target[:-1] else target


def totals(panel: dict) -> tuple[int, int, int]:
    return tuple(panel["metadata"][m]["total"]["value"] for m in ("hits", "visitors", "bytes"))


def test_the_report_has_every_panel(ours):
    assert set(PANELS) <= set(ours)


@pytest.mark.parametrize(
    "name", ["requests", "static_requests", "not_found", "hosts", "referring_sites"]
)
def test_a_panel_equals_goaccess_item_by_item(ours, goaccess, name):
    got, want = our_items(ours[name]), goaccess_items(goaccess[name])
    assert set(got) == set(want)
    collisions = {key[1:]: n for key, n in GOACCESS_PAIR_COLLISIONS.items() if key[0] == name}
    for key, (hits, visitors, size) in want.items():
        assert got[key] == (hits, visitors + collisions.get(key, 0), size), key
    m = ours[name]["metadata"]
    hits, visitors, size = totals(goaccess[name])
    assert (m["hits"], m["visitors"] - sum(collisions.values()), m["bytes"]) == (
        hits,
        visitors,
        size,
    )
    assert m["items"] == len(want)


def test_goaccess_counts_the_lost_visitor_on_the_items_lines_alone(ours, tmp_path):
    """Each undercount of :data:`GOACCESS_PAIR_COLLISIONS` is GoAccess's key collision, not a
    disagreement on the definition: given only the lines of that item, GoAccess counts the
    visitor it lost on the whole log, and logstream's number."""
    with gzip.open(data_file(COMBINED), "rt", encoding="utf-8", errors="replace") as fh:
        lines = fh.readlines()
    for panel, target, method, protocol in GOACCESS_PAIR_COLLISIONS:
        request = f'"{method} {target} {protocol}"'
        alone = tmp_path / "alone.log"
        alone.write_text("".join(line for line in lines if request in line))
        out = tmp_path / "alone.json"
        subprocess.run(
            [goaccess_binary(), str(alone), "--log-format=COMBINED", "--no-progress", "-o", out],
            check=True,
            capture_output=True,
        )
        item = json.loads(out.read_bytes().decode("utf-8", "replace"))[panel]["data"][0]
        want = our_items(ours[panel])[(target, method, protocol)]
        assert (item["data"], item["hits"]["count"], item["visitors"]["count"]) == (
            target,
            want[0],
            want[1],
        )


def test_virtual_hosts_equal_goaccess(ours_vhosts, vhost_log):
    """GoAccess's ``vhosts`` (its JSON key) on the same lines as ``VCOMBINED``: hits and
    bytes equal; GoAccess counts one visitor less for the second and third virtual host, the
    (item, visitor) key defect above (item 1's visitor 2 is item 2's visitor 1)."""
    out = vhost_log.with_suffix(".json")
    subprocess.run(
        [
            goaccess_binary(),
            str(vhost_log),
            "--log-format=VCOMBINED",
            "--no-progress",
            "-o",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    want = goaccess_items(json.loads(out.read_bytes().decode("utf-8", "replace"))["vhosts"])
    got = our_items(ours_vhosts["virtual_hosts"])
    assert set(got) == set(want) == {(h, None, None) for h in VHOSTS}
    for key, (hits, visitors, size) in want.items():
        assert (got[key][0], got[key][2]) == (hits, size), key
        assert got[key][1] - visitors in (0, 1), key
    assert sum(v[1] for v in got.values()) - sum(v[1] for v in want.values()) == 2
    assert ours_vhosts["virtual_hosts"]["metadata"]["hits"] == 10_000


def test_daily_visitors_equal_goaccess(ours, goaccess):
    want = {
        i["data"]: (i["hits"]["count"], i["visitors"]["count"], i["bytes"]["count"])
        for i in goaccess["visitors"]["data"]
    }
    got = {
        i["data"].replace("-", ""): (i["hits"], i["visitors"], i["bytes"])
        for i in ours["visitors"]["data"]
    }
    assert got == want
    assert [i["data"] for i in ours["visitors"]["data"]] == sorted(
        i["data"] for i in ours["visitors"]["data"]
    )
    m = ours["visitors"]["metadata"]
    assert (m["hits"], m["visitors"], m["bytes"]) == totals(goaccess["visitors"])
    assert m["visitors"] == goaccess["general"]["unique_visitors"] == 2095


def test_the_general_figures_with_goaccess_s_names_are_goaccess_s(ours, goaccess):
    """Issue 54 items 4 and 5: the headline said 2,034 unique visitors (hosts per day) where
    GoAccess and the visitors panel say 2,095, and ``unique_not_found`` counted 66 distinct
    404 paths where GoAccess and the ``not_found`` panel count 70 requests."""
    g, theirs = ours["general"], goaccess["general"]
    assert g["unique_visitors"] == theirs["unique_visitors"] == 2095
    assert g["unique_not_found"] == theirs["unique_not_found"] == 70
    assert g["unique_not_found"] == ours["not_found"]["metadata"]["items"]
    assert g["hosts_per_day"] == 2034  # logstream's own figure, under its own name


#: Elastic line 8,899: its user agent has no closing quote (the log was cut there).
TRUNCATED_UA_LINE = 8899
TRUNCATED_UA = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html"


def test_a_truncated_user_agent_is_read_as_written_and_classed_by_its_text(spark, tmp_path):
    """Issue 54 item 8, a decision (docs/report.md, "Where logstream differs from GoAccess"):
    a user agent cut short keeps the text the server wrote, to the end of the line, and is
    classified by it (Googlebot's text: a crawler); GoAccess reads such a line as having no
    user agent (``Unknown``). The line is counted, never quarantined."""
    from logstream.analytics.useragents import classify

    with gzip.open(data_file(COMBINED), "rt", encoding="utf-8", errors="replace") as fh:
        line = next(text for n, text in enumerate(fh, 1) if n == TRUNCATED_UA_LINE)
    assert line.rstrip("\n").endswith(TRUNCATED_UA) and not line.rstrip("\n").endswith('"')
    (tmp_path / "cut.log").write_text(line)
    lines = read_lines(spark, [str(tmp_path / "cut.log")])
    (row,) = parse(lines, compile_format("combined")).collect()
    assert row["quarantine_reason"] is None and row["user_agent"] == TRUNCATED_UA
    assert classify(TRUNCATED_UA, crawler=False)[0] == "Crawlers"
    docs = (Path(__file__).resolve().parents[2] / "docs" / "report.md").read_text()
    assert "user agent cut short" in docs.split("## Where logstream differs from GoAccess")[1]


def test_referrers_equal_goaccess_but_for_googles_cut(ours, goaccess):
    """Referrers other than Google's are equal item by item; Google's, cut as GoAccess cuts
    them, have the same hits and bytes. GoAccess also lists "-" (no referrer), which
    logstream leaves out."""
    want = goaccess_items(goaccess["referrers"])
    dash = want.pop(("-", None, None))
    got = our_items(ours["referrers"])
    plain = {k: v for k, v in got.items() if not is_google(k[0])}
    assert plain == {k: v for k, v in want.items() if not is_google(k[0])}
    cut: dict[str, list[int]] = {}
    for (ref, *_), (hits, _, size) in got.items():
        if is_google(ref):
            sums = cut.setdefault(google_cut(ref), [0, 0])
            sums[0] += hits
            sums[1] += size
    assert cut == {
        ref: [hits, size] for (ref, *_), (hits, _, size) in want.items() if is_google(ref)
    }
    m = ours["referrers"]["metadata"]
    assert m["hits"] + dash[0] == totals(goaccess["referrers"])[0] == 10_000
    assert m["bytes"] + dash[2] == totals(goaccess["referrers"])[2]


def is_google(ref: str) -> bool:
    return any(prefix in ref for prefix in GOOGLE)


def google_cut(ref: str) -> str:
    """GoAccess's ``extract_keyphrase`` side effect on a referrer (1.7, ``src/parser.c``)."""
    if not is_google(ref) or "/+&" in ref:
        return ref
    encoded = False
    if "/+" in ref:
        start = ref.find("/+") + 2
    elif "q=cache:" in ref:
        start = ref.find("q=cache:")
        plus = ref.find("+", start)
        start = plus + 1 if plus >= 0 else start
    elif "&q=" in ref or "?q=" in ref:
        start = (ref.find("&q=") if "&q=" in ref else ref.find("?q=")) + 3
    elif "%26q%3D" in ref or "%3Fq%3D" in ref:
        encoded = True
        start = (ref.find("%26q%3D") if "%26q%3D" in ref else ref.find("%3Fq%3D")) + 7
    else:
        return ref
    stop = ref.find("%26" if encoded else "&", start)
    return ref if stop < 0 else ref[:stop]


@pytest.mark.parametrize("name", ["os", "browsers"])
def test_family_shares_are_within_two_points_of_goaccess(ours, goaccess, name):
    """The classifiers differ (ua-parser and crawler-user-agents against GoAccess's own
    lists): each family's share of the hits is within 2 percentage points, but for the
    operating system "Unknown", where GoAccess also puts the crawlers its list lacks
    (archive.org_bot alone is 166 hits, 1.7 points)."""
    want = {i["data"]: i["hits"]["count"] for i in goaccess[name]["data"]}
    got = {i["data"]: i["hits"] for i in ours[name]["data"]}
    want_total, got_total = sum(want.values()), sum(got.values())
    assert got_total == 10_000
    for family in set(want) | set(got):
        gap = abs(got.get(family, 0) / got_total - want.get(family, 0) / want_total)
        limit = 0.025 if (name, family) == ("os", "Unknown") else 0.02
        assert gap <= limit, (family, got.get(family), want.get(family))
    for item in ours[name]["data"]:  # a family is the sum of its versions
        assert item["hits"] == sum(c["hits"] for c in item["items"])
        assert item["visitors"] == sum(c["visitors"] for c in item["items"])


def test_geolocation_is_goaccess_hosts_located(ours, goaccess):
    """GoAccess (Debian's, without a GeoIP database) has no geolocation panel; its hosts panel,
    equal to ours, is located here host by host, and each country's and continent's hits,
    visitors and bytes are the sums over its hosts (a visitor has one host)."""
    want: dict[tuple[str, str], list[int]] = {}
    for item in goaccess["hosts"]["data"]:
        country, continent = locate(item["data"])
        sums = want.setdefault((continent, country), [0, 0, 0])
        for k, metric in enumerate(("hits", "visitors", "bytes")):
            sums[k] += item[metric]["count"]
    got = {
        (continent["data"], country["data"]): [country[m] for m in ("hits", "visitors", "bytes")]
        for continent in ours["geolocation"]["data"]
        for country in continent["items"]
    }
    assert got == want
    for continent in ours["geolocation"]["data"]:
        sums = [sum(c[m] for c in continent["items"]) for m in ("hits", "visitors", "bytes")]
        assert [continent[m] for m in ("hits", "visitors", "bytes")] == sums
    # the elastic sample's clients are addresses, placed on six continents
    assert "Unresolved" not in {c for c, _ in got}
    assert {c for c, _ in got} >= {"NA North America", "EU Europe", "AS Asia", "OC Oceania"}


# -- the stream: traffic_by_panel summed over the log equals the report --------------------


@pytest.fixture(scope="module")
def stream(spark, vhost_log, tmp_path_factory):
    """``logstream run`` over the elastic log with its virtual hosts (``vcombined``) in two
    micro-batches of 5,000 lines, its panel output only; the store keeps every window of the
    4-day log."""
    tmp = tmp_path_factory.mktemp("panels-stream")
    write_chunks(vhost_log.read_text().splitlines(), tmp / "in", per_file=5000)
    cfg = config(
        tmp,
        tmp / "in",
        log_format="auto",  # detected: vcombined
        store_retention="30 days",
        queries="traffic_by_panel",
    )
    pipeline = Pipeline(spark, cfg)
    run_to_end(pipeline)
    store = sqlite3.connect(cfg.store_path)
    panes: dict[tuple[str, str], list[int]] = {}
    for dimension, key, requests, size in store.execute(
        "SELECT dimension, key, requests, bytes FROM traffic_by_dimension"
    ):
        sums = panes.setdefault((dimension, key), [0, 0])
        sums[0] += requests
        sums[1] += size
    days = {
        day: (requests, visitors, size)
        for day, requests, visitors, size in store.execute(
            "SELECT day, requests, visitors, bytes FROM daily_visitors"
        )
    }
    final = spark.read.parquet(str(cfg.output_dir / "traffic_by_panel")).collect()
    late = spark.read.parquet(str(cfg.output_dir / "late_events")).count()
    return {
        "panes": panes,
        "days": days,
        "final": final,
        "late": late,
        "store": store,
        "path": cfg.store_path,
    }


#: The stream's panels and how the report's items sum into the stream's keys.
STREAM_KEYS = {
    "requests": lambda item, parent: item["data"],
    "static_requests": lambda item, parent: item["data"],
    "not_found": lambda item, parent: item["data"],
    "hosts": lambda item, parent: item["data"],
    "referrers": lambda item, parent: item["data"],
    "referring_sites": lambda item, parent: item["data"],
    "os": lambda item, parent: item["data"],
    "browsers": lambda item, parent: item["data"],
    "virtual_hosts": lambda item, parent: item["data"],
    "geolocation": lambda item, parent: item["data"] if parent else None,  # countries
}


@pytest.mark.parametrize("name", sorted(STREAM_KEYS))
def test_the_streams_panel_windows_sum_to_the_reports_items(ours, ours_vhosts, stream, name):
    """Per item, the hits and bytes of the stream's per-minute panel windows (the store's
    live view of ``traffic_by_panel``) summed over the log equal the batch report's."""
    assert stream["late"] == 0  # the elastic log is in time order: every line is on time
    report = ours_vhosts if name == "virtual_hosts" else ours
    want: dict[str, list[int]] = {}
    for top in report[name]["data"]:
        for item, parent in [(top, None)] + [(c, top) for c in top.get("items", [])]:
            key = STREAM_KEYS[name](item, parent)
            if key is not None and (parent is None or name == "geolocation"):
                sums = want.setdefault(key, [0, 0])
                sums[0] += item["hits"]
                sums[1] += item["bytes"]
    got = {key: v for (panel, key), v in stream["panes"].items() if panel == name}
    assert got == want
    assert len(got) >= 3


def test_the_streams_daily_visitors_equal_the_report(ours, stream):
    """GoAccess's visitors panel in the stream: hits, exact unique visitors and bytes per day
    (UTC days; the elastic log's offsets are +0000)."""
    want = {i["data"]: (i["hits"], i["visitors"], i["bytes"]) for i in ours["visitors"]["data"]}
    assert stream["days"] == want
    assert len(want) == 4


def test_the_final_panel_windows_equal_the_live_view(stream):
    """Each window the watermark closed is published once in ``traffic_by_panel/``, with the
    values of the store's live view; the last day stays open at the end of the log."""
    rows = stream["final"]
    keys = [(r["panel"], r["key"], r["window_start"]) for r in rows]
    assert len(keys) == len(set(keys))
    store = stream["store"]
    minutes = {
        (d, k, ws): (req, size)
        for d, k, ws, req, size in store.execute(
            "SELECT dimension, key, window_start, requests, bytes FROM traffic_by_dimension"
        )
    }
    days = stream["days"]
    panels = set()
    for r in rows:
        panels.add(r["panel"])
        if r["panel"] == "visitors":
            assert (r["requests"], r["visitors"], r["bytes"]) == days[r["key"]]
        else:
            start = r["window_start"].strftime("%Y-%m-%dT%H:%M:%SZ")
            assert (r["requests"], r["bytes"]) == minutes[(r["panel"], r["key"], start)]
            assert r["visitors"] is None
    assert panels == {"visitors", *STREAM_KEYS}
    assert sum(r["panel"] == "visitors" for r in rows) == 3  # 05-17, 05-18, 05-19


def test_the_dashboard_shows_every_panel_with_the_reports_numbers(ours, ours_vhosts, stream):
    """The live dashboard over the stream's store (Debian's Chromium): with the whole range
    chosen, each panel's table has rows, its first row is the report's first item, and the
    visitors table is the report's visitors per day."""
    with start_dashboard_thread(stream["path"], refresh_s=1.0) as server, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(server.url)
        page.wait_for_selector("#kpi-requests", timeout=60_000)
        page.check("#range input[value='all']")
        page.wait_for_selector("#panel-visitors-table tbody tr", timeout=60_000)

        def cells(panel: str) -> list[list[str]]:
            return page.eval_on_selector_all(
                f"#panel-{panel.replace('_', '-')}-table tbody tr",
                "rows => rows.map(r => [...r.cells].map(c => c.innerText))",
            )

        want_days = [
            [d["data"], f"{d['hits']:,}", f"{d['visitors']:,}"] for d in ours["visitors"]["data"]
        ]
        deadline = time.monotonic() + 60
        while [r[:3] for r in cells("visitors")] != want_days and time.monotonic() < deadline:
            time.sleep(0.3)
        assert [r[:3] for r in cells("visitors")] == want_days
        for name in STREAM_KEYS:
            rows = cells(name)
            items: dict[str, int] = {}  # by item: a request's methods and protocols summed
            report = ours_vhosts if name == "virtual_hosts" else ours
            for top in report[name]["data"]:
                for c in top["items"] if name == "geolocation" else [top]:
                    items[c["data"]] = items.get(c["data"], 0) + c["hits"]
            best = max(items.values())
            assert rows, name
            assert int(rows[0][1].replace(",", "")) == best, name
            assert items.get(rows[0][0]) == best, name
