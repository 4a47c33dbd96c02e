"""Every command and example of the README runs (in README order, on the real data)."""

from __future__ import annotations

import gzip
import json
import os
import re
import shlex
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import DATA_DIR, free_port

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")

#: README commands run elsewhere, with the test (or job) that runs them; each key is the start
#: of a command the README holds (``test_every_entry_covered_elsewhere_is_a_readme_command``).
COVERED_ELSEWHERE = {
    "make run": "tests/test_demo.py (logstream run with no source; make run DURATION=…)",
    "make test": "CI itself (.ci/run)",
}


def covered_elsewhere(cmd: str) -> bool:
    """A command another test runs (:data:`COVERED_ELSEWHERE`)."""
    return any(cmd.startswith(k) for k in COVERED_ELSEWHERE)


def code_blocks(lang: str, text: str = README) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def commands(text: str = README) -> list[str]:
    """The commands of the ``bash`` blocks of ``text``, in order, without their comments."""
    found = []
    for block in code_blocks("bash", text):
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith(("logstream ", "make ", "spark-submit ")):
                found.append(line)
    return found


#: How the README puts ``logstream`` on the PATH (its set-up section), run by :func:`fresh_shell`.
ACTIVATE = "source .venv/bin/activate"
#: Commands that start a JVM: each runs in a fresh shell as the others do, in the background
#: from its turn on (a JVM start is most of their time), and is waited for before a later
#: command that names one of its outputs, or at the end.
IN_THE_BACKGROUND = ("logstream batch ", "logstream run ")


def fresh_shell(cmd: str, cwd: Path, env: dict[str, str]) -> list[str]:
    """The argv of a fresh, non-login bash with none of the test process's environment (no
    ``.venv/bin`` on its PATH) but ``env``, that activates the venv as the README says and
    runs ``cmd`` (``exec``: a signal reaches the command itself)."""
    assert ACTIVATE in README, "the README no longer says how logstream gets on the PATH"
    script = f"cd {shlex.quote(str(REPO))} && {ACTIVATE} && cd {shlex.quote(str(cwd))}"
    return ["env", "-i", *(f"{k}={v}" for k, v in env.items()), "bash", "--noprofile",
            "--norc", "-c", f"{script} && exec {cmd}"]  # fmt: skip


