"""What a configuration may name of a model: its kind and the features it assembles.

:class:`logstream.pipeline.PipelineConfig` checks a ``--bot-model`` directory against these
without importing the model's code (:mod:`logstream.ml.bots`), which needs the sources and
the analytics above the configuration.
"""

from __future__ import annotations

__all__ = ["BOT_FEATURES", "KIND"]

#: The model kind of a bot model directory.
KIND = "bots"
#: The features, in the order the model assembles them, and their Spark SQL types.
BOT_FEATURES = {
    "request_rate": "double",
    "distinct_pages": "double",
    "error_ratio": "double",
    "bytes_per_request": "double",
    "static_share": "double",
    "mean_interarrival_s": "double",
    "robots": "double",
}
