"""Faults in the input and in logstream's own state are never silent: a line from the future
never moves the watermark, a damaged snapshot refuses the start, and a checkpoint rolled back
by hand is either replayed exactly or refused, a deleted snapshot directory is replayed, and
a run's totals count a replayed batch once.

Each fault runs the first 12,000 lines of the NASA day in four files, one file a micro-batch,
and is compared with the same run without the fault: every Parquet output and store table as
multisets of rows."""

from __future__ import annotations

import logging
import os
import random
import shutil
from collections import Counter
from pathlib import Path

import pytest
from tests.pipeline.helpers import PARQUET_OUTPUTS, nasa_lines, run_pipeline, write_chunks
from tests.pipeline.test_recovery import parquet_rows, store_rows

from logstream.errors import ReplayMismatchError, StateCorruptError
from logstream.pipeline import Pipeline

PER_FILE = 3000
FILES = 4


def _lines(nasa_day) -> list[str]:
    return nasa_lines(nasa_day)[: PER_FILE * FILES]


@pytest.fixture(scope="module")
def reference(spark, nasa_day, tmp_path_factory) -> tuple[dict, dict]:
    """The fault-free run's outputs and store tables."""
    tmp = tmp_path_factory.mktemp("faults-reference")
    write_chunks(_lines(nasa_day), tmp / "in", PER_FILE)
    _run(spark, tmp)
    return _rows(spark, tmp)


def _run(spark, tmp: Path, driver: bool = True) -> Pipeline:
    return run_pipeline(spark, tmp, tmp / "in", spark_steps=not driver)


def _rows(spark, tmp: Path) -> tuple[dict, dict]:
    """Every Parquet output and store table as multisets (events without the name of the
    file they came from: the faulty inputs are cut into other files)."""
    outputs = {n: parquet_rows(spark, tmp, n) for n in PARQUET_OUTPUTS if n != "events"}
    events = spark.read.parquet(str(tmp / "out" / "events")).drop("batch_id", "source_file")
    outputs["events"] = Counter(tuple(r) for r in events.select(*sorted(events.columns)).collect())
    return outputs, store_rows(tmp)


def _stamped(line: str, stamp: str) -> str:
    return line[: line.index("[") + 1] + stamp + line[line.index("]") :]


def _quarantine(spark, tmp: Path) -> list:
    return [
        tuple(r)
        for r in spark.read.parquet(str(tmp / "out" / "quarantine"))
        .select("raw_line", "reason", "detail")
        .collect()
    ]


@pytest.mark.parametrize(
    ("stamp", "path"),
    [
        # ahead of the clock: quarantined by the parser, on either path
        ("09/Jul/2099:12:00:00 -0400", "driver"),
        # a year ahead of its micro-batch (1996 is not the future of the clock): the
        # in-batch rule, on the live path and through the Spark steps
        ("09/Jul/1996:12:00:00 -0400", "driver"),
        ("09/Jul/1996:12:00:00 -0400", "spark"),
    ],
)
def test_a_line_from_the_future_is_quarantined_and_moves_no_watermark(
    spark, nasa_day, reference, tmp_path, stamp, path
):
    lines = _lines(nasa_day)
    bad = _stamped(lines[PER_FILE + 10], stamp)
    # the line lands in the second file, whose micro-batch it would have carried to `stamp`
    with_bad = [*lines[: PER_FILE + 10], bad, *lines[PER_FILE + 10 :]]
    write_chunks(with_bad, tmp_path / "in", PER_FILE)
    pipeline = _run(spark, tmp_path, driver=path == "driver")
    assert pipeline.ingest.paths[path] > 0
    outputs, store = _rows(spark, tmp_path)
    want_outputs, want_store = reference
    assert outputs == want_outputs  # every event, window and session as without the line
    quarantined = _quarantine(spark, tmp_path)
    assert [(q[0], q[1]) for q in quarantined] == [(bad, "future_event_time")]
    if stamp.endswith("1996:12:00:00 -0400"):
        # the in-batch rule's detail, or the skew rule's where it sees the line too
        assert "more than the watermark delay" in quarantined[0][2]
    want = {k: v for k, v in want_store.items() if k not in ("counters", "ledger")}
    assert {k: v for k, v in store.items() if k not in ("counters", "ledger")} == want
    counters = dict(store["counters"].keys())
    want_counters = dict(want_store["counters"].keys())
    assert counters == {**want_counters, "quarantined": 1}
    assert counters["events"] == PER_FILE * FILES and counters["late_events"] == 0


