"""Choose a log format: by name, by format string, or ``auto`` from the first lines."""

from __future__ import annotations

import json
from collections.abc import Iterable

from logstream.errors import LogFormatError
from logstream.parsing.logformat import JSON_BOOK_KEYS, CompiledFormat, compile_format

__all__ = [
    "AUTO_CANDIDATES",
    "LOG_OFFSET_REGEX",
    "check_format",
    "check_sample",
    "detect_format",
    "resolve_format",
    "written_offset",
]

#: Formats ``auto`` tries, most specific first (JSON lines are recognised before these).
AUTO_CANDIDATES: tuple[str, ...] = ("vcombined", "combined", "common", "nasa-tsv")


def _is_book_json(line: str) -> bool:
    try:
        obj = json.loads(line)
    except ValueError:
        return False
    return isinstance(obj, dict) and all(k in obj for k in JSON_BOOK_KEYS.values())


#: Share of sampled lines a candidate must match to be chosen.
AUTO_MIN_SHARE = 0.8


def detect_format(sample: Iterable[str]) -> CompiledFormat:
    """Pick the first of :data:`AUTO_CANDIDATES` that matches most sampled lines.

    Parameters
    ----------
    sample : iterable of str
        The first lines of the input (blank lines are ignored); 100 or so is plenty.

    Returns
    -------
    CompiledFormat
        ``json`` when at least 80 % of the sampled lines are JSON objects with the keys of the
        book's NASA data set; else ``vcombined`` (Apache's ``vhost_combined``) when 80 %
        match it, else ``combined``, else ``common``, else ``nasa-tsv`` (a header line of
        the format is left out of the count).

    Raises
    ------
    LogFormatError
        When the sample is empty or no candidate matches 80 % of it; the message shows a line.
    """
    lines = [line.rstrip("\r\n") for line in sample if line.strip()]
    if not lines:
        raise LogFormatError(
            "cannot detect the log format: the input has no non-empty line; "
            "pass --format common|combined|'<LogFormat>'"
        )
    if sum(1 for line in lines if _is_book_json(line)) >= AUTO_MIN_SHARE * len(lines):
        return compile_format("json")
    for name in AUTO_CANDIDATES:
        fmt = compile_format(name)
        rx = fmt.python_regex
        body = [line for line in lines if not (fmt.header and line.startswith(fmt.header))]
        hits = sum(1 for line in body if rx.match(line))
        if body and hits >= AUTO_MIN_SHARE * len(body):
            return fmt
    raise LogFormatError(
        f"cannot detect the log format: fewer than {AUTO_MIN_SHARE:.0%} of the first "
        f"{len(lines)} lines are Combined, Common, NASA TSV or book JSON "
        f"(first line: {lines[0][:120]!r}); "
        "pass --format json:FIELD=KEY,… for JSON lines, or an Apache LogFormat string such as "
        "'%h %l %u %t \"%r\" %>s %b'"
    )


def resolve_format(spec: str, sample: Iterable[str] | None = None) -> CompiledFormat:
    """Compile ``spec``, or detect the format from ``sample`` when ``spec`` is ``auto``.

    Raises
    ------
    LogFormatError
        As :func:`compile_format` and :func:`detect_format`.
    """
    if spec.strip().lower() == "auto":
        return detect_format(sample or [])
    return compile_format(spec)


def check_sample(fmt: CompiledFormat, sample: Iterable[str]) -> None:
    """Refuse a format that matches none of the first lines of the input when another
    format matches them: a wrong ``--format`` (``combined`` for a Common log) would otherwise
    quarantine every line and print a report of empty tables. One line matching is enough (a
    log may start with junk); lines no format fits are left to the quarantine; JSON formats
    and samples of fewer than 10 lines are not judged.

    Raises
    ------
    LogFormatError
        Naming the format, the first line and the format detected.

    Examples
    --------
    >>> from logstream.parsing import compile_format
    >>> day = ['199.72.81.55 - - [01/Jul/1995:00:00:01 -0400] "GET / HTTP/1.0" 200 6245'] * 10
    >>> check_sample(compile_format("common"), day)
    >>> try:
    ...     check_sample(compile_format("combined"), day)
    ... except LogFormatError as e:
    ...     print(str(e).split("; ")[-1])
    they look like common: pass --format common, or --format auto
    """
    lines = [line.rstrip("\r\n") for line in sample if line.strip()]
    if fmt.is_json or len(lines) < 10:
        return
    body = [line for line in lines if not (fmt.header and line.startswith(fmt.header))]
    if any(fmt.python_regex.match(line) for line in body):
        return
    try:
        name = detect_format(lines).name
    except LogFormatError:
        return  # no format fits them: the report quarantines them (format_mismatch)
    raise LogFormatError(
        f"none of the first {len(lines)} lines matches --format {fmt.name} "
        f"(first line: {lines[0][:120]!r}); they look like {name}: pass --format {name}, or "
        "--format auto"
    )


def check_format(spec: str) -> str:
    """Check a ``--format`` value without Spark, so that a command refuses a bad one before
    the JVM starts: ``auto`` (detected later, from the input), or a format that compiles.

    Returns
    -------
    str
        ``spec``, unchanged.

    Raises
    ------
    LogFormatError
        As :func:`compile_format`: an unknown name or a ``LogFormat`` that does not compile.

    Examples
    --------
    >>> check_format("combined"), check_format("auto")
    ('combined', 'auto')
    """
    if spec.strip().lower() != "auto":
        compile_format(spec)
    return spec


#: The UTC offset written in a line's timestamp: the first time of day (``HH:MM:SS``, an
#: optional fraction) followed by ``±HHMM``, ``±HH:MM`` or ``Z``: CLF's ``[09/Jul/1995:00:00:01
#: -0400]``, nginx's ``$time_local``, ISO 8601 in JSON lines. Epoch times have none (UTC).
LOG_OFFSET_REGEX = r"\d\d:\d\d:\d\d(?:[.,]\d+)? ?(Z|[+-]\d\d:?\d\d)(?![\d:])"


def written_offset(lines: Iterable[str]) -> str | None:
    """The UTC offset most of ``lines`` are written in (:data:`LOG_OFFSET_REGEX`), as
    ``±HH:MM``; None when no line has one (epoch times, or no line).

    Examples
    --------
    >>> written_offset(['h - - [09/Jul/1995:00:00:01 -0400] "GET / HTTP/1.0" 200 1'])
    '-04:00'
    >>> written_offset(["no time here"]) is None
    True
    """
    import re
    from collections import Counter

    found = Counter()
    pattern = re.compile(LOG_OFFSET_REGEX)
    for line in lines:
        if match := pattern.search(line):
            text = match.group(1)
            found["+00:00" if text == "Z" else f"{text[:3]}:{text[-2:]}"] += 1
    return min(found.items(), key=lambda kv: (-kv[1], kv[0]))[0] if found else None
