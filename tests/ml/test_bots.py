"""Bot detection on the real elastic Combined sample: a model trained from the CLI reports
precision and recall on held-out real clients; the stream scores every final client window
exactly as batch scoring of the same events does; the features equal an independent pandas
computation; a model that does not fit is refused before the JVM starts."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from pyspark.sql import functions as F

from logstream.analytics.pages import STATIC_ASSET_EXTENSIONS
from logstream.analytics.panes import fold_panes
from logstream.cli import main
from logstream.ml.bots import (
    BOT_FEATURES,
    bot_pane_spec,
    client_features,
    score_features,
)
from logstream.ml.model import META_FILE, load_model
from logstream.pipeline import Pipeline
from logstream.serving import ServingStore
from tests.conftest import COMBINED, data_file
from tests.pipeline.helpers import config, nasa_lines, run_to_end, write_chunks

WINDOW_MS = 300_000


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A bots model trained from the CLI (one candidate, two folds: test time)."""
    out = tmp_path_factory.mktemp("bots") / "model"
    argv = ["model", "train", "bots", "--input", str(data_file(COMBINED)), "--out", str(out)]
    argv += ["--synthetic-lines", "2000", "--classifiers", "random_forest", "--folds", "2"]
    argv += ["--version", "test-1"]
    assert main(argv) == 0
    return out


def test_training_reports_precision_and_recall_on_held_out_real_clients(model, capsys):
    info = json.loads((model / META_FILE).read_text())
    assert info["kind"] == "bots" and info["version"] == "test-1"
    assert list(info["features"]) == list(BOT_FEATURES)
    m = info["metrics"]
    print(
        f"held-out real clients: precision {m['held_out_precision']:.3f}, "
        f"recall {m['held_out_recall']:.3f}, {int(m['held_out_rows'])} windows"
    )
    # a quarter of the real clients' labelled windows, scored by a model that never saw them
    assert 400 < m["held_out_rows"] < 1000
    assert m["held_out_tp"] + m["held_out_fn"] > 100  # real bots among them
    assert m["held_out_precision"] > 0.5 and m["held_out_recall"] > 0.5
    assert m["held_out_accuracy"] > 0.7


def evaluate_cli(model, capsys, *extra: str) -> tuple[str, dict[str, float]]:
    """``logstream model evaluate bots`` on the real sample: its output and figures."""
    argv = ["model", "evaluate", "bots", "--model", str(model)]
    assert main([*argv, "--input", str(data_file(COMBINED)), *extra]) == 0
    out = capsys.readouterr().out
    figures = {
        parts[0]: float(parts[1])
        for line in out.splitlines()
        if line.startswith("  ") and len(parts := line.split()) == 2
    }
    return out, figures


def test_evaluate_scores_the_held_out_split_of_training_by_default(model, capsys):
    out, figures = evaluate_cli(model, capsys)
    assert "test-1" in out and "precision" in out and "recall" in out
    assert "rows scored: the held-out split: the 25% of clients" in out
    assert "(by a hash of client_host, seed 7) that training kept out" in out
    # the same rows as training's held-out measure, so the same figures, not the optimistic
    # ones of all rows (training rows included)
    held = json.loads((model / META_FILE).read_text())["metrics"]
    for name in ("rows", "tp", "fp", "tn", "fn", "precision", "recall", "accuracy"):
        assert figures[name] == pytest.approx(held[f"held_out_{name}"], abs=5e-5), name
    assert figures["rows"] < 1758 + 984


def test_evaluate_all_rows_says_the_training_rows_are_included(model, capsys):
    out, figures = evaluate_cli(model, capsys, "--rows", "all")
    assert "rows scored: all labelled client windows (the training rows included)" in out
    assert figures["rows"] == 1758 + 984  # every labelled client window of the sample


