"""The PostgreSQL serving store holds what the SQLite one holds, exactly once, through a crash.

One streaming run of the first 3,000 lines of the NASA day into SQLite and one into PostgreSQL (in
process, the shared session), then a ``logstream run --store postgresql://…`` killed at one
micro-batch and restarted. The server is the session's throwaway cluster (``conftest.py``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from tests.conftest import free_port
from tests.pipeline.helpers import config, nasa_lines, write_chunks
from tests.serving.test_store import batch

from logstream.cli import main
from logstream.dashboard.data import Filters, read_snapshot
from logstream.pipeline import Pipeline
from logstream.pipeline.ingest import FAULT_ENV
from logstream.serving import ServingStore, open_store
from logstream.serving.postgres import PostgresStore

#: Every table of the store; the columns a run does not decide (wall clock, paths, the
#: pipeline's random id, the ``seq``/``rowid`` counters) are left out of the comparison.
TABLES = {
    "ledger": "SELECT query, batch_id, events, late_events, quarantined FROM ledger",
    "pipeline_state": "SELECT key, value FROM pipeline_state "
    "WHERE key NOT IN ('pipeline_id', 'state_dir', 'output_dir')",
    "traffic_per_minute": "SELECT * FROM traffic_per_minute",
    "trending_pages": "SELECT * FROM trending_pages",
    "unique_visitors": "SELECT * FROM unique_visitors",
    "counters": "SELECT * FROM counters",
    "late_examples": "SELECT batch_id, event_time, watermark, client_host, url_path "
    "FROM late_examples",
    "quarantine_examples": "SELECT batch_id, raw_line, reason, detail FROM quarantine_examples",
    "dedup_batches": "SELECT * FROM dedup_batches",
    # the listener's rows: how many rows each micro-batch read (rates and times are clocks)
    "progress": "SELECT query, batch_id, num_input_rows FROM progress",
    "top_clients": "SELECT * FROM top_clients",
    "sessions": "SELECT batch_id, client_host, user_agent, session_start, session_end, "
    "duration_s, requests, pages, bytes, entry_page, exit_page, bounce FROM sessions",
    "session_stats": "SELECT * FROM session_stats",
    "traffic_by_dimension": "SELECT * FROM traffic_by_dimension",
    "daily_visitors": "SELECT * FROM daily_visitors",
    "alerts": "SELECT batch_id, series, metric, window_start, window_end, value, mean, std, "
    "z, direction FROM alerts",
    "bot_scores": "SELECT batch_id, window_start, window_end, client_host, requests, "
    "bot_probability, distinct_pages, error_ratio, static_share, robots, model_version "
    "FROM bot_scores",
    "bot_windows": "SELECT * FROM bot_windows",
}

#: 3,000 lines (00:00–01:53 event time) in two files: two ingest micro-batches
#: (``maxFilesPerTrigger`` 1); the second one's watermark closes windows and sessions.
LINES, PER_FILE = 3000, 1500
#: The run is SIGKILLed after the store committed micro-batch 0, before the analytics
#: snapshot: the restart replays batch 0, which the ledger makes a no-op, then runs batch 1.
KILL_AT = "before_snapshot:0"


def store_rows(store: ServingStore) -> dict[str, Counter]:
    return {
        name: Counter(tuple(r.values()) for r in store.query(sql)) for name, sql in TABLES.items()
    }


@pytest.fixture(scope="module")
def chunks(nasa_day, tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("pg-input")
    write_chunks(nasa_lines(nasa_day)[:LINES], directory, per_file=PER_FILE)
    return directory


def _run(spark, tmp: Path, chunks: Path, store: str) -> None:
    pipeline = Pipeline(spark, config(tmp, chunks, store=store))
    try:
        pipeline.run()
    finally:
        pipeline.stop()
        pipeline.store.close()


@pytest.fixture(scope="module")
def runs(spark, chunks, postgres_server, tmp_path_factory) -> tuple[Path, str]:
    """The same run into a SQLite file and into a PostgreSQL database."""
    sqlite_tmp = tmp_path_factory.mktemp("pg-vs-sqlite")
    _run(spark, sqlite_tmp, chunks, f"sqlite:///{sqlite_tmp / 'store.db'}")
    url = postgres_server.new_database()
    _run(spark, tmp_path_factory.mktemp("pg-run"), chunks, url)
    return sqlite_tmp / "store.db", url


def test_a_run_into_postgresql_stores_the_same_rows_as_into_sqlite(runs):
    path, url = runs
    sqlite_rows, pg_rows = store_rows(ServingStore(path, read_only=True)), None
    pg = open_store(url, read_only=True)
    try:
        pg_rows = store_rows(pg)
    finally:
        pg.close()
    assert sqlite_rows.keys() == pg_rows.keys()
    for name in TABLES:
        assert pg_rows[name] == sqlite_rows[name], name
    # a real run: every line counted once, two micro-batches in the ledger
    assert sum(r[2] for r in pg_rows["ledger"]) == LINES
    assert sorted(r[1] for r in pg_rows["ledger"] if r[0] == "ingest") == [0, 1]
    assert sum(r[2] for r in pg_rows["traffic_per_minute"]) == LINES
    for name in ("sessions", "session_stats", "trending_pages", "top_clients", "progress"):
        assert pg_rows[name], f"{name} is empty: the comparison proves nothing"


def test_the_dashboard_reads_the_same_snapshot_from_postgresql_as_from_sqlite(runs):
    path, url = runs
    filters = Filters(time_range="all")
    got, want = read_snapshot(url, filters), read_snapshot(path, filters)
    assert got.state == want.state == "ok", got.message
    assert got.store_path == url  # no password to mask here
    # the parts a clock or the file decides: the store's name, its version (commit times),
    # when it was read, and the progress rows' rates and times
    unset = {"store_path": "", "version": (), "read_at": "", "health": None, "stale": None}
    assert dataclasses.replace(got, **unset) == dataclasses.replace(want, **unset)
    assert got.traffic.total_all == LINES
    assert got.health.num_input_rows == want.health.num_input_rows


def test_logstream_dashboard_serves_a_postgresql_store(runs):
    """The README's ``logstream dashboard --store postgresql://…``: the page is served and
    names the store; the refreshes read it as the snapshot test above does."""
    url, port = runs[1], free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "logstream", "dashboard", "--store", url, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_dash-layout") as r:
                    layout = r.read().decode()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.2)  # waiting for the server to listen
    finally:
        proc.terminate()
        proc.wait(20)
    assert url in json.dumps(json.loads(layout))  # Dash writes "/" as \u002f


def _all_rows(store: ServingStore) -> dict[str, Counter]:
    ledger = store.query("SELECT * FROM ledger")  # commit times and rowids too
    return store_rows(store) | {"raw_ledger": Counter(map(str, ledger))}


def test_a_replayed_micro_batch_changes_nothing(postgres_url):
    store = open_store(postgres_url)
    try:
        assert store.commit_ingest_batch("ingest", batch(0)) is True
        assert store.commit_ingest_batch("ingest", batch(1, requests=5)) is True
        before = _all_rows(store)
        assert store.commit_ingest_batch("ingest", batch(1, requests=5)) is False
        assert store.commit_ingest_batch("ingest", batch(0)) is False
        assert _all_rows(store) == before
        assert store.counters()["events"] == 8
        assert store.max_event_time_ms() == 1000
        # the windows ahead of the ledger: nothing for a batch the ledger holds
        assert store.commit_ingest_views("ingest", batch(1, requests=9)) is False
        assert _all_rows(store) == before
        ahead = batch(2, requests=7)
        assert store.commit_ingest_views("ingest", ahead) is True
        assert store.counters()["events"] == 8 and store.max_event_time_ms() == 2000
        assert store.query("SELECT requests FROM traffic_per_minute")[0]["requests"] == 7
        assert store.commit_ingest_batch("ingest", ahead) is True
        assert store.counters()["events"] == 15
        # an older batch's windows after a newer one's (a zombie driver): nothing written
        assert store.commit_ingest_views("ingest", batch(4, requests=11)) is True
        assert store.commit_ingest_views("ingest", batch(3, requests=2)) is False
        assert store.query("SELECT requests FROM traffic_per_minute")[0]["requests"] == 11
    finally:
        store.close()


def _wait_for_lock_waiter(url: str) -> None:
    """Poll until a backend waits on a lock (the second writer, on the ledger's key)."""
    deadline = time.monotonic() + 20
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            (waiting,) = conn.execute(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            ).fetchone()
            if waiting:
                return
            assert time.monotonic() < deadline, "the second writer never waited on the ledger"
            time.sleep(0.05)


@pytest.mark.parametrize("first_fails", [False, True])
def test_two_concurrent_writers_of_one_micro_batch_apply_it_once(postgres_url, first_fails):
    """Writer A claims batch 7 and holds its transaction open; writer B, on another
    connection, waits on the ledger's primary key. A commits (B then claims nothing) or
    fails and rolls back (B then applies the batch): either way it counts once."""
    stores = [PostgresStore(postgres_url), PostgresStore(postgres_url)]
    applied, release = threading.Event(), threading.Event()
    results: dict[str, bool | Exception] = {}

    def bump(conn) -> None:
        conn.execute(
            "INSERT INTO counters(name, value) VALUES ('events', 1) "
            "ON CONFLICT(name) DO UPDATE SET value = counters.value + excluded.value"
        )

    def slow(conn) -> None:
        bump(conn)
        applied.set()
        assert release.wait(30)
        if first_fails:
            raise RuntimeError("writer A dies mid-batch")

    def write(name: str, store: ServingStore, apply) -> None:
        try:
            results[name] = store.commit_batch("ingest", 7, 1, apply)
        except Exception as exc:  # the outcome is asserted below
            results[name] = exc

    a = threading.Thread(target=write, args=("a", stores[0], slow))
    b = threading.Thread(target=write, args=("b", stores[1], bump))
    try:
        a.start()
        assert applied.wait(30)
        b.start()
        _wait_for_lock_waiter(postgres_url)
        release.set()
        a.join(30)
        b.join(30)
        if first_fails:
            assert isinstance(results["a"], RuntimeError) and results["b"] is True
        else:
            assert results == {"a": True, "b": False}
        assert stores[0].counters()["events"] == 1
        assert stores[0].query("SELECT COUNT(*) AS n FROM ledger")[0]["n"] == 1
    finally:
        release.set()
        for store in stores:
            store.close()


def _cli(tmp: Path, chunks: Path, url: str) -> list[str]:
    return [
        sys.executable, "-m", "logstream", "run", "--input-dir", str(chunks),
        "--output-dir", str(tmp / "out"), "--state-dir", str(tmp / "state"),
        "--store", url, "--trigger", "available-now", "--max-files-per-trigger", "1",
        "--format", "common", "--quiet",
    ]  # fmt: skip


def test_a_run_killed_mid_way_and_restarted_ends_identical_to_an_uninterrupted_one(
    spark, runs, chunks, postgres_server, tmp_path
):
    """``logstream run --store postgresql://…`` SIGKILLed (process group: driver and JVM)
    after its store commit, then restarted on the same state (in process, as ``logstream
    run`` runs it: :class:`Pipeline`; one JVM start less)."""
    url = postgres_server.new_database()
    env = {**os.environ, "LOGSTREAM_SPARK_UI": "false"}
    proc = subprocess.Popen(
        _cli(tmp_path, chunks, url),
        env={**env, FAULT_ENV: KILL_AT},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert proc.wait(timeout=300) == -signal.SIGKILL, f"no fault injected at {KILL_AT}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    store = open_store(url, read_only=True)
    try:
        assert store.query("SELECT MAX(batch_id) AS b FROM ledger")[0]["b"] == 0
        _run(spark, tmp_path, chunks, url)
        got = store_rows(store)
    finally:
        store.close()
    reference = open_store(runs[1], read_only=True)
    try:
        want = store_rows(reference)
    finally:
        reference.close()
    # the killed start's progress rows stay (shown, never counted); the rest is identical
    for name in TABLES.keys() - {"progress"}:
        assert got[name] == want[name], name
    assert got["progress"].keys() >= want["progress"].keys()


def test_a_bad_or_unreachable_postgresql_url_is_rejected_at_start(tmp_path, chunks, capsys):
    closed = f"postgresql://nobody@127.0.0.1:{free_port()}/logstream"
    args = ["run", "--input-dir", str(chunks), "--output-dir", str(tmp_path / "out"),
            "--state-dir", str(tmp_path / "state"), "--format", "common"]  # fmt: skip
    assert main([*args, "--store", closed]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert closed in err and "cannot connect to PostgreSQL" in err and "--store" in err
    bad_port = "postgresql://me:secret@127.0.0.1:notaport/db"
    assert main([*args, "--store", bad_port]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "postgresql://me:***@127.0.0.1:notaport/db" in err and "secret" not in err
    assert main([*args, "--store", "mysql://me@db/logs"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "'mysql://me@db/logs' is not supported" in err and "postgresql://" in err
    assert main(["dashboard", "--store", closed, "--port", "0"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert closed in err and "cannot connect to PostgreSQL" in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "state").exists()


def _backends(url: str) -> int:
    """Client connections to the database of ``url`` other than this one."""
    with psycopg.connect(url, autocommit=True) as conn:
        (n,) = conn.execute(
            "SELECT COUNT(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    return n


def _settled_backends(url: str, expected: int) -> int:
    """:func:`_backends`, polled for up to 10 s until it equals ``expected`` (a closed
    backend leaves pg_stat_activity a moment after its client closed it)."""
    deadline = time.monotonic() + 10
    while (n := _backends(url)) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return n


def test_prometheus_scrapes_of_a_postgresql_store_share_one_pool(postgres_url):
    from logstream.monitoring.prometheus import scrape
    from logstream.serving import shared_reader

    store = open_store(postgres_url)
    try:
        assert store.commit_ingest_batch("ingest", batch(0)) is True
    finally:
        store.close()
    assert _settled_backends(postgres_url, 0) == 0
    counts = []
    for _ in range(5):
        text = scrape(postgres_url).decode()
        assert "logstream_up 1.0" in text
        assert "logstream_events_total 3.0" in text
        counts.append(_backends(postgres_url))
    # one pool for the process (a pool per scrape, never closed, left 1, 2, 3, 4, 5)
    assert counts == [counts[0]] * 5 and counts[0] >= 1, counts
    assert shared_reader(postgres_url) is shared_reader(postgres_url)


def test_a_refused_run_leaves_nothing_in_a_new_postgresql_database(postgres_url, tmp_path):
    """Issue 54 item 30: ``claim_store`` created the store's schema in PostgreSQL before it
    refused a store that does not belong with the checkpoint; as with SQLite (no file), a
    refused run leaves nothing behind."""
    from logstream.errors import ConfigError
    from logstream.pipeline.identity import claim_store

    state = tmp_path / "state"
    (state / "ingest" / "commits").mkdir(parents=True)
    (state / "ingest" / "commits" / "0").write_text("v1\n{}\n")  # a committed micro-batch
    with pytest.raises(ConfigError, match="is new, but the checkpoint"):
        claim_store(state, tmp_path / "out", postgres_url)
    with psycopg.connect(postgres_url) as conn:
        (tables,) = conn.execute(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()
    assert tables == 0
    # a run that may go on gets its schema, and its id
    fresh = tmp_path / "fresh"
    pipeline_id = claim_store(fresh / "state", fresh / "out", postgres_url)
    assert (fresh / "state" / "pipeline_id").read_text().strip() == pipeline_id
