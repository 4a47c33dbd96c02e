"""The follow source (``tail -F`` for Spark): planning without Spark, then end to end.

Planning and reading are plain Python over real files in ``tmp_path``; the Spark tests run
``availableNow`` queries, restarted on the same checkpoint between writes, and collect every
micro-batch with ``foreachBatch``: every line must be read exactly once.
"""

from __future__ import annotations

import gzip
import itertools
import json
import logging
import os
import shutil
import uuid
from collections import Counter
from pathlib import Path

import pytest

from logstream.errors import InputPathError
from logstream.sources.follow import (
    check_follow_paths,
    follow_lines,
    initial_offset,
    plan_ranges,
    read_range,
    read_to_end,
    rotation_warnings,
    scan,
    snapshot,
)
from tests.pipeline.helpers import nasa_lines

# --------------------------------------------------------------------------- helpers


def append(path: Path, text: str | bytes) -> None:
    data = text.encode() if isinstance(text, str) else text
    with open(path, "ab") as fh:
        fh.write(data)


def lines_text(prefix: str, n: int, start: int = 0) -> str:
    return "".join(f"{prefix} {i}\n" for i in range(start, start + n))


def entry(offset: dict, path: Path) -> dict:
    st = os.stat(path)
    [f] = [f for f in offset["files"] if (f["dev"], f["ino"]) == (st.st_dev, st.st_ino)]
    return f


def read_between(start: dict, end: dict, split_bytes: int | None = None) -> list[tuple[str, str]]:
    """What a micro-batch from ``start`` to ``end`` reads, without Spark."""
    rows = []
    for part in plan_ranges(start, end, split_bytes):
        for batch in read_range(part):
            cols = batch.to_pydict()
            rows += zip(cols["value"], cols["source_file"], strict=True)
    return rows


def values(rows) -> list[str]:
    return [value for value, _ in rows]


def roundtrip(offset: dict) -> dict:
    """As Spark hands an offset back: through its JSON offset log."""
    return json.loads(json.dumps(offset))


# --------------------------------------------------------------------------- paths


def test_check_paths_accepts_missing_file_and_unmatched_glob(tmp_path):
    got = check_follow_paths([str(tmp_path / "later.log"), f"file://{tmp_path}/*.log"])
    assert got == [str(tmp_path / "later.log"), str(tmp_path / "*.log")]


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("{tmp}/nodir/access.log", ["nodir/access.log", "does not exist"]),
        ("{tmp}/nodir/*.log", ["nodir/*.log", "does not exist"]),
        ("{tmp}", ["is a directory", "*.log"]),
        ("hdfs://nn/logs/access.log", ["hdfs://nn/logs/access.log", "Kafka"]),
    ],
)
def test_check_paths_errors_name_the_path_and_the_fix(tmp_path, path, words):
    with pytest.raises(InputPathError) as err:
        check_follow_paths([path.format(tmp=tmp_path)])
    for word in words:
        assert word in str(err.value)


def test_follow_lines_checks_paths_before_spark(tmp_path):
    with pytest.raises(InputPathError, match="does not exist"):
        follow_lines(None, [str(tmp_path / "missing" / "access.log")])  # type: ignore[arg-type]
    with pytest.raises(InputPathError, match="nothing to follow"):
        follow_lines(None, [])  # type: ignore[arg-type]


# --------------------------------------------------------------------------- planning


def test_whole_lines_only_partial_line_waits(tmp_path):
    log = tmp_path / "access.log"
    append(log, "a 0\na 1\na 2 is still being wri")
    patterns = check_follow_paths([str(log)])
    first = scan(initial_offset(), patterns)
    assert entry(first, log)["offset"] == len("a 0\na 1\n")
    assert values(read_between(initial_offset(), first)) == ["a 0", "a 1"]
    # nothing new: the very same offset, so Spark plans no micro-batch
    assert scan(roundtrip(first), patterns) == first
    append(log, "tten\r\na 3\n")
    second = scan(roundtrip(first), patterns)
    assert values(read_between(first, second)) == ["a 2 is still being written", "a 3"]
    assert second["files"][0]["offset"] == log.stat().st_size


