"""Options of ``logstream rules``, validated before any Spark query starts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from logstream.errors import ConfigError, InputPathError
from logstream.parsing.detect import check_format
from logstream.pipeline.config import interval_seconds, spark_interval

if TYPE_CHECKING:
    from pyspark.sql.streaming import DataStreamWriter

__all__ = ["RulesConfig", "Trigger", "parse_trigger"]


@dataclass(frozen=True)
class Trigger:
    """A parsed ``--trigger``.

    Attributes
    ----------
    kind : {"processing-time", "continuous", "real-time"}
    interval : str
        Spark interval text: the micro-batch interval (``"0 seconds"`` = as fast as possible),
        the continuous checkpoint interval, or the real-time batch duration.
    """

    kind: str
    interval: str

    def apply(self, writer: DataStreamWriter) -> DataStreamWriter:
        """Set this trigger on a ``DataStreamWriter`` and return it; real-time mode with the
        update output mode, the only one it accepts (``STREAMING_REAL_TIME_MODE.
        OUTPUT_MODE_NOT_SUPPORTED``): the alert query has no aggregation, so update emits each
        alert once, as append does."""
        if self.kind == "continuous":
            return writer.trigger(continuous=self.interval)
        if self.kind == "real-time":
            return writer.outputMode("update").trigger(realTime=self.interval)
        return writer.trigger(processingTime=self.interval)


def parse_trigger(text: str) -> Trigger:
    """Parse ``continuous:1s``, ``real-time:5s`` or a processing-time interval (``0`` allowed).

    Raises
    ------
    ConfigError
        Naming the value and the accepted forms.

    Examples
    --------
    >>> parse_trigger("continuous:1s")
    Trigger(kind='continuous', interval='1 seconds')
    >>> parse_trigger("0 seconds")
    Trigger(kind='processing-time', interval='0 seconds')
    """
    kind, sep, rest = text.strip().partition(":")
    kind = kind.strip().lower().replace("_", "-")
    forms = "continuous:1s, real-time:5s, or a processing-time interval such as 0s or 1s"
    try:
        if sep and kind == "continuous":
            return Trigger("continuous", spark_interval(rest))
        if sep and kind in ("real-time", "realtime"):
            return Trigger("real-time", spark_interval(rest))
        if sep:
            raise ValueError(f"unknown trigger kind {kind!r}")
        if text.strip() in ("0", "0s"):
            return Trigger("processing-time", "0 seconds")
        if interval_seconds(text) == 0:
            return Trigger("processing-time", "0 seconds")
        return Trigger("processing-time", spark_interval(text))
    except ValueError as exc:
        raise ConfigError(f"--trigger {text!r}: {exc}; use {forms}") from None


@dataclass(frozen=True)
class RulesConfig:
    """Every option of ``logstream rules``, checked on construction.

    Parameters
    ----------
    source : {"socket", "rate", "kafka"}
    socket : str, optional
        ``HOST:PORT`` the socket source connects to (``source="socket"``).
    rate : int, optional
        Lines per second of the rate source (``source="rate"``).
    rate_sample : Path, optional
        Log whose lines the rate source cycles through (default: generated lines).
    log_format : str
        ``common``, ``combined`` or a ``LogFormat``; ``auto`` only with ``rate_sample``.
    sink : str
        ``console``, an ``http(s)://`` webhook URL, or ``kafka://HOST:PORT/TOPIC``.
    trigger : Trigger
    checkpoint : Path, optional
    duration_s : float, optional
        Stop after this many seconds (None: until Ctrl-C).
    kafka_bootstrap, kafka_topic : str, optional
        ``HOST:PORT[,…]`` and the topic the Kafka source reads (``source="kafka"``): one line
        a message, as ``logstream replay --kafka`` writes them.

    Raises
    ------
    ConfigError
        On a value that cannot work, naming it and the fix: a missing ``--socket``,
        ``--rate`` or Kafka topic, an unknown sink, ``auto`` with the socket or Kafka source,
        the real-time trigger on another source than Kafka (Spark 4.2 refuses it:
        ``STREAMING_REAL_TIME_MODE.INPUT_STREAM_NOT_SUPPORTED``), or the continuous trigger
        with the webhook sink (PySpark's ``foreach`` fails under the continuous trigger).
    InputPathError
        When ``rate_sample`` does not exist.
    """

    source: str
    trigger: Trigger
    sink: str = "console"
    socket: str | None = None
    rate: int | None = None
    rate_sample: Path | None = None
    log_format: str = "auto"
    checkpoint: Path | None = None
    duration_s: float | None = None
    kafka_bootstrap: str | None = None
    kafka_topic: str | None = None

    def __post_init__(self) -> None:
        if self.source not in ("socket", "rate", "kafka"):
            raise ConfigError(f"--source {self.source!r}: use socket, rate or kafka")
        if (self.source == "kafka") != bool(self.kafka_bootstrap and self.kafka_topic):
            raise ConfigError(
                "the Kafka source needs both --kafka-bootstrap HOST:PORT and --kafka-topic "
                "TOPIC, and they belong to it alone"
            )
        if self.source == "socket" and not self.socket:
            raise ConfigError("the socket source needs --socket HOST:PORT (e.g. 127.0.0.1:9999)")
        if self.source == "rate" and (self.rate is None or self.rate < 1):
            raise ConfigError(
                f"the rate source needs --rate N lines per second (N >= 1), got {self.rate!r}"
            )
        if self.source != "rate" and (self.rate is not None or self.rate_sample is not None):
            raise ConfigError("--rate and --rate-sample belong to --source rate")
        if self.rate_sample is not None and not self.rate_sample.is_file():
            raise InputPathError(
                f"--rate-sample {str(self.rate_sample)!r} does not exist: give a Common or "
                "Combined log file, or leave it out to use generated lines"
            )
        check_format(self.log_format)  # before Spark starts
        if self.log_format.strip().lower() == "auto" and self.source in ("socket", "kafka"):
            raise ConfigError(
                f"--format auto needs a file to look at; with the {self.source} source pass "
                "--format common|combined|'<LogFormat>'"
            )
        kind = self.sink_kind
        if self.trigger.kind == "real-time" and self.source != "kafka":
            raise ConfigError(
                f"--trigger real-time needs a source that supports Spark's real-time mode; in "
                f"Spark 4.2 that is Kafka only, and the {self.source} source is refused "
                "(STREAMING_REAL_TIME_MODE.INPUT_STREAM_NOT_SUPPORTED). Read a Kafka topic "
                "(--kafka-bootstrap, --kafka-topic; logstream replay --kafka fills one), or "
                "use --trigger continuous:1s for the same map-only hot path (docs/triggers.md)"
            )
        if self.trigger.kind == "real-time" and interval_seconds(self.trigger.interval) < 5:
            raise ConfigError(
                f"--trigger real-time:{self.trigger.interval}: Spark's real-time mode needs a "
                "duration of 5 seconds at least (spark.sql.streaming.realTimeMode."
                "minBatchDuration; it is how often the batch is checkpointed, not a latency): "
                "use --trigger real-time:5s"
            )
        if self.trigger.kind == "continuous" and kind == "webhook":
            raise ConfigError(
                "--sink webhook cannot run under --trigger continuous: PySpark's foreach sink "
                "fails in continuous mode (PythonForeachWriter.open starts its thread again at "
                "the second epoch: IllegalThreadStateException). Use --sink console or "
                "kafka://… with the continuous trigger, or a processing-time trigger such as "
                "--trigger 0s with the webhook"
            )
        if self.duration_s is not None and self.duration_s <= 0:
            raise ConfigError(f"--duration must be longer than zero, got {self.duration_s}")

    @property
    def sink_kind(self) -> str:
        """``console``, ``webhook`` or ``kafka``; a URL is checked by
        :func:`logstream.sinks.route.parse_sink`, as ``logstream run --sink`` checks it."""
        if self.sink == "console":
            return "console"
        from logstream.sinks.route import KafkaSink, parse_sink

        try:
            parsed = parse_sink(self.sink)
        except ConfigError as exc:
            raise ConfigError(f"{exc} (or console)") from None
        return "kafka" if isinstance(parsed, KafkaSink) else "webhook"

    def kafka_target(self) -> tuple[str, str]:
        """``(bootstrap servers, topic)`` of a ``kafka://HOST:PORT/TOPIC`` sink."""
        from logstream.sinks.route import KafkaSink, parse_sink

        parsed = parse_sink(self.sink)
        assert isinstance(parsed, KafkaSink)
        return parsed.bootstrap, parsed.topic
