"""WebhookWriter against a local HTTP server, on the real NASA July 1995 lines."""

from __future__ import annotations

import gzip
import shutil
from collections import Counter

import pytest

from logstream.errors import ConfigError
from logstream.parsing import COMMON, compile_format, events, parse
from logstream.sinks.webhook import WebhookWriter, json_safe, post_batch
from logstream.sources.files import read_lines
from tests.conftest import NASA_JUL_2000, data_file
from tests.sinks.hook_server import HookServer

FAST = {"backoff_s": 0.01, "timeout_s": 5.0}


def row_key(row: dict) -> tuple:
    return (
        row["client_host"],
        row["event_time"],
        row["url_path"],
        row["status"],
        row["bytes_sent"],
    )


@pytest.fixture(scope="module")
def nasa_events(spark):
    """The parsed events of the 2,000 NASA lines, cached, and their JSON rows as a Counter."""
    df = events(parse(read_lines(spark, [data_file(NASA_JUL_2000)]), compile_format(COMMON)))
    df = df.cache()
    expected = Counter(row_key(json_safe(r)) for r in df.collect())
    yield df, expected
    df.unpersist()


def test_every_line_of_the_file_is_an_event(nasa_events):
    _, expected = nasa_events
    with gzip.open(data_file(NASA_JUL_2000), "rt", encoding="latin-1") as f:
        lines = sum(1 for _ in f)
    assert sum(expected.values()) == lines == 2000


