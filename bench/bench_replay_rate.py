"""Benchmark: does ``logstream replay --rate 5000`` hold its rate within 5 % over 10 s?

A real TCP client on loopback receives the NASA day (looped, so 50 000 lines are available)
replayed at a fixed rate; the client timestamps every read. Reported: the overall rate between
the first and the last line received, and the lines received in each one-second window.

Run from the repository root (real data in ``../shared/data`` or ``$LOGSTREAM_DATA_DIR``)::

    .venv/bin/python bench/bench_replay_rate.py            # --rate 5000 --seconds 10
    .venv/bin/python bench/bench_replay_rate.py --rate 20000

Exit status 0 when the overall rate and every full one-second window are within the
tolerance (5 %), 1 otherwise. Writes ``bench/results/replay-rate.json`` (``--out``).
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import harness
from logstream.replay import (
    Replayer,
    ReplayOptions,
    TcpLineServer,
    expand_files,
    iter_file_records,
)


def main() -> int:
    parser = harness.parser(__doc__.splitlines()[0], "replay-rate")
    parser.add_argument("--rate", type=float, default=5000.0, help="lines per second")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured duration")
    parser.add_argument("--tolerance", type=float, default=0.05, help="allowed relative error")
    parser.add_argument(
        "--file", default=str(harness.data_dir() / harness.NASA_DAY_FILE), help="log to replay"
    )
    args = parser.parse_args()

    files = expand_files([args.file])
    lines_wanted = int(args.rate * args.seconds) + 1  # first to last line: exactly `seconds`
    server = TcpLineServer("127.0.0.1", 0)
    reads: list[tuple[float, int]] = []  # (monotonic time, complete lines in this read)

    def client() -> None:
        with socket.create_connection(server.address) as sock:
            while data := sock.recv(65536):
                reads.append((time.monotonic(), data.count(b"\n")))

    reader = threading.Thread(target=client)
    reader.start()
    options = ReplayOptions(rate_per_s=args.rate, loop=True, limit_lines=lines_wanted)
    summary = Replayer(lambda: iter_file_records(files), server, options).run()
    reader.join()

    received = sum(n for _, n in reads)
    first = reads[0][0]
    last = reads[-1][0]
    overall = (received - 1) / (last - first)
    windows = []
    for second in range(int(args.seconds)):
        lo, hi = first + second, first + second + 1
        windows.append(sum(n for t, n in reads if lo <= t < hi))
    worst = max(abs(w / args.rate - 1) for w in windows)
    ok = abs(overall / args.rate - 1) <= args.tolerance and worst <= args.tolerance

    print(f"target rate        {args.rate:,.0f} lines/s over {args.seconds:g} s")
    print(
        f"lines received     {received:,} (replay sent {summary.lines_sent:,}, "
        f"{summary.passes} passes of {files[0].name})"
    )
    print(f"first → last line  {last - first:.3f} s")
    print(f"overall rate       {overall:,.1f} lines/s ({(overall / args.rate - 1) * 100:+.2f} %)")
    print(
        f"per-second windows min {min(windows):,} / max {max(windows):,} lines "
        f"(worst {worst * 100:.2f} % off)"
    )
    print(f"client reads       {len(reads):,} ({received / len(reads):.1f} lines per read)")
    print("PASS" if ok else f"FAIL: outside ±{args.tolerance * 100:g} %")
    figures = {
        "target_rate_per_s": args.rate,
        "seconds": args.seconds,
        "lines_received": received,
        "first_to_last_s": round(last - first, 6),
        "overall_rate_per_s": round(overall, 3),
        "per_second_min": min(windows),
        "per_second_max": max(windows),
        "worst_window_error": round(worst, 6),
        "passed": ok,
        "machine": harness.machine(),
    }
    harness.write_result(figures, args.out, show=False)
    return 0 if ok else 1


if __name__ == "__main__":
    harness.run(main)
