"""The batch report's one pass over the input: every line projected into the views it
belongs to, and counted in one aggregation (book Ch. 7, "Batch Analytics"; the pane idea of
:mod:`logstream.analytics.panes`, applied to the whole input).

Each line is read and parsed once. Its views are the fields of one generator's array
(``F.inline``): one row per view it belongs to, with a view's keys in the same few columns,
and one hash aggregation keyed by the view and its keys counts them all. The views are of two
kinds:

* **named rows**, keyed by text, whose number is that of the distinct items of a table
  (hours, requests, client hosts per day, paths): the report's tables and panels are read
  from them;
* **hashed rows**, keyed by 64-bit hashes only, for the two keys that are nearly as many as
  the lines: a panel item's visitors (``pair``: one row per item and visitor, whose number
  per item is its visitors) and a visitor's visits (``visit``: one row per visitor and
  half-hour, the summaries that merge into sessions). Fixed-width keys keep the aggregation
  fast (10M NASA lines, 2 cores: the pairs keyed by text took 20 s over the parse, by hash
  5.5 s); a second aggregation, in the same Spark job, folds the pairs into one row per item
  (its ``visitors``), so that what the report keeps is a row per item, per visitor and
  per half-hour of a visit.

Two 64-bit hashes collide with a probability below n²/2⁶⁵ for n keys (3 × 10⁻⁸ for a
million): an item's visitors could then be one short, a session could merge two visitors'.

Views (``view``; keys in ``s1``–``s3`` (string) and ``l1``–``l3`` (bigint); null where a view
has none):

=============  ===========================================  ==================================
view           keys                                         one row per
=============  ===========================================  ==================================
``hour``       ``l1`` UTC hour (epoch hours), ``l2``        hour, status and written offset
               status, ``l3`` the offset written in the
               line (seconds east of UTC; with a
               ``time_zone``, null)
``request``    ``s1`` the request as GoAccess keys it,      request (``kind`` 0 a requested
               ``s2`` its ``method protocol``, ``s3`` the   file, 1 static, 2 answered 404)
               path, ``l1`` its kind
``visitor``    ``s1`` client host, ``s2`` user agent        GoAccess visitor (a row whose
               (``-`` for none), ``l1`` the calendar day    ``uniq`` > 0) or host and day
               (days since 1970-01-01)
``page``       ``s1`` path, ``l1`` the day                  content page and day
``referrer``   ``s1`` referrer, ``s2`` its site             referrer (shown ones only)
``user``       ``s1`` remote user                           authenticated user
``vhost``      ``s1`` virtual host                          virtual host
``pair``       ``l1`` the item's hash, ``l3`` the panel     panel item (its visitors: pairs
               (:data:`PAIR_PANELS`)                        with a request not answered 4xx)
``visit``      ``l1`` hash of client host and user agent,   visitor and half-hour
               ``l2`` the half-hour's start (epoch ms)
``bad``        ``s1`` the raw line, ``s2`` its source,      quarantined line (every copy)
               ``s3`` the reason, ``l1`` its position
=============  ===========================================  ==================================
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from logstream import analytics
from logstream.analytics.requests import (
    event_request_target,
    is_static_target,
    referring_site,
    shown_referrer,
)
from logstream.analytics.visitors import local_day
from logstream.parsing import REASON_COLUMN
from logstream.parsing.detect import LOG_OFFSET_REGEX
from logstream.parsing.parser import (
    TIME_TEXT_COLUMN,
    WRITTEN_OFFSET_COLUMN,
    hhmm_parts,
    hhmm_seconds,
)

__all__ = [
    "HOST_DAY",
    "KEYS",
    "MEASURES",
    "PAIR_PANELS",
    "REQUEST_KINDS",
    "count_host_days",
    "item_hash",
    "view_counts",
]

#: The key columns of :func:`view_counts`' rows.
KEYS = ("view", "s1", "s2", "s3", "l1", "l2", "l3")
#: Its measures (bigint): ``requests`` (lines), ``bytes``, ``errors`` (status ≥ 400),
#: ``not_found`` (404), ``pages`` (content pages), ``uniq`` (requests that make a GoAccess
#: visitor: not answered 4xx), ``visitors`` (the pairs a ``pair`` row holds; 1 for another
#: view), ``first_ms``, ``last_ms`` (epoch ms of the first and last event).
MEASURES = (
    "requests",
    "bytes",
    "errors",
    "not_found",
    "pages",
    "uniq",
    "visitors",
    "first_ms",
    "last_ms",
)
#: The measures summed at both levels (``visitors`` is the second level's own).
_SUMMED = ("requests", "bytes", "errors", "not_found", "pages", "uniq")
#: A request's kind (``l1`` of a ``request`` row): GoAccess's requested files, static files
#: and not-found requests are three panels of requests.
REQUEST_KINDS = {"requests": 0, "static_requests": 1, "not_found": 2}
#: The panels whose items count visitors from ``pair`` rows (``l3``).
PAIR_PANELS = {
    "requests": 0,
    "static_requests": 1,
    "not_found": 2,
    "referrers": 3,
    "referring_sites": 4,
    "remote_user": 5,
    "virtual_hosts": 6,
}
#: The second-level view of a client host and a day (:func:`count_host_days`).
HOST_DAY = "host_day"
#: Every view's name; the aggregations key a view by its index here (a ``tinyint``, hashed
#: and compared faster than text: 2 % of the 31-day report) and name it at the end.
_VIEW_NAMES = (
    "hour", "request", "visitor", "page", "pair", "visit", "bad", "referrer", "user", "vhost",
    "url", "host", "agent", "day", HOST_DAY,
)  # fmt: skip


def _view_id(name: str) -> Column:
    return F.lit(_VIEW_NAMES.index(name)).cast("tinyint")


#: The length of a visit summary (ms): requests of a visitor within one half-hour lie less
#: than the report's 30-minute session gap apart, so a summary ``[first_ms, last_ms]`` merges
#: into sessions exactly as its requests would (:func:`logstream.analytics.sessions`).
VISIT_MS = 1_800_000


def item_hash(*texts: Column) -> Column:
    """The 64-bit hash a ``pair`` row keys an item by (``xxhash64``), from the item's text
    columns: recomputed from a named row to join the two."""
    return F.xxhash64(*texts)


def view_counts(
    parsed: DataFrame,
    *,
    time_zone: str | None = None,
    static_extensions: Sequence[str] = (),
    site_host: str | None = None,
    protocol_required: bool = False,
    fields: Collection[str] | None = None,
) -> DataFrame:
    """Every count of the batch report, from one pass over ``parsed``.

    Parameters
    ----------
    parsed : DataFrame
        :func:`logstream.parsing.parse`'s output (events and quarantine candidates), batch.
    time_zone : str, optional
        IANA zone of the calendar days; None: each line's day is the date written in it (its
        offset, :data:`~logstream.parsing.detect.LOG_OFFSET_REGEX`; UTC without one).
    static_extensions, site_host, protocol_required
        As :func:`logstream.report.build_report` takes them.
    fields : collection of str, optional
        The event fields the log format has (``CompiledFormat.fields``): views of fields it
        lacks (referrers, users, virtual hosts) are left out. None: every view.

    Returns
    -------
    DataFrame
        :data:`KEYS` then :data:`MEASURES`, a row per view and keys (see the module), not yet
        computed: the caller persists it.
    """
    has = (lambda name: True) if fields is None else (lambda name: name in fields)
    rows = _line_columns(parsed, time_zone, protocol_required, static_extensions)
    views = _views(has, site_host)
    status = F.col("status")
    projected = rows.select(F.inline(F.array(*views)), "status", "bytes_sent", "_page", "_t")
    first = (
        projected.where(F.col("view").isNotNull())
        .groupBy(*KEYS)
        .agg(
            F.count("*").alias("requests"),
            F.coalesce(F.sum("bytes_sent"), F.lit(0)).cast("bigint").alias("bytes"),
            F.count_if(status >= analytics.ERROR_STATUS_MIN).alias("errors"),
            F.count_if(status == 404).alias("not_found"),
            F.count_if("_page").alias("pages"),
            F.count_if((status < 400) | (status >= 500)).alias("uniq"),
            F.min("_t").alias("first_ms"),
            F.max("_t").alias("last_ms"),
        )
    )
    return _second_level(first)


def _second_level(first: DataFrame) -> DataFrame:
    """The second aggregation of :func:`view_counts`, in the same job: the pairs fold into
    one row per item (``visitors``: its pairs); a visitor row adds to its host's, its user
    agent's and its day's rows (``visitors``: its visitor, unless every request of it was
    answered 4xx) and to its host and day (``host_day``, counted by :func:`count_host_days`);
    a request row to its path's (``url``); every other row is its own group."""
    view = F.col("view")
    pair, visitor, request = (view == _view_id(n) for n in ("pair", "visitor", "request"))
    a_visitor = (F.col("uniq") > 0).cast("bigint")
    no_text, no_number = F.lit(None).cast("string"), F.lit(None).cast("bigint")

    def row(name: Column, s1: Column, s2: Column, s3: Column, l1: Column, l2: Column,
            l3: Column, visitors: Column, when: Column) -> Column:  # fmt: skip
        return F.struct(
            name.alias("view"),
            s1.alias("s1"),
            s2.alias("s2"),
            s3.alias("s3"),
            l1.alias("l1"),
            l2.alias("l2"),
            l3.alias("l3"),
            *(F.col(m) for m in _SUMMED),
            visitors.alias("visitors"),
            F.col("first_ms").alias("first_ms"),
            F.col("last_ms").alias("last_ms"),
        )

    s1, s2, s3, l1, l2, l3 = (F.col(c) for c in ("s1", "s2", "s3", "l1", "l2", "l3"))
    one = F.lit(1).cast("bigint")
    itself = row(view, s1, s2, s3, l1, F.when(~pair, l2), l3, one, F.lit(True))
    nothing = (no_text, no_text, no_number, no_number, no_number)
    url = row(_view_id("url"), s3, *nothing, one, F.lit(True))
    of_visitor = [
        row(_view_id(name), a, b, no_text, c, no_number, no_number, a_visitor, F.lit(True))
        for name, a, b, c in (
            ("host", s1, no_text, no_number),
            ("agent", no_text, s2, no_number),
            ("day", no_text, no_text, l1),
            (HOST_DAY, s1, no_text, l1),
        )
    ]
    # a CASE builds only its branch's array: most rows (pairs, visits) stay one row
    derived = F.when(visitor, F.array(*of_visitor)).when(
        request, F.array(itself, url)
    ).otherwise(F.array(itself))  # fmt: skip
    rows = first.select(F.inline(derived))
    counted = rows.groupBy(*KEYS).agg(
        *(F.sum(m).alias(m) for m in (*_SUMMED, "visitors")),
        F.min("first_ms").alias("first_ms"),
        F.max("last_ms").alias("last_ms"),
    )
    names = F.array(*(F.lit(n) for n in _VIEW_NAMES))
    return counted.select(F.get(names, F.col("view")).alias("view"), *counted.columns[1:])


