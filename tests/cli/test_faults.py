"""What ``logstream run`` says of a fault, without Spark: the checks at start, the kind of a
fault, the path and fix its line names, the log that keeps the trace (logstream.cli.faults).

The read-only and full file systems are real: tmpfs mounts (the suite runs as root in CI).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from logstream.cli.faults import (
    RunLog,
    check_writable,
    corrupt_checkpoint_file,
    fault_kind,
    fault_message,
    run_fault,
)
from logstream.errors import ConfigError, StoreUnavailableError


@contextmanager
def tmpfs(path: Path, size: str = "1m", read_only: bool = False) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.fail("these tests mount tmpfs file systems: run them as root (CI does)")
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        if read_only:
            subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True)
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def locations(tmp: Path) -> dict[str, tuple[Path, bool]]:
    return {
        "--state-dir": (tmp / "state", False),
        "--output-dir": (tmp / "out", False),
        "--store": (tmp / "db" / "store.db", True),
    }


def test_writable_locations_pass_and_new_ones_are_judged_by_their_parent(tmp_path):
    check_writable(locations(tmp_path))  # none exists yet: tmp_path is writable
    (tmp_path / "state" / "ingest" / "offsets").mkdir(parents=True)
    check_writable(locations(tmp_path))


def test_a_read_only_mount_is_refused_naming_the_option_and_the_fix(tmp_path):
    with tmpfs(tmp_path / "state", read_only=True):
        with pytest.raises(ConfigError) as refused:
            check_writable(locations(tmp_path))
    said = str(refused.value)
    assert said.startswith(f"--state-dir '{tmp_path / 'state'}' cannot be written")
    assert "read-only file system" in said and "or pass another --state-dir" in said


def test_a_read_only_directory_inside_is_named(tmp_path):
    (tmp_path / "out" / "events").mkdir(parents=True)
    with tmpfs(tmp_path / "out" / "events", read_only=True):
        with pytest.raises(ConfigError, match=r"--output-dir .*: '.*/out/events' in it"):
            check_writable(locations(tmp_path))


def test_a_file_where_a_directory_should_be_is_refused(tmp_path):
    (tmp_path / "out").write_text("not a directory")
    with pytest.raises(ConfigError, match=r"--output-dir .*\(a file, not a directory\): move"):
        check_writable(locations(tmp_path))


def test_a_read_only_store_directory_is_refused(tmp_path):
    with tmpfs(tmp_path / "db") as db:
        sqlite3.connect(db / "store.db").close()
        subprocess.run(["mount", "-o", "remount,ro", str(db)], check=True)
        with pytest.raises(ConfigError, match=r"--store '.*store.db' cannot be written"):
            check_writable(locations(tmp_path))


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("java.io.IOException: No space left on device", "disk_full"),
        ("database or disk is full", "disk_full"),
        ("attempt to write a readonly database", "read_only"),
        ("java.io.IOException: Mkdirs failed to create file:/s/x", "read_only"),
        ("java.nio.charset.MalformedInputException: Input length = 1", "corrupt"),
        ("com.fasterxml.jackson.core.io.JsonEOFException: Unexpected end-of-input", "corrupt"),
        (
            "java.lang.IllegalStateException: Incomplete log file in the offset commit log",
            "corrupt",
        ),
        ("java.io.FileNotFoundException: File file:/s/x does not exist", "missing"),
        ("something else entirely", "other"),
    ],
)
def test_the_kind_of_a_fault_is_told_from_its_text(text, kind):
    assert fault_kind(RuntimeError(text)) == kind


def test_a_full_disk_is_named_with_its_free_bytes_when_the_error_names_no_path(tmp_path):
    with tmpfs(tmp_path / "out", size="64k") as out:
        with pytest.raises(OSError), (out / "filler").open("wb") as fh:
            fh.write(b"x" * 200_000)
            fh.flush()
        roots = {"--state-dir": tmp_path / "state", "--output-dir": out}
        line = fault_message(
            RuntimeError("java.io.IOException: No space left on device"), roots, None
        )
    assert line.startswith(f"no space left on the disk of --output-dir '{out}' (0 bytes free)")
    assert "free space on it" in line and "run the same command again" in line
    assert "\n" not in line


def test_a_written_path_in_the_error_is_named(tmp_path):
    roots = {"--state-dir": tmp_path / "state", "--output-dir": tmp_path / "out"}
    error = RuntimeError(
        f"Task failed while writing rows to file:{tmp_path}/out/events/batch_id=3/x.parquet\n"
        "Caused by: java.io.IOException: No space left on device"
    )
    line = fault_message(error, roots, None)
    assert f"--output-dir '{tmp_path / 'out'}'" in line
    assert f"writing '{tmp_path}/out/events/batch_id=3/x.parquet'" in line


def test_an_unreadable_checkpoint_file_is_found_when_spark_names_none(tmp_path):
    state = tmp_path / "state"
    offsets, commits = state / "ingest" / "offsets", state / "ingest" / "commits"
    offsets.mkdir(parents=True)
    commits.mkdir()
    (state / "ingest" / "metadata").write_text('{"id":"x"}\n')
    for n in (0, 1):
        (offsets / str(n)).write_text('v1\n{"batchWatermarkMs":0}\n{"logOffset":0}')
        (commits / str(n)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    assert corrupt_checkpoint_file(state) is None
    (commits / "1").write_bytes(b"")
    assert corrupt_checkpoint_file(state) == commits / "1"
    (commits / "1").write_text('v1\n{"nextBatchWatermarkMs":0}')
    (offsets / "2").write_bytes(b"v1\n\xff\xfe\x00garbage")
    assert corrupt_checkpoint_file(state) == offsets / "2"
    spark_said = RuntimeError("java.nio.charset.MalformedInputException: Input length = 1")
    line = fault_message(spark_said, {"--state-dir": state}, state)
    assert line.startswith(f"'{offsets / '2'}' in --state-dir '{state}' is corrupt")
    assert "restore --state-dir from a backup" in line


def test_the_trace_goes_to_the_log_or_to_the_temporary_directory(tmp_path):
    log = RunLog.create(tmp_path / "logs")
    assert log.path.parent == tmp_path / "logs" and log.path.name.startswith("run-")
    error = StoreUnavailableError("store 'postgresql://me@db/x' could not be reached for 60 s")
    fault = run_fault(error, log, {}, None)
    assert str(fault) == f"{error}; trace in {log.path}"
    assert fault.exit_status == 1
    assert "StoreUnavailableError" in log.path.read_text()
    with tmpfs(tmp_path / "ro", read_only=True):
        spare = RunLog.create(tmp_path / "ro" / "logs")
    assert spare.path.parent.name == "logstream" and str(spare.path).startswith("/tmp")
