"""The real Kafka broker of the Kafka tests: started once per test session, on free ports."""

from __future__ import annotations

import pytest

from tests.conftest import free_port


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """A one-node Apache Kafka broker (KRaft) on 127.0.0.1, stopped by its pid at the end.

    The broker tests live in one module (``test_kafka_broker.py``), which pytest-xdist's
    ``--dist=loadfile`` runs on one worker: one broker per test run. It dies with the worker
    if the run is killed.
    """
    from logstream.kafka.broker import LocalBroker

    broker = LocalBroker(
        tmp_path_factory.mktemp("kafka-broker"),
        port=free_port(),
        controller_port=free_port(),
        die_with_parent=True,
    ).start()
    try:
        yield broker
    finally:
        broker.stop()
