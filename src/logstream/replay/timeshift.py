"""Read and rewrite the Common Log Format time of a line, cheaply, in plain Python.

Pacing needs the event time of every line at thousands of lines per second, so this module
reads ``[dd/Mon/yyyy:HH:MM:SS +zzzz]`` by slicing instead of :func:`datetime.strptime`
(about 10× faster). Rewriting keeps the line's own format and UTC offset: only the 26
characters of the time change.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from functools import lru_cache
from typing import NamedTuple

__all__ = [
    "ClfTime",
    "find_clf_time",
    "find_iso_time",
    "format_clf_time",
    "shift_line",
    "to_datetime",
]

_MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTHS = {name: i for i, name in enumerate(_MONTH_NAMES, start=1)}
_UNIX_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_CLF_LENGTH = 26  # "09/Jul/1995:00:00:00 -0400"


class ClfTime(NamedTuple):
    """Where a line's CLF time is and what it says.

    Attributes
    ----------
    start, end : int
        ``line[start:end]`` is the time text, without the brackets (26 characters).
    epoch_s : int
        The instant, in whole seconds since 1970-01-01T00:00:00Z.
    offset_minutes : int
        The line's UTC offset in minutes (``-0400`` → ``-240``).
    """

    start: int
    end: int
    epoch_s: int
    offset_minutes: int


@lru_cache(maxsize=4096)
def _days_since_epoch(year: int, month: int, day: int) -> int | None:
    try:
        return date(year, month, day).toordinal() - _UNIX_EPOCH_ORDINAL
    except ValueError:
        return None


@lru_cache(maxsize=4096)
def _civil_from_days(days: int) -> tuple[int, int, int]:
    d = date.fromordinal(days + _UNIX_EPOCH_ORDINAL)
    return d.year, d.month, d.day


def _parse_at(line: str, start: int) -> ClfTime | None:
    end = start + _CLF_LENGTH
    if len(line) <= end or line[end] != "]":
        return None
    t = line[start:end]
    if (
        t[2] != "/"
        or t[6] != "/"
        or t[11] != ":"
        or t[14] != ":"
        or t[17] != ":"
        or t[20] != " "
        or t[21] not in "+-"
    ):
        return None
    digits = t[0:2] + t[7:11] + t[12:14] + t[15:17] + t[18:20] + t[22:26]
    month = _MONTHS.get(t[3:6])
    if month is None or not (digits.isascii() and digits.isdigit()):
        return None
    hour, minute, second = int(t[12:14]), int(t[15:17]), int(t[18:20])
    off_h, off_m = int(t[22:24]), int(t[24:26])
    if hour > 23 or minute > 59 or second > 59 or off_m > 59:
        return None
    days = _days_since_epoch(int(t[7:11]), month, int(t[0:2]))
    if days is None:
        return None
    offset = off_h * 60 + off_m
    if t[21] == "-":
        offset = -offset
    epoch = days * 86400 + hour * 3600 + minute * 60 + second - offset * 60
    return ClfTime(start, end, epoch, offset)


def find_clf_time(line: str) -> ClfTime | None:
    """Find the first valid ``[dd/Mon/yyyy:HH:MM:SS ±hhmm]`` time in ``line``.

    Parameters
    ----------
    line : str
        One log line.

    Returns
    -------
    ClfTime or None
        Position, instant and offset of the time; None when the line holds no valid CLF time
        (a wrong month name, 31 June, hour 24 …).

    Examples
    --------
    >>> t = find_clf_time('h - - [09/Jul/1995:00:00:07 -0400] "GET / HTTP/1.0" 200 1')
    >>> t.epoch_s, t.offset_minutes
    (805262407, -240)
    """
    i = line.find("[")
    while i >= 0:
        found = _parse_at(line, i + 1)
        if found is not None:
            return found
        i = line.find("[", i + 1)
    return None


def format_clf_time(epoch_s: int, offset_minutes: int) -> str:
    """Format an instant as CLF time text in a given UTC offset.

    Parameters
    ----------
    epoch_s : int
        Seconds since 1970-01-01T00:00:00Z.
    offset_minutes : int
        UTC offset to write, in minutes (−1439 … 1439).

    Returns
    -------
    str
        ``dd/Mon/yyyy:HH:MM:SS ±hhmm`` (26 characters, no brackets).

    Examples
    --------
    >>> format_clf_time(805262407, -240)
    '09/Jul/1995:00:00:07 -0400'
    """
    local = int(epoch_s) + offset_minutes * 60
    days, secs = divmod(local, 86400)
    year, month, day = _civil_from_days(days)
    hour, rem = divmod(secs, 3600)
    minute, second = divmod(rem, 60)
    sign = "-" if offset_minutes < 0 else "+"
    off_h, off_m = divmod(abs(offset_minutes), 60)
    return (
        f"{day:02d}/{_MONTH_NAMES[month - 1]}/{year:04d}:{hour:02d}:{minute:02d}:{second:02d} "
        f"{sign}{off_h:02d}{off_m:02d}"
    )


def shift_line(line: str, found: ClfTime, shift_s: int) -> str:
    """Return ``line`` with its CLF time moved by ``shift_s`` seconds, in the same offset.

    Parameters
    ----------
    line : str
        The line ``found`` was read from.
    found : ClfTime
        The result of :func:`find_clf_time` for ``line``.
    shift_s : int
        Seconds to add (may be negative).

    Returns
    -------
    str
        The line with only the 26 characters of its time replaced.
    """
    if shift_s == 0:
        return line
    new = format_clf_time(found.epoch_s + shift_s, found.offset_minutes)
    return line[: found.start] + new + line[found.end :]


def to_datetime(epoch_s: float) -> datetime:
    """Return the aware UTC datetime of ``epoch_s`` seconds since the Unix epoch."""
    return datetime.fromtimestamp(epoch_s, tz=UTC)


_ISO_TIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)")


def find_iso_time(line: str) -> float | None:
    """The first ``yyyy-mm-dd hh:mm:ss`` (or ``T``) time in ``line``, read as UTC: the time of
    a sensor reading (the UCI occupancy files), for pacing; None when there is none.

    Examples
    --------
    >>> find_iso_time('"2015-02-04 17:51:00",23.18,27.272,426,721.25,0.0047,1')
    1423072260.0
    >>> find_iso_time('"Date","Temperature"') is None
    True
    """
    match = _ISO_TIME.search(line)
    if match is None:
        return None
    try:
        parts = [int(g) for g in match.groups()]
        return datetime(*parts, tzinfo=UTC).timestamp()  # type: ignore[misc]
    except ValueError:
        return None
