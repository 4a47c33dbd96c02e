"""Where the pipeline's outputs go: files in a format, and extra sinks (``--sink URL``).

:class:`OutputPublisher` is what the ingest stage (:class:`logstream.pipeline.IngestStage`)
calls for every output of a micro-batch. For each output, in order:

1. publish the rows as files, exactly once per batch id (:func:`~logstream.sinks.publish_batch`
   in ``--output-format`` Parquet, JSON lines or CSV);
2. when the output is one of ``--sink-outputs``, send the same rows to every ``--sink``:
   a webhook (:mod:`logstream.sinks.webhook`, idempotent by (partition, epoch) with the
   batch id as epoch) or a Kafka topic (:mod:`logstream.sinks.kafka`, at-least-once with
   deterministic keys).

Step 2 runs even when step 1 finds the batch already published (a replay after a crash
between the two): the rows are sent again with the same ``Idempotency-Key`` values or Kafka
keys, and the webhook's ledger skips what was delivered. A sink that fails for good fails the
micro-batch; the query stops and a restart replays it. The micro-batch's snapshot is written
after every output, so a replayed batch re-sends only what the crash left undelivered (for
the webhook) or everything of that batch (Kafka, at-least-once).

Sink URLs: ``kafka://HOST:PORT[,HOST:PORT...]/TOPIC``, ``http://HOST[:PORT]/PATH`` and
``https://...`` (:func:`parse_sink`).
"""

from __future__ import annotations

import hashlib
import re
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pyspark.sql import DataFrame, SparkSession

from logstream.errors import ConfigError
from logstream.sinks.publish import OUTPUT_FORMATS, publish_batch
from logstream.sinks.webhook import check_webhook_url, post_batch

__all__ = [
    "DEFAULT_SINK_OUTPUTS",
    "KafkaSink",
    "OutputPublisher",
    "Sink",
    "WebhookSink",
    "check_output_format",
    "check_sinks",
    "parse_sink",
    "resolve_sink_outputs",
]

#: What ``--sink`` sends by default: the alerts and every final-window output.
DEFAULT_SINK_OUTPUTS = (
    "traffic_per_minute",
    "trending_pages",
    "unique_visitors",
    "top_clients",
    "alerts",
    "traffic_by_section",
    "traffic_by_agent",
    "traffic_by_network",
)
#: Outputs written on every run, whatever ``--queries`` says.
ALWAYS_OUTPUTS = ("events", "late_events", "quarantine")

_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_SINK_FORMS = (
    "kafka://HOST:PORT/TOPIC (e.g. kafka://localhost:9092/weblog-alerts) or "
    "http(s)://HOST[:PORT]/PATH (a webhook)"
)


class Sink(Protocol):
    """A destination of published rows (see :class:`WebhookSink`, :class:`KafkaSink`)."""

    url: str

    def send(self, df: DataFrame, name: str, batch_id: int) -> None:
        """Send the rows of output ``name`` of micro-batch ``batch_id``."""


@dataclass(frozen=True)
class WebhookSink:
    """POSTs rows with :func:`~logstream.sinks.webhook.post_batch`; ledger under ``ledger_dir``.

    Idempotent by (partition, epoch): the epoch is the batch id, the ledger a folder per URL.
    """

    url: str
    ledger_dir: Path | None = None

    def send(self, df: DataFrame, name: str, batch_id: int) -> None:
        """POST the rows of ``name`` for ``batch_id`` (skipped when the ledger has them)."""
        ledger = None
        if self.ledger_dir is not None:
            digest = hashlib.sha256(self.url.encode()).hexdigest()[:12]
            ledger = str(self.ledger_dir / f"webhook-{digest}")
        post_batch(df, self.url, batch_id, name, ledger_dir=ledger)


@dataclass(frozen=True)
class KafkaSink:
    """Writes rows as :func:`~logstream.sinks.kafka.kafka_records` to ``topic`` (at-least-once)."""

    url: str
    bootstrap: str
    topic: str

    def send(self, df: DataFrame, name: str, batch_id: int) -> None:
        """Write the records of ``name`` for ``batch_id`` (headers: output, batch id)."""
        from logstream.sinks.kafka import kafka_records, write_kafka

        write_kafka(kafka_records(df, name, batch_id=batch_id), self.bootstrap, self.topic)


