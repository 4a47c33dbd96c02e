"""Real user-agent strings and client address blocks for synthetic traffic.

The strings are copied from what browsers and crawlers send (vendor documentation and real
logs); the crawler address blocks are ranges their operators publish. Weights are rough market
shares, for realism only.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BROWSERS", "CRAWLERS", "SCANNERS", "TOOLS", "Crawler"]

#: (user agent, weight, HTTP protocol the browser uses)
BROWSERS: tuple[tuple[str, float, str], ...] = (
    (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/124.0.0.0 Safari/537.36",
        30.0,
        "HTTP/2.0",
    ),
    (
        "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/124.0.0.0 Mobile Safari/537.36",
        18.0,
        "HTTP/2.0",
    ),
    (
        "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4_1 like Mac OS X) AppleWebKit/605.1.15 "
        "(KHTML, like Gecko) Version/17.4.1 Mobile/15E148 Safari/604.1",
        16.0,
        "HTTP/2.0",
    ),
    (
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/124.0.0.0 Safari/537.36",
        8.0,
        "HTTP/2.0",
    ),
    (
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
        "Version/17.4.1 Safari/605.1.15",
        6.0,
        "HTTP/2.0",
    ),
    (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/124.0.0.0 Safari/537.36 Edg/124.0.2478.80",
        7.0,
        "HTTP/2.0",
    ),
    (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:125.0) Gecko/20100101 Firefox/125.0",
        5.0,
        "HTTP/1.1",
    ),
    ("Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0", 2.0, "HTTP/1.1"),
    (
        "Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) "
        "SamsungBrowser/24.0 Chrome/117.0.0.0 Mobile Safari/537.36",
        3.0,
        "HTTP/2.0",
    ),
    (
        "Mozilla/5.0 (iPad; CPU OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
        "Version/17.4 Mobile/15E148 Safari/604.1",
        3.0,
        "HTTP/2.0",
    ),
    (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/124.0.0.0 Safari/537.36 OPR/109.0.0.0",
        2.0,
        "HTTP/1.1",
    ),
)


@dataclass(frozen=True)
class Crawler:
    """A web crawler: its user agent, weight and published address blocks.

    Attributes
    ----------
    name : str
    user_agent : str
    weight : float
        Share among crawler requests (relative).
    ipv4_prefixes : tuple of str
        ``a.b.c`` prefixes; the last octet is drawn.
    ipv6_prefix : str or None
        A ``/64``-style prefix such as ``2001:4860:4801:10::``; the interface id is drawn.
    """

    name: str
    user_agent: str
    weight: float
    ipv4_prefixes: tuple[str, ...]
    ipv6_prefix: str | None = None


CRAWLERS: tuple[Crawler, ...] = (
    Crawler(
        "Googlebot",
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        30.0,
        ("66.249.66", "66.249.68", "66.249.79"),
        "2001:4860:4801:10::",
    ),
    Crawler(
        "Googlebot-Mobile",
        "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 "
        "(KHTML, like Gecko) Chrome/124.0.6367.118 Mobile Safari/537.36 "
        "(compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        20.0,
        ("66.249.66", "66.249.70"),
        "2001:4860:4801:2b::",
    ),
    Crawler(
        "bingbot",
        "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
        18.0,
        ("157.55.39", "207.46.13", "40.77.167"),
    ),
    Crawler(
        "YandexBot",
        "Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)",
        6.0,
        ("5.255.253", "213.180.203"),
    ),
    Crawler(
        "Baiduspider",
        "Mozilla/5.0 (compatible; Baiduspider/2.0; +http://www.baidu.com/search/spider.html)",
        4.0,
        ("220.181.108", "116.179.32"),
    ),
    Crawler(
        "DuckDuckBot",
        "DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)",
        3.0,
        ("20.191.45", "40.88.21"),
    ),
    Crawler(
        "Applebot",
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_5) AppleWebKit/605.1.15 (KHTML, like Gecko) "
        "Version/13.1.1 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)",
        5.0,
        ("17.241.219", "17.22.237"),
    ),
    Crawler(
        "AhrefsBot",
        "Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)",
        8.0,
        ("54.36.148", "51.222.253"),
    ),
    Crawler(
        "SemrushBot",
        "Mozilla/5.0 (compatible; SemrushBot/7~bl; +http://www.semrush.com/bot.html)",
        6.0,
        ("185.191.171",),
    ),
)

#: User agents of vulnerability scanners (the 404 bursts).
SCANNERS: tuple[str, ...] = (
    "Mozilla/5.0 zgrab/0.x",
    "python-requests/2.31.0",
    "Go-http-client/1.1",
    "Mozilla/5.0 (compatible; Nmap Scripting Engine; https://nmap.org/book/nse.html)",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/81.0.4044.129 Safari/537.36",
)

#: Command-line clients and monitors.
TOOLS: tuple[str, ...] = (
    "curl/8.5.0",
    "Wget/1.21.4",
    "python-requests/2.31.0",
    "Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)",
)
