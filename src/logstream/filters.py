"""One filter language for ``logstream batch``, ``logstream run`` and the dashboard.

A filter keeps the events (and lines) that pass every one of its parts, combined with AND:

* a **time range** of event time, ``--since`` (inclusive) and ``--until`` (exclusive), each
  absolute (ISO 8601: ``2015-05-18``, ``2015-05-18T10:00:00Z``, ``…+02:00``; a time without
  an offset is UTC) or relative, a span back from now (``90s``, ``30m``, ``2h``, ``7d``,
  ``2w``);
* **field predicates**, ``--filter EXPR`` (repeatable): a Spark SQL boolean expression over
  the event schema's columns (:data:`FILTER_COLUMNS`, and ``vhost`` for ``virtual_host``),
  with ``AND``, ``OR``, ``NOT``, comparisons, ``LIKE``, ``RLIKE``, ``IN``, ``BETWEEN``,
  ``IS NULL`` and a list of string and date functions, nothing else
  (:mod:`logstream.filter_allowlist`): ``status >= 500``, ``url_path LIKE '/api/%'``,
  ``user_agent RLIKE 'bot'``, ``vhost = 'a.example'``, ``hour(event_time) BETWEEN 9 AND 17``;
* **regular expressions over the raw line**, ``--grep REGEX`` (repeatable; Java's syntax, as
  Spark's ``rlike`` reads it).

Spark evaluates every part (``F.expr`` of the expression, ``rlike`` of the line). The
expression is checked first, without Spark and without a JVM, by `sqlglot
<https://github.com/tobymao/sqlglot>`_, a pure-Python SQL parser with a Spark dialect: a
malformed expression, a query or statement where a predicate belongs, an unknown column
(named, with the columns listed), and anything outside the allowlist (``reflect``,
``java_method``, ``read_files``, a UDF, a subquery: what is allowed is listed) or its bounds
(length, terms, ``IN`` items, nesting) are refused at start
(:class:`~logstream.errors.ConfigError`, exit status 2). The expression Spark receives is
sqlglot's rendering of the checked tree, its identifiers quoted, and that rendering is checked
again, so what was checked is what runs: a filter cannot call Java or read a file. The
dashboard, which runs no Spark, evaluates the same tree with Arrow's compute kernels over the
Parquet events (:func:`logstream.filter_arrow.arrow_expression`).

This module imports no PySpark: the CLI checks filters before a JVM starts, and the dashboard
never loads Spark.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from logstream.errors import ConfigError
from logstream.units import iso_instant

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = [
    "COLUMN_ALIASES",
    "FILTERED_REASON",
    "FILTER_COLUMNS",
    "EventFilter",
    "check_expression",
    "check_grep",
    "check_vhost_pattern",
    "parse_instant",
]

#: The columns a ``--filter`` expression may read: the event schema's
#: (:data:`logstream.schema.EVENT_SCHEMA`, which ``tests/test_filters.py`` holds them to),
#: with their kind (``text``, ``number``, ``time``).
FILTER_COLUMNS: dict[str, str] = {
    "client_host": "text",
    "ident": "text",
    "user": "text",
    "event_time": "time",
    "method": "text",
    "url_path": "text",
    "query_string": "text",
    "protocol": "text",
    "status": "number",
    "bytes_sent": "number",
    "referrer": "text",
    "user_agent": "text",
    "response_time_us": "number",
    "virtual_host": "text",
    "source_file": "text",
}
#: Shorter names a filter may use for a column.
COLUMN_ALIASES = {"vhost": "virtual_host"}
#: The quarantine-like reason ``logstream run`` gives a line its filter leaves out: counted as
#: ``filtered``, never a window, never quarantined.
FILTERED_REASON = "filtered"

_RELATIVE = re.compile(r"^\s*(\d+)\s*(s|m|h|d|w)\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_instant(text: str, option: str = "--since", now: datetime | None = None) -> datetime:
    """An instant of a time range: ISO 8601, or a span back from ``now``.

    Parameters
    ----------
    text : str
        ``2015-05-18``, ``2015-05-18T10:00``, ``2015-05-18T10:00:00-04:00``, ``…Z`` (no
        offset: UTC), or ``N`` followed by ``s``, ``m``, ``h``, ``d`` or ``w`` (``2h``: two
        hours before ``now``).
    option : str
        The option's name, for the message.
    now : datetime, optional
        The instant a relative span counts back from (aware); default the wall clock.

    Returns
    -------
    datetime
        An aware UTC datetime.

    Raises
    ------
    ConfigError
        When ``text`` is neither form.

    Examples
    --------
    >>> parse_instant("2015-05-18").isoformat()
    '2015-05-18T00:00:00+00:00'
    >>> parse_instant("1995-07-09T00:00:00-04:00").isoformat()
    '1995-07-09T04:00:00+00:00'
    >>> parse_instant("2h", now=datetime(2020, 1, 1, 12, tzinfo=UTC)).isoformat()
    '2020-01-01T10:00:00+00:00'
    """
    relative = _RELATIVE.match(text)
    if relative:
        base = now if now is not None else datetime.now(UTC)
        span = timedelta(seconds=int(relative[1]) * _UNIT_SECONDS[relative[2]])
        return (base - span).astimezone(UTC)
    try:
        return iso_instant(text)
    except ValueError:
        raise ConfigError(
            f"{option} {text!r} is not a time: use ISO 8601 (2015-05-18, "
            "2015-05-18T10:00:00Z) or a span back from now (90s, 30m, 2h, 7d, 2w)"
        ) from None


def _column_list() -> str:
    aliases = ", ".join(f"{a} for {c}" for a, c in COLUMN_ALIASES.items())
    return f"{', '.join(FILTER_COLUMNS)} ({aliases})"


def _shown(text: str) -> str:
    """An expression as a message quotes it: at most 80 characters."""
    return text if len(text) <= 80 else text[:79] + "…"


def check_expression(text: str, *, rendered: bool = False) -> Any:
    """Check a ``--filter`` expression without Spark; return its tree (sqlglot's), with
    aliases (:data:`COLUMN_ALIASES`) replaced by the columns they name.

    Parameters
    ----------
    text : str
        The expression.
    rendered : bool
        ``text`` is sqlglot's rendering of a checked expression (quoted identifiers, a space
        after each comma): its length may be up to four times the bound of a typed one.

    Raises
    ------
    ConfigError
        One line naming the expression and the fault: it does not parse as Spark SQL, it is
        a query or a statement, it reads ``*`` or a column that is not an event column (the
        columns are listed), or it holds what the allowlist does not
        (:mod:`logstream.filter_allowlist`: ``reflect``, a UDF, arithmetic…; what is allowed
        is listed), or it passes a bound (length, terms, ``IN`` items, nesting).

    Examples
    --------
    >>> check_expression("vhost = 'a.example' AND status >= 500").sql(dialect="spark")
    "virtual_host = 'a.example' AND status >= 500"
    >>> check_expression("stauts > 3")
    Traceback (most recent call last):
    ...
    logstream.errors.ConfigError: --filter 'stauts > 3': unknown column 'stauts': use one \
