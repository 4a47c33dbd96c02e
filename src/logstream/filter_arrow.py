"""A checked ``--filter`` expression as an Arrow expression, for the dashboard's Parquet scans.

The dashboard runs no Spark, so it evaluates the tree that :func:`logstream.filters.
check_expression` checked (sqlglot's) with Arrow's compute kernels, every construct of the
allowlist (:mod:`logstream.filter_allowlist`) as Spark evaluates it: comparisons, ``AND``,
``OR``, ``NOT`` (Kleene logic), ``LIKE`` and ``ILIKE`` (``match_like``), ``RLIKE``
(``match_substring_regex``, RE2's syntax: Java's common subset, in linear time), ``IN``
(``is_in`` over the set of its items: one kernel, not an equality per item), ``BETWEEN``,
``IS NULL``, the string functions (Spark's ``trim`` removes spaces only, ``substring``
counts from 1, a negative position from the end), the date functions of ``event_time`` in
UTC (``dayofweek``: 1 is Sunday) and ``coalesce``. A string beside ``event_time`` is an
instant, beside a date a day. A null operand makes a comparison null, and a null condition
drops the row, as in Spark's ``WHERE``.

An ``AND`` or ``OR`` chain becomes a balanced tree of Arrow expressions: a chain of a
thousand terms is ten levels deep, not a thousand (Arrow's C++ recurses once per level, and a
chain ten thousand deep overflowed its stack).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from logstream.errors import ConfigError
from logstream.filter_allowlist import is_literal, kind_of, literal_value
from logstream.filters import EventFilter, check_expression

__all__ = ["arrow_expression", "to_arrow"]

_COMPARISONS = {
    exp.EQ: lambda a, b: a == b,
    exp.NEQ: lambda a, b: a != b,
    exp.GT: lambda a, b: a > b,
    exp.GTE: lambda a, b: a >= b,
    exp.LT: lambda a, b: a < b,
    exp.LTE: lambda a, b: a <= b,
}
#: Arrow's type of a literal's value beside an operand of each kind.
_TYPES = {
    "text": pa.string(),
    "time": pa.timestamp("us", "UTC"),
    "date": pa.date32(),
    "bool": pa.bool_(),
}
_NULL = pc.scalar(pa.scalar(None, pa.bool_()))
_DATE_PARTS: dict[type, Callable[[Any], Any]] = {
    exp.Year: pc.year,
    exp.Month: pc.month,
    exp.Day: pc.day,
    exp.DayOfMonth: pc.day,
    exp.DayOfWeek: lambda x: pc.day_of_week(x, count_from_zero=False, week_start=7),
    exp.Hour: pc.hour,
    exp.Minute: pc.minute,
    exp.Second: pc.second,
}


def arrow_expression(flt: EventFilter) -> Any:
    """``flt``'s time range and expressions as one ``pyarrow.compute.Expression`` over the
    event columns, for a Parquet scan (``--grep`` needs the raw line, which the events do
    not keep: it is refused here).

    Raises
    ------
    ConfigError
        For ``--grep``.
    """
    if flt.greps:
        raise ConfigError("grep needs the raw line, which the events do not keep")
    condition = pc.scalar(True)
    if flt.since is not None:
        condition = condition & (pc.field("event_time") >= pa.scalar(flt.since))
    if flt.until is not None:
        condition = condition & (pc.field("event_time") < pa.scalar(flt.until))
    for expression in flt.expressions:
        condition = condition & to_arrow(check_expression(expression, rendered=True))
    return condition


def to_arrow(tree: exp.Expression) -> Any:
    """``tree`` (an expression :func:`~logstream.filters.check_expression` returned) as a
    ``pyarrow.compute.Expression``.

    Examples
    --------
    >>> from logstream.filters import check_expression
    >>> table = pa.table({"status": [200, 503, 404], "url_path": ["/a", "/api/x", None]})
    >>> keep = to_arrow(check_expression("status >= 500 OR url_path LIKE '/a%'"))
    >>> table.filter(keep)["status"].to_pylist()
    [200, 503]
    """
    return _node(tree)


def _balanced(terms: list[Any], join: Callable[[Any, Any], Any]) -> Any:
    """``terms`` joined pairwise, level by level: a tree of depth log2(n)."""
    while len(terms) > 1:
        pairs = [join(terms[i], terms[i + 1]) for i in range(0, len(terms) - 1, 2)]
        terms = pairs + ([terms[-1]] if len(terms) % 2 else [])
    return terms[0]


def _node(node: exp.Expression) -> Any:
    """The Arrow expression of ``node`` (allowed and kind-checked already)."""
    kind = type(node)
    if kind is exp.Paren:
        return _node(node.this)
    if kind is exp.And:
        return _balanced([_node(n) for n in node.flatten()], lambda a, b: a & b)
    if kind is exp.Or:
        return _balanced([_node(n) for n in node.flatten()], lambda a, b: a | b)
    if kind is exp.Not:
        return ~_node(node.this)
    if kind in _COMPARISONS:
        return _COMPARISONS[kind](*_operands(node.left, node.right))
    if kind is exp.Column:
        return pc.field(node.name)
    if kind in (exp.Literal, exp.Boolean, exp.Null, exp.Neg):
        return _literal(node, kind_of(node))
    if kind in (exp.Like, exp.ILike):
        pattern = str(node.expression.this)
        return pc.match_like(_node(node.this), pattern=pattern, ignore_case=kind is exp.ILike)
    if kind is exp.RegexpLike:
        return pc.match_substring_regex(_node(node.this), pattern=str(node.expression.this))
    if kind is exp.In:
        return _in(node)
    if kind is exp.Between:
        value, low = _operands(node.this, node.args["low"])
        _, high = _operands(node.this, node.args["high"])
        return (value >= low) & (value <= high)
    if kind is exp.Is:  # IS NULL: the allowlist takes no other IS
        return _node(node.this).is_null()
    return _function(node)


def _operands(left: exp.Expression, right: exp.Expression) -> tuple[Any, Any]:
    """Two compared operands, a literal read as the kind of the other (a string beside
    ``event_time`` is an instant)."""
    sides = (left, right)
    kinds = [kind_of(side) for side in sides]
    kind = next((k for s, k in zip(sides, kinds, strict=True) if not is_literal(s)), None)
    return tuple(  # type: ignore[return-value]
        _literal(s, kind or k) if is_literal(s) else _node(s)
        for s, k in zip(sides, kinds, strict=True)
    )


def _literal(node: exp.Expression, kind: str) -> Any:
    """A literal as an Arrow scalar expression of ``kind``."""
    value = literal_value(node, kind)
    if value is None:
        return _NULL if kind in ("bool", "null") else pc.scalar(pa.scalar(None, _TYPES[kind]))
    if kind in _TYPES:
        return pc.scalar(pa.scalar(value, _TYPES[kind]))
    return pc.scalar(value)


def _in(node: exp.In) -> Any:
    """``value IN (items)``: ``is_in`` over the set of the items. As in Spark, a null value
    gives null, and so does a value matching no item of a list holding NULL."""
    kind = kind_of(node.this)
    values = [literal_value(item, kind) for item in node.expressions]
    value = _node(node.this)
    present = [v for v in values if v is not None]
    if kind == "number":
        floats = any(isinstance(v, float) for v in present)
        items = pa.array(present, pa.float64() if floats else pa.int64())
    else:
        items = pa.array(present, _TYPES.get(kind, pa.string()))
    found = pc.is_in(value, value_set=items) if present else pc.scalar(False)
    if len(present) < len(values):  # NULL in the list: no match is unknown, not false
        found = pc.if_else(found, pc.scalar(True), _NULL)
    return pc.if_else(value.is_valid(), found, _NULL)


def _slice(value: Any, start: int, length: int | None) -> Any:
    """Spark's ``substring(value, start, length)``: ``start`` counts from 1 (0 is 1), a
    negative one from the end; a length below 1 gives ''."""
    if length is not None and length < 1:
        return pc.utf8_slice_codeunits(value, start=0, stop=0)
    if start > 0:
        begin = start - 1
    elif start == 0:
        begin = 0
    else:
        begin = start
    if length is None:
        return pc.utf8_slice_codeunits(value, start=begin)
    end = begin + length
    if begin < 0 <= end:  # past the end: to the end
        return pc.utf8_slice_codeunits(value, start=begin)
    return pc.utf8_slice_codeunits(value, start=begin, stop=end)


def _function(node: exp.Expression) -> Any:
    """A function of the allowlist (its arguments checked already)."""
    kind = type(node)
    if kind is exp.Lower:
        return pc.utf8_lower(_node(node.this))
    if kind is exp.Upper:
        return pc.utf8_upper(_node(node.this))
    if kind is exp.Length:
        return pc.utf8_length(_node(node.this))
    if kind is exp.Trim:
        trim = {"LEADING": pc.utf8_ltrim, "TRAILING": pc.utf8_rtrim}.get(
            str(node.args.get("position") or "").upper(), pc.utf8_trim
        )
        return trim(_node(node.this), characters=" ")
    if kind is exp.Substring:
        length = node.args.get("length")
        return _slice(
            _node(node.this),
            literal_value(node.args["start"], "number"),
            None if length is None else literal_value(length, "number"),
        )
    if kind in (exp.Left, exp.Right):
        n = literal_value(node.expression, "number")
        return _slice(_node(node.this), 1 if kind is exp.Left else -n, n)
    if kind is exp.StartsWith:
        return pc.starts_with(_node(node.this), pattern=str(node.expression.this))
    if kind is exp.EndsWith:
        return pc.ends_with(_node(node.this), pattern=str(node.expression.this))
    if kind is exp.Contains:
        return pc.match_substring(_node(node.this), pattern=str(node.expression.this))
    if kind is exp.Concat:
        return pc.binary_join_element_wise(*[_node(n) for n in node.expressions], "")
    if kind is exp.Coalesce:
        parts = [node.this, *node.expressions]
        known = next((kind_of(p) for p in parts if not is_literal(p)), kind_of(parts[0]))
        return pc.coalesce(*[_literal(p, known) if is_literal(p) else _node(p) for p in parts])
    if kind in _DATE_PARTS:
        return _DATE_PARTS[kind](_node(node.this))
    if kind in (exp.TsOrDsToDate, exp.Cast, exp.TryCast):
        return _node(node.this).cast(pa.date32())
    raise ConfigError(  # the allowlist refused it before: a construct added there only
        f"the dashboard cannot evaluate {node.sql(dialect='spark')!r} over the events"
    )
