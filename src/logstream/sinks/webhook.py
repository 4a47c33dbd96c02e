"""A webhook sink: a ``ForeachWriter`` that POSTs rows as JSON, idempotent by (partition, epoch).

Delivery guarantee: **idempotent by (partition, epoch)**, i.e. effectively exactly-once for a
receiver that honours the ``Idempotency-Key`` header, and at-least-once for one that does not
when a task dies half-way through a partition. How it gets there, in order:

1. ``open(partition_id, epoch_id)``: when a ledger directory is set and the marker
   ``<ledger_dir>/<name>/epoch=<epoch>-partition=<partition>.done`` exists, that
   (partition, epoch) was delivered before — a replayed micro-batch after a restart, or a
   re-run task — and ``open`` returns False: Spark skips the partition;
2. ``process(row)`` buffers rows and POSTs every ``batch_rows`` of them as one JSON array, with
   the header ``Idempotency-Key: <name>-<epoch>-<partition>-<chunk>``. A replay of the same
   micro-batch produces the same keys, so the receiver can drop a chunk it already has;
3. every POST is retried on a connection error, a timeout, a 5xx, a 408 or a 429, waiting
   ``backoff_s * 2**attempt`` seconds (or the 429's ``Retry-After``) between attempts, at most
   ``retries`` times; any other 4xx fails at once with :class:`WebhookDeliveryError` (the
   request itself is wrong: retrying cannot help). A failed POST fails the Spark task, hence
   the micro-batch, and the query replays it on restart;
4. ``close(None)`` POSTs the last rows and only then writes the marker (write to a temporary
   name, then an atomic rename). ``close(error)`` writes nothing, so the partition is re-sent.
   The writer of partition 0 then deletes the markers of epochs more than ``retain_epochs``
   (default 100, Spark's ``spark.sql.streaming.minBatchesToRetain``) before the newest epoch
   of the slowest partition: a restarted query replays from its last epoch that every
   partition finished, so those are never read again, and a query that runs for weeks keeps
   a ledger of bounded size.

Use it directly on a streaming DataFrame (``writeStream.foreach(WebhookWriter(url))``: Spark
calls ``open``/``process``/``close`` per partition and epoch, in micro-batch and continuous
mode) or, inside ``foreachBatch``, with :func:`post_batch`, which runs the same writer on every
partition of a batch DataFrame with epoch = the batch id.

Rows become JSON objects: timestamps as ISO 8601 in UTC (``2024-03-01T12:00:00Z``), dates as
ISO dates, decimals as numbers, binary values (sketches) in base64, NaN and infinities as null.
The ledger directory must be readable and writable by every executor (local mode: any local
directory; a cluster: a shared file system). Only the standard library is used (``urllib``).

The technique is the book's ``foreach`` sink ("Stream Processing with Apache Spark",
Ch. 11 "Structured Streaming Sinks", *The Foreach Sink*: ``open`` receives the partition and
the epoch/version so that a writer can skip data it already committed) and the
``DataStreamWriter.foreach`` documentation of Spark.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import email.utils
import http.client
import json
import logging
import math
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, Row

from logstream.errors import ConfigError, LogstreamError
from logstream.sinks.spec import check_webhook_url

__all__ = [
    "RETAIN_EPOCHS",
    "WebhookDeliveryError",
    "WebhookWriter",
    "check_webhook_url",
    "json_safe",
    "post_batch",
]

log = logging.getLogger(__name__)

_NAME = re.compile(r"^[A-Za-z0-9_.]+$")
#: A ledger marker's file name; group 1 is its epoch, group 2 its partition.
_MARKER = re.compile(r"epoch=(-?\d+)-partition=(\d+)\.done")
#: Epochs of ledger markers a writer keeps before its newest (Spark's default of
#: ``spark.sql.streaming.minBatchesToRetain``: the checkpoint keeps as many batches).
RETAIN_EPOCHS = 100
#: HTTP statuses retried besides 5xx: request timeout and too many requests.
_RETRIED_4XX = frozenset({408, 429})
#: Longest wait between two attempts, whatever the backoff or ``Retry-After`` asks.
MAX_WAIT_S = 30.0


class WebhookDeliveryError(LogstreamError):
    """Raised when a webhook POST fails for good.

    Either the receiver answered a 4xx other than 408/429 (the request is refused: fix the URL
    or the receiver), or every retry met a connection error, a timeout or a 5xx. Raised inside
    a Spark task, it fails the micro-batch; the query replays it on restart.
    """


def json_safe(value: Any) -> Any:
    """Turn a value of a Spark :class:`~pyspark.sql.Row` into a JSON-serialisable one.

    Timestamps become ISO 8601 strings in UTC ending in ``Z``: PySpark hands executors naive
    datetimes in the Python worker's local zone, which ``astimezone`` reads as such; aware
    ones are converted. Dates become ISO dates, decimals floats, bytes base64 text, NaN and
    infinities None; rows, dicts and lists are converted recursively.

    Examples
    --------
    >>> json_safe(dt.datetime(1995, 7, 9, 12, 0, tzinfo=dt.UTC))
    '1995-07-09T12:00:00Z'
    >>> json_safe({"n": float("nan"), "b": b"hi", "d": dt.date(1995, 7, 9)})
    {'n': None, 'b': 'aGk=', 'd': '1995-07-09'}
    """
    if isinstance(value, Row):
        return {k: json_safe(v) for k, v in value.asDict(recursive=False).items()}
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        value = float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    return value


class WebhookWriter:
    """A ``ForeachWriter`` that POSTs rows to ``url`` as JSON arrays, idempotent per epoch.

    Parameters
    ----------
    url : str
        ``http://`` or ``https://`` URL receiving ``POST`` requests with a JSON array body.
    name : str, default "alerts"
        Output name, first part of every ``Idempotency-Key`` and of the ledger's folder
        (letters, digits, ``_`` and ``.``).
    ledger_dir : str, optional
        Directory of the delivered-(partition, epoch) markers. Without it nothing is skipped
        at ``open`` and de-duplication is left to the receiver (by key).
    retries : int, default 5
        Retries of one POST after the first attempt (connection error, timeout, 5xx, 408, 429).
    backoff_s : float, default 0.2
        Wait before the first retry, in seconds; doubled at each retry (capped at 30 s).
    timeout_s : float, default 10.0
        Socket timeout of one attempt, in seconds.
    batch_rows : int, default 500
        Rows per POST; a partition with more rows is sent in several chunks.
    retain_epochs : int, default 100
        Epochs of markers kept before the slowest partition's newest; older ones are deleted
        by partition 0's ``close``. At least 1.

    Raises
    ------
    ConfigError
        On a bad URL, name or number, at construction (before any query starts).

    Notes
    -----
    Each request carries ``Content-Type: application/json``, ``Idempotency-Key:
    <name>-<epoch>-<partition>-<chunk>`` and ``X-Logstream-Output/-Epoch/-Partition/-Chunk``
    headers. Chunk numbers follow the partition's row order; a replayed epoch gives the same
    chunks when the partition's rows come in the same order (:func:`post_batch` sorts them).

    Examples
    --------
    >>> writer = WebhookWriter("http://127.0.0.1:9/hook", name="alerts", retries=0)
    >>> writer.idempotency_key(epoch=7, partition=0, chunk=1)
    'alerts-7-0-1'
    """

    def __init__(
        self,
        url: str,
        *,
        name: str = "alerts",
        ledger_dir: str | None = None,
        retries: int = 5,
        backoff_s: float = 0.2,
        timeout_s: float = 10.0,
        batch_rows: int = 500,
        retain_epochs: int = RETAIN_EPOCHS,
    ) -> None:
        self.url = check_webhook_url(url)
        if not _NAME.match(name):
            raise ConfigError(
                f"webhook output name {name!r} must be letters, digits, '_' or '.': "
                "it is part of the Idempotency-Key header and of a ledger folder"
            )
        for label, number, low in (
            ("retries", retries, 0),
            ("backoff_s", backoff_s, 0),
            ("timeout_s", timeout_s, 1e-9),
            ("batch_rows", batch_rows, 1),
            ("retain_epochs", retain_epochs, 1),
        ):
            if number < low:
                raise ConfigError(f"webhook {label}={number!r} is too small: use {low} or more")
        self.name = name
        self.ledger_dir = None if ledger_dir is None else str(ledger_dir)
        self.retries = int(retries)
        self.backoff_s = float(backoff_s)
        self.timeout_s = float(timeout_s)
        self.batch_rows = int(batch_rows)
        self.retain_epochs = int(retain_epochs)
        self._reset(-1, -1)

    def _reset(self, partition: int, epoch: int) -> None:
        self._partition = partition
        self._epoch = epoch
        self._buffer: list[Any] = []
        self._chunk = 0
        self._rows_sent = 0

    # -- the ForeachWriter protocol -------------------------------------------------------

    def open(self, partition_id: int, epoch_id: int) -> bool:
        """Start (partition, epoch); False (skip it) when the ledger says it was delivered."""
        self._reset(int(partition_id), int(epoch_id))
        marker = self._marker(self._partition, self._epoch)
        if marker is not None and marker.exists():
            log.info(
                "webhook %s: epoch %d partition %d already delivered",
                self.name,
                epoch_id,
                partition_id,
            )
            return False
        return True

    def process(self, row: Row) -> None:
        """Buffer one row; POST the buffer when it holds ``batch_rows`` rows."""
        self._buffer.append(json_safe(row))
        if len(self._buffer) >= self.batch_rows:
            self._flush()

    def close(self, error: BaseException | None) -> None:
        """POST the remaining rows and record (partition, epoch) as delivered.

        With an ``error`` (``open`` or ``process`` failed) nothing is sent or recorded: the
        partition is sent again when Spark retries the task or replays the epoch.
        """
        if error is not None or self._partition < 0:
            return
        self._flush()
        marker = self._marker(self._partition, self._epoch)
        if marker is not None:
            marker.parent.mkdir(parents=True, exist_ok=True)
            temporary = marker.with_name(f".{marker.name}.{os.getpid()}.tmp")
            temporary.write_text(
                json.dumps({"rows": self._rows_sent, "chunks": self._chunk, "url": self.url})
            )
            temporary.replace(marker)
            if self._partition == 0:
                self._housekeeping()

    # -- helpers ----------------------------------------------------------------------------

    def idempotency_key(self, epoch: int, partition: int, chunk: int) -> str:
        """The ``Idempotency-Key`` of one POST: ``<name>-<epoch>-<partition>-<chunk>``."""
        return f"{self.name}-{epoch}-{partition}-{chunk}"

    def delivered(self, partition: int, epoch: int) -> bool:
        """Whether the ledger records (partition, epoch) as delivered (False without one)."""
        marker = self._marker(partition, epoch)
        return marker is not None and marker.exists()

    def prune(self, before_epoch: int) -> int:
        """Delete the ledger's markers of epochs before ``before_epoch``; returns how many.

        Other files (a writer's temporary marker, anything else) are left alone.
        """
        removed = 0
        for entry, epoch, _ in self._markers():
            if epoch < before_epoch:
                try:
                    entry.unlink()
                except FileNotFoundError:  # another close pruned it first
                    continue
                removed += 1
        return removed

    def _markers(self) -> list[tuple[Path, int, int]]:
        """The ledger's markers: (path, epoch, partition)."""
        if self.ledger_dir is None:
            return []
        found = []
        for entry in (Path(self.ledger_dir) / self.name).glob("epoch=*-partition=*.done"):
            match = _MARKER.fullmatch(entry.name)
            if match:
                found.append((entry, int(match.group(1)), int(match.group(2))))
        return found

    def _housekeeping(self) -> None:
        """Prune the markers more than ``retain_epochs`` before the oldest partition's newest
        epoch: under the continuous trigger partitions may run apart, and a restart goes back
        to the last epoch every partition finished, never before the slowest one's newest.
        A failure here is logged, not raised: the partition was delivered and recorded."""
        try:
            newest: dict[int, int] = {}
            for _, epoch, partition in self._markers():
                newest[partition] = max(epoch, newest.get(partition, epoch))
            if newest:
                self.prune(min(newest.values()) - self.retain_epochs)
        except OSError as exc:
            log.warning("webhook %s: the ledger could not be pruned: %s", self.name, exc)

    def _marker(self, partition: int, epoch: int) -> Path | None:
        if self.ledger_dir is None:
            return None
        return Path(self.ledger_dir) / self.name / f"epoch={epoch}-partition={partition}.done"

    def _flush(self) -> None:
        if not self._buffer:
            return
        body = json.dumps(self._buffer, allow_nan=False, separators=(",", ":")).encode()
        key = self.idempotency_key(self._epoch, self._partition, self._chunk)
        headers = {
            "Content-Type": "application/json",
            "Idempotency-Key": key,
            "X-Logstream-Output": self.name,
            "X-Logstream-Epoch": str(self._epoch),
            "X-Logstream-Partition": str(self._partition),
            "X-Logstream-Chunk": str(self._chunk),
        }
        self._post(body, headers, key)
        self._rows_sent += len(self._buffer)
        self._chunk += 1
        self._buffer = []

    def _post(self, body: bytes, headers: dict[str, str], key: str) -> None:
        last = ""
        for attempt in range(self.retries + 1):
            wait = self.backoff_s * 2**attempt
            request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    response.read()
                return
            except urllib.error.HTTPError as e:
                detail = e.read(200).decode("utf-8", "replace").strip()
                if e.code < 500 and e.code not in _RETRIED_4XX:
                    raise WebhookDeliveryError(
                        f"webhook {self.url} refused {key} with HTTP {e.code} {e.reason}"
                        f"{': ' + detail if detail else ''}: not retried (a 4xx means the "
                        "request is wrong); check the URL and what the receiver accepts"
                    ) from None
                last = f"HTTP {e.code} {e.reason}"
                wait = _retry_after(e.headers.get("Retry-After"), wait)
            except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
                # refused, reset, timeout, a connection closed mid-answer
                last = f"{type(e).__name__}: {getattr(e, 'reason', e)}"
            if attempt < self.retries:
                log.warning(
                    "webhook %s: %s for %s, retry %d in %.2f s",
                    self.url,
                    last,
                    key,
                    attempt + 1,
                    wait,
                )
                time.sleep(min(wait, MAX_WAIT_S))
        raise WebhookDeliveryError(
            f"webhook {self.url} did not accept {key} after {self.retries + 1} attempts "
            f"(last: {last}): check that the receiver is up, or raise retries/backoff_s"
        )


def _retry_after(header: str | None, default: float) -> float:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date)."""
    if not header:
        return default
    try:
        return max(0.0, float(header))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return default
    return max(0.0, (when - dt.datetime.now(dt.UTC)).total_seconds())


def _deliver_partition(writer: WebhookWriter, epoch: int, rows: Iterator[Row]) -> None:
    """Run ``writer`` over one partition of a batch DataFrame, as Spark's foreach does."""
    from pyspark import TaskContext

    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    if not writer.open(partition, epoch):
        return
    try:
        for row in rows:
            writer.process(row)
    except BaseException as e:
        writer.close(e)
        raise
    writer.close(None)


