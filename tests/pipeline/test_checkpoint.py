"""The offset-log entries a micro-batch is delivered over: read, compared, written back."""

from __future__ import annotations

import pytest

from logstream.errors import ReplayMismatchError
from logstream.pipeline.checkpoint import (
    check_replay,
    offset_entry,
    restore_newest,
    source_offsets,
)

META = '{"batchWatermarkMs":0,"batchTimestampMs":1764400000000,"conf":{}}'


def entry(*sources: str) -> str:
    return "\n".join(["v1", META, *sources])


def test_the_sources_offsets_are_the_lines_after_the_metadata():
    assert source_offsets(entry('{"logOffset":7}')) == ['{"logOffset":7}']
    assert source_offsets(entry('{"logOffset":7}', '{"t":{"0":12}}')) == [
        '{"logOffset":7}',
        '{"t":{"0":12}}',
    ]
    assert source_offsets(None) is None
    assert source_offsets("v1\n{not json\n{}") is None  # a damaged entry
    assert source_offsets("") is None


def test_a_batch_planned_again_over_the_same_offsets_passes_and_over_others_is_refused(tmp_path):
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "3").write_text(entry('{"logOffset":3}'))
    # the same sources, a new timestamp (Spark planned it again): the same input
    other_meta = entry('{"logOffset":3}').replace("1764400000000", "1764400099999")
    check_replay(tmp_path, 3, other_meta, tmp_path / "snapshot")
    check_replay(tmp_path, 3, None, tmp_path / "snapshot")  # nothing recorded: nothing to check
    with pytest.raises(ReplayMismatchError) as refused:
        check_replay(tmp_path, 3, entry('{"logOffset":2}'), tmp_path / "snapshot")
    message = str(refused.value)
    assert "micro-batch 3 was delivered over" in message and '{"logOffset":2}' in message
    assert str(tmp_path / "offsets" / "3") in message and "\n" not in message


@pytest.mark.parametrize("damage", ["missing", "unreadable"])
def test_the_newest_entry_is_written_back_when_missing_or_unreadable(tmp_path, damage):
    log = tmp_path / "offsets"
    log.mkdir()
    (log / "4").write_text(entry('{"logOffset":4}'))
    recorded = entry('{"logOffset":5}')
    if damage == "unreadable":
        (log / "5").write_text("v1\n{garbled")
    (log / ".5.crc").write_bytes(b"stale checksum")  # Hadoop's, of the old bytes
    note = restore_newest(tmp_path, {5: recorded})
    assert note is not None and damage in note and str(log / "5") in note
    assert offset_entry(tmp_path, 5) == recorded
    assert not (log / ".5.crc").exists()
    assert (log / "5.damaged").exists() is (damage == "unreadable")
    assert restore_newest(tmp_path, {5: recorded}) is None  # whole now: nothing to do


def test_an_entry_spark_planned_after_the_recorded_one_is_left_alone(tmp_path):
    log = tmp_path / "offsets"
    log.mkdir()
    (log / "6").write_text(entry('{"logOffset":6}'))  # a later batch, planned, not delivered
    assert restore_newest(tmp_path, {5: entry('{"logOffset":5}')}) is None
    assert offset_entry(tmp_path, 5) is None
    assert restore_newest(tmp_path, {}) is None
