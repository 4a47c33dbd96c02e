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
from dataclasses import dataclass
from datetime import UTC, datetime

from logstream.errors import ConfigError
from logstream.generate.draws import LineDraws
from logstream.generate.site import Page, Site, build_site
from logstream.replay.reader import Record
from logstream.replay.timeshift import format_clf_time
from logstream.replay.units import parse_duration

__all__ = [
    "DEFAULT_FLASH_RANK",
    "DEFAULT_START",
    "FlashCrowd",
    "GeneratedLine",
    "TrafficConfig",
    "TrafficGenerator",
    "generate_lines",
]

#: Default start of simulated time: a fixed instant, so output does not depend on the day.
DEFAULT_START = datetime(2024, 7, 1, tzinfo=UTC)
#: A flash crowd with no page picks the page of this popularity rank (or the last page).
DEFAULT_FLASH_RANK = 25
_FORMATS = ("common", "combined")


@dataclass(frozen=True)
class FlashCrowd:
    """A page that suddenly trends: more traffic, all of the extra for one page.

    Attributes
    ----------
    start_offset_s : float
        When it starts, seconds after the generator's start.
    duration_s : float
        How long it lasts, seconds (> 0).
    multiplier : float
        Factor on the site's request rate while it lasts (≥ 1): with 8, the site gets 8× its
        normal rate, and the extra 7/8 of the requests are page views of ``page`` (plus the
        assets those browsers load).
    page : str or None
        URL path of the trending page (a page of the site or a new one); None picks the page of
        popularity rank :data:`DEFAULT_FLASH_RANK`.

    Raises
    ------
    ConfigError
        When a value is out of range.
    """

    start_offset_s: float
    duration_s: float
    multiplier: float
    page: str | None = None

    def __post_init__(self) -> None:
        if self.start_offset_s < 0 or not math.isfinite(self.start_offset_s):
            raise ConfigError(f"flash crowd start {self.start_offset_s} must be ≥ 0 seconds")
        if not (0 < self.duration_s < math.inf):
            raise ConfigError(f"flash crowd duration {self.duration_s} must be > 0 seconds")
        if not (1 <= self.multiplier < math.inf):
            raise ConfigError(f"flash crowd multiplier {self.multiplier} must be ≥ 1")
        if self.page is not None and (not self.page.startswith("/") or " " in self.page):
            raise ConfigError(f"flash crowd page {self.page!r} must be a URL path such as /news/")

    @classmethod
    def parse(cls, spec: str) -> FlashCrowd:
        """Read ``START,DURATION,MULTIPLIER[,PAGE]``, e.g. ``30m,10m,8,/news/launch.html``.

        Raises
        ------
        ConfigError
            When the spec does not have 3 or 4 fields or a field is invalid.
        """
        parts = [p.strip() for p in spec.split(",")]
        if len(parts) not in (3, 4):
            raise ConfigError(
                f"--flash-crowd {spec!r}: expected START,DURATION,MULTIPLIER[,PAGE] "
                "such as 30m,10m,8,/news/launch.html"
            )
        try:
            multiplier = float(parts[2])
        except ValueError:
            raise ConfigError(
                f"--flash-crowd {spec!r}: multiplier {parts[2]!r} is not a number"
            ) from None
        return cls(
            start_offset_s=parse_duration(parts[0], option="--flash-crowd start"),
            duration_s=parse_duration(parts[1], option="--flash-crowd duration"),
            multiplier=multiplier,
            page=parts[3] if len(parts) == 4 and parts[3] else None,
        )