def new_user_env(**extra: str) -> dict[str, str]:
    """What a new user's shell holds: HOME, the system PATH, a UTF-8 locale, and ``extra``;
    plus this checkout's code (``PYTHONPATH``: the venv may have been installed from another
    checkout of the repository) and the suite's JVM options (``SPARK_SUBMIT_OPTS``, see
    ``tests/conftest.py``)."""
    env = {"HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
    env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    if os.environ.get("JAVA_HOME"):  # the machine's Java, as a login shell would have it
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    env["PYTHONPATH"] = str(REPO / "src")
    if os.environ.get("SPARK_SUBMIT_OPTS"):
        env["SPARK_SUBMIT_OPTS"] = os.environ["SPARK_SUBMIT_OPTS"]
    return {**env, **extra}


def localise(cmd: str) -> list[str]:
    cmd = cmd.replace("../shared/data", str(DATA_DIR))
    cmd = cmd.replace("examples/", f"{REPO / 'examples'}/")  # the config and reference tables
    return shlex.split(cmd)


def test_every_readme_command_has_a_runner():
    cmds = commands()
    assert any(c.startswith("logstream batch") for c in cmds)
    for c in cmds:
        known = c.startswith("logstream ") or c == "make package" or covered_elsewhere(c)
        assert known, f"README command without a test: {c}"


def outputs_of(cmd: str) -> list[str]:
    """What a command run in the background writes: a batch's ``--json`` and ``--html``, a
    run's ``--output-dir``, ``--state-dir`` and ``--store`` (its file)."""
    argv = shlex.split(cmd)
    options = ("--json", "--html", "--output-dir", "--state-dir", "--store")
    found = [argv[argv.index(o) + 1] for o in options if o in argv]
    return [f.removeprefix("sqlite:///") for f in found]


@dataclass
class Background:
    """A README command running in a fresh shell, its output in two files."""

    cmd: str
    proc: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path

    def wait(self) -> str:
        """Wait for it; its standard output (it must exit 0)."""
        self.proc.wait(600)
        err = self.stderr.read_text(errors="replace")
        assert self.proc.returncode == 0, f"{self.cmd} exited {self.proc.returncode}: {err[-2000:]}"
        assert not [line for line in err.splitlines() if "WARN" in line], err[-2000:]
        return self.stdout.read_text(errors="replace")


def test_readme_commands_run_in_order(spark, tmp_path, monkeypatch):
    """Every command runs in a fresh shell, as a user runs it (issue 54 item 25: the Spark
    commands ran in the test's own Spark session). A command that starts a JVM is started in
    its turn and left running while the next ones run (none of which reads what it writes
    before it has ended: a later command that names one of its outputs waits for it)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "NASA_access_log_Jul95.gz").write_bytes(
        gzip.compress(b'h - - [01/Jul/1995:00:00:01 -0400] "GET / HTTP/1.0" 200 1\n')
    )
    env = new_user_env(LOGSTREAM_CACHE_DIR=str(cache), LOGSTREAM_DATA_DIR=str(DATA_DIR))
    ran: list[str] = []
    shell_out: list[str] = []
    running: list[Background] = []

    def wait_for(background: Background) -> None:
        shell_out.append(background.wait())
        running.remove(background)

    cmds = [c for c in commands() if not covered_elsewhere(c)]
    try:
        for i, cmd in enumerate(cmds):
            for background in list(running):  # a command reading a background one's output
                if any(out in cmd for out in outputs_of(background.cmd)):
                    wait_for(background)
            if cmd == "make package":
                done = subprocess.run(["make", "-s", "package"], cwd=REPO, capture_output=True)
                assert done.returncode == 0, done.stderr
                assert (REPO / "dist" / "logstream.zip").stat().st_size > 10_000
                ran.append(cmd)
                continue
            argv = localise(cmd)
            if cmd.startswith(IN_THE_BACKGROUND):
                logs = (tmp_path / f"cmd{i}.stdout", tmp_path / f"cmd{i}.stderr")
                with logs[0].open("wb") as out, logs[1].open("wb") as err:
                    proc = subprocess.Popen(
                        fresh_shell(shlex.join(argv), tmp_path, env), stdout=out, stderr=err
                    )
                running.append(Background(cmd, proc, *logs))
                ran.append(cmd)
                continue
            if argv[1] == "dashboard":
                port = free_port()
                argv[argv.index("--port") + 1] = str(port)
                proc = subprocess.Popen(
                    fresh_shell(shlex.join(argv), tmp_path, env),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                try:
                    deadline = time.monotonic() + 60
                    while True:
                        try:
                            url = f"http://127.0.0.1:{port}/"
                            with urllib.request.urlopen(url, timeout=5) as r:
                                assert r.status == 200
                                break
                        except OSError:
                            assert time.monotonic() < deadline and proc.poll() is None
                            time.sleep(0.2)  # waiting for the server to listen
                finally:
                    proc.terminate()
                    proc.wait(20)
                ran.append(cmd)
                continue
            done = subprocess.run(
                fresh_shell(shlex.join(argv), tmp_path, env),
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert done.returncode == 0, f"{cmd} exited {done.returncode}: {done.stderr[-2000:]}"
            shell_out.append(done.stdout)
            ran.append(cmd)
        for background in list(running):
            wait_for(background)
    finally:
        for background in running:
            if background.proc.poll() is None:
                background.proc.kill()
                background.proc.wait(30)
    out = "".join(shell_out)
    assert str(DATA_DIR / "NASA_access_log_Jul95_day09.log.gz") in out  # data where
    assert str(cache / "NASA_access_log_Jul95.gz") in out  # data fetch, from the cache
    assert (tmp_path / "out" / "report.json").exists() and (
        tmp_path / "out" / "report.html"
    ).exists()
    assert (tmp_path / "out" / "synthetic.log").read_text().count("\n") == 5000
    assert len(list((tmp_path / "out" / "stream" / "events").glob("batch_id=*"))) >= 1
    assert len(list((tmp_path / "out" / "follow" / "events").glob("batch_id=*"))) >= 1
    assert len(ran) == len(cmds)
    assert len(shell_out) >= 8  # batch, replay ×2, run ×2, generate, data ×2

    # the Python example, on the outputs the commands above wrote
    (python_block,) = [b for b in code_blocks("python") if "spark.read.parquet" in b]
    example = python_block.replace("out/demo/stream", str(tmp_path / "out" / "stream"))
    exec(compile(example, "README.md", "exec"), {})


def test_the_readme_names_make_report_and_the_page_it_writes():
    """Issue 37 item 12: ``make report`` and its ``out/nasa-day.html`` appeared nowhere."""
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^report:.*\n((?:\t.*\n)+)", makefile, flags=re.M)
    assert recipe, "the Makefile has no report target"
    html = re.search(r"--html (\S+)", recipe.group(1))
    assert html
    assert "`make report`" in README and f"`{html.group(1).replace('$(OUT)', 'out')}`" in README


def test_every_entry_covered_elsewhere_is_a_readme_command():
    """:data:`COVERED_ELSEWHERE` names only commands the README still holds."""
    cmds = commands()
    for prefix in COVERED_ELSEWHERE:
        assert any(c.startswith(prefix) for c in cmds), f"not in the README: {prefix}"


CLI_DOC = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")


def parse_command(argv: list[str]) -> None:
    """Parse ``logstream ARGV`` as the CLI would (options, types, callbacks), without running it.

    Raises
    ------
    click.UsageError
        An unknown option or command, or a value of the wrong type.
    """
    import typer

    from logstream.cli import app

    command, path, args = typer.main.get_command(app), ["logstream"], list(argv)
    while getattr(command, "commands", None) and args and args[0] in command.commands:
        path.append(args[0])
        command = command.commands[args.pop(0)]
    assert not getattr(command, "commands", None), f"no such command: {' '.join(argv)}"
    command.make_context(" ".join(path), args)


def test_every_command_of_the_cli_reference_parses(monkeypatch):
    """docs/cli.md's commands agree with ``--help``: each parses (a renamed option fails)."""
    monkeypatch.chdir(REPO)  # the examples/ paths
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    cmds = commands(CLI_DOC)
    assert len(cmds) >= 30 and set(commands()) - {"make run", "make test"} <= set(cmds)
    for cmd in cmds:
        argv = localise(cmd)
        if argv[0] == "make":
            assert re.search(rf"^{argv[1]}:", makefile, flags=re.M), cmd
            continue
        if argv[0] == "spark-submit":  # the logstream command after the entry point
            argv = argv[argv.index("src/logstream/__main__.py") :]
            assert (REPO / argv[0]).exists()
        parse_command(argv[1:])


#: Work-period numbers, which the project's own texts do not carry (git keeps the history).
WORK_PERIOD = re.compile(r"[Ss]ession [0-9]+|-s[0-9]+(-[0-9]+)?\.json")


def test_the_readme_is_a_short_product_page_speaking_of_the_present():
    assert len(README.splitlines()) <= 250
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        found = [m.group(0) for m in WORK_PERIOD.finditer(doc.read_text(encoding="utf-8"))]
        assert not found, f"{doc.name}: {found}"
    for name in re.findall(r"`(?:bench/results/)?([\w.-]+\.json)`", README):
        if name != "logstream-model.json":
            assert (REPO / "bench" / "results" / name).exists(), name


#: ``bench/results/live-path.json`` is written by the live path's benchmark (another change):
#: the other benchmarks keep to one file fewer than the limit of 25.
BENCH_RESULTS_LIMIT = 24


def test_bench_results_hold_one_current_file_per_benchmark():
    """Issue 54 item 31: ``bench/results/`` held 27 files, several per benchmark (``floor``,
    ``floor-1d``, ``floor-284d`` …). Each benchmark writes one file, its runs (``31d``,
    ``284d``, ``report-panels`` …) under ``runs``; every file is a benchmark's result."""
    results = REPO / "bench" / "results"
    files = sorted(p.name for p in results.iterdir() if p.name != "live-path.json")
    assert len(files) <= BENCH_RESULTS_LIMIT, files
    scripts = {p.name: p.read_text(encoding="utf-8") for p in (REPO / "bench").glob("*.py")}
    for name in files:  # the default result of exactly one benchmark: harness.parser(doc, NAME)
        made = rf"harness\.parser\([^,()]+(\(\))?(\[0\])?, \"{name.removesuffix('.json')}\""
        owners = [s for s, text in scripts.items() if re.search(made, text)]
        assert len(owners) == 1, (name, owners)
    for name in ("floor.json", "vs-goaccess.json", "profile-batch.json"):
        runs = json.loads((results / name).read_text())["runs"]
        assert "31d" in runs and "284d" in runs, (name, sorted(runs))


def test_the_time_to_the_first_data_is_stated_once_where_it_is_measured():
    """Issue 54 item 21: the README said the demo's data shows "in about 15 seconds" while its
    own performance table, from ``bench/results/make-run.json``, said 26.4 s. A measured figure
    is stated once, in the table, with the run that measured it."""
    measured = json.loads((REPO / "bench" / "results" / "make-run.json").read_text())
    first_data = f"{measured['first_data_s']} s"
    before, performance = README.split("## Performance", 1)
    assert not re.search(r"(shows|appears|data) in (about )?\d", before)
    assert f"first data on the dashboard {first_data} after start" in performance
    # not stated above the table (another row's figure may equal it: "13.8 s" was both)
    assert first_data not in before


#: A Spark version named in a text (``Spark 4.2``, ``PySpark 4.2.0``).
SPARK_VERSION = re.compile(r"\b(?:Py)?Spark (\d+)\.(\d+)(?:\.(\d+))?\b")


def test_no_text_names_a_spark_newer_than_the_pinned_one():
    """The docs said Spark 4.3 and "checked on PySpark 4.3.0" while the project pins 4.2.0. A
    newer version is named only with a figure measured on it before the pin, and says so."""
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    pinned = tuple(map(int, re.search(r'"pyspark==(\d+)\.(\d+)\.(\d+)"', pyproject).groups()))
    texts = [REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "src").rglob("*.py")]
    newer = []
    for path in texts:
        text = " ".join(path.read_text(encoding="utf-8").split())
        for m in SPARK_VERSION.finditer(text):
            version = (int(m[1]), int(m[2]), int(m[3] or 0))
            if version > pinned and "before the project pinned" not in text[m.end() : m.end() + 40]:
                newer.append(f"{path.relative_to(REPO)}: {m[0]}")
    assert not newer, newer
