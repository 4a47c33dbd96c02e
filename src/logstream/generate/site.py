"""A synthetic web site: a tree of pages ranked by Zipf popularity, with their static assets.

The site is built from a seed, so the same seed gives the same pages, sizes and assets. Pages
end in ``/`` or ``.html`` (what logstream counts as content); assets (``.css``, ``.js``,
images, ``/favicon.ico``) are what a browser fetches after a page. Page popularity follows a
Zipf law: the page of rank *k* (1-based) is viewed with weight ``k ** -zipf_exponent``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from logstream.errors import ConfigError

__all__ = ["PROBE_PATHS", "Page", "Site", "build_site", "zipf_weights"]

_SECTIONS = ("news", "products", "docs", "blog", "support", "events", "about", "careers")
_SECTION_WEIGHTS = (22, 14, 20, 16, 10, 6, 2, 4)
_WORDS = (
    "solar",
    "launch",
    "update",
    "guide",
    "pricing",
    "release",
    "notes",
    "team",
    "winter",
    "summer",
    "river",
    "cloud",
    "garden",
    "battery",
    "install",
    "network",
    "privacy",
    "security",
    "mobile",
    "design",
    "city",
    "festival",
    "market",
    "report",
    "annual",
    "open",
    "source",
    "data",
    "map",
    "travel",
    "recipe",
    "coffee",
    "bike",
    "train",
    "museum",
    "library",
    "music",
    "science",
    "space",
    "ocean",
    "forest",
    "energy",
    "health",
    "school",
    "history",
    "future",
    "quick",
    "start",
    "advanced",
    "tips",
    "review",
    "compare",
    "new",
    "best",
    "local",
    "events",
    "workshop",
    "webinar",
    "community",
    "partners",
    "api",
    "reference",
    "tutorial",
    "faq",
    "account",
    "billing",
    "shipping",
    "returns",
    "warranty",
    "careers",
    "office",
    "visit",
)
_FIXED_PAGES = {
    "about": ("/about/team.html", "/about/contact.html", "/about/history.html"),
    "support": ("/support/contact.html",),
}

#: What vulnerability scanners ask for (every answer is a 404).
PROBE_PATHS: tuple[str, ...] = (
    "/wp-login.php",
    "/wp-admin/",
    "/xmlrpc.php",
    "/.env",
    "/.git/config",
    "/.git/HEAD",
    "/admin.php",
    "/administrator/",
    "/phpmyadmin/",
    "/pma/",
    "/config.php",
    "/backup.zip",
    "/backup.sql",
    "/db.sql",
    "/server-status",
    "/cgi-bin/test.cgi",
    "/.aws/credentials",
    "/vendor/phpunit/phpunit/src/Util/PHP/eval-stdin.php",
    "/solr/admin/info/system",
    "/actuator/health",
    "/actuator/env",
    "/wp-content/plugins/revslider/readme.txt",
    "/owa/auth/logon.aspx",
    "/remote/login",
    "/HNAP1/",
    "/boaform/admin/formLogin",
    "/.DS_Store",
    "/config.json",
    "/api/v1/pods",
    "/console/",
    "/jenkins/login",
    "/manager/html",
)


def zipf_weights(n: int, exponent: float) -> list[float]:
    """Return the Zipf weights ``k ** -exponent`` for ranks ``k = 1 … n``."""
    return [k**-exponent for k in range(1, n + 1)]


@dataclass(frozen=True)
class Page:
    """One page of the site.

    Attributes
    ----------
    path : str
        URL path, ending in ``/`` or ``.html``.
    section : str
        Top-level section (``news``, ``docs`` …; ``home`` for ``/``).
    size_bytes : int
        Size of the page body, bytes.
    assets : tuple of str
        Paths of the assets a browser loads with the page, in load order.
    """

    path: str
    section: str
    size_bytes: int
    assets: tuple[str, ...]


@dataclass(frozen=True)
class Site:
    """A site: pages in popularity-rank order, assets, and paths that do not exist.

    Attributes
    ----------
    host : str
        Host name used in internal referrers (``https://{host}/…``).
    pages : tuple of Page
        Pages by popularity rank: ``pages[0]`` is rank 1.
    asset_sizes : dict of str to int
        Size in bytes of every asset path.
    dead_paths : tuple of str
        Broken links: paths that answer 404 (old articles, typos, missing icons).
    zipf_exponent : float
        Exponent of the popularity law.
    """

    host: str
    pages: tuple[Page, ...]
    asset_sizes: dict[str, int]
    dead_paths: tuple[str, ...]
    zipf_exponent: float
    _by_path: dict[str, Page] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_path", {p.path: p for p in self.pages})

    def page(self, path: str) -> Page | None:
        """Return the page at ``path``, or None."""
        return self._by_path.get(path)

    @property
    def page_weights(self) -> list[float]:
        """Zipf weight of each page, in rank order (not normalised)."""
        return zipf_weights(len(self.pages), self.zipf_exponent)

    def page_share(self, rank: int) -> float:
        """Expected share of browser page views for the page of 1-based ``rank``."""
        weights = self.page_weights
        return weights[rank - 1] / sum(weights)


def _slug(rng: random.Random) -> str:
    return "-".join(rng.sample(_WORDS, rng.randint(2, 4)))


def _article(rng: random.Random, section: str) -> str:
    year = rng.choice((2019, 2020, 2021, 2022, 2023, 2024))
    slug = _slug(rng)
    if section == "news":
        return f"/news/{year}/{rng.randint(1, 12):02d}/{slug}.html"
    if section == "blog":
        return f"/blog/{year}/{slug}.html"
    if section == "products":
        return f"/products/{rng.choice(('home', 'office', 'outdoor', 'kits'))}/{slug}.html"
    if section == "docs":
        return f"/docs/{rng.choice(('guide', 'reference', 'howto', 'api'))}/{slug}.html"
    if section == "support":
        return f"/support/faq/{slug}.html"
    if section == "events":
        return f"/events/{year}/{slug}.html"
    if section == "careers":
        return f"/careers/{slug}.html"
    return f"/about/{slug}.html"


def build_site(
    *,
    n_pages: int = 300,
    zipf_exponent: float = 1.0,
    seed: int = 0,
    host: str = "www.example.org",
) -> Site:
    """Build a site deterministically from ``seed``.

    Parameters
    ----------
    n_pages : int, default 300
        Number of pages (≥ 1); rank 1 is the home page ``/``.
    zipf_exponent : float, default 1.0
        Exponent *s* of the popularity law (rank *k* has weight ``k ** -s``); > 0.
    seed : int, default 0
    host : str, default ``www.example.org``

    Returns
    -------
    Site

    Raises
    ------
    ConfigError
        When ``n_pages < 1`` or ``zipf_exponent <= 0``.
    """
    if n_pages < 1:
        raise ConfigError(f"--pages must be at least 1, got {n_pages}")
    if not zipf_exponent > 0:
        raise ConfigError(f"--zipf must be positive, got {zipf_exponent}")
    rng = random.Random(f"logstream-site:{seed}")
    candidates: list[tuple[str, str]] = [(f"/{s}/", s) for s in _SECTIONS] + [
        ("/search/", "search")
    ]
    for section, paths in _FIXED_PAGES.items():
        candidates.extend((p, section) for p in paths)
    seen = {p for p, _ in candidates} | {"/"}
    while len(candidates) < n_pages - 1:
        section = rng.choices(_SECTIONS, weights=_SECTION_WEIGHTS)[0]
        path = _article(rng, section)
        if path not in seen:
            seen.add(path)
            candidates.append((path, section))
    # Section indexes tend to rank high; articles are spread over the ranks.
    scored = sorted(
        candidates,
        key=lambda c: rng.random() * (0.15 if c[0].count("/") == 2 else 1.0),
    )
    ranked = [("/", "home"), *scored][:n_pages]

    asset_sizes: dict[str, int] = {
        "/static/css/site.css": 38_211,
        "/static/js/app.js": 143_870,
        "/static/img/logo.svg": 6_402,
        "/favicon.ico": 15_086,
        "/static/js/highlight.js": 71_455,
    }
    pages: list[Page] = []
    for path, section in ranked:
        assets = ["/static/css/site.css", "/static/js/app.js", "/static/img/logo.svg"]
        if section not in ("home", "search"):
            css = f"/static/css/{section}.css"
            asset_sizes.setdefault(css, int(rng.uniform(4_000, 30_000)))
            assets.append(css)
        if section == "docs":
            assets.append("/static/js/highlight.js")
        stem = path.rstrip("/").rsplit("/", 1)[-1].removesuffix(".html") or "home"
        folder = section if section != "home" else "home"
        for i in range(rng.choice((0, 1, 1, 2, 3))):
            ext = rng.choice(("jpg", "jpg", "png", "webp"))
            image = f"/images/{folder}/{stem}-{i + 1}.{ext}"
            asset_sizes[image] = int(min(2_500_000, rng.lognormvariate(11.0, 0.9)))
            assets.append(image)
        assets.append("/favicon.ico")
        size = int(min(400_000, max(1_200, rng.lognormvariate(9.7, 0.6))))
        pages.append(Page(path=path, section=section, size_bytes=size, assets=tuple(assets)))

    dead: list[str] = [
        "/apple-touch-icon.png",
        "/apple-touch-icon-precomposed.png",
        "/favicon.png",
        "/images/banner-old.gif",
        "/docs/v1/",
        "/news/2015/",
        "/shop/",
        "/index.php",
        "/old-site/index.html",
        "/downloads/catalog-2018.pdf",
    ]
    for page in pages[1 : 1 + min(20, len(pages) - 1)]:
        stem = page.path.rstrip("/")
        cut = rng.randrange(1, len(stem))
        typo = stem[:cut] + stem[cut + 1 :] + ("/" if page.path.endswith("/") else "")
        if typo not in seen and typo != "/" and typo.startswith("/"):
            dead.append(typo)
    return Site(
        host=host,
        pages=tuple(pages),
        asset_sizes=asset_sizes,
        dead_paths=tuple(dict.fromkeys(dead)),
        zipf_exponent=zipf_exponent,
    )
