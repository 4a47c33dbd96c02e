"""Defaults and descriptions of the configuration models behind ``logstream run``'s
options, read without importing them (:mod:`logstream.pipeline` loads PySpark).

Generated from :class:`~logstream.pipeline.config.PipelineConfig` and
:class:`~logstream.demo.DemoSettings` by ``python -m logstream.cli.regenerate``: do not
edit (tests/cli/test_options.py fails when this file is stale)."""

from pathlib import Path

#: PipelineConfig field → (default, description), for the fields options set.
PIPELINE_FIELDS: dict[str, tuple[object, str]] = {
    "alert_sigma": (
        5.0,
        "Alert at this many standard deviations.",
    ),
    "alert_warmup": (
        "30 minutes",
        "Observed time before a series may alert.",
    ),
    "bot_model": (
        None,
        "Score client windows with this bot model.",
    ),
    "clients_window": (
        "5 minutes",
        "Window of the top clients.",
    ),
    "dedup": (
        False,
        "Count a line delivered again once.",
    ),
    "dedup_window": (
        "10 minutes",
        "Processing time in which a re-sent line is recognised.",
    ),
    "driver_rows": (
        None,
        "Lines the driver path takes.",
    ),
    "filter": (
        None,
        "Keep events where this Spark SQL holds (AND).",
    ),
    "follow": (
        None,
        "Follow a growing log file or glob, like tail -F (repeatable).",
    ),
    "grep": (
        None,
        "Keep lines matching this regex (AND).",
    ),
    "input_dir": (
        None,
        "Watch this directory for log files (plain or .gz).",
    ),
    "kafka_allow_data_loss": (
        False,
        "With --kafka: skip unread messages retention deleted.",
    ),
    "kafka_bootstrap": (
        None,
        "Kafka bootstrap servers.",
    ),
    "kafka_max_offsets_per_trigger": (
        None,
        "With --kafka: messages per micro-batch.",
    ),
    "kafka_retry": (
        "2 minutes",
        "Wait for a down Kafka broker.",
    ),
    "kafka_topic": (
        None,
        "Kafka topic.",
    ),
    "log_format": (
        "auto",
        "Log format: auto, common, combined, nginx, json, a LogFormat….",
    ),
    "max_bytes_per_trigger": (
        None,
        "With --follow: bytes per micro-batch at most.",
    ),
    "max_files_per_trigger": (
        None,
        "With --input-dir: files per micro-batch at most.",
    ),
    "max_future": (
        "1 day",
        "Event time ahead of the clock beyond which a line is quarantined.",
    ),
    "max_line_bytes": (
        65536,
        "Quarantine longer lines.",
    ),
    "no_panel": (
        (),
        "Leave out one of GoAccess's panels (repeatable).",
    ),
    "output_dir": (
        Path("out/stream"),
        "Root of the outputs.",
    ),
    "output_format": (
        "parquet",
        "parquet, json (JSON lines) or csv.",
    ),
    "queries": (
        "all",
        "Analytics outputs: all, none or a comma-separated list.",
    ),
    "rate": (
        None,
        "Load test: N lines a second from Spark's rate source.",
    ),
    "rate_sample": (
        None,
        "With --rate: the log whose lines are cycled through.",
    ),
    "session_gap": (
        "30 minutes",
        "Inactivity that ends a visitor's session.",
    ),
    "session_stats_window": (
        "1 hour",
        "Window of session count and durations.",
    ),
    "since": (
        None,
        "Keep events from TIME (ISO 8601, or 2h ago).",
    ),
    "sink": (
        "parquet",
        "",
    ),
    "sink_outputs": (
        "default",
        "Outputs sent to the --sink URLs: default, all or a list.",
    ),
    "site_host": (
        None,
        "Your site's host: its referrals leave the referrer panels.",
    ),
    "socket": (
        None,
        "Read lines from a TCP server; needs --format.",
    ),
    "state_dir": (
        Path("out/state"),
        "Root of the checkpoints.",
    ),
    "static_ext": (
        (),
        "Count this extension as a static file too (repeatable).",
    ),
    "store": (
        None,
        "Serving store: sqlite:///PATH or postgresql://…",
    ),
    "store_retention": (
        "2 hours",
        "Event time of trending windows kept in the store.",
    ),
    "store_retry": (
        "60 seconds",
        "How long a store write waits, retrying, for a store that is down.",
    ),
    "strict": (
        False,
        "Fail on a corrupt input file instead of quarantining it.",
    ),
    "top": (
        10,
        "Trending pages per window.",
    ),
    "traffic_window": (
        "1 minute",
        "Window of traffic and visitors.",
    ),
    "trending_slide": (
        "1 minute",
        "Slide of the trending-pages window.",
    ),
    "trending_window": (
        "5 minutes",
        "Sliding window of trending pages.",
    ),
    "trigger": (
        "1 second",
        "'available-now' or an interval such as '5 seconds'.",
    ),
    "until": (
        None,
        "Keep events before TIME.",
    ),
    "vhost_from_path": (
        None,
        "Site of a line: REGEX's first group in its path.",
    ),
    "watermark": (
        "10 minutes",
        "Event-time delay after which events are late.",
    ),
}
#: DemoSettings field → default, for the fields options set.
DEMO_FIELDS = {
    "host": "127.0.0.1",
    "out_dir": Path("out/demo"),
    "port": 8050,
    "rotate_every_s": 43200.0,
    "speedup": 600.0,
}
