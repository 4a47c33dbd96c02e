"""The DStream edition's quarantine: why its lines did not parse, as the other paths keep it.

``logstream run`` and ``logstream batch`` keep each unparseable line with its reason
(``format_mismatch``, ``bad_timestamp`` …: :data:`logstream.schema.QUARANTINE_REASONS`). The
DStream edition counts its unparseable lines with an accumulator (the guide's pattern); this
module adds a second one, created lazily as a singleton too, that holds the count of each
reason and the latest lines with their reason (:class:`QuarantineParam`). Each batch's output
operation writes them to the serving store in the transaction of the batch
(:func:`record_quarantine`): the running count of each reason in ``dstream_quarantine``, the
lines in ``quarantine_examples`` (the latest :data:`~logstream.serving.EXAMPLES_KEPT`, as
the dashboard shows them for ``logstream run``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from pyspark import AccumulatorParam

from logstream.serving.schema import EXAMPLES_KEPT

if TYPE_CHECKING:
    from pyspark import Accumulator, SparkContext

__all__ = [
    "QUARANTINE_SCHEMA",
    "QuarantineParam",
    "drain_examples",
    "kept_requests",
    "quarantine_accumulator",
    "record_quarantine",
]

#: The running count of each reason, per batch (written with the batch's row).
QUARANTINE_SCHEMA = """
CREATE TABLE IF NOT EXISTS dstream_quarantine (
    batch_time TEXT NOT NULL, fingerprint TEXT NOT NULL, reason TEXT NOT NULL,
    lines_total INTEGER NOT NULL, PRIMARY KEY (batch_time, fingerprint, reason));
"""


class QuarantineParam(AccumulatorParam):
    """An accumulator of ``{"reasons": {reason: lines}, "examples": [(reason, line), …]}``:
    the counts add up, the examples keep the latest :data:`EXAMPLES_KEPT`."""

    def zero(self, value: Any) -> dict[str, Any]:
        """No line yet."""
        return {"reasons": {}, "examples": []}

    def addInPlace(self, value1: dict[str, Any], value2: dict[str, Any]) -> dict[str, Any]:
        """``value2`` added to ``value1``."""
        for reason, lines in value2["reasons"].items():
            value1["reasons"][reason] = value1["reasons"].get(reason, 0) + lines
        value1["examples"] = (value1["examples"] + value2["examples"])[-EXAMPLES_KEPT:]
        return value1


_QUARANTINE: Accumulator[dict[str, Any]] | None = None


def quarantine_accumulator(sc: SparkContext) -> Accumulator[dict[str, Any]]:
    """The accumulator of the reasons and example lines, created on first use (a context
    recovered from a checkpoint gets one too)."""
    global _QUARANTINE
    if _QUARANTINE is None:
        _QUARANTINE = sc.accumulator({"reasons": {}, "examples": []}, QuarantineParam())
    return _QUARANTINE


def kept_requests(
    classify: Callable[[Iterable[str]], Iterator[Any]],
    lines: Iterable[str],
    bad_lines: Accumulator[int],
    quarantined: Accumulator[dict[str, Any]],
) -> Iterator[Any]:
    """The requests ``classify`` makes of a partition's ``lines`` (on an executor); the lines
    it gives a reason for (a ``str``) are counted in ``bad_lines`` and kept with their reason
    in ``quarantined``, once the partition is read."""
    bad, reasons, examples, current = 0, {}, [], [""]

    def remembered(part: Iterable[str]) -> Iterator[str]:
        for line in part:  # the line classify() is reading
            current[0] = line
            yield line

    for request in classify(remembered(lines)):
        if isinstance(request, str):
            bad += 1
            reasons[request] = reasons.get(request, 0) + 1
            examples = [*examples[1 - EXAMPLES_KEPT :], (request, current[0])]
        else:
            yield request
    if bad:
        bad_lines.add(bad)
        quarantined.add({"reasons": reasons, "examples": examples})


def drain_examples(
    accumulator: Accumulator[dict[str, Any]],
) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """On the driver: the running count of each reason, and the example lines gathered since
    the last call (taken out of the accumulator, so that each is written once)."""
    value = accumulator.value
    reasons, examples = dict(value["reasons"]), list(value["examples"])
    accumulator.value = {"reasons": dict(reasons), "examples": []}  # not the dict returned
    return reasons, examples


def record_quarantine(
    conn: sqlite3.Connection,
    batch_time: str,
    fingerprint: str,
    batch_id: int,
    reasons: dict[str, int],
    examples: list[tuple[str, str]],
) -> None:
    """Write a batch's quarantine in its transaction (``conn``): the running count of each
    reason, and its example lines (``batch_id``: the batch time in ms), keeping the latest
    :data:`EXAMPLES_KEPT`."""
    conn.execute(QUARANTINE_SCHEMA)
    conn.executemany(
        "INSERT INTO dstream_quarantine VALUES (?, ?, ?, ?)",
        [(batch_time, fingerprint, reason, n) for reason, n in sorted(reasons.items())],
    )
    if examples:
        conn.executemany(
            "INSERT INTO quarantine_examples(batch_id, raw_line, source_file, reason, detail) "
            "VALUES (?, ?, NULL, ?, NULL)",
            [(batch_id, line, reason) for reason, line in examples],
        )
        conn.execute(
            "DELETE FROM quarantine_examples WHERE seq NOT IN (SELECT seq FROM "
            f"quarantine_examples ORDER BY seq DESC LIMIT {EXAMPLES_KEPT})"
        )