def count_host_days(counts: DataFrame) -> tuple[DataFrame, Observation]:
    """``counts`` without its ``host_day`` rows, and an :class:`~pyspark.sql.Observation`
    of their number (``host_days``: distinct client hosts of each day, summed over the days),
    read when the rows are first computed: no job of its own."""
    observed = Observation("host_days")
    counted = counts.observe(observed, F.count_if(F.col("view") == HOST_DAY).alias("host_days"))
    return counted.where(F.col("view") != HOST_DAY), observed


def persisted(counts: DataFrame) -> DataFrame:
    """``counts`` kept in memory (and on disk past it) for the report's later jobs."""
    return counts.persist(StorageLevel.MEMORY_AND_DISK)


def _line_columns(
    rows: DataFrame,
    time_zone: str | None,
    protocol_required: bool,
    static_extensions: Sequence[str],
) -> DataFrame:
    """The per-line values the views read, in one projection (Spark computes an expression
    written twice in one projection once): ``_t`` (epoch ms), ``_off`` (the written offset, s),
    ``_day`` (days since the epoch), ``_agent``, ``_target`` and ``_mp`` (the request and its
    method and protocol), ``_kind`` (:data:`REQUEST_KINDS`), ``_page`` (a content page),
    ``_visitor`` (the GoAccess visitor's hash). The offset is the parse's
    (:data:`~logstream.parsing.parser.WRITTEN_OFFSET_COLUMN`) where it read one: a pattern on
    the time's last 14 characters and two casts cost 2.6 s of the 284-day report (2 cores)."""
    if time_zone is not None:
        offset = F.lit(None).cast("bigint")
        day = F.unix_date(local_day(time_zone)).cast("bigint")
    else:  # each line's calendar day is the date written in it
        if WRITTEN_OFFSET_COLUMN in rows.columns:  # the parse read it: no pattern
            offset = F.col(WRITTEN_OFFSET_COLUMN)
        else:  # the time as written when the parse kept it (a short text), else the line
            fast = TIME_TEXT_COLUMN in rows.columns
            written = F.col(TIME_TEXT_COLUMN if fast else "raw_line")
            offset = _written_offset_seconds(written, fast)
        day = F.floor((F.unix_seconds("event_time") + offset) / 86_400).cast("bigint")
    target, method_protocol = event_request_target(protocol_required=protocol_required)
    agent = F.coalesce(F.col("user_agent"), F.lit("-"))
    static = is_static_target(target, static_extensions)
    kind = F.when(F.col("status") == 404, 2).when(static, 1).otherwise(0)
    return rows.select(
        "*",
        F.unix_millis("event_time").alias("_t"),
        offset.alias("_off"),
        day.alias("_day"),
        agent.alias("_agent"),
        target.alias("_target"),
        method_protocol.alias("_mp"),
        analytics.is_content_page().alias("_page"),
        kind.cast("bigint").alias("_kind"),
        F.xxhash64("client_host", day, agent).alias("_visitor"),
    )


