"""Choose a log format: by name, by format string, or ``auto`` from the first lines."""

from __future__ import annotations

from collections.abc import Iterable

from logstream.errors import LogFormatError
from logstream.parsing.logformat import CompiledFormat, compile_format

__all__ = ["AUTO_CANDIDATES", "detect_format", "resolve_format"]

#: Formats ``auto`` tries, most specific first.
AUTO_CANDIDATES: tuple[str, ...] = ("combined", "common")

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
        ``combined`` when at least 80 % of the sampled lines match it, else ``common`` when
        80 % match that.

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
    for name in AUTO_CANDIDATES:
        fmt = compile_format(name)
        rx = fmt.python_regex
        hits = sum(1 for line in lines if rx.match(line))
        if hits >= AUTO_MIN_SHARE * len(lines):
            return fmt
    raise LogFormatError(
        f"cannot detect the log format: fewer than {AUTO_MIN_SHARE:.0%} of the first "
        f"{len(lines)} lines are Combined or Common Log Format (first line: {lines[0][:120]!r}); "
        "pass --format with an Apache LogFormat string such as '%h %l %u %t \"%r\" %>s %b'"
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
