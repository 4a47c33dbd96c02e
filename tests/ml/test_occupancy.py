"""Room occupancy on the stream (#15, book Ch. 15): a model trained in batch on the real UCI
training week reaches the target accuracy on the two held-out periods; the device pipeline
scores every reading exactly as batch scoring does with the same model; the windows' running
confusion matrix equals a pandas count of the batch predictions; a model that does not fit
the readings is refused before anything streams."""

from __future__ import annotations

import json
import os
import time

import pandas as pd
import pytest

from logstream.cli import main
from logstream.devices import DeviceConfig, check_device_model
from logstream.errors import ConfigError
from logstream.ml.model import META_FILE, load_model
from logstream.ml.occupancy import KIND, read_readings, score_readings
from tests.conftest import data_file

TRAIN = "occupancy_datatraining.txt.gz"
TESTS = ("occupancy_datatest.txt.gz", "occupancy_datatest2.txt.gz")
#: in time order: one file per micro-batch
FILES = ("occupancy_datatest", "occupancy_datatraining", "occupancy_datatest2")
FEATURES = ["temperature", "light", "co2"]


@pytest.fixture(scope="module")
def model_dir(spark, tmp_path_factory):
    """``logstream model train occupancy`` with the default features and day folds, on the
    classifier the full cross-validation over the three candidates picks (logistic
    regression, docs/devices.md), so the test trains one candidate, not three, and 2 folds:
    the model saved is refitted on all the training readings, whatever the folds."""
    out = tmp_path_factory.mktemp("model") / "occupancy"
    args = ["model", "train", "occupancy", "--train", str(data_file(TRAIN)), "--out", str(out)]
    args += ["--classifiers", "logistic_regression", "--folds", "2", "--version", "t1"]
    for name in TESTS:
        args += ["--test", str(data_file(name))]
    started = time.monotonic()
    assert main(args) == 0
    print(f"\ntrain occupancy: {time.monotonic() - started:.1f} s")
    return out


def test_accuracy_on_the_held_out_periods(model_dir, capsys):
    info = json.loads((model_dir / META_FILE).read_text())
    assert (info["kind"], info["version"], info["label"]) == ("occupancy", "t1", "occupancy")
    assert info["features"] == dict.fromkeys(FEATURES, "double")
    assert info["classifier"] == "logistic_regression"
    assert info["trained_on"] == [str(data_file(TRAIN))]
    assert info["spark_version"] and info["created_at"].endswith("Z")
    m = info["metrics"]
    with capsys.disabled():
        print(
            f"\noccupancy accuracy: datatest {m['accuracy.occupancy_datatest']:.4f}, "
            f"datatest2 {m['accuracy.occupancy_datatest2']:.4f}, "
            f"cv AUC {m['cv_auc.logistic_regression']:.4f}"
        )
    assert m["accuracy.occupancy_datatest"] >= 0.97
    assert m["accuracy.occupancy_datatest2"] >= 0.95


def test_evaluate_and_show(model_dir, tmp_path, capsys):
    out = tmp_path / "eval.json"
    args = ["model", "evaluate", "occupancy", "--model", str(model_dir), "--json", str(out)]
    assert main([*args, "--test", str(data_file(TESTS[0]))]) == 0
    printed = capsys.readouterr().out
    assert "occupancy_datatest.txt.gz (occupancy model t1)" in printed and "accuracy" in printed
    figures = json.loads(out.read_text())["files"]["occupancy_datatest.txt.gz"]
    meta = json.loads((model_dir / META_FILE).read_text())
    assert figures["accuracy"] == meta["metrics"]["accuracy.occupancy_datatest"]
    assert figures["tp"] + figures["fp"] + figures["tn"] + figures["fn"] == figures["rows"] == 2665
    assert main(["model", "show", str(model_dir)]) == 0
    assert json.loads(capsys.readouterr().out)["classifier"] == "logistic_regression"


@pytest.fixture(scope="module")
def streamed(spark, model_dir, tmp_path_factory):
    """``logstream devices run --model`` over the three real files, one per micro-batch."""
    tmp = tmp_path_factory.mktemp("scored")
    landing = tmp / "in"
    landing.mkdir()
    for i, name in enumerate(FILES):
        path = landing / f"{name}.txt.gz"
        path.write_bytes(data_file(f"{name}.txt.gz").read_bytes())
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    cfg = DeviceConfig.build(
        input=str(landing),
        output_dir=tmp / "out",
        state_dir=tmp / "state",
        max_files_per_trigger=1,
        model=model_dir,
    )
    args = ["devices", "run", "--input", str(landing), "--output-dir", str(cfg.output_dir)]
    args += ["--state-dir", str(cfg.state_dir), "--max-files-per-trigger", "1"]
    assert main([*args, "--model", str(model_dir)]) == 0  # 2 if a query failed
    model, info = load_model(model_dir, KIND)
    batch = score_readings(model, read_readings(spark, sorted(landing.iterdir())), info.version)
    return {
        "cfg": cfg,
        "batch": batch.toPandas(),
        "predictions": spark.read.parquet(str(cfg.output_dir / "predictions")).toPandas(),
        "windows": spark.read.parquet(str(cfg.output_dir / "device_windows")).toPandas(),
    }


