"""User agents into GoAccess's browser and OS families (logstream.analytics.useragents), on
real user agents of the elastic Combined log."""

from __future__ import annotations

import pytest

from logstream.analytics.useragents import browser_family, classify, os_family

CASES = [
    (
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_9_1) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/32.0.1700.77 Safari/537.36",
        ("Chrome", "Chrome 32.0.1700", "Macintosh", "Mac OS X 10.9"),
    ),
    (
        "Mozilla/5.0 (Windows NT 6.1; WOW64; rv:27.0) Gecko/20100101 Firefox/27.0",
        ("Firefox", "Firefox 27.0", "Windows", "Windows 7"),
    ),
    (
        "Mozilla/4.0 (compatible; MSIE 8.0; Windows NT 5.1; Trident/4.0; chromeframe/32.0)",
        ("MSIE", "IE 8.0", "Windows", "Windows XP"),
    ),
    (
        "Mozilla/5.0 (Linux; U; Android 4.0.3; ko-kr; LG-L160L Build/IML74K) AppleWebkit/534.30 "
        "(KHTML, like Gecko) Version/4.0 Mobile Safari/534.30",
        ("Safari", "Android 4.0.3", "Android", "Android 4.0"),
    ),
    (
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        ("Crawlers", "Googlebot 2.1", "Crawlers", "Googlebot 2.1"),
    ),
    (  # a Chromium browser without a rule of its own: Chrome, as GoAccess counts it
        "Mozilla/5.0 (Windows NT 6.1; WOW64) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Dragon/36.1.1.21 Chrome/36.0.1985.97 Safari/537.36",
        ("Chrome", "Dragon 36.1.1", "Windows", "Windows 7"),
    ),
    ("Tiny Tiny RSS/1.11 (http://tt-rss.org/)", None),
    ("something nobody knows", ("Unknown", "Unknown", "Unknown", "Unknown")),
]


@pytest.mark.parametrize(("agent", "want"), CASES)
def test_a_real_user_agent_gets_goaccess_family_names(agent, want):
    got = classify(agent)
    if want is None:  # a feed reader: GoAccess's "Feeds"
        assert got[0] == "Feeds"
    else:
        assert got == want


def test_the_crawler_list_makes_a_crawler_of_both_panels():
    """Feedbin is a crawler by crawler-user-agents, not by ua-parser."""
    agent = "Feedbin - 1 subscribers"
    assert classify(agent, crawler=True) == ("Crawlers", "Feedbin", "Crawlers", "Feedbin")
    assert classify(agent, crawler=False) == ("Others", "Feedbin", "Unknown", "Unknown")


def test_unnamed_families_are_others_and_no_rule_is_unknown():
    assert browser_family("Midori", "Mozilla/5.0 Midori/0.2") == "Others"
    assert browser_family(None, "Mozilla/5.0 (X11)") == "Others"
    assert browser_family(None, "Java/1.6.0_26") == "Unknown"
    assert os_family("Windows Phone") == "Windows"
    assert os_family("Ubuntu") == "Linux"
    assert os_family("OpenBSD") == "BSD"
    assert os_family(None) == "Unknown"
