"""The Python side of Kafka (``confluent-kafka``): topics, offsets, records, deletion.

Spark reads and writes Kafka in the JVM; these helpers are for what happens outside a Spark
query: ``logstream replay --kafka`` creates its topic, the Kafka source checks at start that
the topic still holds what the checkpoint has not read (:mod:`logstream.sources.kafka`), and
the tests and benchmarks read the records a run wrote. librdkafka's own log lines go to the
``logstream.kafka`` logger (silent unless configured): a failure is raised here, once, with the
broker's address and the fix.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from logstream.errors import ConfigError

__all__ = [
    "KafkaRecord",
    "client_config",
    "delete_before",
    "ensure_topic",
    "partition_offsets",
    "read_records",
    "wait_reachable",
]

log = logging.getLogger("logstream.kafka")
log.addHandler(logging.NullHandler())

#: Seconds a request to the broker may take before it is reported as unreachable.
REQUEST_TIMEOUT_S = 10.0


def client_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    """librdkafka settings of a client of ``bootstrap``: its log to :data:`log`."""
    return {"bootstrap.servers": bootstrap, "logger": log, **extra}


def _unreachable(bootstrap: str, error: object) -> ConfigError:
    text = error.str() if hasattr(error, "str") else str(error)  # a KafkaError's own words
    return ConfigError(
        f"cannot reach Kafka at {bootstrap!r} ({text}): start a broker (`make kafka` starts "
        "one on 127.0.0.1:9092) or point the option at a running one"
    )


def wait_reachable(bootstrap: str, timeout_s: float = REQUEST_TIMEOUT_S) -> None:
    """Return once a broker of ``bootstrap`` answers a metadata request.

    Raises
    ------
    ConfigError
        When none answers within ``timeout_s`` seconds, naming ``bootstrap`` and the fix.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(client_config(bootstrap))
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            admin.list_topics(timeout=max(0.5, min(2.0, deadline - time.monotonic())))
            return
        except KafkaException as exc:
            if time.monotonic() >= deadline:
                raise _unreachable(bootstrap, exc.args[0]) from None
            time.sleep(0.2)