def _views(has: Callable[[str], bool], site_host: str | None) -> list[Column]:
    """The structs of one line's views (see the module docstring), for ``F.inline``."""
    is_event = F.col(REASON_COLUMN).isNull()
    status = F.col("status")
    uniq = is_event & ((status < 400) | (status >= 500))
    t_ms, day, visitor = F.col("_t"), F.col("_day"), F.col("_visitor")

    no_text, no_number = F.lit(None).cast("string"), F.lit(None).cast("bigint")

    def view(
        name: str,
        s1: Column = no_text,
        s2: Column = no_text,
        s3: Column = no_text,
        l1: Column = no_number,
        l2: Column = no_number,
        l3: Column = no_number,
        when: Column = is_event,
    ) -> Column:
        return F.struct(
            F.when(when, _view_id(name)).alias("view"),
            # no text where the line has no such view: no copy in the generator's rows
            F.when(when, s1).alias("s1"),
            F.when(when, s2).alias("s2"),
            F.when(when, s3).alias("s3"),
            l1.cast("bigint").alias("l1"),
            l2.cast("bigint").alias("l2"),
            l3.cast("bigint").alias("l3"),
        )

    def pair(panel: str, item: Column, when: Column) -> Column:
        return view("pair", l1=item, l2=visitor, l3=F.lit(PAIR_PANELS[panel]), when=uniq & when)

    target, mp = F.col("_target"), F.col("_mp")
    out = [
        view("hour", l1=F.floor(t_ms / 3_600_000), l2=status, l3=F.col("_off")),
        view("request", s1=target, s2=mp, s3=F.col("url_path"), l1=F.col("_kind")),
        view("visitor", s1=F.col("client_host"), s2=F.col("_agent"), l1=day),
        view("page", s1=F.col("url_path"), l1=day, when=is_event & F.col("_page")),
        # request panels' pairs: the panel is the kind (requests 0, static 1, not found 2)
        view("pair", l1=item_hash(target, mp), l2=visitor, l3=F.col("_kind"), when=uniq),
        view(
            "visit",
            l1=F.xxhash64("client_host", F.coalesce("user_agent", F.lit(""))),
            l2=t_ms - F.pmod(t_ms, F.lit(VISIT_MS)),
        ),
        view(
            "bad",
            s1=F.col("raw_line"),
            s2=F.col("source_file"),
            s3=F.col(REASON_COLUMN),
            l1=F.monotonically_increasing_id(),  # the order of the input
            when=~is_event,
        ),
    ]
    if has("referrer"):
        referrer = F.col("referrer")
        site = referring_site(referrer)
        shown = shown_referrer(referrer, site, site_host)
        out += [
            view("referrer", s1=referrer, s2=site, when=is_event & shown),
            pair("referrers", item_hash(referrer), shown),
            pair("referring_sites", item_hash(site), shown & (site != "")),
        ]
    for name, column, panel in (
        ("user", "user", "remote_user"),
        ("vhost", "virtual_host", "virtual_hosts"),
    ):
        if has(column):
            value = F.col(column)
            out += [
                view(name, s1=value, when=is_event & value.isNotNull()),
                pair(panel, item_hash(value), value.isNotNull()),
            ]
    return out


