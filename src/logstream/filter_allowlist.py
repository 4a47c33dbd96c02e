"""What a filter expression may hold: the one allowlist of ``--filter`` (``logstream batch``,
``logstream run``, a ``--config`` file's ``filter``) and of the dashboard's filter box.

A filter is a condition on one event. Its tree (sqlglot's, :func:`logstream.filters.
check_expression`) may hold only the node types listed here, each with the kinds of operand
it takes (``text``, ``number``, ``time``, ``date``, ``bool``):

* comparisons (``=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``) of two operands of one kind (a
  string literal stands for an instant beside ``event_time``, for a day beside a date),
  ``AND``, ``OR``, ``NOT``, ``LIKE``, ``ILIKE`` and ``RLIKE`` with a literal pattern, ``IN``
  over a list of at most :data:`MAX_IN_ITEMS` literals, ``BETWEEN``, ``IS [NOT] NULL``;
* the string functions of :data:`STRING_FUNCTIONS`, the date functions of
  :data:`DATE_FUNCTIONS` (of ``event_time``, in UTC, the session time zone), and
  ``coalesce`` (``nvl``, ``ifnull``) of operands of one kind;
* columns, string, number, boolean and ``NULL`` literals.

Anything else is refused before Spark or Arrow sees it: an unknown function (a UDF,
``reflect``, ``java_method``, ``read_files``), a subquery, arithmetic, a cast other than to a
date, a lambda. Spark runs only what this list names, so a filter cannot call Java, read a
file or run longer than a scan; the dashboard evaluates the same list with Arrow
(:mod:`logstream.filter_arrow`). The expression is bounded too: :data:`MAX_FILTER_CHARS`
characters, :data:`MAX_FILTER_NODES` nodes, :data:`MAX_FILTER_DEPTH` levels of nesting (a
chain of ``AND`` or ``OR`` counts as one level).

Kinds also keep a comparison of a number with text out: Spark's ANSI mode would stop the
job at the first value it cannot cast, Arrow would have no kernel for it.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from sqlglot import exp

from logstream.errors import ConfigError
from logstream.units import iso_instant

__all__ = [
    "DATE_FUNCTIONS",
    "KIND",
    "MAX_FILTER_CHARS",
    "MAX_FILTER_DEPTH",
    "MAX_FILTER_NODES",
    "MAX_IN_ITEMS",
    "STRING_FUNCTIONS",
    "allowed_text",
    "check_bounds",
    "check_tree",
    "is_literal",
    "kind_of",
    "literal_value",
]

#: The longest expression, in characters (a 1,000-item ``IN`` of short strings fits).
MAX_FILTER_CHARS = 10_000
#: The most nodes of its tree (a column, a literal, an operator: one each).
MAX_FILTER_NODES = 2_500
#: The most items of one ``IN`` list.
MAX_IN_ITEMS = 1_000
#: The deepest nesting (parentheses, ``NOT``, function calls; an ``AND`` or ``OR`` chain is
#: one level): sqlglot's parser recurses per level and fails near 45.
MAX_FILTER_DEPTH = 24

#: The key of a column node's ``meta`` that holds its kind (set when its name is resolved).
KIND = "logstream_kind"
#: The string functions, as Spark names them (``substr`` is ``substring``).
STRING_FUNCTIONS = (
    "lower", "upper", "length", "trim", "ltrim", "rtrim", "substring", "substr", "left",
    "right", "startswith", "endswith", "contains", "concat",
)  # fmt: skip
#: The date functions of ``event_time`` (``date(event_time)`` is ``to_date``).
DATE_FUNCTIONS = (
    "year", "month", "day", "dayofmonth", "dayofweek", "hour", "minute", "second", "to_date",
    "date",
)  # fmt: skip

_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
#: Function nodes of one text argument and their result's kind.
_TEXT_UNARY = {exp.Lower: "text", exp.Upper: "text", exp.Length: "number"}
#: Function nodes of a text and a literal text argument: a condition.
_TEXT_MATCH = (exp.StartsWith, exp.EndsWith, exp.Contains)
#: Date parts of a date or an instant, and parts of an instant only.
_DATE_PARTS = (exp.Year, exp.Month, exp.Day, exp.DayOfMonth, exp.DayOfWeek)
_TIME_PARTS = (exp.Hour, exp.Minute, exp.Second)


def allowed_text() -> str:
    """What a filter may use, in one line (the end of every refusal).

    Examples
    --------
    >>> allowed_text()[:60]
    'comparisons (=, <>, <, <=, >, >=), AND, OR, NOT, LIKE, ILIKE'
    """
    return (
        "comparisons (=, <>, <, <=, >, >=), AND, OR, NOT, LIKE, ILIKE, RLIKE, "
        f"IN (at most {MAX_IN_ITEMS:,} literals), BETWEEN, IS [NOT] NULL, the string functions "
        f"{', '.join(STRING_FUNCTIONS)}, the date functions {', '.join(DATE_FUNCTIONS)} "
        "of event_time, and coalesce"
    )


def _refuse(where: str, what: str) -> ConfigError:
    return ConfigError(f"{where}: {what} is not allowed: a filter takes {allowed_text()}")


def _shown(node: exp.Expression) -> str:
    """A refused node as the message names it: ``reflect()``, ``a subquery``, ``'a + 1'``."""
    if isinstance(node, exp.Query | exp.Subquery):
        return "a query or subquery"
    text = node.sql(dialect="spark", comments=False)
    if isinstance(node, exp.Func) and "(" in text:  # the name as Spark reads it
        return f"{text.split('(', 1)[0].strip().lower()}()"
    return repr(text if len(text) <= 40 else text[:39] + "…")


def check_bounds(text: str, where: str, limit: int = MAX_FILTER_CHARS) -> None:
    """Refuse an expression longer than ``limit`` characters (before it is parsed).

    Raises
    ------
    ConfigError
        Naming its length and the bound.
    """
    if len(text) > limit:
        raise ConfigError(
            f"{where}: {len(text):,} characters, longer than a filter may be "
            f"({limit:,}): shorten it (a long IN list: a LIKE or RLIKE pattern)"
        )


def _depth_and_size(tree: exp.Expression) -> tuple[int, int]:
    """The nesting depth (a chain of one connector counts once) and the node count, without
    recursion."""
    deepest, nodes = 0, 0
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        deepest = max(deepest, depth)
        for child in node.iter_expressions():
            same_chain = isinstance(node, exp.Connector) and type(child) is type(node)
            stack.append((child, depth if same_chain else depth + 1))
    return deepest, nodes


def check_tree(tree: exp.Expression, where: str) -> None:
    """Refuse a tree outside the allowlist or its bounds; its columns resolved already
    (:func:`logstream.filters.check_expression` gives each column node its kind, ``meta[KIND]``;
    a column without one is refused).

    Raises
    ------
    ConfigError
        One line: the first construct that is not allowed (or the bound passed) and what
        a filter takes.
    """
    depth, nodes = _depth_and_size(tree)
    if depth > MAX_FILTER_DEPTH:
        raise ConfigError(
            f"{where}: nested {depth} levels deep, more than a filter may be "
            f"({MAX_FILTER_DEPTH}): remove parentheses or NOTs"
        )
    if nodes > MAX_FILTER_NODES:
        raise ConfigError(
            f"{where}: {nodes:,} terms, more than a filter may have ({MAX_FILTER_NODES:,}): "
            "shorten it"
        )
    if kind_of(tree, where) not in ("bool", "null"):
        raise ConfigError(f"{where} is not a condition: compare it, e.g. status >= 500")


def literal_value(node: exp.Expression, kind: str, where: str = "--filter") -> Any:
    """The value of a literal operand beside an operand of ``kind``: an int or float, a
    string, an aware datetime (beside ``time``), a date (beside ``date``), a bool, or None.

    Raises
    ------
    ConfigError
        When ``node`` is not a literal of that kind (a string that is not an instant).

    Examples
    --------
    >>> import sqlglot
    >>> literal_value(sqlglot.parse_one("'1995-07-09T04:00:00-04:00'"), "time").isoformat()
    '1995-07-09T08:00:00+00:00'
    >>> literal_value(sqlglot.parse_one("-3"), "number")
    -3
    """
    if isinstance(node, exp.Paren):
        return literal_value(node.this, kind, where)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and kind == "number":
        return -literal_value(node.this, kind, where)
    if isinstance(node, exp.Boolean) and kind == "bool":
        return bool(node.this)
    if not isinstance(node, exp.Literal):
        raise _refuse(where, f"{_shown(node)} where a literal belongs")
    if not node.is_string:
        if kind != "number":
            raise ConfigError(f"{where}: the number {node.this} is compared with {kind}")
        text = node.this
        return float(text) if any(c in text for c in ".eE") else int(text)
    return _string_value(str(node.this), kind, where)


def _string_value(text: str, kind: str, where: str) -> Any:
    if kind == "time":
        try:  # as Spark casts it: ISO 8601, UTC without an offset
            return iso_instant(text)
        except ValueError:
            raise ConfigError(
                f"{where}: {text!r} beside event_time is not an instant: write one in ISO "
                "8601, e.g. '2015-05-18T10:00:00Z'"
            ) from None
    if kind == "date":
        try:
            return date.fromisoformat(text.strip())
        except ValueError:
            raise ConfigError(
                f"{where}: {text!r} beside a date is not a day: write e.g. '2015-05-18'"
            ) from None
    if kind != "text":
        raise ConfigError(f"{where}: the text {text!r} is compared with {kind}")
    return text


def is_literal(node: exp.Expression) -> bool:
    """Whether ``node`` is a literal (a string, a number, ``-`` a number, a boolean, NULL)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Neg):
        node = node.this
    return isinstance(node, exp.Literal | exp.Null | exp.Boolean)