def test_held_out_evaluation_of_a_model_without_a_split_is_refused(model, tmp_path, capsys):
    old = tmp_path / "old-model"
    shutil.copytree(model, old)
    info = json.loads((old / META_FILE).read_text())
    del info["split"]  # as saved before the split was recorded
    info["format"] = 1
    (old / META_FILE).write_text(json.dumps(info))
    argv = ["model", "evaluate", "bots", "--model", str(old), "--input", "nowhere.log"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "records no training split" in err and "--rows all" in err


@pytest.fixture(scope="module")
def streamed(spark, model, tmp_path_factory):
    """The real sample streamed in four micro-batches with only bot_scores computed."""
    tmp = tmp_path_factory.mktemp("bots-stream")
    write_chunks(nasa_lines(data_file(COMBINED)), tmp / "in", per_file=2500)
    cfg = config(tmp, tmp / "in", log_format="combined", bot_model=model, queries="bot_scores")
    pipeline = Pipeline(spark, cfg)
    run_to_end(pipeline)
    return pipeline


def test_stream_scores_equal_batch_scores_of_the_same_events(spark, model, streamed):
    out = streamed.cfg.output_dir
    stream = spark.read.parquet(str(out / "bot_scores")).drop("batch_id").toPandas()
    events = spark.read.parquet(str(out / "events"))
    pipeline_model, info = load_model(model, "bots")
    panes = fold_panes(None, events, bot_pane_spec(WINDOW_MS))
    batch = score_features(pipeline_model, client_features(panes), info.version).toPandas()
    final_until = pd.Timestamp(streamed.store.max_event_time_ms() - 600_000, unit="ms")
    batch = batch[batch["window_end"] <= final_until]
    assert len(stream) == len(batch) > 2500  # every final client window, once
    key = ["window_start", "client_host"]
    both = stream.merge(batch, on=key, suffixes=("_s", "_b"), validate="one_to_one")
    assert len(both) == len(stream)
    for col in ("requests", *BOT_FEATURES, "bot_probability", "is_bot"):
        assert (both[f"{col}_s"] == both[f"{col}_b"]).all(), col
    assert (stream["model_version"] == "test-1").all()
    assert 0 < stream["is_bot"].sum() < len(stream)


def test_features_equal_an_independent_computation(spark, streamed):
    out = streamed.cfg.output_dir
    stream = spark.read.parquet(str(out / "bot_scores")).toPandas()
    ev = (
        spark.read.parquet(str(out / "events"))
        .select("client_host", "event_time", "url_path", "status", "bytes_sent")
        .toPandas()
    )
    ev["window_start"] = ev["event_time"].dt.floor("5min")
    ext = ev["url_path"].fillna("").str.rsplit(".", n=1).str[-1].str.lower()
    ev["static"] = ev["url_path"].fillna("").str.contains(".", regex=False) & ext.isin(
        STATIC_ASSET_EXTENSIONS
    )
    g = ev.groupby(["client_host", "window_start"])
    expected = pd.DataFrame(
        {
            "requests": g.size(),
            "distinct_pages": g["url_path"].nunique().astype(float),
            "error_ratio": g["status"].apply(lambda s: (s >= 400).mean()),
            "bytes_per_request": g["bytes_sent"].mean(),
            "static_share": g["static"].mean(),
            "robots": g["url_path"].apply(lambda s: float((s == "/robots.txt").any())),
            "span_s": g["event_time"].apply(lambda t: (t.max() - t.min()).total_seconds()),
        }
    ).reset_index()
    both = stream.merge(expected, on=["client_host", "window_start"], suffixes=("", "_x"))
    assert len(both) == len(stream)
    for col in ("requests", "distinct_pages", "robots"):
        assert (both[col] == both[f"{col}_x"]).all(), col
    for col in ("error_ratio", "bytes_per_request", "static_share"):
        assert both[col].to_numpy() == pytest.approx(both[f"{col}_x"].to_numpy(), rel=1e-12)
    assert both["request_rate"].to_numpy() == pytest.approx(both["requests"] / 300.0)
    many = both["requests"] > 1
    gaps = both.loc[many, "span_s"] / (both.loc[many, "requests"] - 1)
    assert both.loc[many, "mean_interarrival_s"].to_numpy() == pytest.approx(gaps.to_numpy())
    assert (both.loc[~many, "mean_interarrival_s"] == 300.0).all()
    assert both["robots"].sum() > 0 and both["static_share"].max() == 1.0


def test_the_store_counts_every_scored_window(spark, streamed):
    out = streamed.cfg.output_dir
    stream = spark.read.parquet(str(out / "bot_scores"))
    per_window = (
        stream.groupBy("window_start")
        .agg(F.count("*").alias("clients"), F.sum("is_bot").alias("bots"))
        .toPandas()
    )
    store = ServingStore(streamed.cfg.store_path, read_only=True)
    rows = store.query("SELECT clients, bots FROM bot_windows")
    assert sum(r["clients"] for r in rows) == per_window["clients"].sum()
    assert sum(r["bots"] for r in rows) == per_window["bots"].sum()
    flagged = store.query("SELECT bot_probability FROM bot_scores")
    assert flagged and min(r["bot_probability"] for r in flagged) >= 0.5


def test_a_model_that_does_not_fit_is_refused_at_start(model, tmp_path, capsys):
    bad = tmp_path / "bad"
    shutil.copytree(model, bad)
    meta = json.loads((bad / META_FILE).read_text())
    meta["features"]["referrer_share"] = "double"
    (bad / META_FILE).write_text(json.dumps(meta))
    base = [
        "run",
        "--input-dir",
        str(tmp_path),
        "--output-dir",
        str(tmp_path / "o"),
        "--state-dir",
        str(tmp_path / "s"),
        "--trigger",
        "available-now",
    ]
    assert main([*base, "--bot-model", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "referrer_share" in err and "is missing" in err and "test-1" in err
    meta["kind"] = "occupancy"
    (bad / META_FILE).write_text(json.dumps(meta))
    assert main([*base, "--bot-model", str(bad)]) == 2
    assert "is a 'occupancy' model" in capsys.readouterr().err
    assert main([*base, "--bot-model", str(tmp_path / "none")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main([*base, "--queries", "bot_scores"]) == 2
    assert "--bot-model" in capsys.readouterr().err


def test_the_dashboard_shows_the_verdicts(streamed):
    from logstream.dashboard.data import Filters, read_snapshot
    from logstream.dashboard.layout import bots_panel

    store = ServingStore(streamed.cfg.store_path, read_only=True)
    totals = store.query("SELECT SUM(clients) AS c, SUM(bots) AS b FROM bot_windows")[0]
    snap = read_snapshot(streamed.cfg.store_path, Filters(time_range="all"))
    assert (snap.bots.clients, snap.bots.bots) == (totals["c"], totals["b"])
    text = str(bots_panel(snap))
    assert f"{totals['b']:,} of {totals['c']:,} client windows flagged" in text
    assert "model test-1" in text and "bots-table" in text
