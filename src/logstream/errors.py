"""Exceptions raised by logstream.

Every exception raised on purpose by logstream derives from :class:`LogstreamError`, so a
caller can catch one type. Bad *data* is never an exception: an unparseable log line goes to
the quarantine output with its reason and is counted (see :mod:`logstream.parsing`).

Exception tree::

    LogstreamError
    ├── ConfigError        a bad option or setting value
    ├── InputPathError     an input path that does not exist or holds no files
    │   └── CorruptInputError  a corrupt or truncated input file, with --strict
    ├── LogFormatError     a log format that cannot be compiled or detected
    ├── StateError         logstream's own state cannot be used as it stands
    │   ├── StateCorruptError  an analytics snapshot damaged, truncated or missing
    │   ├── ReplayMismatchError  a delivered micro-batch replanned over other input
    │   └── StateInUseError    a state directory another run holds
    ├── RunFault           an I/O fault that stopped a run after it started (exit status 1)
    │   ├── StoreUnavailableError  a serving store unreachable for longer than --store-retry
    │   └── KafkaUnavailableError  a Kafka broker unreachable for longer than --kafka-retry
    └── StopRequested      a micro-batch started after its pipeline began to stop
                           (logstream.sinks.gate; never reaches a user)
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "CorruptInputError",
    "InputPathError",
    "KafkaUnavailableError",
    "LogFormatError",
    "LogstreamError",
    "ReplayMismatchError",
    "RunFault",
    "StateCorruptError",
    "StateError",
    "StateInUseError",
    "StoreUnavailableError",
]


class LogstreamError(Exception):
    """Root of every exception logstream raises on purpose.

    The message names the offending value and how to fix it; the CLI prints it without a
    traceback and exits with :attr:`exit_status`.
    """

    #: The CLI's exit status: 2 for a refused start (an option, a path, a format).
    exit_status = 2


class ConfigError(LogstreamError):
    """Raised when an option or setting has a value logstream cannot use."""


class InputPathError(LogstreamError):
    """Raised when an input path, directory or glob matches no readable file."""


class CorruptInputError(InputPathError):
    """Raised with ``--strict`` when an input file cannot be read to its end (a truncated or
    corrupt ``.gz``). Without ``--strict`` the file is quarantined as ``corrupt_file`` and
    its readable part counts."""


class LogFormatError(LogstreamError):
    """Raised when a ``LogFormat`` string cannot be compiled or ``auto`` detection fails."""


class StateError(LogstreamError):
    """Raised when logstream's own state (its checkpoint, snapshots, store) cannot be used as
    it stands: the message names the file and how to recover. Never silently worked around:
    a run on damaged state would give wrong windows without a word."""


class StateCorruptError(StateError):
    """Raised when an analytics snapshot is damaged, truncated or missing
    (:mod:`logstream.pipeline.state`)."""


class ReplayMismatchError(StateError):
    """Raised when Spark replans a micro-batch that was already delivered over other input
    than it was delivered with (its offsets were rolled back by hand): delivering it as it
    is would lose or repeat lines."""


class StateInUseError(StateError):
    """Raised when a run's state directory is locked by another running process
    (:mod:`logstream.pipeline.lock`): two runs on one checkpoint would overwrite each
    other's micro-batches."""


class RunFault(LogstreamError):
    """Raised when an I/O fault stops a run that had started: a disk full, a directory turned
    read-only, a file missing or corrupt, a store down (:mod:`logstream.cli.faults`).

    The message is one line naming the path or store and the fix; the CLI prints it and exits
    with status 1, the whole trace in the run's log file.
    """

    exit_status = 1


class StoreUnavailableError(RunFault):
    """Raised when the serving store cannot be reached (PostgreSQL down, restarting, out of
    connections) for longer than the pipeline's ``--store-retry``; each write retried with
    backoff until then (:meth:`logstream.serving.ServingStore.retry`)."""


class KafkaUnavailableError(RunFault):
    """Raised when the Kafka source's brokers cannot be reached for longer than the pipeline's
    ``--kafka-retry``, with a warning while the run waits
    (:class:`logstream.sources.kafka.BrokerWatch`)."""
