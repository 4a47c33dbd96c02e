"""Many sites in one run: a line's virtual host taken from its file's path.

GoAccess keys a site by the virtual host a line names (``%v``), and later added
``--fname-as-vhost`` for servers that write one log per site without it. logstream's
``--vhost-from-path REGEX`` does the same for ``logstream batch`` and ``logstream run``
(a directory or followed files): the first group of ``REGEX`` (its whole match when it has no
group) found in the line's ``source_file`` is its ``virtual_host``, so every panel, the
``virtual_hosts`` panel and ``--filter "vhost = '…'"`` see one site per file.
"""

from __future__ import annotations

import re

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

__all__ = ["with_site_from_path"]


def with_site_from_path(parsed: DataFrame, pattern: str | None) -> DataFrame:
    """``parsed`` with ``virtual_host`` taken from ``source_file`` by ``pattern``.

    Parameters
    ----------
    parsed : DataFrame
        Batch or streaming DataFrame with ``virtual_host`` and ``source_file`` (the file's
        URI, ``file:///logs/a.example.log``): :func:`logstream.parsing.parse`'s output.
    pattern : str, optional
        A regular expression (Java's syntax, as ``regexp_extract`` reads it); None: ``parsed``
        unchanged.

    Returns
    -------
    DataFrame
        The same columns in the same order; ``virtual_host`` is the first group of
        ``pattern`` in ``source_file`` (its whole match without a group) where it matches
        and is not empty, else the line's own (``%v``, or null).
    """
    if pattern is None:
        return parsed
    group = 1 if re.compile(pattern).groups else 0
    found = F.regexp_extract(F.col("source_file"), pattern, group)
    site = F.coalesce(F.nullif(found, F.lit("")), F.col("virtual_host"))
    return parsed.withColumn("virtual_host", site)
