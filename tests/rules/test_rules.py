"""The rules flag exactly the real lines an independent Python check flags (batch, one job)."""

from __future__ import annotations

import gzip
import re
from collections import Counter

import pytest
from pyspark.sql import functions as F

from logstream.parsing import compile_format
from logstream.rules import (
    ALERT_COLUMNS,
    SCANNER_PATTERN,
    UNPARSEABLE,
    alert_stream,
    match_rules,
)
from tests.conftest import COMBINED, NASA_JUL_2000, TWIKI_CRLF, data_file

#: Hand-written lines, labelled as such: scanner signatures the real samples lack (a dot-file,
#: phpMyAdmin, path traversal, Shellshock in a Common log; scanning tools' agents in a
#: Combined log), plus a 500 and a 401 so NASA's sample has every rule.
HAND_WRITTEN_COMMON = [
    'hand.written.1 - - [01/Jul/1995:00:40:00 -0400] "GET /.env HTTP/1.1" 404 0',
    'hand.written.2 - - [01/Jul/1995:00:40:01 -0400] "GET /phpMyAdmin/index.php HTTP/1.1" 404 0',
    'hand.written.3 - - [01/Jul/1995:00:40:02 -0400] "GET /a/../../etc/passwd HTTP/1.0" 400 0',
    'hand.written.4 - - [01/Jul/1995:00:40:03 -0400] "GET /cgi-bin/test-cgi HTTP/1.0" 401 0',
    'hand.written.5 - - [01/Jul/1995:00:40:04 -0400] "GET /shuttle/countdown/ HTTP/1.0" 500 0',
]
HAND_WRITTEN_COMBINED = [
    '10.9.9.1 - - [20/May/2015:21:06:00 +0000] "GET /?id=1 HTTP/1.1" 200 10 "-" '
    '"sqlmap/1.7.2#stable (https://sqlmap.org)"',
    '10.9.9.2 - - [20/May/2015:21:06:01 +0000] "GET / HTTP/1.1" 200 10 "-" '
    '"Mozilla/5.00 (Nikto/2.1.6) (Evasions:None) (Test:000003)"',
    '10.9.9.3 - - [20/May/2015:21:06:02 +0000] "GET /admin HTTP/1.1" 403 10 "-" '
    '"() { :; }; /bin/bash -c \\"id\\""',
]

# An independent reading of the same lines: the request target, the status and the last
# quoted field, with Python's re (the rules run Java regular expressions inside Spark).
_LINE = re.compile(r'^\S+ \S+ \S+ \[[^\]]+\] "(?:\S+ )?(\S*)[^"]*" (\d{3}) \S+(.*)$')


def _oracle(lines: list[str]) -> Counter[tuple[str, tuple[str, ...]]]:
    flagged: Counter[tuple[str, tuple[str, ...]]] = Counter()
    for line in lines:
        m = _LINE.match(line.rstrip())
        if not m:
            continue
        target, status, tail = m.group(1), int(m.group(2)), m.group(3)
        quoted = re.findall(r'"((?:[^"\\]|\\.)*)"', tail)
        agent = quoted[-1] if len(quoted) >= 2 and quoted[-1] != "-" else None
        path, _, query = target.partition("?")
        found = match_rules(path or None, query or None, agent, status)
        if found:
            flagged[(line.rstrip(), tuple(found))] += 1
    return flagged


def _read(name: str) -> list[str]:
    with gzip.open(data_file(name), "rt", encoding="utf-8", errors="replace") as fh:
        return [line.rstrip("\r\n") for line in fh]


#: sample -> (format, real file, hand-written lines appended)
FILES = {
    "nasa": ("common", NASA_JUL_2000, HAND_WRITTEN_COMMON),
    "twiki": ("common", TWIKI_CRLF, []),
    "elastic": ("combined", COMBINED, HAND_WRITTEN_COMBINED),
}
SAMPLES = {name: (fmt, _read(file) + hand) for name, (fmt, file, hand) in FILES.items()}


@pytest.fixture(scope="module")
def flagged(spark):
    """Alerts of every sample, from one Spark job: sample → Counter of (line, rules)."""
    frames = []
    for name, (fmt, file, hand) in FILES.items():
        df = spark.read.text(str(data_file(file)))
        if hand:
            df = df.unionByName(spark.createDataFrame([(line,) for line in hand], "value string"))
        alerts = alert_stream(df, compile_format(fmt))
        frames.append(alerts.select(F.lit(name).alias("sample"), *ALERT_COLUMNS))
    union = frames[0].unionByName(frames[1]).unionByName(frames[2])
    out: dict[str, Counter] = {name: Counter() for name in SAMPLES}
    for row in union.collect():  # bounded: a few hundred alerts out of 13,500 lines
        out[row.sample][(row.raw_line.rstrip(), tuple(row.rules))] += 1
    return out, union.schema


