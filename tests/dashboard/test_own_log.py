"""The README's own-server command end to end, and the dashboard's reading of every store form.

``logstream run --follow "<dir>/access.log*" --format common --output-dir … --state-dir …
--dashboard --port P`` is run as a user would (README, "Your own server's log"): a separate
process with its own Spark driver, following an ``access.log`` that a writer thread grows with
real NASA lines (1995-07-09) in bursts while the run is going. Chromium reads the request count
on the page, and ``/metrics/prometheus/`` is scraped twice, before and after a second burst.
The expected numbers come from the plain-Python oracle (:mod:`tests.oracle`) over the lines
written, never from the store.

One run per store form, module-scoped and shared by the tests of that form: the default store
(no ``--store``: ``OUTPUT_DIR/logstream.db``, passed to the dashboard as ``sqlite:////abs``)
and a PostgreSQL ``--store`` on the throwaway cluster of :mod:`tests.serving.conftest` (the
relative ``sqlite:///relative/path.db`` form is read by the same code as the default's, checked
without a run). Each run starts a JVM (10–20 s on a busy 2-core machine) and then mostly waits
on its trigger: the PostgreSQL form's run is started as soon as the default form's serves its
dashboard, so it starts while the default form's tests run; each is stopped after its form's
tests.

The unit tests at the end need no Spark: the store references the pipeline passes, a store
that cannot be opened (said on the page, logged once), and the follow source's loss totals on
the page and in the metrics.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from logstream.dashboard.app import StoreWatch, create_app, safe_refresh
from logstream.dashboard.data import read_snapshot
from logstream.dashboard.layout import banner, kpi_cards
from logstream.dashboard.server import start_dashboard_thread
from logstream.monitoring.prometheus import scrape
from tests.conftest import free_port
from tests.dashboard.helpers import chromium, filled_store
from tests.oracle import parse_line
from tests.pipeline.helpers import nasa_lines

#: Lines of each burst the writer appends while the run is going (the NASA day, in order).
BURSTS = (1500, 700)
#: Lines per write(2) of the writer, and the pause between writes (a server's pace).
CHUNK, PAUSE_S = 100, 0.03
#: Seconds for the run to show its first data (JVM start on a shared machine) and to catch up
#: with a burst (the default trigger is 5 seconds).
FIRST_DATA_S, CATCH_UP_S = 240.0, 120.0
#: a run per kind (each starts a JVM: the suite's time); the relative ``sqlite:///x.db`` form is
#: read by the same code as the default's, checked without a run in
#: test_every_store_form_the_pipeline_uses_is_read
STORE_KINDS = ("default", "postgresql")


# -- the run --------------------------------------------------------------------------------------


@dataclass
class OwnRun:
    """A ``logstream run --follow … --dashboard`` process and the log it follows."""

    proc: subprocess.Popen[bytes]
    port: int
    access_log: Path
    output_log: Path
    lines: list[str]
    written: int = 0
    writes: list[threading.Thread] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def output(self) -> str:
        return self.output_log.read_text(errors="replace")

    def alive(self) -> None:
        assert self.proc.poll() is None, f"the run ended early:\n{self.output()[-4000:]}"

    def burst(self, n: int) -> None:
        """Append the next ``n`` lines from a writer thread, as a server does: ``O_APPEND``
        writes of :data:`CHUNK` lines, each write ending in the middle of a line that the
        next write completes; returns once every line of the burst is whole in the file."""
        block = "".join(line + "\n" for line in self.lines[self.written : self.written + n])
        assert len(block.splitlines()) == n, "not enough NASA lines for the burst"

        def write() -> None:
            fd = os.open(self.access_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                start = 0
                while start < len(block):
                    end = start
                    for _ in range(CHUNK):
                        end = block.find("\n", end) + 1 or len(block)
                    end = min(len(block), end + 7)  # 7 bytes into the next line
                    os.write(fd, block[start:end].encode())
                    start = end
                    time.sleep(PAUSE_S)
            finally:
                os.close(fd)

        writer = threading.Thread(target=write, name="access-log-writer")
        writer.start()
        self.writes.append(writer)
        writer.join(60)
        assert not writer.is_alive(), "the writer did not finish its burst"
        self.written += n

    def expected(self) -> dict[str, int]:
        """What the page and the metrics must show for the lines written so far."""
        parsed = sum(parse_line(line) is not None for line in self.lines[: self.written])
        return {"requests": parsed, "quarantined": self.written - parsed}


def metric_values(text: str) -> dict[str, float]:
    """``name{labels}`` → value of a Prometheus text exposition (comments left out)."""
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def scrape_url(port: int) -> dict[str, float]:
    url = f"http://127.0.0.1:{port}/metrics/prometheus/"
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/plain")
        return metric_values(resp.read().decode())


def eventually(read: Callable[[], Any], done: Callable[[Any], bool], run: OwnRun, timeout: float):
    """Poll ``read()`` until ``done`` holds for its value (the run must stay alive); return
    the value; fail with the last one after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    value = None
    while True:
        run.alive()
        try:
            value = read()
        except OSError as exc:  # the dashboard not listening yet
            value = exc
        else:
            if done(value):
                return value
        if time.monotonic() > deadline:
            pytest.fail(
                f"not reached within {timeout:.0f} s; last value {value!r}\n"
                f"run output:\n{run.output()[-3000:]}"
            )
        time.sleep(0.25)  # watching a live process


