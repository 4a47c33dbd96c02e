"""Machine learning on the stream (book Ch. 15 and 28; Spark guide "MLlib Operations").

* :mod:`logstream.ml.model`: versioned model directories (MLlib persistence and a JSON of
  kind, version and input schema, checked before the JVM starts) and the cross-validated
  classifier pipeline (VectorAssembler, StandardScaler, a classifier chosen by k-fold
  cross-validation).
* :mod:`logstream.ml.occupancy`: room occupancy from sensor readings (the UCI data set).
* :mod:`logstream.ml.bots`: crawler and bot detection from per-client window features of
  web logs.
"""

from logstream.ml.model import (
    META_FILE,
    MODEL_FORMAT,
    ModelInfo,
    binary_metrics,
    fit_classifier,
    load_model,
    read_model_info,
    save_model,
)

__all__ = [
    "META_FILE",
    "MODEL_FORMAT",
    "ModelInfo",
    "binary_metrics",
    "fit_classifier",
    "load_model",
    "read_model_info",
    "save_model",
]
