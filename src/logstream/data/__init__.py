"""Data: locating real logs and fetching public ones."""

from logstream.data.fetch import (
    DATASETS,
    NASA_DAY_FILE,
    DataFetchError,
    Dataset,
    cache_dir,
    fetch,
    find_logs,
)

__all__ = [
    "DATASETS",
    "NASA_DAY_FILE",
    "DataFetchError",
    "Dataset",
    "cache_dir",
    "fetch",
    "find_logs",
]