def test_stream_scores_every_reading_as_batch_does(streamed):
    got, want = streamed["predictions"], streamed["batch"]
    assert list(got.columns) == [
        "device",
        "room",
        "event_time",
        *FEATURES,
        "prediction",
        "probability",
        "occupancy",
        "model_version",
    ]
    columns = ["device", "event_time", *FEATURES, "prediction", "probability", "occupancy"]

    def rows(df: pd.DataFrame) -> list[tuple]:
        return sorted(df[columns].itertuples(index=False, name=None))

    assert len(got) == len(want) == 2665 + 8143 + 9752
    assert rows(got) == rows(want)  # every prediction and probability, exactly
    assert set(got["model_version"]) == {"t1"} and set(got["prediction"]) == {0, 1}
    assert got["probability"].between(0, 1).all()


def test_window_confusion_counts_equal_pandas(streamed):
    batch = streamed["batch"].copy()
    batch["window_start"] = batch["event_time"].dt.floor("5min")
    y, p = batch["occupancy"], batch["prediction"]
    batch = batch.assign(tp=(y == 1) & (p == 1), fp=(y == 0) & (p == 1))
    batch = batch.assign(tn=(y == 0) & (p == 0), fn=(y == 1) & (p == 0))
    expected = batch.groupby(["device", "window_start"]).agg(
        predicted_readings=("occupancy", "count"),
        **{k: (k, "sum") for k in ("tp", "fp", "tn", "fn")},
    )
    got = streamed["windows"].set_index(["device", "window_start"]).sort_index()
    # every window the final watermark (newest reading − 2 minutes) passed
    final = batch["event_time"].max() - pd.Timedelta(minutes=2)
    closed = expected[expected.index.get_level_values(1) + pd.Timedelta(minutes=5) <= final]
    assert len(got) == len(closed) > 3000
    for column in ("predicted_readings", "tp", "fp", "tn", "fn"):
        assert got[column].tolist() == closed[column].tolist(), column
    accuracy = (closed["tp"] + closed["tn"]) / closed["predicted_readings"]
    assert got["accuracy"].to_numpy() == pytest.approx(accuracy.to_numpy(), rel=1e-12)
    assert 0.9 < (got["tp"] + got["tn"]).sum() / got["predicted_readings"].sum() <= 1


def test_toggling_the_model_on_a_checkpoint_is_refused(streamed):
    cfg = streamed["cfg"]
    without = cfg.model_copy(update={"model": None})
    with pytest.raises(ConfigError, match="holds checkpoints of a run with --model"):
        check_device_model(without)


def write_meta(model_dir, tmp_path, **changes):
    """A copy of the model's metadata with ``changes`` (the Spark model is never read)."""
    bad = tmp_path / "bad-model"
    (bad / "spark").mkdir(parents=True)
    meta = json.loads((model_dir / META_FILE).read_text()) | changes
    (bad / META_FILE).write_text(json.dumps(meta))
    return bad


def test_a_model_that_does_not_fit_is_refused_at_start(model_dir, tmp_path, capsys):
    landing = tmp_path / "in"
    landing.mkdir()
    run = ["devices", "run", "--input", str(landing), "--output-dir", str(tmp_path / "out")]
    run += ["--state-dir", str(tmp_path / "state"), "--model"]
    features = {"temperature": "double", "pressure": "double", "light": "int"}
    bad = write_meta(model_dir, tmp_path, features=features)
    assert main([*run, str(bad)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "column 'pressure' (double) is missing" in err
    assert "column 'light' is double, the model needs int" in err
    bots = write_meta(model_dir, tmp_path / "b", kind="bots")
    assert main([*run, str(bots)]) == 2
    assert "is a 'bots' model; this needs a 'occupancy' model" in capsys.readouterr().err
    assert main([*run, str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() and not (tmp_path / "state").exists()


def test_bad_training_options_are_refused_before_spark(tmp_path, capsys):
    train = ["model", "train", "occupancy", "--out", str(tmp_path / "m"), "--train"]
    assert main([*train, str(data_file(TRAIN)), "--features", "light,pressure"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "unknown ['pressure']" in err and "temperature, humidity, light, co2" in err
    assert main([*train, str(tmp_path / "missing.txt.gz")]) == 2
    assert "--train" in capsys.readouterr().err
    assert main([*train, str(data_file(TRAIN)), "--classifiers", "svm"]) == 2
    assert "unknown ['svm']" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_the_dashboard_shows_the_running_confusion_matrix(streamed):
    from logstream.dashboard.devices import accuracy_figure, devices_panel, read_devices

    view = read_devices(streamed["cfg"].output_dir)
    windows = streamed["windows"]
    assert view.model is not None
    for k in ("predicted_readings", "tp", "fp", "tn", "fn"):
        assert view.model[k] == int(windows[k].sum())
    m = view.model
    assert m["accuracy"] == (m["tp"] + m["tn"]) / m["predicted_readings"]
    assert m["versions"] == ["t1"]
    w = windows[windows["device"] == "occupancy_datatest"].sort_values("window_start")
    assert view.accuracy["occupancy_datatest"][1] == w["accuracy"].tolist()
    page = str(devices_panel(view))
    assert "device-confusion-table" in page and "graph-device-accuracy" in page
    assert len(accuracy_figure(view)["data"]) == 3


def test_readings_are_split_once_a_line_whatever_filter_follows(spark):
    # the filter of good readings, pushed below the parse, copied its split into itself
    readings = read_readings(spark, [data_file("occupancy_datatest.txt.gz")])
    plan = readings.where("temperature > 21")._jdf.queryExecution().executedPlan().toString()
    filters = [line for line in plan.splitlines() if "Filter " in line]
    assert filters and not any("split(" in line for line in filters), filters
    assert readings.count() == 2665  # every reading of the UCI test file
