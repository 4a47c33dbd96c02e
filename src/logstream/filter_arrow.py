"""A checked ``--filter`` expression as an Arrow expression, for the dashboard's Parquet scans.

The dashboard runs no Spark, so it evaluates the tree that :func:`logstream.filters.
check_expression` checked (sqlglot's) with Arrow's compute kernels: comparisons, ``AND``,
``OR``, ``NOT``, ``LIKE`` and ``ILIKE`` (``match_like``), ``RLIKE`` (``match_substring_regex``,
RE2's syntax: Java's common subset), ``IN``, ``BETWEEN``, ``IS [NOT] NULL``, ``lower`` and
``upper``, string, number, boolean and ``NULL`` literals; a string compared with
``event_time`` is read as an instant (:func:`logstream.filters.parse_instant`). A null
operand makes a comparison null, and a null condition drops the row, as in Spark's ``WHERE``.
Any other construct (another function, arithmetic) is refused with a message: ``logstream
batch`` and ``logstream run`` take it, since Spark evaluates it there.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from logstream.errors import ConfigError
from logstream.filters import FILTER_COLUMNS, EventFilter, check_expression, parse_instant

__all__ = ["arrow_expression", "to_arrow"]

_COMPARISONS = {
    exp.EQ: lambda a, b: a == b,
    exp.NEQ: lambda a, b: a != b,
    exp.GT: lambda a, b: a > b,
    exp.GTE: lambda a, b: a >= b,
    exp.LT: lambda a, b: a < b,
    exp.LTE: lambda a, b: a <= b,
}


def arrow_expression(flt: EventFilter) -> Any:
    """``flt``'s time range and expressions as one ``pyarrow.compute.Expression`` over the
    event columns, for a Parquet scan (``--grep`` needs the raw line, which the events do
    not keep: it is refused here).

    Raises
    ------
    ConfigError
        For ``--grep``, or an expression with a construct :func:`to_arrow` lacks.
    """
    if flt.greps:
        raise ConfigError("grep needs the raw line, which the events do not keep")
    condition = pc.scalar(True)
    if flt.since is not None:
        condition = condition & (pc.field("event_time") >= pa.scalar(flt.since))
    if flt.until is not None:
        condition = condition & (pc.field("event_time") < pa.scalar(flt.until))
    for expression in flt.expressions:
        condition = condition & to_arrow(check_expression(expression))
    return condition


def to_arrow(tree: exp.Expression) -> Any:
    """``tree`` (a checked filter expression) as a ``pyarrow.compute.Expression``.

    Raises
    ------
    ConfigError
        For a construct outside the list of the module's docstring.

    Examples
    --------
    >>> from logstream.filters import check_expression
    >>> table = pa.table({"status": [200, 503, 404], "url_path": ["/a", "/api/x", None]})
    >>> keep = to_arrow(check_expression("status >= 500 OR url_path LIKE '/a%'"))
    >>> table.filter(keep)["status"].to_pylist()
    [200, 503]
    """
    return _node(tree, None)


def _time_column(node: exp.Expression) -> bool:
    return isinstance(node, exp.Column) and FILTER_COLUMNS.get(node.name) == "time"


def _node(node: exp.Expression, other: exp.Expression | None) -> Any:
    """The Arrow expression of ``node``; ``other`` is the operand it is compared with (a
    string compared with a time column is an instant)."""
    if isinstance(node, exp.Paren):
        return _node(node.this, other)
    if isinstance(node, exp.And):
        return _node(node.left, None) & _node(node.right, None)
    if isinstance(node, exp.Or):
        return _node(node.left, None) | _node(node.right, None)
    if isinstance(node, exp.Not):
        return ~_node(node.this, None)
    if isinstance(node, tuple(_COMPARISONS)):
        left, right = _node(node.left, node.right), _node(node.right, node.left)
        return _COMPARISONS[type(node)](left, right)
    if isinstance(node, exp.Column):
        return pc.field(node.name)
    if isinstance(node, exp.Literal | exp.Boolean | exp.Null):
        return _literal(node, other)
    if isinstance(node, exp.Like | exp.ILike):
        pattern = _string(node.expression)
        return pc.match_like(
            _node(node.this, None), pattern=pattern, ignore_case=isinstance(node, exp.ILike)
        )
    if isinstance(node, exp.RegexpLike):
        return pc.match_substring_regex(_node(node.this, None), pattern=_string(node.expression))
    if isinstance(node, exp.In) and not node.args.get("query"):
        return _in(_node(node.this, None), node.this, node.expressions)
    if isinstance(node, exp.Between):
        value = _node(node.this, None)
        low, high = node.args["low"], node.args["high"]
        return (value >= _node(low, node.this)) & (value <= _node(high, node.this))
    if isinstance(node, exp.Is):
        if isinstance(node.expression, exp.Null):
            return _node(node.this, None).is_null()
        raise _unsupported(node)
    if isinstance(node, exp.Lower):
        return pc.utf8_lower(_node(node.this, None))
    if isinstance(node, exp.Upper):
        return pc.utf8_upper(_node(node.this, None))
    raise _unsupported(node)


def _in(value: Any, column: exp.Expression, items: list[exp.Expression]) -> Any:
    """``value IN (items)``: one equality per item, ORed (a null item matches nothing)."""
    out = None
    for item in items:
        term = value == _node(item, column)
        out = term if out is None else out | term
    return out if out is not None else pc.scalar(False)


def _literal(node: exp.Expression, other: exp.Expression | None) -> Any:
    """A literal as an Arrow scalar expression (an instant when compared with a time)."""
    if isinstance(node, exp.Null):
        return pc.scalar(None)
    if isinstance(node, exp.Boolean):
        return pc.scalar(bool(node.this))
    assert isinstance(node, exp.Literal)
    if node.is_string:
        if other is not None and _time_column(other):
            instant = parse_instant(node.this, "--filter")
            return pc.scalar(pa.scalar(instant, pa.timestamp("us", "UTC")))
        return pc.scalar(node.this)
    number = float(node.this) if any(c in node.this for c in ".eE") else int(node.this)
    return pc.scalar(number)


def _string(node: exp.Expression) -> str:
    if isinstance(node, exp.Literal) and node.is_string:
        return str(node.this)
    raise _unsupported(node)


def _unsupported(node: exp.Expression) -> ConfigError:
    return ConfigError(
        f"the dashboard cannot evaluate {node.sql(dialect='spark')!r} over the events: it "
        "takes comparisons, AND, OR, NOT, LIKE, ILIKE, RLIKE, IN, BETWEEN, IS NULL, lower() "
        "and upper() (logstream batch and run take any Spark SQL)"
    )
