"""The session's configuration: what a micro-batch gains from it."""

from pyspark.sql import functions as F

from logstream.session import CODEGEN_CACHE_ENTRIES, LOCAL_CHECKPOINT_MANAGER, OBJECT_AGG_KEYS


def _compiled(spark) -> int:
    """Sources Janino has compiled in this JVM (Spark's ``CodeGenerator`` metrics source)."""
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
    return metrics.METRIC_COMPILATION_TIME().getCount()


def test_generated_classes_outlive_a_micro_batch(spark):
    """A micro-batch generates about 195 classes: with Spark's default cache of 100 the next
    micro-batch compiled the same code again; logstream's session keeps them."""
    assert spark.conf.get("spark.sql.codegen.cache.maxEntries") == str(CODEGEN_CACHE_ENTRIES)

    def query(i: int):  # a distinct generated class per i (the literal is in its source)
        return spark.range(3).select((F.col("id") * 7 + i).alias("x"))

    first = [r.x for r in query(0).collect()]
    before = _compiled(spark)
    for i in range(1, 150):  # more distinct classes than Spark's default cache holds
        query(i).collect()
    assert _compiled(spark) - before >= 149  # each one was compiled
    again = _compiled(spark)
    assert [r.x for r in query(0).collect()] == first == [0, 7, 14]
    assert _compiled(spark) == again  # the first class came back from the cache


def test_object_aggregates_keep_a_backfills_minutes_before_sorting(spark):
    """The visitors' HLL sketches of a 31-day micro-batch are about 11,000 minutes a task:
    more than Spark's default of 128 object-aggregate keys before it sorts, fewer than
    logstream's threshold (the setting is what this checks: the estimates below are the same
    either way). A sketch counts a host once however often it is added."""
    assert int(spark.conf.get("spark.sql.objectHashAggregate.sortBased.fallbackThreshold")) == (
        OBJECT_AGG_KEYS
    )
    minutes = 12_000
    rows = spark.range(0, 3 * minutes, numPartitions=1).select(
        (F.col("id") % minutes).alias("minute"),
        (F.floor(F.col("id") / minutes) % 2).cast("string").alias("host"),
    )
    estimates = rows.groupBy("minute").agg(F.hll_sketch_estimate(F.hll_sketch_agg("host")))
    assert OBJECT_AGG_KEYS > minutes
    assert estimates.agg(F.min(estimates.columns[1]), F.max(estimates.columns[1])).first() == (
        2,
        2,
    )


def test_a_local_checkpoint_renames_with_the_file_system_api(spark, tmp_path):
    """A local master's checkpoint goes through Hadoop's ``FileSystem`` (no ``readlink``
    process per rename); a restarted query still resumes after its last committed batch."""
    assert spark.conf.get("spark.sql.streaming.checkpointFileManagerClass") == (
        LOCAL_CHECKPOINT_MANAGER
    )
    landing, checkpoint, out = tmp_path / "in", tmp_path / "checkpoint", tmp_path / "out"
    landing.mkdir()

    def run() -> None:
        query = (
            spark.readStream.text(str(landing))
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()

    (landing / "a.log").write_text("one\ntwo\n")
    run()
    (landing / "b.log").write_text("three\n")
    run()
    assert sorted(r.value for r in spark.read.parquet(str(out)).collect()) == [
        "one",
        "three",
        "two",
    ]
    commits = sorted(p.name for p in (checkpoint / "commits").iterdir())
    assert [c for c in commits if not c.startswith(".")] == ["0", "1"]  # and .crc files


def test_lower_case_is_the_jvms_and_equals_pythons_on_the_logs_extensions(spark, nasa_day):
    """``lower()`` uses the JVM's case mapping, not ICU's (whose first use in a JVM builds
    its break iterators, a cold ``logstream run``'s work): the same lower case as Python's for
    the extensions of the real NASA day and for accented Latin text."""
    assert spark.conf.get("spark.sql.icu.caseMappings.enabled") == "false"
    extensions = (
        spark.read.text(str(nasa_day))
        .select(F.regexp_extract("value", r'"[A-Z]+ [^ ?"]*\.(\w+)[ ?"]', 1).alias("ext"))
        .where(F.col("ext") != "")
        .distinct()
        .select("ext", F.lower("ext").alias("lower"))
        .collect()
    )
    assert {"GIF", "gif", "HTML", "html"} <= {r.ext for r in extensions}
    assert all(r.lower == r.ext.lower() for r in extensions)
    text = "Ünïcödé FILE.JPG Ärger Ñandú"
    assert spark.range(1).select(F.lower(F.lit(text))).first()[0] == text.lower()
