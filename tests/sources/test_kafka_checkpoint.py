"""The Kafka source's first unread offsets, read from a checkpoint as Spark writes it, the
message of deleted unread messages, and brokers that cannot be reached (no broker:
tests/kafka/test_kafka_broker.py has it; the outage drill is bench/drill_faults.py's)."""

from __future__ import annotations

import json
import logging
import threading
import time

from logstream.errors import KafkaUnavailableError
from logstream.pipeline import PipelineConfig
from logstream.sources.kafka import (
    BrokerWatch,
    DataLoss,
    KafkaDataLossError,
    data_loss_error,
    unavailable_error,
    unread_offsets,
)
from tests.conftest import free_port

META = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": {"spark.x": "1"}})


def write_batch(checkpoint, batch: int, offsets: dict, committed: bool) -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "commits").mkdir(parents=True, exist_ok=True)
    (checkpoint / "offsets" / str(batch)).write_text(f"v1\n{META}\n{json.dumps(offsets)}")
    if committed:
        (checkpoint / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_the_first_unread_offsets_are_those_of_the_last_committed_batch(tmp_path):
    checkpoint = tmp_path / "ingest"
    assert unread_offsets(checkpoint, "weblog") is None  # a new checkpoint
    (checkpoint / "sources" / "0").mkdir(parents=True)
    (checkpoint / "sources" / "0" / "0").write_text('\x00v1\n{"weblog":{"0":0,"1":7}}')
    assert unread_offsets(checkpoint, "weblog") == {0: 0, 1: 7}  # started, nothing committed
    write_batch(checkpoint, 0, {"weblog": {"0": 40, "1": 47}}, committed=True)
    write_batch(checkpoint, 1, {"weblog": {"0": 80, "1": 87}}, committed=False)  # planned
    assert unread_offsets(checkpoint, "weblog") == {0: 40, 1: 47}
    assert unread_offsets(checkpoint, "other") is None


def test_deleted_unread_messages_are_counted_and_named():
    loss = DataLoss("weblog", {0: (40, 140), 2: (10, 11)})
    assert loss.count == 101
    assert loss.describe().startswith(
        "101 unread messages of Kafka topic 'weblog' were deleted before the pipeline read them "
        "(partition 0: offsets 40–139, partition 2: offsets 10–10)"
    )


def test_sparks_data_loss_failure_gets_a_clear_message(tmp_path):
    cfg = PipelineConfig.build(
        source="kafka",
        kafka_bootstrap="127.0.0.1:1",
        kafka_topic="weblog",
        log_format="common",
        state_dir=tmp_path / "state",
    )
    error = RuntimeError(
        "[KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE] Some data may have been lost"
    )
    converted = data_loss_error(cfg, error)
    assert isinstance(converted, KafkaDataLossError)
    assert "--allow-data-loss" in str(converted)
    assert data_loss_error(cfg, RuntimeError("another failure")) is None


def test_a_broker_that_does_not_answer_is_warned_of_then_given_up_naming_it(caplog):
    bootstrap = f"127.0.0.1:{free_port()}"  # nothing listens there: a broker that is down
    gave_up = threading.Event()
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="logstream"):
        with BrokerWatch(
            bootstrap, retry_s=1.0, on_give_up=lambda _: gave_up.set(), period_s=0.5
        ) as w:
            assert gave_up.wait(30)
    assert time.monotonic() - t0 < 30
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and warnings[0].startswith(f"warning: Kafka broker {bootstrap!r}")
    assert "for up to 1 s (--kafka-retry)" in warnings[0]
    said = str(w.failure)
    assert isinstance(w.failure, KafkaUnavailableError) and "\n" not in said
    assert said.startswith(f"Kafka broker {bootstrap!r} could not be reached for 1 s (")
    assert "start the broker" in said and "run the same command again" in said


def test_a_broker_back_within_the_bound_is_said_once_and_nothing_stops(caplog):
    answers = iter(["Broker transport failure", "Broker transport failure", None, None])
    watch = BrokerWatch("b:9092", retry_s=60, on_give_up=lambda _: None, period_s=0.01)
    watch.probe = lambda: next(answers, None)  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="logstream"):
        with watch:
            time.sleep(0.3)
    said = [r.getMessage() for r in caplog.records]
    assert said[0].startswith("warning: Kafka broker 'b:9092' cannot be reached")
    assert said[1].startswith("Kafka broker 'b:9092' reached again after") and len(said) == 2
    assert watch.failure is None


def test_sparks_kafka_timeout_gets_the_same_line(tmp_path):
    cfg = PipelineConfig.build(
        source="kafka",
        kafka_bootstrap="127.0.0.1:1",
        kafka_topic="weblog",
        log_format="common",
        state_dir=tmp_path / "state",
        kafka_retry="2 minutes",
    )
    spark_text = (
        "Job aborted due to stage failure: org.apache.kafka.common.errors.TimeoutException: "
        "Timeout of 60000ms expired before the position for partition weblog-1 could be "
        "determined\n\tat org.apache.kafka..."
    )
    converted = unavailable_error(cfg, RuntimeError(spark_text))
    assert isinstance(converted, KafkaUnavailableError)
    said = str(converted)
    assert said.startswith("Kafka broker '127.0.0.1:1' could not be reached for 120 s (Job ")
    assert "partition weblog-1" in said and "--kafka-retry" in said and "\n" not in said
    assert unavailable_error(cfg, RuntimeError("another failure")) is None