def _comparable(left: exp.Expression, right: exp.Expression, where: str) -> str:
    """The kind two operands are compared as; refuses two kinds that differ."""
    kinds = [kind_of(side, where) if not is_literal(side) else None for side in (left, right)]
    if kinds[0] is None and kinds[1] is None:  # two literals: each its own kind
        kinds = [kind_of(left, where), kind_of(right, where)]
    known = next((k for k in kinds if k not in (None, "null")), "null")
    for side, kind in zip((left, right), kinds, strict=True):
        if kind is None:
            literal_value(side, known, where)  # raises for a literal of another kind
        elif kind not in (known, "null"):
            raise ConfigError(
                f"{where}: {_shown(left)} ({kinds[0] or 'literal'}) and {_shown(right)} "
                f"({kinds[1] or 'literal'}) are of different kinds: compare like with like"
            )
    return known


def _want(node: exp.Expression, kind: str, where: str, role: str) -> None:
    got = kind_of(node, where)
    if got not in (kind, "null"):
        raise ConfigError(f"{where}: {role} takes {kind}, not {_shown(node)} ({got})")


def _want_literal(node: exp.Expression | None, kind: str, where: str, role: str) -> Any:
    if node is None or not is_literal(node):
        raise ConfigError(f"{where}: {role} takes a literal {kind}")
    value = literal_value(node, kind, where)
    if kind == "number" and not isinstance(value, int):
        raise ConfigError(f"{where}: {role} takes a whole number")
    return value