def start_run(kind: str, tmp: Path, lines: list[str], stack: ExitStack) -> OwnRun:
    """Start the README's command on an empty ``access.log`` in ``tmp``; ``--store`` by
    ``kind``: none (the default SQLite store) or a new database on a PostgreSQL cluster that
    ``stack`` stops."""
    logs = tmp / "logs"
    logs.mkdir()
    access_log = logs / "access.log"
    access_log.touch()  # the server's log exists, empty, when logstream starts
    port = free_port()
    argv = [
        sys.executable, "-m", "logstream", "run",
        "--follow", f"{logs}/access.log*", "--format", "common",
        "--output-dir", str(tmp / "out"), "--state-dir", str(tmp / "state"),
        "--dashboard", "--port", str(port),
    ]  # fmt: skip
    if kind == "postgresql":
        from tests.serving.conftest import postgres_cluster

        argv += ["--store", stack.enter_context(postgres_cluster()).new_database()]
    env = {**os.environ, "LOGSTREAM_SPARK_UI": "false"}  # no port 4040 beside other runs
    output_log = tmp / "run.log"
    with output_log.open("wb") as out:
        proc = subprocess.Popen(
            argv, cwd=tmp, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return OwnRun(proc, port, access_log, output_log, lines)


def wait_for_dashboard(run: OwnRun) -> None:
    """Until the run's dashboard answers its metrics route (its JVM and pipeline are up)."""
    eventually(lambda: scrape_url(run.port), lambda m: "logstream_up" in m, run, FIRST_DATA_S)


def stop_run(run: OwnRun) -> None:
    """Ctrl-C, as a user stops it (its process group killed if it does not end)."""
    proc = run.proc
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # this run's own process group
            proc.wait(30)


@pytest.fixture(scope="module")
def own_runs(request, nasa_day, tmp_path_factory) -> Iterator[dict[str, OwnRun]]:
    """The runs of every store kind the selected tests of this module use, in the order of
    :data:`STORE_KINDS`, each started once the one before serves its dashboard (its JVM and
    pipeline are up): a run then mostly waits on its trigger, so the next kind's start (its
    JVM, its PostgreSQL cluster) overlaps the earlier kind's tests instead of following them
    and does not slow the earlier kind's own start."""
    params = [getattr(getattr(i, "callspec", None), "params", {}) for i in request.session.items]
    selected = {p["own_run"] for p in params if "own_run" in p}
    lines = nasa_lines(nasa_day)
    runs: dict[str, OwnRun] = {}
    with ExitStack() as stack:
        try:
            for kind in (k for k in STORE_KINDS if k in selected):
                if runs:
                    wait_for_dashboard(list(runs.values())[-1])
                runs[kind] = start_run(kind, tmp_path_factory.mktemp(f"own-{kind}"), lines, stack)
            yield runs
        finally:
            for run in runs.values():
                stop_run(run)  # before its PostgreSQL cluster stops


@pytest.fixture(scope="module", params=STORE_KINDS)
def own_run(request, own_runs) -> Iterator[OwnRun]:
    """The README's command on a followed, growing log; ``--store`` by the param: none (the
    default SQLite store) or a new PostgreSQL database. Stopped (Ctrl-C) after its tests."""
    run = own_runs[request.param]
    try:
        yield run
    finally:
        stop_run(run)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


def kpi(page: Any, name: str) -> str:
    return page.inner_text(f"#kpi-{name} .value")


def count(text: str) -> int | None:
    digits = text.replace(",", "").strip()
    return int(digits) if digits.isdigit() else None


def test_the_page_and_the_metrics_follow_the_growing_log(own_run, browser):
    run = own_run
    # the dashboard is up before the first line: a store not created yet is "waiting"
    eventually(lambda: scrape_url(run.port), lambda m: "logstream_up" in m, run, FIRST_DATA_S)
    run.burst(BURSTS[0])
    first = run.expected()

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.goto(run.url)
        page.wait_for_selector("#banner", state="attached", timeout=60_000)

        def on_page() -> tuple[int | None, int | None, str]:
            shown = page.locator("#kpi-requests .value")
            if not shown.count():  # no data yet: the banner says why
                return None, None, page.inner_text("#banner")
            return count(kpi(page, "requests")), count(kpi(page, "events")), ""

        # the windows of a micro-batch reach the store just ahead of its counters: both
        want = (first["requests"], first["requests"], "")  # the day is in order: all on time
        eventually(on_page, lambda v: v == want, run, FIRST_DATA_S + CATCH_UP_S)
        assert count(kpi(page, "quarantined")) == first["quarantined"]

        scraped = eventually(
            lambda: scrape_url(run.port),
            lambda m: m.get("logstream_events_total") == first["requests"],
            run,
            CATCH_UP_S,
        )
        assert scraped["logstream_up"] == 1.0
        assert scraped["logstream_late_events_total"] == 0
        assert scraped["logstream_quarantined_lines_total"] == first["quarantined"]
        assert scraped.get("logstream_follow_lost_bytes", 0.0) == 0.0

        run.burst(BURSTS[1])  # the server goes on writing
        second = run.expected()
        assert second["requests"] > first["requests"]
        rescraped = eventually(
            lambda: scrape_url(run.port),
            lambda m: m.get("logstream_events_total") == second["requests"],
            run,
            CATCH_UP_S,
        )
        assert rescraped["logstream_up"] == 1.0
        assert rescraped["logstream_events_total"] > scraped["logstream_events_total"]
        assert rescraped["logstream_micro_batches_total"] > scraped["logstream_micro_batches_total"]
        # the page refreshes itself to the new total
        want = (second["requests"], second["requests"], "")
        eventually(on_page, lambda v: v == want, run, CATCH_UP_S)
        assert "does not exist" not in page.inner_text("#banner")
        assert page.locator("#follow-losses").count() == 0  # nothing lost: no warning
        if page.locator("#kpi-lost").count():  # the run records the follow source's totals
            assert kpi(page, "lost") == "0 B"
    finally:
        context.close()


def test_the_run_says_nothing_about_an_unreadable_store(own_run):
    """Neither the page nor the metrics route logged a store they could not read."""
    run = own_run
    run.alive()
    out = run.output()
    assert "dashboard: http://127.0.0.1:" in out
    for complaint in ("Cannot open the store", "cannot read the store", "Traceback"):
        assert complaint not in out, out[-3000:]


# -- without Spark: store references, an unopenable store, the follow losses ----------------------


@pytest.fixture
def store_db(tmp_path) -> Path:
    """A filled SQLite store at ``<tmp>/store/s.db``."""
    (tmp_path / "store").mkdir()
    filled_store(tmp_path / "store" / "s.db").close()
    return tmp_path / "store" / "s.db"


def test_every_store_form_the_pipeline_uses_is_read(store_db, monkeypatch):
    monkeypatch.chdir(store_db.parent.parent)
    forms = [
        f"sqlite:///{store_db}",  # sqlite:////abs: what logstream run passes by default
        "sqlite:///store/s.db",  # relative to the working directory
        str(store_db),
        store_db,
        Path("store/s.db"),
    ]
    for form in forms:
        assert read_snapshot(form).state == "ok", form
        assert metric_values(scrape(form).decode())["logstream_up"] == 1.0, form
        client = create_app(form).server.test_client()
        metrics = metric_values(client.get("/metrics/prometheus/").get_data(as_text=True))
        assert metrics["logstream_up"] == 1.0 and metrics["logstream_events_total"] > 0, form
    with start_dashboard_thread(f"sqlite:///{store_db}") as server:
        with urllib.request.urlopen(server.url + "metrics/prometheus/", timeout=10) as resp:
            assert metric_values(resp.read().decode())["logstream_up"] == 1.0


def test_a_store_that_cannot_be_opened_says_why_on_the_page_and_once_in_the_log(store_db, caplog):
    mangled = Path(f"sqlite:///{store_db}")  # what turned the bug's URL into a missing file
    caplog.set_level(logging.INFO)
    app = create_app(mangled)
    client = app.server.test_client()
    watch = StoreWatch(mangled)
    for _ in range(3):  # three refreshes and three scrapes
        out = safe_refresh(mangled, None, None, None, watch=watch)
        client.get("/metrics/prometheus/")
    text = " ".join(str(p.children) for p in out[0])
    assert out[1] == "banner unreadable"
    assert f"Cannot open the store {mangled}" in text and "not supported" in text
    assert "does not exist yet" not in text
    page_logs = [r for r in caplog.records if r.name == "logstream.dashboard.app"]
    metric_logs = [r for r in caplog.records if r.name == "logstream.monitoring.prometheus"]
    # create_app and the watch above: once each, not at every refresh
    assert len(page_logs) == 2 and all(r.levelno == logging.WARNING for r in page_logs)
    assert str(mangled) in page_logs[0].getMessage()
    assert len(metric_logs) == 1 and "not supported" in metric_logs[0].getMessage()
    metrics = metric_values(client.get("/metrics/prometheus/").get_data(as_text=True))
    assert metrics == {"logstream_up": 0.0}


def test_a_file_that_is_not_a_store_is_logged_once_and_named_on_the_page(tmp_path, caplog):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all, " * 100)
    caplog.set_level(logging.INFO)
    watch = StoreWatch(junk)
    outs = [safe_refresh(junk, None, None, None, watch=watch) for _ in range(3)]
    assert outs[-1][1] == "banner unreadable" and str(junk) in str(outs[-1][0][0].children)
    warned = [r for r in caplog.records if r.name == "logstream.dashboard.app"]
    assert len(warned) == 1 and str(junk) in warned[0].getMessage()


def test_a_store_created_later_is_waited_for_quietly(tmp_path, caplog):
    later = tmp_path / "later.db"
    caplog.set_level(logging.WARNING)
    assert metric_values(scrape(f"sqlite:///{later}").decode()) == {"logstream_up": 0.0}
    out = safe_refresh(f"sqlite:///{later}", None, None, None, watch=StoreWatch(later))
    assert out[1] == "banner missing" and str(later) in str(out[0][0].children)
    assert caplog.records == []


LOSSES = {
    "follow_lost_bytes": "4096",
    "follow_lost_lines": "41",
    "follow_lost_files": "1",
    "follow_truncations": "2",
}


def test_follow_losses_are_a_warning_on_the_page_and_gauges_in_the_metrics(tmp_path):
    store = filled_store(tmp_path / "s.db")
    store.set_state(LOSSES)
    store.close()
    snap = read_snapshot(tmp_path / "s.db")
    assert snap.follow_losses == {k: int(v) for k, v in LOSSES.items()}
    children, cls = banner(snap)
    assert cls == "banner losses"
    warning = children[0]
    assert warning.id == "follow-losses"
    text = " ".join(str(c.children) for c in warning.children)
    assert "4,096 bytes (~41 lines) lost to rotation" in text and "docs/follow.md" in text
    lost = next(c for c in kpi_cards(snap) if c.id == "kpi-lost")
    assert "kpi warn" == lost.className and lost.children[1].children == "4.0 KiB"

    metrics = metric_values(scrape(tmp_path / "s.db").decode())
    assert metrics["logstream_follow_lost_bytes"] == 4096
    assert metrics["logstream_follow_lost_lines"] == 41
    assert metrics["logstream_follow_lost_files"] == 1
    assert metrics["logstream_follow_truncations"] == 2


def test_no_loss_recorded_is_no_warning_and_no_gauge(tmp_path):
    store = filled_store(tmp_path / "s.db")
    snap = read_snapshot(tmp_path / "s.db")
    assert snap.follow_losses == {} and banner(snap)[1] == "banner ok"
    assert not [c for c in kpi_cards(snap) if c.id == "kpi-lost"]
    assert "logstream_follow_lost_bytes" not in scrape(tmp_path / "s.db").decode()
    # a follow run that lost nothing: a quiet card at 0, gauges at 0, no warning
    store.set_state({"follow_lost_bytes": "0", "follow_truncations": "1"})
    store.close()
    snap = read_snapshot(tmp_path / "s.db")
    assert banner(snap)[1] == "banner ok"
    lost = next(c for c in kpi_cards(snap) if c.id == "kpi-lost")
    assert lost.className == "kpi"
    metrics = metric_values(scrape(tmp_path / "s.db").decode())
    assert (
        metrics["logstream_follow_lost_bytes"] == 0 and metrics["logstream_follow_truncations"] == 1
    )