def _written_offset_seconds(text: Column, fast: bool = False) -> Column:
    """The UTC offset written in a line's time (or the line: :data:`LOG_OFFSET_REGEX`) in
    seconds east of UTC, 0 when there is none (epoch times) or it is impossible (``+9900``).

    ``fast``: ``text`` is the time as written (:data:`~logstream.parsing.parser.
    TIME_TEXT_COLUMN`), whose offset is, for most logs, its last five characters after a
    space and a time of day (``09/Jul/1995:00:00:01 -0400``): read by one cast of those
    characters; any other text goes through the regular expression (which cost 11
    CPU-seconds on 10M NASA lines, 2 cores).
    """
    written = F.regexp_extract(text, LOG_OFFSET_REGEX, 1)  # ±HHMM, ±HH:MM, Z or ""
    # ±HHMM: "+0000" appended for Z or none, the colon and the Z dropped, five characters kept
    hhmm = F.substring(F.regexp_replace(F.concat(written, F.lit("+0000")), "[:Z]", ""), 1, 5)
    # the offset is what the local midnight of 1970-01-01 lacks to be the epoch
    # (try_: an impossible offset such as +9900 counts as none instead of failing the job)
    midnight = F.try_to_timestamp(
        F.concat(F.lit("1970-01-01 00:00:00"), hhmm), F.lit("yyyy-MM-dd HH:mm:ssZ")
    )
    slow = -F.coalesce(F.unix_seconds(midnight), F.lit(0))
    if not fast:
        return slow
    # one pattern on the last 14 characters and one cast of the offset's five: the same test
    # as character by character (10 substrings and 4 translations: 9 CPU-s on 10M lines)
    plain = F.substring(text, -14, 14).rlike(r"^\d\d:\d\d:\d\d [+-]\d\d\d\d$")
    signed = F.substring(text, -5, 5).try_cast("int")  # "-0430" is -430
    hours, minutes = parts = hhmm_parts(signed)
    # the offsets Java's ZoneOffset holds (±18:00), as the parse of the slow form accepts
    valid = (minutes < 60) & ((hours < 18) | ((hours == 18) & (minutes == 0)))
    seconds = F.when(plain & valid, hhmm_seconds(signed, parts))
    return seconds.when(plain, F.lit(0).cast("bigint")).otherwise(slow)