def kind_of(node: exp.Expression, where: str = "--filter") -> str:
    """The kind of ``node``'s value (``text``, ``number``, ``time``, ``date``, ``bool``,
    ``null``), its operands checked against the allowlist on the way.

    Raises
    ------
    ConfigError
        For a construct outside the allowlist, or an operand of the wrong kind.
    """
    if isinstance(node, exp.Paren):
        return kind_of(node.this, where)
    if isinstance(node, exp.Connector) and type(node) in (exp.And, exp.Or):
        for part in node.flatten():
            _want(part, "bool", where, type(node).__name__.upper())
        return "bool"
    if type(node) is exp.Not:
        _want(node.this, "bool", where, "NOT")
        return "bool"
    if type(node) in _COMPARISONS:
        _comparable(node.left, node.right, where)
        return "bool"
    leaf = _leaf_kind(node, where)
    if leaf is not None:
        return leaf
    return _predicate_kind(node, where) or _function_kind(node, where)


def _leaf_kind(node: exp.Expression, where: str) -> str | None:
    if type(node) is exp.Column:
        if node.meta.get(KIND) is None:  # not resolved by check_expression: never allowed
            raise _refuse(where, f"the column {node.sql(dialect='spark')!r}")
        return str(node.meta[KIND])
    if type(node) is exp.Null:
        return "null"
    if type(node) is exp.Boolean:
        return "bool"
    if type(node) is exp.Literal:
        return "text" if node.is_string else "number"
    if type(node) is exp.Neg and type(node.this) is exp.Literal and not node.this.is_string:
        return "number"
    return None


