"""The one place a SparkSession is built.

Every command gets its session from :func:`get_spark`. The session is configured for
logstream's needs (Spark docs, "Structured Streaming Programming Guide" and "Configuration"):

* the session time zone is pinned to UTC, so event times are instants and windows are aligned
  on UTC minutes whatever the machine's zone is;
* ANSI mode stays on (Spark 4 default); the parser uses ``try_*`` functions so no input line can
  fail a job;
* shuffle partitions are sized for a small machine, and a local master's JVM uses the
  parallel (throughput) garbage collector and the machine's class-data archive
  (:mod:`logstream.jvm`, built by ``make setup``);
* streaming state lives in the RocksDB state store with changelog checkpointing;
* Spark's own streaming metrics are switched on (``spark.sql.streaming.metricsEnabled``) and
  exposed through the Prometheus servlet of the UI (``/metrics/prometheus/`` on the driver's
  UI port; the dashboard serves logstream's own metrics at the same path,
  :mod:`logstream.monitoring.prometheus`).

The master is never forced when logstream runs under ``spark-submit``: an explicit
``SparkSettings.master`` wins, then whatever ``spark-submit`` put in the Spark configuration,
then ``local[*]``.

A local master listens on the loopback interface only (:data:`LOOPBACK`): the driver's RPC and
block-manager ports (``spark.driver.bindAddress``, ``spark.driver.host``) and Spark's UI, whose
Jetty server binds ``$SPARK_LOCAL_IP`` or every interface (Spark 4 has no setting for its
address), so the JVM logstream starts gets ``SPARK_LOCAL_IP=127.0.0.1``. Any of the three set
by the user (``--conf spark.driver.bindAddress=0.0.0.0``, the environment) leaves all three
to Spark, as before; a cluster master's addresses are the cluster's. When logstream starts the
JVM itself it is detached from the driver's signals and dies with it
(:func:`logstream.jvm.launch_gateway`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from logstream.config import SparkSettings
from logstream.jvm import archive_options, launch_gateway
from logstream.kafka.maven import KAFKA_PACKAGE

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "CODEGEN_CACHE_ENTRIES",
    "KAFKA_PACKAGE",
    "LOCAL_CHECKPOINT_MANAGER",
    "LOCAL_JAVA_OPTIONS",
    "LOOPBACK",
    "OBJECT_AGG_KEYS",
    "ROCKSDB_PROVIDER",
    "SHORT_RUN_JAVA_OPTIONS",
    "SPARK_LOG_LEVEL",
    "WORKER_START_TIMEOUT",
    "conf_set",
    "get_spark",
    "is_worker_start_timeout",
    "kafka_available",
    "kafka_jars",
    "session_conf",
]

#: Spark's message when a Python worker it started (a ``transformWithStateInPandas``
#: query's first micro-batch starts one on the driver) did not connect back within 10 s: a
#: limit of Spark 4.2's ``PythonWorkerFactory`` that no setting changes, met on a busy machine
WORKER_START_TIMEOUT = "Python worker failed to connect back"


@contextmanager
def conf_set(spark: SparkSession, settings: Mapping[str, str | None]) -> Iterator[None]:
    """Run a block with ``settings`` in ``spark``'s runtime conf (a None value unsets its key),
    then put back what the session had, unset keys unset again.

    Examples
    --------
    >>> with conf_set(spark, {"spark.sql.shuffle.partitions": "7"}):  # doctest: +SKIP
    ...     df.groupBy("status").count().collect()
    """
    before = {key: spark.conf.get(key, None) for key in settings}
    try:
        _set_conf(spark, settings)
        yield
    finally:
        _set_conf(spark, before)


def _set_conf(spark: SparkSession, settings: Mapping[str, str | None]) -> None:
    for key, value in settings.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


def is_worker_start_timeout(error: BaseException | None) -> bool:
    """Whether a query failed because a Python worker did not connect back in time
    (:data:`WORKER_START_TIMEOUT`): the query itself is sound, and restarting it from its
    checkpoint replays the micro-batch it was planning."""
    return error is not None and WORKER_START_TIMEOUT in str(error)


ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
#: The JIT compiles every method, however large: Spark's whole-stage code for the batch
#: report's one aggregation (a generator of the views, then a hash aggregation) is a method
#: past HotSpot's 8,000 bytecodes, which the JVM otherwise leaves interpreted (the report's
#: first stage on 31 NASA days, 2 cores: 39.6 s of executor time without, 18.9 s with).
JIT_OPTIONS = "-XX:-DontCompileHugeMethods"
#: JVM options of a local master's driver (the one JVM), unless the configuration sets some.
LOCAL_JAVA_OPTIONS = f"-XX:+UseParallelGC {JIT_OPTIONS}"
#: JVM option of a short run's local driver (:attr:`logstream.config.SparkSettings.short_run`):
#: the client compiler only (C1). The NASA day's report, 2 cores: 16.5 s → 13.5 s.
SHORT_RUN_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
#: The streaming checkpoint's file manager of a local master (``spark.sql.streaming.
#: checkpointFileManagerClass``, unless the configuration sets one): Hadoop's ``FileSystem``
#: API, whose rename on a local disk is Java's. Spark's default goes through Hadoop's
#: ``FileContext``, whose rename asks for each path's link status, and without Hadoop's native
#: library ``RawLocalFileSystem`` answers that by running ``readlink`` (two processes per
#: rename, a few dozen per micro-batch: its offset, commit and source logs). The class is
#: Spark's own, its fallback for file systems without ``FileContext``; the rename is as atomic.
LOCAL_CHECKPOINT_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)
_CHECKPOINT_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
_EXECUTOR_JAVA_OPTIONS = "spark.executor.extraJavaOptions"
#: Generated classes Spark keeps compiled (``spark.sql.codegen.cache.maxEntries``; Spark's
#: default is 100).
CODEGEN_CACHE_ENTRIES = 1000
#: Keys an object aggregate (HLL and KLL sketches) holds a task before it falls back to
#: sorting (``spark.sql.objectHashAggregate.sortBased.fallbackThreshold``; Spark's default is
#: 128). A micro-batch of a backfill sketches a minute of visitors per key, about 11,000 keys a
#: task on 31 days; an HLL sketch (lgConfigK 12) is at most about 4 KiB, so 16,384 keys hold
#: at most about 70 MB a task (the hash map is outside Spark's memory accounting).
OBJECT_AGG_KEYS = 16_384

#: Spark's log level: errors only (logstream prints its own progress and summaries).
SPARK_LOG_LEVEL = "ERROR"

#: The address a local master's driver and UI listen on, unless the user chose one.
LOOPBACK = "127.0.0.1"
#: Settings and the environment variable that choose those addresses: one set by the user,
#: and logstream sets none of them.
_ADDRESS_KEYS = ("spark.driver.bindAddress", "spark.driver.host")
_LOCAL_IP_ENV = "SPARK_LOCAL_IP"


def session_conf(settings: SparkSettings) -> dict[str, str]:
    """Return the Spark configuration logstream sets, without the master.

    Parameters
    ----------
    settings : SparkSettings
        Validated settings.

    Returns
    -------
    dict of str to str
        Configuration keys and values; ``settings.extra`` is applied last and so wins.
    """
    conf = {
        "spark.app.name": settings.app_name,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.ansi.enabled": "true",
        "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
        "spark.default.parallelism": str(max(2, settings.shuffle_partitions)),
        "spark.ui.enabled": str(settings.ui_enabled).lower(),
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.prometheus.enabled": "true",
        "spark.sql.streaming.metricsEnabled": "true",
        # the driver's metrics, streaming queries' among them, at UI/metrics/prometheus/
        "spark.metrics.conf.*.sink.prometheusServlet.class": (
            "org.apache.spark.metrics.sink.PrometheusServlet"
        ),
        "spark.metrics.conf.*.sink.prometheusServlet.path": "/metrics/prometheus",
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.adaptive.enabled": "true",
        # a micro-batch's cached parse is read a few times, then dropped: compressing it cost
        # more CPU than it saved (31-day backfill, 2 cores: parse and cache 6.3 s → 5.2 s,
        # the events written from it 4.7 s → 3.8 s; bench/profile_pipeline.py)
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        # a micro-batch generates about 195 classes (whole-stage code, projections,
        # predicates); with Spark's default cache of 100 each micro-batch compiled them all
        # again. Kept, the ones that do not change come back from the cache: 40 compiles a
        # warm micro-batch instead of 195, a warm 3,000-line micro-batch 5.8 s → 5.0–5.4 s
        # (bench/profile_microbatch.py, 2 cores)
        "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE_ENTRIES),
        # the visitors' sketches per minute (logstream.analytics.panes.fold_panes) in a hash
        # map, not sorted: 31-day backfill, their stages 6.0 → 4.7 executor-s (one run each)
        "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": str(OBJECT_AGG_KEYS),
        # lower() by the JVM's case mapping (Spark 3's), not ICU's (Spark 4's default):
        # logstream lowercases a file extension on every line, and ICU's first use in a JVM
        # builds its break iterators: 77 of 631 CPU samples of a cold 3,000-line `logstream
        # run`, 1 of 506 without (bench/profile_cold.py, docs/performance.md); the same lower
        # case for every ASCII text
        "spark.sql.icu.caseMappings.enabled": "false",
        # a truncated .gz keeps the lines read before the error instead of failing the job;
        # logstream finds such files itself and quarantines them (logstream.sources.integrity)
        "spark.sql.files.ignoreCorruptFiles": "true",
        # Local Spark on a laptop: keep the driver from reserving most of the memory for itself.
        "spark.driver.memory": "2g",
    }
    conf.update(settings.extra)
    return conf


_JARS = "spark.jars"


def kafka_jars(jars: str | None = None, packages: str | None = None) -> str | None:
    """The ``spark.jars`` of a session that reads or writes Kafka.

    Parameters
    ----------
    jars : str, optional
        ``spark.jars`` set by the user (comma-separated), kept first.
    packages : str, optional
        ``spark.jars.packages`` set by the user.

    Returns
    -------
    str or None
        ``jars`` with the connector's cached jars (:func:`logstream.kafka.maven.jars`)
        appended; unchanged when the user already adds the connector.

    Raises
    ------
    ConfigError
        When the jars are not cached and Maven cannot fetch them (the message says how).
    """
    given = ",".join(filter(None, (jars, packages)))
    if "spark-sql-kafka" in given:
        return jars
    from logstream.kafka.maven import connector
    from logstream.kafka.maven import jars as cached_jars

    return ",".join(filter(None, [jars, *(str(p) for p in cached_jars(connector()))]))


def kafka_available(spark: SparkSession) -> bool:
    """Whether Spark's Kafka connector is on the classpath: Spark resolves the ``kafka`` source
    (a missing data source fails when the stream is defined, before anything runs)."""
    try:
        spark.readStream.format("kafka").option("subscribe", "t").option(
            "kafka.bootstrap.servers", "localhost:9092"
        ).load()
    except Exception:
        return False
    return True


def get_spark(
    settings: SparkSettings | None = None, keep_signal_handlers: bool = False
) -> SparkSession:
    """Return the active SparkSession, creating it with logstream's configuration.

    Parameters
    ----------
    settings : SparkSettings, optional
        Defaults to ``SparkSettings()`` (master from ``$LOGSTREAM_SPARK_MASTER``, spark-submit or
        ``local[*]``).
    keep_signal_handlers : bool
        Keep the caller's SIGINT handler: a new ``SparkContext`` installs one that cancels every
        running job and raises ``KeyboardInterrupt``; a command that stops its queries between
        micro-batches (``logstream run``) installs its own first and keeps it.

    Returns
    -------
    pyspark.sql.SparkSession
        A session whose time zone is UTC. When a session already exists (e.g. in a notebook or
        a test run) its static settings are kept and only runtime SQL settings are applied.
        With ``settings.remote`` (``--remote``, ``$SPARK_REMOTE``) a Spark Connect session
        (:func:`logstream.connect.remote_session`).
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    settings = settings or SparkSettings()
    if settings.remote:
        from logstream.connect import remote_session

        return remote_session(settings.remote, session_conf(settings))
    # Spark in this process: PySpark's builder would turn to Spark Connect on $SPARK_REMOTE
    # (only batch and run honour it, through settings.remote)
    os.environ.pop("SPARK_REMOTE", None)
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        # under spark-submit: connect to its JVM first, so that SparkConf() loads what
        # spark-submit set (its --master among them); before, the master was not seen and
        # local[*] was set, and a "cluster" run ran in the driver alone
        SparkContext._ensure_initialized()
    conf = SparkConf()
    for key, value in session_conf(settings).items():
        conf.set(key, value)
    if settings.master:
        conf.setMaster(settings.master)
    elif not conf.contains("spark.master"):
        conf.setMaster("local[*]")
    local = conf.get("spark.master", "").startswith("local")
    if local and not conf.contains(_JAVA_OPTIONS):
        # one JVM does the driver's and the executors' work: the throughput collector beats
        # G1, whose concurrent threads compete for the cores (31-day backfill in-process, 2
        # cores, bench/profile_pipeline.py: 59–62 s with G1, 53 s with ParallelGC); and the
        # machine's class-data archive, once built, halves the JVM's start (logstream.jvm)
        short = [SHORT_RUN_JAVA_OPTIONS] if settings.short_run else []
        conf.set(_JAVA_OPTIONS, " ".join([LOCAL_JAVA_OPTIONS, *short, *archive_options()]))
    if not local and not conf.contains(_EXECUTOR_JAVA_OPTIONS):
        conf.set(_EXECUTOR_JAVA_OPTIONS, JIT_OPTIONS)  # a cluster's executors run the code
    if local and not conf.contains(_CHECKPOINT_MANAGER):
        # the local master runs pyspark's own jars, so the class is there; a micro-batch's
        # offset and commit logs without spawning processes: a warm 1,500-line micro-batch's
        # time outside addBatch 0.16–0.19 s → 0.08–0.09 s (bench/profile_microbatch.py)
        conf.set(_CHECKPOINT_MANAGER, LOCAL_CHECKPOINT_MANAGER)
    if local and "PYSPARK_PYTHON" not in os.environ:
        # local Python workers (pandas UDFs, transformWithStateInPandas) use this interpreter,
        # with its packages, not whatever `python3` is first on PATH
        os.environ["PYSPARK_PYTHON"] = sys.executable
    loopback = (
        local
        and not any(conf.contains(key) for key in _ADDRESS_KEYS)
        and _LOCAL_IP_ENV not in os.environ
    )
    if loopback:  # issue 36: nothing of a laptop's Spark answers from another address
        for key in _ADDRESS_KEYS:
            conf.set(key, LOOPBACK)
    own_jvm = SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ
    if settings.kafka and own_jvm:
        # the connector joins the session's class loader, not the JVM's class path: the
        # class-data archive (keyed by the class path) still maps
        jars = kafka_jars(conf.get(_JARS, None), conf.get("spark.jars.packages", None))
        if jars:
            conf.set(_JARS, jars)
    with SparkContext._lock:
        if SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
            # a JVM of our own (under spark-submit it is already there): the UI's address is
            # the JVM's environment, read by Spark's WebUI.initServer
            env = {_LOCAL_IP_ENV: LOOPBACK} if loopback else {}
            SparkContext._ensure_initialized(gateway=launch_gateway(conf, env))
    handler = signal.getsignal(signal.SIGINT)
    main_thread = threading.current_thread() is threading.main_thread()
    if keep_signal_handlers and handler is not None and main_thread:
        try:
            SparkContext.getOrCreate(conf)  # a new context replaces the SIGINT handler
        except KeyboardInterrupt:
            # a SIGINT in the instant between its handler's installation and ours below
            if SparkContext._active_spark_context is None or not callable(handler):
                raise
            signal.signal(signal.SIGINT, handler)
            handler(signal.SIGINT, None)
        signal.signal(signal.SIGINT, handler)
    spark = SparkSession.builder.config(conf=conf).getOrCreate()
    spark.sparkContext.setLogLevel(SPARK_LOG_LEVEL)
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    return spark
