"""Which checkpoint feeds which outputs: a pipeline id shared by state dir, outputs and store.

The exactly-once writers skip a micro-batch whose id they already hold (the store's ledger,
a ``batch_id=N`` output directory). That is right for a replay of the *same* pipeline and
silently wrong for another one: a fresh ``--state-dir`` numbers its micro-batches from 0
again, and a store or output directory left by an earlier run would swallow them all.

So a pipeline has an identity: a random id written into its state directory at the first
start (``STATE_DIR/pipeline_id``). The serving store (``pipeline_state.pipeline_id``) and the
output directory (``OUTPUT_DIR/_pipeline_id``; Spark and Parquet readers skip names starting
with ``_``) record the id of the checkpoint that feeds them. :func:`claim` checks all three
before any query starts and stops the run with :class:`~logstream.errors.ConfigError` (exit
status 2) when they do not belong together, naming the paths and the fix.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from logstream.errors import ConfigError
from logstream.serving import ServingStore, open_store, store_location
from logstream.serving.read_errors import READ_ERRORS
from logstream.serving.schema import missing_schema

__all__ = ["OUTPUT_ID_FILE", "STATE_ID_FILE", "claim", "claim_store", "committed_queries"]

STATE_ID_FILE = "pipeline_id"
OUTPUT_ID_FILE = "_pipeline_id"


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except FileNotFoundError:
        return None


def _write(path: Path, value: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(value + "\n", encoding="utf-8")
    tmp.replace(path)


def committed_queries(state_dir: Path) -> list[str]:
    """Queries of ``state_dir`` whose checkpoint has a committed micro-batch."""
    if not state_dir.is_dir():
        return []
    return sorted(
        q.name
        for q in state_dir.iterdir()
        if (q / "commits").is_dir() and any(p.name.isdigit() for p in (q / "commits").iterdir())
    )


def _published(output_dir: Path) -> bool:
    """Whether ``output_dir`` holds a published micro-batch of any output."""
    if not output_dir.is_dir():
        return False
    return any(
        not p.name.endswith("=-1") for sub in output_dir.iterdir() for p in sub.glob("batch_id=*")
    )


def claim(state_dir: Path, output_dir: Path, store: ServingStore) -> str:
    """Check that state dir, outputs and store belong to one pipeline; record its id.

    Parameters
    ----------
    state_dir, output_dir : Path
        The checkpoint root and the Parquet output root of the run.
    store : ServingStore
        The serving store of the run (writable).

    Returns
    -------
    str
        The pipeline id (created at the first start).

    Raises
    ------
    ConfigError
        When the store or the output directory was fed by another checkpoint, or holds
        micro-batches without a pipeline id, or when the checkpoint has committed
        micro-batches that a new store or output directory would miss. Nothing is written
        then.
    """
    store_id = store.get_state("pipeline_id")
    store_batches = store.query("SELECT COUNT(*) AS n FROM ledger")[0]["n"]
    owner = store.get_state("state_dir")
    state_id, new_id, output_id = _check(
        state_dir, output_dir, store.url, store_id, store_batches, owner
    )
    if state_id is None:
        # the checkpoint's state holds client addresses and paths: its owner's alone (0700;
        # the mode of a directory that exists already is left as it is)
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write(state_dir / STATE_ID_FILE, new_id)
    if store_id is None:
        store.set_state({"pipeline_id": new_id, "state_dir": str(state_dir)})
    if output_id is None:
        _write(output_dir / OUTPUT_ID_FILE, new_id)
    return new_id


def claim_store(state_dir: Path, output_dir: Path, store_url: Path | str) -> str:
    """:func:`claim` for the store of a ``--store`` URL, opened here and closed again.

    The store is created only when the run may go on: a refused run leaves no empty store
    behind. A SQLite file that does not exist yet is checked as a new store (no file needed);
    a PostgreSQL database is first read without creating the store's schema (a read-only
    store, :func:`_stored_identity`), and its schema is created only once the checks pass.

    Raises
    ------
    ConfigError
        As :func:`claim`.
    """
    where = store_location(store_url)
    if isinstance(where, Path):
        if not where.expanduser().exists():
            _check(state_dir, output_dir, f"sqlite:///{where.expanduser()}", None, 0, None)
    else:
        from logstream.serving.postgres import check_server, redact_url

        check_server(where)  # an unreachable server or a bad URL: its own message
        _check(state_dir, output_dir, redact_url(where), *_stored_identity(where))
    store = open_store(store_url)
    try:
        return claim(state_dir, output_dir, store)
    finally:
        store.close()


def _stored_identity(store_url: str) -> tuple[str | None, int, str | None]:
    """What a store holds of its pipeline, read without creating its schema: its pipeline
    id, the micro-batches in its ledger and the checkpoint that fed it (``state_dir``); a
    database without the store's tables is a new store: ``(None, 0, None)``."""
    reader = open_store(store_url, read_only=True)
    try:
        try:
            store_id = reader.get_state("pipeline_id")
            batches = int(reader.query("SELECT COUNT(*) AS n FROM ledger")[0]["n"])
            return store_id, batches, reader.get_state("state_dir")
        except READ_ERRORS as exc:
            if missing_schema(exc):  # no table yet: a new store
                return None, 0, None
            raise
    finally:
        reader.close()


