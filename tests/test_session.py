"""The session's configuration: what a micro-batch gains from it."""

from pyspark.sql import functions as F

from logstream.session import CODEGEN_CACHE_ENTRIES, OBJECT_AGG_KEYS


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
