"""The DStream edition's word count, end to end: the replay server feeds
``logstream dstream wordcount`` over a socket (a receiver), and the counts are exact."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import warnings
from collections import Counter
from pathlib import Path

import pytest

from logstream.cli import main
from logstream.dstream import DEPRECATION_NOTICE, parse_socket, streaming_context
from logstream.replay import Replayer, ReplayOptions, TcpLineServer, iter_file_records, iter_lines
from tests.conftest import NASA_JUL_2000, data_file


def saved_counts(prefix: Path) -> tuple[Counter, int]:
    """Sum the counts of every batch saved by ``saveAsTextFiles`` (``('word', n)`` lines)."""
    import ast

    total: Counter = Counter()
    batches = 0
    for batch_dir in prefix.parent.glob(f"{prefix.name}-*"):
        batches += 1
        for part in batch_dir.glob("part-*"):
            for line in part.read_text().splitlines():
                word, n = ast.literal_eval(line)
                total[word] += n
    return total, batches


def test_wordcount_over_a_socket_counts_every_word_of_the_real_lines(tmp_path):
    log = data_file(NASA_JUL_2000)
    expected = Counter(w for line in iter_lines(str(log)) for w in line.split())
    server = TcpLineServer("127.0.0.1", 0, wait_for_client=True)
    host, port = server.address
    replayer = Replayer(lambda: iter_file_records([log]), server, ReplayOptions(rate_per_s=4000))

    def replay_then_close() -> None:  # the replay server ends while the job still runs
        replayer.run()
        server.stop()

    feeder = threading.Thread(target=replay_then_close, daemon=True)
    feeder.start()  # waits for the receiver to connect
    prefix = tmp_path / "counts" / "wc"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "logstream",
            "dstream",
            "wordcount",
            "--socket",
            f"{host}:{port}",
            "--batch",
            "1s",
            "--duration",
            "10s",
            "--save",
            str(prefix),
            "--master",
            "local[2]",  # one core for the receiver, one for the batches
        ],
        env={**os.environ, "LOGSTREAM_SPARK_UI": "false"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    replayer.stop_event.set()
    server.stop()
    feeder.join(10)
    log_text = done.stdout + done.stderr
    assert done.returncode == 0, log_text[-3000:]
    assert replayer.summary.lines_sent == 2000
    counts, batches = saved_counts(prefix)
    assert counts == expected, (sum(counts.values()), sum(expected.values()))
    assert batches >= 10  # one directory per 1-second batch
    # the guide's pprint output, and PySpark's deprecation said once, in logstream's words
    assert "-------------------------------------------\nTime: " in done.stdout
    assert " ".join(DEPRECATION_NOTICE.split()) in " ".join(log_text.split())
    assert "FutureWarning" not in log_text
    # the closed server is said once, in one line; the receiver's restarts every 2 s (refused
    # connections) leave no ERROR line and no Java stack trace
    said = [
        line
        for line in done.stderr.splitlines()
        if "lost the connection" in line or line.startswith("receiving from")
    ]
    assert said[0] == (
        f"lost the connection to tcp://{host}:{port}: the server closed the connection; the "
        "receiver retries every 2 s, quietly (Ctrl-C or --duration stops)"
    ), done.stderr[-3000:]
    assert len(said) == 1, said  # the server never comes back: no "receiving … again"
    outside = [line for line in log_text.splitlines() if "ConnectException" in line]
    assert all(line in said for line in outside), log_text[-3000:]
    assert "ERROR ReceiverTracker" not in log_text
    assert "\tat " not in log_text


def test_the_deprecation_warning_is_caught_where_it_arises_and_no_other(spark):
    said: list[str] = []
    with warnings.catch_warnings(record=True) as outside:
        warnings.simplefilter("always")
        ssc = streaming_context(spark.sparkContext, 1, notice=said.append)
    try:
        assert said == [DEPRECATION_NOTICE]
        assert not [w for w in outside if "DStream" in str(w.message)]
    finally:
        ssc.stop(stopSparkContext=False)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give exactly one source"),
        (["--socket", "localhost:9", "--dir", "{tmp}"], "give exactly one source"),
        (["--socket", "localhost"], "HOST:PORT"),
        (["--socket", "localhost:0"], "port from 1 to 65535"),
        (["--socket", "::1:9"], "IPv6 host in brackets"),
        (["--dir", "{tmp}/missing"], "is not a directory"),
        (["--socket", "localhost:9", "--batch", "soon"], "is not an interval"),
    ],
)
def test_bad_options_exit_2_before_spark_starts(args, message, tmp_path, capsys):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert main(["dstream", "wordcount", *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--socket", "localhost:9", "--batch", "2s", "--window", "5s"], "multiple of the batch"),
        (["--socket", "localhost:9", "--store", "{tmp}/a-file/x.db"], "cannot create directory"),
        (["--socket", "localhost:9", "--format", "%h %Q"], "%Q"),
        (["--socket", "localhost:9", "--listed-hosts", "{tmp}/none.txt"], "cannot read the host"),
        (["--dir", "{tmp}", "--max-rate", "100"], "apply to --socket, not --dir"),
        (["--dir", "{tmp}", "--backpressure"], "apply to --socket, not --dir"),
        (["--socket", "localhost:9", "--max-rate", "0"], "--max-rate"),
    ],
)
def test_dstream_run_rejects_bad_options_before_spark_starts(args, message, tmp_path, capsys):
    (tmp_path / "a-file").write_text("not a directory")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert main(["dstream", "run", *args, "--checkpoint", str(tmp_path / "cp")]) == 2
    assert message in capsys.readouterr().err


def test_a_socket_address_is_read_as_the_replay_server_reads_one():
    assert parse_socket("[::1]:9999") == ("::1", 9999)
    assert parse_socket(":9999") == ("localhost", 9999)
    assert parse_socket("logs.example:514") == ("logs.example", 514)


def test_a_lost_receiver_is_reported_once_per_loss_and_not_at_the_stop():
    from logstream.dstream.receiver import ReceiverWatch

    said: list[str] = []
    watch = ReceiverWatch("tcp://h:9", said.append, delay_s=2)
    watch.batch_completed(5)
    watch.receiver_stopped(
        "Restarting receiver with delay 2000ms: Error connecting to h:9",
        "java.net.ConnectException: Connection refused\n\tat java.base/sun.nio.ch.Net.connect0",
    )
    for _ in range(30):  # a minute of retries
        watch.receiver_stopped("Restarting receiver with delay 2000ms: Error connecting to h:9", "")
        watch.batch_completed(0)
    watch.batch_completed(3)  # data again
    watch.receiver_stopped(
        "Restarting receiver with delay 2000ms: Socket data stream had no more data", ""
    )
    watch.batch_completed(0)
    watch.stopping = True
    watch.receiver_stopped("Stopped by driver", "")
    assert said == [
        "lost the connection to tcp://h:9: Error connecting to h:9 (java.net.ConnectException: "
        "Connection refused); the receiver retries every 2 s, quietly (Ctrl-C or --duration "
        "stops)",
        "receiving from tcp://h:9 again",
        "lost the connection to tcp://h:9: the server closed the connection; the receiver "
        "retries every 2 s, quietly (Ctrl-C or --duration stops)",
    ]


def test_records_received_before_a_loss_are_not_a_new_connection():
    """The batch that ends just after the server closed holds the last records sent before:
    not 'receiving again' (which a second 'lost' line then contradicted)."""
    import time

    from logstream.dstream.receiver import ReceiverWatch

    said: list[str] = []
    watch = ReceiverWatch("tcp://h:9", said.append, delay_s=2)
    now = int(time.time() * 1000)
    watch.batch_completed(7, now - 2000)
    watch.batch_completed(7, now - 1000)  # the interval: 1 s
    watch.receiver_stopped("Socket data stream had no more data", "")
    watch.batch_completed(4, now + 500)  # began before the loss: records sent before it
    watch.receiver_stopped("Error connecting to h:9", "")
    assert len(said) == 1 and said[0].startswith("lost the connection")
    watch.batch_completed(2, now + 60_000)  # a later interval: connected again
    assert said[-1] == "receiving from tcp://h:9 again"


def test_records_stored_late_after_a_loss_are_not_a_new_connection():
    """On a busy machine the receiver's last block can be stored after its stop, in a batch
    that began after the loss: the receiver cannot connect again before its restart delay
    (2 s) after its latest stop, so such records are not 'receiving again' either."""
    import time

    from logstream.dstream.receiver import ReceiverWatch

    said: list[str] = []
    watch = ReceiverWatch("tcp://h:9", said.append, delay_s=2)
    now = int(time.time() * 1000)
    watch.batch_completed(7, now - 1000)
    watch.batch_completed(7, now)  # the interval: 1 s
    watch.receiver_stopped("Socket data stream had no more data", "")
    watch.batch_completed(4, now + 2000)  # began 1 s after the loss: the last block, late
    assert len(said) == 1
    for _ in range(3):  # refused retries move the loss: still nothing new
        watch.receiver_stopped("Error connecting to h:9", "")
        watch.batch_completed(1, int(time.time() * 1000) + 1000)
    assert len(said) == 1, said
    watch.batch_completed(2, int(time.time() * 1000) + 4000)  # after the delay: connected
    assert said[-1] == "receiving from tcp://h:9 again"
