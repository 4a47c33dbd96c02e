"""Visitor sessions over Arrow tables: :mod:`logstream.analytics.sessions` for a small
micro-batch.

:func:`session_parts` summarises events per visitor and minute, :func:`merge_sessions` merges
summaries with the open sessions by the rule of Spark's session window with a dynamic gap
(a summary ``[first_ms, last_ms]`` spans ``[first_ms, last_ms + gap)``, and spans that overlap
or touch merge; :func:`logstream.analytics.sessions.summary_session`), and splits off the
sessions the watermark closed; :func:`session_stats` gives their statistics per window with a
KLL sketch of durations in Spark's format (:mod:`.sketches`). The shapes are the Spark forms':
:data:`~logstream.analytics.sessions.SESSION_PARTS_SCHEMA` and the rows of
:func:`logstream.analytics.sessions.sessions`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from logstream.analytics.arrow.panes import timestamps
from logstream.analytics.arrow.sketches import kll_of, kll_quantile

__all__ = [
    "ARROW_PARTS_SCHEMA",
    "CLOSED_SCHEMA",
    "closed_rows",
    "merge_sessions",
    "quantiles",
    "session_parts",
    "session_stats",
    "split_closed",
]

_PAGE = pa.struct([pa.field("t_ms", pa.int64()), pa.field("page", pa.string())])
#: :data:`~logstream.analytics.sessions.SESSION_PARTS_SCHEMA` in Arrow.
ARROW_PARTS_SCHEMA = pa.schema(
    [
        pa.field("client_host", pa.string()),
        pa.field("agent", pa.string()),
        pa.field("first_ms", pa.int64()),
        pa.field("last_ms", pa.int64()),
        pa.field("requests", pa.int64()),
        pa.field("pages", pa.int64()),
        pa.field("bytes", pa.int64()),
        pa.field("entry", _PAGE),
        pa.field("exit", _PAGE),
    ]
)
#: The closed sessions' rows (:func:`logstream.analytics.sessions.sessions`' schema).
CLOSED_SCHEMA = pa.schema(
    [
        pa.field("client_host", pa.string()),
        pa.field("user_agent", pa.string()),
        pa.field("session_start", pa.timestamp("us", tz="UTC")),
        pa.field("session_end", pa.timestamp("us", tz="UTC")),
        pa.field("duration_s", pa.int64()),
        pa.field("requests", pa.int64()),
        pa.field("pages", pa.int64()),
        pa.field("bytes", pa.int64()),
        pa.field("entry_page", pa.string()),
        pa.field("exit_page", pa.string()),
        pa.field("bounce", pa.bool_()),
    ]
)
_MINUTE_MS = 60_000


def _same_as_previous(table: pa.Table, keys: list[str]) -> np.ndarray:
    """For each row of ``table`` (sorted by ``keys``), whether its keys equal the previous
    row's (nulls equal to nulls, as a grouping has them)."""
    n = table.num_rows
    same = np.zeros(n, dtype=bool)
    if n < 2:
        return same
    equal = np.ones(n - 1, dtype=bool)
    for key in keys:
        column = table[key]
        a, b = column[1:], column[:-1]
        eq = pc.fill_null(pc.equal(a, b), False)
        both_null = pc.and_(pc.is_null(a), pc.is_null(b))
        equal &= pc.or_(eq, both_null).to_numpy(zero_copy_only=False)
    same[1:] = equal
    return same


def _extreme_per_group(
    group: np.ndarray, t_ms: pa.ChunkedArray, page: pa.ChunkedArray, groups: int, last: bool
) -> pa.ChunkedArray:
    """Per group id (0 … ``groups`` − 1), the smallest (``last``: largest) ``(t_ms, page)``
    of its rows with both, as a struct column (null for a group without one)."""
    candidates = pa.table({"g": group, "t_ms": t_ms, "page": page}).filter(
        pc.and_(pc.is_valid(t_ms), pc.is_valid(page))
    )
    order = "descending" if last else "ascending"
    ordered = candidates.sort_by([("g", "ascending"), ("t_ms", order), ("page", order)])
    ids = ordered["g"].to_numpy()
    found, first = np.unique(ids, return_index=True)
    t_out = np.zeros(groups, dtype=np.int64)
    valid = np.zeros(groups, dtype=bool)
    t_out[found] = ordered["t_ms"].to_numpy()[first]
    valid[found] = True
    # each group's row of `ordered` (null where it has none): the page as its bytes are
    rows = np.zeros(groups, dtype=np.int64)
    rows[found] = first
    pages = ordered["page"].take(pa.array(rows, mask=~valid))
    if isinstance(pages, pa.ChunkedArray):
        pages = pages.combine_chunks()
    return pa.chunked_array(
        [
            pa.StructArray.from_arrays(
                [pa.array(t_out), pages], fields=list(_PAGE), mask=pa.array(~valid)
            )
        ]
    )