def _orderable(df: DataFrame) -> list[str]:
    from pyspark.sql.types import ArrayType, BinaryType, MapType, StructType

    return [
        f.name
        for f in df.schema.fields
        if not isinstance(f.dataType, ArrayType | BinaryType | MapType | StructType)
    ]


def post_batch(
    df: DataFrame,
    url: str,
    batch_id: int,
    name: str,
    *,
    partitions: int | None = 1,
    writer: WebhookWriter | None = None,
    **options: Any,
) -> None:
    """POST a batch DataFrame (inside ``foreachBatch``) with :class:`WebhookWriter`.

    Every partition runs ``open(partition, batch_id)``, ``process`` for each row and
    ``close``, exactly as ``writeStream.foreach`` would, so a replayed micro-batch is skipped
    by the ledger or sends the same ``Idempotency-Key`` values.

    Parameters
    ----------
    df : DataFrame
        Batch DataFrame of any schema; every column is sent.
    url : str
        Webhook URL.
    batch_id : int
        The micro-batch id, used as the epoch.
    name : str
        Output name (see :class:`WebhookWriter`).
    partitions : int or None, default 1
        Partitions the rows are sent from (``coalesce``), then sorted within each by their
        atomic columns so a replay cuts the same chunks; None keeps ``df``'s partitions.
    writer : WebhookWriter, optional
        A configured writer (its ``url``/``name`` win); otherwise one is built from ``url``,
        ``name`` and ``options`` (``ledger_dir``, ``retries``, ``backoff_s``, ...).

    Raises
    ------
    pyspark.errors.PySparkException
        Wrapping :class:`WebhookDeliveryError` when a POST fails for good.
    """
    if writer is None:
        writer = WebhookWriter(url, name=name, **options)
    if partitions is not None:
        df = df.coalesce(partitions)
    keys = _orderable(df)
    if keys:
        df = df.sortWithinPartitions(*keys)
    df.foreachPartition(partial(_deliver_partition, writer, int(batch_id)))
