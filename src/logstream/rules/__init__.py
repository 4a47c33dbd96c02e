"""Rule alerts: stateless per-line signals (scanner probes, auth failures, server errors) that
run under every trigger, continuous included. See ``docs/triggers.md``."""

from logstream.rules.catalog import (
    ALERT_COLUMNS,
    RULES,
    SCANNER_PATTERN,
    SCANNER_SIGNATURES,
    UNPARSEABLE,
    match_rules,
    rule_alerts,
    rule_conditions,
)
from logstream.rules.stream import alert_stream

__all__ = [
    "ALERT_COLUMNS",
    "RULES",
    "SCANNER_PATTERN",
    "SCANNER_SIGNATURES",
    "UNPARSEABLE",
    "alert_stream",
    "match_rules",
    "rule_alerts",
    "rule_conditions",
]
