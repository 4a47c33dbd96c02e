"""The driver's sessions (:meth:`logstream.report.driver.DriverRows.sessions`: one sort, running
maxima packed in an int64, segment reductions) against a plain Python sessionization of the
same visit summaries: generated visitors whose summaries overlap, tie, nest and sit exactly a
gap apart, with other views' rows between them."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from logstream.report.driver import DriverRows

GAP_S = 1800
_MS = st.integers(min_value=0, max_value=6 * GAP_S * 1000)


def _plain(visits: list[tuple[int, int, int, int]], gap_s: int) -> dict:
    """Sessions by hand: a visitor's summaries by start, one session while a summary starts at
    most ``gap_s`` after the latest end so far."""
    sessions: list[tuple[int, int, int]] = []  # (start, end, pages)
    by_user: dict[int, list[tuple[int, int, int]]] = {}
    for user, first, last, pages in visits:
        by_user.setdefault(user, []).append((first, last, pages))
    for summaries in by_user.values():
        start = end = pages = None
        for first, last, n in sorted(summaries, key=lambda s: s[0]):
            if start is not None and first <= end + gap_s * 1000:
                end, pages = max(end, last), pages + n
                continue
            if start is not None:
                sessions.append((start, end, pages))
            start, end, pages = first, last, n
        sessions.append((start, end, pages))
    seconds = sorted(e // 1000 - s // 1000 for s, e, _ in sessions)
    count = len(seconds)
    return {
        "sessions": count,
        "median_duration_s": seconds[max(0, -(-count // 2) - 1)],
        "p95_duration_s": seconds[max(0, -(-count * 19 // 20) - 1)],
        "bounce_rate": round(sum(p <= 1 for *_, p in sessions) / count, 6),
        "pages_per_session": round(sum(p for *_, p in sessions) / count, 3),
    }


def _rows(visits: list[tuple[int, int, int, int]], others: int) -> pa.Table:
    views = ["visit"] * len(visits) + ["hour"] * others
    columns = {
        "view": views,
        "l1": [u for u, *_ in visits] + [7] * others,
        "first_ms": [f for _, f, _, _ in visits] + [0] * others,
        "last_ms": [last for _, _, last, _ in visits] + [0] * others,
        "pages": [p for *_, p in visits] + [3] * others,
    }
    schema = pa.schema(
        [("view", pa.string())] + [(c, pa.int64()) for c in ("l1", "first_ms", "last_ms", "pages")]
    )
    table = pa.table(columns, schema=schema).take(list(range(len(views)))[::-1])
    # the rows as Spark's Arrow collect leaves them: several batches, views interleaved
    return pa.Table.from_batches(table.to_batches(max_chunksize=3), schema=schema)


@st.composite
def _visits(draw: st.DrawFn) -> list[tuple[int, int, int, int]]:
    out = []
    users = draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=6, unique=True))
    for user in users:
        for _ in range(draw(st.integers(1, 8))):
            first = draw(_MS)
            # a summary lasts less than the gap (its requests lie within a half-hour)
            length = draw(st.integers(0, GAP_S * 1000 - 1))
            out.append((user, first, first + length, draw(st.integers(0, 4))))
    # exact gaps: a summary starting at an end plus the gap, and one a millisecond past it
    user, first, last, _ = out[0]
    out += [(user, last + GAP_S * 1000, last + GAP_S * 1000, 1)]
    late = 10**9 + 5 + GAP_S * 1000 + 1
    out += [(users[-1], 10**9, 10**9 + 5, 0), (users[-1], late, late + 4, 2)]
    return out


@settings(max_examples=200, deadline=None)
@given(_visits(), st.integers(0, 4))
def test_driver_sessions_equal_a_plain_sessionization(visits, others):
    got = DriverRows(_rows(visits, others)).sessions(GAP_S)
    assert got == {"gap_s": GAP_S, **_plain(visits, GAP_S)}


def test_no_visits_no_sessions():
    got = DriverRows(_rows([], 3)).sessions(GAP_S)
    assert got["sessions"] == 0 and got["median_duration_s"] is None
