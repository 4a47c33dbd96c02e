"""Bad options and paths are rejected at start with the value and the fix (exit status 2)."""

from __future__ import annotations

import pytest
from tests.conftest import NASA_AUG_1000, data_file

from logstream.cli import main


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["batch", "/nonexistent/access.log"], "input '/nonexistent/access.log' does not exist"),
        (["batch", "/nonexistent/*.log"], "matches no file"),
        (["batch", "{nasa}", "--format", "apache-ish"], "unknown log format 'apache-ish'"),
        (["batch", "{nasa}", "--time-zone", "Mars/Olympus"], "unknown time zone 'Mars/Olympus'"),
        (["batch", "{nasa}", "--master", "bogus"], "not a Spark master URL"),
        (["batch", "{nasa}", "--conf", "driver.memory=4g"], "--conf 'driver.memory=4g'"),
        (["batch", "{nasa}", "--conf", "spark.driver.memory"], "expected KEY=VALUE"),
        (["run", "--input-dir", "{nasa}", "--conf", "spark.x="], "--conf 'spark.x='"),
        (["batch", "{nasa}", "--conf", "spark.master=local[1]"], "use --master"),
        (["batch", "{nasa}", "--json", "/nonexistent/dir/r.json"], "does not exist"),
        (["batch", "{nasa}", "--no-panel", "osx"], "--no-panel: unknown panel 'osx'"),
        (["batch", "{nasa}", "--static-ext", "*.webp"], "--static-ext: '*.webp'"),
    ],
)
def test_bad_input_exits_2_with_a_message_naming_the_value(args, message, nasa_day, capsys):
    args = [a.replace("{nasa}", str(nasa_day)) for a in args]
    assert main(args) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        ["batch", "{nasa}"],
        ["sql", "{nasa}", "-e", "SELECT 1"],
        ["rules", "--source", "rate", "--rate", "10"],
        ["run", "--input-dir", "{tmp}/in", "--output-dir", "{tmp}/out", "--state-dir", "{tmp}/s"],
        ["model", "train", "bots", "--input", "{nasa}", "--out", "{tmp}/model"],
        ["model", "evaluate", "bots", "--model", "{tmp}/model", "--input", "{nasa}"],
        ["dstream", "run", "--socket", "localhost:9"],
    ],
    ids=lambda a: " ".join(w for w in a if not w.startswith(("{", "-", "SELECT"))),
)
def test_a_bad_format_is_refused_before_spark_starts(args, nasa_day, tmp_path, monkeypatch, capsys):
    """Issue 54 item 2: ``logstream batch FILE --format bogus`` was refused only after Spark
    had started (16 s); every command checks its --format before the JVM starts."""
    import logstream.session

    def no_spark(*_args, **_kwargs):
        raise AssertionError("Spark was started before --format was checked")

    monkeypatch.setattr(logstream.session, "get_spark", no_spark)
    (tmp_path / "in").mkdir()
    args = [a.replace("{nasa}", str(nasa_day)).replace("{tmp}", str(tmp_path)) for a in args]
    assert main([*args, "--format", "bogus"]) == 2
    assert "unknown log format 'bogus'" in capsys.readouterr().err


def test_empty_directory_is_rejected(tmp_path, capsys):
    assert main(["batch", str(tmp_path)]) == 2
    assert "holds no log file" in capsys.readouterr().err


def test_top_must_be_positive(nasa_day, capsys):
    assert main(["batch", str(nasa_day), "--top", "0"]) == 2
    assert "--top" in capsys.readouterr().err


def test_version_and_help(capsys):
    assert main(["--version"]) == 0
    assert "logstream 0.1.0" in capsys.readouterr().out
    assert main(["batch", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--format" in out and "LogFormat" in out


def test_file_uris_from_source_file_are_accepted(nasa_day):
    from logstream.sources import expand_inputs

    assert expand_inputs([f"file:{nasa_day}", nasa_day.as_uri()]) == [str(nasa_day)] * 2


def test_conf_values_reach_the_spark_session(spark, tmp_path):
    key = "spark.logstream.test.marker"
    try:
        log = data_file(NASA_AUG_1000)  # a small log: the report's content is not this test's
        args = ["batch", str(log), "--quiet", "--json", str(tmp_path / "r.json")]
        assert main([*args, "--conf", f"{key}=on"]) == 0
        assert spark.conf.get(key) == "on"
    finally:
        spark.conf.unset(key)


def test_conf_from_a_config_file_table_or_list():
    from logstream.cli.app import spark_conf

    assert spark_conf({"spark.driver.memory": "4g"}) == {"spark.driver.memory": "4g"}
    assert spark_conf(["spark.a=1", " spark.b = x=y "]) == {"spark.a": "1", "spark.b": "x=y"}
    assert spark_conf("spark.a=1") == {"spark.a": "1"}
    assert spark_conf({"spark": {"ui": {"enabled": True}}}) == {"spark.ui.enabled": "true"}
    assert spark_conf(None) == {}


def test_a_bad_conf_in_a_config_file_is_named_before_spark_starts(tmp_path, capsys):
    config = tmp_path / "run.toml"
    config.write_text(
        f'[run]\ninput_dir = "{tmp_path}"\n\n[run.conf]\nspark.sql.session.timeZone = "CET"\n'
    )
    assert main(["run", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "spark.sql.session.timeZone=CET" in err and "pins UTC" in err


@pytest.mark.parametrize(
    ("name", "given", "detected"),
    [
        ("NASA_access_log_Jul95_first2000.log.gz", "combined", "common"),
        ("elastic_apache_logs_combined_2015.log.gz", "nasa-tsv", "combined"),
    ],
)
def test_a_format_no_line_matches_is_refused_before_spark_starts(
    name, given, detected, monkeypatch, capsys
):
    """A wrong ``--format`` (``combined`` for the Common NASA log) ran 74 s and printed 120
    lines of empty tables; now one line, before the JVM starts, names the format the first
    lines look like."""
    import logstream.session

    def no_spark(*_args, **_kwargs):
        raise AssertionError("Spark was started before the lines were checked")

    monkeypatch.setattr(logstream.session, "get_spark", no_spark)
    assert main(["batch", str(data_file(name)), "--format", given]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"none of the first 100 lines matches --format {given}" in err
    assert err.endswith(f"they look like {detected}: pass --format {detected}, or --format auto")
