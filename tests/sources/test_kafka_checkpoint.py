"""The Kafka source's first unread offsets, read from a checkpoint as Spark writes it, and the
message of deleted unread messages (no broker: tests/kafka/test_kafka_broker.py has it)."""

from __future__ import annotations

import json

from logstream.pipeline import PipelineConfig
from logstream.sources.kafka import DataLoss, KafkaDataLossError, data_loss_error, unread_offsets

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
