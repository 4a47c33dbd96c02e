"""Reports: the batch report's data and its renderings (terminal, JSON, HTML)."""

from logstream.report.batch import REPORT_KEYS, build_report
from logstream.report.html import render_html
from logstream.report.terminal import render_terminal

__all__ = ["REPORT_KEYS", "build_report", "render_html", "render_terminal"]
