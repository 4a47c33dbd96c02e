"""``logstream generate`` from the command line."""

from __future__ import annotations

import gzip
import os
import socket
import threading

import pytest

from logstream.cli import main
from logstream.generate import TrafficConfig, generate_lines
from tests import oracle


def test_out_is_reproducible_by_seed(tmp_path, capsys):
    a, b, c = (tmp_path / n for n in ("a.log", "b.log", "c.log.gz"))
    assert main(["generate", "--out", str(a), "--lines", "3000", "--seed", "5"]) == 0
    assert "wrote 3,000 lines" in capsys.readouterr().err
    assert main(["generate", "--out", str(b), "--lines", "3000", "--seed", "5", "-q"]) == 0
    assert main(["generate", "--out", str(c), "--lines", "3000", "--seed", "6", "-q"]) == 0
    assert a.read_bytes() == b.read_bytes()
    assert a.read_text().splitlines() == list(generate_lines(TrafficConfig(seed=5, max_lines=3000)))
    other = gzip.decompress(c.read_bytes()).decode().splitlines()
    assert len(other) == 3000 and other != a.read_text().splitlines()


def test_common_format_and_options_reach_the_generator(tmp_path):
    out = tmp_path / "common.log"
    args = [
        "generate",
        "--out",
        str(out),
        "--format",
        "common",
        "--rate",
        "5",
        "--duration",
        "10m",
        "--start",
        "2024-03-10T12:00:00-05:00",
        "--seed",
        "1",
        "--flash-crowd",
        "2m,1m,6,/news/hot.html",
        "-q",
    ]
    assert main(args) == 0
    lines = out.read_text().splitlines()
    refs = [oracle.parse_line(line) for line in lines]
    assert all(r is not None and r.user_agent is None and r.referrer is None for r in refs)
    assert all(line.count('"') == 2 for line in lines)
    assert all("-0500]" in line for line in lines)
    assert sum('"GET /news/hot.html ' in line for line in lines) > 100


def test_dir_output_paced_by_speedup_equals_the_file_output(tmp_path):
    out, chunks = tmp_path / "all.log", tmp_path / "chunks"
    common = ["--rate", "20", "--duration", "10m", "--seed", "2", "-q"]
    assert main(["generate", "--out", str(out), *common]) == 0
    assert (
        main(
            [
                "generate",
                "--dir",
                str(chunks),
                "--speedup",
                "100000",
                "--chunk-lines",
                "1000",
                *common,
            ]
        )
        == 0
    )
    names = sorted(n for n in os.listdir(chunks) if not n.startswith("."))
    assert len(names) > 5
    assert b"".join((chunks / n).read_bytes() for n in names) == out.read_bytes()


def test_tcp_output_reaches_a_client(tmp_path):
    with socket.socket() as probe:  # find a free loopback port
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    received = bytearray()

    def client() -> None:
        for _ in range(200):
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except ConnectionRefusedError:
                threading.Event().wait(0.02)
        with sock:
            while data := sock.recv(65536):
                received.extend(data)

    reader = threading.Thread(target=client)
    reader.start()
    args = [
        "generate",
        "--tcp",
        f"127.0.0.1:{port}",
        "--speedup",
        "100000",
        "--rate",
        "20",
        "--duration",
        "5m",
        "--seed",
        "4",
        "-q",
    ]
    assert main(args) == 0
    reader.join(timeout=30)
    expected = list(generate_lines(TrafficConfig(rate_per_s=20, duration_s=300, seed=4)))
    assert received.decode().splitlines() == expected


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give exactly one output"),
        (["--out", "{tmp}/a", "--dir", "{tmp}/d"], "give exactly one output"),
        (["--out", "{tmp}/a", "--speedup", "10"], "--speedup paces --tcp and --dir"),
        (["--out", "{tmp}/a", "--flash-crowd", "1h,5m"], "START,DURATION,MULTIPLIER"),
        (["--out", "{tmp}/a", "--start", "yesterday"], "not an ISO 8601"),
        (["--out", "{tmp}/a", "--format", "nginx"], "use common or combined"),
        (["--out", "/nonexistent/dir/a.log"], "does not exist"),
    ],
)
def test_bad_options_exit_2_with_a_message(args, message, tmp_path, capsys):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert main(["generate", *args]) == 2
    assert message in capsys.readouterr().err
