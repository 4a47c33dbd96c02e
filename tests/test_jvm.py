"""The JVM class-data archive: where it is, when it is used, and that it is never required."""

from __future__ import annotations

import pytest

from logstream import jvm
from logstream.pipeline.archive import build_archive
from logstream.session import LOCAL_JAVA_OPTIONS


def test_the_archive_is_used_once_it_exists(tmp_path, monkeypatch):
    monkeypatch.setenv(jvm.ARCHIVE_ENV, str(tmp_path))
    path = jvm.archive_path()
    assert path is not None and path.parent == tmp_path
    assert path.name.startswith("spark-") and path.suffix == ".jsa"
    assert jvm.archive_options() == []  # not built yet: the JVM starts as before
    path.write_bytes(b"")
    options = jvm.archive_options()
    assert options[0] == f"-XX:SharedArchiveFile={path}"
    assert "-Xlog:cds=off" in options  # a JVM that cannot map it says nothing


def test_the_name_follows_the_java_binary(tmp_path, monkeypatch):
    monkeypatch.setenv(jvm.ARCHIVE_ENV, str(tmp_path))
    first = jvm.archive_path()
    fake_home = tmp_path / "jdk"
    (fake_home / "bin").mkdir(parents=True)
    (fake_home / "bin" / "java").write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(fake_home))
    assert jvm.java_binary() == (fake_home / "bin" / "java").resolve()
    assert jvm.archive_path() not in (None, first)


def test_off_turns_it_off(monkeypatch):
    monkeypatch.setenv(jvm.ARCHIVE_ENV, "off")
    assert jvm.archive_path() is None
    assert jvm.archive_options() == []
    assert build_archive() is None


def test_it_is_built_in_a_process_of_its_own(spark, tmp_path, monkeypatch):
    monkeypatch.setenv(jvm.ARCHIVE_ENV, str(tmp_path))
    with pytest.raises(RuntimeError, match="without a SparkSession"):
        build_archive()
    assert list(tmp_path.iterdir()) == []  # no staging file left behind
    assert "-XX:+UseParallelGC" in LOCAL_JAVA_OPTIONS