def _check(
    state_dir: Path,
    output_dir: Path,
    store_url: str,
    store_id: str | None,
    store_batches: int,
    owner: str | None,
) -> tuple[str | None, str, str | None]:
    """The checks of :func:`claim`, writing nothing: (state id, pipeline id, output id)."""
    state_id = _read(state_dir / STATE_ID_FILE)
    committed = committed_queries(state_dir)
    # a checkpoint with committed micro-batches but no id was written before ids existed:
    # its store and outputs are taken as its own
    legacy = state_id is None and bool(committed)
    new_id = state_id or uuid.uuid4().hex
    output_id_file = output_dir / OUTPUT_ID_FILE
    output_id = _read(output_id_file)
    published = _published(output_dir)
    continue_owner = f", or --state-dir {owner} to continue that pipeline" if owner else ""

    if store_id is None:
        if store_batches and not legacy:
            if committed:
                # the checkpoint has written micro-batches too: whether these are its own
                # cannot be told, since the store has lost its pipeline id
                raise ConfigError(
                    f"the serving store {store_url} holds {store_batches} micro-batches but no "
                    "pipeline id (pipeline_state.pipeline_id), so it cannot be told whether "
                    f"the checkpoint {str(state_dir)!r} wrote them: pass --store with the "
                    "store this checkpoint fed, or with a new file and a new --state-dir"
                )
            raise ConfigError(
                f"the serving store {store_url} already holds {store_batches} micro-batches "
                f"that the checkpoint {str(state_dir)!r} did not write: pass --store with a new "
                "file for this run"
            )
        if not store_batches and committed:
            raise ConfigError(
                f"the serving store {store_url} is new, but the checkpoint {str(state_dir)!r} "
                f"has already committed micro-batches ({', '.join(committed)}) whose results "
                "it would miss: pass --store with the store this checkpoint fed, or start "
                "afresh with a new --state-dir and --output-dir"
            )
    elif store_id != new_id:
        raise ConfigError(
            f"the serving store {store_url} belongs to another pipeline (checkpoint "
            f"{owner or 'unknown'}), not to the checkpoint {str(state_dir)!r}: pass --store "
            f"with a new file for this run{continue_owner}"
        )

    if output_id is None:
        if published and not legacy:
            if committed:
                # the checkpoint has committed micro-batches: the outputs may well be its
                # own, only their pipeline id file is missing (deleted or never copied)
                restore = f"printf '%s\\n' {state_id} > {str(output_id_file)!r}"
                raise ConfigError(
                    f"the output directory {str(output_dir)!r} holds published micro-batches "
                    f"but its pipeline id file {str(output_id_file)!r} is missing, so it cannot "
                    f"be told whether the checkpoint {str(state_dir)!r} wrote them: if it did, "
                    f"restore {restore}; otherwise pass --output-dir with a new directory for "
                    "this run"
                )
            raise ConfigError(
                f"the output directory {str(output_dir)!r} already holds micro-batches that "
                f"the checkpoint {str(state_dir)!r} did not write: pass --output-dir with a new "
                "directory for this run"
            )
        if not published and "ingest" in committed:
            raise ConfigError(
                f"the output directory {str(output_dir)!r} is new, but the checkpoint "
                f"{str(state_dir)!r} has already committed micro-batches whose outputs it "
                "would miss: pass --output-dir with this checkpoint's outputs, or start "
                "afresh with a new --state-dir"
            )
    elif output_id != new_id:
        raise ConfigError(
            f"the output directory {str(output_dir)!r} belongs to another pipeline, not to the "
            f"checkpoint {str(state_dir)!r}: pass --output-dir with a new directory for this "
            "run, or the --state-dir that wrote it"
        )
    return state_id, new_id, output_id
