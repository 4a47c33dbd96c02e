"""A plain-Python reference parser and reference statistics, used only as a test oracle.

Written independently of logstream's compiled regular expressions: it splits lines with
``str`` methods and reads times with ``datetime.strptime``, so a bug in the Spark parser does
not repeat here.
"""

from __future__ import annotations

import gzip
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import unquote


@dataclass(frozen=True)
class Ref:
    client_host: str
    event_time: datetime  # aware
    method: str | None
    url_path: str | None
    query_string: str | None
    protocol: str | None
    status: int
    bytes_sent: int
    referrer: str | None
    user_agent: str | None

    @property
    def epoch(self) -> int:
        return int(self.event_time.timestamp())


def _dash(value: str) -> str | None:
    return None if value in ("", "-") else value


def parse_line(line: str) -> Ref | None:
    """Parse one Common or Combined line; None when it is not one."""
    line = line.rstrip("\r\n").rstrip()
    host, _, rest = line.partition(" ")
    _ident, _, rest = rest.partition(" ")
    _user, _, rest = rest.partition(" ")
    if not rest.startswith("["):
        return None
    stamp, _, rest = rest[1:].partition("] ")
    if not rest.startswith('"'):
        return None
    close = rest.find('" ', 1)
    if close < 0:
        return None
    request, rest = rest[1:close], rest[close + 2 :]
    status_text, _, rest = rest.partition(" ")
    size_text, _, rest = rest.partition(" ")
    referrer = agent = None
    if rest:
        if not rest.startswith('"'):
            return None
        ref_end = rest.find('" "', 1)
        if ref_end < 0:
            return None
        referrer = rest[1:ref_end]
        agent = rest[ref_end + 3 :]
        agent = agent[:-1] if agent.endswith('"') else agent  # truncated UA kept
    try:
        when = datetime.strptime(stamp, "%d/%b/%Y:%H:%M:%S %z")
        status = int(status_text)
        size = 0 if size_text == "-" else int(size_text)
    except ValueError:
        return None
    words = request.split()
    method = words[0] if len(words) >= 2 else None
    target = words[1] if len(words) >= 2 else None
    protocol = words[-1] if len(words) >= 3 and words[-1].upper().startswith("HTTP/") else None
    path = query = None
    if target is not None:
        path, sep, q = target.partition("?")
        query = q if sep else None
    return Ref(
        client_host=host,
        event_time=when,
        method=method,
        url_path=path,
        query_string=query or None,
        protocol=protocol,
        status=status,
        bytes_sent=size,
        referrer=_dash(referrer) if referrer is not None else None,
        user_agent=_dash(agent) if agent is not None else None,
    )


def read_lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        return [raw.decode("utf-8", "replace").rstrip("\r\n") for raw in fh]


def parse_file(path: Path) -> tuple[list[Ref], list[str]]:
    refs, bad = [], []
    for line in read_lines(path):
        ref = parse_line(line)
        (refs.append(ref) if ref else bad.append(line))
    return refs, bad


def status_classes(refs: list[Ref]) -> dict[str, int]:
    return dict(sorted(Counter(f"{r.status // 100}xx" for r in refs).items()))


def bandwidth(refs: list[Ref]) -> int:
    return sum(r.bytes_sent for r in refs)


#: The protocols GoAccess accepts at the end of a request line (a prefix, case-sensitive).
HTTP_PROTOCOLS = ("HTTP/1.0", "HTTP/1.1", "HTTP/2", "HTTP/3")


def request_key(r: Ref) -> tuple[str, str | None, str | None]:
    """The request as GoAccess keys it: the target (``%xx``-decoded, trimmed when it had an
    escape), its method and protocol; ``("-", None, None)`` without a valid protocol."""
    if r.url_path is None or r.protocol is None or not r.protocol.startswith(HTTP_PROTOCOLS):
        return "-", None, None
    target = r.url_path + (f"?{r.query_string}" if r.query_string else "")
    if "%" in target:
        target = unquote(target.replace("+", "%2B")).strip()
    return target, r.method, r.protocol


def unique_not_found(refs: list[Ref]) -> int:
    """GoAccess's ``unique_not_found``: distinct requests answered 404 (:func:`request_key`)."""
    return len({request_key(r) for r in refs if r.status == 404})


def unique_visitors_utc(refs: list[Ref]) -> int:
    """GoAccess's visitors on UTC days: distinct (day, host, user agent), 4xx left out."""
    return len(
        {(r.epoch // 86400, r.client_host, r.user_agent) for r in refs if not 400 <= r.status < 500}
    )


def hosts_per_day_utc(refs: list[Ref]) -> int:
    """Distinct client hosts of each UTC day, summed over the days."""
    return len({(r.epoch // 86400, r.client_host) for r in refs})


def is_content(path: str | None) -> bool:
    return path is not None and (path.lower().endswith((".html", ".htm")) or path.endswith("/"))
