"""The LogFormat compiler, checked with Python's ``re`` (the same pattern Spark runs)."""

from __future__ import annotations

import pytest

from logstream.errors import LogFormatError
from logstream.parsing import compile_format, detect_format

NASA_QUIRK = (
    "bos1d.delphi.com - - [09/Jul/1995:00:11:29 -0400] "
    '"GET /ksc.html   NASA/Kennedy Space Center Home Page HTTP/1.0" 200 7067'
)


def groups(fmt_name: str, line: str) -> dict[str, str | None]:
    fmt = compile_format(fmt_name)
    match = fmt.python_regex.match(line)
    assert match, f"{fmt_name} did not match {line!r}"
    return dict(zip(fmt.fields, match.groups(), strict=True))


def test_request_with_spaces_keeps_the_first_word_as_the_path():
    g = groups("common", NASA_QUIRK)
    assert (g["method"], g["url_path"], g["protocol"]) == ("GET", "/ksc.html", "HTTP/1.0")


def test_request_without_protocol_parses():
    g = groups("common", 'h - - [09/Jul/1995:00:00:01 -0400] "GET /" 200 -')
    assert (g["method"], g["url_path"], g["protocol"], g["bytes_sent"]) == ("GET", "/", None, "-")


def test_request_dash_leaves_method_and_path_empty():
    g = groups("common", 'h - - [09/Jul/1995:00:00:01 -0400] "-" 408 -')
    assert g["method"] is None and g["url_path"] is None and g["status"] == "408"


def test_query_string_is_split_from_the_path():
    g = groups("common", 'h - - [09/Jul/1995:00:00:01 -0400] "GET /a/b.cgi?x=1&y=2 HTTP/1.1" 200 5')
    assert (g["url_path"], g["query_string"]) == ("/a/b.cgi", "x=1&y=2")


def test_escaped_quotes_stay_inside_a_quoted_field():
    line = (
        'h - - [09/Jul/1995:00:00:01 -0400] "GET /q?s=\\"x\\" HTTP/1.1" 200 5 '
        '"http://r/?a=\\"b\\"" "Agent \\"quoted\\" (X)"'
    )
    g = groups("combined", line)
    assert g["referrer"] == 'http://r/?a=\\"b\\"'
    assert g["user_agent"] == 'Agent \\"quoted\\" (X)'


def test_truncated_user_agent_is_kept_as_written():
    line = (
        '46.118.127.106 - - [20/May/2015:12:05:17 +0000] "GET /x.py HTTP/1.1" 200 235 "-" '
        '"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html'
    )
    assert groups("combined", line)["user_agent"].endswith("google.com/bot.html")


def test_trailing_carriage_return_is_ignored():
    g = groups("common", 'h - - [07/Mar/2004:16:05:49 -0800] "GET / HTTP/1.1" 401 12846\r')
    assert g["bytes_sent"] == "12846"


def test_response_time_directives_are_captured():
    fmt = compile_format('%h %l %u %t "%r" %>s %b %D')
    assert fmt.fields[-1] == "response_time_us"
    fmt = compile_format('%h %l %u %t "%r" %>s %b %T')
    assert fmt.fields[-1] == "response_time_s"


def test_nginx_log_format_is_translated():
    fmt = compile_format(
        '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
        '"$http_referer" "$http_user_agent" $request_time'
    )
    line = '10.0.0.1 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 5 "-" "curl/8" 0.125'
    match = fmt.python_regex.match(line)
    assert (
        match
        and dict(zip(fmt.fields, match.groups(), strict=True))["response_time_s_frac"] == "0.125"
    )


def test_custom_strftime_time_and_separators():
    fmt = compile_format("%{%Y-%m-%d %I:%M%p}t|&|%u|&|%{p}n|&|%U%q|&|%>s|&|%b")
    assert fmt.time_pattern == "yyyy-MM-dd hh:mma"
    line = "2015-02-15 05:11AM|&|0b3a|&|ASTGTM|&|/opendap/x.nc.dods?crs,lat|&|200|&|57752"
    match = fmt.python_regex.match(line)
    assert match
    assert dict(zip(fmt.fields, match.groups(), strict=True))["query_string"] == "crs,lat"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("apache-ish", "unknown log format 'apache-ish'"),
        ("%h %l %u", "has no time field"),
        ('%h %t "%r', "unbalanced"),
        ("%h %{%Q}t", "%Q is not supported"),
        ("%h %t %r", "%r must stand inside quotes"),
    ],
)
def test_bad_formats_are_rejected_with_the_value_and_a_fix(spec, message):
    with pytest.raises(LogFormatError, match=message):
        compile_format(spec)


def test_auto_detects_combined_before_common():
    combined = 'h - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 5 "-" "curl/8"'
    common = 'h - - [09/Jul/1995:00:00:01 -0400] "GET / HTTP/1.0" 200 5'
    assert detect_format([combined] * 5).name == "combined"
    assert detect_format([common] * 5).name == "common"


def test_auto_detection_failure_names_a_line_and_the_fix():
    with pytest.raises(LogFormatError, match=r"first line: 'not a log line'.*--format"):
        detect_format(["not a log line", "nor this"])
    with pytest.raises(LogFormatError, match="no non-empty line"):
        detect_format(["", "  "])