def test_rename_rotation_finishes_old_file_then_reads_new_one(tmp_path):
    log = tmp_path / "access.log"
    append(log, lines_text("old", 3))
    patterns = check_follow_paths([str(log)])  # the literal name: the .1 name does not match
    first = scan(initial_offset(), patterns)
    append(log, lines_text("old", 2, start=3))  # written before the rotation, not read yet
    log.rename(tmp_path / "access.log.1")
    append(log, lines_text("new", 2))
    second = scan(roundtrip(first), patterns)
    assert len(second["files"]) == 2
    assert entry(second, tmp_path / "access.log.1")["path"] == str(tmp_path / "access.log.1")
    rows = read_between(first, second)
    assert values(rows) == ["old 3", "old 4", "new 0", "new 1"]  # old file first: older mtime
    assert {uri for _, uri in rows} == {
        (tmp_path / "access.log.1").as_uri(),
        (tmp_path / "access.log").as_uri(),
    }
    assert values(read_between(initial_offset(), first)) == ["old 0", "old 1", "old 2"]


def commit(checkpoint: Path, batch: int, offset: dict) -> None:
    """Write micro-batch ``batch``'s offset log entry and its commit, as Spark lays them out
    (a version line, the batch's metadata, then the single source's offset)."""
    for sub in ("offsets", "commits"):
        (checkpoint / sub).mkdir(parents=True, exist_ok=True)
    (checkpoint / "offsets" / str(batch)).write_text(f"v1\n{{}}\n{json.dumps(offset)}")
    (checkpoint / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_read_to_end_follows_the_last_committed_offset_by_identity(tmp_path):
    """The demo's writer asks it before deleting a rotated file: read to its last line by the
    last committed micro-batch, by inode and fingerprint."""
    log, checkpoint = tmp_path / "access.log", tmp_path / "ckpt"
    append(log, lines_text("a", 3))
    patterns = check_follow_paths([str(tmp_path / "access.log*")])
    assert not read_to_end(checkpoint, log)  # no micro-batch committed yet
    first = scan(initial_offset(), patterns)
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "offsets" / "0").write_text(f"v1\n{{}}\n{json.dumps(first)}")
    assert not read_to_end(checkpoint, log)  # planned, not committed
    commit(checkpoint, 0, first)
    assert read_to_end(checkpoint, log)
    append(log, "a 3\npartial")  # one more whole line, and a part of one
    assert not read_to_end(checkpoint, log)
    commit(checkpoint, 1, scan(roundtrip(first), patterns))
    assert read_to_end(checkpoint, log)  # the partial line is not due
    log.rename(tmp_path / "access.log.1")
    assert read_to_end(checkpoint, tmp_path / "access.log.1")  # the same file, renamed
    assert read_to_end(checkpoint, tmp_path / "gone.log")  # nothing left to read
    # the same inode rewritten with other bytes is another file, not read yet
    (tmp_path / "access.log.1").write_text(lines_text("b", 6))
    assert not read_to_end(checkpoint, tmp_path / "access.log.1")


def test_copytruncate_restarts_from_zero_and_counts(tmp_path):
    log = tmp_path / "access.log"
    append(log, lines_text("before", 4))
    patterns = [str(log)]
    first = scan(initial_offset(), patterns)
    shutil.copy(log, tmp_path / "access.log.1")
    os.truncate(log, 0)
    append(log, "after 0\n")
    second = scan(roundtrip(first), patterns)
    assert second["truncations"] == 1
    assert entry(second, log)["gen"] == 1
    assert values(read_between(first, second)) == ["after 0"]


def test_truncated_then_regrown_past_the_offset_is_caught_by_crc(tmp_path):
    log = tmp_path / "access.log"
    append(log, lines_text("before", 2))
    first = scan(initial_offset(), [str(log)])
    os.truncate(log, 0)
    append(log, lines_text("after", 5))  # longer than before: the size alone hides it
    second = scan(roundtrip(first), [str(log)])
    assert second["truncations"] == 1
    assert values(read_between(first, second)) == [f"after {i}" for i in range(5)]


