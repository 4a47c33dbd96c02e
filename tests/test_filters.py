"""The filter language (logstream.filters): checked without Spark, refused in one line with
exit status 2 and no JVM, evaluated by Arrow as Spark evaluates it."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from logstream.errors import ConfigError
from logstream.filter_arrow import arrow_expression
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


def test_the_arrow_form_keeps_the_rows_a_where_clause_keeps():
    table = pa.table(
        {
            "status": [200, 503, 404, 301, None],
            "url_path": ["/api/a", "/api/b", None, "/x", "/api/c"],
            "user_agent": ["Googlebot/2.1", "curl", "Mozilla", None, "bingbot"],
            "event_time": pa.array(
                [datetime(2015, 5, 17, h, tzinfo=UTC) for h in (1, 2, 3, 4, 5)],
                pa.timestamp("us", "UTC"),
            ),
        }
    )
    cases = {
        "status >= 500 OR url_path LIKE '/api/%'": [0, 1, 4],
        "NOT status IN (200, 301)": [1, 2],
        "user_agent RLIKE 'bot$' AND status BETWEEN 100 AND 599": [],
        "lower(user_agent) LIKE '%bot%'": [0, 4],
        "url_path IS NULL OR event_time >= '2015-05-17T04:00:00Z'": [2, 3, 4],
        "user_agent ILIKE 'MOZ%'": [2],
    }
    table = table.append_column("i", pa.array(range(5)))
    for expression, rows in cases.items():
        f = EventFilter.build(filters=[expression])
        assert table.filter(arrow_expression(f))["i"].to_pylist() == rows, expression


def test_the_arrow_form_refuses_what_it_cannot_evaluate():
    with pytest.raises(ConfigError, match="the dashboard cannot evaluate"):
        arrow_expression(EventFilter.build(filters=["length(url_path) > 3"]))
    with pytest.raises(ConfigError, match="raw line"):
        arrow_expression(EventFilter.build(greps=["x"]))
    assert check_expression("status = 1") is not None
