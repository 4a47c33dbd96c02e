"""Synthetic access-log traffic that looks like a real site, reproducible from a seed.

Each line advances a simulated event clock by an exponential gap with mean
``1 / (rate_per_s × daily_curve × flash_multiplier)``, so generation runs as fast as Python
allows and the output covers ``duration_s`` of simulated time. What a line is:

* **page views** by browsers (a pool of returning visitors, IPv4 and IPv6, real user agents):
  the page is drawn from the site's Zipf popularity law; internal, search, social or no
  referrer; a browser then fetches the page's **assets** (CSS, JS, images, favicon), which
  follow in the next lines, interleaved with other traffic;
* **crawlers** (Googlebot, bingbot … from their published address blocks) fetch pages uniformly
  at random, ``/robots.txt`` and ``/sitemap.xml``, no assets;
* **tools** (curl, wget, an uptime monitor sending ``HEAD /``), a few form ``POST`` s;
* **404 bursts**: a scanner probing ``/wp-login.php``, ``/.env`` … (``scan_fraction`` of the
  lines, in bursts of 20–60 probes);
* **flash crowds** (:class:`FlashCrowd`): during a window, the request rate is multiplied and
  the extra requests are page views of one page, from new clients, mostly with social
  referrers.

Status of every non-probe line: 404 (``not_found_fraction``; a page request then asks for a
broken link), 5xx (``server_error_fraction``), 304 (``not_modified_fraction``), else 200. So the
expected status mix over all lines is::

    404:  scan_fraction + (1 − scan_fraction) × not_found_fraction
    5xx:  (1 − scan_fraction) × server_error_fraction
    304:  (1 − scan_fraction) × not_modified_fraction

and among browser ``GET`` page views that are not 404, the page of rank *k* has share
``k^−s / Σ j^−s`` (:meth:`Site.page_share <logstream.generate.site.Site.page_share>`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

from logstream.generate.config import (
    DEFAULT_FLASH_RANK,
    DEFAULT_START,
    FlashCrowd,
    GeneratedLine,
    TrafficConfig,
)
from logstream.generate.draws import LineDraws
from logstream.generate.site import Page, Site, build_site
from logstream.replay.reader import Record
from logstream.replay.timeshift import format_clf_time

__all__ = [
    "DEFAULT_FLASH_RANK",
    "DEFAULT_START",
    "FlashCrowd",
    "GeneratedLine",
    "TrafficConfig",
    "TrafficGenerator",
    "generate_lines",
]


class TrafficGenerator:
    """Iterate over synthetic lines for a :class:`TrafficConfig`.

    Parameters
    ----------
    config : TrafficConfig

    Attributes
    ----------
    site : Site
        The site the traffic is for (built from the same seed).
    flash_pages : tuple of str
        The page of each flash crowd, resolved.

    Examples
    --------
    >>> gen = TrafficGenerator(TrafficConfig(max_lines=2, seed=7))
    >>> len(list(gen.lines()))
    2
    """

    def __init__(self, config: TrafficConfig | None = None) -> None:
        self.config = config or TrafficConfig()
        c = self.config
        self.site: Site = build_site(
            n_pages=c.n_pages, zipf_exponent=c.zipf_exponent, seed=c.seed, host=c.host
        )
        default_flash = self.site.pages[min(DEFAULT_FLASH_RANK, len(self.site.pages)) - 1].path
        self.flash_pages = tuple(f.page or default_flash for f in c.flash_crowds)

    def _flash_page(self, path: str) -> Page:
        page = self.site.page(path)
        if page is not None:
            return page
        return Page(
            path=path,
            section="flash",
            size_bytes=24_310,
            assets=(
                "/static/css/site.css",
                "/static/js/app.js",
                "/static/img/logo.svg",
                "/favicon.ico",
            ),
        )

    def __iter__(self) -> Iterator[GeneratedLine]:
        """Yield the lines in event-time order.

        The event clock advances by exponential gaps whose rate follows the daily curve and
        the flash crowds in progress; each line is then drawn by :class:`LineDraws` (a probe,
        else a request) and written in the configured format.
        """
        c = self.config
        rng = random.Random(f"logstream-traffic:{c.seed}")
        combined = c.log_format == "combined"
        offset_minutes = c.offset_minutes
        start_s = c.start.timestamp()
        end_s = math.inf if c.duration_s is None else start_s + c.duration_s
        max_lines = c.max_lines if c.max_lines is not None else -1
        flashes = [
            (
                start_s + f.start_offset_s,
                start_s + f.start_offset_s + f.duration_s,
                f.multiplier - 1,
                self._flash_page(p),
            )
            for f, p in zip(c.flash_crowds, self.flash_pages, strict=True)
        ]
        draws = LineDraws(c, self.site, rng)

        amplitude = c.daily_amplitude
        two_pi_over_day = 2 * math.pi / 86400.0
        local_shift = offset_minutes * 60 - c.peak_hour * 3600
        t = start_s
        count = 0
        stamp_second = -1
        stamp = ""

        while count != max_lines:
            extra, active = _flash_load(flashes, t)
            curve = 1.0 + amplitude * math.cos((t + local_shift) * two_pi_over_day)
            t += rng.expovariate(c.rate_per_s * curve * (1.0 + extra))
            if t >= end_s:
                return
            count += 1
            second = int(t)
            if second != stamp_second:
                stamp_second = second
                stamp = format_clf_time(second, offset_minutes)
            line = draws.probe() or draws.request(t, active, extra)
            kind, ip, ua, proto, method, path, query, ref, status, size = line
            size_text = str(size) if size else "-"
            if combined:
                text = (
                    f'{ip} - - [{stamp}] "{method} {path}{query} {proto}" {status} {size_text} '
                    f'"{ref}" "{ua}"'
                )
            else:
                text = f'{ip} - - [{stamp}] "{method} {path}{query} {proto}" {status} {size_text}'
            yield GeneratedLine(t, text, kind)

    def lines(self) -> Iterator[str]:
        """Yield just the line texts."""
        for line in self:
            yield line.text

    def records(self) -> Iterator[Record]:
        """Yield :class:`~logstream.replay.reader.Record` s for the replay engine (paced sinks)."""
        for number, line in enumerate(self, start=1):
            yield Record(
                text=line.text, event_s=line.event_s, source="generate", line_number=number
            )


def _flash_load(
    flashes: list[tuple[float, float, float, Page]], t: float
) -> tuple[float, tuple[float, Page] | None]:
    """The flash crowds in progress at ``t``: the sum of their extra rate factors, and the
    strongest one as ``(extra_rate, page)`` (the first of equals; None for none)."""
    extra = 0.0
    active = None
    for f_start, f_end, f_extra, f_page in flashes:
        if f_start <= t < f_end:
            extra += f_extra
            active = (f_extra, f_page) if active is None or f_extra > active[0] else active
    return extra, active


def generate_lines(config: TrafficConfig | None = None) -> Iterator[str]:
    """Yield the lines of :class:`TrafficGenerator` for ``config`` (default configuration)."""
    return TrafficGenerator(config).lines()