def _sums(values: np.ndarray, starts: np.ndarray, op: np.ufunc = np.add) -> np.ndarray:
    """``op.reduceat`` of ``values`` over the groups beginning at ``starts``."""
    if not len(starts):
        return np.zeros(0, dtype=np.int64)
    return op.reduceat(values, starts)


def session_parts(events: pa.Table) -> pa.Table:
    """Per-visitor, per-minute summaries (:func:`logstream.analytics.sessions.session_parts`).

    Parameters
    ----------
    events : pyarrow.Table
        ``client_host``, ``user_agent``, ``url_path`` (string), ``t_ms`` (int64, epoch ms),
        ``bytes_sent`` (int64), ``is_page`` (bool).

    Returns
    -------
    pyarrow.Table
        :data:`ARROW_PARTS_SCHEMA`, one row per (``client_host``, ``agent``, minute).
    """
    if not events.num_rows:
        return ARROW_PARTS_SCHEMA.empty_table()
    t_ms = pc.fill_null(events["t_ms"], 0).to_numpy()
    is_page = pc.fill_null(events["is_page"], False)
    keyed = pa.table(
        {
            "client_host": events["client_host"],
            "agent": pc.fill_null(events["user_agent"], ""),
            "minute": t_ms - np.mod(t_ms, _MINUTE_MS),
            "t_ms": t_ms,
            "page": pc.if_else(is_page, events["url_path"], pa.scalar(None, pa.string())),
            "bytes": pc.fill_null(events["bytes_sent"], 0),
        }
    )
    keys = ["client_host", "agent", "minute"]
    keyed = keyed.sort_by([*((k, "ascending") for k in keys), ("t_ms", "ascending")])
    new = ~_same_as_previous(keyed, keys)
    starts = np.flatnonzero(new)
    group = np.cumsum(new) - 1
    t = keyed["t_ms"].to_numpy()
    pages = pc.cast(pc.is_valid(keyed["page"]), pa.int64()).to_numpy()
    n_groups = len(starts)
    return pa.table(
        [
            keyed["client_host"].take(pa.array(starts)),
            keyed["agent"].take(pa.array(starts)),
            pa.array(_sums(t, starts, np.minimum)),
            pa.array(_sums(t, starts, np.maximum)),
            pa.array(np.diff(np.r_[starts, keyed.num_rows]).astype(np.int64)),
            pa.array(_sums(pages, starts)),
            pa.array(_sums(keyed["bytes"].to_numpy(), starts)),
            _extreme_per_group(group, keyed["t_ms"], keyed["page"], n_groups, last=False),
            _extreme_per_group(group, keyed["t_ms"], keyed["page"], n_groups, last=True),
        ],
        schema=ARROW_PARTS_SCHEMA,
    )


def merge_sessions(parts: pa.Table, open_sessions: pa.Table, gap_ms: int) -> pa.Table:
    """Summaries and open sessions merged into sessions
    (:func:`logstream.analytics.sessions.merged_sessions`), closed or not.

    Parameters
    ----------
    parts, open_sessions : pyarrow.Table
        :data:`ARROW_PARTS_SCHEMA` rows.
    gap_ms : int
        Inactivity timeout, ms.

    Returns
    -------
    pyarrow.Table
        :data:`ARROW_PARTS_SCHEMA`, one row per session: first and last request, totals,
        the smallest ``entry`` and largest ``exit`` of its summaries.
    """
    both = pa.concat_tables(
        [parts.cast(ARROW_PARTS_SCHEMA), open_sessions.cast(ARROW_PARTS_SCHEMA)]
    )
    if not both.num_rows:
        return both
    keys = ["client_host", "agent"]
    both = both.sort_by([*((k, "ascending") for k in keys), ("first_ms", "ascending")])
    same = _same_as_previous(both, keys)
    visitor = np.cumsum(~same) - 1
    first = pc.fill_null(both["first_ms"], 0).to_numpy()
    reach = pc.fill_null(both["last_ms"], 0).to_numpy() + gap_ms
    # the reach of the session so far, per visitor: a running maximum that restarts at each
    # visitor (offset by the visitor's number, so that one maximum serves them all); a
    # summary starting beyond it starts a session (spans that touch merge, as Spark's do)
    base = int(min(first.min(), reach.min()))
    span = int(max(first.max(), reach.max())) - base + 1
    running = np.maximum.accumulate(visitor.astype(np.int64) * span + (reach - base))
    previous = np.r_[np.int64(-1), running[:-1]]
    new = ~same | (visitor * span + (first - base) > previous)
    starts = np.flatnonzero(new)
    session = np.cumsum(new) - 1
    n = len(starts)

    def extreme(column: str, last: bool) -> pa.ChunkedArray:
        struct = both[column]
        return _extreme_per_group(
            session,
            pc.struct_field(struct, "t_ms"),
            pc.struct_field(struct, "page"),
            n,
            last,
        )

    return pa.table(
        [
            both["client_host"].take(pa.array(starts)),
            both["agent"].take(pa.array(starts)),
            pa.array(_sums(first, starts, np.minimum)),
            pa.array(_sums(pc.fill_null(both["last_ms"], 0).to_numpy(), starts, np.maximum)),
            pa.array(_sums(pc.fill_null(both["requests"], 0).to_numpy(), starts)),
            pa.array(_sums(pc.fill_null(both["pages"], 0).to_numpy(), starts)),
            pa.array(_sums(pc.fill_null(both["bytes"], 0).to_numpy(), starts)),
            extreme("entry", last=False),
            extreme("exit", last=True),
        ],
        schema=ARROW_PARTS_SCHEMA,
    )


