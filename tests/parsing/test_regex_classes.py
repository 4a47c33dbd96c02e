"""The compiled formats' character classes: white space written out (``_SPACE``) and greedy
runs inside possessive groups match exactly what ``\\s`` and possessive runs matched.

The reference is the same regular expression in its earlier spelling (``[^\\s…]``, ``…++|``,
``bench/bench_parse_strategies.py``'s ``earlier_spelling``, which also times both),
read with Java's meaning of ``\\s`` (Python's ``re.ASCII``: `` \\t\\n\\x0B\\f\\r``). Lines are
drawn from an alphabet of what tells the spellings apart: Java's white space and Unicode's
(``\\xa0``, ``\\u2028``, ``\\x1c``), quotes, backslashes, U+0001, ``?`` and brackets. Python's
engine compares every drawn line; Java's (the one that runs in production) a batch of them in
one Spark job.
"""

from __future__ import annotations

import re

from bench.bench_parse_strategies import earlier_spelling as _earlier
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from logstream.parsing import compile_format
from logstream.parsing.logformat import _SPACE, REQUEST_REGEX

FORMATS = ("common", "combined", "vcombined", "nginx", '%h %l %u %t "%r" %>s %D', "%h:%u %t %U%q")
ALPHABET = ' \t\n\x0b\f\r\xa0\u2028\u3000\x1c\x85"\\\x01?[]/:-aZ0Hh.TtPp'
WORDS = ("GET", "HTTP/1.0", "http/1.1", "-", "/a?b", "[09/Jul/1995:00:00:01 -0400]", "200", "")


PATTERNS = [compile_format(f).regex for f in FORMATS] + [REQUEST_REGEX]

pieces = st.one_of(st.sampled_from(WORDS), st.text(st.sampled_from(ALPHABET), max_size=6))
lines = st.lists(pieces, min_size=1, max_size=14).map(
    lambda parts: "".join(p + (" " if i % 3 else "") for i, p in enumerate(parts))
)
nasa_like = st.builds(
    lambda host, req, tail: f'{host} - - [09/Jul/1995:00:00:01 -0400] "{req}" 200 {tail}',
    st.text(st.sampled_from(ALPHABET), max_size=4).map(lambda t: "h" + t),
    st.lists(pieces, max_size=6).map(" ".join),
    st.sampled_from(("1", "-", "1 ", '1 "r" "a b"', '1 "r\\" x" "a"', "1\xa0", "1\r\n")),
)
any_line = st.one_of(lines, nasa_like)


def test_the_earlier_spelling_is_recovered():
    """The reference differs from each pattern (the rewrite is live) and names ``\\s``."""
    for regex in PATTERNS:
        earlier = _earlier(regex)
        assert earlier != regex and "\\s" in earlier
        assert _SPACE not in earlier


@settings(max_examples=3000, deadline=None)
@given(any_line)
def test_python_reads_each_line_as_the_earlier_spelling(line):
    for regex in PATTERNS:
        now = re.search(regex, line)
        before = re.search(_earlier(regex), line, re.ASCII)
        assert (now and now.groups()) == (before and before.groups()), regex


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(any_line, min_size=50, max_size=200))
def test_java_rewrites_each_line_as_the_earlier_spelling(spark, batch):
    df = spark.createDataFrame([(line,) for line in batch], "value string")
    columns = []
    for i, regex in enumerate(PATTERNS):
        groups = re.compile(regex).groups
        replacement = "".join(f"\x01${g}" for g in range(1, groups + 1))
        for name, rx in (("now", regex), ("before", _earlier(regex))):
            rewritten = F.regexp_replace("value", F.lit(rx), F.lit(replacement))
            columns.append(rewritten.alias(f"{name}{i}"))
    rows = df.select("value", *columns).collect()
    for row in rows:
        for i in range(len(PATTERNS)):
            assert row[f"now{i}"] == row[f"before{i}"], (row["value"], PATTERNS[i])
    # the batch is not vacuous: some lines match the Common Log Format
    assert any(row["now0"] != row["value"] for row in rows) or not any(
        re.search(PATTERNS[0], line) for line in batch
    )
