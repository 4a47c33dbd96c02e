"""Read log files (plain, ``.gz``, directories, globs) as a DataFrame of raw lines.

Spark's text source does the reading: ``.gz`` files are decompressed by their extension,
``\\n``, ``\\r\\n`` and ``\\r`` all end a line, and bytes that are not valid UTF-8 are decoded
to U+FFFD rather than failing the job. The file of each line comes from the file-source
metadata column ``_metadata.file_path`` (Spark docs, "File metadata column"), which works in
batch and streaming alike.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from pyspark.sql import functions as F

from logstream.errors import InputPathError
from logstream.sources.integrity import OPENERS
from logstream.units import plural

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "balanced_partitions",
    "expand_inputs",
    "file_partitions",
    "head_lines",
    "input_files",
    "lines_at_most",
    "read_lines",
    "sample_lines",
    "skipped_files",
    "skipped_note",
    "split_bytes",
    "splittable",
]

_GLOB_CHARS = set("*?[{")
#: Compression codecs Spark's text source reads by a file's suffix, beside gzip and bzip2.
_OTHER_CODECS = frozenset((".deflate", ".lz4", ".snappy", ".zst"))


def _is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file:")


def _local(path: str) -> str:
    """``file:/x``, ``file:///x`` (Spark's ``source_file`` URIs) → ``/x``; others unchanged."""
    if path.startswith("file:"):
        return unquote(urlparse(path).path)
    return path


def expand_inputs(paths: Sequence[str | os.PathLike[str]]) -> list[str]:
    """Check input paths at start and return them as Spark will read them.

    Parameters
    ----------
    paths : sequence of str or path-like
        Files, directories (read recursively) or glob patterns; ``file:`` URIs (as in the
        ``source_file`` column) are local paths. URIs with another scheme (``hdfs://``,
        ``s3a://``) are passed through unchecked.

    Returns
    -------
    list of str
        Absolute local paths (globs kept as patterns) and remote URIs.

    Raises
    ------
    InputPathError
        When no path is given, a file or directory does not exist, a directory holds no file,
        or a glob matches nothing. The message names the path and the fix.
    """
    if not paths:
        raise InputPathError("no input given: name at least one log file, directory or glob")
    checked: list[str] = []
    for raw in paths:
        path = os.fspath(raw)
        if _is_remote(path):
            checked.append(path)
            continue
        local = _local(path)
        if _GLOB_CHARS & set(local):
            if not glob.glob(local, recursive=True):
                raise InputPathError(
                    f"input glob {path!r} matches no file: check the pattern and quote it so "
                    "the shell does not expand it"
                )
            checked.append(str(Path(local).expanduser().absolute()))
            continue
        p = Path(local).expanduser()
        if p.is_dir():
            if not input_files([str(p)]):
                hidden = skipped_files([p])
                raise InputPathError(
                    f"input directory {path!r} holds no log file"
                    + (
                        f" that Spark reads ({len(hidden):,} skipped: names starting with "
                        "'.' or '_')"
                        if hidden
                        else ""
                    )
                )
        elif not p.is_file():
            raise InputPathError(
                f"input {path!r} does not exist: give a log file, a directory or a glob "
                "(set LOGSTREAM_DATA_DIR to find the shared data elsewhere)"
            )
        checked.append(str(p.absolute()))
    return checked


def _hidden(name: str) -> bool:
    """Whether Spark's file index skips a file (or everything under a directory) of this name:
    hidden and metadata names, starting with ``.``, or with ``_`` unless they hold ``=`` (a
    partition directory), and files still being copied (``._COPYING_``)."""
    return (
        name.startswith(".")
        or (name.startswith("_") and "=" not in name)
        or name.endswith("._COPYING_")
    )


def _listed_files(checked: Sequence[str]) -> list[tuple[str, bool]]:
    """Every local file under the output of :func:`expand_inputs`, with whether Spark skips it.

    A file given itself or matched by a glob is skipped for its own name; a directory's files
    (read recursively) for their name or the name of a directory between (the directory given
    is read whatever its name, as Spark does).
    """
    files: list[tuple[str, bool]] = []
    for path in checked:
        if _is_remote(path):
            continue
        if _GLOB_CHARS & set(path):
            # Hadoop's glob matches names starting with "." as well
            found = glob.glob(path, recursive=True, include_hidden=True)
            matches = [Path(p) for p in sorted(found)]
        else:
            matches = [Path(path)]
        for match in matches:
            if match.is_dir():
                files.extend(
                    (str(f), any(_hidden(part) for part in f.relative_to(match).parts))
                    for f in sorted(match.rglob("*"))
                    if f.is_file()
                )
            elif match.is_file():
                files.append((str(match), _hidden(match.name)))
    return files


