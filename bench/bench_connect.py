"""The NASA day's batch report against a warm Spark Connect server, a cold local ``logstream
batch`` and GoAccess, in one run.

Input: the real NASA day (1995-07-09, 35,272 lines, ``NASA_access_log_Jul95_day09.log.gz``),
uncompressed into a plain file that every command reads (GoAccess reads plain text).
Every figure is the wall time of a whole ``logstream`` (or ``goaccess``) process, measured
one after the other on the same machine:

1. ``goaccess``: ``goaccess - --log-format=COMMON --no-ip-validation -o r.json`` fed the day
   on standard input (:func:`bench.harness.goaccess_seconds`);
2. ``local_cold``: ``logstream batch DAY --format common --quiet --json r.json``: a JVM of its
   own, started and stopped (the class-data archive of ``make setup`` used when there);
3. ``connect_warm``: the same command with ``--remote sc://127.0.0.1:PORT``, against a server
   started by this script (:class:`logstream.connect.server.LocalConnectServer`, untimed)
   and warmed by ``--warmups`` reports first (untimed): the client process has no JVM, the
   server has its classes loaded and its code generated;
4. ``connect_first``: the first report against the new server (before the warm-ups), for
   what a cold server costs.

Each is run ``--repeat`` times (median kept, every time in the result). The reports are
compared: the Connect report's JSON equals the local one but for the KLL sketch quantiles of
the sessions (``median_duration_s``, ``p95_duration_s``), which vary from run to run of the
same local command too.

Usage (the ``connect`` run of ``bench/results/cluster.json``, :mod:`bench.bench_cluster`)::

    python bench/bench_connect.py                      # = bench_cluster.py --run connect
    python bench/bench_connect.py --repeat 1 --warmups 1
"""

from __future__ import annotations

import json
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness

#: The report's keys that come from KLL sketches (randomised: a local run differs from the
#: next one too).
KLL_KEYS = ("median_duration_s", "p95_duration_s")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def report_seconds(day: Path, out: Path, *extra: str) -> float:
    """Wall seconds of ``logstream batch DAY --format common --quiet --json OUT`` (+ extra)."""
    cmd = [*harness.LOGSTREAM, "batch", str(day), "--format", "common", "--quiet"]
    return harness.timed([*cmd, "--json", str(out), *extra])


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` without its KLL quantiles (see :data:`KLL_KEYS`)."""
    sessions = {k: v for k, v in report["sessions"].items() if k not in KLL_KEYS}
    return {**report, "sessions": sessions}


def add_arguments(parser: Any) -> None:
    parser.add_argument("--repeat", type=int, default=3, help="connect: timed runs of each")
    parser.add_argument(
        "--warmups", type=int, default=2, help="connect: untimed reports on the server first"
    )


def measure(args: Any) -> dict[str, Any]:
    """The run of the module docstring; its result."""
    from logstream.connect.server import LocalConnectServer

    times: dict[str, list[float]] = {"goaccess": [], "local_cold": [], "connect_warm": []}
    with harness.scratch("bench-connect-") as work:
        day = work / harness.NASA_DAY_FILE.removesuffix(".gz")  # plain text: GoAccess reads it
        day.write_bytes(harness.nasa_day_bytes())
        server = LocalConnectServer(work / "server", free_port(), die_with_parent=True)
        t0 = time.monotonic()
        server.start()
        server_start_s = time.monotonic() - t0
        remote = ("--remote", server.url)
        try:
            first_s = report_seconds(day, work / "first.json", *remote)
            for n in range(args.warmups):
                report_seconds(day, work / f"warm-{n}.json", *remote)
            for _ in range(args.repeat):  # interleaved: a drift of the machine's load is shared
                times["goaccess"].append(harness.goaccess_seconds([day]))
                times["local_cold"].append(report_seconds(day, work / "local.json"))
                times["connect_warm"].append(report_seconds(day, work / "connect.json", *remote))
        finally:
            server.stop()
        local = json.loads((work / "local.json").read_text())
        connect = json.loads((work / "connect.json").read_text())
    equal = comparable(local) == comparable(connect)
    medians = {k: round(statistics.median(v), 2) for k, v in times.items()}
    result = {
        "input": harness.NASA_DAY_FILE,
        "lines": local["general"]["total_requests"],
        "median_s": medians,
        "runs_s": {k: [round(x, 2) for x in v] for k, v in times.items()},
        "connect_first_s": round(first_s, 2),
        "server_start_s": round(server_start_s, 1),
        "warmups": args.warmups,
        "reports_equal_but_kll_quantiles": equal,
        "goaccess": harness.goaccess_version(),
        "machine": harness.machine(),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    return result


def print_table(result: dict[str, Any]) -> None:
    print("| run | median s | runs s |")
    print("|---|---:|---|")
    for key, seconds in result["runs_s"].items():
        runs = ", ".join(f"{x:.2f}" for x in seconds)
        print(f"| {key} | {result['median_s'][key]} | {runs} |")
    first, start = result["connect_first_s"], result["server_start_s"]
    print(f"| connect_first | {first:.2f} | (server started in {start:.1f} s) |")


def passed(result: dict[str, Any]) -> bool:
    return bool(result["reports_equal_but_kll_quantiles"])


if __name__ == "__main__":
    from bench import bench_cluster

    harness.run(lambda: bench_cluster.main(["--run", "connect", *sys.argv[1:]]))
