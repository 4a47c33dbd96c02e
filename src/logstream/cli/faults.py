"""One clear line per fault: what ``logstream run`` says when the disk, a file or the store fails.

A streaming run meets faults no option can prevent: a disk fills, a directory is remounted
read-only, a file of the checkpoint is deleted or damaged, the database goes away. Spark
reports each as a stack of Java and Python traces (tens to thousands of lines) whose first
words rarely name the file (``MalformedInputException: Input length = 1``) and sometimes
mislead (``Mkdirs failed`` for a read-only directory). Here:

* **at start, before the JVM**, :func:`check_writable` refuses a state, output or store
  location that cannot be written (a read-only mount, a directory or store file the user may
  not write, a file where a directory should be), with exit status 2;
* **while it runs**, every fault ends the run with one ``error:`` line and exit status 1
  (:class:`~logstream.errors.RunFault`): :func:`fault_message` names the kind of fault, the
  path (or store) and the fix, and :class:`RunLog` keeps the whole trace — and the JVM's own
  standard error, Spark's log — in a log file whose path the line gives.

The kinds, told from the text of the error and its causes, then checked on disk:

==============  ============================================================================
``disk_full``   no space left (``ENOSPC``, SQLite's ``database or disk is full``): the path
                written, else the run's location on the fullest file system
``read_only``   a read-only file system, a permission denied, Hadoop's ``Mkdirs failed``, a
                read-only SQLite store: the location :func:`unwritable` finds
``missing``     a file that went away (``FileNotFoundException``, ``PATH_NOT_FOUND``)
``corrupt``     a file that cannot be read (a checksum, JSON, UTF-8, Parquet or SQLite error):
                the path named, else the checkpoint file :func:`corrupt_checkpoint_file` finds
``store``       the store unreachable past ``--store-retry``
                (:class:`~logstream.errors.StoreUnavailableError`, its own message)
``other``       anything else: its first line, and the log
==============  ============================================================================

docs/operations.md, "Faults", lists each with what to do.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import tempfile
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from logstream.errors import ConfigError, RunFault
from logstream.units import plural

__all__ = [
    "RunLog",
    "check_writable",
    "corrupt_checkpoint_file",
    "fault_kind",
    "fault_message",
    "run_fault",
    "unwritable",
]

#: Run logs kept in a log directory (the oldest are removed when a run starts).
LOGS_KEPT = 20
#: Directories :func:`unwritable` looks at under one location, at most (a long run's
#: ``batch_id=N`` partitions are many; the new ones are written into their parent).
MAX_CHECKED_DIRS = 5_000
#: How deep :func:`unwritable` looks under a location (``state/ingest/offsets`` is 2 deep).
MAX_CHECKED_DEPTH = 3
#: Why a location whose path is a file cannot be written.
_NOT_A_DIRECTORY = "a file, not a directory"
#: A file system with less free space than this is taken as the full one.
FULL_BYTES = 1 << 20

_KINDS = (  # first match wins: a full disk also fails a write ("Mkdirs failed") or a read
    (
        "disk_full",
        r"No space left on device|ENOSPC|database or disk is full|\bDiskFull\b"
        r"|could not extend file|Disk quota exceeded",
    ),
    (
        "read_only",
        r"Read-only file system|EROFS|readonly database|read-only database|Permission denied"
        r"|EACCES|AccessDeniedException|Mkdirs failed|Operation not permitted",
    ),
    (
        "corrupt",
        r"Checksum ?(?:error|Exception)|MalformedInputException|Json\w*Exception"
        r"|Unexpected end-of-input|Unrecognized token|is not a Parquet file|CANNOT_READ_FILE"
        r"|FAILED_READ_FILE\.(?:NO_HINT|CANNOT_READ)|database disk image is malformed"
        r"|file is not a database|Log file was malformed|INVALID_LOG_VERSION"
        r"|UnsupportedLogVersion|CorruptedStatus|Incomplete log file|EOFException|Corrupt",
    ),
    (
        "missing",
        r"FileNotFoundException|No such file or directory|PATH_NOT_FOUND|FILE_NOT_EXIST"
        r"|NoSuchFileException|does not exist",
    ),
)
_PATH = re.compile(r"(?:file:)?(/(?:[^\s'\"`,;:()\[\]{}<>|])+)")


# -- at start ----------------------------------------------------------------------------


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _why_not_writable(path: Path) -> str | None:
    """Why ``path`` (an existing file or directory) cannot be written, or None."""
    if _read_only_fs(path):
        return "read-only file system"
    mode = os.W_OK | (os.X_OK if path.is_dir() else 0)
    if not os.access(path, mode, effective_ids=os.access in os.supports_effective_ids):
        return f"permission denied for user {_user()}"
    return None


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):  # pragma: no cover - no user database
        return str(os.geteuid())


def _directories(root: Path) -> Iterator[Path]:
    """``root`` and the directories under it, breadth first, at most
    :data:`MAX_CHECKED_DEPTH` deep and :data:`MAX_CHECKED_DIRS` of them."""
    level, seen = [root], 0
    for _ in range(MAX_CHECKED_DEPTH + 1):
        below: list[Path] = []
        for directory in level:
            yield directory
            seen += 1
            if seen >= MAX_CHECKED_DIRS:
                return
            with contextlib.suppress(OSError):
                below += sorted(e for e in directory.iterdir() if e.is_dir() and not e.is_symlink())
        level = below


def unwritable(path: Path, is_file: bool = False) -> tuple[Path, str] | None:
    """The first part of a location that logstream could not write, and why; None when it
    can write it all.

    Parameters
    ----------
    path : Path
        A directory (the state or output directory), or with ``is_file`` a file (the SQLite
        store: the file, its ``-wal`` and ``-shm`` files, and its directory).
    is_file : bool

    Returns
    -------
    tuple of (Path, str) or None
        The path and the reason (``read-only file system``, ``permission denied …``,
        ``a file, not a directory``). A location that does not exist yet is judged by the
        nearest existing directory above it, where it will be created.
    """
    path = path.expanduser().absolute()
    if is_file:
        for part in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            if part.exists() and (why := _why_not_writable(part)) is not None:
                return part, why
        path = path.parent
    if path.exists() and not path.is_dir():
        return path, _NOT_A_DIRECTORY
    if not path.exists():
        above = next((p for p in path.parents if p.exists()), None)
        if above is None:  # pragma: no cover - "/" exists
            return None
        if not above.is_dir():
            return above, _NOT_A_DIRECTORY
        why = _why_not_writable(above)
        return (above, why) if why else None
    for directory in _directories(path):
        if (why := _why_not_writable(directory)) is not None:
            return directory, why
    return None


def check_writable(locations: dict[str, tuple[Path, bool]]) -> None:
    """Refuse, before the JVM starts, a location the run could not write.

    Parameters
    ----------
    locations : dict
        ``{option: (path, is_file)}``, e.g. ``{"--state-dir": (state_dir, False),
        "--store": (store_file, True)}``.

    Raises
    ------
    ConfigError
        Naming the option, the path that cannot be written, why, and the fix (exit status 2).
    """
    for option, (path, is_file) in locations.items():
        found = unwritable(path, is_file)
        if found is None:
            continue
        part, why = found
        where = "" if part == path.expanduser().absolute() else f": {str(part)!r} in it"
        fix = (
            "move the file away"
            if why == _NOT_A_DIRECTORY
            else "make it writable for this user (remount it read-write, or change its owner "
            "or mode)"
        )
        raise ConfigError(
            f"{option} {str(path)!r} cannot be written{where} ({why}): {fix}, or pass another "
            f"{option}"
        )


# -- while it runs -----------------------------------------------------------------------


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and every exception it was raised from (Python's causes, and the Java cause
    PySpark keeps of a captured exception)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        java_cause = getattr(current, "_cause", None)
        current = current.__cause__ or current.__context__
        if current is None and isinstance(java_cause, BaseException):
            current = java_cause


def _own_text(error: BaseException) -> str:
    """The message of ``error`` (a captured Spark exception's own, read without the JVM)."""
    desc = getattr(error, "_desc", None)
    if isinstance(desc, str):
        return desc
    try:
        return str(error)
    except Exception:  # a message that cannot be made is no message
        return ""


def _text(error: BaseException) -> str:
    """The text of ``error`` and of every exception it was raised from, with the Java stack
    trace a captured Spark exception carries (its ``Caused by:`` lines name the classes)."""
    parts = []
    for current in _chain(error):
        parts.append(f"{type(current).__name__}: {_own_text(current)}")
        trace = getattr(current, "_stackTrace", None)
        if isinstance(trace, str):
            parts.append(trace)
    return "\n".join(parts)


def fault_kind(error: BaseException) -> str:
    """The kind of fault ``error`` reports: ``store``, ``disk_full``, ``read_only``,
    ``corrupt``, ``missing`` or ``other`` (see the module docstring).

    Examples
    --------
    >>> fault_kind(OSError(28, "No space left on device"))
    'disk_full'
    >>> fault_kind(RuntimeError("Checksum error: file:/s/ingest/offsets/3 at 0"))
    'corrupt'
    """
    from logstream.errors import KafkaUnavailableError, StoreUnavailableError

    if isinstance(error, StoreUnavailableError | KafkaUnavailableError):  # a line of its own
        return "store"
    if isinstance(error, OSError) and error.errno is not None:
        by_errno = {errno.ENOSPC: "disk_full", errno.EDQUOT: "disk_full", errno.EROFS:
                    "read_only", errno.EACCES: "read_only", errno.EPERM: "read_only",
                    errno.ENOENT: "missing"}  # fmt: skip
        if error.errno in by_errno:
            return by_errno[error.errno]
    text = _text(error)
    for kind, pattern in _KINDS:
        if re.search(pattern, text):
            return kind
    return "other"


def _paths_in(text: str, roots: dict[str, Path]) -> list[tuple[str, Path]]:
    """Paths in ``text`` under one of ``roots``, in the order they appear, with the option
    of their root (the deepest root that holds them)."""
    found: list[tuple[str, Path]] = []
    ordered = sorted(roots.items(), key=lambda kv: -len(kv[1].parts))
    for match in _PATH.finditer(text):
        raw = match.group(1).rstrip(".")
        if raw.endswith(".py") or "/site-packages/" in raw:
            continue
        path = Path(raw)
        for option, root in ordered:
            store_file = option == "--store" and path.name.startswith(root.name)
            if path == root or root in path.parents or (store_file and path.parent == root.parent):
                if (option, path) not in found:
                    found.append((option, path))
                break
    return found


def _fullest(roots: dict[str, Path]) -> tuple[str, Path, int] | None:
    """The location on the file system with the least free space, when below
    :data:`FULL_BYTES`: (option, path, free bytes)."""
    best = None
    for option, root in roots.items():
        probe = next((p for p in (root, *root.parents) if p.exists()), None)
        if probe is None:
            continue
        try:
            stat = os.statvfs(probe)
        except OSError:
            continue
        free = stat.f_bavail * stat.f_frsize
        if free < FULL_BYTES and (best is None or free < best[2]):
            best = (option, root, free)
    return best


def corrupt_checkpoint_file(state_dir: Path) -> Path | None:
    """The newest metadata file of a checkpoint under ``state_dir`` that Spark cannot read,
    or None: per query, the newest file of ``offsets/``, ``commits/`` and ``sources/*/``
    must be UTF-8 text whose first line is a version (``v1``) and whose other lines are JSON
    (an empty file is corrupt too); ``metadata`` must be JSON.

    Spark checks a file against its hidden ``.N.crc`` checksum when there is one, and names
    the file then; without it, it fails with ``MalformedInputException`` or
    ``JsonEOFException``, naming none: this finds it.
    """
    if not state_dir.is_dir():
        return None
    for query in sorted(p for p in state_dir.iterdir() if (p / "offsets").is_dir()):
        logs = [query / "offsets", query / "commits"]
        if (query / "sources").is_dir():
            logs += sorted(p for p in (query / "sources").iterdir() if p.is_dir())
        for log in logs:
            batches = [p for p in log.iterdir() if p.name.isdigit() and p.is_file()]
            if not batches:
                continue
            newest = max(batches, key=lambda p: int(p.name))
            if not _readable_log_file(newest):
                return newest
        metadata = query / "metadata"
        if metadata.is_file() and not _json_lines(metadata, skip_version=False):
            return metadata
    return None


def _readable_log_file(path: Path) -> bool:
    return _json_lines(path, skip_version=True)


def _json_lines(path: Path, skip_version: bool) -> bool:
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    lines = text.split("\n")
    if skip_version:
        if not re.fullmatch(r"v\d+", lines[0].strip()):
            return False
        lines = lines[1:]
    body = [line for line in lines if line.strip()]
    if not body and not skip_version:
        return False
    try:
        for line in body:
            json.loads(line)
    except ValueError:
        return False
    return True


def _shown(path: Path) -> str:
    return repr(str(path))


def fault_message(error: BaseException, roots: dict[str, Path], state_dir: Path | None) -> str:
    """One line that says what failed, where, and what to do; the log's path is added by
    the caller.

    Parameters
    ----------
    error : BaseException
        What stopped the run (a Spark query's exception carries the Java and Python traces as
        text).
    roots : dict of str to Path
        The run's locations by option: ``--state-dir``, ``--output-dir``, ``--store`` (a
        SQLite file), ``--input-dir`` (absolute paths).
    state_dir : Path, optional
        The checkpoint root, searched for a damaged file when the error names none.

    Returns
    -------
    str
        One line, no trailing period.
    """
    kind = fault_kind(error)
    if kind == "store":  # its own message says it all
        return _own_text(error).strip().splitlines()[0]
    text = _text(error)
    named = _paths_in(text, roots)
    again = "then run the same command again: it resumes from the checkpoint"
    if kind == "disk_full":
        written = {o: p for o, p in roots.items() if o != "--input-dir"}
        fullest = _fullest(written)
        if named and named[0][0] in written:
            option, path = named[0]
        elif fullest is not None:
            option, path = fullest[0], fullest[1]
        else:
            return (
                f"no space left on a disk the run writes ({_first_line(error)}): free space on "
                f"the disks of {', '.join(f'{o} {_shown(p)}' for o, p in written.items())}, "
                f"{again}"
            )
        root = roots[option]
        free = _fullest({option: root})
        details = [f"writing {_shown(path)}"] if path != root else []
        details += [f"{plural(free[2], 'byte')} free"] if free is not None else []
        said = f" ({', '.join(details)})" if details else ""
        return (
            f"no space left on the disk of {option} {_shown(root)}{said}: free space on it (or "
            f"move {option} to a larger disk), {again}"
        )
    if kind == "read_only":
        for option, root in roots.items():
            if option == "--input-dir":  # read only, and rightly so
                continue
            found = unwritable(root, is_file=option == "--store")
            if found is not None:
                part, why = found
                inside = "" if part == root else f" ({_shown(part)} in it)"
                return (
                    f"{option} {_shown(root)} cannot be written{inside}: {why}; make it "
                    f"writable for this user (remount it read-write, or change its owner or "
                    f"mode), {again}"
                )
        where = f" {named[0][0]} {_shown(named[0][1])}" if named else ""
        return (
            f"a write was refused{where} ({_first_line(error)}): make the run's directories "
            f"and store writable for this user, {again}"
        )
    if kind in ("corrupt", "missing"):
        damaged = named[0] if named else None
        if damaged is None and kind == "corrupt" and state_dir is not None:
            found_file = corrupt_checkpoint_file(state_dir)
            if found_file is not None:
                damaged = ("--state-dir", found_file)
        state = "is corrupt" if kind == "corrupt" else "is missing"
        if damaged is None:
            return (
                f"a file the run reads {state} ({_first_line(error)}): see the log for its "
                "name; restore it, or rebuild: run again with a new --state-dir, --output-dir "
                "and --store over the same input"
            )
        option, path = damaged
        if option == "--input-dir":
            return (
                f"input file {_shown(path)} {state} ({_first_line(error)}): put a readable "
                f"copy back (files in --input-dir must stay until read), {again}"
            )
        return (
            f"{_shown(path)} in {option} {_shown(roots[option])} {state} "
            f"({_first_line(error)}): restore "
            f"{option} from a backup, or rebuild: run again with a new --state-dir, "
            "--output-dir and --store over the same input"
        )
    return f"the run failed: {_first_line(error)}"


_RAISED_LINE = re.compile(
    r"^(?:Caused by: )?((?:[a-z_][\w$]*\.)+[A-Z][\w$]*|\w+(?:Exception|Error)): (\S.*)$"
)


def _first_line(error: BaseException) -> str:
    """What failed, in one short line: the root cause of a Java trace (``IOException: No
    space left on device``) or of a Python trace carried in the text, else the error's own
    first line."""
    text = _text(error)
    raised = [m for line in text.splitlines() if (m := _RAISED_LINE.match(line.strip()))]
    causes = [m for m in raised if not m.group(1).endswith(_WRAPPERS)]
    if causes:
        name, message = causes[-1].group(1), causes[-1].group(2)
        return f"{name.rsplit('.', 1)[-1]}: {message}"[:400]
    lines = [line.strip() for line in _own_text(error).splitlines() if line.strip()]
    return lines[0][:400] if lines else type(error).__name__


#: Exceptions that only wrap the one that failed (Spark's and Py4J's).
_WRAPPERS = (
    "StreamingQueryException",
    "ForeachBatchUserFuncException",
    "SparkException",
    "Py4JJavaError",
    "Py4JError",
    "SparkRuntimeException",
    "ExecutionException",
)


# -- the run's log -----------------------------------------------------------------------


class _QuietFileHandler(logging.FileHandler):
    """A file handler that says nothing when its file cannot be written (a full or
    read-only disk: the fault's own line says so)."""

    def handleError(self, record: logging.LogRecord) -> None:
        """Drop the record."""


@dataclass
class RunLog:
    """The log of one ``logstream run``: the JVM's standard error while it runs, then the
    trace of a fault.

    Attributes
    ----------
    path : Path
        ``DIR/run-YYYYMMDDTHHMMSSZ-PID.log``.
    """

    path: Path

    @classmethod
    def create(cls, directory: Path | None, prefix: str = "run") -> RunLog:
        """A new log in ``directory`` (created), or in the temporary directory when that
        cannot be written; the oldest logs beyond :data:`LOGS_KEPT` are removed. A log may
        quote raw lines and paths: it is made 0600 and a directory made for it 0700."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        name = f"{prefix}-{stamp}-{os.getpid()}.log"
        for where in (directory, Path(tempfile.gettempdir()) / "logstream"):
            if where is None:
                continue
            try:
                where.mkdir(mode=0o700, parents=True, exist_ok=True)
                path = where / name
                path.touch(mode=0o600)
            except OSError:
                continue
            old = sorted(where.glob(f"{prefix}-*.log"))[:-LOGS_KEPT]
            for stale in old:
                with contextlib.suppress(OSError):
                    stale.unlink()
            return cls(path)
        return cls(Path(tempfile.gettempdir()) / name)

    @contextlib.contextmanager
    def python_logging(self) -> Iterator[None]:
        """While inside, Python's log records go to this log (warnings and above), and
        logstream's own warnings also to standard error, as one line each.

        Without a handler of the run's, the first ``logging.info`` of a library (Py4J logs a
        failed command so) would install Python's default handler on the terminal, and from
        then on every exception a callback of Spark's raised, a stop included, would print
        its traceback there.
        """
        root, ours = logging.getLogger(), logging.getLogger("logstream")
        to_file = _QuietFileHandler(self.path, delay=True)
        to_file.setLevel(logging.WARNING)
        to_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        to_terminal = logging.StreamHandler()  # sys.stderr when it writes
        to_terminal.setLevel(logging.WARNING)
        root.addHandler(to_file)
        ours.addHandler(to_terminal)
        try:
            yield
        finally:
            root.removeHandler(to_file)
            ours.removeHandler(to_terminal)
            to_file.close()

    def write_trace(self, error: BaseException) -> Path | None:
        """Append the trace of ``error`` (with its causes); returns the file that holds it:
        this log, or a copy in the temporary directory when this one cannot be written (a
        full or read-only disk), or None when neither can."""
        trace = "".join(traceback.format_exception(error))
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        record = f"\n--- logstream run: fault at {now}\n{trace}"
        try:
            with open(self.path, "a", encoding="utf-8", errors="replace") as fh:
                fh.write(record)
            return self.path
        except OSError:
            pass
        try:
            spare = Path(tempfile.gettempdir()) / "logstream" / self.path.name
            spare.parent.mkdir(parents=True, exist_ok=True)
            before = b""
            with contextlib.suppress(OSError):
                before = self.path.read_bytes()
            spare.write_bytes(before + record.encode("utf-8", "replace"))
            return spare
        except OSError:
            return None


def run_fault(
    error: BaseException, log: RunLog, roots: dict[str, Path], state_dir: Path | None
) -> RunFault:
    """The :class:`~logstream.errors.RunFault` whose one line reports ``error``: what, where,
    the fix (:func:`fault_message`), and the log holding its trace."""
    line = fault_message(error, roots, state_dir)
    written = log.write_trace(error)
    where = (
        f"trace in {written}" if written else "no trace written: the disks are full or read-only"
    )
    return RunFault(f"{line}; {where}")