def test_an_inode_reused_under_another_matched_name_is_a_new_file_not_a_truncation(tmp_path):
    """logrotate's delaycompress deletes ``access.log.1`` and the server's new ``access.log``
    may get its inode: same identity, another name, other bytes. Simulated by moving the
    inode itself (rename, then rewrite) since a test cannot make the kernel reuse one."""
    rotated, live = tmp_path / "access.log.1", tmp_path / "access.log"
    append(rotated, lines_text("old", 3))
    patterns = [str(tmp_path / "access.log*")]
    first = scan(initial_offset(), patterns)
    os.replace(rotated, live)
    os.truncate(live, 0)
    append(live, lines_text("new", 4))
    second = scan(roundtrip(first), patterns)
    assert (second["truncations"], second["lost_bytes"], second["lost_files"]) == (0, 0, 0)
    assert entry(second, live)["gen"] == 1
    assert values(read_between(first, second)) == [f"new {i}" for i in range(4)]


def test_disappeared_file_counts_lost_bytes_and_files(tmp_path):
    done, behind = tmp_path / "done.log", tmp_path / "behind.log"
    append(done, lines_text("d", 2))
    append(behind, lines_text("b", 10))
    seen: dict = {}
    patterns = [str(tmp_path / "*.log")]
    first = scan(initial_offset(), patterns, max_bytes=1, seen=seen)  # one line of done.log
    assert values(read_between(initial_offset(), first)) == ["d 0"]
    second = scan(roundtrip(first), patterns, seen=seen)
    done.unlink()
    behind_size = behind.stat().st_size
    behind.unlink()
    third = scan(roundtrip(second), patterns, seen=seen)
    assert (third["files"], third["lost_files"], third["lost_bytes"]) == ([], 0, 0)
    # behind.log vanished with all its bytes read; had it not been read...
    append(behind, lines_text("b", 10))
    fourth = scan(roundtrip(third), patterns, max_bytes=1, seen=seen)
    behind.unlink()
    fifth = scan(roundtrip(fourth), patterns, seen=seen)
    assert fifth["lost_files"] == 1
    assert fifth["lost_bytes"] == behind_size - len("b 0\n")


@pytest.fixture(scope="module")
def day(nasa_day) -> list[str]:
    return nasa_lines(nasa_day)[:3000]


def put(path: Path, lines: list[str]) -> None:
    append(path, "".join(line + "\n" for line in lines))


def copytruncate(log: Path, copy: Path) -> None:
    """What logrotate's ``copytruncate`` does: copy the log, then truncate it in place."""
    shutil.copyfile(log, copy)
    os.truncate(log, 0)


@pytest.mark.parametrize("pattern", ["access.log*", "access.log"])
def test_copytruncate_reads_the_unread_lines_from_the_copy_once(tmp_path, day, pattern):
    """The lines written after the last micro-batch and before the truncation are in the
    copy only: read there, from the offset, whether or not the glob matches the copy."""
    log = tmp_path / "access.log"
    put(log, day[:100])
    patterns = check_follow_paths([str(tmp_path / pattern)])
    seen: dict = {}
    first = scan(initial_offset(), patterns, seen=seen)
    assert values(read_between(initial_offset(), first)) == day[:100]
    put(log, day[100:250])  # never seen by the planner before the rotation
    copytruncate(log, tmp_path / "access.log.1")
    put(log, day[250:300])
    second = scan(roundtrip(first), patterns, seen=seen)
    assert sorted(values(read_between(first, second))) == sorted(day[100:300])
    assert (second["truncations"], second["lost_bytes"], second["lost_lines"]) == (1, 0, 0)
    copy = entry(second, tmp_path / "access.log.1")
    assert copy["base"] == entry(first, log)["offset"]
    assert copy["fp"] == entry(first, log)["fp"]
    third = scan(roundtrip(second), patterns, seen=seen)  # nothing new: no micro-batch
    assert third == second


def test_a_micro_batch_replayed_after_a_copytruncate_reads_its_range_from_the_copy(tmp_path, day):
    """Planned, then killed before it ran; logrotate copied and truncated meanwhile. The
    replay reads the planned range from the copy, and the next plan continues the copy."""
    log = tmp_path / "access.log"
    put(log, day[:100])
    patterns = check_follow_paths([str(tmp_path / "access.log*")])
    first = scan(initial_offset(), patterns)
    put(log, day[100:200])
    planned = scan(roundtrip(first), patterns)  # in the offset log; the run dies here
    put(log, day[200:220])
    copytruncate(log, tmp_path / "access.log.1")
    put(log, day[220:230])
    assert values(read_between(first, planned)) == day[100:200]  # the replay
    after = scan(roundtrip(planned), patterns)
    assert sorted(values(read_between(planned, after))) == sorted(day[200:230])


