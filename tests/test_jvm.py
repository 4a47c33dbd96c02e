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


#: What a JVM of logstream printed on every start (issue 54 item 22), and the device
#: pipeline's Python worker in its first micro-batch.
NOISE = [
    "WARNING: Using incubator modules: jdk.incubator.vector",
    "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties",
    'Setting default log level to "WARN".',
    "To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).",
    "26/11/29 05:08:36 WARN NativeCodeLoader: Unable to load native-hadoop library for your "
    "platform... using builtin-java classes where applicable",
    "Warning: Java versions > Java 11 can only operate in restricted mode where no off-heap "
    "operations are allowed!",
    "Starting Streaming TransformWithStateInPandas Python worker.",
    "",
    "Streaming TransformWithStateInPandas Python worker Completed execution of UDF: <f>.",
    "",
    "26/11/29 05:08:37 WARN Utils: Service 'SparkUI' could not bind on port 4041. "
    "Attempting port 4042.",
]


def test_the_jvm_says_nothing_a_user_cannot_act_on():
    """Issue 54 item 22: the JVM's start-up lines (incubator modules, log4j's profile, the
    native Hadoop library, Java's restricted mode, the UI's port retries) and the Python
    worker's execution notes are dropped; a port retry leaves one line saying what to do;
    anything else goes through unchanged."""
    from logstream.jvm import JvmOutputFilter

    kept = []
    quiet = JvmOutputFilter(kept.append)
    for line in [*NOISE, "26/11/29 05:09:00 ERROR Executor: Exception in task 0.0", *NOISE]:
        quiet.line(line)
    assert kept == [
        "note: port 4041 of Spark's UI is in use, so Spark tries the next ones "
        "(--conf spark.ui.port=PORT chooses one)",
        "26/11/29 05:09:00 ERROR Executor: Exception in task 0.0",
    ]
