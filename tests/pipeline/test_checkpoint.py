"""The offset-log entries a micro-batch is delivered over: read, compared, written back."""

from __future__ import annotations

from pathlib import Path

import pytest

from logstream.errors import ReplayMismatchError, StateCorruptError, StateError
from logstream.pipeline.checkpoint import (
    check_replay,
    offset_entry,
    recover_missing_snapshot,
    restore_offsets,
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
    note = restore_offsets(tmp_path, {5: recorded})
    assert note is not None and damage in note and str(log / "5") in note
    assert offset_entry(tmp_path, 5) == recorded
    assert not (log / ".5.crc").exists()
    assert (log / "5.damaged").exists() is (damage == "unreadable")
    assert restore_offsets(tmp_path, {5: recorded}) is None  # whole now: nothing to do


def test_an_entry_spark_planned_after_the_recorded_one_is_left_alone(tmp_path):
    log = tmp_path / "offsets"
    log.mkdir()
    (log / "5").write_text(entry('{"logOffset":5}'))
    (log / "6").write_text(entry('{"logOffset":6}'))  # a later batch, planned, not delivered
    assert restore_offsets(tmp_path, {5: entry('{"logOffset":4}')}) is None
    assert offset_entry(tmp_path, 5) == entry('{"logOffset":5}')
    assert offset_entry(tmp_path, 6) == entry('{"logOffset":6}')
    assert restore_offsets(tmp_path, {}) is None


def test_the_newest_entries_missing_together_are_all_written_back(tmp_path):
    log = tmp_path / "offsets"
    log.mkdir()
    (log / "3").write_text(entry('{"logOffset":3}'))
    recorded = {n: entry(f'{{"logOffset":{n}}}') for n in (3, 4, 5)}
    note = restore_offsets(tmp_path, recorded)
    assert note is not None and "micro-batches 4, 5 were missing" in note and "\n" not in note
    assert offset_entry(tmp_path, 4) == recorded[4] and offset_entry(tmp_path, 5) == recorded[5]
    assert offset_entry(tmp_path, 3) == entry('{"logOffset":3}')  # whole: left as it is


def test_a_gap_before_the_newest_entry_that_nothing_recorded_is_refused(tmp_path):
    log = tmp_path / "offsets"
    log.mkdir()
    (log / "5").write_text(entry('{"logOffset":5}'))
    with pytest.raises(StateError, match=r"no readable offsets of micro-batch 4 before its newest"):
        restore_offsets(tmp_path, {})


def _checkpoint(tmp_path, offsets: dict[int, str], commits: list[int]):
    for n, source in offsets.items():
        (tmp_path / "offsets").mkdir(exist_ok=True)
        (tmp_path / "offsets" / str(n)).write_text(entry(source))
    for n in commits:
        (tmp_path / "commits").mkdir(exist_ok=True)
        (tmp_path / "commits" / str(n)).write_text('v1\n{"nextBatchWatermarkMs":0}')
        (tmp_path / "commits" / f".{n}.crc").write_bytes(b"crc")


def snapshot_dir(batch_id: int) -> Path:
    return Path(f"/state/analytics/batch_id={batch_id:010d}")


def test_a_committed_batch_without_its_snapshot_is_replayed_when_newest(tmp_path):
    _checkpoint(tmp_path, {n: f'{{"logOffset":{n}}}' for n in range(4)}, [0, 1, 2, 3])
    assert recover_missing_snapshot(tmp_path, 3, snapshot_dir) is None  # every one there
    note = recover_missing_snapshot(tmp_path, 2, snapshot_dir)
    assert note is not None and str(snapshot_dir(3)) in note and "replayed" in note
    commits = sorted(p.name for p in (tmp_path / "commits").iterdir())
    assert commits == [".0.crc", ".1.crc", ".2.crc", "0", "1", "2", "3.no-snapshot"]


def test_a_batch_without_input_needs_no_snapshot(tmp_path):
    # batch 3 moved the watermark on without input: the same offsets as batch 2
    offsets = {0: '{"logOffset":0}', 1: '{"logOffset":1}', 2: '{"logOffset":2}'}
    _checkpoint(tmp_path, {**offsets, 3: '{"logOffset":2}'}, [0, 1, 2, 3])
    assert recover_missing_snapshot(tmp_path, 2, snapshot_dir) is None


def test_two_committed_batches_without_snapshots_are_refused(tmp_path):
    _checkpoint(tmp_path, {n: f'{{"logOffset":{n}}}' for n in range(4)}, [0, 1, 2, 3])
    with pytest.raises(StateCorruptError) as refused:
        recover_missing_snapshot(tmp_path, 1, snapshot_dir)
    said = str(refused.value)
    assert "micro-batches 2, 3 are missing" in said and str(snapshot_dir(3)) in said
    assert "Restore /state/analytics from a backup" in said and "\n" not in said
    assert (tmp_path / "commits" / "3").exists()  # nothing changed