def test_a_copy_seen_before_the_truncation_is_never_read_twice(tmp_path, day):
    """logrotate copies, then truncates: a micro-batch planned in between sees two files
    with the same first bytes. The copy is the followed file: not read; once the original is
    truncated, the copy continues it."""
    log = tmp_path / "access.log"
    put(log, day[:100])
    patterns = check_follow_paths([str(tmp_path / "access.log*")])
    seen: dict = {}
    first = scan(initial_offset(), patterns, seen=seen)
    put(log, day[100:150])
    shutil.copyfile(log, tmp_path / "access.log.1")
    put(log, day[150:160])  # written between the copy and the truncation
    between = scan(roundtrip(first), patterns, seen=seen)
    assert [f["path"] for f in between["files"]] == [str(log)]
    assert values(read_between(first, between)) == day[100:160]
    os.truncate(log, 0)  # the lines 150-160 are not in the copy, but were read
    put(log, day[160:170])
    after = scan(roundtrip(between), patterns, seen=seen)
    assert values(read_between(between, after)) == day[160:170]
    assert (after["truncations"], after["lost_bytes"]) == (1, 0)


def test_bytes_written_between_copy_and_truncation_count_as_lost(tmp_path, day):
    """logrotate's own window: lines the planner saw in the original past the copy's end
    are in neither file once it truncates. They are counted, with a line estimate."""
    log = tmp_path / "access.log"
    put(log, day[:100])
    patterns = check_follow_paths([str(tmp_path / "access.log*")])
    seen: dict = {}
    first = scan(initial_offset(), patterns, max_bytes=1, seen=seen)  # one line read
    shutil.copyfile(log, tmp_path / "access.log.1")
    window = day[100:112]
    put(log, window)
    scan(roundtrip(first), patterns, max_bytes=1, seen=seen)  # sees the window, reads a line
    os.truncate(log, 0)
    put(log, day[200:201])
    # replan from ``first`` as a restarted planner with the same memory would
    second = scan(roundtrip(first), patterns, seen=seen)
    lost = sum(len(line) + 1 for line in window)
    assert second["lost_bytes"] == lost
    assert second["lost_lines"] == pytest.approx(len(window), abs=2)
    assert second["lost_files"] == 0
    assert sorted(values(read_between(first, second))) == sorted(day[1:100] + day[200:201])


def test_logrotate_copytruncate_with_delaycompress_over_rotations(tmp_path, day):
    """``rotate 5``, ``compress``, ``delaycompress``, ``copytruncate`` and the glob
    ``access.log*``: every line once over four rotations, lines written unread before each."""
    log = tmp_path / "access.log"
    patterns = check_follow_paths([str(tmp_path / "access.log*")])
    seen: dict = {}
    offset = initial_offset()
    got: list[str] = []
    chunks = [day[i : i + 250] for i in range(0, 3000, 250)]
    for n, chunk in enumerate(chunks):
        put(log, chunk[:200])
        end = scan(roundtrip(offset), patterns, seen=seen)
        got += values(read_between(offset, end))
        offset = end
        put(log, chunk[200:])  # unread when the rotation comes
        if n % 3 == 2:
            for i in range(4, 0, -1):  # access.log.4.gz -> .5.gz ... access.log.1 -> .2
                for suffix in (".gz", ""):
                    older = tmp_path / f"access.log.{i}{suffix}"
                    if older.exists():
                        older.rename(tmp_path / f"access.log.{i + 1}{suffix}")
            copytruncate(log, tmp_path / "access.log.1")
            two = tmp_path / "access.log.2"
            if two.exists():  # delaycompress: the previous rotation is compressed now
                with gzip.open(str(two) + ".gz", "wb") as gz:
                    gz.write(two.read_bytes())
                two.unlink()
    end = scan(roundtrip(offset), patterns, seen=seen)
    got += values(read_between(offset, end))
    assert Counter(got) == Counter(day)
    assert len(got) == len(day)
    assert (end["truncations"], end["lost_bytes"], end["lost_files"]) == (4, 0, 0)


