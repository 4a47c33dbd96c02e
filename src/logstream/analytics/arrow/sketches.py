"""HyperLogLog and KLL sketches on the driver, in the byte formats of Spark's sketch functions.

Spark's ``hll_sketch_agg`` and ``kll_sketch_agg_bigint`` are Apache DataSketches sketches
(Spark SQL reference, "Sketch functions"); the ``datasketches`` package is the same library's
C++ core, whose serialised forms the Java library reads and writes (DataSketches'
cross-language compatibility). So a sketch built here merges with one Spark built, and Spark's
``hll_sketch_estimate`` and ``kll_sketch_get_quantile_bigint`` read it:

* HLL: ``lgConfigK`` 12, ``HLL_8``, serialised in the updatable form, as Spark's aggregate
  writes it; the estimate rounded as Java's ``Math.round``. A sketch of the same strings in
  one aggregation has the same bytes here and in Spark (a union's differs in its estimator's
  state, as Spark's own unions do).
* KLL of longs: ``k`` 200; the C++ library's items sketch with an 8-byte little-endian serde
  writes the bytes of Java's ``KllLongsSketch``; quantiles are read inclusively, as Spark
  reads them.

``tests/analytics/test_arrow.py`` checks both directions against Spark.
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Iterable
from typing import Any

__all__ = [
    "HLL_LG_K",
    "KLL_K",
    "hll_estimate",
    "hll_of",
    "hll_union",
    "kll_merge",
    "kll_n",
    "kll_of",
    "kll_quantile",
]

#: Spark's ``hll_sketch_agg`` default ``lgConfigK``.
HLL_LG_K = 12
#: Spark's ``kll_sketch_agg_bigint`` default ``k``.
KLL_K = 200


@functools.cache
def _ds() -> Any:
    import datasketches

    return datasketches


def hll_of(values: Iterable[str | None]) -> bytes:
    """The HLL sketch of ``values`` (nulls ignored), as Spark's ``hll_sketch_agg`` writes it."""
    ds = _ds()
    sketch = ds.hll_sketch(HLL_LG_K, ds.tgt_hll_type.HLL_8)
    for value in values:
        if value is not None:
            sketch.update(value)
    return sketch.serialize_updatable()


def hll_union(sketches: Iterable[bytes | None]) -> bytes | None:
    """The union of serialised HLL sketches (nulls ignored; None when there is none), as
    Spark's ``hll_union_agg`` writes it."""
    ds = _ds()
    union = None
    for blob in sketches:
        if blob is None:
            continue
        if union is None:
            union = ds.hll_union(HLL_LG_K)
        union.update(ds.hll_sketch.deserialize(bytes(blob)))
    if union is None:
        return None
    return union.get_result(ds.tgt_hll_type.HLL_8).serialize_updatable()


def hll_estimate(blob: bytes | None) -> int | None:
    """Spark's ``hll_sketch_estimate``: the estimate rounded half up (Java's ``Math.round``)."""
    if blob is None:
        return None
    return math.floor(_ds().hll_sketch.deserialize(bytes(blob)).get_estimate() + 0.5)


@functools.cache
def _long_serde() -> Any:
    ds = _ds()

    class LongSerDe(ds.PyObjectSerDe):
        """Items as 8-byte little-endian signed integers: Java's ``KllLongsSketch`` layout."""

        def get_size(self, item: int) -> int:
            return 8

        def to_bytes(self, item: int) -> bytes:
            return struct.pack("<q", item)

        def from_bytes(self, data: bytes, offset: int) -> tuple[int, int]:
            return struct.unpack_from("<q", data, offset)[0], 8

    return LongSerDe()


def kll_of(values: Iterable[int]) -> bytes:
    """The KLL sketch of ``values`` (ints), as Spark's ``kll_sketch_agg_bigint`` writes it."""
    sketch = _ds().kll_items_sketch(KLL_K)
    for value in values:
        sketch.update(int(value))
    return sketch.serialize(_long_serde())


def _kll(blob: bytes) -> Any:
    return _ds().kll_items_sketch.deserialize(bytes(blob), _long_serde())


def kll_merge(sketches: Iterable[bytes]) -> bytes:
    """The merge of serialised KLL sketches of longs (Spark's ``kll_merge_agg_bigint``)."""
    merged = _ds().kll_items_sketch(KLL_K)
    for blob in sketches:
        merged.merge(_kll(blob))
    return merged.serialize(_long_serde())


def kll_n(blob: bytes) -> int:
    """Items in a KLL sketch (Spark's ``kll_sketch_get_n_bigint``)."""
    return int(_kll(blob).n)


def kll_quantile(blob: bytes, rank: float) -> int | None:
    """The quantile at ``rank`` (0–1) of a KLL sketch of longs, read as Spark reads it
    (``kll_sketch_get_quantile_bigint``: inclusive); None for an empty sketch."""
    sketch = _kll(blob)
    if sketch.is_empty():
        return None
    return int(sketch.get_quantile(rank, True))
