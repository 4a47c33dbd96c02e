"""What holds personal data (client addresses, user names, raw lines) is its owner's alone,
whatever the umask: the checkpoint root 0700, the SQLite store and its WAL 0600, the run's
log 0600 in a 0700 directory. With umask 022 they were world-readable."""

from __future__ import annotations

import os
import stat

import pytest

from logstream.cli.faults import RunLog
from logstream.pipeline.identity import claim
from logstream.serving import ServingStore


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask_022():
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def test_the_state_dir_the_store_and_the_run_log_are_the_owners_alone(tmp_path, umask_022):
    store = ServingStore(tmp_path / "out" / "logstream.db")
    store.set_state({"top": "10"})  # a write: the WAL exists while the store is open
    state_dir = tmp_path / "out" / "state"
    claim(state_dir, tmp_path / "out" / "events", store)
    log = RunLog.create(state_dir / "logs")
    assert _mode(tmp_path / "out" / "logstream.db") == 0o600
    assert _mode(tmp_path / "out" / "logstream.db-wal") == 0o600
    assert _mode(state_dir) == 0o700
    assert (_mode(log.path.parent), _mode(log.path)) == (0o700, 0o600)
    assert _mode(tmp_path / "out") == 0o755  # what is not personal follows the umask
    store.close()
