"""What a ``--sink`` option may say, checked without the sinks' code.

The configuration (:class:`logstream.pipeline.PipelineConfig`) checks ``--sink``,
``--sink-outputs`` and ``--output-format`` here at start; :mod:`logstream.sinks.route`
builds the sinks from the same :class:`SinkSpec`.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from logstream.errors import ConfigError

__all__ = [
    "ALWAYS_OUTPUTS",
    "DEFAULT_SINK_OUTPUTS",
    "OUTPUT_FORMATS",
    "SINK_FORMS",
    "SinkSpec",
    "check_output_format",
    "check_webhook_url",
    "resolve_sink_outputs",
    "sink_spec",
]

#: File formats of the outputs (``--output-format``).
OUTPUT_FORMATS = ("parquet", "json", "csv")
#: What ``--sink`` sends by default: the alerts and every final-window output.
DEFAULT_SINK_OUTPUTS = (
    "traffic_per_minute",
    "trending_pages",
    "unique_visitors",
    "top_clients",
    "alerts",
    "traffic_by_section",
    "traffic_by_agent",
    "traffic_by_network",
    "traffic_by_panel",
)
#: Outputs written on every run, whatever ``--queries`` says.
ALWAYS_OUTPUTS = ("events", "late_events", "quarantine")

_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
SINK_FORMS = (
    "kafka://HOST:PORT/TOPIC (e.g. kafka://localhost:9092/weblog-alerts) or "
    "http(s)://HOST[:PORT]/PATH (a webhook)"
)


class SinkSpec(NamedTuple):
    """A ``--sink`` URL taken apart: ``kind`` is ``"webhook"`` or ``"kafka"``; ``bootstrap``
    (``HOST:PORT,...``) and ``topic`` are empty for a webhook."""

    kind: str
    url: str
    bootstrap: str = ""
    topic: str = ""


def check_webhook_url(url: str) -> str:
    """Return ``url`` if it is an ``http://`` or ``https://`` URL with a host.

    Raises
    ------
    ConfigError
        Naming the value and the expected form.

    Examples
    --------
    >>> check_webhook_url("http://127.0.0.1:8080/hook")
    'http://127.0.0.1:8080/hook'
    >>> check_webhook_url("ftp://x/hook")
    Traceback (most recent call last):
    ...
    logstream.errors.ConfigError: webhook URL 'ftp://x/hook' is not an http:// or https:// URL ...
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"webhook URL {url!r} is not an http:// or https:// URL with a host: "
            "give one such as http://127.0.0.1:8080/hook"
        )
    try:
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as e:
        raise ConfigError(f"webhook URL {url!r} has a bad port ({e}): use 1-65535") from None
    return url


def sink_spec(url: str) -> SinkSpec:
    """The kind, URL and (for Kafka) brokers and topic of a ``--sink`` URL.

    Raises
    ------
    ConfigError
        When ``url`` is neither form, naming it and the forms.

    Examples
    --------
    >>> sink_spec("kafka://localhost:9092,broker2:9093/weblog-alerts")
    SinkSpec(kind='kafka', url='kafka://localhost:9092,broker2:9093/weblog-alerts', bootstrap='localhost:9092,broker2:9093', topic='weblog-alerts')
    >>> sink_spec("http://127.0.0.1:8080/hook")
    SinkSpec(kind='webhook', url='http://127.0.0.1:8080/hook', bootstrap='', topic='')
    >>> sink_spec("s3://bucket/x")
    Traceback (most recent call last):
    ...
    logstream.errors.ConfigError: --sink 's3://bucket/x' is not a sink URL: use kafka://...
    """  # noqa: E501 - a doctest's output is one line
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("http", "https"):
        try:
            return SinkSpec("webhook", check_webhook_url(url))
        except ConfigError as e:
            raise ConfigError(f"--sink: {e}") from None
    if scheme == "kafka":
        parts = urllib.parse.urlsplit(url)
        topic = parts.path.strip("/")
        servers = [s for s in parts.netloc.split(",") if s]
        for server in servers:
            host, _, port = server.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ConfigError(
                    f"--sink {url!r}: broker {server!r} is not HOST:PORT; use {SINK_FORMS}"
                )
        if not servers or not _TOPIC.match(topic):
            raise ConfigError(
                f"--sink {url!r} needs brokers and a topic (letters, digits, '.', '_', '-'): "
                f"use {SINK_FORMS}"
            )
        return SinkSpec("kafka", url, ",".join(servers), topic)
    raise ConfigError(f"--sink {url!r} is not a sink URL: use {SINK_FORMS}")


def check_output_format(value: str) -> str:
    """``value`` (any case) if it is an output format, else :class:`ConfigError`."""
    fmt = value.strip().lower()
    if fmt not in OUTPUT_FORMATS:
        raise ConfigError(
            f"--output-format {value!r} is not a file format: use one of "
            + ", ".join(OUTPUT_FORMATS)
        )
    return fmt


def resolve_sink_outputs(
    value: str | Iterable[str] | None, computed: Sequence[str]
) -> tuple[str, ...]:
    """The outputs sent to the sinks, checked against the outputs the run computes.

    Parameters
    ----------
    value : str or iterable of str or None
        ``"default"`` / None (the alerts and final-window outputs that are computed), ``"all"``
        (every output written), or names, comma-separated or a list.
    computed : sequence of str
        The analytics outputs of the run (``--queries``); ``events``, ``late_events`` and
        ``quarantine`` are always written.

    Raises
    ------
    ConfigError
        Naming an unknown output, or one the run does not compute, and the fix.

    Examples
    --------
    >>> resolve_sink_outputs(None, ("traffic_per_minute", "sessions", "alerts"))
    ('traffic_per_minute', 'alerts')
    >>> resolve_sink_outputs("alerts,events", ("alerts",))
    ('alerts', 'events')
    """
    written = (*computed, *ALWAYS_OUTPUTS)
    if value is None or (isinstance(value, str) and value.strip().lower() == "default"):
        return tuple(o for o in DEFAULT_SINK_OUTPUTS if o in computed)
    if isinstance(value, str) and value.strip().lower() == "all":
        return written
    raw = value.split(",") if isinstance(value, str) else [p for v in value for p in v.split(",")]
    names = [n.strip().lower().replace("-", "_") for n in raw if n.strip()]
    if not names:
        raise ConfigError(
            f"--sink-outputs {value!r} names no output: write 'default', 'all' or a "
            "comma-separated list such as alerts,traffic_per_minute"
        )
    for name in names:
        if name not in written:
            known = (*DEFAULT_SINK_OUTPUTS, "sessions", "bot_scores", *ALWAYS_OUTPUTS)
            hint = (
                f"it is not computed by this run: add it to --queries ({', '.join(computed)})"
                if name in known
                else f"choose 'default', 'all' or from {', '.join(known)}"
            )
            raise ConfigError(f"--sink-outputs: unknown output {name!r}: {hint}")
    return tuple(dict.fromkeys(names))
