"""Browser and operating-system families of user agents, named as GoAccess names them.

The user agent is parsed by ``ua-parser`` (the uap-core rules, with ``ua-parser-rs`` as its
native resolver); this module only maps ua-parser's family names onto GoAccess's panel
categories, so that a user can compare the two reports line by line:

* browsers: ``Chrome``, ``Firefox``, ``MSIE``, ``Edge``, ``Safari``, ``Opera``, ``Feeds``,
  ``Crawlers``, ``Others`` (a family ua-parser knows and GoAccess lists under "Others", or a
  ``Mozilla`` string no rule names) and ``Unknown`` (no rule matches, no ``Mozilla``);
* operating systems: ``Windows``, ``Macintosh``, ``Linux``, ``Android``, ``iOS``,
  ``Chrome OS``, ``BSD``, ``Unix``, ``Crawlers``, ``Others`` and ``Unknown``.

A crawler is one family in both panels, as in GoAccess: a user agent is a crawler when the
agents reference table classes it so (the ``crawler-user-agents`` patterns,
:mod:`logstream.reference`) or when ua-parser names its device ``Spider``.

Only the distinct user agents are classified (:func:`agent_families`): a pandas function over
one row per user agent, never one call per event.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import Column, DataFrame

__all__ = ["FAMILY_SCHEMA", "agent_families", "browser_family", "classify", "os_family"]

CRAWLERS = "Crawlers"
UNKNOWN = "Unknown"
OTHERS = "Others"

#: ua-parser browser family → GoAccess browser category (others: ``Others``).
_BROWSERS = {
    "Chrome": "Chrome",
    "Chrome Mobile": "Chrome",
    "Chrome Mobile iOS": "Chrome",
    "Chrome Mobile WebView": "Chrome",
    "Chrome Frame": "MSIE",  # an Internet Explorer plug-in: "MSIE 8.0; … chromeframe"
    "Chromium": "Chrome",
    "HeadlessChrome": "Chrome",
    "Firefox": "Firefox",
    "Firefox Mobile": "Firefox",
    "Firefox iOS": "Firefox",
    "Firefox Beta": "Firefox",
    "Firefox Alpha": "Firefox",
    "Firefox Focus": "Firefox",
    "Iceweasel": "Firefox",
    "Waterfox": "Firefox",
    "Pale Moon": "Firefox",
    "IE": "MSIE",
    "IE Mobile": "MSIE",
    "Edge": "Edge",
    "Edge Mobile": "Edge",
    "Safari": "Safari",
    "Mobile Safari": "Safari",
    "Mobile Safari UI/WKWebView": "Safari",
    "Android": "Safari",  # the stock Android browser: "… Mobile Safari/534.30"
    "Opera": "Opera",
    "Opera Mini": "Opera",
    "Opera Mobile": "Opera",
    "Opera Coast": "Opera",
    "Brave": "Brave",
    "Vivaldi": "Vivaldi",
    "Yandex Browser": "Yandex.Browser",
    # feed readers, which GoAccess counts as "Feeds"
    "Tiny Tiny RSS": "Feeds",
    "Thunderbird": "Feeds",
    "Feedly": "Feeds",
    "NewsBlur": "Feeds",
    "Netvibes": "Feeds",
    "Liferea": "Feeds",
    "NetNewsWire": "Feeds",
    "Akregator": "Feeds",
}

#: ua-parser operating-system family → GoAccess category (others: ``Others``).
_SYSTEMS = {
    "Mac OS X": "Macintosh",
    "Mac OS": "Macintosh",
    "iOS": "iOS",
    "Android": "Android",
    "Chrome OS": "Chrome OS",
    "Linux": "Linux",
    "Ubuntu": "Linux",
    "Kubuntu": "Linux",
    "Debian": "Linux",
    "Fedora": "Linux",
    "CentOS": "Linux",
    "Red Hat": "Linux",
    "Gentoo": "Linux",
    "Mint": "Linux",
    "Linux Mint": "Linux",
    "openSUSE": "Linux",
    "SUSE": "Linux",
    "Slackware": "Linux",
    "Mandriva": "Linux",
    "Arch Linux": "Linux",
    "FreeBSD": "BSD",
    "OpenBSD": "BSD",
    "NetBSD": "BSD",
    "DragonFly BSD": "BSD",
    "Solaris": "Unix",
    "SunOS": "Unix",
    "AIX": "Unix",
    "HP-UX": "Unix",
    "IRIX": "Unix",
}

#: The columns :func:`agent_families` adds.
FAMILY_SCHEMA = StructType(
    [
        StructField("user_agent", StringType(), False),
        StructField("browser", StringType(), False),
        StructField("browser_version", StringType(), False),
        StructField("os", StringType(), False),
        StructField("os_version", StringType(), False),
    ]
)


def _named(family: str, *parts: str | None) -> str:
    """``Chrome`` and ``32``, ``0``, ``1700`` → ``Chrome 32.0.1700``; the family alone without
    a version."""
    version = ".".join(p for p in parts if p)
    return f"{family} {version}" if version else family


#: Engines GoAccess finds by their token when no browser of its list came first
#: (``… Dragon/36.1.1.21 Chrome/36.0.1985.97 Safari/537.36`` is Chrome to it): a family
#: without a category here is counted by the first of these its agent names.
_ENGINE_TOKENS = (("Chrome/", "Chrome"), ("Firefox/", "Firefox"))


def browser_family(family: str | None, user_agent: str) -> str:
    """GoAccess's browser category for ua-parser's browser ``family`` (None: no rule).

    Examples
    --------
    >>> browser_family("Dragon", "Mozilla/5.0 … Dragon/36.1.1.21 Chrome/36.0.1985.97 Safari/537.36")
    'Chrome'
    >>> browser_family("Lynx", "Lynx/2.8.8dev.3 libwww-FM/2.14 SSL-MM/1.4.1")
    'Others'
    """
    if family is None:
        return OTHERS if user_agent.startswith("Mozilla") else UNKNOWN
    if family.startswith("Opera"):
        return "Opera"
    if family in _BROWSERS:
        return _BROWSERS[family]
    return next((name for token, name in _ENGINE_TOKENS if token in user_agent), OTHERS)


def os_family(family: str | None) -> str:
    """GoAccess's operating-system category for ua-parser's OS ``family`` (None: no rule)."""
    if family is None:
        return UNKNOWN
    if family.startswith("Windows"):
        return "Windows"
    return _SYSTEMS.get(family, OTHERS)


def classify(user_agent: str, crawler: bool = False) -> tuple[str, str, str, str]:
    """The browser and OS categories of one user agent, each with its versioned child.

    Parameters
    ----------
    user_agent : str
        The ``User-Agent`` header.
    crawler : bool
        The agents table classes it as a crawler.

    Returns
    -------
    tuple of str
        ``(browser, browser_version, os, os_version)``: ``("Chrome", "Chrome 32.0.1700",
        "Macintosh", "Mac OS X 10.9")``; without a rule that names the browser, its child is
        its category (``Others``, ``Unknown``). A crawler is ``Crawlers`` in both, with its name
        and version as the child (``Googlebot 2.1``).
    """
    from ua_parser import parse

    result = parse(user_agent)
    ua, system = result.user_agent, result.os
    named = _named(ua.family, ua.major, ua.minor, ua.patch) if ua else UNKNOWN
    if crawler or (result.device is not None and result.device.family == "Spider"):
        bot = named if ua else user_agent.split(" ", 1)[0][:60] or UNKNOWN
        return CRAWLERS, bot, CRAWLERS, bot
    browser = browser_family(ua.family if ua else None, user_agent)
    if not ua:
        named = browser
    os_name = os_family(system.family if system else None)
    os_named = _named(system.family, system.major, system.minor) if system else UNKNOWN
    return browser, named, os_name, os_named


def _classify_frames(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    import pandas as pd

    for frame in frames:
        rows = [
            (ua, *classify(ua, bool(crawler)))
            for ua, crawler in zip(frame["user_agent"], frame["crawler"], strict=True)
        ]
        yield pd.DataFrame(rows, columns=FAMILY_SCHEMA.fieldNames())


def agent_families(user_agents: DataFrame, crawler: Column) -> DataFrame:
    """Classify distinct user agents into GoAccess's browser and OS families.

    Parameters
    ----------
    user_agents : DataFrame
        Batch DataFrame with ``user_agent`` (string), one row per distinct non-null user agent.
    crawler : Column
        Boolean: the user agent is a crawler by the agents reference table
        (:func:`logstream.reference.agent_class_column`).

    Returns
    -------
    DataFrame
        :data:`FAMILY_SCHEMA`: ``user_agent``, ``browser``, ``browser_version``, ``os``,
        ``os_version`` (strings), one row per input row. One pandas function
        (``mapInPandas``) runs ua-parser in the Python workers.
    """
    return user_agents.select(
        "user_agent", F.coalesce(crawler, F.lit(False)).alias("crawler")
    ).mapInPandas(_classify_frames, FAMILY_SCHEMA)
