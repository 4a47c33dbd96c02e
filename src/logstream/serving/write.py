"""What one ingest micro-batch writes to the serving store: :class:`IngestBatchWrite`.

The pipeline's ingest stage fills one per micro-batch (:mod:`logstream.pipeline.ingest`) and
hands it to :meth:`logstream.serving.ServingStore.commit_ingest_batch` (and, for its windows,
:meth:`~logstream.serving.ServingStore.commit_ingest_views`). Nothing here opens a connection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["IngestBatchWrite"]


@dataclass
class IngestBatchWrite:
    """What one ingest micro-batch adds to the store (all counts for that batch only).

    Times are ISO 8601 UTC text; ``max_event_time_ms`` is epoch milliseconds or None when
    the batch had no event.
    """

    batch_id: int
    events: int = 0
    late_events: int = 0
    quarantined: int = 0
    #: lines the run's filter left out (--since, --until, --filter, --grep: logstream.filters)
    filtered: int = 0
    corrupt_files: int = 0  #: input files that could not be read to their end
    max_event_time_ms: int | None = None
    traffic: list[tuple[Any, ...]] = field(default_factory=list)  # in TRAFFIC_COLS order
    pages: list[tuple[str, str, str, int]] = field(default_factory=list)
    clients: list[tuple[str, str, str, int, int]] = field(default_factory=list)
    visitors: list[tuple[str, str, int, bytes | None]] = field(default_factory=list)  # merged
    late_examples: list[tuple[Any, ...]] = field(default_factory=list)
    quarantine_examples: list[tuple[Any, ...]] = field(default_factory=list)
    sessions_closed: int = 0  #: sessions the micro-batch closed
    sessions: list[tuple[Any, ...]] = field(default_factory=list)  # latest closed, oldest first
    session_stats: list[tuple[Any, ...]] = field(default_factory=list)  # merged, replace
    alerts: list[tuple[Any, ...]] = field(default_factory=list)  # series … direction
    #: the most likely bots of the client windows final in this batch: (window_start,
    #: window_end, client_host, requests, bot_probability, distinct_pages, error_ratio,
    #: static_share, robots, model_version), most likely first
    bots: list[tuple[Any, ...]] = field(default_factory=list)
    #: per final client window: (window_start, window_end, clients, bots, bot_requests,
    #: requests)
    bot_windows: list[tuple[Any, ...]] = field(default_factory=list)
    #: merged traffic of the dimension views: (dimension, key, *TRAFFIC_COLS)
    dimensions: list[tuple[Any, ...]] = field(default_factory=list)
    #: merged days of GoAccess's visitors panel: (day, window_start, window_end, requests,
    #: visitors, bytes)
    daily_visitors: list[tuple[Any, ...]] = field(default_factory=list)
    reference_versions: dict[str, str] | None = None  #: {table kind: SHA-256} of the batch
    prune_trending_before: str | None = None  # drop trending and client windows ending ≤
    final_before: str | None = None  # windows ending at or before are final
    #: the windows (and the newest event time) were written by
    #: :meth:`ServingStore.commit_ingest_views`, ahead of the rest of the micro-batch
    views_committed: bool = False
