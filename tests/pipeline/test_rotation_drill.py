"""The rotation drill's short form: Debian's ``logrotate`` rotates a followed log three times
while a writer appends 4,000 real NASA lines (some in two writes), the pipeline is SIGKILLed
once and restarted. ``python bench/drill_rotation.py`` is the long form (150,000 lines, six
rotations per mode)."""

from __future__ import annotations

import pytest
from tests.conftest import DATA_DIR
from tests.pipeline.helpers import load_bench


def load_drill():
    return load_bench("drill_rotation")


def test_the_writers_ledger_names_the_lines_logrotate_lost():
    """The drill's own accounting, on a ledger built by hand: generation 0 was copied at 250
    bytes and truncated at 330; line 2 ended past the copy, line 3 was cut by the truncation."""
    drill = load_drill()
    ledger = {
        "gen": [0, 0, 0, 1, 1],
        "end": [100, 200, 300, 20, 120],
        "cut": [False, False, False, True, False],
        "sizes": [330, 120],
        "heads": [[0, 330, 30]],
    }
    lost, lost_bytes, cut = drill.logrotate_losses(["l"] * 5, ledger, [250])
    assert (lost, lost_bytes, cut) == ([2, 3], 80, 1)


@pytest.mark.parametrize("mode", ["create", "copytruncate"])
def test_every_line_is_accounted_for_under_logrotate(spark, tmp_path, monkeypatch, mode):
    monkeypatch.setenv("LOGSTREAM_DATA_DIR", str(DATA_DIR))
    drill = load_drill()
    result = drill.drill(
        spark,
        mode,
        lines=4000,
        rate=800.0,
        rotations=3,
        kills=1,
        seed=7,
        work=tmp_path,
        queries="none",
    )
    assert result.kill_moments_s, result
    assert result.counted_twice == 0, result
    if mode == "create":
        assert result.missing == 0, result
        assert result.events + result.late_events == 4000, result
    else:
        assert len(result.copy_sizes) == 3, result
        # each copytruncate of a file the pipeline had read from is one truncation (a last
        # rotation after the writer stopped may copy an empty file); so is an access.log.1
        # whose inode the next copy reused (the old one deleted when compressed): a file
        # rewritten in place under its name
        copies = sum(size > 0 for size in result.copy_sizes)
        assert 1 <= result.reported_truncations <= copies + result.reused_inodes, result
        # only what logrotate itself lost between its copy and its truncation is missing
        assert result.missing_not_lost_by_logrotate == 0, result
        assert result.missing <= result.lost_by_logrotate, result
        assert result.reported_lost_bytes <= result.lost_bytes_by_logrotate, result
    assert result.exact, result
