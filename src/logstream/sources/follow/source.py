"""The Spark glue: the Python data source and its streaming reader.

:class:`FollowDataSource` (registered as :data:`~logstream.sources.follow.FOLLOW_SOURCE`)
and :class:`FollowStreamReader` (admission control, ``Trigger.AvailableNow``) call the
planner (:mod:`.offsets`) and the reader (:mod:`.ranges`); :func:`follow_lines` is the
streaming DataFrame of the followed lines.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    SupportsTriggerAvailableNow,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

from logstream.sources.follow.files import FOLLOW_SOURCE, SCHEMA, FileId, check_follow_paths
from logstream.sources.follow.offsets import initial_offset, scan, snapshot
from logstream.sources.follow.ranges import FileRange, plan_ranges, read_range

log = logging.getLogger("logstream.sources.follow")


class FollowStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Stream reader of :class:`FollowDataSource` (planner on the driver, reads on executors).

    Parameters
    ----------
    options : mapping of str to str
        ``paths`` (JSON list of absolute files and globs, from :func:`check_follow_paths`),
        ``maxBytesPerTrigger`` (optional, bytes), ``splitBytes`` (optional, bytes per task)
        and ``parallelism`` (tasks at once, to size the splits when ``splitBytes`` is unset).
    """

    def __init__(self, options: Mapping[str, str]) -> None:
        self.patterns: list[str] = json.loads(options["paths"])
        max_bytes = options.get("maxBytesPerTrigger")
        self.max_bytes = int(max_bytes) if max_bytes else None
        split_bytes = options.get("splitBytes")
        self.split_bytes = int(split_bytes) if split_bytes else None
        self.parallelism = int(options.get("parallelism") or 1)
        self._available_now = False
        self._caps: dict[FileId, int] | None = None
        self._seen: dict[FileId, int] = {}

    def initialOffset(self) -> dict:
        """Nothing read yet: files present at the first micro-batch are read from byte 0."""
        return initial_offset()

    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMaxBytes(maxBytesPerTrigger)`` when the option is set, else all available."""
        if self.max_bytes:
            return ReadMaxBytes(self.max_bytes)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """An ``availableNow`` run reads what exists when it starts, nothing written later.

        The sizes are recorded (:func:`snapshot`) at the first :meth:`latestOffset` call, which
        follows at once and knows which files the run resumes following.
        """
        self._available_now = True
        self._caps = None

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """End offset of the next micro-batch (see :func:`scan`); ``start`` if nothing new."""
        if self._available_now and self._caps is None:
            self._caps = snapshot(self.patterns, start)
        max_bytes = limit.max_bytes if isinstance(limit, ReadMaxBytes) else None
        return scan(start, self.patterns, max_bytes, self._caps, self._seen)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """One task per file range, split for parallelism, see :func:`plan_ranges`."""
        return plan_ranges(start, end, self.split_bytes, self.parallelism)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Lines of one range as Arrow batches (see :func:`read_range`)."""
        assert isinstance(partition, FileRange)
        return read_range(partition)

    def commit(self, end: dict) -> None:
        """Nothing to release: the offsets live in Spark's checkpoint."""


class FollowDataSource(DataSource):
    """Python data source ``logstream_follow``: lines appended to local log files.

    Options: ``paths`` (JSON list), ``maxBytesPerTrigger``, ``splitBytes``, ``parallelism``; use
    :func:`follow_lines` rather than this class, it checks the paths and sets them.
    """

    @classmethod
    def name(cls) -> str:
        """The registered short name, :data:`FOLLOW_SOURCE`."""
        return FOLLOW_SOURCE

    def schema(self) -> str:
        """``value string, source_file string``."""
        return SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        """A :class:`FollowStreamReader` over the ``paths`` option."""
        return FollowStreamReader(self.options)


def follow_lines(
    spark: SparkSession, paths: Sequence[str], max_bytes_per_trigger: int | None = None
) -> DataFrame:
    """Follow growing, rotating log files as a stream of lines, like ``tail -F``, exactly once.

    Parameters
    ----------
    spark : SparkSession
    paths : sequence of str
        Log files or quoted glob patterns (see :func:`check_follow_paths`). Files present at
        the query's first micro-batch are read from their start.
    max_bytes_per_trigger : int, optional
        Admission control: a micro-batch reads at most this many bytes (but at least one whole
        line), so a backlog is read in several micro-batches. Trigger ``availableNow`` honours
        it too. None: everything available.

    Returns
    -------
    DataFrame
        Streaming DataFrame with ``value`` (string, one line without ``\\n``/``\\r\\n``) and
        ``source_file`` (string, ``file://`` URI of the file the line was read from: its name
        at reading time, e.g. ``file:///var/log/nginx/access.log.1`` after a rotation).

    Raises
    ------
    InputPathError
        As :func:`check_follow_paths`.
    ValueError
        When ``max_bytes_per_trigger`` is not positive.

    Notes
    -----
    Registers :class:`FollowDataSource` with ``spark.dataSource.register`` (again on each
    call: registering the same class twice is harmless). Run the query with a checkpoint: the
    offsets (file identities and byte offsets) are in its offset log, so a restart resumes
    exactly after the last committed micro-batch. Limits: ``docs/follow.md``.
    """
    checked = check_follow_paths(paths)
    if max_bytes_per_trigger is not None and max_bytes_per_trigger <= 0:
        raise ValueError(f"max_bytes_per_trigger must be positive, got {max_bytes_per_trigger}")
    spark.dataSource.register(FollowDataSource)
    try:
        parallelism = spark.sparkContext.defaultParallelism
    except Exception:  # Spark Connect has no SparkContext
        parallelism = os.cpu_count() or 2
    reader = spark.readStream.format(FOLLOW_SOURCE).option("paths", json.dumps(checked))
    if max_bytes_per_trigger is not None:
        reader = reader.option("maxBytesPerTrigger", str(int(max_bytes_per_trigger)))
    reader = reader.option("parallelism", str(parallelism))
    return reader.load()
