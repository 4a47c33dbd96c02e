"""Parsing: log lines → canonical events (:mod:`logstream.schema`) + quarantine."""

from logstream.parsing.detect import check_format, detect_format, resolve_format
from logstream.parsing.logformat import (
    COMBINED,
    COMMON,
    NAMED_FORMATS,
    CompiledFormat,
    compile_format,
)
from logstream.parsing.parser import REASON_COLUMN, events, fenced, parse, quarantine

__all__ = [
    "COMBINED",
    "COMMON",
    "NAMED_FORMATS",
    "REASON_COLUMN",
    "CompiledFormat",
    "check_format",
    "compile_format",
    "detect_format",
    "events",
    "fenced",
    "parse",
    "quarantine",
    "resolve_format",
]
