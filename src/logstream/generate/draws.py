"""What one generated line is: its client, its request and its status, drawn from a seeded RNG.

:class:`LineDraws` holds the client pools (returning visitors, crawler and tool addresses), the
assets browsers still have to fetch, the scanner burst in progress and each visitor's last page
view, and draws one request at a time. :class:`~logstream.generate.traffic.TrafficGenerator`
owns the event clock and the line text; the order of every draw here is part of what a seed
reproduces, so it must not change (see the module docstring of
:mod:`logstream.generate.traffic` for the traffic this models).
"""

from __future__ import annotations

import ipaddress
import random
from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from logstream.generate.agents import BROWSERS, CRAWLERS, SCANNERS, TOOLS
from logstream.generate.site import PROBE_PATHS, Page, Site

if TYPE_CHECKING:
    from logstream.generate.config import TrafficConfig

__all__ = ["LineDraws", "Request"]

#: A drawn request: ``(kind, ip, user_agent, protocol, method, path, query, referrer, status,
#: size_bytes)``; ``query`` is empty or starts with ``?``, ``size_bytes`` is 0 for no body.
Request = tuple[str, str, str, str, str, str, str, str, int, int]

_MEAN_BURST = 40  # probes per 404 burst, mean of randint(20, 60)
_SESSION_S = 1800.0
_SEARCH = (
    ("https://www.google.com/", 45),
    ("-", 30),
    ("https://www.bing.com/", 8),
    ("https://duckduckgo.com/", 4),
    ("https://www.facebook.com/", 4),
    ("https://t.co/", 4),
    ("https://www.reddit.com/", 3),
    ("https://news.ycombinator.com/", 2),
)
_SOCIAL = (
    ("https://news.ycombinator.com/", 35),
    ("https://t.co/", 25),
    ("https://www.reddit.com/r/technology/", 20),
    ("https://www.facebook.com/", 10),
    ("-", 10),
)
_QUERY_WORDS = ("pricing", "install", "battery", "warranty", "api", "login", "shipping", "solar")
_ERRORS = ((500, 612), (502, 568), (503, 299), (504, 578))
_NOT_FOUND_BYTES = 1_245
_FIXED_SIZES = {"/robots.txt": 68, "/sitemap.xml": 18_422, "/feed.xml": 9_310}


def _ipv4(rng: random.Random) -> str:
    while True:
        a = rng.randint(1, 223)
        if a not in (10, 100, 127, 169, 172, 192, 198):
            return f"{a}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"


_V6_PREFIXES = (0x2A02, 0x2600, 0x2001, 0x2A01, 0x2607, 0x2409, 0x2804, 0x2A00)


def _ipv6(rng: random.Random) -> str:
    value = rng.choice(_V6_PREFIXES) << 112 | rng.getrandbits(48) << 64 | rng.getrandbits(64)
    return str(ipaddress.IPv6Address(value))


def _accumulate(weights: Iterable[float]) -> Iterator[float]:
    total = 0.0
    for w in weights:
        total += w
        yield total


def _pick(rng: random.Random, cum_weights: list[float]) -> int:
    """Index drawn with the cumulative weights ``cum_weights`` (binary search)."""
    return min(bisect_right(cum_weights, rng.random() * cum_weights[-1]), len(cum_weights) - 1)