def test_a_reused_inode_holds_a_new_file_by_its_fingerprint(tmp_path, day):
    """Same identity, same size, the same last bytes before the offset: only the first
    bytes tell that the inode now holds another file."""
    log = tmp_path / "access.log"
    body = day[0:10]
    put(log, body)
    first = scan(initial_offset(), [str(log)])
    other = [body[1], body[0], *body[2:]]  # another file, same length and tail
    os.truncate(log, 0)
    put(log, other)
    second = scan(roundtrip(first), [str(log)])
    assert entry(second, log)["gen"] == 1
    assert values(read_between(first, second)) == other


def test_version_1_offsets_are_read_and_fingerprinted(tmp_path, day):
    """A checkpoint written before fingerprints resumes where it was."""
    log = tmp_path / "access.log"
    put(log, day[:10])
    first = scan(initial_offset(), [str(log)])
    old = {
        "v": 1,
        "files": [{k: f[k] for k in ("dev", "ino", "path", "offset", "gen", "crc")}
                  for f in first["files"]],
        "truncations": 0,
        "lost_bytes": 0,
        "lost_files": 0,
    }  # fmt: skip
    put(log, day[10:12])
    second = scan(old, [str(log)])
    assert values(read_between(old, second)) == day[10:12]
    assert entry(second, log)["fp"] == entry(first, log)["fp"]


def test_compressed_rotated_files_are_never_new_input(tmp_path):
    log = tmp_path / "access.log"
    append(log, "live 0\n")
    for suffix in (".gz", ".bz2", ".xz", ".zst"):
        (tmp_path / f"access.log.2{suffix}").write_bytes(gzip.compress(b"old\n"))
    append(tmp_path / "access.log.1", "rotated 0\n")  # uncompressed: the glob matches it
    offset = scan(initial_offset(), [str(tmp_path / "access.log*")])
    assert sorted(Path(f["path"]).name for f in offset["files"]) == ["access.log", "access.log.1"]


def test_max_bytes_caps_a_batch_but_always_takes_one_line(tmp_path):
    log = tmp_path / "access.log"
    append(log, "x" * 50 + "\n" + lines_text("short", 20))
    patterns = [str(log)]
    first = scan(initial_offset(), patterns, max_bytes=10)  # the first line alone is 51 bytes
    assert values(read_between(initial_offset(), first)) == ["x" * 50]
    offsets = [first]
    while True:
        nxt = scan(roundtrip(offsets[-1]), patterns, max_bytes=30)
        if nxt == offsets[-1]:
            break
        offsets.append(nxt)
    got = []
    for a, b in itertools.pairwise(offsets):
        batch = values(read_between(a, b))
        assert sum(len(v) + 1 for v in batch) <= 30
        got += batch
    assert got == [f"short {i}" for i in range(20)]


def test_available_now_caps_stop_at_the_snapshot(tmp_path):
    log = tmp_path / "access.log"
    append(log, lines_text("a", 3))
    patterns = [str(tmp_path / "*.log")]
    caps = snapshot(patterns)
    append(log, lines_text("late", 2))
    append(tmp_path / "new.log", "new 0\n")
    offset = scan(initial_offset(), patterns, caps=caps)
    assert [Path(f["path"]).name for f in offset["files"]] == ["access.log"]
    assert values(read_between(initial_offset(), offset)) == ["a 0", "a 1", "a 2"]
    assert scan(roundtrip(offset), patterns, caps=caps) == offset


def test_available_now_snapshot_covers_files_renamed_out_of_the_glob(tmp_path):
    (tmp_path / "nginx").mkdir()
    log = tmp_path / "nginx" / "access.log"
    append(log, lines_text("a", 2))
    patterns = check_follow_paths([str(tmp_path / "*" / "access.log")])
    start = scan(initial_offset(), patterns)
    append(log, lines_text("a", 2, start=2))
    log.rename(tmp_path / "nginx" / "access.log.1")  # no access.log yet: nginx/ matches nothing
    st = (tmp_path / "nginx" / "access.log.1").stat()
    assert (st.st_dev, st.st_ino) not in snapshot(patterns)
    caps = snapshot(patterns, roundtrip(start))
    assert caps[(st.st_dev, st.st_ino)] == st.st_size
    end = scan(roundtrip(start), patterns, caps=caps)
    assert values(read_between(start, end)) == ["a 2", "a 3"]


