"""A store and an output directory belong to the checkpoint that feeds them: a run with another
checkpoint is stopped at start instead of having all its micro-batches skipped as "already
committed" (issue 1/6, defect 1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from logstream.errors import ConfigError
from logstream.pipeline.identity import OUTPUT_ID_FILE, STATE_ID_FILE, claim
from logstream.serving import ServingStore


def commit_one(store: ServingStore) -> None:
    store.commit_batch("ingest", 0, 5, lambda conn: None)


def fake_commit(state_dir: Path, query: str = "ingest") -> None:
    (state_dir / query / "commits").mkdir(parents=True)
    (state_dir / query / "commits" / "0").write_text("v1\n{}\n")


def test_the_first_start_writes_one_id_into_state_store_and_outputs(tmp_path):
    store = ServingStore(tmp_path / "s.db")
    pid = claim(tmp_path / "state", tmp_path / "out", store)
    assert (tmp_path / "state" / STATE_ID_FILE).read_text().strip() == pid
    assert (tmp_path / "out" / OUTPUT_ID_FILE).read_text().strip() == pid
    assert store.get_state("pipeline_id") == pid
    assert store.get_state("state_dir") == str(tmp_path / "state")
    # a restart of the same pipeline finds them all in agreement
    fake_commit(tmp_path / "state")
    commit_one(store)
    assert claim(tmp_path / "state", tmp_path / "out", store) == pid


def test_a_fresh_checkpoint_with_a_used_store_is_refused_naming_both_and_the_fix(tmp_path):
    store = ServingStore(tmp_path / "s.db")
    claim(tmp_path / "state1", tmp_path / "out1", store)
    commit_one(store)
    with pytest.raises(ConfigError) as err:
        claim(tmp_path / "state2", tmp_path / "out2", store)
    message = str(err.value)
    assert str(tmp_path / "s.db") in message and str(tmp_path / "state2") in message
    assert "--store" in message and f"--state-dir {tmp_path / 'state1'}" in message
    # nothing was written for the refused run
    assert not (tmp_path / "state2" / STATE_ID_FILE).exists()
    assert not (tmp_path / "out2").exists()


def test_a_store_of_a_version_without_ids_is_not_taken_by_a_fresh_checkpoint(tmp_path):
    store = ServingStore(tmp_path / "s.db")
    commit_one(store)  # ledger rows, no pipeline id
    with pytest.raises(ConfigError, match="already holds 1 micro-batches"):
        claim(tmp_path / "state", tmp_path / "out", store)


def test_a_new_store_for_a_checkpoint_that_already_committed_is_refused(tmp_path):
    claim(tmp_path / "state", tmp_path / "out", ServingStore(tmp_path / "a.db"))
    fake_commit(tmp_path / "state")
    with pytest.raises(ConfigError, match="is new, but the checkpoint"):
        claim(tmp_path / "state", tmp_path / "out", ServingStore(tmp_path / "b.db"))


def test_an_output_directory_of_another_pipeline_is_refused(tmp_path):
    claim(tmp_path / "state1", tmp_path / "out", ServingStore(tmp_path / "a.db"))
    with pytest.raises(ConfigError, match=r"belongs to another pipeline.*--output-dir"):
        claim(tmp_path / "state2", tmp_path / "out", ServingStore(tmp_path / "b.db"))


def test_a_checkpoint_store_and_outputs_written_before_ids_existed_are_adopted(tmp_path):
    store = ServingStore(tmp_path / "s.db")
    commit_one(store)
    fake_commit(tmp_path / "state")
    (tmp_path / "out" / "events" / "batch_id=0000000000").mkdir(parents=True)
    pid = claim(tmp_path / "state", tmp_path / "out", store)
    assert store.get_state("pipeline_id") == pid


def test_logstream_run_with_a_fresh_state_dir_and_an_old_default_store_exits_2(tmp_path):
    """The issue's reproduction: a second run with another --state-dir and --output-dir, same
    store. It used to print 'done: 0 on-time events' and exit 0."""
    store = ServingStore(tmp_path / "logstream.db")
    claim(tmp_path / "state1", tmp_path / "out1", store)
    commit_one(store)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.log").write_text(
        '199.72.81.55 - - [01/Jul/1995:00:00:01 -0400] "GET /history/ HTTP/1.0" 200 6245\n'
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "logstream",
            "run",
            "--input-dir",
            str(tmp_path / "in"),
            "--state-dir",
            str(tmp_path / "state2"),
            "--output-dir",
            str(tmp_path / "out2"),
            "--store",
            f"sqlite:///{tmp_path / 'logstream.db'}",
            "--trigger",
            "available-now",
            "--format",
            "common",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "belongs to another pipeline" in done.stderr
    assert "Traceback" not in done.stderr


def test_outputs_that_lost_only_their_id_file_are_refused_naming_the_missing_file(tmp_path):
    """Issue 37 item 25: after deleting only OUT/_pipeline_id the refusal said the outputs held
    micro-batches "the checkpoint did not write", though it did. It names the missing file, and
    how to restore it, instead."""
    store = ServingStore(tmp_path / "s.db")
    pid = claim(tmp_path / "state", tmp_path / "out", store)
    fake_commit(tmp_path / "state")
    commit_one(store)
    (tmp_path / "out" / "events" / "batch_id=0000000000").mkdir(parents=True)
    (tmp_path / "out" / OUTPUT_ID_FILE).unlink()
    with pytest.raises(ConfigError) as err:
        claim(tmp_path / "state", tmp_path / "out", store)
    message = str(err.value)
    assert "did not write" not in message
    assert f"pipeline id file {str(tmp_path / 'out' / OUTPUT_ID_FILE)!r} is missing" in message
    assert pid in message and "--output-dir" in message
    assert not (tmp_path / "out" / OUTPUT_ID_FILE).exists()  # nothing written


def test_a_refused_logstream_run_creates_no_store_file(tmp_path, capsys):
    """Issue 37 item 25: the CLI opened (so created) the SQLite store before the identity
    check refused the run, leaving an empty store file behind."""
    from logstream.cli import main

    claim(tmp_path / "state", tmp_path / "out", ServingStore(tmp_path / "a.db"))
    fake_commit(tmp_path / "state")
    (tmp_path / "in").mkdir()
    new_store = tmp_path / "new" / "b.db"
    args = ["run", "--input-dir", str(tmp_path / "in"), "--format", "common"]
    args += ["--state-dir", str(tmp_path / "state"), "--output-dir", str(tmp_path / "out")]
    args += ["--store", f"sqlite:///{new_store}", "--trigger", "available-now"]
    assert main([*args, "--no-dashboard", "--quiet"]) == 2
    assert "is new, but the checkpoint" in capsys.readouterr().err
    assert not new_store.exists() and not new_store.parent.exists()
