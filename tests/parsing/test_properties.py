"""Property tests: valid lines round-trip their fields; garbage is quarantined, never raised.

Each Hypothesis example is a *batch* of lines parsed in one Spark job, so the Java regex
engine (the one that runs in production) is what is tested, at a bearable cost.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from logstream.parsing import compile_format, events, parse, quarantine

SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

token_chars = st.characters(codec="utf-8", exclude_categories=["Z", "C"], exclude_characters='"\\')
path_chars = st.characters(codec="utf-8", exclude_categories=["Z", "C"], exclude_characters='"\\?')
text_chars = st.characters(codec="utf-8", exclude_categories=["C"], exclude_characters='"\\')

hosts = st.one_of(
    st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t))),
    st.from_regex(r"[a-z0-9][a-z0-9-]{0,20}(\.[a-z0-9-]{1,10}){0,3}", fullmatch=True),
    st.ip_addresses(v=6).map(str),
)
words = st.text(token_chars, min_size=1, max_size=12)
offsets = st.integers(-12 * 4, 14 * 4).map(lambda q: timedelta(minutes=15 * q))
times = st.builds(
    lambda dt, off: dt.replace(tzinfo=timezone(off)),
    # a valid line's time is not ahead of the clock (future_event_time: quarantined)
    st.datetimes(datetime(1990, 1, 1), datetime(2025, 12, 31)).map(  # noqa: DTZ001
        lambda d: d.replace(microsecond=0)
    ),
    offsets,
)


@st.composite
def records(draw):
    return {
        "client_host": draw(hosts),
        "ident": draw(st.one_of(st.just("-"), words)),
        "user": draw(st.one_of(st.just("-"), words)),
        "time": draw(times),
        "method": draw(st.sampled_from(["GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS"])),
        "url_path": "/" + draw(st.text(path_chars, max_size=30)),
        "query_string": draw(st.one_of(st.none(), st.text(token_chars, min_size=1, max_size=20))),
        "protocol": draw(st.sampled_from([None, "HTTP/1.0", "HTTP/1.1", "HTTP/2.0"])),
        "status": draw(st.integers(100, 599)),
        "bytes": draw(st.one_of(st.just("-"), st.integers(0, 10**12).map(str))),
        "referrer": draw(st.one_of(st.just("-"), st.text(text_chars, min_size=1, max_size=40))),
        "user_agent": draw(st.one_of(st.just("-"), st.text(text_chars, min_size=1, max_size=60))),
    }


def clf_time(t: datetime) -> str:
    off = t.utcoffset()
    assert off is not None
    minutes = int(off.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    hh, mm = divmod(abs(minutes), 60)
    return f"{t.day:02d}/{MONTHS[t.month - 1]}/{t.year:04d}:{t:%H:%M:%S} {sign}{hh:02d}{mm:02d}"


def render(r) -> str:
    target = r["url_path"] + (f"?{r['query_string']}" if r["query_string"] is not None else "")
    request = f"{r['method']} {target}" + (f" {r['protocol']}" if r["protocol"] else "")
    return (
        f'{r["client_host"]} {r["ident"]} {r["user"]} [{clf_time(r["time"])}] "{request}" '
        f'{r["status"]} {r["bytes"]} "{r["referrer"]}" "{r["user_agent"]}"'
    )


def lines_frame(spark, lines):
    return spark.createDataFrame(
        [(line, f"mem:{i}") for i, line in enumerate(lines)], "value string, source_file string"
    )


def dash(v):
    return None if v == "-" else v


@SETTINGS
@given(st.lists(records(), min_size=1, max_size=30))
def test_valid_lines_round_trip_their_fields(spark, recs):
    parsed = parse(lines_frame(spark, [render(r) for r in recs]), compile_format("combined"))
    got = {
        r.source_file: r
        for r in events(parsed).withColumn("epoch", F.unix_seconds("event_time")).collect()
    }
    assert quarantine(parsed).count() == 0
    for i, r in enumerate(recs):
        row = got[f"mem:{i}"]
        expected_query = r["query_string"]
        if r["query_string"] == "":
            expected_query = None
        assert row.client_host == r["client_host"]
        assert row.ident == dash(r["ident"]) and row.user == dash(r["user"])
        assert row.epoch == int(r["time"].astimezone(UTC).timestamp())
        assert (row.method, row.url_path, row.query_string, row.protocol) == (
            r["method"],
            r["url_path"],
            expected_query,
            r["protocol"],
        )
        assert row.status == r["status"]
        assert row.bytes_sent == (0 if r["bytes"] == "-" else int(r["bytes"]))
        assert row.referrer == dash(r["referrer"]) and row.user_agent == dash(r["user_agent"])


garbage = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=200),
    st.binary(max_size=120).map(
        lambda b: b.decode("utf-8", "replace").replace("\n", " ").replace("\r", " ")
    ),
    records()
    .map(render)
    .flatmap(lambda line: st.integers(0, len(line) - 1).map(lambda k: line[:k])),
)


@SETTINGS
@given(st.lists(garbage, min_size=1, max_size=40))
def test_any_line_is_parsed_or_quarantined_exactly_once_never_raised(spark, lines):
    parsed = parse(lines_frame(spark, lines), compile_format("combined"))
    good = {r.source_file for r in events(parsed).select("source_file").collect()}
    bad = {r.source_file: r for r in quarantine(parsed).collect()}
    assert good.isdisjoint(bad)
    assert good | set(bad) == {f"mem:{i}" for i in range(len(lines))}
    for key, row in bad.items():
        assert row.reason and row.raw_line == lines[int(key.split(":")[1])]
