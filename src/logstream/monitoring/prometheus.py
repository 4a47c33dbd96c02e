"""Prometheus metrics of a running pipeline, read from the serving store at each scrape.

The dashboard serves them at ``/metrics/prometheus/`` (the path of Spark's own
``PrometheusServlet``), so one scrape target on the dashboard host has logstream's counters and
the streaming metrics of every query, whichever machine runs the Spark driver: the store is
the only thing the two share (SQLite on one machine, PostgreSQL on a cluster). Spark's driver
metrics (JVM, executors, ``spark_streaming_<query>_*`` gauges) stay on the driver's UI port at
the same path (:func:`logstream.session.session_conf` switches the servlet on).

Metrics (``prometheus_client`` text format 0.0.4; Prometheus docs, "Metric types")
-------------------------------------------------------------------------------------

=========================================  =======  ===========================================
name                                       type     meaning
=========================================  =======  ===========================================
``logstream_up``                           gauge    1 when the store could be read, else 0
``logstream_events_total``                 counter  on-time events delivered
``logstream_late_events_total``            counter  events behind the watermark (``late_events``)
``logstream_quarantined_lines_total``      counter  unparseable lines (``quarantine``)
``logstream_filtered_lines_total``         counter  lines ``run``'s filter left out (``--filter``)
``logstream_corrupt_files_total``          counter  input files cut short
``logstream_duplicates_dropped_total``     counter  re-sent lines dropped (``--dedup``)
``logstream_micro_batches_total``          counter  micro-batches committed (the store's ledger)
``logstream_input_rows_per_second``        gauge    by ``query``: input rate of the latest
                                                    micro-batch (Spark's progress), rows/s
``logstream_processed_rows_per_second``    gauge    by ``query``: processing rate, rows/s
``logstream_batch_duration_seconds``       gauge    by ``query``: latest micro-batch, seconds
``logstream_input_rows``                   gauge    by ``query``: rows of the latest micro-batch
``logstream_state_rows``                   gauge    by ``query``: state rows (Spark's state
                                                    store, and for ``ingest`` the open panes,
                                                    sessions and series of the analytics state)
``logstream_latest_batch_id``              gauge    by ``query``
``logstream_max_event_time_seconds``       gauge    newest event time, Unix seconds
``logstream_watermark_seconds``            gauge    event-time watermark, Unix seconds
``logstream_follow_lost_bytes``            gauge    bytes of followed files lost to rotation
                                                    (``--follow``; docs/follow.md)
``logstream_follow_lost_lines``            gauge    lines lost to rotation (an estimate)
``logstream_follow_lost_files``            gauge    files gone before they were read whole
``logstream_follow_truncations``           gauge    truncations of followed files seen
``logstream_kafka_offset``                 gauge    by ``topic``, ``partition``: the offset the
                                                    Kafka source read to (``--kafka``)
``logstream_kafka_lag``                    gauge    by ``topic``, ``partition``: messages
                                                    published but not read yet
``logstream_kafka_lost_messages``          gauge    messages deleted before they were read
                                                    (``--allow-data-loss``; docs/kafka.md)
=========================================  =======  ===========================================

The follow gauges are running totals, exported only when the store records them (a run with
``--follow``); they are gauges, not counters, because a new checkpoint starts them again.

A store that does not exist yet, or whose tables are being created, gives ``logstream_up 0``
and nothing in the log: the pipeline has not started. Any other failure (a malformed store
reference, a file that is not a store, a database that refuses the connection) also gives
``logstream_up 0``, and is logged as a warning once, when it starts or changes, not at every
scrape.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from logstream.serving.schema import FOLLOW_LOSS_KEYS, FOLLOW_LOSSES

if TYPE_CHECKING:
    from flask import Flask

    from logstream.serving import ServingStore, StoreReader

__all__ = ["METRICS_PATH", "StoreCollector", "add_metrics_route", "scrape"]

log = logging.getLogger(__name__)

#: Where the dashboard serves the metrics (the path of Spark's ``PrometheusServlet``).
METRICS_PATH = "/metrics/prometheus/"

_COUNTERS = (
    ("events", "logstream_events", "On-time events delivered."),
    ("late_events", "logstream_late_events", "Events behind the watermark (late_events)."),
    ("quarantined", "logstream_quarantined_lines", "Unparseable lines sent to quarantine."),
    ("filtered", "logstream_filtered_lines", "Lines the run's filter left out (counted)."),
    ("corrupt_files", "logstream_corrupt_files", "Input files that could not be read whole."),
    ("duplicates", "logstream_duplicates_dropped", "Re-sent lines dropped by --dedup."),
)


class StoreCollector(Collector):
    """A ``prometheus_client`` collector reading the serving store at each scrape.

    Parameters
    ----------
    store : Path or str
        The SQLite file, a ``sqlite:///PATH`` URL or a ``postgresql://`` URL. A store that
        does not exist yet (the pipeline has not started) gives ``logstream_up 0``.
    """

    def __init__(self, store: Path | str) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._problem: str | None = None  #: the failure last logged (None: none since)

    def collect(self) -> Iterator[Metric]:
        """Yield the metrics of the module table (only ``logstream_up`` when unreadable)."""
        up = GaugeMetricFamily("logstream_up", "1 when the serving store could be read.")
        try:
            metrics = list(self._read())
        except Exception as exc:
            self._report(exc)
            up.add_metric([], 0)
            yield up
            return
        self._report(None)
        up.add_metric([], 1 if metrics else 0)
        yield up
        yield from metrics

    def _report(self, exc: Exception | None) -> None:
        """Log a failure to read the store once, when it starts or changes (a store not
        created yet is no failure), and once when the store is readable again."""
        from logstream.serving.postgres import redact_url
        from logstream.serving.store import missing_schema

        shown = redact_url(str(self.store))
        problem = None
        if exc is not None and not missing_schema(exc):  # no tables yet: being created
            problem = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        with self._lock:
            previous, self._problem = self._problem, problem
        if problem is not None and problem != previous:
            log.warning("/metrics/prometheus/: cannot read the store %s (%s)", shown, problem)
        elif problem is None and previous is not None and exc is None:
            log.warning("/metrics/prometheus/: the store %s is readable again", shown)

    def _read(self) -> Iterator[Metric]:
        """The metrics; nothing when the SQLite file does not exist yet."""
        from logstream.serving import open_store, shared_reader, store_location

        where = store_location(self.store)  # every form of --store, or a ConfigError
        if isinstance(where, str):  # the process's pool, shared with the dashboard
            yield from self._metrics(shared_reader(where))
            return
        if not where.expanduser().exists():  # the pipeline has not created it yet
            return
        store = open_store(where, read_only=True)
        try:
            yield from self._metrics(store)
        finally:
            store.close()

    def _metrics(self, store: ServingStore) -> Iterator[Metric]:
        with store.reader() as read:  # one read transaction: one state of the store
            yield from self._metrics_of(read)

    def _metrics_of(self, read: StoreReader) -> Iterator[Metric]:
        counters = read.counters()
        for key, name, doc in _COUNTERS:
            family = CounterMetricFamily(name, doc)
            family.add_metric([], counters.get(key, 0) or 0)
            yield family
        batches = read.batches_committed()
        family = CounterMetricFamily(
            "logstream_micro_batches", "Micro-batches committed to the store."
        )
        family.add_metric([], batches)
        yield family

        analytics_rows = int(read.state_value("analytics_state_rows") or 0)
        gauges = {
            "input_rows_per_s": GaugeMetricFamily(
                "logstream_input_rows_per_second",
                "Input rate of the latest micro-batch, rows/s.",
                labels=["query"],
            ),
            "processed_rows_per_s": GaugeMetricFamily(
                "logstream_processed_rows_per_second",
                "Processing rate of the latest micro-batch, rows/s.",
                labels=["query"],
            ),
            "batch_duration_ms": GaugeMetricFamily(
                "logstream_batch_duration_seconds",
                "Duration of the latest micro-batch, seconds.",
                labels=["query"],
            ),
            "num_input_rows": GaugeMetricFamily(
                "logstream_input_rows", "Rows of the latest micro-batch.", labels=["query"]
            ),
            "state_rows": GaugeMetricFamily(
                "logstream_state_rows",
                "State rows: Spark's state store, plus the analytics state for ingest.",
                labels=["query"],
            ),
            "batch_id": GaugeMetricFamily(
                "logstream_latest_batch_id", "Latest micro-batch id.", labels=["query"]
            ),
        }
        for row in read.latest_progress():
            query = row["query"]
            state_rows = (row["state_rows"] or 0) + (analytics_rows if query == "ingest" else 0)
            values = {
                "input_rows_per_s": row["input_rows_per_s"] or 0.0,
                "processed_rows_per_s": row["processed_rows_per_s"] or 0.0,
                "batch_duration_ms": (row["batch_duration_ms"] or 0) / 1000,
                "num_input_rows": row["num_input_rows"] or 0,
                "state_rows": state_rows,
                "batch_id": row["batch_id"],
            }
            for key, family in gauges.items():
                family.add_metric([query], values[key])
        yield from gauges.values()

        newest_ms = read.state_value("max_event_time_ms")
        if newest_ms is not None:
            newest = GaugeMetricFamily(
                "logstream_max_event_time_seconds", "Newest event time, Unix seconds."
            )
            newest.add_metric([], int(newest_ms) / 1000)
            yield newest
            delay_ms = read.state_value("watermark_delay_ms")
            if delay_ms is not None:
                watermark = GaugeMetricFamily(
                    "logstream_watermark_seconds", "Event-time watermark, Unix seconds."
                )
                watermark.add_metric([], (int(newest_ms) - float(delay_ms)) / 1000)
                yield watermark

        losses = read.follow_losses()
        if losses:
            # a gauge per total: logstream_ and its key (logstream_follow_lost_bytes)
            for (_, doc), key in zip(FOLLOW_LOSSES.items(), FOLLOW_LOSS_KEYS, strict=True):
                family = GaugeMetricFamily(f"logstream_{key}", doc)
                family.add_metric([], losses.get(key, 0))
                yield family

        yield from _kafka_gauges(read.state())


def _kafka_gauges(state: dict[str, str]) -> Iterator[Metric]:
    """The Kafka source's offset and lag per partition, and its lost messages (nothing
    without a Kafka source)."""
    from logstream.monitoring.kafka import kafka_source

    kafka = kafka_source(state)
    if kafka is None:
        return
    offset = GaugeMetricFamily(
        "logstream_kafka_offset",
        "Offset the Kafka source read to.",
        labels=["topic", "partition"],
    )
    lag = GaugeMetricFamily(
        "logstream_kafka_lag",
        "Kafka messages published but not read yet.",
        labels=["topic", "partition"],
    )
    for p in kafka.get("partitions") or []:
        labels = [str(kafka.get("topic")), str(p["partition"])]
        offset.add_metric(labels, p["offset"])
        if p.get("lag") is not None:
            lag.add_metric(labels, p["lag"])
    lost = GaugeMetricFamily(
        "logstream_kafka_lost_messages", "Kafka messages deleted before they were read."
    )
    lost.add_metric([], kafka["lost"])
    yield from (offset, lag, lost)


def scrape(store: Path | str | StoreCollector) -> bytes:
    """The metrics of ``store`` in the Prometheus text format (what the route serves).

    Pass the same :class:`StoreCollector` at each scrape (as the route does) so that a store
    that cannot be read is logged once, not at every scrape."""
    collector = store if isinstance(store, StoreCollector) else StoreCollector(store)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry)


def add_metrics_route(server: Flask, store: Path | str) -> None:
    """Serve :func:`scrape` of ``store`` at :data:`METRICS_PATH` on a Flask server (the
    dashboard's), through one :class:`StoreCollector` for every scrape."""
    from flask import Response

    collector = StoreCollector(store)

    def metrics() -> Response:
        return Response(scrape(collector), mimetype=CONTENT_TYPE_LATEST)

    server.add_url_rule(METRICS_PATH, "prometheus_metrics", metrics)
    server.add_url_rule(METRICS_PATH.rstrip("/"), "prometheus_metrics_bare", metrics)
