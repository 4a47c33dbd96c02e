"""The ``logstream`` console script (and ``python -m logstream``).

It catches SIGINT and SIGTERM before anything else is imported: loading the command's modules
takes a few tenths of a second, and a stop sent then (Ctrl-C, ``timeout``, a service manager)
ends the command with status 0 and a line saying so, never a traceback. Once the modules are
loaded the command's own handling takes over (``logstream run`` stops between micro-batches,
docs/operations.md "Stopping").
"""

from __future__ import annotations

import signal
import sys
from typing import Any

__all__ = ["entry_point"]

_STOPS = (signal.SIGINT, signal.SIGTERM)


def entry_point() -> None:  # pragma: no cover - console script, run as a process in the tests
    """Load the CLI with SIGINT and SIGTERM held, then ``sys.exit(main())``."""
    received: list[int] = []

    def hold(signum: int, _frame: Any) -> None:
        received.append(signum)

    previous = {s: signal.signal(s, hold) for s in _STOPS}
    from logstream.cli import main

    if received:
        name = signal.Signals(received[0]).name
        print(f"received {name}: stopping before the command started (nothing was run)",
              file=sys.stderr)  # fmt: skip
        sys.exit(0)
    for s, handler in previous.items():
        signal.signal(s, handler)
    sys.exit(main())
