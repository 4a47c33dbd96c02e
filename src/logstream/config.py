"""Settings shared by every logstream command.

Settings come from, in order of precedence: explicit arguments (CLI flags), environment
variables prefixed ``LOGSTREAM_``, then the defaults below. They are validated on
construction; a bad value raises :class:`~logstream.errors.ConfigError` naming the value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from logstream.errors import ConfigError

__all__ = [
    "COMPRESSED_RATIO",
    "DEFAULT_DATA_DIR",
    "DEFAULT_OUTPUT_DIR",
    "DEFAULT_STORE",
    "DEFAULT_STORE_NAME",
    "PANELS",
    "PANEL_TITLES",
    "SHORT_RUN_BYTES",
    "SparkSettings",
    "check_panels",
    "config_error",
    "data_dir",
    "remote_default",
    "short_input",
    "validate_time_zone",
]

#: ``logstream run``'s root of the outputs when ``--output-dir`` is not given.
DEFAULT_OUTPUT_DIR = Path("out/stream")
#: File name of the serving store under the output directory when ``--store`` is not given.
DEFAULT_STORE_NAME = "logstream.db"
#: The serving store ``logstream run`` writes and ``logstream dashboard`` reads by default
#: (one default for both: the page reads what the pipeline writes).
DEFAULT_STORE = DEFAULT_OUTPUT_DIR / DEFAULT_STORE_NAME

#: GoAccess's panels, by their GoAccess JSON key, in GoAccess's order: the batch report's
#: (``logstream batch --no-panel``) and the stream's ``traffic_by_panel`` (``logstream run
#: --no-panel``), each per minute there.
PANELS: tuple[str, ...] = (
    "visitors",
    "requests",
    "static_requests",
    "not_found",
    "hosts",
    "os",
    "browsers",
    "virtual_hosts",
    "referrers",
    "referring_sites",
    "remote_user",
    "geolocation",
)
#: Each panel's title, as GoAccess names it.
PANEL_TITLES = {
    "visitors": "Unique visitors per day",
    "requests": "Requested files (URLs)",
    "static_requests": "Static requests",
    "not_found": "Not found URLs (404s)",
    "hosts": "Visitor hostnames and IPs",
    "os": "Operating systems",
    "browsers": "Browsers",
    "virtual_hosts": "Virtual hosts",
    "referrers": "Referrer URLs",
    "referring_sites": "Referring sites",
    "remote_user": "Remote user (HTTP authentication)",
    "geolocation": "Geo location",
}
_EXTENSION = re.compile(r"^\.?[A-Za-z0-9]{1,16}$")


def check_panels(disabled: Sequence[str], static_extensions: Sequence[str]) -> None:
    """Reject an unknown panel name (``--no-panel``) or a malformed extension
    (``--static-ext``).

    Raises
    ------
    ValueError
        Naming the option, the value and the accepted ones.

    Examples
    --------
    >>> check_panels(["os"], [".webp"])
    >>> check_panels(["oss"], [])
    Traceback (most recent call last):
    ...
    ValueError: --no-panel: unknown panel 'oss': use one of visitors, requests, \
