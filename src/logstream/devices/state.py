"""Per-device state: online, silent, offline, and room occupancy — the fleet-management
pattern of the book's Ch. 13, with ``transformWithStateInPandas`` and event-time timers
(Spark guide, "Arbitrary stateful operations: transformWithState").

A device is **online** while it reports, **silent** once no reading came for
``silent_after`` and **offline** once none came for ``offline_after`` (both measured in event
time from its newest reading). Each change is an event with the time it happened: a device
whose newest reading is at ``t`` goes silent at ``t + silent_after`` and offline at
``t + offline_after``, and back online at its next reading. Its room's **occupancy** label
(where the data has one) changes between ``occupied`` and ``free``; each change is an event
with the duration of the state it ends.

The same transitions come out however the readings are cut into micro-batches: a gap inside
one micro-batch's readings is found while walking them in time order; a gap at the end of the
readings is closed by a timer when the watermark passes it. :func:`transitions` is the plain
Python rule (a test oracle and the per-key step); :class:`DeviceProcessor` applies it per
device on a stream.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import (
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from logstream.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql.streaming.stateful_processor import ExpiredTimerInfo, TimerValues

__all__ = [
    "TRANSITION_COLUMNS",
    "DeviceProcessor",
    "DeviceState",
    "StateConfig",
    "device_transitions",
    "transitions",
]

#: Output columns of :func:`device_transitions`, in order.
TRANSITION_COLUMNS = ("device", "room", "kind", "from_state", "to_state", "at", "duration_s")

_OUTPUT = StructType(
    [
        StructField("device", StringType()),
        StructField("room", StringType()),
        StructField("kind", StringType()),  # "status" or "occupancy"
        StructField("from_state", StringType()),
        StructField("to_state", StringType()),
        StructField("at_ms", LongType()),
        StructField("duration_ms", LongType()),  # of the state that ends
        StructField("at", TimestampType()),  # the event time of the output (its watermark)
    ]
)
_STATE = StructType(
    [
        StructField("room", StringType()),
        StructField("last_ms", LongType()),  # newest reading
        StructField("status", StringType()),
        StructField("status_since_ms", LongType()),
        StructField("occupancy", IntegerType()),  # -1: unknown yet
        StructField("occupancy_since_ms", LongType()),
        StructField("timer_ms", LongType()),  # the registered timer, -1: none
    ]
)


@dataclass(frozen=True)
class StateConfig:
    """When a device is silent and offline.

    Attributes
    ----------
    silent_after_ms, offline_after_ms : int
        Event time without a reading after which a device is silent, then offline
        (0 < silent ≤ offline), milliseconds.

    Raises
    ------
    ConfigError
        When the durations are not positive or silent is after offline.
    """

    silent_after_ms: int = 3 * 60_000
    offline_after_ms: int = 10 * 60_000

    def __post_init__(self) -> None:
        if not 0 < self.silent_after_ms <= self.offline_after_ms:
            raise ConfigError(
                f"--silent-after ({self.silent_after_ms // 1000} s) must be positive and at "
                f"most --offline-after ({self.offline_after_ms // 1000} s)"
            )


class DeviceState(NamedTuple):
    """What is kept per device (one row of state)."""

    room: str
    last_ms: int
    status: str
    status_since_ms: int
    occupancy: int
    occupancy_since_ms: int
    timer_ms: int = -1


Transition = tuple[str, str, str, int, int | None]  # kind, from, to, at_ms, duration_ms


def _status_change(st: DeviceState, to: str, at_ms: int, out: list[Transition]) -> DeviceState:
    out.append(("status", st.status, to, at_ms, at_ms - st.status_since_ms))
    return st._replace(status=to, status_since_ms=at_ms)


def _silence(
    st: DeviceState, until_ms: int, cfg: StateConfig, out: list[Transition]
) -> DeviceState:
    """The status changes due strictly before ``until_ms`` (a reading, or the watermark): a
    device is silent only when *more* than ``silent_after`` passed without a reading, so a
    reading exactly at the deadline keeps it online; and a reading at the watermark may still
    come."""
    for to, after in (("silent", cfg.silent_after_ms), ("offline", cfg.offline_after_ms)):
        at = st.last_ms + after
        if at < until_ms and _RANK[st.status] < _RANK[to]:
            st = _status_change(st, to, at, out)
    return st


_RANK = {"online": 0, "silent": 1, "offline": 2}


def transitions(
    st: DeviceState | None,
    room: str,
    readings: Iterable[tuple[int, int | None]],
    watermark_ms: int,
    cfg: StateConfig,
) -> tuple[DeviceState | None, list[Transition]]:
    """Fold readings ``(event_ms, occupancy)`` (any order) into a device's state, then apply
    the silences the watermark has passed.

    A reading older than the newest one already folded in changes nothing (the status is
    about the newest reading; the windows still count it). The first reading of a device
    makes it online with no transition.

    Returns
    -------
    tuple
        The new state (None: never seen) and the transitions, in time order.
    """
    out: list[Transition] = []
    for ms, occ in sorted(readings, key=lambda r: r[0]):
        if st is None:
            st = DeviceState(room, ms, "online", ms, -1 if occ is None else occ, ms)
            continue
        if ms <= st.last_ms:
            continue
        st = _silence(st, ms, cfg, out)
        if st.status != "online":
            st = _status_change(st, "online", ms, out)
        if occ is not None and occ != st.occupancy:
            if st.occupancy >= 0:
                names = ("free", "occupied")
                out.append(
                    ("occupancy", names[st.occupancy], names[occ], ms, ms - st.occupancy_since_ms)
                )
            st = st._replace(occupancy=occ, occupancy_since_ms=ms)
        st = st._replace(last_ms=ms, room=room)
    if st is not None:
        st = _silence(st, watermark_ms, cfg, out)
    return st, out


def _next_due(st: DeviceState, cfg: StateConfig) -> int | None:
    """The timer of the next silence: 1 ms after it is due (a timer fires when the watermark
    reaches it; the silence needs the watermark past its time)."""
    if st.status == "online":
        return st.last_ms + cfg.silent_after_ms + 1
    if st.status == "silent":
        return st.last_ms + cfg.offline_after_ms + 1
    return None


class DeviceProcessor(StatefulProcessor):
    """``transformWithStateInPandas`` processor: :func:`transitions` per device, with one
    event-time timer at the device's next due silence (silent, then offline).

    Input rows, grouped by ``device``: ``room`` (string), ``event_ms`` (bigint),
    ``occupancy`` (int, nullable). Output: :data:`_OUTPUT` rows.
    """

    def __init__(self, config: StateConfig) -> None:
        self.config = config

    def init(self, handle: StatefulProcessorHandle) -> None:
        """Declare the state variable."""
        self.handle = handle
        self.state = handle.getValueState("device", _STATE)

    def _load(self) -> DeviceState | None:
        row = self.state.get()
        return None if row is None else DeviceState(*row)

    def _finish(
        self, device: str, st: DeviceState | None, out: list[Transition]
    ) -> Iterator[pd.DataFrame]:
        if st is not None:
            due = _next_due(st, self.config)
            if due != st.timer_ms:
                if st.timer_ms >= 0:
                    self.handle.deleteTimer(st.timer_ms)
                if due is not None:
                    self.handle.registerTimer(due)
                st = st._replace(timer_ms=-1 if due is None else due)
            self.state.update(tuple(st))
        if out:
            import pandas as pd

            room = st.room if st is not None else None
            frame = pd.DataFrame(
                [(device, room, *t) for t in out], columns=[f.name for f in _OUTPUT.fields[:-1]]
            )
            frame["at"] = pd.to_datetime(frame["at_ms"], unit="ms")  # UTC, the session zone
            yield frame

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        """Fold the device's new readings, then the silences the watermark passed."""
        import pandas as pd

        frame = pd.concat(list(rows), ignore_index=True)
        room = str(frame["room"].iloc[-1])
        occ = frame["occupancy"].astype("Int64")
        readings = [
            (int(ms), None if pd.isna(o) else int(o))
            for ms, o in zip(frame["event_ms"], occ, strict=True)
        ]
        st, out = transitions(
            self._load(), room, readings, timerValues.getCurrentWatermarkInMs(), self.config
        )
        yield from self._finish(key[0], st, out)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        """The watermark passed the device's next silence: apply it (and the next, if due)."""
        st = self._load()
        if st is None:
            return
        st = st._replace(timer_ms=-1)  # this timer has fired
        st, out = transitions(st, st.room, [], timerValues.getCurrentWatermarkInMs(), self.config)
        yield from self._finish(key[0], st, out)

    def close(self) -> None:
        """Nothing to release."""