@pytest.mark.parametrize("sample", list(SAMPLES))
def test_the_rules_flag_exactly_the_lines_python_flags(flagged, sample):
    got, _ = flagged
    assert got[sample] == _oracle(SAMPLES[sample][1])


def test_each_rule_fires_on_real_lines(flagged):
    got, _ = flagged
    real = {name: Counter() for name in SAMPLES}
    hand = set(HAND_WRITTEN_COMMON + HAND_WRITTEN_COMBINED)
    for name, counter in got.items():
        for (line, rules), n in counter.items():
            if line not in hand:
                for rule in rules:
                    real[name][rule] += n
    # figures of the real files: elastic has 35 WordPress probes, three 500s, two 403s;
    # the TWiki log 123 401s; NASA's first 2,000 lines none at all
    assert real["elastic"] == Counter({"scanner": 35, "server_error": 3, "auth_failure": 2})
    assert real["twiki"] == Counter({"auth_failure": 123})
    assert real["nasa"] == Counter()


def test_hand_written_signatures_are_each_flagged(flagged):
    got, _ = flagged
    lines = {line for counter in got.values() for line, _ in counter}
    assert set(HAND_WRITTEN_COMMON + HAND_WRITTEN_COMBINED) <= lines


def test_the_real_samples_have_no_unparseable_line(flagged):
    got, _ = flagged
    assert [k for counter in got.values() for k in counter if k[1] == (UNPARSEABLE,)] == []


def test_unparseable_lines_are_alerts_with_their_reason_never_dropped(spark):
    good = HAND_WRITTEN_COMMON[4]  # a 500: a server_error alert
    lines = [
        good,
        "this is not a log line",
        'h2 - - [09/Jul/1995:00:00:03 -0400] "GET / HTTP/1.0" 2x0 12',
        'h4 - - [09/Jul/1995:00:00:03 -0400] "GET /x HTTP/1.0" 500 1.5',  # a 500, bad bytes
        'h5 - - [09/Jul/1995:00:00:04 -0400] "GET / HTTP/1.0" 200 1',  # no rule: no alert
        'h6 - - [09/Jul/1995:00:00:05 -0400] "GET /wp-login.php HTTP/1.0" 2x0 1',  # a probe
        "",  # an empty line carries nothing: no alert
    ]
    df = spark.createDataFrame([(line,) for line in lines], "value string")
    rows = alert_stream(df, compile_format("common")).collect()
    got = sorted((r.raw_line, r.rule, tuple(r.rules), r.reason) for r in rows)
    assert got == sorted(
        [
            (good, "server_error", ("server_error",), None),
            ("this is not a log line", UNPARSEABLE, (UNPARSEABLE,), "format_mismatch"),
            (lines[2], UNPARSEABLE, (UNPARSEABLE,), "bad_status"),
            (lines[3], UNPARSEABLE, (UNPARSEABLE, "server_error"), "bad_bytes"),
            (lines[5], UNPARSEABLE, (UNPARSEABLE, "scanner"), "bad_status"),
        ]
    )
    # the continuous plan (no fence) gives the same rows
    continuous = alert_stream(df, compile_format("common"), continuous=True).collect()
    assert sorted((r.raw_line, r.rule, r.reason) for r in continuous) == [
        (a, b, d) for a, b, _, d in got
    ]


def test_the_alert_schema_is_the_documented_one(flagged):
    _, schema = flagged
    assert schema.fieldNames()[1:] == list(ALERT_COLUMNS)
    types = {f.name: f.dataType.simpleString() for f in schema.fields}
    assert types["rules"] == "array<string>" and types["status"] == "int"
    assert types["event_time"] == types["received_at"] == types["detected_at"] == "timestamp"
    assert types["reason"] == "string"


def test_nasa_cgi_bin_imagemap_is_not_a_scanner():
    assert not re.search(SCANNER_PATTERN, "/cgi-bin/imagemap/countdown?99,176")
    assert match_rules("/cgi-bin/imagemap/countdown", "99,176", None, 302) == []


def test_the_public_names_of_logstream_rules_are_pinned():
    import logstream.rules

    assert sorted(logstream.rules.__all__) == [
        "ALERT_COLUMNS",
        "RULES",
        "SCANNER_PATTERN",
        "SCANNER_SIGNATURES",
        "UNPARSEABLE",
        "alert_stream",
        "match_rules",
        "rule_alerts",
        "rule_conditions",
    ]
    assert all(hasattr(logstream.rules, name) for name in logstream.rules.__all__)
