"""Synthetic web traffic: a seeded site, Zipf page popularity, crawlers, bursts, flash crowds.

``logstream generate`` writes the lines to a file as fast as possible, or streams them through
the replay sinks (TCP server, chunk directory) paced in real time. Every line parses with
logstream's parser in the chosen format (``common`` or ``combined``). See ``docs/replay.md``.
"""

from logstream.generate.site import PROBE_PATHS, Page, Site, build_site, zipf_weights
from logstream.generate.traffic import (
    DEFAULT_FLASH_RANK,
    DEFAULT_START,
    FlashCrowd,
    GeneratedLine,
    TrafficConfig,
    TrafficGenerator,
    generate_lines,
)

__all__ = [
    "DEFAULT_FLASH_RANK",
    "DEFAULT_START",
    "PROBE_PATHS",
    "FlashCrowd",
    "GeneratedLine",
    "Page",
    "Site",
    "TrafficConfig",
    "TrafficGenerator",
    "build_site",
    "generate_lines",
    "zipf_weights",
]