# --------------------------------------------------------------------------- reading


def test_splits_read_every_line_once_with_crlf_and_bad_bytes(tmp_path):
    log = tmp_path / "access.log"
    body = b"".join(f"line {i:03d} ".encode() + b"x" * (i % 17) + b"\r\n" for i in range(300))
    append(log, body + b"caf\xc3\xa9 \xff\xfe\n")
    end = scan(initial_offset(), [str(log)])
    expected = [f"line {i:03d} " + "x" * (i % 17) for i in range(300)] + ["café \ufffd\ufffd"]
    for split in (None, 1, 7, 100, 4096):
        assert values(read_between(initial_offset(), end, split)) == expected


def test_reader_follows_the_inode_after_a_rename(tmp_path, caplog):
    log = tmp_path / "access.log"
    append(log, lines_text("a", 3))
    end = scan(initial_offset(), [str(log)])
    [part] = plan_ranges(initial_offset(), end)
    log.rename(tmp_path / "access.log.1")
    append(log, lines_text("other", 3))  # the planned path now holds another file
    got = [
        (v, u)
        for batch in read_range(part)
        for v, u in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True)
    ]
    assert got == [(f"a {i}", (tmp_path / "access.log.1").as_uri()) for i in range(3)]
    (tmp_path / "access.log.1").unlink()
    with caplog.at_level(logging.WARNING, logger="logstream.sources.follow"):
        assert list(read_range(part)) == []
    assert "vanished" in caplog.text


def test_reader_reads_nothing_from_a_file_rewritten_since_planning(tmp_path, caplog):
    log = tmp_path / "access.log"
    append(log, lines_text("a", 3))
    end = scan(initial_offset(), [str(log)])
    os.truncate(log, 0)
    append(log, lines_text("b", 3))  # same identity, same size, other bytes
    with caplog.at_level(logging.WARNING, logger="logstream.sources.follow"):
        assert read_between(initial_offset(), end) == []
    assert "changed" in caplog.text


# --------------------------------------------------------------------------- Spark


def run(spark, paths, checkpoint: Path, max_bytes: int | None = None, ids: dict | None = None):
    """One ``availableNow`` run on ``checkpoint``: its non-empty micro-batches' rows and its
    progress; ``ids`` (if given) gets every micro-batch's rows by batch id."""
    batches: list[list[tuple[str, str]]] = []

    def collect(df, batch_id):
        batches.append([(r.value, r.source_file) for r in df.collect()])
        if ids is not None:
            ids[batch_id] = batches[-1]

    query = (
        follow_lines(spark, [str(p) for p in paths], max_bytes)
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .queryName(f"follow_{uuid.uuid4().hex[:12]}")
        .start()
    )
    try:
        assert query.awaitTermination(120), "availableNow run did not finish"
        progress = [json.loads(p.json) for p in query.recentProgress]
    finally:
        query.stop()
    return [b for b in batches if b], progress


def read_values(batches) -> list[str]:
    return [value for batch in batches for value, _ in batch]


def test_appends_between_runs_are_read_exactly_once(spark, tmp_path):
    log, ck = tmp_path / "access.log", tmp_path / "ck"
    df = follow_lines(spark, [str(tmp_path / "*.log")])
    assert df.isStreaming
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("value", "string"),
        ("source_file", "string"),
    ]
    append(log, lines_text("a", 5))
    first, _ = run(spark, [log], ck)
    assert read_values(first) == [f"a {i}" for i in range(5)]
    assert {uri for batch in first for _, uri in batch} == {log.as_uri()}
    nothing, _ = run(spark, [log], ck)
    assert nothing == []
    append(log, lines_text("a", 3, start=5))
    second, progress = run(spark, [log], ck)
    assert read_values(second) == [f"a {i}" for i in range(5, 8)]
    end = progress[-1]["sources"][0]["endOffset"]
    assert end["files"][0]["offset"] == log.stat().st_size


