"""Configuration of the streaming pipeline (``logstream run``), validated on construction."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from logstream.config import DEFAULT_OUTPUT_DIR, DEFAULT_STORE_NAME, check_panels, config_error
from logstream.errors import ConfigError, LogstreamError
from logstream.filters import EventFilter, check_vhost_pattern

__all__ = [
    "DEFAULT_STORE_NAME",
    "EVENT_QUERIES",
    "MODEL_QUERIES",
    "REFERENCE_QUERIES",
    "PipelineConfig",
    "interval_seconds",
    "spark_interval",
    "trigger_value",
]

#: The analytics outputs that ``queries`` selects from (``events/``, ``late_events/`` and
#: ``quarantine/`` are always written).
EVENT_QUERIES = (
    "traffic_per_minute",
    "trending_pages",
    "unique_visitors",
    "sessions",
    "top_clients",
    "alerts",
    "traffic_by_section",
    "traffic_by_agent",
    "traffic_by_network",
    "traffic_by_panel",
    "bot_scores",
)
#: The outputs that score with a model (:mod:`logstream.ml`), and the option giving it.
MODEL_QUERIES = {"bot_scores": "--bot-model"}
#: The outputs enriched by reference tables (:mod:`logstream.reference`), and the table
#: each needs; ``None``: a default exists (built-in agent classes, first-segment sections).
REFERENCE_QUERIES = {
    "traffic_by_section": None,
    "traffic_by_agent": None,
    "traffic_by_network": "networks",
}

_INTERVAL = re.compile(
    r"^\s*(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hours?|d|days?)\s*$",
    re.IGNORECASE,
)
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def interval_seconds(text: str) -> float:
    """Parse an interval such as ``"10 minutes"``, ``"5s"`` or ``"1 hour"`` into seconds.

    Raises
    ------
    ValueError
        When ``text`` is not a number followed by a unit (ms, s, m, h, d or their long names).
    """
    match = _INTERVAL.match(text)
    if not match:
        raise ValueError(
            f"{text!r} is not an interval: write a number and a unit, e.g. '10 minutes', '30s'"
        )
    number, unit = float(match.group(1)), match.group(2).lower()
    key = "ms" if unit.startswith("ms") or unit.startswith("milli") else unit[0]
    return number * _UNIT_SECONDS[key]


def spark_interval(text: str) -> str:
    """An interval option as Spark interval text (``"600 seconds"``), checked to be positive.

    Raises
    ------
    ValueError
        When ``text`` is not an interval or is not longer than zero.
    """
    seconds = interval_seconds(text)
    if seconds <= 0:
        raise ValueError(f"{text!r} must be longer than zero")
    if seconds != int(seconds):
        return f"{int(seconds * 1000)} milliseconds"
    return f"{int(seconds)} seconds"


def trigger_value(text: str) -> str:
    """A ``--trigger`` option: ``available-now`` (any spelling) or a processing-time interval
    (:func:`spark_interval`); zero (``0``, ``0s``, ``0 seconds``) is Spark's "as fast as
    possible": each micro-batch starts as soon as the previous one ends (``docs/triggers.md``).

    Raises
    ------
    ValueError
        When ``text`` is neither, or a negative interval.
    """
    if text.strip().lower().replace("_", "-") in ("available-now", "availablenow"):
        return "available-now"
    if text.strip() == "0" or interval_seconds(text) == 0:
        return "0 seconds"
    return spark_interval(text)


class PipelineConfig(BaseModel):
    """Every option of the streaming job.

    Parameters
    ----------
    source : {"dir", "follow", "socket", "kafka", "rate"}
        Where lines come from: a watched directory (Spark's file source, the default), growing
        log files followed like ``tail -F`` across rotation
        (:mod:`logstream.sources.follow`), a text socket (the book's TCP example), Kafka
        (needs Spark's ``spark-sql-kafka-0-10`` connector on the classpath) or Spark's rate
        source replaying sample lines at a fixed rate (:func:`logstream.sources.rate_lines`).
    input_dir : Path, optional
        Directory watched by the file source; files must be placed atomically (write, then
        rename into the directory). Plain and ``.gz`` files.
    follow : tuple of str, optional
        Log files or quoted globs followed by ``source="follow"`` (local files).
    max_bytes_per_trigger : int, optional
        Bytes per micro-batch of the follow source (at least one whole line), so a backlog is
        read in several micro-batches; None: everything available.
    socket : str, optional
        ``HOST:PORT`` of a server the socket source connects to.
    kafka_bootstrap, kafka_topic : str, optional
        Kafka servers and topic, for ``source="kafka"`` (:mod:`logstream.sources.kafka`).
    kafka_max_offsets_per_trigger : int, optional
        Messages per micro-batch of the Kafka source at most (Spark's
        ``maxOffsetsPerTrigger``, shared between the partitions); None: everything available.
    kafka_allow_data_loss : bool
        Go on without unread messages of the topic that were deleted (retention), counted;
        False (default, Spark's ``failOnDataLoss``): stop the run with their count.
    kafka_retry : str
        How long the run waits, warning, for Kafka brokers it cannot reach (default ``2
        minutes``); then it stops (:class:`~logstream.errors.KafkaUnavailableError`).
    rate : int, optional
        Lines per second of ``source="rate"``.
    rate_sample : Path, optional
        Common or Combined log whose lines the rate source cycles through, each stamped with
        the time it is made; None: lines of logstream's traffic generator (Combined).
    log_format : str
        As ``logstream batch --format``; ``auto`` detects from the first file of ``input_dir``
        (or the first existing file followed).
    output_dir : Path
        Root of the Parquet outputs: ``events``, ``late_events``, ``quarantine``,
        ``traffic_per_minute``, ``trending_pages``, ``unique_visitors``, ``sessions``,
        ``top_clients``, ``alerts``, ``traffic_by_section``, ``traffic_by_agent``,
        ``traffic_by_network``, ``traffic_by_panel``.
    state_dir : Path
        Root of the checkpoints, one sub-directory per query.
    store : str, optional
        Serving store URL, ``sqlite:///PATH`` or ``postgresql://USER@HOST:PORT/DBNAME``
        (``docs/serving.md``); default ``OUTPUT_DIR/logstream.db``. A store belongs to the
        checkpoint that fed it (:mod:`logstream.pipeline.identity`).
    watermark : str
        Event-time delay after which a window is final and an older event is late
        (default ``10 minutes``).
    max_line_bytes : int
        Longer lines are quarantined as ``line_too_long`` (:func:`logstream.parsing.parse`).
    max_future : str
        A line whose time is further ahead of the clock than this is quarantined as
        ``future_event_time`` (default ``1 day``): one line from 2099 must never move the
        watermark past every real event (:func:`logstream.parsing.parse`).
    traffic_window : str
        Tumbling window of traffic and unique visitors (default ``1 minute``).
    trending_window, trending_slide : str
        Sliding window of trending pages (default 5 minutes every 1 minute, the book's query).
    top : int
        Trending pages per window shown by the store's readers.
    store_retry : str
        How long a write to the serving store (and a read of the pipeline's) is retried, with
        backoff, while the store cannot be reached — a PostgreSQL server restarting or down
        (default ``60 seconds``; ``0``: not at all). A broken pooled connection is replaced
        at once; after this span the run stops with one line naming the store
        (:class:`~logstream.errors.StoreUnavailableError`, exit status 1).
    store_retention : str
        Event-time span of trending-page windows kept in the serving store, behind the newest
        event (default ``2 hours``); older windows are pruned there (the Parquet output keeps
        them all). Traffic and visitor rows are kept whole (one row per window).
    trigger : str
        ``available-now`` (what exists, then stop) or an interval such as ``5 seconds``.
    max_files_per_trigger : int, optional
        Input files per micro-batch of the directory source.
    driver_rows : int, optional
        Lines a micro-batch on the driver may have (0: none; default: by memory).
    sink : {"parquet", "console"}
        ``parquet`` runs the full pipeline; ``console`` prints trending pages per
        micro-batch for exploration (no outputs, no store).
    sinks : tuple of str
        Extra sinks the outputs are sent to after their publish (``--sink URL``):
        ``kafka://HOST:PORT/TOPIC`` or ``http(s)://...`` webhooks (:mod:`logstream.sinks.route`).
    sink_outputs : tuple of str
        The outputs sent to ``sinks``; also read from ``"default"`` (alerts and the computed
        final-window outputs), ``"all"`` or a comma-separated list.
    output_format : {"parquet", "json", "csv"}
        File format of the outputs (default Parquet; CSV writes binary sketches as base64).
    dedup : bool
        Count a line delivered again (a shipper's retry) once: identical lines arriving within
        ``dedup_window`` of each other are dropped (default False: every line counts, as in
        ``logstream batch`` and GoAccess; see :mod:`logstream.sources.dedup`).
    strict : bool
        A corrupt or truncated input file fails the run instead of being quarantined as
        ``corrupt_file`` (its readable lines count; :mod:`logstream.sources.integrity`).
    dedup_window : str
        Processing-time span in which a re-sent line is recognised (default ``10 minutes``):
        the deduplication state holds the key of every line that arrived in the last
        ``dedup_window``, so its rows are bounded by arrival rate × this span.
    session_gap : str
        Inactivity after which a visitor's session ends (default ``30 minutes``).
    session_stats_window : str
        Tumbling window (by session start) of the session statistics (default ``1 hour``).
    clients_window : str
        Tumbling window of the top clients by requests and bytes (default ``5 minutes``).
    alert_sigma : float
        Standard deviations from the running mean that make a minute an alert (default 5).
    alert_warmup : str
        Minutes a series is observed before it may alert (default ``30 minutes``).
    reference : dict of str to Path
        Reference tables, ``{kind: file}`` with kinds ``networks``, ``agents``, ``sections``
        (:mod:`logstream.reference`): CSV or Parquet files, re-read when they change.
    queries : tuple of str
        The analytics outputs to compute, from :data:`EVENT_QUERIES` (default: all), each
        in its Parquet output and the serving store. Also read from ``"all"``, ``"none"`` or
        a comma-separated list; kept in :data:`EVENT_QUERIES` order. An output turned on
        later starts from the micro-batch it is turned on in. ``all`` leaves out
        ``traffic_by_network`` when there is no networks table and ``bot_scores`` when there
        is no bot model; naming one without it is an error.
    no_panel : tuple of str
        GoAccess's panels left out of ``traffic_by_panel`` (:data:`logstream.config.PANELS`,
        each per minute; ``hosts`` feeds the dashboard's last minutes). A panel the log
        format cannot fill is left out too: ``os`` and ``browsers`` need a user agent, the
        referrer panels a referrer, ``remote_user`` a ``%u`` field.
    static_ext : tuple of str
        Extensions counted as static files besides GoAccess's list (``.webp``).
    site_host : str, optional
        Your own site's host name: its referrals leave the referrer panels.
    since, until : str, optional
        Keep the events from ``since`` (inclusive) to ``until`` (exclusive): ISO 8601, or a
        span back from the start (``2h``; resolved at each start: a fixed range replays
        exactly, a relative one from the restart's clock) (:mod:`logstream.filters`).
    filter : tuple of str
        Keep the events where each Spark SQL condition over the event columns holds.
    grep : tuple of str
        Keep the lines whose raw text matches each regular expression. A line the filter
        leaves out is counted (``counters.filtered``), never a window, never quarantined.
    vhost_from_path : str, optional
        Take each line's virtual host from its file's path: the first group of this regular
        expression (:mod:`logstream.parsing.sites`).
    bot_model : Path, optional
        A bot model directory (``logstream model train bots``): the ``bot_scores`` output
        scores every final client window with it (:mod:`logstream.ml.bots`). Checked at
        start: kind ``bots`` and the features the pipeline computes.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    # the defaults and descriptions of `logstream run`'s options (`cli/run_options.py`)
    source: Literal["dir", "follow", "socket", "kafka", "rate"] = "dir"
    input_dir: Path | None = Field(
        default=None, description="Watch this directory for log files (plain or .gz)."
    )
    follow: tuple[str, ...] | None = Field(
        default=None, description="Follow a growing log file or glob, like tail -F (repeatable)."
    )
    max_bytes_per_trigger: int | None = Field(
        default=None, ge=1, description="With --follow: bytes per micro-batch at most."
    )
    socket: str | None = Field(
        default=None, description="Read lines from a TCP server; needs --format."
    )
    kafka_bootstrap: str | None = Field(default=None, description="Kafka bootstrap servers.")
    kafka_topic: str | None = Field(default=None, description="Kafka topic.")
    kafka_max_offsets_per_trigger: int | None = Field(
        default=None, ge=1, description="With --kafka: messages per micro-batch."
    )
    kafka_allow_data_loss: bool = Field(
        default=False,
        description="With --kafka: skip unread messages retention deleted.",
    )
    kafka_retry: str = Field(default="2 minutes", description="Wait for a down Kafka broker.")
    rate: int | None = Field(
        default=None,
        ge=1,
        le=10_000_000,
        description="Load test: N lines a second from Spark's rate source.",
    )
    rate_sample: Path | None = Field(
        default=None, description="With --rate: the log whose lines are cycled through."
    )
    log_format: str = Field(
        default="auto", description="Log format: auto, common, combined, nginx, json, a LogFormat…."
    )
    output_dir: Path = Field(default=DEFAULT_OUTPUT_DIR, description="Root of the outputs.")
    state_dir: Path = Field(default=Path("out/state"), description="Root of the checkpoints.")
    store: str | None = Field(
        default=None, description="Serving store: sqlite:///PATH or postgresql://…"
    )
    watermark: str = Field(
        default="10 minutes", description="Event-time delay after which events are late."
    )
    max_future: str = Field(
        default="1 day",
        description="Event time ahead of the clock beyond which a line is quarantined.",
    )
    max_line_bytes: int = Field(
        default=65_536, ge=1024, le=16_777_216, description="Quarantine longer lines."
    )
    traffic_window: str = Field(default="1 minute", description="Window of traffic and visitors.")
    trending_window: str = Field(
        default="5 minutes", description="Sliding window of trending pages."
    )
    trending_slide: str = Field(
        default="1 minute", description="Slide of the trending-pages window."
    )
    top: int = Field(default=10, ge=1, le=1000, description="Trending pages per window.")
    store_retention: str = Field(
        default="2 hours", description="Event time of trending windows kept in the store."
    )
    store_retry: str = Field(
        default="60 seconds",
        description="How long a store write waits, retrying, for a store that is down.",
    )
    trigger: str = Field(
        default="1 second", description="'available-now' or an interval such as '5 seconds'."
    )
    max_files_per_trigger: int | None = Field(
        default=None, ge=1, description="With --input-dir: files per micro-batch at most."
    )
    driver_rows: int | None = Field(default=None, ge=0, description="Lines the driver path takes.")
    sink: Literal["parquet", "console"] = "parquet"
    dedup: bool = Field(default=False, description="Count a line delivered again once.")
    strict: bool = Field(
        default=False, description="Fail on a corrupt input file instead of quarantining it."
    )
    dedup_window: str = Field(
        default="10 minutes", description="Processing time in which a re-sent line is recognised."
    )
    session_gap: str = Field(
        default="30 minutes", description="Inactivity that ends a visitor's session."
    )
    session_stats_window: str = Field(
        default="1 hour", description="Window of session count and durations."
    )
    clients_window: str = Field(default="5 minutes", description="Window of the top clients.")
    alert_sigma: float = Field(
        default=5.0, gt=0, le=100, description="Alert at this many standard deviations."
    )
    alert_warmup: str = Field(
        default="30 minutes", description="Observed time before a series may alert."
    )
    reference: dict[str, Path] = Field(default_factory=dict)
    bot_model: Path | None = Field(
        default=None, description="Score client windows with this bot model."
    )
    queries: tuple[str, ...] = Field(  # resolved by _queries
        default="all", description="Analytics outputs: all, none or a comma-separated list."
    )
    no_panel: tuple[str, ...] = Field(
        default=(), description="Leave out one of GoAccess's panels (repeatable)."
    )
    static_ext: tuple[str, ...] = Field(
        default=(), description="Count this extension as a static file too (repeatable)."
    )
    site_host: str | None = Field(
        default=None, description="Your site's host: its referrals leave the referrer panels."
    )
    since: str | None = Field(
        default=None, description="Keep events from TIME (ISO 8601, or 2h ago)."
    )
    until: str | None = Field(default=None, description="Keep events before TIME.")
    filter: tuple[str, ...] = Field(  # None: none (_repeated)
        default=None, description="Keep events where this Spark SQL holds (AND)."
    )
    grep: tuple[str, ...] = Field(default=None, description="Keep lines matching this regex (AND).")
    vhost_from_path: str | None = Field(
        default=None, description="Site of a line: REGEX's first group in its path."
    )
    sinks: tuple[str, ...] = ()
    sink_outputs: tuple[str, ...] = Field(  # resolved by _sink_outputs
        default="default", description="Outputs sent to the --sink URLs: default, all or a list."
    )
    output_format: str = Field(default="parquet", description="parquet, json (JSON lines) or csv.")

    @field_validator(
        "watermark",
        "max_future",
        "dedup_window",
        "traffic_window",
        "trending_window",
        "trending_slide",
        "store_retention",
        "session_gap",
        "session_stats_window",
        "clients_window",
        "alert_warmup",
    )
    @classmethod
    def _interval(cls, value: str) -> str:
        return spark_interval(value)

    @field_validator("store_retry", "kafka_retry")
    @classmethod
    def _store_retry(cls, value: str) -> str:
        if value.strip() == "0":
            return "0 seconds"
        seconds = interval_seconds(value)
        return "0 seconds" if seconds == 0 else spark_interval(value)

    @field_validator("reference")
    @classmethod
    def _reference(cls, value: dict[str, Path]) -> dict[str, Path]:
        from logstream.reference import REFERENCE_KINDS

        for kind, path in value.items():
            if kind not in REFERENCE_KINDS:
                raise ValueError(
                    f"unknown reference table kind {kind!r}: choose from "
                    + ", ".join(REFERENCE_KINDS)
                )
            if not Path(path).is_file():
                raise ValueError(f"reference table {str(path)!r} ({kind}) does not exist")
        return {k: Path(p).expanduser().absolute() for k, p in value.items()}

    @field_validator("bot_model")
    @classmethod
    def _bot_model(cls, value: Path | None) -> Path | None:
        if value is None:
            return None
        from logstream.ml.kinds import BOT_FEATURES, KIND
        from logstream.ml.model import read_model_info

        path = Path(value).expanduser().absolute()
        read_model_info(path, KIND).check_columns(BOT_FEATURES, "the pipeline's client windows")
        return path

    @field_validator("queries", mode="before")
    @classmethod
    def _queries(cls, value: object, info: ValidationInfo) -> tuple[str, ...]:
        tables = info.data.get("reference") or {}
        models = {"--bot-model"} if info.data.get("bot_model") else set()
        if isinstance(value, str):
            text = value.strip().lower()
            if text == "all":
                return tuple(
                    q
                    for q in EVENT_QUERIES
                    if (REFERENCE_QUERIES.get(q) is None or REFERENCE_QUERIES[q] in tables)
                    and (q not in MODEL_QUERIES or MODEL_QUERIES[q] in models)
                )
            if text == "none":
                return ()
            names = [n.strip() for n in text.split(",") if n.strip()]
            if not names:
                raise ValueError(
                    f"queries {value!r} names no query: write 'all', 'none' or a "
                    "comma-separated list"
                )
        elif isinstance(value, (list, tuple, set, frozenset)):
            names = [str(n).strip().lower() for n in value]
        else:
            raise ValueError(f"queries {value!r} is not a list of query names")
        names = [n.replace("-", "_") for n in names]
        unknown = [n for n in names if n not in EVENT_QUERIES]
        if unknown:
            raise ValueError(
                f"unknown query {unknown[0]!r}: choose 'all', 'none' or from "
                f"{', '.join(EVENT_QUERIES)}"
            )
        for name in names:
            needs = REFERENCE_QUERIES.get(name)
            if needs is not None and needs not in tables:
                raise ValueError(
                    f"query {name!r} needs a {needs} table: add --reference {needs}=FILE "
                    "(CSV or Parquet), or leave it out of --queries"
                )
            if name in MODEL_QUERIES and MODEL_QUERIES[name] not in models:
                raise ValueError(
                    f"query {name!r} needs a model: add {MODEL_QUERIES[name]} DIR "
                    "(logstream model train bots), or leave it out of --queries"
                )
        return tuple(q for q in EVENT_QUERIES if q in names)

    @field_validator("no_panel", "static_ext", mode="before")
    @classmethod
    def _panels(cls, value: object, info: ValidationInfo) -> tuple[str, ...]:
        names = (value,) if isinstance(value, str) else tuple(value or ())  # type: ignore[arg-type]
        if info.field_name == "no_panel":
            check_panels(names, ())
        else:
            check_panels((), names)
        return tuple(str(n) for n in names)

    @field_validator("input_dir", "output_dir", "state_dir", "rate_sample")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        # Python and the JVM may not share a working directory: hand Spark absolute paths
        return None if value is None else value.expanduser().absolute()

    @field_validator("log_format")
    @classmethod
    def _log_format(cls, value: str) -> str:
        from logstream.parsing.detect import check_format

        try:
            return check_format(value)  # a bad format stops the run before the JVM starts
        except LogstreamError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("sinks")
    @classmethod
    def _sinks(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        from logstream.sinks.spec import sink_spec

        if value and info.data.get("sink") == "console":
            raise ValueError("--sink console prints to the terminal: it takes no sink URL")
        return tuple(sink_spec(url).url for url in value)

    @field_validator("sink_outputs", mode="before")
    @classmethod
    def _sink_outputs(cls, value: object, info: ValidationInfo) -> tuple[str, ...]:
        from logstream.sinks.spec import resolve_sink_outputs

        return resolve_sink_outputs(value, info.data.get("queries") or ())  # type: ignore[arg-type]

    @field_validator("output_format")
    @classmethod
    def _output_format(cls, value: str) -> str:
        from logstream.sinks.spec import check_output_format

        return check_output_format(value)

    @field_validator("trigger")
    @classmethod
    def _trigger(cls, value: str) -> str:
        return trigger_value(value)

    @field_validator("store")
    @classmethod
    def _store(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("sqlite:///", "postgresql://", "postgres://")):
            raise ValueError(
                f"store {value!r} is not supported: use sqlite:///PATH (e.g. "
                "sqlite:///out/logstream.db) or postgresql://USER@HOST:PORT/DBNAME"
            )
        return value

    @field_validator("socket")
    @classmethod
    def _socket(cls, value: str | None) -> str | None:
        if value is None:
            return None
        host, _, port = value.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"socket {value!r} is not HOST:PORT (e.g. localhost:9999)")
        return value

    @field_validator("filter", "grep", mode="before")
    @classmethod
    def _repeated(cls, value: object) -> tuple[str, ...]:
        return (value,) if isinstance(value, str) else tuple(value or ())  # type: ignore[arg-type]

    @model_validator(mode="after")
    def _filtered(self) -> PipelineConfig:
        try:
            self.event_filter()
            check_vhost_pattern(self.vhost_from_path)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return self

    def event_filter(self) -> EventFilter:
        """The run's filter (:mod:`logstream.filters`), its relative times from now."""
        return EventFilter.build(self.since, self.until, self.filter, self.grep)

    @model_validator(mode="after")
    def _source_needs(self) -> PipelineConfig:
        if self.source == "dir" and self.input_dir is None:
            raise ValueError("the directory source needs --input-dir DIR")
        if self.source == "dir" and self.input_dir is not None:
            watched = Path(self.input_dir).resolve()
            for option, path in (
                ("--output-dir", self.output_dir),
                ("--state-dir", self.state_dir),
            ):
                if path is not None and Path(path).resolve().is_relative_to(watched):
                    raise ValueError(
                        f"{option} {str(path)!r} is inside --input-dir {str(self.input_dir)!r}, "
                        "whose subdirectories are read as input: put it beside the input "
                        "directory"
                    )
        if self.source == "follow" and not self.follow:
            raise ValueError("the follow source needs --follow PATH (a log file or a quoted glob)")
        if self.source == "socket" and self.socket is None:
            raise ValueError("the socket source needs --socket HOST:PORT")
        if self.source == "kafka" and not (self.kafka_bootstrap and self.kafka_topic):
            raise ValueError("the Kafka source needs --kafka HOST:PORT and --topic TOPIC")
        if self.source != "kafka" and (
            self.kafka_max_offsets_per_trigger is not None or self.kafka_allow_data_loss
        ):
            raise ValueError(
                "--max-offsets-per-trigger and --allow-data-loss are options of the Kafka "
                "source: add --kafka HOST:PORT --topic TOPIC, or leave them out"
            )
        if self.source == "rate" and self.rate is None:
            raise ValueError("the rate source needs --rate LINES_PER_SECOND")
        if self.rate_sample is not None and self.source != "rate":
            raise ValueError("--rate-sample is read by the rate source only: add --rate N")
        if self.rate_sample is not None and not self.rate_sample.is_file():
            raise ValueError(
                f"rate sample {str(self.rate_sample)!r} does not exist: point --rate-sample at "
                "a Common or Combined log file, or leave it out to use generated lines"
            )
        if self.log_format == "auto" and self.source not in ("dir", "follow", "rate"):
            raise ValueError(
                f"--format auto needs files to look at; with the {self.source} source pass "
                "--format common|combined|'<LogFormat>'"
            )
        window_ms = int(interval_seconds(self.trending_window) * 1000)
        slide_ms = int(interval_seconds(self.trending_slide) * 1000)
        if slide_ms > window_ms:
            raise ValueError(
                f"trending slide {self.trending_slide!r} is longer than the window "
                f"{self.trending_window!r}"
            )
        minute = 60_000
        traffic_ms = int(interval_seconds(self.traffic_window) * 1000)
        if "alerts" in self.queries and (traffic_ms != minute or slide_ms != minute):
            raise ValueError(
                "the anomaly alerts score one-minute series: with alerts on, --window and "
                f"--trending-slide must be 1 minute (got {self.traffic_window!r} and "
                f"{self.trending_slide!r}); or leave alerts out with --queries"
            )
        if window_ms % slide_ms:
            raise ValueError(
                f"trending slide {self.trending_slide!r} does not divide the window "
                f"{self.trending_window!r}: windows are sums of slide-long panes (e.g. a "
                "5-minute window sliding every minute)"
            )
        return self

    @property
    def store_path(self) -> Path:
        """Filesystem path of the SQLite serving store (absolute).

        Raises
        ------
        ConfigError
            When the store is a PostgreSQL database (use :attr:`store_url`).
        """
        if self.store is None:
            return self.output_dir / DEFAULT_STORE_NAME
        if not self.store.startswith("sqlite:///"):
            raise ConfigError(f"store {self.store!r} is a database, not a file: use store_url")
        return Path(self.store.removeprefix("sqlite:///")).expanduser().absolute()

    @property
    def store_url(self) -> str:
        """The serving store's URL: ``sqlite:///`` and its absolute path, or the
        ``postgresql://`` URL as given (:func:`logstream.serving.open_store` opens either)."""
        if self.store is not None and not self.store.startswith("sqlite:///"):
            return self.store
        return f"sqlite:///{self.store_path}"

    @property
    def store_retry_seconds(self) -> float:
        """:attr:`store_retry` in seconds."""
        return interval_seconds(self.store_retry)

    @property
    def watermark_seconds(self) -> float:
        """The watermark delay in seconds."""
        return interval_seconds(self.watermark)

    @property
    def max_future_seconds(self) -> float:
        """``max_future`` in seconds."""
        return interval_seconds(self.max_future)

    @classmethod
    def build(cls, **values: object) -> PipelineConfig:
        """Construct from keyword values; a bad value raises :class:`ConfigError` naming it."""
        try:
            return cls(**values)  # type: ignore[arg-type]
        except ValidationError as exc:
            raise config_error(exc, "invalid pipeline option") from exc
