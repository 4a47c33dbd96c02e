"""Fault injection for the crash drills: a step hook that kills the pipeline mid-batch.

The micro-batch calls :attr:`IngestStage.step_hook
<logstream.pipeline.ingest.IngestStage.step_hook>` between its writes; :func:`fault_hook`
builds one that SIGKILLs the process group at one step of one micro-batch, for the recovery
tests and ``bench/drill_kill.py``.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["FAULT_ENV", "fault_hook"]

#: Environment variable of the fault injection used by the crash drills (see :func:`fault_hook`).
FAULT_ENV = "LOGSTREAM_FAULT_INJECT"


def fault_hook(spec: str) -> Callable[[str, int], None]:
    """A step hook that SIGKILLs the pipeline's process group at one step of one micro-batch.

    For the recovery tests and ``bench/drill_kill.py``: ``logstream run`` installs it when
    ``$LOGSTREAM_FAULT_INJECT`` is ``STEP:BATCH_ID`` (a step of :attr:`IngestStage.step_hook`,
    e.g. ``before_snapshot:3``). The process group — the Python driver and its JVM — dies with
    no clean-up, exactly between two writes of the micro-batch.

    Raises
    ------
    ValueError
        When ``spec`` is not ``STEP:BATCH_ID``.
    """
    import os
    import signal

    step, _, batch = spec.partition(":")
    if not step or not batch.isdigit():
        raise ValueError(f"{FAULT_ENV}={spec!r} is not STEP:BATCH_ID (e.g. before_snapshot:3)")

    def hook(name: str, batch_id: int) -> None:
        if name == step and batch_id == int(batch):
            os.killpg(os.getpgid(0), signal.SIGKILL)

    return hook
