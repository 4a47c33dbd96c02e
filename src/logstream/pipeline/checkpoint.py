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
  records it is written back as it was, and so are the ones before it that are missing
  too (:func:`restore_offsets`), so the obvious repair of a damaged newest offsets file —
  deleting it — replays exactly the same batch;
* at start, a micro-batch the commit log holds whose snapshot is gone (its directory
  deleted) is replayed from the snapshot before it when it is the newest, and refused
  otherwise (:func:`recover_missing_snapshot`): never a state that silently lags the
  checkpoint.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from logstream.errors import ReplayMismatchError, StateCorruptError, StateError

__all__ = [
    "check_replay",
    "offset_entry",
    "recover_missing_snapshot",
    "restore_offsets",
    "source_offsets",
]


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


def _batch_ids(directory: Path) -> list[int]:
    """The batch ids of a checkpoint log's entries (``offsets/``, ``commits/``), ascending."""
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def restore_offsets(checkpoint: Path, recorded: dict[int, str]) -> str | None:
    """Write recorded offset-log entries back where Spark's are missing or unreadable: the
    newest, and the ones before it down to the first whole one.

    Spark resumes from its newest offset-log entry ``N`` and reads ``N - 1`` beside it
    (``Previous batch N-1 not found in offset log`` when it is gone), so deleting the newest
    two entries with their commits stopped every start. Written back, ``N`` is planned over
    the same input and skipped as delivered, and so is every batch it covers.

    Parameters
    ----------
    checkpoint : Path
        The ingest query's checkpoint.
    recorded : dict of int to str
        Offset-log entries recorded at delivery (snapshots and pending records), by batch id.

    Returns
    -------
    str or None
        What was done (for the log and the terminal), or None when nothing needed doing.

    Raises
    ------
    StateError
        When the newest entry ``N`` is there (or written back) but ``N - 1`` is neither there
        nor recorded: Spark could not start, and nothing here can put it back.
    """
    log = checkpoint / "offsets"
    ids = _batch_ids(log)
    top = max([*ids[-1:], *recorded], default=-1)
    restored: list[tuple[int, str]] = []
    batch_id = top
    while batch_id >= 0:
        if source_offsets(offset_entry(checkpoint, batch_id)) is not None:
            if batch_id < top:  # a whole entry before the newest: Spark has what it reads
                break
        elif batch_id in recorded:
            restored.append((batch_id, _write_back(log, batch_id, recorded[batch_id])))
        else:
            break
        batch_id -= 1
    if top > 0 and offset_entry(checkpoint, top) is not None:
        if source_offsets(offset_entry(checkpoint, top - 1)) is None:
            raise StateError(
                f"the checkpoint {checkpoint} has no readable offsets of micro-batch {top - 1} "
                f"before its newest, {_entry_path(checkpoint, top)}, and the analytics state "
                "did not record them: Spark cannot resume from it. Restore --state-dir from a "
                "backup, or start anew with an empty --state-dir, --output-dir and store"
            )
    return _restored_note(log, restored) if restored else None


def _write_back(log: Path, batch_id: int, entry: str) -> str:
    """Write ``entry`` as ``log/batch_id`` (a damaged file kept as ``batch_id.damaged``);
    what the file was (``missing``, ``unreadable``)."""
    path = log / str(batch_id)
    log.mkdir(parents=True, exist_ok=True)
    what = "unreadable" if path.exists() else "missing"
    if path.exists():  # kept beside, for a look
        os.replace(path, log / f"{batch_id}.damaged")
    # Hadoop's local file system keeps a checksum beside each file and checks it on read
    (log / f".{batch_id}.crc").unlink(missing_ok=True)
    tmp = log / f".{batch_id}.restoring"
    tmp.write_text(entry, encoding="utf-8")
    os.replace(tmp, path)
    return what


def _restored_note(log: Path, restored: list[tuple[int, str]]) -> str:
    """One line saying which offset-log entries were written back."""
    if len(restored) == 1:
        batch_id, what = restored[0]
        return (
            f"the checkpoint's offsets of micro-batch {batch_id} were {what}: restored "
            f"{log / str(batch_id)} as it was when the batch was delivered"
        )
    ids = sorted(b for b, _ in restored)
    whats = " and ".join(sorted({w for _, w in restored}))
    return (
        f"the checkpoint's offsets of micro-batches {', '.join(map(str, ids))} were {whats}: "
        f"restored them in {log} as they were when the batches were delivered"
    )


def _read_input(checkpoint: Path, batch_id: int) -> bool:
    """Whether micro-batch ``batch_id`` read input: its sources' offsets differ from the
    batch's before (a batch Spark runs without new input, to move a watermark on, repeats
    them). Unknown offsets count as input."""
    now = source_offsets(offset_entry(checkpoint, batch_id))
    before = source_offsets(offset_entry(checkpoint, batch_id - 1)) if batch_id > 0 else None
    return now is None or before is None or now != before


def recover_missing_snapshot(
    checkpoint: Path, newest_snapshot: int | None, snapshot_dir: Callable[[int], Path]
) -> str | None:
    """Replay the newest micro-batch when the commit log holds it and its snapshot is gone.

    Every micro-batch that reads a line writes its snapshot before Spark commits it
    (:mod:`logstream.pipeline.state`), so a committed batch that read input without a
    snapshot is one whose snapshot directory was deleted. Left so, the next batch would start
    from the snapshot before it while its outputs and the store hold the deleted one's: its
    windows published twice, its open panes and sessions lost. When it is the newest batch
    of the checkpoint, its commit is moved aside (``commits/N.no-snapshot``): Spark runs it
    again over the same offsets, from the snapshot before it, which writes the same state,
    and its outputs and store rows are skipped as delivered (the recovery a damaged
    snapshot's message names, done here).

    Parameters
    ----------
    checkpoint : Path
        The ingest query's checkpoint.
    newest_snapshot : int or None
        The batch id of the newest snapshot (None: none).
    snapshot_dir : callable
        ``snapshot_dir(N)``: the directory of snapshot ``N`` (for the message).

    Returns
    -------
    str or None
        What was done (for the log and the terminal), or None when every committed batch
        that read input has its snapshot.

    Raises
    ------
    StateCorruptError
        When the batch without a snapshot is not the newest (Spark replays only the newest),
        naming the snapshots and the recovery.
    """
    commits = _batch_ids(checkpoint / "commits")
    after = [b for b in commits if newest_snapshot is None or b > newest_snapshot]
    missing = [b for b in after if _read_input(checkpoint, b)]
    if not missing:
        return None
    newest = missing[-1]
    offsets = _batch_ids(checkpoint / "offsets")
    if missing == [newest] == commits[-1:] and offsets[-1:] == [newest]:
        commit = checkpoint / "commits" / str(newest)
        os.replace(commit, commit.with_name(f"{newest}.no-snapshot"))
        commit.with_name(f".{newest}.crc").unlink(missing_ok=True)
        return (
            f"the analytics snapshot {snapshot_dir(newest)} of micro-batch {newest} is "
            "missing while the checkpoint holds the batch as done: it is replayed from the "
            "snapshot before it (its outputs and store rows are kept as delivered)"
        )
    named = ", ".join(str(snapshot_dir(b)) for b in missing[-3:])
    raise StateCorruptError(
        f"the analytics snapshots of micro-batches {', '.join(map(str, missing))} are missing "
        f"({named}) while the checkpoint {checkpoint} holds them as done: the state would lag "
        f"the checkpoint and lose or repeat windows. Restore {snapshot_dir(newest).parent} "
        "from a backup, or start anew with an empty --state-dir, --output-dir and store"
    )
