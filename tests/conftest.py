"""Shared fixtures: one SparkSession for the whole run, and the real data files."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

# PySpark turns timestamps into naive datetimes in the Python process's zone: pin it to UTC
# so collected values read as the UTC instants Spark computed.
os.environ["TZ"] = "UTC"
time.tzset()

# The suite's ``logstream`` processes (drills, demos, the CLI) are JVMs that live for a minute:
# the C1 compiler alone serves them better than C1 and C2, whose optimised compiles they mostly
# do not live to use (the kill drill, 2 cores: 124 → 77 CPU-seconds, 100 → 84 s). Spark's
# launcher reads ``SPARK_SUBMIT_OPTS``, so every JVM the suite starts gets it, but the shared
# session below, which runs for the whole suite and is faster with C2 (tests/report: 197 s
# with C2, 225 s with C1 only). The product's JVMs keep the JDK's default.
SUBPROCESS_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
os.environ.setdefault("SPARK_SUBMIT_OPTS", SUBPROCESS_JVM_OPTIONS)

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("LOGSTREAM_DATA_DIR", REPO.parent / "shared" / "data"))

NASA_DAY = "NASA_access_log_Jul95_day09.log.gz"
NASA_JUL_2000 = "NASA_access_log_Jul95_first2000.log.gz"
NASA_AUG_1000 = "NASA_access_log_Aug95_first1000.log.gz"
COMBINED = "elastic_apache_logs_combined_2015.log.gz"
TWIKI_CRLF = "monitorware_twiki_access_log_2004.log.gz"
OPENDAP = "NASA_LPDAAC_opendap_2015_custom.txt.gz"


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def data_file(name: str) -> Path:
    """Path of a real data file; a missing file fails the test (never a skip)."""
    path = DATA_DIR / name
    if not path.is_file():
        pytest.fail(
            f"real data file {path} is missing: put ../shared/data beside the repo or set "
            "LOGSTREAM_DATA_DIR",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the test run (UTC, UI off, 2 local cores)."""
    from logstream.config import SparkSettings
    from logstream.session import get_spark

    options = os.environ.get("SPARK_SUBMIT_OPTS")
    if options == SUBPROCESS_JVM_OPTIONS:
        del os.environ["SPARK_SUBMIT_OPTS"]
    try:
        session = get_spark(
            SparkSettings(master="local[2]", ui_enabled=False, app_name="logstream-tests")
        )
    finally:
        if options is not None:
            os.environ["SPARK_SUBMIT_OPTS"] = options
    yield session
    session.stop()


@pytest.fixture(scope="session")
def nasa_day() -> Path:
    return data_file(NASA_DAY)


@pytest.fixture(scope="session")
def combined_log() -> Path:
    return data_file(COMBINED)


@pytest.fixture(scope="session")
def crlf_log() -> Path:
    return data_file(TWIKI_CRLF)