@dataclass(frozen=True)
class TrafficConfig:
    """What to generate.

    Attributes
    ----------
    rate_per_s : float
        Mean lines per simulated second at the daily average (> 0).
    duration_s : float or None
        Simulated time to cover, seconds; None for no limit (then set ``max_lines`` or stop
        iterating).
    max_lines : int or None
        Stop after this many lines.
    seed : int
        Same seed, same configuration → the same lines, byte for byte.
    start : datetime
        Aware start of simulated time; its UTC offset is the offset written in the lines.
    log_format : str
        ``combined`` (with referrer and user agent) or ``common``.
    n_pages : int
        Pages of the site.
    zipf_exponent : float
        Popularity law exponent.
    daily_amplitude : float
        Depth of the daily curve, 0 ≤ a < 1: the rate is ``1 + a·cos(2π(h − peak_hour)/24)``
        times ``rate_per_s`` at local hour ``h`` (mean over a day: 1).
    peak_hour : float
        Local hour of the daily peak.
    crawler_fraction : float
        Share of new requests made by crawlers.
    tool_fraction : float
        Share of new requests made by command-line tools and monitors.
    ipv6_fraction : float
        Share of IPv6 clients among visitors.
    not_found_fraction, server_error_fraction, not_modified_fraction : float
        Share of 404, 5xx and 304 answers among non-probe lines.
    scan_fraction : float
        Share of lines that are scanner probes in 404 bursts.
    flash_crowds : tuple of FlashCrowd
    host : str
        Site host name, in referrers.
    n_visitors : int
        Size of the pool of returning browser clients.

    Raises
    ------
    ConfigError
        When a value is out of range.
    """

    rate_per_s: float = 20.0
    duration_s: float | None = 3600.0
    max_lines: int | None = None
    seed: int = 0
    start: datetime = DEFAULT_START
    log_format: str = "combined"
    n_pages: int = 300
    zipf_exponent: float = 1.0
    daily_amplitude: float = 0.5
    peak_hour: float = 14.0
    crawler_fraction: float = 0.12
    tool_fraction: float = 0.01
    ipv6_fraction: float = 0.2
    not_found_fraction: float = 0.02
    server_error_fraction: float = 0.003
    not_modified_fraction: float = 0.08
    scan_fraction: float = 0.01
    flash_crowds: tuple[FlashCrowd, ...] = ()
    host: str = "www.example.org"
    n_visitors: int = 5_000

    def __post_init__(self) -> None:
        if not (0 < self.rate_per_s < math.inf):
            raise ConfigError(f"--rate must be a positive number, got {self.rate_per_s}")
        if self.duration_s is not None and not (0 < self.duration_s < math.inf):
            raise ConfigError(f"--duration must be positive, got {self.duration_s}")
        if self.max_lines is not None and self.max_lines < 1:
            raise ConfigError(f"--lines must be at least 1, got {self.max_lines}")
        if self.start.tzinfo is None or self.start.utcoffset() is None:
            raise ConfigError("--start must be an aware date-time (with Z or an offset)")
        if self.log_format not in _FORMATS:
            raise ConfigError(f"--format {self.log_format!r}: use common or combined")
        if not 0 <= self.daily_amplitude < 1:
            raise ConfigError(f"daily_amplitude must be in [0, 1), got {self.daily_amplitude}")
        if self.n_visitors < 1:
            raise ConfigError(f"n_visitors must be at least 1, got {self.n_visitors}")
        for name in (
            "crawler_fraction",
            "tool_fraction",
            "ipv6_fraction",
            "not_found_fraction",
            "server_error_fraction",
            "not_modified_fraction",
        ):
            if not 0 <= getattr(self, name) <= 1:
                raise ConfigError(f"{name} must be between 0 and 1, got {getattr(self, name)}")
        if self.crawler_fraction + self.tool_fraction > 1:
            raise ConfigError("crawler_fraction + tool_fraction must not exceed 1")
        if self.not_found_fraction + self.server_error_fraction + self.not_modified_fraction > 1:
            raise ConfigError("the 404, 5xx and 304 fractions must not add up to more than 1")
        if not 0 <= self.scan_fraction < 0.5:
            raise ConfigError(f"scan_fraction must be in [0, 0.5), got {self.scan_fraction}")

    @property
    def offset_minutes(self) -> int:
        """UTC offset of ``start``, in minutes (written in every line)."""
        offset = self.start.utcoffset()
        assert offset is not None
        return int(offset.total_seconds() // 60)

    def expected_status_shares(self) -> dict[str, float]:
        """Expected share of all lines answered 404, 5xx and 304 (see the module docstring)."""
        rest = 1 - self.scan_fraction
        return {
            "404": self.scan_fraction + rest * self.not_found_fraction,
            "5xx": rest * self.server_error_fraction,
            "304": rest * self.not_modified_fraction,
        }


@dataclass(frozen=True, slots=True)
class GeneratedLine:
    """One generated line.

    Attributes
    ----------
    event_s : float
        Simulated event time, seconds since the Unix epoch (the line shows it floored).
    text : str
        The log line, without line ending.
    kind : str
        ``page``, ``asset``, ``crawler``, ``tool``, ``post``, ``probe`` or ``flash``.
    """

    event_s: float
    text: str
    kind: str


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
