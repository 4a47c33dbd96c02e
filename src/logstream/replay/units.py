"""Parse durations written the way people write them on a command line."""

from __future__ import annotations

import math
import re

from logstream.errors import ConfigError

__all__ = ["parse_duration"]

_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h|d)")


def parse_duration(text: str, *, option: str = "duration") -> float:
    """Return a duration in seconds.

    Parameters
    ----------
    text : str
        A number of seconds (``90``, ``1.5``) or number-unit pairs with units ``ms``, ``s``,
        ``m``, ``h``, ``d`` (``10m``, ``1h30m``, ``250ms``, ``2d``).
    option : str, default ``duration``
        Name used in the error message (``--late-by``).

    Returns
    -------
    float
        Seconds, ≥ 0.

    Raises
    ------
    ConfigError
        When ``text`` is not a duration.

    Examples
    --------
    >>> parse_duration("1h30m"), parse_duration("90"), parse_duration("250ms")
    (5400.0, 90.0, 0.25)
    """
    raw = text.strip().lower().replace(" ", "")
    try:
        value = float(raw)
    except ValueError:
        value = None
    if value is not None:
        if not math.isfinite(value) or value < 0:
            raise ConfigError(f"{option} {text!r} must be a non-negative number of seconds")
        return value
    pos, total = 0, 0.0
    for match in _PART.finditer(raw):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_S[match.group(2)]
        pos = match.end()
    if pos != len(raw) or not raw:
        raise ConfigError(
            f"{option} {text!r} is not a duration: write seconds (90) or units like 10m, 1h30m, "
            "250ms, 2d"
        )
    return total
