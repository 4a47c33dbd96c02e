"""What a micro-batch was delivered over: its source offsets, recorded and checked.

Spark's checkpoint plans micro-batch ``N`` in its offset log (``STATE/ingest/offsets/N``: a
version line, the batch's metadata — its timestamp, the watermark, some settings — and one
line of offsets per source) before the batch runs, and marks it done in its commit log after.
logstream delivers a batch exactly once by its id (:mod:`logstream.pipeline.ingest`), so the
id must keep meaning the same input. Rolling the checkpoint back by hand breaks that: with
``offsets/N`` and ``commits/N`` deleted, Spark plans ``N`` again over whatever the source
has now (a file source, two files instead of one), and a batch skipped as delivered would
lose the difference.

So every micro-batch's offset-log entry is recorded with its delivery: in a pending record
(``STATE/analytics/pending/N``) before anything of it is written, then in its snapshot's
``meta.json`` (:class:`~logstream.pipeline.state.SnapshotMeta`). Then:

* a batch whose sources' offsets differ from the record is refused
  (:class:`~logstream.errors.ReplayMismatchError`): never skipped as delivered, never
  delivered twice (:func:`check_replay`);
* at start, a newest offset-log entry that is missing or unreadable while the state
  records it is written back as it was (:func:`restore_newest`), so the obvious repair of a
  damaged newest offsets file — deleting it — replays exactly the same batch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from logstream.errors import ReplayMismatchError

__all__ = ["check_replay", "offset_entry", "restore_newest", "source_offsets"]


def _entry_path(checkpoint: Path, batch_id: int) -> Path:
    return checkpoint / "offsets" / str(batch_id)


def offset_entry(checkpoint: Path, batch_id: int) -> str | None:
    """The text of ``offsets/batch_id`` in ``checkpoint``, or None when it has none."""
    try:
        return _entry_path(checkpoint, batch_id).read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return None


def source_offsets(entry: str | None) -> list[str] | None:
    """The sources' offsets of an offset-log entry (its lines after the version and the
    metadata), or None when the entry is missing or not one Spark wrote."""
    if entry is None:
        return None
    lines = entry.splitlines()
    if len(lines) < 3 or not lines[0].startswith("v"):
        return None
    try:
        for line in lines[1:]:
            json.loads(line)
    except ValueError:
        return None
    return lines[2:]


def check_replay(checkpoint: Path, batch_id: int, recorded: str | None, where: Path) -> None:
    """Refuse micro-batch ``batch_id`` when its offset-log entry's sources differ from
    ``recorded`` (the entry recorded at its delivery, in ``where``).

    Raises
    ------
    ReplayMismatchError
        When both exist and their sources' offsets differ.
    """
    if recorded is None:
        return
    now = source_offsets(offset_entry(checkpoint, batch_id))
    then = source_offsets(recorded)
    if now is None or then is None or now == then:
        return
    raise ReplayMismatchError(
        f"micro-batch {batch_id} was delivered over {'; '.join(then)}, and Spark now plans it "
        f"over {'; '.join(now)}: the checkpoint {checkpoint} was rolled back, and delivering "
        f"the batch again would lose or repeat lines. Put {_entry_path(checkpoint, batch_id)} "
        f"back as it was (recorded in {where}), or start anew with an empty --state-dir, "
        "--output-dir and store"
    )


def restore_newest(checkpoint: Path, recorded: dict[int, str]) -> str | None:
    """Write the newest recorded offset-log entry back when Spark's is missing or unreadable.

    Parameters
    ----------
    checkpoint : Path
        The ingest query's checkpoint.
    recorded : dict of int to str
        Offset-log entries recorded at delivery (snapshots and pending records), by batch id.

    Returns
    -------
    str or None
        What was done (for the log), or None when nothing needed doing.
    """
    if not recorded:
        return None
    batch_id = max(recorded)
    log = checkpoint / "offsets"
    newer = (
        [int(p.name) for p in log.iterdir() if p.name.isdigit() and int(p.name) > batch_id]
        if log.is_dir()
        else []
    )
    if newer:  # Spark planned a later batch: its entry, not ours, is the newest
        return None
    path = _entry_path(checkpoint, batch_id)
    current = offset_entry(checkpoint, batch_id)
    if current is not None and source_offsets(current) is not None:
        return None
    log.mkdir(parents=True, exist_ok=True)
    what = "unreadable" if path.exists() else "missing"
    if path.exists():  # kept beside, for a look
        os.replace(path, log / f"{batch_id}.damaged")
    # Hadoop's local file system keeps a checksum beside each file and checks it on read
    (log / f".{batch_id}.crc").unlink(missing_ok=True)
    tmp = log / f".{batch_id}.restoring"
    tmp.write_text(recorded[batch_id], encoding="utf-8")
    os.replace(tmp, path)
    return (
        f"the checkpoint's offsets of micro-batch {batch_id} were {what}: restored {path} as "
        "it was when the batch was delivered"
    )