def test_a_clock_days_ahead_among_a_files_lines_is_held_apart_and_named_once(
    spark, nasa_day, reference, tmp_path, caplog
):
    lines = _lines(nasa_day)
    second = lines[PER_FILE : 2 * PER_FILE]
    rnd = random.Random(3)
    skewed = [rnd.choice(second).replace("09/Jul/1995", "12/Jul/1995") for _ in range(100)]
    for line in skewed:  # mixed into the second file (a micro-batch), between its lines
        second.insert(rnd.randrange(len(second) + 1), line)
    write_chunks(lines[:PER_FILE], tmp_path / "in", PER_FILE)
    write_chunks(second, tmp_path / "in-2", len(second), start_mtime=1_000_000 + PER_FILE)
    write_chunks(lines[2 * PER_FILE :], tmp_path / "in-3", PER_FILE, 1_000_000 + 2 * PER_FILE)
    for i, d in enumerate(("in-2", "in-3")):
        for path in sorted((tmp_path / d).iterdir()):
            path.rename(tmp_path / "in" / f"{i}-{path.name}")
    with caplog.at_level(logging.WARNING, logger="logstream"):
        _run(spark, tmp_path)
    outputs, store = _rows(spark, tmp_path)
    want_outputs, want_store = reference
    assert outputs == want_outputs  # every real event on time, in its window, as without them
    quarantined = _quarantine(spark, tmp_path)
    assert sorted(q[0] for q in quarantined) == sorted(skewed)
    assert {(q[1], "a clock set wrong" in q[2]) for q in quarantined} == {
        ("future_event_time", True)
    }
    want = {k: v for k, v in want_store.items() if k not in ("counters", "ledger")}
    assert {k: v for k, v in store.items() if k not in ("counters", "ledger")} == want
    counters = dict(store["counters"].keys())
    assert counters == {**dict(want_store["counters"].keys()), "quarantined": 100}
    said = [r.getMessage() for r in caplog.records if "clock set wrong" in r.getMessage()]
    assert len(said) == 1 and "100 events are at least" in said[0] and "0-chunk-0000" in said[0]


def _first_half(nasa_day, tmp: Path) -> None:
    write_chunks(_lines(nasa_day)[: 2 * PER_FILE], tmp / "in", PER_FILE)


def _second_half(nasa_day, tmp: Path) -> None:
    """The other files, landing after the first run (written apart, renamed in)."""
    rest = write_chunks(_lines(nasa_day)[2 * PER_FILE :], tmp / "in-rest", PER_FILE)
    for i, path in enumerate(rest):
        later = 1_000_000 + (2 + i) * PER_FILE
        os.utime(path, (later, later))
        path.rename(tmp / "in" / f"later-{path.name}")


@pytest.mark.parametrize("damage", ["garbled", "truncated", "deleted", "meta_deleted"])
def test_a_damaged_snapshot_refuses_the_start_and_its_recovery_is_exact(
    spark, nasa_day, reference, tmp_path, damage
):
    _first_half(nasa_day, tmp_path)
    _run(spark, tmp_path)
    analytics = tmp_path / "state" / "analytics"
    newest = max(p for p in analytics.glob("batch_id=*"))
    state_file = next((newest / "state").glob("*.parquet"))
    if damage == "garbled":
        data = bytearray(state_file.read_bytes())
        data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)
        state_file.write_bytes(bytes(data))
    elif damage == "truncated":
        state_file.write_bytes(state_file.read_bytes()[:100])
    elif damage == "deleted":
        state_file.unlink()
    else:
        (newest / "meta.json").unlink()
    _second_half(nasa_day, tmp_path)
    with pytest.raises(StateCorruptError) as refused:
        _run(spark, tmp_path)
    message = str(refused.value)
    assert "\n" not in message and str(newest) in message
    batch = int(newest.name.split("=")[1])
    commits = tmp_path / "state" / "ingest" / "commits" / str(batch)
    assert f"delete {newest} and {commits}" in message
    # the recovery the message gives: the batch is replayed from the snapshot before it
    shutil.rmtree(newest)
    commits.unlink()
    (commits.parent / f".{batch}.crc").unlink(missing_ok=True)
    _run(spark, tmp_path)
    assert _rows(spark, tmp_path) == reference


