"""How Spark cuts input files into partitions, as :func:`logstream.sources.files.file_partitions`
counts them, against Spark's own count; and :func:`~logstream.sources.files.balanced_partitions`
turning a read with a lone last task into full waves (real NASA lines in files of several
sizes, plain and gzip, with small split settings so that the files stay small)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from logstream.session import conf_set
from logstream.sources.files import (
    balanced_partitions,
    file_partitions,
    split_bytes,
    splittable,
)

MAX_BYTES = 256 * 1024
OPEN_COST = 16 * 1024
CORES = 2


def _split_settings(spark, minimum: int | None):
    return conf_set(
        spark,
        {
            "spark.sql.files.maxPartitionBytes": str(MAX_BYTES),
            "spark.sql.files.openCostInBytes": str(OPEN_COST),
            "spark.sql.files.minPartitionNum": None if minimum is None else str(minimum),
        },
    )


def _files(tmp_path, nasa_day, plain: list[int], gzipped: list[int]) -> list[str]:
    """Files of the NASA day's first bytes (whole lines) of the given sizes."""
    text = gzip.decompress(nasa_day.read_bytes())
    paths = []
    for i, size in enumerate(plain + gzipped):
        cut = text[:size]
        cut = cut[: cut.rfind(b"\n") + 1]
        if i < len(plain):
            path = tmp_path / f"plain-{i:02d}.log"
            path.write_bytes(cut)
        else:
            path = tmp_path / f"packed-{i:02d}.log.gz"
            path.write_bytes(gzip.compress(cut))
        paths.append(str(path))
    return paths


def _spark_count(spark, paths: list[str], minimum: int | None) -> int:
    with _split_settings(spark, minimum):
        return spark.read.format("text").load(paths).rdd.getNumPartitions()


def _sizes(paths: list[str]) -> list[tuple[int, bool]]:
    return [(Path(p).stat().st_size, splittable(p)) for p in paths]


def _ours(sizes: list[tuple[int, bool]], minimum: int) -> int:
    return file_partitions(sizes, split_bytes(sizes, minimum, MAX_BYTES, OPEN_COST), OPEN_COST)


CASES = {
    "17 small files": ([40_000] * 17, []),
    "large files Spark splits": ([700_000, 520_000, 90_000, 300_000], []),
    "gzip files read whole, beside plain ones": ([150_000, 600_000, 30_000], [900_000, 200_000]),
}


@pytest.mark.parametrize("case", CASES)
def test_the_count_is_spark_s(spark, tmp_path, nasa_day, case):
    paths = _files(tmp_path, nasa_day, *CASES[case])
    sizes = _sizes(paths)
    for minimum in (2, 3, 4, 6, 8, 12):
        assert _ours(sizes, minimum) == _spark_count(spark, paths, minimum), minimum


def test_a_lone_last_task_becomes_full_waves(spark, tmp_path, nasa_day):
    paths = _files(tmp_path, nasa_day, [40_000] * 17, [])
    sizes = _sizes(paths)
    assert _spark_count(spark, paths, None) % CORES == 1  # Spark's own: a lone last task
    minimum = balanced_partitions(sizes, CORES, MAX_BYTES, OPEN_COST)
    assert minimum is not None
    assert _spark_count(spark, paths, minimum) % CORES == 0
    lines = spark.read.format("text").load(paths).count()
    assert lines == sum(Path(p).read_bytes().count(b"\n") for p in paths)


def test_a_read_in_full_waves_is_left_alone():
    # 2 files of 100 MB: two tasks at once, nothing to balance
    assert balanced_partitions([(100 << 20, True)] * 2, 2) is None
    # one core: every count fills its waves
    assert balanced_partitions([(10 << 20, True)] * 300, 1) is None
    # 284 NASA days (3.4 MB each): 17 partitions of Spark's, 18 asked for
    days = [(3_540_000, True)] * 284
    assert file_partitions(days, 128 << 20) == 17
    assert balanced_partitions(days, 2) == 18
