"""Refreshes of many pages share one read and one drawing per store version
(logstream.dashboard.shared): what they share and what stays each refresh's own."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from logstream.dashboard import data
from logstream.dashboard.app import refresh_outputs
from logstream.dashboard.data import Filters, read_snapshot
from logstream.dashboard.shared import SharedResults
from tests.dashboard.helpers import commit, filled_store, traffic_row


def counting_reads(monkeypatch) -> list[int]:
    """Count the full reads of the panels (``data._ok``) from now on."""
    calls: list[int] = []
    real = data._ok

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(data, "_ok", counted)
    return calls


def test_twenty_pages_of_one_version_read_the_panels_once(tmp_path, monkeypatch):
    store = filled_store(tmp_path / "s.db")
    reads = counting_reads(monkeypatch)
    shared = SharedResults()
    outs: list[tuple] = []

    def page() -> None:
        outs.append(refresh_outputs(tmp_path / "s.db", "all", "", None, shared=shared))

    pages = [threading.Thread(target=page) for _ in range(20)]
    for p in pages:
        p.start()
    for p in pages:
        p.join()
    assert len(outs) == 20 and len(reads) == 1
    alone = refresh_outputs(tmp_path / "s.db", "all", "", None)  # nothing shared
    assert len(reads) == 2
    for out in outs:
        assert out[3] == alone[3]  # the same version and controls
        assert [repr(x) for x in out[4:]] == [repr(x) for x in alone[4:]]

    # other controls: their own read; a new micro-batch: read again, and its numbers shown
    prefix = refresh_outputs(tmp_path / "s.db", "all", "/b/", None, shared=shared)
    assert len(reads) == 3 and prefix[3] != outs[0][3]
    before = read_snapshot(tmp_path / "s.db", Filters.build("all"), shared=shared)
    assert len(reads) == 3  # the same version and controls as the 20 pages: shared
    commit(store, 1, traffic=[traffic_row(60, 7)])
    after = read_snapshot(tmp_path / "s.db", Filters.build("all"), shared=shared)
    assert len(reads) == 4 and after.version != before.version
    assert after.traffic.total_requests == before.traffic.total_requests + 7


def test_the_wall_clock_part_is_each_reads_own(tmp_path):
    filled_store(tmp_path / "s.db")
    shared = SharedResults()
    late = datetime.now(UTC) + timedelta(minutes=10)  # ten minutes after the commit
    first = read_snapshot(tmp_path / "s.db", now=late, stale_after_s=600, shared=shared)
    again = read_snapshot(tmp_path / "s.db", now=late, stale_after_s=10**9, shared=shared)
    assert first.version == again.version and first.traffic == again.traffic
    assert first.stale and "No micro-batch committed for" in first.stale
    assert again.stale is None
    assert first.read_at == late.strftime("%H:%M:%S UTC")
