"""Replayed lines published to a Kafka topic, one message per line (``replay --kafka``).

Each line is one message: the value is the line (UTF-8, without its line ending), the key is
null, and the lines are spread **round-robin over the topic's partitions**. Every partition
then carries the same stretch of event time, a third of each second's lines for three
partitions, so a consumer that reads the partitions at the same pace reads the log in event
time: Spark's ``maxOffsetsPerTrigger`` takes the same share of each partition, and a
micro-batch is a slice of the log. Keyed by client host instead, a busy client (a crawler)
would make its partition run behind the others in event time during a backlog, and the
pipeline's watermark, which follows the newest event of any partition, would make its
requests late. A message's timestamp is the time it was sent, not its event time (a 1995
timestamp would put it past any retention at once).

Delivery: the producer is idempotent (``enable.idempotence``, ``acks=all``), so a retry
inside the client never writes a line twice, and :meth:`KafkaLineSink.close` waits until
every line is acknowledged. A line the broker refuses for good raises
:class:`KafkaDeliveryError`. A replay that is killed and started again publishes its lines
again: the topic then holds them twice (replay is a source of test traffic, not a shipper).
"""

from __future__ import annotations

from typing import Any

from logstream.errors import LogstreamError
from logstream.replay.reader import ENCODING, ENCODING_ERRORS
from logstream.replay.sinks import LineSink

__all__ = ["KafkaDeliveryError", "KafkaLineSink"]

#: Seconds :meth:`KafkaLineSink.close` waits for the last acknowledgements.
CLOSE_TIMEOUT_S = 60.0


class KafkaDeliveryError(LogstreamError):
    """Raised when the broker refuses a replayed line for good, or lines are still
    unacknowledged when the replay closes (the broker went away)."""


class KafkaLineSink(LineSink):
    """Publish each line as one message of ``topic``, round-robin over its partitions.

    Parameters
    ----------
    bootstrap : str
        ``HOST:PORT[,HOST:PORT…]`` of the brokers.
    topic : str
        Created at :meth:`start` with ``partitions`` partitions when it does not exist; an
        existing topic keeps its own.
    partitions : int
        Partitions of a topic created here.

    Raises
    ------
    ConfigError
        At :meth:`start`, when no broker answers or the topic cannot be created.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int = 1) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.lines_written = 0
        self.delivered = 0
        self._next = 0
        self._error: str | None = None
        self._producer: Any = None

    def start(self) -> None:
        """Reach the broker, create the topic when missing, and open the producer."""
        from confluent_kafka import Producer

        from logstream.kafka.client import client_config, ensure_topic, wait_reachable

        wait_reachable(self.bootstrap)
        self.partitions = ensure_topic(self.bootstrap, self.topic, self.partitions)
        self._producer = Producer(
            client_config(
                self.bootstrap,
                **{"enable.idempotence": True, "acks": "all", "linger.ms": 5},
            )
        )

    def _delivered(self, error: Any, _message: Any) -> None:
        if error is None:
            self.delivered += 1
        elif self._error is None:
            self._error = str(error)

    def _raise_failed(self) -> None:
        if self._error is not None:
            raise KafkaDeliveryError(
                f"Kafka at {self.bootstrap!r} refused a line for topic {self.topic!r}: "
                f"{self._error}"
            )

    def write(self, line: str) -> None:
        """Queue ``line`` for the next partition in turn (sent within milliseconds)."""
        if self._producer is None:
            self.start()
        value = line.encode(ENCODING, ENCODING_ERRORS)
        partition = self._next % self.partitions
        while True:
            try:
                self._producer.produce(
                    self.topic, value=value, partition=partition, on_delivery=self._delivered
                )
                break
            except BufferError:  # the client's queue is full: let it send
                self._producer.poll(0.1)
        self._next += 1
        self.lines_written += 1

    def flush(self) -> float:
        """Serve the acknowledgements received so far (the client sends in the background).

        Raises
        ------
        KafkaDeliveryError
            When a line was refused.
        """
        if self._producer is not None:
            self._producer.poll(0)
        self._raise_failed()
        return 0.0

    def close(self) -> None:
        """Wait until every line is acknowledged.

        Raises
        ------
        KafkaDeliveryError
            When a line was refused, or some are unacknowledged after
            :data:`CLOSE_TIMEOUT_S` seconds.
        """
        if self._producer is None:
            return
        left = self._producer.flush(CLOSE_TIMEOUT_S)
        self._raise_failed()
        if left:
            raise KafkaDeliveryError(
                f"{left:,} lines for topic {self.topic!r} were not acknowledged by Kafka at "
                f"{self.bootstrap!r} within {CLOSE_TIMEOUT_S:g} s"
            )

    def status(self) -> str:
        """``12,000 acknowledged``."""
        return f"{self.delivered:,} acknowledged"

    def info(self) -> dict[str, object]:
        """The broker, topic, partitions, lines written and acknowledged."""
        return {
            "bootstrap": self.bootstrap,
            "topic": self.topic,
            "partitions": self.partitions,
            "lines": self.lines_written,
            "acknowledged": self.delivered,
        }
