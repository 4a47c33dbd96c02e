"""The session's configuration: what a micro-batch gains from it."""

from pyspark.sql import functions as F

from logstream.session import CODEGEN_CACHE_ENTRIES


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