def device_transitions(readings: DataFrame, config: StateConfig | None = None) -> DataFrame:
    """Status and occupancy transitions of every device (see the module docstring).

    Parameters
    ----------
    readings : DataFrame
        Streaming, registry-joined readings (``device``, ``room``, ``event_time``,
        ``occupancy``) with a watermark on ``event_time`` set by the caller.
    config : StateConfig, optional

    Returns
    -------
    DataFrame
        Streaming, append mode: ``device``, ``room``, ``kind`` (``status`` or ``occupancy``),
        ``from_state``, ``to_state`` (``online``/``silent``/``offline``, or
        ``free``/``occupied``), ``at`` (timestamp: when the change happened, event time),
        ``duration_s`` (double, seconds: how long the ended state lasted). ``at`` is the
        output's event-time column (``eventTimeColumnName``): the watermark propagates, so a
        stateful operator (:func:`~logstream.devices.join.alerts_near_changes`) may follow.
    """
    rows = readings.select(
        "device", "room", F.unix_millis("event_time").alias("event_ms"), "occupancy"
    )
    out = rows.groupBy("device").transformWithStateInPandas(
        statefulProcessor=DeviceProcessor(config or StateConfig()),
        outputStructType=_OUTPUT,
        outputMode="append",
        timeMode="EventTime",
        eventTimeColumnName="at",
    )
    return out.select(
        "device",
        "room",
        "kind",
        "from_state",
        "to_state",
        "at",
        (F.col("duration_ms") / 1000).alias("duration_s"),
    )