def ensure_topic(
    bootstrap: str, topic: str, partitions: int = 1, config: dict[str, str] | None = None
) -> int:
    """Create ``topic`` with ``partitions`` partitions unless it exists; its partition count.

    Parameters
    ----------
    bootstrap : str
        ``HOST:PORT[,HOST:PORT…]``.
    topic : str
    partitions : int
        Partitions of a new topic (an existing topic keeps its own).
    config : dict of str to str, optional
        Topic settings of a new topic (``retention.ms`` …).

    Returns
    -------
    int
        The topic's partitions.

    Raises
    ------
    ConfigError
        When the broker is unreachable or refuses the topic (a bad name, too many
        partitions), naming the topic and the broker's reason.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(client_config(bootstrap))
    try:
        # every topic's metadata: asking for one topic makes a broker create it (with the
        # broker's default partitions) when it auto-creates topics
        existing = admin.list_topics(timeout=REQUEST_TIMEOUT_S).topics.get(topic)
    except KafkaException as exc:
        raise _unreachable(bootstrap, exc.args[0]) from None
    if existing is not None and existing.error is None and existing.partitions:
        return len(existing.partitions)
    future = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=-1, config=config or {})],
        request_timeout=REQUEST_TIMEOUT_S,
    )[topic]
    try:
        future.result()
    except KafkaException as exc:
        error = exc.args[0]
        if getattr(error, "name", lambda: "")() != "TOPIC_ALREADY_EXISTS":
            raise ConfigError(
                f"Kafka at {bootstrap!r} refused to create topic {topic!r} with "
                f"{partitions} partitions: {error.str() if hasattr(error, 'str') else error}"
            ) from None
    return _partition_count(bootstrap, topic)


def _partition_count(bootstrap: str, topic: str) -> int:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(client_config(bootstrap))
    deadline = time.monotonic() + REQUEST_TIMEOUT_S
    while time.monotonic() < deadline:  # a new topic's metadata reaches the broker shortly
        meta = admin.list_topics(timeout=REQUEST_TIMEOUT_S).topics.get(topic)
        if meta is not None and meta.error is None and meta.partitions:
            return len(meta.partitions)
        time.sleep(0.1)
    raise ConfigError(f"Kafka at {bootstrap!r} has no metadata for topic {topic!r} yet")


def partition_offsets(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """Each partition's earliest and latest offset (the next offset to be written).

    Returns
    -------
    dict of int to (int, int)
        Partition → (earliest, latest); empty when the topic does not exist. The earliest
        offset moves up when retention (or ``deleteRecords``) deletes the oldest records.

    Raises
    ------
    ConfigError
        When the broker is unreachable.
    """
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(client_config(bootstrap, **{"group.id": "logstream-offsets"}))
    try:
        try:
            meta = consumer.list_topics(timeout=REQUEST_TIMEOUT_S).topics.get(topic)
        except KafkaException as exc:
            raise _unreachable(bootstrap, exc.args[0]) from None
        if meta is None or meta.error is not None:
            return {}
        out = {}
        for partition in sorted(meta.partitions):
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=REQUEST_TIMEOUT_S
            )
            out[partition] = (int(low), int(high))
        return out
    finally:
        consumer.close()


def delete_before(bootstrap: str, topic: str, offsets: dict[int, int]) -> None:
    """Delete every record of ``topic`` before ``offsets`` (partition → offset), as retention
    does: the partitions' earliest offsets move up to them (Kafka's ``DeleteRecords``).

    Raises
    ------
    ConfigError
        When the broker refuses, naming the partition and its reason.
    """
    from confluent_kafka import KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(client_config(bootstrap))
    wanted = [TopicPartition(topic, p, o) for p, o in sorted(offsets.items())]
    for tp, future in admin.delete_records(wanted, request_timeout=REQUEST_TIMEOUT_S).items():
        try:
            future.result()
        except KafkaException as exc:
            raise ConfigError(
                f"Kafka at {bootstrap!r} did not delete records of {topic}-{tp.partition} "
                f"before offset {tp.offset}: {exc.args[0]}"
            ) from None


@dataclass(frozen=True)
class KafkaRecord:
    """One record read back: where it is, its key and value (text) and headers."""

    partition: int
    offset: int
    key: str | None
    value: str | None
    headers: tuple[tuple[str, str], ...] = ()


def read_records(bootstrap: str, topic: str, timeout_s: float = 60.0) -> list[KafkaRecord]:
    """Every record ``topic`` holds now, from each partition's earliest offset to its latest.

    Parameters
    ----------
    bootstrap : str
    topic : str
    timeout_s : float
        Seconds to read for at most.

    Returns
    -------
    list of KafkaRecord
        By partition, then offset.

    Raises
    ------
    ConfigError
        When the broker is unreachable, or the records are not all read within
        ``timeout_s``.
    """
    from confluent_kafka import Consumer, TopicPartition

    ends = partition_offsets(bootstrap, topic)
    wanted = {p: (lo, hi) for p, (lo, hi) in ends.items() if hi > lo}
    consumer = Consumer(
        client_config(
            bootstrap,
            **{"group.id": "logstream-read", "enable.auto.commit": False},
        )
    )
    records: list[KafkaRecord] = []
    try:
        consumer.assign([TopicPartition(topic, p, lo) for p, (lo, _) in wanted.items()])
        remaining = {p: hi for p, (_, hi) in wanted.items()}
        deadline = time.monotonic() + timeout_s
        while remaining:
            if time.monotonic() > deadline:
                raise ConfigError(
                    f"reading topic {topic!r} at {bootstrap!r}: {len(records):,} records in "
                    f"{timeout_s:g} s, partitions {sorted(remaining)} not read to their end"
                )
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                if message.error() is not None:
                    continue  # end of a partition, or a transient error: read on
                partition, offset = message.partition(), message.offset()
                key, value = message.key(), message.value()
                records.append(
                    KafkaRecord(
                        partition,
                        offset,
                        None if key is None else key.decode("utf-8", "replace"),
                        None if value is None else value.decode("utf-8", "replace"),
                        tuple(
                            (k, (v or b"").decode("utf-8", "replace"))
                            for k, v in message.headers() or []
                        ),
                    )
                )
                if partition in remaining and offset + 1 >= remaining[partition]:
                    del remaining[partition]
    finally:
        consumer.close()
    return sorted(records, key=lambda r: (r.partition, r.offset))
