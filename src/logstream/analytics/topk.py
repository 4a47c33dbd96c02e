"""Top-k per group, the book's ranking idiom (Ch. 7, "most popular URLs per day")."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

__all__ = ["ranking_window", "top_n_per_group"]


def top_n_per_group(
    df: DataFrame, group_cols: Sequence[str], order_cols: Sequence[str], n: int
) -> DataFrame:
    """Keep the first ``n`` rows of each group, ranked by ``order_cols`` descending.

    Parameters
    ----------
    df : DataFrame
        A batch DataFrame (ranking windows are not supported on streams; use this inside
        ``foreachBatch`` there).
    group_cols : sequence of str
        Columns defining a group (e.g. ``["day"]`` or ``["window_start", "window_end"]``).
    order_cols : sequence of str
        Ranking columns, highest first; ties are broken by the remaining columns ascending so
        the result is deterministic.
    n : int
        Rows kept per group, ≥ 1.

    Returns
    -------
    DataFrame
        ``df``'s columns plus ``rank`` (int, 1 = highest).

    Raises
    ------
    ValueError
        When ``n`` < 1.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    window = ranking_window(df.columns, group_cols, order_cols)
    return df.withColumn("rank", F.row_number().over(window)).where(F.col("rank") <= n)


def ranking_window(
    columns: Sequence[str], group_cols: Sequence[str], order_cols: Sequence[str]
) -> WindowSpec:
    """The window :func:`top_n_per_group` ranks in: partitioned by ``group_cols``, ordered by
    ``order_cols`` descending, ties broken by the other ``columns`` ascending (a
    deterministic order), for a ``row_number()`` over it."""
    tie_break = [c for c in columns if c not in group_cols and c not in order_cols]
    return Window.partitionBy(*group_cols).orderBy(
        *[F.col(c).desc() for c in order_cols], *[F.col(c).asc() for c in tie_break]
    )
