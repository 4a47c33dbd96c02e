"""The filter language (logstream.filters): checked without Spark, refused in one line with
exit status 2 and no JVM, evaluated by Arrow as Spark evaluates it."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from logstream.errors import ConfigError
from logstream.filter_arrow import arrow_expression, to_arrow
from logstream.filters import FILTER_COLUMNS, EventFilter, check_expression
from logstream.schema import EVENT_COLUMNS
from tests.conftest import NASA_DAY, REPO, data_file

#: Runs the CLI in a fresh process and says whether a JVM was launched (py4j's gateway).
_PROBE = """
import sys
from pyspark import SparkContext
from logstream.cli import main
status = main(sys.argv[1:])
print("jvm" if SparkContext._gateway is not None else "no-jvm", file=sys.stderr)
sys.exit(status)
"""


def test_the_allowed_columns_are_the_event_schemas():
    assert tuple(FILTER_COLUMNS) == EVENT_COLUMNS


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--filter", "status >="], "is not a Spark SQL condition"),
        (["--filter", "stauts > 3"], "unknown column 'stauts': use one of client_host"),
        (["--filter", "status >= 500", "--filter", "host = 'x'"], "unknown column 'host'"),
        (["--since", "1995-07-10", "--until", "1995-07-09"], "the time range is empty"),
        (["--since", "2h", "--until", "3h"], "the time range is empty"),
        (["--since", "yesterday"], "--since 'yesterday' is not a time"),
        (["--grep", "(unclosed"], "--grep '(unclosed' is not a regular expression"),
        (["--since", "1995-07-09", "--compare", "week"], "give both"),
        (
            ["--filter", "reflect('java.io.File','createTempFile','pwned_','.txt') IS NOT NULL"],
            "reflect() is not allowed: a filter takes comparisons",
        ),
    ],
)
@pytest.mark.parametrize("command", ["batch", "run"])
def test_a_bad_filter_is_refused_in_one_line_with_status_2_and_no_jvm(
    tmp_path, command, argv, named
):
    if command == "batch":
        args = ["batch", str(data_file(NASA_DAY)), *argv]
    elif "--compare" in argv:
        pytest.skip("--compare is batch's")
    else:
        args = ["run", "--input-dir", str(tmp_path), "--format", "common", *argv]
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "src"), "COLUMNS": "300"},
        timeout=120,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert lines[-1] == "no-jvm"
    assert len(lines) == 2 and lines[0].startswith("error: ") and named in lines[0], lines
    assert "Traceback" not in done.stderr


def _probe(args: list[str], cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "src"), "COLUMNS": "300"},
        timeout=120,
    )


def test_a_config_file_filter_that_calls_java_is_refused_before_a_jvm_starts(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text(
        '[run]\nformat = "common"\n'
        "filter = [\"java_method('java.lang.System', 'exit', 3) = 1\"]\n"
    )
    done = _probe(["run", "--config", str(config), "--input-dir", str(tmp_path)], tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and lines[-1] == "no-jvm", done.stderr
    assert len(lines) == 2 and lines[0].startswith("error: ")
    assert '--filter "java_method(' in lines[0] and "java_method() is not allowed" in lines[0]


@pytest.mark.parametrize(
    ("expression", "named"),
    [
        ("read_files('/etc/passwd') IS NULL", "read_files() is not allowed"),
        ("my_udf(status) = 1", "my_udf() is not allowed"),
        ("aes_decrypt(url_path, 'k') IS NULL", "aes_decrypt() is not allowed"),
        ("status IN (SELECT 1)", "not a query"),
        ("status + 1 > 3", "'status + 1' is not allowed"),
        ("status = 'abc'", "the text 'abc' is compared with number"),
        ("event_time > '2h'", "is not an instant"),
        ("lower(status) = 'a'", "lower() takes text"),
        ("status IN (" + ",".join(["200"] * 20_000) + ")", "80,011 characters, longer than"),
        ("status IN (" + ",".join(["200"] * 1_001) + ")", "IN lists 1,001 items, more than"),
        ("(" * 60 + "status = 1" + ")" * 60, "nested deeper than a filter may be (24)"),
        ("NOT " * 30 + "status = 1", "nested 33 levels deep"),
        (" OR ".join(["status = 1"] * 600), "terms, more than a filter may have (2,500)"),
    ],
)
def test_the_allowlist_refuses_what_a_condition_on_one_event_does_not_need(expression, named):
    with pytest.raises(ConfigError, match=re.escape(named)) as refused:
        EventFilter.build(filters=[expression])
    message = str(refused.value)
    assert "\n" not in message and len(message) < 1_000
    if "is not allowed" in named:
        assert message.endswith("and coalesce") and "RLIKE, IN (at most 1,000" in message


def test_spark_runs_the_checked_rendering_not_the_text():
    """A call hidden in a literal stays a literal; one hidden in a comment is dropped."""
    literal = EventFilter.build(filters=["url_path = 'a\\' OR reflect(1) IS NULL OR \\''"])
    assert literal.expressions == ("`url_path` = 'a\\' OR reflect(1) IS NULL OR \\''",)
    comment = EventFilter.build(filters=["status = 1 -- */ OR reflect(1) IS NULL /*"])
    assert comment.expressions == ("`status` = 1",)


def test_relative_times_count_back_from_now():
    now = datetime(1995, 7, 9, 16, 0, tzinfo=UTC)
    f = EventFilter.build("2h", "30m", now=now)
    assert (f.since, f.until) == (
        datetime(1995, 7, 9, 14, 0, tzinfo=UTC),
        datetime(1995, 7, 9, 15, 30, tzinfo=UTC),
    )


def test_spark_receives_the_checked_tree_with_quoted_columns_and_aliases_resolved():
    f = EventFilter.build(filters=["vhost = 'a.example' AND NOT user RLIKE '^bot'"])
    assert f.expressions == ("`virtual_host` = 'a.example' AND NOT `user` RLIKE '^bot'",)
    assert f.describe()["filter"] == ["vhost = 'a.example' AND NOT user RLIKE '^bot'"]


def _events() -> pa.Table:
    days = [(17, 1, 5), (17, 2, 10), (18, 23, 59), (19, 4, 0), (20, 5, 30), (23, 0, 0)]
    return pa.table(
        {
            "status": [200, 503, 404, 301, None, 200],
            "url_path": ["/api/a", "  /Api/b ", None, "/x.html", "/api/c", "äbcdé"],
            "method": ["GET", "POST", "GET", None, "GET", "GET"],
            "user_agent": ["Googlebot/2.1", "curl", "Mozilla", None, "bingbot", "x"],
            "event_time": pa.array(
                [datetime(2015, 5, d, h, m, tzinfo=UTC) for d, h, m in days],
                pa.timestamp("us", "UTC"),
            ),
            "i": range(6),
        }
    )


#: Expressions and the rows Spark keeps (ANSI mode, session time zone UTC), as it returned them.
SPARK_KEEPS = {
    "status >= 500 OR url_path LIKE '/api/%'": [0, 1, 4],
    "NOT status IN (200, 301)": [1, 2],
    "status IN (200, NULL)": [0, 5],
    "NOT status IN (200, NULL)": [],
    "user_agent RLIKE 'bot$' AND status BETWEEN 100 AND 599": [],
    "lower(user_agent) LIKE '%bot%'": [0, 4],
    "user_agent ILIKE 'MOZ%'": [2],
    "url_path IS NULL OR event_time >= '2015-05-19T04:00:00Z'": [2, 3, 4, 5],
    "event_time BETWEEN '2015-05-17T03:00:00+01:00' AND '2015-05-19 04:00:00'": [1, 2, 3],
    "hour(event_time) BETWEEN 1 AND 4 AND minute(event_time) < 30": [0, 1, 3],
    "dayofweek(event_time) = 1 OR day(event_time) = 23": [0, 1, 5],
    "to_date(event_time) = '2015-05-18' OR date(event_time) >= '2015-05-20'": [2, 4, 5],
    "length(url_path) = 5 OR trim(url_path) = '/Api/b'": [1, 5],
    "substring(url_path, 2, 3) = 'api' OR substr(url_path, -2) = 'dé'": [0, 4, 5],
    "left(url_path, 4) = '/api' AND right(url_path, 1) = 'c'": [4],
    "startswith(url_path, '/x') OR endswith(url_path, 'cdé') OR contains(url_path, 'Ap')": [
        1,
        3,
        5,
    ],
    "concat(method, ' ', url_path) = 'GET /api/a' OR upper(method) = 'POST'": [0, 1],
    "lower(url_path) IN ('/api/a', 'äbcdé')": [0, 5],
    "coalesce(user_agent, '') NOT RLIKE 'bot' AND nvl(status, 0) < 500": [2, 3, 5],
}


def test_the_arrow_form_keeps_the_rows_spark_keeps():
    table = _events()
    for expression, rows in SPARK_KEEPS.items():
        f = EventFilter.build(filters=[expression])
        assert table.filter(arrow_expression(f))["i"].to_pylist() == rows, expression


def test_in_is_one_set_lookup_and_a_chain_a_balanced_tree():
    """An IN list was an OR of one equality per item, and Arrow's C++ overflowed its stack
    scanning 10,000 (a segfault of the dashboard); now one ``is_in`` kernel, however long."""
    table = pa.table({"status": pa.array(range(5_000), pa.int64())})
    items = ",".join(str(i) for i in range(0, 2_000, 2))  # 1,000, the most allowed
    keep = to_arrow(check_expression(f"status IN ({items})"))
    assert str(keep).count("is_in(") == 1 and " or " not in str(keep)
    assert table.filter(keep).num_rows == 1_000
    chain = to_arrow(check_expression(" OR ".join(f"status = {i}" for i in range(400))))
    assert table.filter(chain).num_rows == 400
    assert str(chain).count("(") < 2 * 400  # balanced: no run of 400 nested ORs
    assert max(len(run) for run in re.findall(r"\(+", str(chain))) <= 12


def test_grep_is_refused_over_the_events():
    with pytest.raises(ConfigError, match="raw line"):
        arrow_expression(EventFilter.build(greps=["x"]))
