"""A Kafka source's offsets, lag and lost messages: from Spark's progress to the store, the
progress line, the dashboard and Prometheus."""

from __future__ import annotations

import json
from types import SimpleNamespace

from tests.dashboard.test_panels import find, output, rows
from tests.dashboard.test_tiles import kpi, two_batches_and_a_third_ahead

from logstream.cli.run_progress import kafka_text
from logstream.dashboard.app import refresh_outputs
from logstream.monitoring import ProgressListener, progress_row
from logstream.monitoring.kafka import kafka_progress, kafka_source
from logstream.monitoring.prometheus import scrape


def kafka(start, end, latest, rows=0):
    """A ``SourceProgress`` of Spark's Kafka source (offsets as Spark writes them: JSON)."""
    return SimpleNamespace(
        description="KafkaV2[Subscribe[weblog]]",
        startOffset=None if start is None else json.dumps({"weblog": start}),
        endOffset=json.dumps({"weblog": end}),
        latestOffset=None if latest is None else json.dumps({"weblog": latest}),
        numInputRows=rows,
        inputRowsPerSecond=120.0,
        processedRowsPerSecond=float("nan"),
    )


def test_offsets_lag_and_lost_messages_per_partition():
    got = kafka_progress([kafka({"1": 10, "0": 5}, {"1": 20, "0": 15}, {"1": 26, "0": 15}, 20)])
    assert got == {
        "topic": "weblog",
        "partitions": [
            {"partition": 0, "offset": 15, "latest": 15, "lag": 0},
            {"partition": 1, "offset": 20, "latest": 26, "lag": 6},
        ],
        "lag": 6,
        "input_rows_per_s": 120.0,
        "processed_rows_per_s": None,
        "rows": 20,
        "lost": 0,
    }
    # 20 offsets covered, 12 rows read: 8 were deleted before they were read
    assert kafka_progress([kafka({"0": 0}, {"0": 20}, {"0": 20}, 12)])["lost"] == 8
    # a query's first batch has no start: lost unknown
    assert kafka_progress([kafka(None, {"0": 20}, {"0": 20}, 20)])["lost"] is None
    assert kafka_progress([SimpleNamespace(description="FileStreamSource[x]")]) is None
    assert kafka_text(got) == "; Kafka lag 6"
    # a micro-batch replayed from the offset log after a restart: Spark has no newest offsets
    replayed = kafka_progress([kafka({"0": 5}, {"0": 15}, None, 10)])
    assert replayed["lag"] is None and replayed["partitions"][0]["latest"] is None
    assert kafka_text(replayed) == (
        "; Kafka lag – (Spark reports no newest offsets for a micro-batch planned before a restart)"
    )
    assert "8 messages deleted before they were read" in kafka_text({"lag": 0, "lost": 8})


def test_the_store_keeps_the_latest_offsets_and_adds_the_lost_messages(tmp_path):
    store = two_batches_and_a_third_ahead(tmp_path / "s.db")
    listener = ProgressListener(store)
    for batch, (start, end, read) in enumerate(((0, 10, 10), (10, 30, 15), (30, 40, 8))):
        event = SimpleNamespace(
            name="ingest",
            id="x",
            batchId=batch,
            timestamp="2025-01-01T10:00:00.000Z",
            inputRowsPerSecond=1.0,
            processedRowsPerSecond=1.0,
            batchDuration=1,
            numInputRows=read,
            eventTime={},
            stateOperators=[],
            sources=[kafka({"0": start}, {"0": end}, {"0": 45}, read)],
        )
        assert progress_row(event)["kafka"]["lost"] == end - start - read
        listener.onQueryProgress(SimpleNamespace(progress=event))
    listener.flush()
    state = kafka_source({"kafka_source": store.get_state("kafka_source") or ""})
    assert state is not None and state["batch_id"] == 2
    assert state["lost"] == 0  # the running total is read from its own key
    assert store.get_state("kafka_lost_messages") == "7"  # 0 + 5 + 2
    metrics = scrape(tmp_path / "s.db").decode()
    assert 'logstream_kafka_offset{partition="0",topic="weblog"} 40.0' in metrics
    assert 'logstream_kafka_lag{partition="0",topic="weblog"} 5.0' in metrics
    assert "logstream_kafka_lost_messages 7.0" in metrics
    out = refresh_outputs(tmp_path / "s.db", "all", "", None)
    assert kpi(out, "kafka-lag") == (
        "5",
        "messages not read yet, 1 partition; 7 deleted before read",
    )
    assert rows(output(out, "health"), "kafka-table") == [["0", "40", "45", "5"]]
    # issue 62 item 7: numbers sat right under left-aligned headings, each value under the
    # neighbouring column: a heading is aligned as its column's cells are
    table = find(output(out, "health"), "kafka-table")
    heads = table.children[0].children.children
    assert [h.className for h in heads] == ["n"] * 4


def test_a_run_without_kafka_shows_none_of_it(tmp_path):
    two_batches_and_a_third_ahead(tmp_path / "s.db")
    assert "logstream_kafka" not in scrape(tmp_path / "s.db").decode()
    out = refresh_outputs(tmp_path / "s.db", "all", "", None)
    assert find(output(out, "health"), "kafka-table") is None


def test_the_first_micro_batch_has_no_input_rate_on_the_page(tmp_path):
    """Issue 62 item 8: Kafka batch 0 said "0 rows/s in" in the queries panel while the tile
    said "–": Spark measures the input rate between two triggers, and the first has none."""
    store = two_batches_and_a_third_ahead(tmp_path / "s.db")
    listener = ProgressListener(store)
    event = SimpleNamespace(
        name="ingest",
        id="x",
        batchId=0,
        timestamp="2025-01-01T10:00:00.000Z",
        inputRowsPerSecond=0.0,
        processedRowsPerSecond=80.0,
        batchDuration=1,
        numInputRows=10,
        eventTime={},
        stateOperators=[],
        sources=[kafka(None, {"0": 10}, {"0": 10}, 10)],
    )
    listener.onQueryProgress(SimpleNamespace(progress=event))
    listener.flush()
    out = refresh_outputs(tmp_path / "s.db", "all", "", None)
    heading = find(output(out, "health"), "kafka-heading").children
    assert "(batch 0): – rows/s in," in heading, heading
