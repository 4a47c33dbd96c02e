"""``logstream sql``: memory-sink tables queried with SQL, on the real NASA day."""

from __future__ import annotations

import gzip
import io
import json
import re
from collections import Counter

import pytest

from logstream.cli import main
from logstream.cli.sql import SqlShell, _print_table
from tests.conftest import NASA_JUL_2000, data_file

#: A JDBC view whose driver is not on the class path: a Java-side error (Py4JJavaError).
JDBC_VIEW = (
    "CREATE TEMPORARY VIEW nodriver USING jdbc "
    "OPTIONS (url 'jdbc:nosuchdb://localhost/db', dbtable 'accounts')"
)

CLF = re.compile(r'^(\S+) (\S+) (\S+) \[([^\]]+)\] "(.*)" (\d{3}) (\d+|-)\s*$')


def python_counts(path) -> tuple[Counter, Counter]:
    """Requests per URL path and per status class, counted in plain Python."""
    paths: Counter = Counter()
    classes: Counter = Counter()
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
        for line in f:
            match = CLF.match(line.rstrip("\n"))
            if not match:
                continue
            classes[f"{match.group(6)[0]}xx"] += 1
            request = match.group(5).split()
            if len(request) >= 2:
                paths[request[1].split("?")[0]] += 1
    return paths, classes


def test_urlranks_of_the_nasa_day_equal_a_python_count(nasa_day, capsys):
    statement = "SELECT url_path, requests FROM urlranks ORDER BY requests DESC LIMIT 10"
    args = ["sql", str(nasa_day), "--format", "common", "--tables", "urlranks", "--json"]
    assert main([*args, "--execute", statement]) == 0
    rows = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    paths, _ = python_counts(nasa_day)
    assert [r["requests"] for r in rows] == [n for _, n in paths.most_common(10)]
    assert all(paths[r["url_path"]] == r["requests"] for r in rows)
    assert rows[0] == {
        "url_path": "/images/NASA-logosmall.gif",
        "requests": paths.most_common(1)[0][1],
    }


def test_the_prompt_answers_statements_from_stdin(monkeypatch, capsys):
    log = data_file(NASA_JUL_2000)
    script = [
        ".tables",
        "SELECT status_class, requests FROM status_classes ORDER BY status_class;",
        "SELECT sum(requests) AS requests FROM urlranks",
        "SELECT nonsense FROM urlranks",
        "SELECT count(*) AS windows, sum(requests) AS requests FROM traffic",
        ".quit",
        "SELECT 'not reached'",
    ]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(script) + "\n"))
    assert main(["sql", str(log), "--format", "common", "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    _, classes = python_counts(log)
    assert lines[0].startswith("logstream sql: live tables")
    assert [line.split()[0] for line in lines[1:4]] == ["urlranks", "status_classes", "traffic"]
    assert json.loads(lines[4]) == [
        {"status_class": c, "requests": n} for c, n in sorted(classes.items())
    ]
    assert json.loads(lines[5]) == [{"requests": sum(classes.values())}]
    assert lines[6].startswith("error:") and "nonsense" in lines[6]
    windows = json.loads(lines[7])[0]
    # append mode: only the windows the watermark (newest event - 10 minutes) has passed
    assert 0 < windows["requests"] < sum(classes.values()) and windows["windows"] == 23
    assert len(lines) == 8


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--tables", "urlranks,nope"], "unknown table 'nope'"),
        (["--window", "soon"], "--window: 'soon' is not an interval"),
        (["-e", "SELEC 1"], "--execute 'SELEC 1' failed"),
        # a Java-side error (Py4JJavaError, not converted by PySpark): one line, exit 2
        (["-e", JDBC_VIEW], "failed: java.sql.SQLException: No suitable driver"),
    ],
)
def test_bad_options_exit_2_naming_the_value(extra, message, capsys):
    args = [
        "sql",
        str(data_file(NASA_JUL_2000)),
        "--format",
        "common",
        "--tables",
        "status_classes",
    ]
    assert main([*args, *extra]) == 2
    assert message in capsys.readouterr().err


def test_the_prompt_reports_a_java_side_error_in_one_line_and_goes_on(spark, monkeypatch, capsys):
    script = [
        JDBC_VIEW,  # java.sql.SQLException from the JVM: a Py4JJavaError, not a PySpark error
        "SELECT java_method('java.lang.Integer', 'parseInt', 'x') AS n",  # a failed job
        "SELECT 'still here' AS answer",
    ]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(script) + "\n"))
    SqlShell(spark, [], max_rows=10, json_out=True).cmdloop()
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith("logstream sql: live tables")
    assert out[1] == "error: java.sql.SQLException: No suitable driver"
    assert out[2].startswith("error: org.apache.spark.SparkException: Job aborted")
    assert out[2].endswith('(caused by java.lang.NumberFormatException: For input string: "x")')
    assert json.loads(out[3]) == [{"answer": "still here"}]
    assert len(out) == 4


def test_table_output_prints_values_as_plain_text(spark, monkeypatch, capsys):
    values = "SELECT 'root:x:0:0' AS passwd, '[bold]/a[/bold]' AS path, ':thumbs_up:' AS e"
    monkeypatch.setattr("sys.stdin", io.StringIO(values + "\n"))
    SqlShell(spark, [], max_rows=10, json_out=False).cmdloop()
    _print_table([":x:"], [("root:x:0:0",)], False, "SELECT ':x:' FROM [red]t[/red]")
    out = capsys.readouterr().out
    for text in ("root:x:0:0", "[bold]/a[/bold]", ":thumbs_up:", "SELECT ':x:' FROM [red]t[/red]"):
        assert text in out
    assert "\u274c" not in out and "\U0001f44d" not in out  # no ❌, no 👍
    assert out.count(":x:") == 4  # two values, a column name and a title
