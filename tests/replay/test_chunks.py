"""Chunk directory: rotation, atomic publication, names in order, content equal to the input."""

from __future__ import annotations

import gzip
import os
import threading
import time

import pytest

from logstream.errors import ConfigError
from logstream.replay import ChunkDirSink, ManualClock, ReplayOptions, replay_files


def visible(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if not n.startswith("."))


def test_rotation_by_lines_and_hidden_until_published(tmp_path):
    sink = ChunkDirSink(tmp_path, chunk_lines=3, chunk_seconds=60, clock=ManualClock())
    for i in range(2):
        sink.write(f"line {i}")
    assert visible(tmp_path) == []
    assert os.listdir(tmp_path) == [".chunk-00000001.log.tmp"]
    for i in range(2, 10):
        sink.write(f"line {i}")
    assert visible(tmp_path) == [f"chunk-0000000{n}.log" for n in (1, 2, 3)]
    sink.close()
    assert sorted(os.listdir(tmp_path)) == visible(tmp_path)  # no temporary file left
    assert [len((tmp_path / n).read_text().splitlines()) for n in visible(tmp_path)] == [3, 3, 3, 1]
    text = "".join((tmp_path / n).read_text() for n in visible(tmp_path))
    assert text == "".join(f"line {i}\n" for i in range(10))


def test_rotation_by_time_and_no_empty_chunks(tmp_path):
    clock = ManualClock()
    sink = ChunkDirSink(tmp_path, chunk_lines=1000, chunk_seconds=5, clock=clock)
    sink.tick()
    sink.write("a")
    clock.advance(4.9)
    sink.tick()
    assert visible(tmp_path) == []
    clock.advance(0.1)
    sink.tick()
    assert visible(tmp_path) == ["chunk-00000001.log"]
    clock.advance(100)
    sink.tick()
    sink.close()
    assert visible(tmp_path) == ["chunk-00000001.log"]


def test_a_new_run_continues_the_numbering(tmp_path):
    (tmp_path / "chunk-00000041.log").write_text("old\n")
    sink = ChunkDirSink(tmp_path, chunk_lines=1, clock=ManualClock())
    sink.write("new")
    sink.close()
    assert visible(tmp_path) == ["chunk-00000041.log", "chunk-00000042.log"]


def test_bad_directory_or_limits_are_rejected(tmp_path):
    file = tmp_path / "f"
    file.write_text("")
    with pytest.raises(ConfigError, match="is a file"):
        ChunkDirSink(file)
    with pytest.raises(ConfigError, match="chunk-lines"):
        ChunkDirSink(tmp_path, chunk_lines=0)
    with pytest.raises(ConfigError, match="chunk-seconds"):
        ChunkDirSink(tmp_path, chunk_seconds=0)


def test_live_replay_a_watcher_never_sees_a_partial_chunk(nasa_day, tmp_path):
    """Real time: the NASA day at speedup 57600 (1.5 s) with a watcher polling the directory."""
    out = tmp_path / "chunks"
    first_seen: dict[str, bytes] = {}
    order: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while True:
            finished = done.is_set()
            for name in visible(out) if out.exists() else []:
                if name not in first_seen:
                    first_seen[name] = (out / name).read_bytes()
                    order.append(name)
            if finished:
                return
            time.sleep(0.0005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        sink = ChunkDirSink(out, chunk_lines=4000, chunk_seconds=0.1)
        summary = replay_files([nasa_day], sink, ReplayOptions(speedup=57600))
    finally:
        done.set()
        watcher.join()

    names = visible(out)
    assert len(names) >= 10 and names == order  # appeared in name order
    for name in names:  # what the watcher first saw was the whole chunk
        assert first_seen[name] == (out / name).read_bytes(), name
    assert [n for n in os.listdir(out) if n.startswith(".")] == []
    with gzip.open(nasa_day, "rb") as fh:
        assert b"".join(first_seen[n] for n in names) == fh.read()
    assert summary.lines_sent == 35272
    assert summary.sink["chunks_written"] == len(names)
    assert 1.3 < summary.wall_seconds < 3.0
