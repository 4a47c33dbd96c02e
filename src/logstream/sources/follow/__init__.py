"""Follow growing, rotating log files like ``tail -F``, exactly once.

A streaming source written with PySpark's Python Data Source API
(:class:`pyspark.sql.datasource.DataSource`, :class:`~pyspark.sql.datasource.DataSourceStreamReader`
with admission control and ``Trigger.AvailableNow``; PySpark 4.2+). It reads the lines appended
to log files that a server keeps writing, across rename rotation (``access.log`` →
``access.log.1``, new ``access.log``) and ``copytruncate``; Spark's file source cannot: it reads
each file once, when it first appears.

The offset of the source is a JSON-serialisable dict that Spark writes to the query's offset log
before each micro-batch (it also appears as ``sources[].startOffset``/``endOffset`` in the
query's progress)::

    {
      "v": 2,
      "files": [  # sorted by (dev, ino)
        {"dev": 64768, "ino": 1311, "path": "/var/log/nginx/access.log",
         "offset": 48213, "gen": 0, "crc": 2584019622,
         "fp": "9f2c41d07a3be115", "fplen": 1024, "lb": 102, "base": 0}
      ],
      "truncations": 0,   # running count of files found truncated or replaced in place
      "lost_bytes": 0,    # running count of bytes seen but never read (gone, or erased)
      "lost_lines": 0,    # the same, as an estimate of lines (bytes / the file's ``lb``)
      "lost_files": 0     # running count of files that disappeared before their end
    }

* ``dev``, ``ino``: the file's identity (``st_dev``, ``st_ino``); a file is followed by its
  identity, not by its name;
* ``fp``, ``fplen``: the fingerprint (64-bit BLAKE2b, hex) of the file's first ``fplen`` bytes,
  at most :data:`FINGERPRINT_BYTES`, as the log shippers identify files (Filebeat's
  ``fingerprint``, Vector's ``checksum``): a file whose first bytes match a followed file *is*
  that file, whatever its name or inode (a ``copytruncate`` copy), and an inode whose first
  bytes changed holds another file;
* ``path``: where the planner last saw it (a hint: the reader looks the inode up again in the
  same directory when the path now holds another file);
* ``offset``: bytes read, always just after a ``\\n``, so a micro-batch holds whole lines only;
* ``gen``: how many times this identity was found truncated (or holding other bytes): a
  micro-batch whose end has a higher ``gen`` than its start reads the file from ``base``;
* ``base``: where this identity's reading started: 0, or, for a copy that continues a
  followed file (``copytruncate``), the offset that file had been read to;
* ``crc``: CRC-32 of the (up to) 64 bytes before ``offset``: with ``fp``, it tells a file that
  still holds what was read from one truncated and written again;
* ``lb``: the file's average bytes per line, from its first bytes (for ``lost_lines``).

Version 1 offsets (no ``fp``, ``fplen``, ``lb``, ``base``, ``lost_lines``) are read, and the
fingerprints filled in at the next micro-batch.

Planning (:func:`scan`, :func:`plan_ranges`) runs on the driver, in Spark's Python planner
process; reading (:meth:`FollowStreamReader.read`) runs in the executors' Python workers, which
must see the same files (see ``docs/follow.md``).

The package, from the bottom: :mod:`.files` (paths, identities, fingerprints),
:mod:`.offsets` (the planner: :func:`scan`), :mod:`.ranges` (the reader's byte ranges:
:func:`plan_ranges`, :func:`read_range`) and :mod:`.source` (the data source and
:func:`follow_lines`).
"""

from __future__ import annotations

from logstream.sources.follow.files import (
    COMPRESSED_SUFFIXES,
    FINGERPRINT_BYTES,
    FOLLOW_SOURCE,
    check_follow_paths,
    rotation_warnings,
)
from logstream.sources.follow.offsets import initial_offset, read_to_end, scan, snapshot
from logstream.sources.follow.ranges import FileRange, plan_ranges, read_range
from logstream.sources.follow.source import FollowDataSource, FollowStreamReader, follow_lines

__all__ = [
    "COMPRESSED_SUFFIXES",
    "FINGERPRINT_BYTES",
    "FOLLOW_SOURCE",
    "FileRange",
    "FollowDataSource",
    "FollowStreamReader",
    "check_follow_paths",
    "follow_lines",
    "initial_offset",
    "plan_ranges",
    "read_range",
    "read_to_end",
    "rotation_warnings",
    "scan",
    "snapshot",
]