of client_host, ident, user, event_time, method, url_path, query_string, protocol, status, \
bytes_sent, referrer, user_agent, response_time_us, virtual_host, source_file (vhost for \
virtual_host)
    """
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    from logstream.filter_allowlist import (
        KIND,
        MAX_FILTER_CHARS,
        MAX_FILTER_DEPTH,
        check_bounds,
        check_tree,
    )

    where = f"--filter {_shown(text)!r}"
    if not text.strip():
        raise ConfigError(f"{where}: empty: give a condition such as status >= 500")
    check_bounds(text, where, MAX_FILTER_CHARS * (4 if rendered else 1))
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except SqlglotError as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        first = re.sub(r"<class '(?:\w+\.)*(\w+)'>", r"\1", first)
        raise ConfigError(
            f"{where} is not a Spark SQL condition ({_shown(first)}): write e.g. status >= 500 "
            "AND url_path LIKE '/api/%'"
        ) from None
    except RecursionError:  # sqlglot's parser recurses once per level of nesting
        raise ConfigError(
            f"{where}: nested deeper than a filter may be ({MAX_FILTER_DEPTH}): remove "
            "parentheses or NOTs"
        ) from None
    refused = (exp.Query, exp.Subquery, exp.Block, exp.Command, exp.Star, exp.Alias, exp.DDL)
    for node in tree.walk():
        if isinstance(node, refused) or (isinstance(node, exp.DML)):
            raise ConfigError(
                f"{where}: a condition on one event is needed, not a query, statement, alias "
                "or '*': write e.g. status >= 500"
            )
    if isinstance(tree, exp.Column | exp.Literal):
        raise ConfigError(f"{where} is not a condition: compare it, e.g. status >= 500")
    for column in list(tree.find_all(exp.Column)):
        name = column.name.lower()
        name = COLUMN_ALIASES.get(name, name)
        if column.table or name not in FILTER_COLUMNS:
            shown = column.sql(dialect="spark")
            raise ConfigError(f"{where}: unknown column {shown!r}: use one of {_column_list()}")
        resolved = exp.column(name)
        resolved.meta[KIND] = FILTER_COLUMNS[name]
        column.replace(resolved)
    check_tree(tree, where)  # the allowlist and its bounds
    return tree


def _rendered(text: str) -> str:
    """The Spark SQL of a checked expression: sqlglot's rendering of its tree (identifiers
    quoted, no comment), itself checked again, so that what Spark runs is what was checked."""
    out = check_expression(text).sql(dialect="spark", identify=True, comments=False)
    check_expression(out, rendered=True)
    return out


def check_grep(pattern: str) -> str:
    """Check a ``--grep`` regular expression (Python's compiler stands in for Java's: the
    two agree on the common syntax); return it.

    Raises
    ------
    ConfigError
        When it does not compile, naming the error.

    Examples
    --------
    >>> check_grep("Googlebot|bingbot")
    'Googlebot|bingbot'
    """
    try:
        re.compile(pattern)
    except re.error as e:
        raise ConfigError(
            f"--grep {pattern!r} is not a regular expression ({e}): escape special "
            "characters, e.g. 'GET /a\\.php'"
        ) from None
    if not pattern:
        raise ConfigError("--grep '': an empty pattern matches every line: leave it out")
    return pattern


def check_vhost_pattern(pattern: str | None) -> str | None:
    """Check ``--vhost-from-path``: a regular expression with at most one group that
    matters (the first), as Java's ``regexp_extract`` reads it.

    Raises
    ------
    ConfigError
        When it does not compile.
    """
    if pattern is None:
        return None
    try:
        re.compile(pattern)
    except re.error as e:
        raise ConfigError(
            f"--vhost-from-path {pattern!r} is not a regular expression ({e}): e.g. "
            "'([^/]+)\\.access\\.log' takes www.a.example from /logs/www.a.example.access.log"
        ) from None
    return pattern


@dataclass(frozen=True)
class EventFilter:
    """A checked filter: which events and lines a report, a run or a view keeps.

    Build it with :meth:`build`, which checks every part. Empty (no part): everything is kept.

    Attributes
    ----------
    since, until : datetime or None
        The time range of event time, ``since <= event_time < until`` (aware UTC).
    expressions : tuple of str
        The ``--filter`` expressions as checked, in Spark SQL with quoted identifiers.
    greps : tuple of str
        The ``--grep`` regular expressions over the raw line.
    given : dict
        The options as written (for the reports' description).
    """

    since: datetime | None = None
    until: datetime | None = None
    expressions: tuple[str, ...] = ()
    greps: tuple[str, ...] = ()
    given: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def build(
        cls,
        since: str | None = None,
        until: str | None = None,
        filters: list[str] | tuple[str, ...] | None = None,
        greps: list[str] | tuple[str, ...] | None = None,
        now: datetime | None = None,
    ) -> EventFilter:
        """Check the options and build the filter.

        Raises
        ------
        ConfigError
            A malformed time, expression or regular expression, an unknown column, or an
            empty time range (``since`` not before ``until``).
        """
        start = parse_instant(since, "--since", now) if since else None
        end = parse_instant(until, "--until", now) if until else None
        if start is not None and end is not None and start >= end:
            raise ConfigError(
                f"--since {since!r} ({start.isoformat()}) is not before --until {until!r} "
                f"({end.isoformat()}): the time range is empty; swap or widen them"
            )
        expressions = tuple(_rendered(f) for f in filters or ())
        patterns = tuple(check_grep(g) for g in greps or ())
        given = {
            "since": since,
            "until": until,
            "filter": list(filters or ()),
            "grep": list(greps or ()),
        }
        return cls(start, end, expressions, patterns, given)

    def previous(self, spec: str, now: datetime | None = None) -> EventFilter:
        """The filter of the period a report is compared with (``--compare SPEC``): the same
        expressions and patterns over another time range.

        Parameters
        ----------
        spec : str
            ``previous`` (the range of the same length just before this one), ``day`` or
            ``week`` (this range one day or one week earlier; ``previous-day`` and
            ``previous-week`` too), or an explicit range ``START..END`` (each as ``--since``
            takes it).
        now : datetime, optional
            What a relative ``START`` or ``END`` counts back from.

        Raises
        ------
        ConfigError
            A spec of none of these forms, an empty explicit range, or a shifted range while
            this filter has no ``--since`` and ``--until`` (its length is unknown).

        Examples
        --------
        >>> f = EventFilter.build("1995-07-08", "1995-07-15")
        >>> p = f.previous("week")
        >>> p.since.date().isoformat(), p.until.date().isoformat()
        ('1995-07-01', '1995-07-08')
        """
        text = spec.strip().lower().removeprefix("previous-")
        if ".." in spec:
            start, _, end = spec.partition("..")
            other = EventFilter.build(start.strip(), end.strip(), now=now)
            if other.since is None or other.until is None:
                raise ConfigError(
                    f"--compare {spec!r}: an explicit range needs both ends, START..END"
                )
            since, until = other.since, other.until
        elif text in ("previous", "day", "week"):
            if self.since is None or self.until is None:
                raise ConfigError(
                    f"--compare {spec}: compares the range of --since and --until with an "
                    "earlier one: give both (e.g. --since 2015-05-18 --until 2015-05-19), or "
                    "an explicit range, --compare 2015-05-17..2015-05-18"
                )
            shift = {
                "previous": self.until - self.since,
                "day": timedelta(days=1),
                "week": timedelta(days=7),
            }[text]
            since, until = self.since - shift, self.until - shift
        else:
            raise ConfigError(
                f"--compare {spec!r}: use previous, day, week or an explicit range "
                "START..END (e.g. 2015-05-17..2015-05-18)"
            )
        given = {**self.given, "since": since.isoformat(), "until": until.isoformat()}
        return EventFilter(since, until, self.expressions, self.greps, given)

    @property
    def active(self) -> bool:
        """Whether the filter leaves anything out."""
        return bool(self.since or self.until or self.expressions or self.greps)

    @property
    def on_events(self) -> bool:
        """Whether a part reads an event's fields (time range or expression): a line that
        does not parse cannot pass it."""
        return bool(self.since or self.until or self.expressions)

    def describe(self) -> dict[str, Any] | None:
        """The filter for a report's JSON (None when empty): the options as given, and the
        time range as UTC instants (ISO 8601)."""
        if not self.active:
            return None
        return {
            **self.given,
            "since_utc": self.since.isoformat() if self.since else None,
            "until_utc": self.until.isoformat() if self.until else None,
        }

    def text(self) -> str:
        """The filter in one line, for the terminal and HTML reports ("" when empty).

        Examples
        --------
        >>> EventFilter.build("2015-05-18", None, ["status >= 500"], ["bot"]).text()
        "since 2015-05-18T00:00:00+00:00 · status >= 500 · grep 'bot'"
        """
        parts = []
        if self.since:
            parts.append(f"since {self.since.isoformat()}")
        if self.until:
            parts.append(f"until {self.until.isoformat()}")
        parts += self.given.get("filter", [])
        parts += [f"grep {g!r}" for g in self.greps]
        return " · ".join(parts)

    # -- Spark ----------------------------------------------------------------------------

    def event_condition(self) -> Column:
        """The time range and expressions as one Spark condition on an event's columns
        (true when there is none). Aliases are resolved; identifiers are quoted."""
        from pyspark.sql import functions as F

        condition = F.lit(True)
        if self.since is not None:
            condition = condition & (F.col("event_time") >= F.lit(self.since))
        if self.until is not None:
            condition = condition & (F.col("event_time") < F.lit(self.until))
        for expression in self.expressions:
            condition = condition & F.coalesce(F.expr(expression), F.lit(False))
        return condition

    def line_condition(self, raw_line: str = "raw_line") -> Column:
        """The ``--grep`` patterns as one Spark condition on the raw line (true when none)."""
        from pyspark.sql import functions as F

        condition = F.lit(True)
        for pattern in self.greps:
            condition = condition & F.coalesce(F.col(raw_line).rlike(pattern), F.lit(False))
        return condition

    def row_condition(self, reason: str = "quarantine_reason") -> Column:
        """Which rows of :func:`logstream.parsing.parse`'s output pass: the line matches
        every ``--grep``, and an event passes the time range and expressions; a line that
        does not parse passes only a filter that reads no field (a ``--grep`` alone)."""
        from pyspark.sql import functions as F

        is_event = F.col(reason).isNull()
        fields = F.when(is_event, self.event_condition()).otherwise(F.lit(not self.on_events))
        return self.line_condition() & fields