def parse_sink(url: str, ledger_dir: Path | None = None) -> Sink:
    """A sink from its URL.

    Raises
    ------
    ConfigError
        When ``url`` is neither form, naming it and the forms.

    Examples
    --------
    >>> parse_sink("kafka://localhost:9092,broker2:9093/weblog-alerts")
    KafkaSink(url='kafka://localhost:9092,broker2:9093/weblog-alerts', bootstrap='localhost:9092,broker2:9093', topic='weblog-alerts')
    >>> parse_sink("http://127.0.0.1:8080/hook")
    WebhookSink(url='http://127.0.0.1:8080/hook', ledger_dir=None)
    >>> parse_sink("s3://bucket/x")
    Traceback (most recent call last):
    ...
    logstream.errors.ConfigError: --sink 's3://bucket/x' is not a sink URL: use kafka://...
    """  # noqa: E501 - a doctest's output is one line
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("http", "https"):
        try:
            return WebhookSink(check_webhook_url(url), ledger_dir)
        except ConfigError as e:
            raise ConfigError(f"--sink: {e}") from None
    if scheme == "kafka":
        parts = urllib.parse.urlsplit(url)
        topic = parts.path.strip("/")
        servers = [s for s in parts.netloc.split(",") if s]
        for server in servers:
            host, _, port = server.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ConfigError(
                    f"--sink {url!r}: broker {server!r} is not HOST:PORT; use {_SINK_FORMS}"
                )
        if not servers or not _TOPIC.match(topic):
            raise ConfigError(
                f"--sink {url!r} needs brokers and a topic (letters, digits, '.', '_', '-'): "
                f"use {_SINK_FORMS}"
            )
        return KafkaSink(url, ",".join(servers), topic)
    raise ConfigError(f"--sink {url!r} is not a sink URL: use {_SINK_FORMS}")


def check_output_format(value: str) -> str:
    """``value`` (any case) if it is an output format, else :class:`ConfigError`."""
    fmt = value.strip().lower()
    if fmt not in OUTPUT_FORMATS:
        raise ConfigError(
            f"--output-format {value!r} is not a file format: use one of "
            + ", ".join(OUTPUT_FORMATS)
        )
    return fmt


def resolve_sink_outputs(
    value: str | Iterable[str] | None, computed: Sequence[str]
) -> tuple[str, ...]:
    """The outputs sent to the sinks, checked against the outputs the run computes.

    Parameters
    ----------
    value : str or iterable of str or None
        ``"default"`` / None (the alerts and final-window outputs that are computed), ``"all"``
        (every output written), or names, comma-separated or a list.
    computed : sequence of str
        The analytics outputs of the run (``--queries``); ``events``, ``late_events`` and
        ``quarantine`` are always written.

    Raises
    ------
    ConfigError
        Naming an unknown output, or one the run does not compute, and the fix.

    Examples
    --------
    >>> resolve_sink_outputs(None, ("traffic_per_minute", "sessions", "alerts"))
    ('traffic_per_minute', 'alerts')
    >>> resolve_sink_outputs("alerts,events", ("alerts",))
    ('alerts', 'events')
    """
    written = (*computed, *ALWAYS_OUTPUTS)
    if value is None or (isinstance(value, str) and value.strip().lower() == "default"):
        return tuple(o for o in DEFAULT_SINK_OUTPUTS if o in computed)
    if isinstance(value, str) and value.strip().lower() == "all":
        return written
    raw = value.split(",") if isinstance(value, str) else [p for v in value for p in v.split(",")]
    names = [n.strip().lower().replace("-", "_") for n in raw if n.strip()]
    if not names:
        raise ConfigError(
            f"--sink-outputs {value!r} names no output: write 'default', 'all' or a "
            "comma-separated list such as alerts,traffic_per_minute"
        )
    for name in names:
        if name not in written:
            known = (*DEFAULT_SINK_OUTPUTS, "sessions", "bot_scores", *ALWAYS_OUTPUTS)
            hint = (
                f"it is not computed by this run: add it to --queries ({', '.join(computed)})"
                if name in known
                else f"choose 'default', 'all' or from {', '.join(known)}"
            )
            raise ConfigError(f"--sink-outputs: unknown output {name!r}: {hint}")
    return tuple(dict.fromkeys(names))


def check_sinks(spark: SparkSession, sinks: Iterable[Sink]) -> None:
    """Checks that need Spark, at start: a Kafka sink needs the connector.

    Raises
    ------
    ConfigError
        As :func:`logstream.sinks.kafka.check_kafka_sink`.
    """
    if any(isinstance(s, KafkaSink) for s in sinks):
        from logstream.sinks.kafka import check_kafka_sink

        check_kafka_sink(spark)


@dataclass(frozen=True)
class OutputPublisher:
    """Publishes an output's rows in ``fmt``, then sends them to ``sinks`` (module docstring).

    Parameters
    ----------
    fmt : {"parquet", "json", "csv"}
        File format of every output.
    sinks : tuple of Sink
        Extra destinations (:func:`parse_sink`).
    sink_outputs : frozenset of str
        The outputs sent to ``sinks`` (:func:`resolve_sink_outputs`).
    """

    fmt: str = "parquet"
    sinks: tuple[Sink, ...] = ()
    sink_outputs: frozenset[str] = field(default_factory=frozenset)

    def __call__(self, df: DataFrame, root: Path, batch_id: int, files: int | None = 1) -> bool:
        """Publish ``df`` as output ``root.name`` of ``batch_id``; True when written now."""
        written = publish_batch(df, root, batch_id, files, fmt=self.fmt)
        if self.sinks and root.name in self.sink_outputs:
            for sink in self.sinks:
                sink.send(df, root.name, batch_id)
        return written