def input_files(checked: Sequence[str]) -> list[str]:
    """The local files Spark reads for the output of :func:`expand_inputs` (remote URIs are
    left out): a file itself, a directory's visible files recursively, a glob's matches;
    not those Spark skips (:func:`skipped_files`)."""
    return [f for f, skipped in _listed_files(checked) if not skipped]


def skipped_files(checked: Sequence[str | os.PathLike[str]]) -> list[str]:
    """The local files of the inputs that Spark's file source skips, as ``logstream batch`` and
    ``logstream run --input-dir`` read them: names starting with ``.`` or ``_`` (without a
    ``=``), files under a directory so named, and ``*._COPYING_``. Spark says nothing of them;
    logstream counts and names them."""
    return [f for f, skipped in _listed_files([os.fspath(p) for p in checked]) if skipped]


def skipped_note(skipped: Sequence[str], shown: int = 5) -> str | None:
    """One sentence naming the files of :func:`skipped_files` (the first ``shown`` of them),
    or None when there is none."""
    if not skipped:
        return None
    names = ", ".join(skipped[:shown]) + (
        f" and {len(skipped) - shown:,} more" if len(skipped) > shown else ""
    )
    them = "it" if len(skipped) == 1 else "them"
    return (
        f"skipped {plural(len(skipped), 'file')} that Spark does not read (a name starting "
        f"with '.' or '_', or under a directory so named): {names}; rename {them} to have "
        f"{them} read"
    )


def read_lines(spark: SparkSession, paths: Sequence[str | os.PathLike[str]]) -> DataFrame:
    """Read log files as raw lines.

    Parameters
    ----------
    spark : SparkSession
    paths : sequence of str or path-like
        As :func:`expand_inputs`.

    Returns
    -------
    DataFrame
        Batch DataFrame with ``value`` (string, one line without its line ending) and
        ``source_file`` (string, the file's URI).

    Raises
    ------
    InputPathError
        As :func:`expand_inputs`.
    """
    checked = expand_inputs(paths)
    reader = spark.read.format("text")
    if any(Path(p).is_dir() for p in checked if not _is_remote(p)):
        reader = reader.option("recursiveFileLookup", "true")
    return reader.load(checked).select("value", F.col("_metadata.file_path").alias("source_file"))


#: Spark's defaults of ``spark.sql.files.maxPartitionBytes`` and ``openCostInBytes`` (bytes).
MAX_PARTITION_BYTES = 128 << 20
OPEN_COST_BYTES = 4 << 20
#: Suffixes of files Spark's text source reads whole, one task each (codecs that cannot split;
#: plain text and bzip2 are split).
_WHOLE_FILE_SUFFIXES = (".gz", *_OTHER_CODECS)


def file_partitions(
    sizes: Sequence[tuple[int, bool]], split_bytes: int, open_cost: int = OPEN_COST_BYTES
) -> int:
    """How many partitions Spark's file source makes of files (Spark's ``FilePartition``:
    splittable files cut every ``split_bytes``, then the pieces, largest first, packed "next
    fit" up to ``split_bytes``, each counting ``open_cost`` more).

    Parameters
    ----------
    sizes : sequence of (int, bool)
        Each file's size (bytes) and whether Spark splits it.
    split_bytes, open_cost : int
        The split size Spark chose and ``spark.sql.files.openCostInBytes`` (bytes).
    """
    pieces = []
    for size, splittable in sizes:
        if size <= 0:
            continue
        step = split_bytes if splittable else size
        pieces += [min(step, size - start) for start in range(0, size, step)]
    count, current, filled = 0, 0, False
    for piece in sorted(pieces, reverse=True):
        if filled and current + piece > split_bytes:
            count, current, filled = count + 1, 0, False
        current, filled = current + piece + open_cost, True
    return count + filled