def split_closed(merged: pa.Table, gap_ms: int, watermark_ms: int) -> tuple[pa.Table, pa.Table]:
    """``(closed, still_open)`` of :func:`merge_sessions`' sessions: closed when
    ``last_ms + gap_ms <= watermark_ms`` (:func:`logstream.analytics.sessions.split_sessions`)."""
    done = pc.less_equal(pc.add(merged["last_ms"], gap_ms), watermark_ms)
    return merged.filter(done), merged.filter(pc.invert(done))


def closed_rows(sessions: pa.Table) -> pa.Table:
    """Merged sessions as :data:`CLOSED_SCHEMA` rows (the Spark form's ``_closed_sessions``)."""
    first = sessions["first_ms"].to_numpy()
    last = sessions["last_ms"].to_numpy()
    agent = sessions["agent"]
    return pa.table(
        [
            sessions["client_host"],
            pc.if_else(pc.not_equal(agent, ""), agent, pa.scalar(None, pa.string())),
            timestamps(sessions["first_ms"]),
            timestamps(sessions["last_ms"]),
            pa.array(np.floor_divide(last, 1000) - np.floor_divide(first, 1000)),
            sessions["requests"],
            sessions["pages"],
            sessions["bytes"],
            pc.struct_field(sessions["entry"], "page"),
            pc.struct_field(sessions["exit"], "page"),
            pc.less_equal(sessions["pages"], 1),
        ],
        schema=CLOSED_SCHEMA,
    )


def session_stats(closed: pa.Table, window_ms: int) -> list[tuple[int, int, int, int, int, bytes]]:
    """Statistics of closed sessions per tumbling window of session start
    (:func:`logstream.analytics.sessions.session_stats_per_window`).

    Parameters
    ----------
    closed : pyarrow.Table
        :data:`CLOSED_SCHEMA` rows.
    window_ms : int
        The window's length, ms (windows aligned on the epoch).

    Returns
    -------
    list of tuple
        ``(window_start_ms, window_end_ms, sessions, bounces, pages, sketch)`` per window
        with sessions, ``sketch`` the KLL sketch of ``duration_s`` in Spark's format.
    """
    if not closed.num_rows:
        return []
    start = pc.cast(closed["session_start"], pa.int64()).to_numpy() // 1000  # µs → ms
    window = start - np.mod(start, window_ms)
    durations = closed["duration_s"].to_numpy()
    bounces = closed["bounce"].to_numpy(zero_copy_only=False)
    pages = pc.fill_null(closed["pages"], 0).to_numpy()
    out = []
    for w in np.unique(window).tolist():
        rows = window == w
        out.append(
            (
                int(w),
                int(w) + window_ms,
                int(rows.sum()),
                int(bounces[rows].sum()),
                int(pages[rows].sum()),
                kll_of(durations[rows].tolist()),
            )
        )
    return out


def quantiles(sketch: bytes) -> tuple[int | None, int | None]:
    """The median and p95 duration (s) of a statistics window's sketch
    (:func:`logstream.analytics.sessions.duration_quantiles`)."""
    return kll_quantile(sketch, 0.5), kll_quantile(sketch, 0.95)
