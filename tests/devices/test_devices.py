"""The device pipeline on the real UCI occupancy readings (three files as three devices):
per-device windows and threshold alerts equal a pandas computation over the same files;
a device goes silent and offline exactly when a gap cut out of the real data says so, across
micro-batches; occupancy changes come with the duration of the state they end; bad lines
are quarantined; a bad registry or option stops at start."""

from __future__ import annotations

import gzip
import itertools
import os
import threading
from pathlib import Path

import pandas as pd
import pytest

from logstream.cli import main
from logstream.dashboard.devices import devices_figure, devices_panel, read_devices
from logstream.devices import DeviceConfig, load_registry, run_device_queries
from logstream.errors import ConfigError
from logstream.session import is_worker_start_timeout
from tests.conftest import data_file

FILES = ("occupancy_datatest", "occupancy_datatraining", "occupancy_datatest2")
REGISTRY = Path(__file__).resolve().parents[2] / "examples" / "reference" / "devices.csv"
METRICS = ("temperature", "humidity", "light", "co2", "humidity_ratio")


def frame(name: str) -> pd.DataFrame:
    df = pd.read_csv(data_file(f"{name}.txt.gz"))
    df.columns = ["time", *METRICS, "occupancy"]
    df["time"] = pd.to_datetime(df["time"])
    df["device"] = name
    return df


def run(spark, cfg: DeviceConfig) -> dict:
    """Run to the end; the last progress of each query, by name."""
    progress = {}
    for q in run_device_queries(spark, cfg):
        assert q.exception() is None
        progress[q.name] = q.lastProgress
    return progress