def balanced_partitions(
    sizes: Sequence[tuple[int, bool]],
    cores: int,
    max_bytes: int = MAX_PARTITION_BYTES,
    open_cost: int = OPEN_COST_BYTES,
) -> int | None:
    """A ``spark.sql.files.minPartitionNum`` under which a read's tasks come in full waves of
    ``cores``, or None where Spark's own choice already does (or none near it does).

    Past ``cores`` × ``max_bytes`` of input Spark makes partitions of ``max_bytes`` and often
    a last wave that runs on one core: 284 NASA days were 17 tasks on 2 cores, the last one
    2.5 s alone. Asking for a few more partitions (a multiple of the cores) makes them a
    little smaller and as many as fill each wave (18). The count is Spark's own packing,
    :func:`file_partitions`, which ``tests/sources/test_balanced_partitions.py`` holds to
    Spark's.

    Parameters
    ----------
    sizes : sequence of (int, bool)
        Each input file's size (bytes) and whether Spark splits it (:func:`splittable`).
    cores : int
        Tasks that run at once (``SparkContext.defaultParallelism``).
    max_bytes, open_cost : int
        ``spark.sql.files.maxPartitionBytes`` and ``spark.sql.files.openCostInBytes``.

    Returns
    -------
    int or None
        The setting, or None to leave Spark's (``cores``).
    """

    total = _input_bytes(sizes, open_cost)  # once: each try below only divides it

    def made(minimum: int) -> int:
        return file_partitions(sizes, _split_of(total, minimum, max_bytes, open_cost), open_cost)

    default = made(cores)
    if cores < 2 or default <= cores or default % cores == 0:
        return None
    first = cores * (total // (max_bytes * cores) + 1)  # the first that cuts smaller
    for minimum in range(first, first + 4 * cores, cores):
        if made(minimum) % cores == 0:
            return minimum
    return None


def split_bytes(
    sizes: Sequence[tuple[int, bool]],
    minimum: int,
    max_bytes: int = MAX_PARTITION_BYTES,
    open_cost: int = OPEN_COST_BYTES,
) -> int:
    """The most bytes Spark puts in one piece of a split file when reading files of ``sizes``
    with ``minimum`` partitions at least (``spark.sql.files.minPartitionNum``): the input
    with an open cost per file, shared by ``minimum``, within ``[open_cost, max_bytes]``
    (Spark's ``FilePartition.maxSplitBytes``).

    Examples
    --------
    >>> split_bytes([(100 << 20, True)] * 4, 2)  # 400 MiB: 128 MiB pieces
    134217728
    >>> split_bytes([(10 << 20, True)] * 4, 8)  # (4 x 14 MiB with the open cost) / 8: 7 MiB
    7340032
    """
    return _split_of(_input_bytes(sizes, open_cost), minimum, max_bytes, open_cost)


def _input_bytes(sizes: Sequence[tuple[int, bool]], open_cost: int) -> int:
    """The input's bytes as Spark weighs them: each file's size and its open cost."""
    return sum(size + open_cost for size, _ in sizes)


def _split_of(total: int, minimum: int, max_bytes: int, open_cost: int) -> int:
    """:func:`split_bytes` of an input of ``total`` weighed bytes (:func:`_input_bytes`)."""
    return min(max_bytes, max(open_cost, total // minimum))


def splittable(path: str) -> bool:
    """Whether Spark's text source cuts the file into several tasks (plain text, bzip2)."""
    return not path.lower().endswith(_WHOLE_FILE_SUFFIXES)


#: The most bytes :func:`head_lines` reads of a file.
HEAD_BYTES = 1 << 20


def head_lines(path: str, n: int = 100) -> list[str]:
    """The first ``n`` complete lines of a local file (gzip and bzip2 by their names), read in
    Python before Spark starts: at most :data:`HEAD_BYTES` bytes, decoded as UTF-8 with
    replacement; empty when the file cannot be read (Spark reports that later)."""
    try:
        with OPENERS.get(Path(path).suffix, open)(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except (OSError, EOFError, ValueError):  # gzip's BadGzipFile is an OSError
        return []
    lines = head.decode("utf-8", errors="replace").splitlines()
    return lines[:n] if len(head) < HEAD_BYTES else lines[: min(n, len(lines) - 1)]


def lines_at_most(paths: Sequence[str], limit: int, chunk: int = 1 << 20) -> bool | None:
    """Whether the local files ``paths`` hold at most ``limit`` lines together: their newlines
    counted on the driver (``bytes.count``, about 20 ms for 100 MB; ``.gz`` and ``.bz2``
    decompressed), stopping as soon as they are more.

    A line without a final newline is counted too. The answer is exact for the lines of the
    files; Spark's rows of them differ by a format's header line.

    Returns
    -------
    bool or None
        None when a file cannot be read here (a remote file, a corrupt archive): count in
        Spark instead.
    """
    seen = 0
    for path in paths:
        suffix = Path(path).suffix
        if _is_remote(path) or suffix in _OTHER_CODECS:
            return None
        opener = OPENERS.get(suffix, open)
        try:
            with opener(_local(path), "rb") as f:
                last = b"\n"
                while block := f.read(chunk):
                    seen += block.count(b"\n")
                    last = block[-1:]
                    if seen > limit:
                        return False
                seen += last != b"\n"
        except (OSError, EOFError, ValueError):
            return None
    return seen <= limit


def sample_lines(lines: DataFrame, n: int = 100) -> list[str]:
    """Return up to ``n`` non-empty lines from the start of ``lines`` (for format detection)."""
    rows = lines.where(F.trim("value") != "").select("value").limit(n).collect()
    return [r.value for r in rows]
