"""An output without rows yet is readable through an empty file carrying its schema; its first
micro-batch removes that placeholder, and a replayed micro-batch changes nothing."""

from __future__ import annotations

from logstream.sinks.publish import (
    BATCH_DIR_PREFIX,
    SCHEMA_BATCH_ID,
    batch_dir,
    ensure_schema,
    publish_batch,
)

SCHEMA = "client_host string, requests bigint"


def dirs(root) -> list[str]:
    return sorted(p.name for p in root.glob(f"{BATCH_DIR_PREFIX}*"))


def test_the_schema_placeholder_is_removed_by_the_first_micro_batch(spark, tmp_path):
    root = tmp_path / "top_clients"
    schema = spark.createDataFrame([], SCHEMA).schema
    ensure_schema(spark, root, schema)
    assert dirs(root) == [batch_dir(root, SCHEMA_BATCH_ID).name]
    empty = spark.read.parquet(str(root))
    assert empty.count() == 0 and empty.columns == ["client_host", "requests", "batch_id"]

    rows = spark.createDataFrame([("199.72.81.55", 3), ("unicomp6.unicomp.net", 2)], SCHEMA)
    assert publish_batch(rows, root, 0)
    assert dirs(root) == ["batch_id=0000000000"]
    assert publish_batch(rows, root, 0) is False  # a replay: already published
    ensure_schema(spark, root, schema)  # a restart: the output has a batch, no placeholder
    assert dirs(root) == ["batch_id=0000000000"]
    read = spark.read.parquet(str(root))
    assert sorted((r.client_host, r.requests, r.batch_id) for r in read.collect()) == [
        ("199.72.81.55", 3, 0),
        ("unicomp6.unicomp.net", 2, 0),
    ]
