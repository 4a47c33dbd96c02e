"""What :mod:`logstream.generate.traffic` generates: its settings and its lines.

:class:`TrafficConfig` (rates, mix, duration, seed), :class:`FlashCrowd` (a window of extra
traffic to one page) and :class:`GeneratedLine` (one line and its simulated event time). They
sit below the generator and its draws (:mod:`logstream.generate.draws`), which both read them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

from logstream.errors import ConfigError
from logstream.replay.units import parse_duration

__all__ = ["DEFAULT_FLASH_RANK", "DEFAULT_START", "FlashCrowd", "GeneratedLine", "TrafficConfig"]

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
