"""Formatting of quantities for people (terminal, HTML report, dashboard)."""

from __future__ import annotations

__all__ = ["human_bytes"]


def human_bytes(value: float | None, missing: str = "–") -> str:
    """Format a byte count with binary units.

    Parameters
    ----------
    value : float or None
        Bytes.
    missing : str
        What to show for None.

    Examples
    --------
    >>> human_bytes(1536)
    '1.5 KiB'
    >>> human_bytes(512)
    '512 B'
    >>> human_bytes(None)
    '–'
    """
    if value is None:
        return missing
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024:
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} TiB"
