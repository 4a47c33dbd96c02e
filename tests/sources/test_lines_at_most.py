"""A backfill's micro-batch is sized on the driver by its files' newlines
(:func:`logstream.sources.files.lines_at_most`) before Spark reads it."""

from __future__ import annotations

import bz2
import gzip

from logstream.sources.files import lines_at_most


def test_the_newlines_of_plain_and_compressed_files_are_counted_together(tmp_path, nasa_day):
    day = "\n".join(nasa_day.read_text(encoding="latin-1").split("\n")[:1000]) + "\n"
    plain = tmp_path / "a.log"
    plain.write_text(day)
    packed = tmp_path / "b.log.gz"
    packed.write_bytes(gzip.compress(day.encode()))
    squeezed = tmp_path / "c.log.bz2"
    squeezed.write_bytes(bz2.compress(day.encode()))
    files = [str(plain), str(packed), f"file://{squeezed}"]
    assert lines_at_most(files, 3000) is True
    assert lines_at_most(files, 2999) is False


def test_a_last_line_without_a_newline_counts(tmp_path):
    log = tmp_path / "a.log"
    log.write_text("one\ntwo")
    assert lines_at_most([str(log)], 2) is True
    assert lines_at_most([str(log)], 1) is False


def test_files_it_cannot_read_here_leave_the_count_to_spark(tmp_path):
    assert lines_at_most(["hdfs://namenode/logs/a.log"], 10) is None
    assert lines_at_most([str(tmp_path / "gone.log")], 10) is None
    assert lines_at_most([str(tmp_path / "a.log.zst")], 10) is None
    broken = tmp_path / "cut.log.gz"
    lines = b"".join(b"%d\n" % (i * 7919 % 100_003) for i in range(100_000))
    broken.write_bytes(gzip.compress(lines)[:2000])  # cut short, as a copy taken mid-write
    assert lines_at_most([str(broken)], 100_000) is None
