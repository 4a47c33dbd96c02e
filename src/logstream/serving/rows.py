"""The rows the serving store's reader returns (:mod:`logstream.serving.reader`).

Plain values, one per table row or per aggregate a panel reads: dataclasses for the rows the
dashboard lists (alerts, bot scores, sessions, session statistics), named tuples for the
rows of the ledger and the bucketed or summed aggregates. Times are ISO 8601 UTC text as in
the store; epoch seconds are named so (``t``). Nothing here opens a connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "Alert",
    "BotScore",
    "BotTotals",
    "ClientRow",
    "ClientTotals",
    "DimensionBucket",
    "LedgerRow",
    "Session",
    "SessionWindow",
    "TrafficBucket",
    "VisitorBucket",
]


class LedgerRow(NamedTuple):
    """A row of ``ledger``: a committed micro-batch of a query."""

    rowid: int  #: order of commit
    query: str
    batch_id: int
    committed_at: str  #: wall clock, ISO UTC


class TrafficBucket(NamedTuple):
    """``traffic_per_minute`` summed over the windows starting in one bucket."""

    t: int  #: bucket start, epoch seconds
    requests: int
    bytes: int
    status_1xx: int
    status_2xx: int
    status_3xx: int
    status_4xx: int
    status_5xx: int
    errors: int  #: requests with status ≥ 400


class VisitorBucket(NamedTuple):
    """``unique_visitors`` of the windows starting in one bucket."""

    t: int  #: bucket start, epoch seconds
    mean: float  #: mean of the windows' HLL estimates
    peak: int  #: largest estimate


class DimensionBucket(NamedTuple):
    """``traffic_by_dimension`` requests of one key summed over one bucket."""

    t: int  #: bucket start, epoch seconds
    key: str
    requests: int


class ClientRow(NamedTuple):
    """A client of a ``top_clients`` window."""

    client_host: str
    requests: int
    bytes: int


class ClientTotals(NamedTuple):
    """Every client of a ``top_clients`` window, summed."""

    clients: int
    requests: int
    bytes: int


class BotTotals(NamedTuple):
    """``bot_windows`` summed over the final client windows of a range."""

    windows: int  #: final client windows scored
    clients: int  #: client windows scored
    bots: int  #: client windows flagged
    bot_requests: int
    requests: int


@dataclass
class Alert:
    """One anomaly alert (a row of ``alerts``): a minute ``z`` deviations from the running
    mean of its series.

    ``value``, ``mean`` and ``std`` are requests per minute for the metric ``requests`` and a
    fraction (0–1) of server errors for ``error_rate``.
    """

    window_start: str  #: the minute, ISO UTC
    window_end: str
    series: str  #: ``site`` or a page path
    metric: str  #: ``requests`` or ``error_rate``
    value: float
    mean: float
    std: float
    z: float
    direction: str  #: ``spike`` or ``drop``


@dataclass
class BotScore:
    """A client window a bot model flagged (a row of ``bot_scores``)."""

    window_start: str
    window_end: str
    client_host: str
    requests: int
    bot_probability: float  #: P(bot), 0–1
    distinct_pages: float
    error_ratio: float  #: 0–1
    static_share: float  #: 0–1
    robots: float  #: 1 when robots.txt was fetched
    model_version: str


@dataclass
class SessionWindow:
    """Statistics of the sessions that started in one window (a row of ``session_stats``)."""

    window_start: str
    window_end: str
    sessions: int
    bounces: int  #: sessions with at most one page
    pages: int  #: pages viewed, summed over the sessions
    median_duration_s: int | None  #: KLL estimate
    p95_duration_s: int | None  #: KLL estimate

    @property
    def bounce_rate(self) -> float | None:
        """Bounces as a percentage of the sessions (None without sessions)."""
        return 100.0 * self.bounces / self.sessions if self.sessions else None


@dataclass
class Session:
    """One closed session (a row of ``sessions``)."""

    client_host: str
    user_agent: str | None
    session_start: str
    session_end: str
    duration_s: int
    requests: int
    pages: int
    bytes: int
    entry_page: str | None
    exit_page: str | None
    bounce: bool