def test_line_written_in_two_parts_is_read_once_whole(spark, tmp_path):
    log, ck = tmp_path / "access.log", tmp_path / "ck"
    append(log, "first\nsec")
    one, _ = run(spark, [log], ck)
    append(log, "ond half\r\nthird\n")
    two, _ = run(spark, [log], ck)
    assert read_values(one) == ["first"]
    assert read_values(two) == ["second half", "third"]


def test_rename_rotation_end_to_end(spark, tmp_path):
    log, ck = tmp_path / "access.log", tmp_path / "ck"
    append(log, lines_text("old", 4))
    one, _ = run(spark, [log], ck)
    append(log, lines_text("old", 2, start=4))
    log.rename(tmp_path / "access.log.1")
    append(log, lines_text("new", 3))
    two, _ = run(spark, [log], ck)
    assert read_values(one) + read_values(two) == [f"old {i}" for i in range(6)] + [
        f"new {i}" for i in range(3)
    ]
    assert {(v, u) for b in two for v, u in b} >= {
        ("old 5", (tmp_path / "access.log.1").as_uri()),
        ("new 0", log.as_uri()),
    }


def test_copytruncate_end_to_end_counts_in_progress(spark, tmp_path):
    log, ck = tmp_path / "access.log", tmp_path / "ck"
    append(log, lines_text("before", 4))
    one, _ = run(spark, [log], ck)
    shutil.copy(log, tmp_path / "access.log.1")
    os.truncate(log, 0)
    append(log, lines_text("after", 2))
    two, progress = run(spark, [log], ck)
    assert read_values(one) == [f"before {i}" for i in range(4)]
    assert read_values(two) == ["after 0", "after 1"]
    assert progress[-1]["sources"][0]["endOffset"]["truncations"] == 1


def test_max_bytes_per_trigger_gives_several_micro_batches(spark, tmp_path):
    log, ck = tmp_path / "access.log", tmp_path / "ck"
    append(log, lines_text("line", 400))  # 3,690 bytes
    batches, progress = run(spark, [log], ck, max_bytes=1000)
    assert len(batches) == 4
    assert all(sum(len(v) + 1 for v, _ in b) <= 1000 for b in batches)
    assert read_values(batches) == [f"line {i}" for i in range(400)]
    assert [p["numInputRows"] for p in progress if p["numInputRows"]] == [len(b) for b in batches]


def test_replayed_micro_batch_reads_the_same_lines_after_a_rotation(spark, tmp_path):
    """A micro-batch logged but not committed (a crash) is replayed on restart from its logged
    offsets: the same lines, found by inode although the file was renamed meanwhile."""
    log, ck = tmp_path / "access.log", tmp_path / "ck"
    append(log, lines_text("a", 5))
    first: dict = {}
    run(spark, [log], ck, ids=first)
    assert list(first) == [0]
    for name in ("0", ".0.crc"):  # forget that batch 0 was committed
        (ck / "commits" / name).unlink(missing_ok=True)
    append(log, lines_text("a", 3, start=5))
    log.rename(tmp_path / "access.log.1")
    append(log, lines_text("b", 2))
    second: dict = {}
    run(spark, [log], ck, ids=second)
    assert [v for v, _ in second[0]] == [v for v, _ in first[0]]  # replayed, same lines
    assert {u for _, u in second[0]} == {(tmp_path / "access.log.1").as_uri()}
    assert [v for v, _ in second[1]] == ["a 5", "a 6", "a 7", "b 0", "b 1"]