def test_a_rolled_back_newest_batch_is_replayed_exactly(spark, nasa_day, reference, tmp_path):
    _first_half(nasa_day, tmp_path)
    _run(spark, tmp_path)
    checkpoint = tmp_path / "state" / "ingest"
    # the obvious repair of a damaged newest offsets file: delete it and its commit
    for log in ("offsets", "commits"):
        (checkpoint / log / "1").unlink()
        (checkpoint / log / ".1.crc").unlink(missing_ok=True)
    _second_half(nasa_day, tmp_path)
    _run(spark, tmp_path)  # restores offsets/1 as delivered, replays nothing twice
    assert _rows(spark, tmp_path) == reference


def test_the_two_newest_batches_rolled_back_are_replayed_exactly(
    spark, nasa_day, reference, tmp_path
):
    _first_half(nasa_day, tmp_path)
    _run(spark, tmp_path)
    checkpoint = tmp_path / "state" / "ingest"
    for log in ("offsets", "commits"):  # Spark alone: "Previous batch 0 not found"
        for batch in ("0", "1"):
            (checkpoint / log / batch).unlink()
            (checkpoint / log / f".{batch}.crc").unlink(missing_ok=True)
    _second_half(nasa_day, tmp_path)
    pipeline = _run(spark, tmp_path)  # both written back as delivered, both skipped
    assert _rows(spark, tmp_path) == reference
    assert pipeline.totals.events == 2 * PER_FILE  # the second half only: as the store


def test_a_deleted_snapshot_directory_is_replayed_exactly_and_counted_once(
    spark, nasa_day, reference, tmp_path
):
    _first_half(nasa_day, tmp_path)
    _run(spark, tmp_path)
    newest = max((tmp_path / "state" / "analytics").glob("batch_id=*"))
    shutil.rmtree(newest)  # its Parquet and meta.json with it: nothing left to check
    _second_half(nasa_day, tmp_path)
    pipeline = _run(spark, tmp_path)  # batch 1 replayed from snapshot 0, its writes skipped
    assert _rows(spark, tmp_path) == reference
    assert (tmp_path / "state" / "ingest" / "commits" / "1.no-snapshot").exists()
    # the done: line counts what this run added, as the store does (batch 1 was delivered)
    t = pipeline.totals
    assert (t.batches, t.events) == (FILES - 2, 2 * PER_FILE)


def test_a_delivered_batch_planned_over_other_input_is_refused(spark, nasa_day, tmp_path):
    _first_half(nasa_day, tmp_path)
    _run(spark, tmp_path)
    offsets = tmp_path / "state" / "ingest" / "offsets" / "1"
    lines = offsets.read_text().splitlines()
    assert lines[2] == '{"logOffset":1}'
    offsets.write_text("\n".join([*lines[:2], '{"logOffset":0}']))  # another plan of batch 1
    (offsets.parent / ".1.crc").unlink(missing_ok=True)
    commits = tmp_path / "state" / "ingest" / "commits"
    (commits / "1").unlink()
    (commits / ".1.crc").unlink(missing_ok=True)
    events = parquet_rows(spark, tmp_path, "events")
    with pytest.raises(ReplayMismatchError) as refused:
        _run(spark, tmp_path)
    assert "micro-batch 1 was delivered over" in str(refused.value)
    assert parquet_rows(spark, tmp_path, "events") == events  # nothing written twice
