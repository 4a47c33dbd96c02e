"""Device and sensor events: the IoT pipeline of the book's Ch. 8–9 and the fleet tracking of
Ch. 13, on real readings (the UCI occupancy data set of Ch. 15).

:mod:`~logstream.devices.readings` parses readings, joins the device registry and computes
per-device windows and threshold alerts; :mod:`~logstream.devices.state` tracks each device
(online, silent, offline; room occupied or free) with ``transformWithStateInPandas`` and
event-time timers; :mod:`~logstream.devices.pipeline` runs them as ``logstream devices run``,
scoring every reading with an occupancy model (:mod:`logstream.ml.occupancy`) when given one.
"""

from logstream.devices.join import alerts_near_changes
from logstream.devices.pipeline import (
    DEVICE_OUTPUTS,
    MODEL_OUTPUTS,
    DeviceConfig,
    check_device_model,
    load_registry,
    run_device_queries,
    start_device_queries,
)
from logstream.devices.readings import (
    BAD_READING,
    CONFUSION_COLUMNS,
    METRICS,
    READING_SCHEMA,
    REGISTRY_COLUMNS,
    device_windows,
    parse_readings,
    threshold_alerts,
    with_registry,
)
from logstream.devices.state import StateConfig, device_transitions, transitions

__all__ = [
    "BAD_READING",
    "CONFUSION_COLUMNS",
    "DEVICE_OUTPUTS",
    "METRICS",
    "MODEL_OUTPUTS",
    "READING_SCHEMA",
    "REGISTRY_COLUMNS",
    "DeviceConfig",
    "StateConfig",
    "alerts_near_changes",
    "check_device_model",
    "device_transitions",
    "device_windows",
    "load_registry",
    "parse_readings",
    "run_device_queries",
    "start_device_queries",
    "threshold_alerts",
    "transitions",
    "with_registry",
]
