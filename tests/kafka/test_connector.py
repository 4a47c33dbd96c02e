"""Spark's Kafka connector: fetched once into the cache at PySpark's version, put on the
classpath of the sessions that read or write Kafka only."""

from __future__ import annotations

import pyspark

from logstream.config import SparkSettings
from logstream.kafka import maven
from logstream.session import KAFKA_PACKAGE, kafka_jars, session_conf


def test_the_connector_is_for_pysparks_exact_version():
    assert KAFKA_PACKAGE == f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"


def test_the_generated_pom_excludes_the_jars_pyspark_ships():
    artifacts = maven.connector()
    assert artifacts.coordinates == (KAFKA_PACKAGE,)
    assert {"hadoop-client-api", "scala-library", "slf4j-api"} <= set(artifacts.excluded)
    assert "kafka-clients" not in artifacts.excluded
    pom = artifacts.pom()
    assert "<artifactId>spark-sql-kafka-0-10_2.13</artifactId>" in pom
    assert "<groupId>*</groupId><artifactId>hadoop-client-api</artifactId>" in pom


def test_the_cached_connector_is_the_four_jars_the_issue_names():
    """``make setup`` fetched it (``python -m logstream.kafka.maven``)."""
    names = {maven.artifact_id(p.name) for p in maven.jars(maven.connector(), fetch_missing=False)}
    assert names == {
        "spark-sql-kafka-0-10_2.13",
        "spark-token-provider-kafka-0-10_2.13",
        "kafka-clients",
        "commons-pool2",
    }


def test_only_a_kafka_session_gets_the_jars():
    assert "spark.jars" not in session_conf(SparkSettings())
    jars = kafka_jars("/opt/mine.jar").split(",")
    assert jars[0] == "/opt/mine.jar" and any("spark-sql-kafka-0-10" in j for j in jars[1:])
    # a connector the user adds (spark-submit --packages) is not added twice
    assert kafka_jars(None, f"{KAFKA_PACKAGE},org.x:y:1") is None
    assert (
        kafka_jars("/a/spark-sql-kafka-0-10_2.13-4.2.0.jar")
        == "/a/spark-sql-kafka-0-10_2.13-4.2.0.jar"
    )