def _predicate_kind(node: exp.Expression, where: str) -> str | None:
    if type(node) in (exp.Like, exp.ILike, exp.RegexpLike):
        _want(node.this, "text", where, type(node).__name__.upper().replace("REGEXP", "R"))
        if not (isinstance(node.expression, exp.Literal) and node.expression.is_string):
            raise ConfigError(f"{where}: a LIKE or RLIKE pattern is a literal text")
        return "bool"
    if type(node) is exp.In:
        if any(node.args.get(k) for k in ("query", "unnest", "field")):
            raise _refuse(where, "a query or subquery")
        items = node.expressions
        if len(items) > MAX_IN_ITEMS:
            raise ConfigError(
                f"{where}: IN lists {len(items):,} items, more than a filter may "
                f"({MAX_IN_ITEMS:,}): shorten it, or match them with LIKE or RLIKE"
            )
        kind = kind_of(node.this, where)
        for item in items:
            if not is_literal(item):
                raise _refuse(where, f"{_shown(item)} in an IN list (literals only)")
            literal_value(item, kind, where)
        return "bool"
    if type(node) is exp.Between:
        _comparable(node.this, node.args["low"], where)
        _comparable(node.this, node.args["high"], where)
        return "bool"
    if type(node) is exp.Is:
        if type(node.expression) is not exp.Null:
            raise _refuse(where, f"IS {node.expression.sql(dialect='spark')}")
        kind_of(node.this, where)
        return "bool"
    return None


def _function_kind(node: exp.Expression, where: str) -> str:
    name = type(node)
    if name in _TEXT_UNARY:
        _want(node.this, "text", where, f"{node.sql_name().lower()}()")
        return _TEXT_UNARY[name]
    if name is exp.Trim:
        if node.args.get("expression") is not None or node.args.get("collation") is not None:
            raise _refuse(where, "trim() of other characters than spaces")
        _want(node.this, "text", where, "trim()")
        return "text"
    if name is exp.Substring:
        _want(node.this, "text", where, "substring()")
        _want_literal(node.args.get("start"), "number", where, "substring()'s position")
        if node.args.get("length") is not None:
            _want_literal(node.args["length"], "number", where, "substring()'s length")
        return "text"
    if name in (exp.Left, exp.Right):
        _want(node.this, "text", where, f"{node.sql_name().lower()}()")
        _want_literal(node.expression, "number", where, f"{node.sql_name().lower()}()'s length")
        return "text"
    if name in _TEXT_MATCH:
        _want(node.this, "text", where, f"{node.sql_name().lower()}()")
        _want_literal(node.expression, "text", where, f"{node.sql_name().lower()}()'s pattern")
        return "bool"
    if name is exp.Concat:
        for part in node.expressions:
            _want(part, "text", where, "concat()")
        return "text"
    if name is exp.Coalesce:
        parts = [node.this, *node.expressions]
        return next(
            (k for k in (_comparable(parts[0], p, where) for p in parts[1:]) if k != "null"),
            kind_of(parts[0], where),
        )
    return _date_kind(node, where)


def _date_kind(node: exp.Expression, where: str) -> str:
    name = type(node)
    if name in _DATE_PARTS:
        kind = kind_of(node.this, where)
        if kind not in ("date", "time"):
            raise ConfigError(f"{where}: {node.sql_name().lower()}() takes event_time")
        return "number"
    if name in _TIME_PARTS:
        _want(node.this, "time", where, f"{node.sql_name().lower()}()")
        return "number"
    # date(event_time) is a cast, rendered CAST(… AS DATE), which sqlglot reads back as a
    # TryCast: a timestamp always has a date, so neither can fail
    if name is exp.TsOrDsToDate or (
        name in (exp.Cast, exp.TryCast) and node.to.is_type(exp.DataType.Type.DATE)
    ):
        if name is exp.TsOrDsToDate and node.args.get("format") is not None:
            raise _refuse(where, "to_date() with a format")
        if kind_of(node.this, where) not in ("date", "time"):
            raise ConfigError(f"{where}: to_date() takes event_time")
        return "date"
    raise _refuse(where, _shown(node))