class LineDraws:
    """The draws of the generated lines' clients, requests and statuses, from one RNG.

    Building it draws the client pools; then each line is :meth:`probe` (a scanner's probe, or
    None) or else :meth:`request`. Every draw comes from ``rng`` in a fixed order, so a seed
    gives the same lines.

    Parameters
    ----------
    config : TrafficConfig
        The shares of crawlers, tools, IPv6 clients, 404/5xx/304 answers and probes, and the
        size of the visitor pool.
    site : Site
        The site the requests are for.
    rng : random.Random
        The generator's RNG, shared with its event clock.
    """

    def __init__(self, config: TrafficConfig, site: Site, rng: random.Random) -> None:
        c = config
        self.config, self.site, self.rng = c, site, rng
        self.base = f"https://{site.host}"
        self.pages = site.pages
        self.page_cum = list(_accumulate(site.page_weights))
        self.n_pages = len(self.pages)
        self.dead = site.dead_paths
        self.asset_sizes = site.asset_sizes

        # Clients.
        self.browser_cum = list(_accumulate(w for _, w, _ in BROWSERS))
        self.visitors: list[tuple[str, str, str]] = []
        for _ in range(c.n_visitors):
            ua, _, proto = BROWSERS[_pick(rng, self.browser_cum)]
            ip = _ipv6(rng) if rng.random() < c.ipv6_fraction else _ipv4(rng)
            self.visitors.append((ip, ua, proto))
        self.crawler_cum = list(_accumulate(cr.weight for cr in CRAWLERS))
        self.crawler_ips = [
            [f"{rng.choice(cr.ipv4_prefixes)}.{rng.randint(1, 254)}" for _ in range(6)]
            + (
                [
                    str(
                        ipaddress.IPv6Address(
                            int(ipaddress.IPv6Address(cr.ipv6_prefix)) + rng.getrandbits(16)
                        )
                    )
                ]
                if cr.ipv6_prefix and c.ipv6_fraction > 0
                else []
            )
            for cr in CRAWLERS
        ]
        self.tool_ips = [
            f"{rng.choice((3, 18, 34, 35, 52, 54))}.{rng.randint(0, 255)}."
            f"{rng.randint(0, 255)}.{rng.randint(1, 254)}"
            for _ in range(8)
        ]
        self.search_cum = list(_accumulate(w for _, w in _SEARCH))
        self.social_cum = list(_accumulate(w for _, w in _SOCIAL))
        self.last_view: dict[int, tuple[str, float]] = {}

        # Status thresholds.
        self.t404 = c.not_found_fraction
        self.t5xx = self.t404 + c.server_error_fraction
        self.t304 = self.t5xx + c.not_modified_fraction
        self.crawler_share = c.crawler_fraction
        self.tool_share = self.crawler_share + c.tool_fraction
        # 404 bursts: a renewal process whose probes are scan_fraction of all lines.
        self.burst_start_p = (
            0.0
            if c.scan_fraction == 0
            else 1.0 / (_MEAN_BURST / c.scan_fraction - 2 * _MEAN_BURST + 2)
        )
        self.burst_left = 0
        self.burst_client = ("", "")

        self.pending: deque[tuple[str, str, str, str, str]] = deque()  # ip, path, ref, ua, proto

    def probe(self) -> Request | None:
        """The next line if it is a scanner's probe: a burst in progress, or starting now.

        Returns
        -------
        Request or None
            A ``probe`` request answered 404; None when this line is not a probe (then draw
            :meth:`request`).
        """
        rng = self.rng
        if self.burst_left == 0 and self.burst_start_p and rng.random() < self.burst_start_p:
            self.burst_left = rng.randint(20, 60)
            self.burst_client = (_ipv4(rng), rng.choice(SCANNERS))
        elif not (self.burst_left > 0 and rng.random() < 0.5):
            return None
        self.burst_left -= 1
        ip, ua = self.burst_client
        path = rng.choice(PROBE_PATHS)
        method = "GET"
        if path in ("/wp-login.php", "/xmlrpc.php") and rng.random() < 0.5:
            method = "POST"
        return "probe", ip, ua, "HTTP/1.1", method, path, "", "-", 404, _NOT_FOUND_BYTES

    def request(self, t: float, flash: tuple[float, Page] | None, extra: float) -> Request:
        """A line that is not a probe: a pending asset, else a new request; then its status.

        Parameters
        ----------
        t : float
            Event time of the line, seconds since the Unix epoch (a visitor's session is
            measured with it).
        flash : tuple of (float, Page) or None
            The strongest flash crowd in progress, ``(extra_rate, page)``; None for none.
        extra : float
            Sum of the extra rate factors (``multiplier − 1``) of the flash crowds in progress:
            a new request is a flash-crowd view with probability ``extra / (1 + extra)``.

        Returns
        -------
        Request
            Of kind ``asset``, ``flash``, ``crawler``, ``tool``, ``post`` or ``page``.
        """
        rng = self.rng
        pending = self.pending
        n_pending = len(pending)
        if n_pending and (n_pending > 40 or rng.random() * (n_pending + 2) < n_pending):
            ip, path, ref, ua, proto = pending.popleft()
            kind, method, query = "asset", "GET", ""
        else:
            u = rng.random()
            if flash is not None and u * (1.0 + extra) < extra:
                kind, ip, ua, proto, method, path, query, ref = self._flash_view(flash[1])
            else:
                u = rng.random()
                if u < self.crawler_share:
                    kind, ip, ua, proto, method, path, query, ref = self._crawler()
                elif u < self.tool_share:
                    kind, ip, ua, proto, method, path, query, ref = self._tool()
                else:
                    kind, ip, ua, proto, method, path, query, ref = self._visitor(t)
        status, size, path, query = self._status(kind, method, path, query)
        return kind, ip, ua, proto, method, path, query, ref, status, size

    def _flash_view(self, page: Page) -> tuple[str, str, str, str, str, str, str, str]:
        """A new client viewing the trending page, mostly from a social referrer."""
        rng = self.rng
        ip = _ipv6(rng) if rng.random() < self.config.ipv6_fraction else _ipv4(rng)
        ua, _, proto = BROWSERS[_pick(rng, self.browser_cum)]
        ref = _SOCIAL[_pick(rng, self.social_cum)][0]
        path = page.path
        for asset in page.assets:
            self.pending.append((ip, asset, self.base + path, ua, proto))
        return "flash", ip, ua, proto, "GET", path, "", ref

    def _crawler(self) -> tuple[str, str, str, str, str, str, str, str]:
        """A crawler: a page uniformly at random, ``/robots.txt`` or ``/sitemap.xml``."""
        rng = self.rng
        i = _pick(rng, self.crawler_cum)
        ip = rng.choice(self.crawler_ips[i])
        r = rng.random()
        path = (
            "/robots.txt"
            if r < 0.03
            else "/sitemap.xml"
            if r < 0.05
            else self.pages[rng.randrange(self.n_pages)].path
        )
        return "crawler", ip, CRAWLERS[i].user_agent, "HTTP/1.1", "GET", path, "", "-"

    def _tool(self) -> tuple[str, str, str, str, str, str, str, str]:
        """A command-line tool (the feed or a page), or an uptime monitor's ``HEAD /``."""
        rng = self.rng
        ua = rng.choice(TOOLS)
        ip = rng.choice(self.tool_ips)
        method = "GET"
        if "UptimeRobot" in ua:
            method, path = "HEAD", "/"
        else:
            path = "/feed.xml" if rng.random() < 0.5 else self.pages[_pick(rng, self.page_cum)].path
        return "tool", ip, ua, "HTTP/1.1", method, path, "", "-"

    def _visitor(self, t: float) -> tuple[str, str, str, str, str, str, str, str]:
        """A returning visitor: a form ``POST``, or a page view whose assets follow."""
        rng = self.rng
        v = int(self.config.n_visitors * rng.random() ** 2)
        ip, ua, proto = self.visitors[v]
        if rng.random() < 0.004:
            path = rng.choice(("/search/", "/support/contact.html"))
            return "post", ip, ua, proto, "POST", path, "", self.base + path
        page = self.pages[_pick(rng, self.page_cum)]
        path = page.path
        previous = self.last_view.get(v)
        in_session = previous is not None and t - previous[1] < _SESSION_S
        if in_session and rng.random() < 0.8:
            assert previous is not None
            ref = self.base + previous[0]
        else:
            ref = _SEARCH[_pick(rng, self.search_cum)][0]
        self.last_view[v] = (path, t)
        query = ""
        if path == "/search/":
            query = "?q=" + "+".join(rng.sample(_QUERY_WORDS, rng.randint(1, 2)))
        elif ref.startswith(("https://t.co/", "https://www.facebook.com/")):
            query = "?utm_source=social&utm_medium=referral"
        # Within a session the shared assets are cached: only the page's own images are fetched.
        for asset in page.assets:
            if not in_session or asset.startswith("/images/"):
                self.pending.append((ip, asset, self.base + path, ua, proto))
        return "page", ip, ua, proto, "GET", path, query, ref

    def _status(self, kind: str, method: str, path: str, query: str) -> tuple[int, int, str, str]:
        """Status and size of a non-probe line; a 404 page request asks for a broken link.

        Returns ``(status, size_bytes, path, query)``.
        """
        rng = self.rng
        s = rng.random()
        if s < self.t404:
            status, size = 404, _NOT_FOUND_BYTES
            if kind != "asset":  # a page line (every kind but a browser's asset)
                path, query = rng.choice(self.dead), ""
        elif s < self.t5xx:
            status, size = _ERRORS[rng.randrange(4)]
        elif s < self.t304:
            status, size = 304, 0
        else:
            status = 200
            if kind == "asset":
                size = self.asset_sizes.get(path, 2_048)
            elif path in _FIXED_SIZES:
                size = _FIXED_SIZES[path]
            else:
                page_obj = self.site.page(path)
                size = page_obj.size_bytes if page_obj is not None else 24_310
                if query or path.endswith("/"):
                    size += rng.randint(-300, 300)
            if method == "HEAD":
                size = 0
            elif method == "POST":
                size = 3_184
        return status, size, path, query
