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


def _no_panels() -> list[str]:
    from logstream.report.panels import PANELS

    return [arg for panel in PANELS for arg in ("--no-panel", panel)]


#: ``logstream batch`` options that leave out every GoAccess panel, for a test that reads
#: none of them (the panels are most of a small report's cold start in a new JVM).
NO_PANELS = _no_panels()


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


#: The modules that take longest (``--durations`` of a full run, slowest first). ``make test``
#: runs them first (pytest-xdist keeps the collection order with ``--no-loadscope-reorder``), so
#: the two workers end together on short modules instead of one running a drill alone at the end.
SLOWEST_MODULES = (
    "tests/pipeline/test_recovery.py",
    "tests/kafka/test_kafka_broker.py",
    "tests/pipeline/test_rotation_drill.py",
    "tests/dstream/test_recovery.py",
    "tests/test_demo.py",
    "tests/pipeline/test_parity.py",
    "tests/cluster/test_spark_submit.py",
    "tests/analytics/test_alerts.py",
    "tests/reference/test_reference.py",
    "tests/devices/test_devices.py",
    "tests/report/test_batch_report.py",
    "tests/dashboard/test_own_log.py",
    "tests/test_readme.py",
    "tests/test_fuzz.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run :data:`SLOWEST_MODULES` first, in that order; the rest keep theirs."""
    missing = [name for name in SLOWEST_MODULES if not (REPO / name).is_file()]
    assert not missing, f"SLOWEST_MODULES names modules that are gone: {missing}"
    rank = {name: i for i, name in enumerate(SLOWEST_MODULES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