def test_nasa_day_through_rotations_exactly_once(spark, nasa_day, tmp_path):
    """The real day written in appends, with a rename rotation, a copytruncate (whose new
    content outgrows the old offset) and a second rotation, the query restarted between
    steps: the lines read are the day's lines, each once."""
    lines = nasa_lines(nasa_day)
    assert len(lines) == 35272

    def text(a: int, b: int) -> str:
        return "".join(line + "\n" for line in lines[a:b])

    log, ck = tmp_path / "access.log", tmp_path / "ck"
    read: list[str] = []
    half = len(lines[5000]) // 2
    append(log, text(0, 5000) + lines[5000][:half])  # the last line is still being written
    read += read_values(run(spark, [log], ck)[0])
    assert len(read) == 5000
    append(log, lines[5000][half:] + "\n" + text(5001, 10000))
    log.rename(tmp_path / "access.log.1")  # rename rotation
    append(log, text(10000, 15000))
    read += read_values(run(spark, [log], ck, max_bytes=256 * 1024)[0])
    shutil.copy(log, tmp_path / "access.log.2")  # copytruncate
    os.truncate(log, 0)
    append(log, text(15000, 30000))  # past the old offset: caught by the CRC
    batches, progress = run(spark, [log], ck)
    read += read_values(batches)
    assert progress[-1]["sources"][0]["endOffset"]["truncations"] == 1
    append(log, text(30000, 33000))
    log.rename(tmp_path / "access.log.1")  # replaces the first rotated file
    append(log, text(33000, len(lines)))
    batches, progress = run(spark, [log], ck, max_bytes=128 * 1024)
    read += read_values(batches)
    assert len(batches) > 1
    end = progress[-1]["sources"][0]["endOffset"]
    assert (end["lost_bytes"], end["lost_files"]) == (0, 0)
    assert len(read) == 35272
    assert Counter(read) == Counter(lines)


def test_a_log_followed_without_its_rotated_names_gets_a_warning(tmp_path):
    log = str(tmp_path / "access.log")
    [warning] = rotation_warnings(check_follow_paths([log]))
    assert log in warning and f'"{log}*"' in warning
    assert rotation_warnings(check_follow_paths([f"{log}*"])) == []
    assert rotation_warnings(check_follow_paths([log, f"{log}.1"])) == []
    assert rotation_warnings(check_follow_paths([log, f"{log}-*"])) == []


def test_run_warns_at_start_when_the_rotated_names_are_not_followed(tmp_path, capsys):
    """The warning is printed before anything starts (here a bad trigger stops the run)."""
    from logstream.cli import main

    log = tmp_path / "access.log"
    args = ["run", "--follow", str(log), "--trigger", "bogus", "--output-dir", str(tmp_path)]
    assert main(args) == 2
    out = capsys.readouterr()
    compact = "".join((out.out + out.err).split())  # the console wraps long lines
    assert "warning:following" in compact and f'"{log}*"(quoted)' in compact


def test_the_progress_line_and_summary_say_what_rotation_lost():
    from logstream.cli.run import follow_losses_text

    assert follow_losses_text(None) == follow_losses_text({"lost_bytes": 0}) == ""
    text = follow_losses_text({"lost_bytes": 1204, "lost_lines": 1})
    assert "1,204 bytes (~1 line) lost to rotation" in text
    stored = {"follow_lost_bytes": 1, "follow_lost_lines": 3, "follow_truncations": 2}
    assert "1 byte (~3 lines) lost" in follow_losses_text(stored)


def test_a_file_is_opened_and_its_head_read_in_one_place():
    """Issue 54 item 27: the follow source opened a file, ``fstat``-ed it and read its first
    :data:`FINGERPRINT_BYTES` in four places (and a fifth read a shorter head); one helper
    does it now (``files._open_head``), so its checks (identity, a file that is not regular)
    hold everywhere."""
    import ast

    root = Path(__file__).resolve().parents[2] / "src" / "logstream" / "sources" / "follow"
    readers = []
    for path in sorted(root.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            for call in ast.walk(fn):
                if (
                    isinstance(call, ast.Call)
                    and ast.unparse(call.func) == "os.pread"
                    and ast.unparse(call.args[-1]) == "0"  # from byte 0: the file's head
                ):
                    readers.append(f"{path.name}:{fn.name}")
    assert readers == ["files.py:_open_head"]


def test_a_line_longer_than_the_reader_keeps_is_cut_to_its_start(tmp_path, monkeypatch):
    import logstream.sources.follow.ranges as ranges

    monkeypatch.setattr(ranges, "_LINE_CAP", 100)
    monkeypatch.setattr(ranges, "_READ_CHUNK", 64)  # the long line spans several reads
    log = tmp_path / "access.log"
    append(log, "first\n" + "x" * 1000 + "\nlast\n")
    end = scan(initial_offset(), check_follow_paths([str(log)]))
    assert values(read_between(initial_offset(), end)) == [
        "first",
        "x" * 100,  # more bytes than --max-line-bytes allows: quarantined as line_too_long
        "last",
    ]
