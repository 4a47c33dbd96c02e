"""A stop is atomic per micro-batch: whenever it comes, ``events/``, ``late_events/``,
``quarantine/`` and the store's ledger and counters hold the same micro-batches, and a restart
on the same state delivers the rest exactly once."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from tests.pipeline.helpers import config, nasa_lines, run_pipeline, run_to_end, write_chunks

from logstream.pipeline import Pipeline
from logstream.pipeline.run import _last_ran
from logstream.serving import ServingStore
from logstream.session import SPARK_LOG_LEVEL
from logstream.sinks.gate import StopGate, StopRequested, is_stop_requested

PER_FILE = 1000
BAD_LINE = "\x00\x00 not a log line"
#: An hour before the NASA day starts: behind the watermark from micro-batch 1 on.
LATE_LINE = '199.72.81.55 - - [08/Jul/1995:23:00:00 -0400] "GET /history/ HTTP/1.0" 200 6245'


@pytest.fixture(scope="module")
def chunks(nasa_day, tmp_path_factory) -> Path:
    """Three files, one micro-batch each; the second holds one late and one bad line."""
    lines = nasa_lines(nasa_day)[: 3 * PER_FILE]
    files = [lines[i : i + PER_FILE] for i in range(0, len(lines), PER_FILE)]
    files[1][10:10] = [BAD_LINE, LATE_LINE]
    directory = tmp_path_factory.mktemp("stop-input")
    for i, chunk in enumerate(files):
        write_chunks(chunk, directory / str(i), per_file=len(chunk), start_mtime=1_000_000 + i)
        (directory / str(i) / "chunk-0000.log").rename(directory / f"part-{i}.log")
        (directory / str(i)).rmdir()
    return directory


def batch_ids(root: Path) -> set[int]:
    ids = (int(p.name.split("=")[1]) for p in root.glob("batch_id=*"))
    return {i for i in ids if i >= 0}


def assert_outputs_agree_with_the_store(spark, tmp: Path) -> ServingStore:
    store = ServingStore(tmp / "store.db")
    ledger = {r["batch_id"]: r for r in store.query("SELECT * FROM ledger WHERE query = 'ingest'")}
    out = tmp / "out"
    for name, column in (
        ("events", "events"),
        ("late_events", "late_events"),
        ("quarantine", "quarantined"),
    ):
        published = batch_ids(out / name)
        assert published == {b for b, r in ledger.items() if r[column]}, name
        rows = spark.read.parquet(str(out / name)).count()
        assert rows == store.counters()[column] == sum(r[column] for r in ledger.values()), name
    return store


def run_in_thread(pipeline: Pipeline) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def target() -> None:
        try:
            pipeline.run()
        except BaseException as exc:  # surfaced by the test
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, errors


def restart_to_the_end(spark, tmp: Path, chunks: Path) -> None:
    run_pipeline(spark, tmp, chunks, queries="none")
    store = assert_outputs_agree_with_the_store(spark, tmp)
    assert store.counters() == {
        "events": 3 * PER_FILE,
        "late_events": 1,
        "quarantined": 1,
        "filtered": 0,
        "corrupt_files": 0,
        "duplicates": 0,
    }


STEPS = ["published_events", "published_late_events", "published_quarantine", "before_commit"]


@pytest.mark.parametrize("step", STEPS)
def test_a_stop_during_a_micro_batch_waits_for_its_commit(spark, chunks, tmp_path, step):
    cfg = config(tmp_path, chunks, trigger="1 second", queries="none", dedup=False)
    pipeline = Pipeline(spark, cfg)
    paused, stopping = threading.Event(), threading.Event()

    def hook(name: str, batch_id: int) -> None:
        if name == step and batch_id == 1:
            paused.set()
            # the stop is requested while this micro-batch is between two of its writes
            assert stopping.wait(60)
            assert pipeline.stop_requested.wait(60)

    pipeline.ingest.step_hook = hook
    thread, errors = run_in_thread(pipeline)
    assert paused.wait(120), "micro-batch 1 never reached the step"
    stopper = threading.Thread(target=pipeline.stop)
    stopper.start()
    stopping.set()
    stopper.join(120)
    thread.join(120)
    assert not stopper.is_alive() and not thread.is_alive() and not errors
    assert not any(q.isActive for q in pipeline.queries)
    store = assert_outputs_agree_with_the_store(spark, tmp_path)
    # the paused micro-batch was delivered whole, the next one not at all
    assert {r["batch_id"] for r in store.query("SELECT batch_id FROM ledger")} == {0, 1}
    restart_to_the_end(spark, tmp_path, chunks)


def test_a_micro_batch_starting_after_the_stop_request_writes_nothing(spark, chunks, tmp_path):
    pipeline = Pipeline(spark, config(tmp_path, chunks, trigger="1 second", queries="none"))

    def hook(name: str, batch_id: int) -> None:
        if name == "before_commit" and batch_id == 0:
            pipeline.gate.close(timeout=0)  # as stop() does first; micro-batch 0 is running

    pipeline.ingest.step_hook = hook
    thread, errors = run_in_thread(pipeline)
    ingest = None
    while ingest is None:  # the query object appears once started
        ingest = next(iter(pipeline.queries), None)
        thread.join(0.05)
    with pytest.raises(StreamingQueryException, match="StopRequested"):
        ingest.awaitTermination(120)
    assert is_stop_requested(ingest.exception())
    thread.join(120)
    assert not errors, errors  # a stop, not a failure
    pipeline.stop()
    store = assert_outputs_agree_with_the_store(spark, tmp_path)
    assert {r["batch_id"] for r in store.query("SELECT batch_id FROM ledger")} == {0}
    restart_to_the_end(spark, tmp_path, chunks)


def test_the_gate_refuses_new_batches_once_closed_and_waits_for_running_ones():
    gate = StopGate()
    entered, release = threading.Event(), threading.Event()

    def running_batch() -> None:
        with gate.batch("q", 7):
            entered.set()
            release.wait(10)

    worker = threading.Thread(target=running_batch)
    worker.start()
    assert entered.wait(10)
    assert gate.close(timeout=0.05) is False  # micro-batch 7 is still running
    with pytest.raises(StopRequested, match="micro-batch 8 of query 'q'"), gate.batch("q", 8):
        pass
    release.set()
    assert gate.close(timeout=10) is True
    worker.join()
    assert gate.running == 0


def test_a_micro_batch_serves_its_windows_before_its_ledger_commit(spark, chunks, tmp_path):
    """The windows a micro-batch changed reach the store as soon as its panes are merged (the
    dashboard shows them while it publishes outputs and merges sessions); what adds up — the
    counters, the ledger, the examples of late and bad lines — waits for its commit."""
    cfg = config(tmp_path, chunks, queries="traffic_per_minute", dedup=False)
    pipeline = Pipeline(spark, cfg)
    seen: dict[str, object] = {}

    def hook(name: str, batch_id: int) -> None:
        if name == "committed_views" and batch_id == 1:  # the batch with a late and a bad line
            store = ServingStore(tmp_path / "store.db", read_only=True)
            rows = store.query("SELECT requests FROM traffic_per_minute")
            seen.update(
                requests=sum(r["requests"] for r in rows),
                ledger=sorted(r["batch_id"] for r in store.query("SELECT batch_id FROM ledger")),
                counters={k: store.counters()[k] for k in ("events", "late_events", "quarantined")},
                examples=[
                    store.query(f"SELECT COUNT(*) AS n FROM {t}")[0]["n"]
                    for t in ("late_examples", "quarantine_examples")
                ],
            )

    pipeline.ingest.step_hook = hook
    run_to_end(pipeline)
    assert seen == {
        "requests": 2 * PER_FILE,  # micro-batches 0 and 1, on time
        "ledger": [0],
        "counters": {"events": PER_FILE, "late_events": 0, "quarantined": 0},
        "examples": [0, 0],
    }
    store = assert_outputs_agree_with_the_store(spark, tmp_path)
    assert store.counters()["events"] == 3 * PER_FILE  # and one late, one bad line
    rows = store.query("SELECT requests FROM traffic_per_minute")
    assert sum(r["requests"] for r in rows) == 3 * PER_FILE
    assert store.query("SELECT COUNT(*) AS n FROM late_examples")[0]["n"] == 1


def test_the_stop_waits_only_for_the_progress_of_micro_batches_that_ran(spark, chunks, tmp_path):
    """Spark updates ``lastProgress`` for a trigger that found no data without posting it to
    listeners: the stop must not wait for that progress (it waited 5 s after every empty
    trigger), and must wait for the last micro-batch that ran."""
    empty = tmp_path / "empty-input"
    empty.mkdir()
    idle = Pipeline(spark, config(tmp_path / "idle", empty))
    try:
        idle.run()
        [query] = [q for q in idle.queries if q.lastProgress]
        assert "addBatch" not in query.lastProgress["durationMs"]  # a trigger without data
        assert _last_ran(query.recentProgress) is None
    finally:
        idle.stop()
    assert idle.listener.history == []
    ran = Pipeline(spark, config(tmp_path / "ran", chunks))
    try:
        ran.run()
        query = next(q for q in ran.queries if q.name == "ingest")
        assert _last_ran(query.recentProgress)["batchId"] == 2  # three files, one a batch
    finally:
        ran.stop()
    assert ("ingest", 2) in {(r["query"], r["batch_id"]) for r in ran.listener.history}


def test_the_duration_stop_lets_the_running_micro_batch_finish_and_starts_no_other(
    spark, chunks, tmp_path
):
    cfg = config(tmp_path, chunks, trigger="1 second", queries="none", dedup=False)
    pipeline = Pipeline(spark, cfg)
    paused, said = threading.Event(), []

    def hook(name: str, batch_id: int) -> None:
        if name == "published_events" and batch_id == 0:
            paused.set()
            # --duration is reached while micro-batch 0 is between two of its writes
            said.append(pipeline.stop_for_duration("25s"))

    pipeline.ingest.step_hook = hook
    thread, errors = run_in_thread(pipeline)
    assert paused.wait(120), "micro-batch 0 never reached the step"
    thread.join(120)
    assert not thread.is_alive() and not errors, errors
    pipeline.stop()
    assert said == [
        "--duration 25s reached: stopping the queries; no micro-batch starts now "
        "(the micro-batch in progress finishes first)"
    ]
    store = assert_outputs_agree_with_the_store(spark, tmp_path)
    # the micro-batch in progress was delivered whole; none started after the line
    assert {r["batch_id"] for r in store.query("SELECT batch_id FROM ledger")} == {0}
    assert [r["batch_id"] for r in pipeline.listener.history] == [0]
    # between micro-batches: nothing in progress, and the line says nothing of it
    idle = Pipeline(spark, config(tmp_path / "idle", chunks, queries="none"))
    assert idle.stop_for_duration("2m").endswith("no micro-batch starts now")
    spark.sparkContext.setLogLevel(SPARK_LOG_LEVEL)  # as its stop() would
    restart_to_the_end(spark, tmp_path, chunks)