def test_streaming_foreach_delivers_every_row_once_through_500s(spark, tmp_path, nasa_events):
    _, expected = nasa_events
    source = tmp_path / "in"
    source.mkdir()
    shutil.copy(data_file(NASA_JUL_2000), source / NASA_JUL_2000)
    lines = spark.readStream.text(str(source)).selectExpr("value", "'x' AS source_file")
    stream = events(parse(lines, compile_format(COMMON)))
    ledger = tmp_path / "ledger"
    with HookServer(fail_first=3) as server:
        writer = WebhookWriter(server.url, name="events", ledger_dir=str(ledger), **FAST)
        query = (
            stream.writeStream.foreach(writer)
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            query.awaitTermination(120)
        finally:
            query.stop()
        keys = server.keys
        received = server.unique_rows()
    assert server.failed == 3
    assert len(keys) == len(set(keys)) == 4  # 2,000 rows in chunks of 500, no duplicate
    assert all(key.startswith("events-0-0-") for key in keys)
    assert Counter(row_key(r) for r in received) == expected
    assert received[0]["event_time"].endswith("Z")
    assert writer.delivered(partition=0, epoch=0)
    assert (ledger / "events" / "epoch=0-partition=0.done").is_file()


def test_a_replayed_batch_is_skipped_by_the_ledger(tmp_path, nasa_events):
    df, expected = nasa_events
    ledger = str(tmp_path / "ledger")
    with HookServer() as server:
        post_batch(df, server.url, 7, "events", ledger_dir=ledger, **FAST)
        first = server.keys
        post_batch(df, server.url, 7, "events", ledger_dir=ledger, **FAST)
        assert server.keys == first == [f"events-7-0-{chunk}" for chunk in range(4)]
        received = server.unique_rows()
    assert Counter(row_key(r) for r in received) == expected


def test_the_ledger_keeps_the_last_epochs_only_and_still_skips_a_replay(tmp_path, nasa_events):
    df, _ = nasa_events
    ledger = tmp_path / "ledger"
    part = df.limit(600).repartition(2)  # two partitions: partition 1's markers pruned too
    options = {"ledger_dir": str(ledger), "partitions": 2, "retain_epochs": 3, **FAST}
    with HookServer() as server:
        for epoch in range(8):
            post_batch(part, server.url, epoch, "events", **options)
        kept = sorted(p.name for p in (ledger / "events").iterdir())
        epochs = {int(n.split("-")[0].removeprefix("epoch=")) for n in kept}
        # epoch 7's partition 0 pruned what is 3 epochs older than the slower partition's
        # newest (6 or 7: the two partitions close in either order)
        assert {4, 5, 6, 7} <= epochs <= {3, 4, 5, 6, 7}, kept
        sent = len(server.keys)
        post_batch(part, server.url, 7, "events", **options)  # the newest epoch replayed
        assert len(server.keys) == sent
    writer = WebhookWriter("http://127.0.0.1:9/h", name="events", ledger_dir=str(ledger))
    assert writer.prune(100) == len(kept)
    assert list((ledger / "events").iterdir()) == []


def test_a_slow_partition_holds_back_the_ledger_pruning(tmp_path):
    # the ForeachWriter protocol by hand, no rows (nothing is POSTed): partition 1 stalls
    ledger = tmp_path / "ledger"
    writer = WebhookWriter(
        "http://127.0.0.1:9/h", name="alerts", ledger_dir=str(ledger), retain_epochs=3
    )

    def deliver(partition: int, epoch: int) -> None:
        assert writer.open(partition, epoch) is True
        writer.close(None)

    for epoch in range(10):
        deliver(0, epoch)
        if epoch <= 2:
            deliver(1, epoch)
    assert len(list((ledger / "alerts").iterdir())) == 13  # partition 1 is at epoch 2
    for epoch in range(3, 10):
        deliver(1, epoch)
    deliver(0, 10)  # newest: partition 0 at 10, partition 1 at 9 -> keep epochs from 6
    kept = sorted(p.name for p in (ledger / "alerts").iterdir())
    assert kept == sorted(
        [f"epoch={e}-partition=0.done" for e in range(6, 11)]
        + [f"epoch={e}-partition=1.done" for e in range(6, 10)]
    )
    assert writer.open(1, 9) is False  # a replay of a kept epoch is still skipped


def test_a_batch_that_failed_half_way_resends_the_same_keys(tmp_path, nasa_events):
    df, expected = nasa_events
    ledger = str(tmp_path / "ledger")
    with HookServer() as server:
        server.fail_keys = {"events-3-0-2"}
        with pytest.raises(Exception, match="WebhookDeliveryError"):
            post_batch(df, server.url, 3, "events", ledger_dir=ledger, retries=1, **FAST)
        assert server.keys == ["events-3-0-0", "events-3-0-1"]
        server.fail_keys = set()
        post_batch(df, server.url, 3, "events", ledger_dir=ledger, **FAST)
        keys = server.keys
        received = server.unique_rows()
    # chunks 0 and 1 arrived twice with the same key and the same rows; a receiver that
    # de-duplicates by Idempotency-Key holds every row exactly once
    assert Counter(keys) == {
        "events-3-0-0": 2,
        "events-3-0-1": 2,
        "events-3-0-2": 1,
        "events-3-0-3": 1,
    }
    assert Counter(row_key(r) for r in received) == expected


def test_a_4xx_fails_at_once_with_the_status(tmp_path, nasa_events):
    df, _ = nasa_events
    with HookServer(fail_first=100, fail_status=404) as server:
        with pytest.raises(Exception, match=r"refused events-1-0-0 with HTTP 404"):
            post_batch(df.limit(5), server.url, 1, "events", **FAST)
        assert server.failed == 1  # not retried


def test_bad_options_are_refused_at_construction():
    with pytest.raises(ConfigError, match="'kafka://x/y' is not an http"):
        WebhookWriter("kafka://x/y")
    with pytest.raises(ConfigError, match="retain_epochs=0"):
        WebhookWriter("http://127.0.0.1:1/hook", retain_epochs=0)
    with pytest.raises(ConfigError, match="batch_rows=0"):
        WebhookWriter("http://127.0.0.1:1/hook", batch_rows=0)
    with pytest.raises(ConfigError, match="name 'a b'"):
        WebhookWriter("http://127.0.0.1:1/hook", name="a b")
