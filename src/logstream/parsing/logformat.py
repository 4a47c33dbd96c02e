"""Compile Apache ``LogFormat`` (and nginx ``log_format``) strings into one regular expression.

The regular expression is written in the common subset of Java and Python syntax: Spark runs it
(``regexp_replace``, Java ``java.util.regex``) and ``auto`` detection and the tests run it in
Python. It is anchored at both ends and captures each field logstream keeps, in order; fields
logstream does not keep are matched but not captured.

Supported Apache directives (Apache docs, ``mod_log_config``):

=============================  ======================================================
directive                      field
=============================  ======================================================
``%h`` ``%a``                  ``client_host``
``%l``                         ``ident``
``%u``                         ``user``
``%t``                         ``event_time`` from ``[dd/MMM/yyyy:HH:mm:ss Z]``
``%{FORMAT}t``                 ``event_time`` from a strftime ``FORMAT`` (``%Y %m %d %H
                               %I %M %S %p %b %y %z``), or ``sec`` / ``msec`` epochs
``%r``                         ``method``, ``url_path``, ``query_string``, ``protocol``
``%m`` ``%U`` ``%q`` ``%H``    method, URL path, query string (``?…``), protocol
``%>s`` ``%s`` ``%<s``         ``status``
``%b`` ``%B`` ``%O``           ``bytes_sent`` (``-`` means 0)
``%D`` / ``%T``                ``response_time_us`` (microseconds / whole seconds)
``%{Referer}i``                ``referrer``
``%{User-agent}i``             ``user_agent``
``%v`` ``%V``                  ``virtual_host`` (the server name)
any other ``%x`` / ``%{…}x``   matched, not kept
``%%`` ``\\t`` ``\\"``         a literal ``%``, tab, quote
=============================  ======================================================

nginx ``log_format`` strings (``$remote_addr - $remote_user [$time_local] "$request" …``) are
translated to the Apache directives above first; ``$request_time`` (seconds with a fraction)
fills ``response_time_us``.

Two more named formats:

* ``nasa-tsv``: the tab-separated NASA files (``host, logname, time`` in epoch seconds,
  ``method, url, response, bytes``; no protocol), the LogFormat
  ``%h\t%l\t%{sec}t\t%m\t%U%q\t%>s\t%b``.
  Their header line is skipped, not quarantined (:attr:`CompiledFormat.header`).
* ``json``: one JSON object per line, read with ``from_json`` (no regular expression), keys
  mapped to event fields. ``json`` alone maps the keys of the book's NASA data set
  (:data:`JSON_BOOK_KEYS`: ``host``, ``timestamp``, ``request``, ``http_reply``, ``bytes``);
  ``json:FIELD=KEY,…`` maps others (:func:`compile_json_format`).

Leniency, on purpose:

* a request line is split leniently, as real servers logged it: the method is the first word,
  the target the second, the protocol the last ``HTTP/x`` word; anything between is ignored
  (``"GET /ksc.html   NASA/Kennedy Space Center Home Page HTTP/1.0"`` → ``/ksc.html``);
  a request with no protocol (``"GET /"``) or no method at all (``"-"``) still parses;
* when a format ends with a quoted field, a line cut off inside that field (a truncated
  ``User-Agent``, as log rotation or a full disk leaves) parses with the text that was written:
  the request itself was served and is counted;
* trailing white space (including a ``\\r`` left by CRLF files) is ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from logstream.errors import LogFormatError

__all__ = [
    "COMBINED",
    "COMMON",
    "JSON_BOOK_KEYS",
    "JSON_FIELDS",
    "NAMED_FORMATS",
    "NASA_TSV",
    "REQUEST_REGEX",
    "CompiledFormat",
    "compile_format",
    "compile_json_format",
]

COMMON = '%h %l %u %t "%r" %>s %b'
COMBINED = '%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-agent}i"'
#: Apache's ``vhost_combined`` (Debian's ``other_vhosts_access.log``): Combined after the
#: virtual host and port.
VHOST_COMBINED = '%v:%p %h %l %u %t "%r" %>s %O "%{Referer}i" "%{User-Agent}i"'
#: The NASA TSV files: epoch seconds, no protocol, a header line.
NASA_TSV = "%h\t%l\t%{sec}t\t%m\t%U%q\t%>s\t%b"

#: Named formats accepted wherever a format is asked for.
NAMED_FORMATS: dict[str, str] = {
    "common": COMMON,
    "clf": COMMON,
    "combined": COMBINED,
    "vcombined": VHOST_COMBINED,
    "nginx": '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent"',
    "nasa-tsv": NASA_TSV,
}

#: Header lines of named formats: skipped by the parser (a file's header is not a log line).
_HEADERS: dict[str, str] = {"nasa-tsv": "host\tlogname\ttime\tmethod\turl\tresponse\tbytes"}

#: Event fields a JSON key can fill (``request`` is a whole request line, split like ``%r``;
#: ``event_time`` is ISO 8601, CLF time or epoch seconds/milliseconds).
JSON_FIELDS: tuple[str, ...] = (
    "client_host",
    "ident",
    "user",
    "event_time",
    "request",
    "method",
    "url_path",
    "query_string",
    "protocol",
    "status",
    "bytes_sent",
    "referrer",
    "user_agent",
    "response_time_us",
    "virtual_host",
)

#: ``--format json``: the keys of the book's NASA JSON data set (Ch. 10), by event field.
JSON_BOOK_KEYS: dict[str, str] = {
    "client_host": "host",
    "event_time": "timestamp",
    "request": "request",
    "status": "http_reply",
    "bytes_sent": "bytes",
}

# Character classes. U+0001 is the separator of the parser's split, so no field may hold it.
# White space is Java's ``\s`` written out (``_SPACE``): a class of single characters is one
# table lookup a character in Java's engine, where ``\s`` inside a class is a chain of tests
# (the Common Log Format's ``regexp_replace`` on 2,186,864 NASA lines, warm, 2 cores: 4.2 s
# with ``\s``, 3.0 s written out, 2.8 s with the greedy runs below), and
# Python's ``re`` (format detection, the tests) then reads it as Java does, not as Unicode
# white space. A group repeated over a field (``(?:run|escape)*+``) is possessive, so that
# Java's engine, which recurses once per iteration of a group, recurses once per escape
# sequence rather than once per character: a field of any length cannot overflow the stack.
# The run inside it is greedy (Java loops over a greedy run of one class without recursion or
# a call per character); the group's possessive loop never backtracks into it, so it matches
# what a possessive run matches.
_SPACE = r" \t\n\x0B\f\r"
_TOKEN = rf"[^{_SPACE}\x01]+"
_ESCAPE = r"\\[^\x01]"
_QUOTED = rf'(?:[^"\\\x01]+|{_ESCAPE})*+'
_WORD = rf'(?:[^{_SPACE}"\\\x01]+|{_ESCAPE})++'
_METHOD = r"[A-Za-z][A-Za-z_-]*+"
_PATH_IN_QUOTES = rf'(?:[^{_SPACE}"?\\\x01]+|{_ESCAPE})*+'
_QUERY_IN_QUOTES = rf'(?:[^{_SPACE}"\\\x01]+|{_ESCAPE})*+'
_PROTOCOL = rf'[Hh][Tt][Tt][Pp]/[^{_SPACE}"\\\x01]*+'
#: Words between the target and the protocol that the lenient request split skips, at most.
_MAX_SKIPPED_WORDS = 64

_CLF_TIME_PATTERN = "dd/MMM/yyyy:HH:mm:ss Z"
_CLF_TIME_REGEX = r"[^\]\x01]+"

# strftime directive -> (regex, Spark datetime pattern)
_STRFTIME: dict[str, tuple[str, str]] = {
    "Y": (r"\d{4}", "yyyy"),
    "y": (r"\d{2}", "yy"),
    "m": (r"\d{2}", "MM"),
    "d": (r"\d{2}", "dd"),
    "e": (r"[ \d]\d", "d"),
    "H": (r"\d{2}", "HH"),
    "I": (r"\d{2}", "hh"),
    "M": (r"\d{2}", "mm"),
    "S": (r"\d{2}", "ss"),
    "p": (r"[AaPp][Mm]", "a"),
    "b": (r"[A-Za-z]{3}", "MMM"),
    "z": (r"[+-]\d{4}", "Z"),
}

_NGINX_VARS: dict[str, str] = {
    "remote_addr": "%h",
    "remote_user": "%u",
    "time_local": "%{clf}t",
    "request": "%r",
    "status": "%>s",
    "body_bytes_sent": "%b",
    "bytes_sent": "%O",
    "http_referer": "%{Referer}i",
    "http_user_agent": "%{User-agent}i",
    "host": "%v",
    "server_name": "%v",
    "request_method": "%m",
    "server_protocol": "%H",
    "request_time": "%{nginx_request_time}x",
    "msec": "%{msec_frac}t",
}

_DIRECTIVE = re.compile(r"%([<>]?)(?:\{([^}]*)\})?([a-zA-Z%])")

# a request line ``GET /path?query HTTP/1.0``, leniently (see the module notes): groups method,
# path, query, protocol
_REQUEST = (
    f"(?:({_METHOD}) ++({_PATH_IN_QUOTES})(?:\\?({_QUERY_IN_QUOTES}))?"
    f"(?:(?: ++{_WORD}){{0,{_MAX_SKIPPED_WORDS}}}? ++({_PROTOCOL}))?|){_QUOTED}"
)
#: A whole request line (a JSON ``request`` value): groups method, path, query, protocol.
REQUEST_REGEX = f"^{_REQUEST}[{_SPACE}]*$"


@dataclass(frozen=True)
class CompiledFormat:
    """A log format compiled for the parser.

    Attributes
    ----------
    name : str
        The name the user gave (``combined``) or the format string itself.
    log_format : str
        The Apache ``LogFormat`` string.
    regex : str
        Anchored regular expression, valid in Java and Python, with one capturing group per
        entry of ``fields``.
    fields : tuple of str
        The logstream field each capturing group fills, in group order. Names are event
        columns, plus ``time`` (raw time text), ``target`` (path and query together),
        ``response_time_s``/``response_time_us``/``response_time_s_frac``.
    time_kind : str
        How to read the ``time`` group: ``"pattern"`` (Spark datetime ``time_pattern``),
        ``"epoch_s"``, ``"epoch_ms"``, ``"epoch_s_frac"``, or ``"any"`` (JSON: ISO 8601,
        then CLF time, then epoch seconds or milliseconds).
    time_pattern : str or None
        Spark datetime pattern when ``time_kind == "pattern"``.
    header : str or None
        A header line of the format (``nasa-tsv``): lines starting with it are skipped.
    json_keys : tuple of (str, str)
        For JSON formats (``regex`` empty): ``(field, key)`` pairs, the JSON key read into each
        event field (``request`` for a whole request line).
    """

    name: str
    log_format: str
    regex: str
    fields: tuple[str, ...]
    time_kind: str = "pattern"
    time_pattern: str | None = _CLF_TIME_PATTERN
    header: str | None = None
    json_keys: tuple[tuple[str, str], ...] = ()

    @property
    def is_json(self) -> bool:
        """Whether lines are JSON objects (read with ``from_json``, not a regex)."""
        return bool(self.json_keys)

    @property
    def python_regex(self) -> re.Pattern[str]:
        """The same regular expression compiled by Python's :mod:`re`.

        Raises
        ------
        LogFormatError
            For a JSON format, which has none.
        """
        if self.is_json:
            raise LogFormatError(
                f"log format {self.name!r} is JSON: it is read with from_json, not a regex"
            )
        return re.compile(self.regex)

    def has(self, name: str) -> bool:
        """Return whether the format fills the field ``name``."""
        return name in self.fields


def _nginx_to_apache(fmt: str) -> str:
    def repl(match: re.Match[str]) -> str:
        var = match.group(1) or match.group(2)
        return _NGINX_VARS.get(var, "%{" + var + "}x")

    escaped = fmt.replace("%", "%%")
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", repl, escaped)


def _strftime(fmt: str) -> tuple[str, str]:
    """Translate a strftime format into (regex, Spark datetime pattern)."""
    regex, pattern, i = [], [], 0
    while i < len(fmt):
        ch = fmt[i]
        if ch == "%" and i + 1 < len(fmt):
            code = fmt[i + 1]
            if code not in _STRFTIME:
                raise LogFormatError(
                    f"time format {fmt!r}: strftime directive %{code} is not supported; "
                    f"use one of {', '.join('%' + c for c in _STRFTIME)}"
                )
            rx, pat = _STRFTIME[code]
            regex.append(rx)
            pattern.append(pat)
            i += 2
            continue
        regex.append(re.escape(ch))
        pattern.append(f"'{ch}'" if ch.isalpha() else ch)
        i += 1
    return "".join(regex), "".join(pattern)


def _literal(text: str) -> str:
    return re.escape(text.replace("\\t", "\t").replace('\\"', '"').replace("\\n", "\n"))


def compile_format(spec: str) -> CompiledFormat:
    """Compile a named format, an Apache ``LogFormat`` or an nginx ``log_format`` string.

    Parameters
    ----------
    spec : str
        ``common``, ``combined``, ``nginx``, or a format string with ``%`` directives
        (Apache) or ``$variables`` (nginx).

    Returns
    -------
    CompiledFormat
        The anchored regular expression and the field each group fills.

    Raises
    ------
    LogFormatError
        When ``spec`` is neither a known name nor a format string, has no time field, or
        uses an unsupported strftime directive.

    Examples
    --------
    >>> f = compile_format("common")
    >>> f.fields[:4], f.fields[-2:]
    (('client_host', 'ident', 'user', 'time'), ('status', 'bytes_sent'))
    >>> bool(f.python_regex.match('h - - [09/Jul/1995:00:00:00 -0400] "GET / HTTP/1.0" 200 7067'))
    True
    """
    key = spec.strip().lower()
    if key == "json" or key.startswith("json:"):
        return compile_json_format(spec.strip()[5:] if ":" in spec else None)
    text = _format_text(spec, key)
    built = _translate(spec, text)
    regex = "".join(built.parts)
    try:
        re.compile(regex)
    except re.error as exc:  # pragma: no cover - a bug in this module, not user input
        raise LogFormatError(f"log format {spec!r} compiled to an invalid pattern: {exc}") from exc
    return CompiledFormat(
        name=spec,
        log_format=text,
        regex=regex,
        fields=tuple(built.fields),
        time_kind=built.time_kind,
        time_pattern=built.time_pattern,
        header=_HEADERS.get(key),
    )


def _format_text(spec: str, key: str) -> str:
    """The Apache ``LogFormat`` string of ``spec`` (``key``: its lower-case name)."""
    text = NAMED_FORMATS.get(key)
    if text is None:
        if "%" in spec:
            text = spec
        elif "$" in spec:
            text = _nginx_to_apache(spec)
        else:
            raise LogFormatError(
                f"unknown log format {spec!r}: use one of {', '.join(sorted(NAMED_FORMATS))}, "
                "'auto', 'json', 'json:FIELD=KEY,…', or an Apache LogFormat string such as "
                "'%h %l %u %t \"%r\" %>s %b'"
            )
    elif "$" in text and "%" not in text:
        text = _nginx_to_apache(text)
    return text


class _Regex:
    """The regular expression of a format as it is built: its parts, the field of each
    capturing group, and how its time is read."""

    def __init__(self) -> None:
        self.parts: list[str] = ["^"]
        self.fields: list[str] = []
        self.time_kind: str = "pattern"
        self.time_pattern: str | None = _CLF_TIME_PATTERN
        self.has_time = False

    def keep(self, field_name: str, rx: str) -> None:
        """Capture ``rx`` as the field ``field_name``."""
        self.parts.append(f"({rx})")
        self.fields.append(field_name)

    def directive(self, spec: str, code: str, arg: str | None, value: str, in_quotes: bool) -> None:
        """Append the regex of the directive ``%{arg}code``; ``value`` matches a plain field
        there (a quoted string inside quotes, else a token up to the next literal)."""
        keep = self.keep
        if code == "%":
            self.parts.append("%")
        elif code in "ha":
            keep("client_host", value)
        elif code == "l":
            keep("ident", value)
        elif code == "u":
            keep("user", value)
        elif code == "t":
            self._time(arg)
        elif code == "r":
            if not in_quotes:
                raise LogFormatError(
                    f"log format {spec!r}: %r must stand inside quotes, as in '\"%r\"'"
                )
            self.parts.append(_REQUEST)
            self.fields.extend(["method", "url_path", "query_string", "protocol"])
        elif code == "m":
            keep("method", value)
        elif code == "U":
            keep("url_path", rf'[^{_SPACE}"?\x01]*')
        elif code == "q":
            self.parts.append(rf'(?:\?([^{_SPACE}"\x01]*))?')
            self.fields.append("query_string")
        elif code == "H":
            keep("protocol", value)
        elif code == "s":
            keep("status", value)
        elif code in "bBO":
            keep("bytes_sent", value)
        elif code == "D":
            keep("response_time_us", r"\d+")
        elif code == "T":
            keep("response_time_s", r"\d+")
        elif code == "i" and arg and arg.lower() == "referer":
            keep("referrer", value)
        elif code == "i" and arg and arg.lower() == "user-agent":
            keep("user_agent", value)
        elif code in "vV":
            keep("virtual_host", value)
        elif code == "x" and arg == "nginx_request_time":
            keep("response_time_s_frac", r"\d+(?:\.\d+)?")
        else:
            self.parts.append(f"(?:{value})")

    def _time(self, arg: str | None) -> None:
        """The time field of ``%t`` / ``%{arg}t``."""
        self.has_time = True
        if arg is None:
            self.parts.append(r"\[")
            self.keep("time", _CLF_TIME_REGEX)
            self.parts.append(r"\]")
        elif arg == "clf":  # nginx $time_local: the CLF time without its brackets
            self.keep("time", _CLF_TIME_REGEX)
        elif arg in ("sec", "msec", "msec_frac"):
            kinds = {"sec": "epoch_s", "msec": "epoch_ms", "msec_frac": "epoch_s_frac"}
            self.time_kind = kinds[arg]
            self.time_pattern = None
            self.keep("time", r"\d+(?:\.\d+)?")
        else:
            rx, self.time_pattern = _strftime(arg)
            self.keep("time", rx)


def _translate(spec: str, text: str) -> _Regex:
    """Translate the ``LogFormat`` string ``text`` directive by directive (see
    :func:`compile_format`, whose errors it raises)."""
    built = _Regex()
    parts = built.parts
    in_quotes = False
    pos = 0
    matches = list(_DIRECTIVE.finditer(text))
    ends_with_quoted_field = (
        bool(matches)
        and text.rstrip().endswith('"')
        and (text.rstrip()[:-1].endswith(("i", "r", "}x")))
    )

    for index, m in enumerate(matches):
        lit = text[pos : m.start()]
        pos = m.end()
        in_quotes ^= lit.replace('\\"', "").count('"') % 2 == 1
        parts.append(_literal(lit))
        _, arg, code = m.groups()
        next_text = text[m.end() : matches[index + 1].start()] if index + 1 < len(matches) else ""
        stop = next_text[:1]
        plain = stop in ("", " ", "\t", '"')
        token = _TOKEN if plain else rf"[^{_SPACE}\x01" + re.escape(stop) + "]+"
        built.directive(spec, code, arg, _QUOTED if in_quotes else token, in_quotes)
    tail = text[pos:]
    in_quotes ^= tail.replace('\\"', "").count('"') % 2 == 1
    if ends_with_quoted_field and tail.rstrip() == '"':
        parts.append('"?')
    else:
        parts.append(_literal(tail.rstrip()))
    parts.append(rf"[{_SPACE}]*$")

    if not built.has_time:
        raise LogFormatError(
            f"log format {spec!r} has no time field: add %t (or %{{FORMAT}}t) so events have "
            "an event time"
        )
    if in_quotes:
        raise LogFormatError(f"log format {spec!r} has an unbalanced '\"'")
    return built


def compile_json_format(mapping: str | None = None) -> CompiledFormat:
    """A JSON-lines format: which JSON key fills which event field.

    Parameters
    ----------
    mapping : str, optional
        ``FIELD=KEY`` pairs separated by commas, FIELD from :data:`JSON_FIELDS`
        (``client_host=ip,event_time=ts,request=req,status=code,bytes_sent=size``). Keys are
        top-level keys of the objects. None: :data:`JSON_BOOK_KEYS`, the book's NASA data set.

    Returns
    -------
    CompiledFormat
        ``json_keys`` set, ``regex`` empty, ``fields`` the event fields filled (``request``
        stands for ``method``, ``url_path``, ``query_string`` and ``protocol``), ``time_kind``
        ``"any"``.

    Raises
    ------
    LogFormatError
        When a pair is not ``FIELD=KEY``, a field is unknown or repeated, or ``client_host``,
        ``event_time`` or ``status`` is not mapped.

    Examples
    --------
    >>> compile_json_format().fields[:4]
    ('client_host', 'time', 'method', 'url_path')
    >>> compile_json_format("client_host=ip,event_time=ts,status=code").json_keys
    (('client_host', 'ip'), ('event_time', 'ts'), ('status', 'code'))
    """
    pairs: dict[str, str] = {}
    if mapping is None:
        pairs = dict(JSON_BOOK_KEYS)
    else:
        for item in (p.strip() for p in mapping.split(",")):
            field_name, eq, json_key = (t.strip() for t in item.partition("="))
            if not (eq and field_name and json_key):
                raise LogFormatError(
                    f"JSON field mapping {mapping!r}: {item!r} is not FIELD=KEY "
                    "(e.g. --format 'json:client_host=host,event_time=timestamp,status=code')"
                )
            if field_name not in JSON_FIELDS:
                raise LogFormatError(
                    f"JSON field mapping {mapping!r}: unknown field {field_name!r}; "
                    f"fields: {', '.join(JSON_FIELDS)}"
                )
            if field_name in pairs:
                raise LogFormatError(f"JSON field mapping {mapping!r}: {field_name!r} twice")
            pairs[field_name] = json_key
    missing = [f for f in ("client_host", "event_time", "status") if f not in pairs]
    if missing:
        raise LogFormatError(
            f"JSON field mapping {mapping!r} does not map {', '.join(missing)}: every event "
            "needs a client, an event time and a status"
        )
    fields: list[str] = []
    for field_name in pairs:
        if field_name == "request":
            fields.extend(["method", "url_path", "query_string", "protocol"])
        else:
            fields.append("time" if field_name == "event_time" else field_name)
    spec = "json" if mapping is None else f"json:{mapping}"
    return CompiledFormat(
        name=spec,
        log_format=spec,
        regex="",
        fields=tuple(fields),
        time_kind="any",
        time_pattern=None,
        json_keys=tuple(pairs.items()),
    )
