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
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pyspark.sql import DataFrame, SparkSession

from logstream.sinks.publish import prepare_batch, publish_batch, publish_prepared, publish_table
from logstream.sinks.spec import (
    DEFAULT_SINK_OUTPUTS,
    check_output_format,
    resolve_sink_outputs,
    sink_spec,
)
from logstream.sinks.webhook import post_batch

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
    """A sink from its URL (:func:`~logstream.sinks.spec.sink_spec`).

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
    """  # noqa: E501 - a doctest's output is one line
    spec = sink_spec(url)
    if spec.kind == "kafka":
        return KafkaSink(spec.url, spec.bootstrap, spec.topic)
    return WebhookSink(spec.url, ledger_dir)


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

    def prepare(self, df: DataFrame, root: Path, batch_id: int, files: int | None = 1) -> bool:
        """Write ``df`` as output ``root.name`` of ``batch_id``, hidden until
        :meth:`publish_prepared` (:func:`~logstream.sinks.publish.prepare_batch`); False when
        the batch was already published. The rows of an output sent to ``sinks`` would have
        to be read again when published: such an output cannot be prepared.

        Raises
        ------
        ValueError
            ``root.name`` is an output sent to ``sinks``.
        """
        if self.sends(root.name):
            raise ValueError(f"output {root.name} is sent to a sink: publish it, not prepare")
        return prepare_batch(df, root, batch_id, files, fmt=self.fmt)

    def publish_prepared(self, root: Path, batch_id: int) -> bool:
        """Publish what :meth:`prepare` wrote (:func:`~logstream.sinks.publish.publish_prepared`);
        True when published now."""
        return publish_prepared(root, batch_id)

    def sends(self, output: str) -> bool:
        """Whether ``output``'s rows go to the extra ``sinks`` too."""
        return bool(self.sinks) and output in self.sink_outputs

    def publish_table(self, table: Any, root: Path, batch_id: int, spark: SparkSession) -> bool:
        """Publish an Arrow table as output ``root.name`` of ``batch_id`` (the live path's
        outputs); True when written now. Parquet is written by Arrow, with no Spark job; JSON
        and CSV, and the rows sent to ``sinks``, go through a DataFrame of the table
        (``spark.createDataFrame``), written as :meth:`__call__` writes them."""
        df = None
        if self.fmt == "parquet":
            written = publish_table(table, root, batch_id)
        else:
            df = spark.createDataFrame(table)
            written = publish_batch(df, root, batch_id, 1, fmt=self.fmt)
        if self.sinks and root.name in self.sink_outputs:
            df = df if df is not None else spark.createDataFrame(table)
            for sink in self.sinks:
                sink.send(df, root.name, batch_id)
        return written
