"""The Kafka source: a topic's messages as log lines, exactly once, with deleted input counted.

Spark's own connector reads the topic (``spark.readStream.format("kafka")``, Spark guide
"Structured Streaming + Kafka Integration"; book Ch. 10, *The Kafka Source*); each message's
value is one log line, parsed by the same ingest query as a directory's lines. What holds:

* **Offsets live in the checkpoint.** Before a micro-batch runs, Spark writes the end offset of
  every partition to ``STATE/ingest/offsets/N``; the batch's outputs are keyed by its id, and
  ``commits/N`` is written after them. A ``kill -9`` anywhere replays batch N with the same
  offsets, whose outputs find themselves already published: no message is lost or counted
  twice. Kafka's consumer-group offsets are not used.
* **A new checkpoint starts at the earliest offset** (``startingOffsets=earliest``): lines
  published before the pipeline first started (a replay, a backlog) are counted, as a new
  directory source reads the files already there. ``latest`` would silently skip them. A
  checkpoint's own offsets always win over it.
* **Deleted unread messages** (the topic's retention, ``retention.ms``/``retention.bytes``,
  deleted records the pipeline had not read yet): at start, :func:`check_unread` compares the
  checkpoint's next offsets with the topic's earliest offsets. By default (Spark's
  ``failOnDataLoss``) the run stops before any query with
  :class:`KafkaDataLossError`: the count, the offsets and the fix, no stack trace. The same
  message replaces Spark's own failure when retention deletes them while the query runs
  (:func:`data_loss_error`). With ``kafka_allow_data_loss`` (``--allow-data-loss``) Spark
  skips to the earliest offset still there and the count is reported (a warning at start, and
  per micro-batch the offsets a batch covered but could not read:
  :func:`logstream.monitoring.kafka.kafka_progress`).
* **An unreachable broker** (stopped, restarting, the network cut): the run waits for it up to
  ``kafka_retry`` (``--kafka-retry``, default 2 minutes), with a warning when it is first missed
  and a line when it answers again (:class:`BrokerWatch`, which asks for the cluster's
  metadata every few seconds beside the query); Spark's own Kafka timeouts are set past that
  bound, so the query waits too. Past it the run stops with one line naming the brokers and
  the fix (:class:`~logstream.errors.KafkaUnavailableError`); a Kafka timeout Spark raises
  first says the same (:func:`unavailable_error`). The checkpoint's offsets make the start
  after the broker's return exact.
* ``max_offsets_per_trigger`` bounds a micro-batch (Spark's ``maxOffsetsPerTrigger``), shared
  between the partitions in proportion to their backlog: a backlog is read in several
  micro-batches, each a slice of event time when the partitions carry the same stretch of it
  (``logstream replay --kafka`` spreads lines round-robin; docs/kafka.md).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from logstream.errors import ConfigError, KafkaUnavailableError, LogstreamError
from logstream.session import KAFKA_PACKAGE, kafka_available

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from logstream.pipeline.config import PipelineConfig

__all__ = [
    "BrokerWatch",
    "DataLoss",
    "KafkaDataLossError",
    "check_kafka_source",
    "check_unread",
    "data_loss_error",
    "kafka_lines",
    "unavailable_error",
    "unread_offsets",
]

log = logging.getLogger(__name__)

#: The marker of Spark's data-loss failures (error class ``KAFKA_DATA_LOSS.*``).
SPARK_DATA_LOSS = "KAFKA_DATA_LOSS"


class KafkaDataLossError(LogstreamError):
    """Raised when messages of the Kafka topic were deleted before the pipeline read them (the
    topic's retention) and the run fails on data loss (the default); the message has the
    count, the offsets and the fix."""


@dataclass(frozen=True)
class DataLoss:
    """Messages of ``topic`` deleted before the pipeline read them.

    Attributes
    ----------
    topic : str
    ranges : dict of int to (int, int)
        Partition → (first lost offset, first offset still there), for the partitions that
        lost messages.
    """

    topic: str
    ranges: dict[int, tuple[int, int]]

    @property
    def count(self) -> int:
        """Messages lost, over every partition."""
        return sum(end - start for start, end in self.ranges.values())

    def describe(self) -> str:
        """``1,500 unread messages of topic 'weblog' were deleted (partition 0: offsets …)``."""
        parts = ", ".join(
            f"partition {p}: offsets {start:,}–{end - 1:,}"
            for p, (start, end) in sorted(self.ranges.items())
        )
        return (
            f"{self.count:,} unread message{'s' if self.count != 1 else ''} of Kafka topic "
            f"{self.topic!r} were deleted before the pipeline read them ({parts}), by the "
            "topic's retention or a deletion of records"
        )


def _offsets_line(path: Path) -> dict[str, dict[str, int]] | None:
    """The Kafka offsets (``{topic: {partition: offset}}``) of a checkpoint log file."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        start = line.find("{")  # the initial-offset file starts with a version byte
        if start < 0:
            continue
        try:
            value = json.loads(line[start:])
        except ValueError:
            continue
        if (
            isinstance(value, dict)
            and value
            and all(
                isinstance(v, dict) and all(str(k).lstrip("-").isdigit() for k in v)
                for v in value.values()
            )
        ):
            return value
    return None


def _batch_ids(directory: Path) -> list[int]:
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def unread_offsets(checkpoint: Path, topic: str) -> dict[int, int] | None:
    """Each partition's first offset the query has not committed, from its checkpoint.

    That is the end offset of the last committed micro-batch (``offsets/N`` of the newest
    ``commits/N``), or without a commit the initial offsets Spark recorded when the query
    first started (``sources/0/0``).

    Parameters
    ----------
    checkpoint : Path
        The query's checkpoint (``STATE/ingest``).
    topic : str

    Returns
    -------
    dict of int to int, or None
        Partition → offset; None for a new checkpoint (nothing read or planned yet).
    """
    commits = set(_batch_ids(checkpoint / "commits"))
    offsets = None
    for batch in reversed(_batch_ids(checkpoint / "offsets")):
        if batch in commits:
            offsets = _offsets_line(checkpoint / "offsets" / str(batch))
            break
    if offsets is None:
        offsets = _offsets_line(checkpoint / "sources" / "0" / "0")
    if offsets is None or topic not in offsets:
        return None
    # -2 and -1 stand for "earliest" and "latest" in Spark's initial offsets: nothing lost
    return {int(p): int(o) for p, o in offsets[topic].items() if int(o) >= 0}


def check_unread(checkpoint: Path, bootstrap: str, topic: str) -> DataLoss | None:
    """The messages the checkpoint has not read that the topic no longer holds, or None.

    Raises
    ------
    ConfigError
        When the broker is unreachable.
    """
    unread = unread_offsets(checkpoint, topic)
    if not unread:
        return None
    from logstream.kafka.client import partition_offsets

    earliest = {p: lo for p, (lo, _) in partition_offsets(bootstrap, topic).items()}
    ranges = {p: (o, earliest[p]) for p, o in unread.items() if earliest.get(p, o) > o}
    return DataLoss(topic, ranges) if ranges else None


def _error(loss: DataLoss, when: str) -> KafkaDataLossError:
    return KafkaDataLossError(
        f"{loss.describe()}; the run stops {when} (it fails on data loss, Spark's "
        "failOnDataLoss) so that the gap does not pass unnoticed. To go on without them, "
        "counted as lost, restart with --allow-data-loss; to keep it from happening, keep the "
        "pipeline running or give the topic a longer retention (retention.ms)"
    )


def data_loss_error(cfg: PipelineConfig, error: BaseException) -> KafkaDataLossError | None:
    """The clear error for a query that Spark failed because unread messages were deleted while
    it ran (``KAFKA_DATA_LOSS``), counted from the checkpoint; None for any other failure."""
    if cfg.source != "kafka" or SPARK_DATA_LOSS not in str(error):
        return None
    assert cfg.kafka_bootstrap is not None and cfg.kafka_topic is not None
    try:
        loss = check_unread(cfg.state_dir / "ingest", cfg.kafka_bootstrap, cfg.kafka_topic)
    except ConfigError:
        loss = None
    if loss is None:
        return KafkaDataLossError(
            f"messages of Kafka topic {cfg.kafka_topic!r} were deleted before the pipeline "
            "read them (by the topic's retention) while the query ran; restart with "
            "--allow-data-loss to go on without them, counted as lost"
        )
    return _error(loss, "here")


def check_kafka_source(cfg: PipelineConfig, warn: bool = False) -> DataLoss | None:
    """At start: the broker answers, and the checkpoint's unread messages are all there.

    ``logstream run`` calls it before the JVM starts (a refused run is quick), and
    :func:`kafka_lines` when it opens the source.

    Parameters
    ----------
    cfg : PipelineConfig
        A Kafka source's configuration.
    warn : bool
        Log a warning with the count when messages were lost and the run allows it.

    Returns
    -------
    DataLoss or None
        The lost messages (the run allows data loss), or None.

    Raises
    ------
    ConfigError
        When no broker of ``kafka_bootstrap`` answers.
    KafkaDataLossError
        When unread messages were deleted and ``kafka_allow_data_loss`` is off.
    """
    from logstream.kafka.client import wait_reachable

    assert cfg.kafka_bootstrap is not None and cfg.kafka_topic is not None
    wait_reachable(cfg.kafka_bootstrap)
    loss = check_unread(cfg.state_dir / "ingest", cfg.kafka_bootstrap, cfg.kafka_topic)
    if loss is not None and not cfg.kafka_allow_data_loss:
        raise _error(loss, "before reading")
    if loss is not None and warn:
        log.warning("%s: going on without them (--allow-data-loss)", loss.describe())
    return loss


def kafka_lines(spark: SparkSession, cfg: PipelineConfig) -> DataFrame:
    """The topic's messages as lines: ``value`` (string) and ``source_file`` (null).

    Parameters
    ----------
    spark : SparkSession
        A session with Spark's Kafka connector (``SparkSettings(kafka=True)``).
    cfg : PipelineConfig
        ``kafka_bootstrap``, ``kafka_topic``, ``kafka_max_offsets_per_trigger``,
        ``kafka_allow_data_loss`` and ``state_dir`` (the checkpoint is ``STATE/ingest``).

    Returns
    -------
    DataFrame
        Streaming, one row per message.

    Raises
    ------
    ConfigError
        When the session has no Kafka connector, or the broker is unreachable.
    KafkaDataLossError
        When unread messages were deleted and the run fails on data loss (module docstring).
    """
    if not kafka_available(spark):
        raise ConfigError(
            "the Kafka source needs Spark's Kafka connector, which is not on this session's "
            "classpath: logstream run adds it to the session it starts; a session started "
            f"before (a notebook, spark-submit) needs spark-submit --packages {KAFKA_PACKAGE} "
            "(or spark.jars.packages)"
        )
    check_kafka_source(cfg, warn=True)
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", cfg.kafka_bootstrap)
        .option("subscribe", cfg.kafka_topic)
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", str(not cfg.kafka_allow_data_loss).lower())
    )
    if cfg.kafka_max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", cfg.kafka_max_offsets_per_trigger)
    # Spark's requests to the brokers wait past --kafka-retry, so the run's own bound (and
    # message) comes first: the consumer's and admin's calls, and a task's fetch of records
    wait_ms = int(_retry_s(cfg) * 1000) + SPARK_WAIT_MARGIN_MS
    reader = reader.option("kafka.default.api.timeout.ms", max(60_000, wait_ms))
    reader = reader.option("kafkaConsumer.pollTimeoutMs", max(120_000, wait_ms))
    return reader.load().select(
        F.col("value").cast("string").alias("value"),
        F.lit(None).cast("string").alias("source_file"),
    )


#: How much longer than ``--kafka-retry`` Spark's own Kafka requests may wait (ms).
SPARK_WAIT_MARGIN_MS = 30_000
#: Seconds between two checks of the brokers while a run reads Kafka.
WATCH_PERIOD_S = 5.0
#: What Spark's failures say when the brokers could not be reached.
_UNREACHABLE = re.compile(
    r"org\.apache\.kafka\.common\.errors\.(?:TimeoutException|DisconnectException)"
    r"|Timeout of \d+ms expired|Failed to get records for"
)


def _unavailable(bootstrap: str, seconds: float, reason: str) -> KafkaUnavailableError:
    return KafkaUnavailableError(
        f"Kafka broker {bootstrap!r} could not be reached for {seconds:g} s ({reason}): start "
        "the broker (or repair the network to it), then run the same command again, which "
        "resumes from the checkpoint; --kafka-retry sets how long the run waits"
    )


def unavailable_error(cfg: PipelineConfig, error: BaseException) -> KafkaUnavailableError | None:
    """The clear error for a query that Spark failed because the brokers did not answer (a
    Kafka ``TimeoutException``); None for any other failure or source."""
    if cfg.source != "kafka":
        return None
    match = _UNREACHABLE.search(str(error))
    if match is None:
        return None
    assert cfg.kafka_bootstrap is not None
    line = next((t for t in str(error).splitlines() if match.group(0) in t), match.group(0))
    return _unavailable(cfg.kafka_bootstrap, _retry_s(cfg), line.strip()[:200])


def _retry_s(cfg: PipelineConfig) -> float:
    """``--kafka-retry`` in seconds."""
    from logstream.pipeline.config import interval_seconds

    return interval_seconds(cfg.kafka_retry)


class BrokerWatch:
    """Watch the Kafka brokers while a run reads them: warn while they cannot be reached,
    give up past a bound.

    A daemon thread asks for the cluster's metadata every ``period_s`` seconds
    (``confluent-kafka``, beside Spark's own clients). The first miss logs a warning naming
    the brokers and the bound; an answer after misses logs how long they were gone; misses
    for ``retry_s`` seconds call ``on_give_up`` once with the
    :class:`~logstream.errors.KafkaUnavailableError` the run ends with (kept as
    :attr:`failure`), and the watch ends.

    Parameters
    ----------
    bootstrap : str
        The brokers (``HOST:PORT[,…]``).
    retry_s : float
        Seconds of misses before giving up (``--kafka-retry``).
    on_give_up : callable
        Called with the error, from the watch's thread (the pipeline stops).
    period_s : float
        Seconds between two checks.
    """

    def __init__(
        self,
        bootstrap: str,
        retry_s: float,
        on_give_up: Callable[[KafkaUnavailableError], None],
        period_s: float = WATCH_PERIOD_S,
    ) -> None:
        self.bootstrap = bootstrap
        self.retry_s = retry_s
        self.on_give_up = on_give_up
        self.period_s = period_s
        self.failure: KafkaUnavailableError | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="kafka-watch", daemon=True)

    def __enter__(self) -> BrokerWatch:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(self.period_s + 5)

    def probe(self) -> str | None:
        """None when a broker answers a metadata request within the period, else why not."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        from logstream.kafka.client import client_config

        if not hasattr(self, "_admin"):
            self._admin = AdminClient(client_config(self.bootstrap))
        try:
            self._admin.list_topics(timeout=max(1.0, min(self.period_s, 5.0)))
        except KafkaException as exc:
            error = exc.args[0] if exc.args else exc
            return error.str() if hasattr(error, "str") else str(error)
        return None

    def _watch(self) -> None:
        gone_at: float | None = None
        while not self._stop.wait(self.period_s):
            reason = self.probe()
            now = time.monotonic()
            if reason is None:
                if gone_at is not None:
                    log.warning(
                        "Kafka broker %r reached again after %.0f s", self.bootstrap, now - gone_at
                    )
                    gone_at = None
                continue
            if gone_at is None:
                gone_at = now
                log.warning(
                    "warning: Kafka broker %r cannot be reached (%s): the run waits for it, "
                    "for up to %g s (--kafka-retry)",
                    self.bootstrap, reason, self.retry_s,
                )  # fmt: skip
            elif now - gone_at >= self.retry_s:
                self.failure = _unavailable(self.bootstrap, self.retry_s, reason)
                self.on_give_up(self.failure)
                return