static_requests, not_found, hosts, os, browsers, virtual_hosts, referrers, referring_sites, \
remote_user, geolocation
    """
    for name in disabled:
        if name not in PANELS:
            raise ValueError(f"--no-panel: unknown panel {name!r}: use one of {', '.join(PANELS)}")
    for ext in static_extensions:
        if not _EXTENSION.match(ext):
            raise ValueError(
                f"--static-ext: {ext!r} is not an extension: use letters and digits, "
                "with or without the dot (e.g. .webp)"
            )


#: Where the real access logs live on the team's machines, relative to the working directory.
DEFAULT_DATA_DIR = Path("../shared/data")


def data_dir() -> Path:
    """Return the directory holding real access logs.

    Returns
    -------
    pathlib.Path
        ``$LOGSTREAM_DATA_DIR`` when set, else ``../shared/data`` (relative to the working
        directory, as on the team's machines and in CI). The directory may not exist; callers
        that need a file from it check and report.
    """
    return Path(os.environ.get("LOGSTREAM_DATA_DIR", str(DEFAULT_DATA_DIR))).expanduser()


def validate_time_zone(name: str) -> str:
    """Return ``name`` if it is an IANA time-zone name, else raise.

    Raises
    ------
    ConfigError
        When ``name`` is not a known zone (e.g. ``America/New_Yrok``).
    """
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(
            f"unknown time zone {name!r}: use an IANA name such as 'UTC' or 'America/New_York'"
        ) from exc
    return name


class SparkSettings(BaseModel):
    """How logstream builds its SparkSession.

    Parameters
    ----------
    master : str or None
        Spark master URL. ``None`` means: keep what ``spark-submit`` set, else ``local[*]``.
    app_name : str
        Application name shown in the Spark UI.
    shuffle_partitions : int
        ``spark.sql.shuffle.partitions``; the default 4 suits a 2-core machine (Spark's 200 would
        spend most of a micro-batch scheduling empty tasks).
    ui_enabled : bool
        Whether to start the Spark web UI (port 4040); default from ``$LOGSTREAM_SPARK_UI``
        (``false`` switches it off, as the tests do), else on.
    extra : dict of str to str
        Any other Spark configuration, applied last (``--conf`` style).
    kafka : bool
        Put Spark's Kafka connector on the classpath of a session logstream starts
        (``spark.jars``: its jars from the cache of :mod:`logstream.kafka.maven`, fetched the
        first time). Off, the default, the session loads nothing of it: a run without a Kafka
        source or sink does not pay for it.
    remote : str or None
        A Spark Connect server's URL (``sc://HOST:PORT``): the session is a Connect client of
        it (:func:`logstream.connect.remote_session`) and ``master`` is the server's. ``None``
        (the default) runs Spark in this process; ``logstream batch`` and ``run`` default it
        to ``$SPARK_REMOTE``, as PySpark does (:func:`remote_default`).
    short_run : bool
        A run of a few seconds on a small input (:func:`short_input`): a local JVM that
        logstream starts compiles with HotSpot's client compiler only
        (``-XX:TieredStopAtLevel=1``), whose cheaper compilations pay off in such a run (the
        NASA day's report, 2 cores: about 3 s less); a long run wants the server compiler.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    master: str | None = Field(default_factory=lambda: os.environ.get("LOGSTREAM_SPARK_MASTER"))
    app_name: str = "logstream"
    shuffle_partitions: int = Field(default=4, ge=1, le=100_000)
    ui_enabled: bool = Field(
        default_factory=lambda: os.environ.get("LOGSTREAM_SPARK_UI", "true").lower() != "false"
    )
    extra: dict[str, str] = Field(default_factory=dict)
    kafka: bool = False
    remote: str | None = None
    short_run: bool = False

    @field_validator("remote")
    @classmethod
    def _remote_is_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("sc://"):
            raise ValueError(
                "not a Spark Connect URL: use sc://HOST:PORT (--remote, or $SPARK_REMOTE)"
            )
        return value

    @field_validator("master")
    @classmethod
    def _master_is_url(cls, value: str | None) -> str | None:
        if value is not None and not (
            value.startswith(("local", "spark://", "yarn", "k8s://", "mesos://"))
        ):
            raise ValueError(
                f"master {value!r} is not a Spark master URL: use local[*], local[N] or spark://HOST:PORT"
            )
        return value

    @model_validator(mode="after")
    def _one_place(self) -> SparkSettings:
        if self.remote and self.master:
            raise ValueError(
                f"both a master ({self.master}) and a Spark Connect server ({self.remote}): "
                "a Connect server runs on its own master, give one of --master and --remote"
            )
        return self

    @classmethod
    def build(cls, **values: object) -> SparkSettings:
        """Construct settings, turning validation errors into :class:`ConfigError`.

        Raises
        ------
        ConfigError
            When a value is out of range or of the wrong kind; the message names it.
        """
        try:
            return cls(**values)  # type: ignore[arg-type]
        except ValidationError as exc:
            raise config_error(exc, "invalid setting") from exc


#: The most input a short run reads (:func:`short_input`), bytes of text (a compressed file
#: counts :data:`COMPRESSED_RATIO` times its size).
SHORT_RUN_BYTES = 32 * 2**20
#: How much text a byte of a compressed log holds, about (the NASA day: 9.7 bytes).
COMPRESSED_RATIO = 10


def short_input(sizes: Iterable[tuple[str, int]]) -> bool:
    """Whether inputs of these ``(path, size in bytes)`` make a short run
    (:attr:`SparkSettings.short_run`): at most :data:`SHORT_RUN_BYTES` of text.

    Examples
    --------
    >>> short_input([("day.log.gz", 365_851), ("elastic.log", 2_400_000)])
    True
    >>> short_input([("july.log", 110_000_000)])
    False
    """
    text = sum(size * (COMPRESSED_RATIO if path.endswith(".gz") else 1) for path, size in sizes)
    return text <= SHORT_RUN_BYTES


def remote_default(remote: str | None) -> dict[str, str]:
    """``SparkSettings``'s ``remote`` of a command that runs through Spark Connect: the
    ``--remote`` given, else ``$SPARK_REMOTE`` (as PySpark reads it); empty for neither.

    Examples
    --------
    >>> remote_default("sc://127.0.0.1:15002")
    {'remote': 'sc://127.0.0.1:15002'}
    """
    value = remote or os.environ.get("SPARK_REMOTE")
    return {"remote": value} if value else {}


def config_error(exc: ValidationError, what: str) -> ConfigError:
    """Turn a pydantic validation error into one :class:`ConfigError` naming each value.

    Parameters
    ----------
    exc : pydantic.ValidationError
    what : str
        Start of the message (``"invalid pipeline option"``).
    """
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{where}={err.get('input')!r}: {msg}" if where else msg)
    return ConfigError(f"{what}: " + "; ".join(parts))
