"""Stateless rule alerts over parsed events: server errors, scanner probes, auth failures.

Every rule is one native boolean expression over one event, so the alert stream is a plain
projection and filter of the parsed lines (under micro-batch triggers behind the parser's
one-element ``inline``, :func:`logstream.parsing.fenced`): it runs under every trigger,
including the continuous trigger, which accepts only map-like operators (Spark guide,
"Continuous Processing": projections and selections; no aggregation, join, union, generator
or current-time function). The book introduces the same split between per-record signals
and the stateful counts built on them ("Stream Processing with Apache Spark", Ch. 15
"Continuous Processing" for the trigger).

Rules
-----
================  =====================================================================
rule              an event is flagged when
================  =====================================================================
``scanner``       its request path and query, or its ``User-Agent``, match
                  :data:`SCANNER_PATTERN` (case-insensitive): probes for WordPress, PHP
                  admin tools, dot-files, path traversal, shell-injection and known
                  scanning tools
``auth_failure``  its status is 401 (authentication required or refused) or 403
                  (forbidden)
``server_error``  its status is 500-599
``unparseable``   the line does not parse in the given format (:func:`alert_stream`
                  passes the quarantine reason; ``reason`` says which), empty lines aside
================  =====================================================================

One alert row per flagged line: ``rule`` is ``unparseable`` for a line that did not parse,
else the first matching rule in the order above (most specific first); ``rules`` lists all of
them. A *burst* of server errors is a count over these per-line signals, done by the
consumer (or by a windowed count in micro-batch mode): the continuous trigger allows no
aggregation.

Signatures left out on purpose: a bare ``/cgi-bin/`` prefix (NASA's 1995 server answered
``/cgi-bin/imagemap/countdown`` to visitors; 78 of the first 2,000 July lines would be false
alarms); only named CGI probes (``/cgi-bin/php``, ``test-cgi``, ``printenv``) count.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "ALERT_COLUMNS",
    "RULES",
    "SCANNER_PATTERN",
    "SCANNER_SIGNATURES",
    "UNPARSEABLE",
    "match_rules",
    "rule_alerts",
    "rule_conditions",
]

#: Scanner signatures (regular expressions, valid in Java and Python), matched
#: case-insensitively against ``url_path?query_string`` and against ``user_agent``.
SCANNER_SIGNATURES: tuple[str, ...] = (
    r"/wp-login\.php",
    r"/wp-admin",
    r"/xmlrpc\.php",
    r"/\.env",
    r"/\.git/",
    r"phpmyadmin",
    r"/etc/passwd",
    r"\.\./",
    r"%2e%2e%2f",
    r"/cgi-bin/(?:php|test-cgi|printenv)",
    r"/manager/html",
    r"\(\) \{",  # Shellshock
    r"w00tw00t",
    r"sqlmap",
    r"nikto",
    r"masscan",
    r"zgrab",
    r"nmap",
    r"acunetix",
)
#: One case-insensitive alternation of :data:`SCANNER_SIGNATURES` (Java ``regexp`` syntax).
SCANNER_PATTERN = "(?i)(?:" + "|".join(SCANNER_SIGNATURES) + ")"

#: Rule names, most specific first (the order ``rule`` is chosen in).
RULES: tuple[str, ...] = ("scanner", "auth_failure", "server_error")
#: The ``rule`` of a line that could not be parsed (its ``reason`` says why).
UNPARSEABLE = "unparseable"

#: Columns of :func:`rule_alerts`, in order.
ALERT_COLUMNS: tuple[str, ...] = (
    "rule",
    "rules",
    "event_time",
    "client_host",
    "method",
    "url_path",
    "status",
    "user_agent",
    "raw_line",
    "received_at",
    "detected_at",
    "reason",
)


def rule_conditions() -> dict[str, Column]:
    """The boolean expression of each rule over the event columns.

    Returns
    -------
    dict of str to Column
        Keyed by :data:`RULES`, in order. Null-safe: an absent ``user_agent`` or
        ``query_string`` never makes a rule null.
    """
    target = F.concat_ws("?", F.col("url_path"), F.col("query_string"))
    agent = F.coalesce(F.col("user_agent"), F.lit(""))
    status = F.col("status")
    return {
        "scanner": target.rlike(SCANNER_PATTERN) | agent.rlike(SCANNER_PATTERN),
        "auth_failure": status.isin(401, 403),
        "server_error": status.between(500, 599),
    }


def match_rules(
    url_path: str | None, query_string: str | None, user_agent: str | None, status: int
) -> list[str]:
    """The rules one event matches, in :data:`RULES` order: the same rules in plain Python.

    For tests and for consumers that re-check an alert.

    Examples
    --------
    >>> match_rules("/wp-login.php", None, None, 404)
    ['scanner']
    >>> match_rules("/secret", None, "sqlmap/1.0", 403)
    ['scanner', 'auth_failure']
    """
    rx = re.compile(SCANNER_PATTERN)
    target = "?".join(p for p in (url_path, query_string) if p is not None)
    found = []
    if rx.search(target) or rx.search(user_agent or ""):
        found.append("scanner")
    if status in (401, 403):
        found.append("auth_failure")
    if 500 <= status <= 599:
        found.append("server_error")
    return found


def rule_alerts(
    events: DataFrame,
    *,
    received_at: Column | None = None,
    detected_at: bool = True,
    reason: Column | None = None,
) -> DataFrame:
    """Flag events by the rules of :data:`RULES`; stateless, so any trigger can run it.

    Parameters
    ----------
    events : DataFrame
        Batch or streaming; the parsed event columns ``event_time``, ``client_host``,
        ``method``, ``url_path``, ``query_string``, ``status``, ``user_agent`` (see
        :data:`logstream.schema.EVENT_SCHEMA`) and ``raw_line``.
    received_at : Column, optional
        When the line was made or received (the socket source's receive time, the rate
        source's ``generated_at``); null when not given.
    detected_at : bool, default True
        Stamp ``detected_at`` with ``current_timestamp()`` (in micro-batch mode: the
        micro-batch's start time). Must be False under the continuous trigger, which refuses
        current-time functions; the column is then null and the sink stamps delivery itself.
    reason : Column, optional
        Why a line could not be parsed (the quarantine reason of
        :func:`logstream.parsing.parse`), null for a parsed event. A row with a reason is an
        alert of rule :data:`UNPARSEABLE` (its ``rules`` then also name the rules its parsed
        fields match: a probe with a bad status is still a ``scanner``), so no line is
        dropped unseen; an empty line (``empty_line``) carries nothing and is no alert.
        Without ``reason`` every row is taken as an event.

    Returns
    -------
    DataFrame
        One row per flagged event, :data:`ALERT_COLUMNS`: ``rule`` (string), ``rules``
        (array of string), ``event_time`` (timestamp, UTC), ``client_host``, ``method``,
        ``url_path`` (strings), ``status`` (int), ``user_agent`` (string, null for Common Log
        Format), ``raw_line`` (string), ``received_at`` and ``detected_at`` (timestamps,
        nullable), ``reason`` (string: a key of :data:`logstream.schema.QUARANTINE_REASONS`
        for an :data:`UNPARSEABLE` line, else null).

    Notes
    -----
    Only ``Project`` and ``Filter`` operators: no aggregation, generator (``explode``) or
    union, hence one row per line and not one per (line, rule).
    """
    conditions = rule_conditions()
    rules = F.array_compact(
        F.array(*[F.when(cond, F.lit(name)) for name, cond in conditions.items()])
    )
    why = F.lit(None).cast("string")
    if reason is not None:  # first, then whatever the fields that did parse still flag
        why = reason
        rules = (
            F.when(reason.isNull(), rules)
            .when(reason == F.lit("empty_line"), F.array().cast("array<string>"))
            .otherwise(F.concat(F.array(F.lit(UNPARSEABLE)), rules))
        )
    flagged = events.select(
        "*",
        rules.alias("rules"),
        (received_at if received_at is not None else F.lit(None))
        .cast("timestamp")
        .alias("received_at"),
        why.alias("_reason"),
    ).where(F.size("rules") > 0)
    computed = {
        "rule": F.get(F.col("rules"), 0),
        "reason": F.col("_reason"),
        "detected_at": F.current_timestamp() if detected_at else F.lit(None).cast("timestamp"),
    }
    return flagged.select(
        *(computed[c].alias(c) if c in computed else F.col(c) for c in ALERT_COLUMNS)
    )
