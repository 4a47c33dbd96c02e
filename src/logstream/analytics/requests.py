"""GoAccess's definitions of a request's items: the request target, a static file, a
referring site.

Shared by the batch report's panels (:mod:`logstream.report.panels`) and the stream's panel
views (:mod:`logstream.analytics.panes`), so that both count the same items. The definitions
are GoAccess 1.7's (``src/parser.c``):

* a **request** is the target with its query string, ``%xx``-decoded and trimmed
  (:func:`request_target`); when the format has a protocol (a request line ``%r``), a line
  without a valid one (:data:`HTTP_PROTOCOLS`) is the request ``-``;
* a **static file** is a target ending with one of :data:`STATIC_EXTENSIONS`, ignoring case
  (:func:`is_static_target`; a query string after the extension is not static);
* a **referring site** is the referrer's host: the text after its first ``//`` up to the
  next ``/`` (:func:`referring_site`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

__all__ = [
    "HTTP_PROTOCOLS",
    "STATIC_EXTENSIONS",
    "event_request_target",
    "is_static_target",
    "referring_site",
    "request_target",
    "shown_referrer",
    "static_names",
]

#: GoAccess's static-file extensions (Debian's ``/etc/goaccess/goaccess.conf`` of GoAccess
#: 1.7, the list a user sees); ``static_extensions`` adds to them.
STATIC_EXTENSIONS: tuple[str, ...] = (
    *".css .js .jpg .png .gif .ico .jpeg .pdf .csv .mpeg .mpg .swf .woff .woff2 .xls .xlsx".split(),
    *".doc .docx .ppt .pptx .txt .zip .ogg .mp3 .mp4 .exe .iso .gz .rar .svg .bmp .tar".split(),
    *".tgz .tiff .tif .ttf .flv .dmg .xz .zst".split(),
)


#: The protocols GoAccess 1.7 accepts at the end of a request line (``extract_protocol`` in
#: ``src/parser.c``: the last word starts with one of them, case-sensitive).
HTTP_PROTOCOLS: tuple[str, ...] = ("HTTP/1.0", "HTTP/1.1", "HTTP/2", "HTTP/3")


def static_names(extra: Sequence[str] = ()) -> list[str]:
    """The static extensions (:data:`STATIC_EXTENSIONS` and ``extra``) without their dot,
    lower case, sorted.

    Examples
    --------
    >>> "webp" in static_names([".WebP"]), len(static_names()), static_names()[:3]
    (True, 40, ['bmp', 'css', 'csv'])
    """
    return sorted({e.lstrip(".").lower() for e in (*STATIC_EXTENSIONS, *extra)})


def is_static_target(target: Column, extra: Sequence[str] = ()) -> Column:
    """The target ends with a static extension, ignoring case: what follows its last dot is
    one of them (string functions and a set lookup, no regular expression: a query string
    after the extension, ``/a.css?v=2``, is not static, as in GoAccess)."""
    after_dot = F.lower(F.substring_index(target, ".", -1))
    # contains, not instr: instr counts characters up to the match (UTF8String.indexOf, 8 %
    # of the 284-day report's executor time for two of them)
    return target.contains(".") & after_dot.isin(static_names(extra))


def request_target(
    url_path: Column,
    query_string: Column,
    method: Column,
    protocol: Column,
    *,
    protocol_required: bool = False,
) -> tuple[Column, Column]:
    """The request as GoAccess keys it, and its ``method protocol``.

    Parameters
    ----------
    url_path, query_string, method, protocol : Column
        The event's columns (strings).
    protocol_required : bool
        The log format has a protocol (its request line ``%r``, ``%H`` or a JSON request
        line: ``"protocol" in CompiledFormat.fields``). Then a request without a valid one
        (:data:`HTTP_PROTOCOLS`: ``"GET /images/x.gif"``, ``HTTP/V1.0``) is ``-`` with no
        method and protocol, as GoAccess's ``parse_req`` makes it. A format without a
        protocol (``nasa-tsv``) keys every request by its target.

    Returns
    -------
    tuple of Column
        The target with its query string, ``%xx``-decoded and trimmed (an invalid escape
        keeps the text as written; ``+`` stays ``+``), or ``-``; and ``method protocol``
        (``GET HTTP/1.1``; ``""`` for ``-``). A target ending in a bare ``?`` has no query
        string after parsing, so it is keyed without the ``?`` (GoAccess keeps it). A request
        line that does not parse is ``-``, as in GoAccess.
    """
    target = F.when(query_string.isNull(), url_path).otherwise(
        F.concat(url_path, F.lit("?"), query_string)
    )
    decoded = F.when(
        target.contains("%"),
        # trimmed, as GoAccess trims the decoded target ("/a%20" is "/a")
        F.trim(F.coalesce(F.try_url_decode(F.replace(target, F.lit("+"), F.lit("%2B"))), target)),
    ).otherwise(target)
    method_protocol = F.concat_ws(" ", method, protocol)
    if protocol_required:
        valid = F.lit(False)
        for name in HTTP_PROTOCOLS:
            valid = valid | protocol.startswith(name)
        valid = F.coalesce(valid, F.lit(False))  # no protocol at all
        decoded = F.when(valid, decoded)
        method_protocol = F.when(valid, method_protocol).otherwise(F.lit(""))
    # no target (a request line that does not parse, or no valid protocol): GoAccess's "-"
    return F.coalesce(decoded, F.lit("-")), method_protocol


def event_request_target(*, protocol_required: bool = False) -> tuple[Column, Column]:
    """:func:`request_target` of an event's own columns (``url_path``, ``query_string``,
    ``method``, ``protocol``): the report's panels and the stream's keep one definition."""
    return request_target(
        F.col("url_path"),
        F.col("query_string"),
        F.col("method"),
        F.col("protocol"),
        protocol_required=protocol_required,
    )


def referring_site(referrer: Column) -> Column:
    """The referrer's host (string; ``""`` when the referrer has no ``//``, null when there
    is no referrer)."""
    return F.regexp_extract(referrer, "//([^/]+)", 1)


def shown_referrer(referrer: Column, site: Column, site_host: str | None) -> Column:
    """The request counts in the referrer panels: it has a referrer, and that referrer is
    not your own site (``site_host``, ignoring case: GoAccess's ``--hide-referer``)."""
    shown = referrer.isNotNull()
    if site_host:
        shown = shown & (F.lower(site) != site_host.lower())
    return shown
