"""Comparisons with a micro-batch's bound that keep the bound out of Spark's generated code.

Every micro-batch compares event times and window ends with values of its own: the watermark
that decides lateness, the end of the windows that became final, the first pane a snapshot
keeps, the watermark that closes sessions. Spark writes a ``long`` or timestamp literal into
the Java source it generates (``Literal.doGenCode``: ``1751320800000L``), so a new value is a
new source, and its code-generation cache (``spark.sql.codegen.cache.maxEntries``) misses:
each such micro-batch compiled its 42 classes again (about 7.6 ms each in Janino, and new
methods for the JIT to warm up). A decimal literal is passed to the generated class as a
reference object instead, so the source, and the compiled class, stay the same from one bound
to the next.

``value <= bound`` is written ``CAST(value AS DECIMAL(18,0)) - CAST(bound AS DECIMAL(18,0))
<= 0``: a plain ``CAST(value AS DECIMAL) <= bound`` would be turned back into a ``long``
comparison by the optimizer (``UnwrapCastInBinaryComparison``). The difference is exact for
every epoch millisecond and microsecond count up to 10^18; it costs about 12 ns a row more
than a ``long`` comparison (20M cached rows, 2 cores: 0.27 s against 0.52 s), a few
milliseconds of a live micro-batch, against about 0.3 s of compiling.

A large micro-batch (a backfill's) is the other way round: it compiles its classes once, and
its filters scan millions of cached rows. With ``inline=True`` the functions write the plain
comparison (31-day backfill in one micro-batch, in-process, 2 cores,
``bench/profile_pipeline.py``: the snapshot step, which filters every pane, 0.95 / 0.95 s with
the decimal form, 0.76 / 0.67 s inline, 0.67–0.74 s before either; the whole backfill moved
within this machine's noise of about 2 s).
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

#: Wide enough for epoch microseconds (10^18 is the year 33658), narrow enough for Spark's
#: compact ``long``-backed decimals (precision ≤ 18).
_EXACT = "decimal(18,0)"


def _minus(value: Column, bound: int) -> Column:
    return value.cast(_EXACT) - F.lit(bound).cast(_EXACT)


def at_most(value: Column, bound: int, inline: bool = False) -> Column:
    """``value <= bound``, with ``bound`` out of the generated code.

    Parameters
    ----------
    value : Column
        A bigint column (epoch milliseconds or microseconds).
    bound : int
        The bound, in the same unit; ``|bound| < 10^18``.
    inline : bool
        Write the plain comparison instead, ``bound`` in the generated code: for a large
        micro-batch, which compiles once and filters many rows.

    Returns
    -------
    Column
        Boolean; null where ``value`` is null.
    """
    if inline:
        return value <= F.lit(bound)
    return _minus(value, bound) <= 0


def above(value: Column, bound: int, inline: bool = False) -> Column:
    """``value > bound``, with ``bound`` out of the generated code unless ``inline`` (as
    :func:`at_most`)."""
    if inline:
        return value > F.lit(bound)
    return _minus(value, bound) > 0
