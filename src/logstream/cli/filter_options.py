"""The filter options of ``logstream batch`` and ``logstream run`` (:mod:`logstream.filters`),
and the site options they share (``--vhost-from-path``)."""

from __future__ import annotations

from typing import Annotated

import typer

from logstream.filters import EventFilter, check_vhost_pattern

__all__ = [
    "FilterOption",
    "GrepOption",
    "SinceOption",
    "UntilOption",
    "VhostFromPathOption",
    "build_filter",
    "check_vhost_pattern",
]

_TIME_HELP = "ISO 8601 (2015-05-18, 2015-05-18T10:00Z; UTC without an offset) or a span back "
SinceOption = Annotated[
    str | None,
    typer.Option(
        "--since",
        metavar="TIME",
        help="Keep events at or after TIME: " + _TIME_HELP + "from now (2h, 7d).",
        show_default=False,
    ),
]
UntilOption = Annotated[
    str | None,
    typer.Option(
        "--until",
        metavar="TIME",
        help="Keep events before TIME: " + _TIME_HELP + "from now (30m).",
        show_default=False,
    ),
]
FilterOption = Annotated[
    list[str] | None,
    typer.Option(
        "--filter",
        metavar="EXPR",
        help="Keep events where EXPR holds: Spark SQL over the event columns, e.g. "
        '"status >= 500", "url_path LIKE \'/api/%\'", "vhost = \'a.example\'" (AND, OR, '
        "NOT; repeat to AND them).",
        show_default=False,
    ),
]
GrepOption = Annotated[
    list[str] | None,
    typer.Option(
        "--grep",
        metavar="REGEX",
        help="Keep lines whose raw text matches REGEX (Java syntax; repeat to AND them).",
        show_default=False,
    ),
]
VhostFromPathOption = Annotated[
    str | None,
    typer.Option(
        "--vhost-from-path",
        metavar="REGEX",
        help="Take each line's virtual host (its site) from its file's path: the first group "
        "of REGEX, else its whole match, e.g. '([^/]+)\\.access\\.log'.",
        show_default=False,
    ),
]


def build_filter(
    since: str | None, until: str | None, filters: list[str] | None, greps: list[str] | None
) -> EventFilter:
    """The checked filter of the options (:meth:`EventFilter.build`); raises
    :class:`~logstream.errors.ConfigError` before any JVM starts."""
    return EventFilter.build(since, until, filters, greps)