@pytest.fixture(scope="module")
def three(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("devices")
    landing = tmp / "in"
    landing.mkdir()
    with gzip.open(landing / "broken.txt.gz", "wt") as fh:  # one bad line, one good
        fh.write('"2015-02-02 10:00:00",abc\n"2015-02-02 10:00:00",21,27,0,500,0.004,0\n')
    paths = [landing / "broken.txt.gz"]
    for name in FILES:  # in time order
        paths.append(landing / f"{name}.txt.gz")
        paths[-1].write_bytes(data_file(f"{name}.txt.gz").read_bytes())
    for i, path in enumerate(paths):  # one file per micro-batch, in this order
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    cfg = DeviceConfig.build(
        input=str(landing),
        registry=REGISTRY,
        output_dir=tmp / "out",
        state_dir=tmp / "state",
        max_files_per_trigger=1,
    )
    progress = run(spark, cfg)

    def read(name: str) -> pd.DataFrame:
        return spark.read.parquet(str(cfg.output_dir / name)).toPandas()

    names = ("device_windows", "device_alerts", "device_events", "alerts_near_changes")
    return {n: read(n) for n in (*names, "quarantine")} | {"progress": progress, "cfg": cfg}


def test_windows_equal_pandas(three):
    readings = pd.concat([frame(n) for n in FILES])
    readings["window_start"] = readings["time"].dt.floor("5min")
    expected = readings.groupby(["device", "window_start"]).agg(
        readings=("time", "size"),
        **{f"{m}_{s}": (m, s) for m in METRICS for s in ("mean", "min", "max")},
    )
    got = three["device_windows"]
    got = got[got["device"].isin(FILES)].set_index(["device", "window_start"]).sort_index()
    # every window the final watermark (newest reading − 2 minutes) passed
    final = readings["time"].max() - pd.Timedelta(minutes=2)
    closed = expected[expected.index.get_level_values(1) + pd.Timedelta(minutes=5) <= final]
    assert len(got) == len(closed) > 3000
    assert (got["readings"] == closed["readings"]).all()
    for column in closed.columns[1:]:
        assert got[column].to_numpy() == pytest.approx(closed[column].to_numpy(), rel=1e-12)
    rooms = dict(zip(got.index.get_level_values(0), got["room"], strict=True))
    assert rooms["occupancy_datatest"] == "office (2–4 Feb 2015)"  # the registry join


def test_threshold_alerts_equal_pandas(three):
    readings = pd.concat([frame(n) for n in FILES])
    expected = sorted(
        [
            (r.device, r.time, "temperature", r.temperature)
            for r in readings.itertuples()
            if r.temperature > 24
        ]
        + [(r.device, r.time, "co2", r.co2) for r in readings.itertuples() if r.co2 > 1200]
    )
    got = three["device_alerts"]
    got = sorted(zip(got["device"], got["event_time"], got["metric"], got["value"], strict=True))
    assert got == expected and len(got) > 100


def test_bad_lines_are_quarantined_with_their_text(three):
    q = three["quarantine"]
    assert list(q["raw_line"]) == ['"2015-02-02 10:00:00",abc']
    assert list(q["reason"]) == ["bad_reading"]
    assert q["source_file"].iloc[0].endswith("broken.txt.gz")


def expected_status(times: pd.Series, silent_min: int, offline_min: int) -> list[tuple]:
    """Status transitions from the gaps between consecutive readings (an independent rule)."""
    out = []
    ordered = times.sort_values().tolist()
    for prev, nxt in itertools.pairwise(ordered):
        gap = nxt - prev
        if gap > pd.Timedelta(minutes=silent_min):
            out.append(("online", "silent", prev + pd.Timedelta(minutes=silent_min)))
            last = "silent"
            if gap > pd.Timedelta(minutes=offline_min):
                out.append(("silent", "offline", prev + pd.Timedelta(minutes=offline_min)))
                last = "offline"
            out.append((last, "online", nxt))
    return out


def test_occupancy_changes_with_durations(three):
    events = three["device_events"]
    test = frame("occupancy_datatest").sort_values("time")
    changes = test[test["occupancy"].diff().fillna(0) != 0]
    starts = [test["time"].iloc[0], *changes["time"]]
    expected = [
        (
            ("free", "occupied")[int(1 - r.occupancy)],
            ("free", "occupied")[int(r.occupancy)],
            r.time,
            (r.time - start).total_seconds(),
        )
        for r, start in zip(changes.itertuples(), starts, strict=False)
    ]
    got = events[(events["device"] == "occupancy_datatest") & (events["kind"] == "occupancy")]
    got = list(zip(got["from_state"], got["to_state"], got["at"], got["duration_s"], strict=True))
    assert sorted(got, key=lambda e: e[2]) == expected and len(expected) > 10


@pytest.fixture(scope="module")
def cut(spark, tmp_path_factory):
    """Device A: datatest with two gaps cut out (16 and 5 minutes); device B: all of datatest,
    a heartbeat that moves the watermark on; device C: the first 300 readings only, then
    nothing (only a timer can take it offline). Four files, four micro-batches: A's first gap
    is closed by a timer (batches 1 and 2 hold only B, whose readings take the watermark past
    A's deadlines), the second lies inside one file (found while walking its readings)."""
    tmp = tmp_path_factory.mktemp("devices-cut")
    lines = gzip.open(data_file("occupancy_datatest.txt.gz"), "rt").read().splitlines()[1:]
    a_lines = lines[:600] + lines[616:1500] + lines[1505:]
    files = [
        [("A", x) for x in lines[:600]]
        + [("B", x) for x in lines[:600]]
        + [("C", x) for x in lines[:300]],
        [("B", x) for x in lines[600:613]],
        [("B", x) for x in lines[613:617]],
        [("A", x) for x in a_lines[600:]] + [("B", x) for x in lines[617:]],
    ]
    landing = tmp / "in"
    landing.mkdir()
    for i, rows in enumerate(files):
        path = landing / f"part-{i}.csv"
        path.write_text("".join(f"{device},{line}\n" for device, line in rows))
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    cfg = DeviceConfig.build(
        input=str(landing),
        output_dir=tmp / "out",
        state_dir=tmp / "state",
        max_files_per_trigger=1,
    )
    run(spark, cfg)
    events = spark.read.parquet(str(cfg.output_dir / "device_events")).toPandas()
    times = pd.to_datetime(pd.Series([line.split(",")[0].strip('"') for line in a_lines]))
    return events, times


def test_offline_fires_exactly_when_silent_longer_than_n_minutes(cut):
    events, times = cut
    status = events[(events["kind"] == "status") & (events["device"] == "A")].sort_values("at")
    got = list(zip(status["from_state"], status["to_state"], status["at"], strict=True))
    expected = expected_status(times, silent_min=3, offline_min=10)
    assert got == expected
    offline = [e for e in got if e[1] == "offline"]
    assert len(offline) == 1  # the 16-minute gap; the 5-minute one is only silent
    assert offline[0][2] == times.iloc[599] + pd.Timedelta(minutes=10)
    assert set(status["room"]) == {"unknown"}  # no registry
    # C stopped for good: a timer takes it silent, then offline, dated by its last reading
    c = events[(events["device"] == "C") & (events["kind"] == "status")].sort_values("at")
    last = times.iloc[299]
    assert list(zip(c["to_state"], c["at"], strict=True)) == [
        ("silent", last + pd.Timedelta(minutes=3)),
        ("offline", last + pd.Timedelta(minutes=10)),
    ]


def test_bad_registry_and_options_stop_at_start(tmp_path, capsys):
    bad = tmp_path / "registry.csv"
    bad.write_text("device,room,co2_max\nd1,r1,lots\n")
    with pytest.raises(ConfigError, match="row 1: co2_max 'lots' is not a number"):
        load_registry(bad)
    assert load_registry(REGISTRY)[0][:3] == (
        "occupancy_datatest",
        "office (2–4 Feb 2015)",
        "multisensor",
    )
    args = ["devices", "run", "--input", str(tmp_path)]
    assert main([*args, "--silent-after", "20 minutes"]) == 2
    assert "must be positive and at most --offline-after" in capsys.readouterr().err
    assert main([*args, "--registry", str(bad)]) == 2
    assert main(["devices", "run", "--input", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_replayed_readings_give_the_same_windows(spark, three, tmp_path):
    """``logstream replay --device-from-file`` paces the real readings by their own time into
    a directory, one device per file; the pipeline over it equals the one over the files."""
    files = [str(data_file(f"{name}.txt.gz")) for name in FILES]  # in time order
    landing = tmp_path / "sensors"
    args = ["replay", *files, "--dir", str(landing), "--device-from-file", "--quiet"]
    assert main([*args, "--speedup", "100000000"]) == 0
    first = next(iter(sorted(landing.iterdir()))).read_text().splitlines()
    assert first[1].startswith('occupancy_datatest,"2015-02-02 14:19:00",23.7,')
    cfg = DeviceConfig.build(
        input=str(landing),
        registry=REGISTRY,
        output_dir=tmp_path / "out",
        state_dir=tmp_path / "state",
    )
    run(spark, cfg)
    got = spark.read.parquet(str(cfg.output_dir / "device_windows")).toPandas()
    want = three["device_windows"]
    want = want[want["device"].isin(FILES)]
    key = ["device", "window_start"]
    got = got.sort_values(key).reset_index(drop=True)
    want = want.sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_exact=False, rtol=1e-12)


def occupancy_changes(name: str) -> list[tuple]:
    """(device, to_state, at) of every change of the occupancy label, with pandas."""
    df = frame(name).sort_values("time")
    changed = df[df["occupancy"].diff().fillna(0) != 0]
    names = ("free", "occupied")
    return [(name, names[int(r.occupancy)], r.time) for r in changed.itertuples()]


def test_stream_stream_join_equals_a_batch_join_with_bounded_state(three):
    alerts = three["device_alerts"]
    changes = [c for name in FILES for c in occupancy_changes(name)]
    within = pd.Timedelta(minutes=10)
    expected = sorted(
        (a.device, a.event_time, a.metric, to, at)
        for a in alerts.itertuples()
        for device, to, at in changes
        if device == a.device and abs(a.event_time - at) <= within
    )
    got = three["alerts_near_changes"]
    got = sorted(
        zip(
            got["device"],
            got["alert_time"],
            got["metric"],
            got["occupancy"],
            got["changed_at"],
            strict=True,
        )
    )
    assert got == expected and len(got) > 50
    # the join keeps only what the watermarks have not passed: a few rows, not the 1,000s
    # of alerts and changes it saw
    (join,) = [
        op
        for op in three["progress"]["alerts_near_changes"]["stateOperators"]
        if op["operatorName"].startswith("symmetricHashJoin")
    ]
    assert join["numRowsTotal"] < 60 < len(alerts)


def test_the_dashboard_shows_the_devices(three):
    """The devices panel reads the committed Parquet files (the file sink's log) without
    Spark: each device's newest status and window, its alerts, and the CO2 line."""
    view = read_devices(three["cfg"].output_dir)
    by_device = {d["device"]: d for d in view.devices}
    events = three["device_events"]
    windows = three["device_windows"]
    for name in FILES:
        status = events[(events["device"] == name) & (events["kind"] == "status")]
        newest = status.sort_values("at")["to_state"].tolist()[-1:] or ["online"]
        w = windows[windows["device"] == name].sort_values("window_start")
        row = by_device[name]
        assert (row["status"], row["room"]) == (newest[0], w.iloc[-1]["room"])
        assert row["co2_mean"] == w.iloc[-1]["co2_mean"]
        assert row["alerts"] == int((three["device_alerts"]["device"] == name).sum())
        assert view.co2[name][1] == w["co2_mean"].tolist()
    # datatest and datatraining stopped long before the newest reading: offline
    assert by_device["occupancy_datatest"]["status"] == "offline"
    assert len(view.alerts) == 10 and len(view.near_changes) == 10
    panel = devices_panel(view)
    assert "occupancy_datatest2" in str(panel) and devices_figure(view)["data"]


def test_the_dashboard_page_has_the_devices_row(three, tmp_path):
    from logstream.dashboard.app import create_app

    app = create_app(tmp_path / "none.db", devices_dir=three["cfg"].output_dir)
    page = str(app.layout())
    assert "id='devices'" in page and "id='graph-devices'" in page
    assert "id='devices'" not in str(create_app(tmp_path / "none.db").layout())


def test_json_readings_parse_like_csv(spark):
    from logstream.devices import parse_readings

    lines = [
        '{"device": "d1", "time": "2015-02-04 17:51:00", "temperature": 23.18, "humidity": 27.272,'
        ' "light": 426, "co2": 721.25, "humidity_ratio": 0.0048, "occupancy": 1}',
        '{"device": "d1", "time": "2015-02-04T17:52:00+01:00", "temperature": "23.15"}',
        '{"device": "d1", "time": "yesterday", "temperature": 20}',
        "not json",
    ]
    frame = spark.createDataFrame(
        [(v, "file:///x/readings.jsonl") for v in lines], "value string, source_file string"
    )
    rows = parse_readings(frame, "json").orderBy("raw_line").collect()
    good = [r for r in rows if r["quarantine_reason"] is None]
    assert [
        (r["device"], r["event_time"].isoformat(), r["temperature"], r["occupancy"]) for r in good
    ] == [
        ("d1", "2015-02-04T17:51:00", 23.18, 1),
        ("d1", "2015-02-04T16:52:00", 23.15, None),  # the offset read, UTC kept
    ]
    assert sorted(r["raw_line"] for r in rows if r["quarantine_reason"] == "bad_reading") == [
        "not json",
        '{"device": "d1", "time": "yesterday", "temperature": 20}',
    ]


def test_registry_with_an_unknown_column_is_refused_naming_it_and_the_known_ones(tmp_path, capsys):
    typo = tmp_path / "registry.csv"
    typo.write_text("device,room,temprature_max\nd1,r1,24\n")
    with pytest.raises(ConfigError) as err:
        load_registry(typo)
    message = str(err.value)
    assert "unknown column 'temprature_max'" in message
    assert "device, room, type, temperature_max, humidity_max" in message
    empty = tmp_path / "empty.csv"  # a header alone is checked too
    empty.write_text("device,room,co2max\n")
    with pytest.raises(ConfigError, match="unknown column 'co2max'"):
        load_registry(empty)
    extra = tmp_path / "extra.csv"
    extra.write_text("device,room\nd1,r1,24\n")
    with pytest.raises(ConfigError, match="row 1 has more fields than the header"):
        load_registry(extra)
    # the command stops at start, before Spark, with the same message
    assert main(["devices", "run", "--input", str(tmp_path), "--registry", str(typo)]) == 2
    assert "temprature_max" in capsys.readouterr().err


def test_quarantined_readings_say_which_field_failed_and_why(spark, three):
    from logstream.devices import parse_readings

    # the pipeline's quarantine output (the fixture's broken file: a line of two fields)
    assert list(three["quarantine"]["detail"]) == [
        "expected 7 fields (8 with a leading device), got 2"
    ]
    csv_lines = [
        '"2015-02-02 10:00:00",abc,27,0,500,0.004,0',
        '"02/02/2015",21,27,0,500,0.004,0',
        '"2015-02-02 10:00:00",,27,0,500,0.004,0',
        ' ,"2015-02-02 10:00:00",21,27,0,500,0.004,0',
        '"2015-02-02 10:00:00",21,27,0,500,0.004,0',
    ]
    json_lines = [
        "not json",
        '{"device": "d1", "time": "yesterday", "temperature": 20}',
        '{"device": "d1", "time": "2015-02-04 17:51:00"}',
        '{"device": "d1", "time": "2015-02-04 17:51:00", "temperature": "hot"}',
    ]

    def details(lines: list[str], fmt: str) -> dict[str, str | None]:
        frame = spark.createDataFrame(
            [(v, "file:///x/d0.txt") for v in lines], "value string, source_file string"
        )
        rows = parse_readings(frame, fmt, detail=True).collect()
        for r in rows:  # a detail exactly for the quarantined lines
            assert (r["quarantine_detail"] is None) == (r["quarantine_reason"] is None)
        return {r["raw_line"]: r["quarantine_detail"] for r in rows}

    assert list(details(csv_lines, "csv").values()) == [
        "Temperature: 'abc' is not a number",
        "Date: '02/02/2015' is not a time (yyyy-MM-dd HH:mm:ss or ISO 8601 with an offset)",
        "Temperature: missing",
        "device: missing",
        None,
    ]
    assert list(details(json_lines, "json").values()) == [
        "not a JSON object",
        "time: 'yesterday' is not a time (yyyy-MM-dd HH:mm:ss or ISO 8601 with an offset)",
        "temperature: missing",
        "temperature: 'hot' is not a number",
    ]


class FakeQuery:
    """A stand-in for a StreamingQuery: ended, with ``error`` or none."""

    def __init__(self, name: str, error: Exception | None = None) -> None:
        self.name, self.error, self.isActive, self.stopped = name, error, False, False

    def exception(self) -> Exception | None:
        return self.error

    def stop(self) -> None:
        self.stopped = True


def test_a_query_whose_python_worker_did_not_connect_back_is_restarted(monkeypatch):
    """Spark 4.2 waits 10 s for the Python worker of a transformWithStateInPandas query's
    first micro-batch; on a busy machine it can fail that query (seen in CI): the query is
    restarted from its checkpoint, at most WORKER_RESTARTS times, and any other failure is
    left to the caller."""
    from logstream.devices import pipeline

    timeout = RuntimeError("[STREAM_FAILED] ... Python worker failed to connect back. SQLSTATE")
    started = []

    def restart(spark, cfg, only=None):
        (name,) = only
        started.append(name)
        # the first restart fails the same way again, the second runs through
        return [FakeQuery(name, timeout if started.count(name) == 1 else None)]

    monkeypatch.setattr(pipeline, "start_device_queries", restart)
    said: list[str] = []
    queries = [FakeQuery("device_windows"), FakeQuery("device_events", timeout)]
    pipeline._await_device_queries(None, None, queries, threading.Event(), None, said.append)
    assert started == ["device_events", "device_events"]
    assert [q.exception() for q in queries] == [None, None]
    assert said[1].startswith("device query device_events: a Python worker did not connect back")
    assert said[1].endswith("(2 of 3)")

    other = RuntimeError("[STREAM_FAILED] division by zero")
    started.clear()
    queries = [FakeQuery("device_events", other)]
    pipeline._await_device_queries(None, None, queries, threading.Event(), None, said.append)
    assert started == [] and queries[0].exception() is other

    failing = [FakeQuery("x", timeout)]
    monkeypatch.setattr(pipeline, "start_device_queries", lambda spark, cfg, only: failing)
    queries = [FakeQuery("x", timeout)]
    pipeline._await_device_queries(None, None, queries, threading.Event(), None, said.append)
    assert is_worker_start_timeout(queries[0].exception())  # given up after 3 restarts
    assert said[-1].endswith(f"({pipeline.WORKER_RESTARTS} of {pipeline.WORKER_RESTARTS})")


def test_a_single_file_is_read_as_the_glob_of_its_name_reads_it(spark, tmp_path):
    """Issue 54 item 1: ``devices run --input FILE`` with one file failed with "Option
    'basePath' must be a directory" (five queries, five Java stack traces); a glob worked. One
    file is read as its directory filtered to its name: the same lines as the glob's."""
    from logstream.devices.pipeline import reading_lines

    one = data_file("occupancy_datatest.txt.gz")
    counts = {}
    for name, given in (("file", str(one)), ("glob", str(one.parent / "occupancy_datatest.*"))):
        query = (
            reading_lines(spark, given)
            .writeStream.format("memory")
            .queryName(f"device_input_{name}")
            .option("checkpointLocation", str(tmp_path / name))
            .trigger(availableNow=True)
            .start()
        )
        try:
            query.awaitTermination(120)
            assert query.exception() is None
        finally:
            query.stop()
        rows = spark.sql(f"SELECT source_file, count(*) AS n FROM device_input_{name} GROUP BY 1")
        counts[name] = {r["source_file"].rsplit("/", 1)[-1]: r["n"] for r in rows.collect()}
    assert counts["file"] == counts["glob"] == {"occupancy_datatest.txt.gz": 2_666}


def test_every_field_that_fails_to_parse_is_quarantined(spark):
    """Issue 54 item 29: a reading with a bad humidity became a null humidity, without
    quarantine. A field given but not a number is quarantined, naming it; a field left empty
    is optional (null), but for the time, the device and the temperature."""
    from logstream.devices import parse_readings

    def parsed(lines: list[str], fmt: str) -> list[tuple]:
        frame = spark.createDataFrame(
            [(v, "file:///x/d0.txt") for v in lines], "value string, source_file string"
        )
        return [
            (r["humidity"], r["occupancy"], r["quarantine_detail"])
            for r in parse_readings(frame, fmt, detail=True).collect()
        ]

    assert parsed(
        [
            '"2015-02-02 10:00:00",21,abc,0,500,0.004,0',
            '"2015-02-02 10:00:00",21,27,0,500,wet,0',
            '"2015-02-02 10:00:00",21,27,0,500,0.004,yes',
            '"2015-02-02 10:00:00",21,,0,500,0.004,',
        ],
        "csv",
    ) == [
        (None, 0, "Humidity: 'abc' is not a number"),
        (27.0, 0, "HumidityRatio: 'wet' is not a number"),
        (27.0, None, "Occupancy: 'yes' is not a number"),
        (None, None, None),  # left empty: optional
    ]
    assert parsed(
        [
            '{"device": "d1", "time": "2015-02-04 17:51:00", "temperature": 20, "humidity": "x"}',
            '{"device": "d1", "time": "2015-02-04 17:51:00", "temperature": 20, "co2": null}',
        ],
        "json",
    ) == [(None, None, "humidity: 'x' is not a number"), (None, None, None)]


def test_spark_s_traces_go_to_the_run_s_log_and_a_failed_query_is_one_line(
    monkeypatch, tmp_path, capsys
):
    """``devices run`` printed 278 lines on a busy machine: Spark's Java traces and Python's
    tracebacks of the queries restarted when their Python worker did not connect back. The
    JVM's standard error (:func:`logstream.jvm.stderr_to`) and Python's log records now go
    to ``STATE_DIR/logs``; a query that fails is one line naming it and the log holding its
    trace, exit status 1. (Spark is faked: the JVM's redirection is checked where it starts.)"""
    import logging

    from logstream import devices, jvm, session

    started_in: list[Path] = []

    def fake_spark(*_args, **_kwargs):
        started_in.append(jvm._STDERR_FILE[-1])  # where the JVM's standard error would go
        return object()

    java = "java.net.SocketTimeoutException: Accept timed out\n\tat java.base/Socket.accept"
    failed = FakeQuery("device_events", RuntimeError(f"[STREAM_FAILED] worker died\n{java}"))

    def fake_queries(*_args, notice, **_kwargs):
        notice("device query device_events: a Python worker did not connect back (1 of 3)")
        try:
            raise ConnectionRefusedError("[CANNOT_OPEN_SOCKET] Can not open socket")
        except ConnectionRefusedError:  # as Py4J and PySpark log theirs
            logging.getLogger("py4j.clientserver").exception("callback failed")
        return [FakeQuery("device_windows"), failed]

    monkeypatch.setattr(session, "get_spark", fake_spark)
    monkeypatch.setattr(devices, "run_device_queries", fake_queries)
    state = tmp_path / "state"
    args = ["devices", "run", "--input", str(data_file("occupancy_datatest.txt.gz"))]
    assert main([*args, "--state-dir", str(state), "--output-dir", str(tmp_path / "out")]) == 1
    (log,) = (state / "logs").glob("devices-*.log")
    assert started_in == [log]
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("device query device_events: a Python worker did not connect")
    assert err[1:] == [
        "error: device query device_events failed: [STREAM_FAILED] worker died (its trace "
        f"is in {log})"
    ]
    text = log.read_text(encoding="utf-8")
    assert "CANNOT_OPEN_SOCKET" in text and "Traceback" in text and "\tat java.base" in text
