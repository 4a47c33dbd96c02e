"""Sensor readings: parsing lines into the reading schema, the device registry join, and the
per-device window and threshold analytics (book Ch. 8–9, Ex. 8-3 to 8-5).

Input lines are CSV or JSON:

* **CSV**, the layout of the UCI occupancy data set (Candanedo & Feldheim 2016; the book's
  Ch. 15 example): ``"Date",Temperature,Humidity,Light,CO2,HumidityRatio,Occupancy``, the
  date quoted, local time without an offset. A header line is skipped. The device is the
  file's name without its extensions (``occupancy_datatest``), unless the line starts with a
  ``device`` field (8 fields: ``device,"Date",…``).
* **JSON lines**: ``{"device": …, "time": "2015-02-04 17:51:00" | ISO 8601, "temperature": …,
  "humidity": …, "light": …, "co2": …, "humidity_ratio": …, "occupancy": 0 | 1}``.

A line that does not parse is quarantined with its raw text, file and reason ``bad_reading``:
too few fields, a bad time, no device, no temperature, or any field given that is not a
number (``Humidity: 'abc' is not a number``). The other metrics and the occupancy label are
optional: left empty (or ``null`` in JSON), they are null. ``try_*`` functions keep ANSI mode
from failing a job.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DoubleType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from logstream.parsing import fenced

__all__ = [
    "BAD_READING",
    "CONFUSION_COLUMNS",
    "METRICS",
    "READING_SCHEMA",
    "REGISTRY_COLUMNS",
    "device_windows",
    "parse_readings",
    "threshold_alerts",
    "with_registry",
]

#: The measured quantities of a reading, in schema order, with their units.
METRICS = {
    "temperature": "°C",
    "humidity": "%",
    "light": "lux",
    "co2": "ppm",
    "humidity_ratio": "kg/kg",
}
#: The columns :func:`device_windows` adds for scored readings: the window's confusion matrix.
CONFUSION_COLUMNS = ("predicted_readings", "tp", "fp", "tn", "fn", "accuracy")
#: Quarantine reason of a line that is not a reading.
BAD_READING = "bad_reading"

READING_SCHEMA = StructType(
    [
        StructField("device", StringType(), False),
        StructField("event_time", TimestampType(), False),
        *(StructField(m, DoubleType(), True) for m in METRICS),
        StructField("occupancy", IntegerType(), True),  # the true label, where the data has it
        StructField("source_file", StringType(), True),
    ]
)

_JSON_SCHEMA = StructType(
    [
        StructField("device", StringType()),
        StructField("time", StringType()),
        *(StructField(m, StringType()) for m in METRICS),
        StructField("occupancy", StringType()),
    ]
)


def _time(text: Column) -> Column:
    """``2015-02-04 17:51:00`` (the session time zone, UTC) or ISO 8601 with an offset."""
    return F.coalesce(
        F.try_to_timestamp(text, F.lit("yyyy-MM-dd HH:mm:ss")),
        F.try_to_timestamp(text, F.lit("yyyy-MM-dd'T'HH:mm:ss[.SSS]XXX")),
        F.try_to_timestamp(text, F.lit("yyyy-MM-dd'T'HH:mm:ss[.SSS]")),
    )


def parse_readings(lines: DataFrame, fmt: str = "csv", *, detail: bool = False) -> DataFrame:
    """Parse reading lines (see the module docstring).

    Parameters
    ----------
    lines : DataFrame
        Batch or streaming, ``value`` (a line) and ``source_file`` (its file URI, or null).
    fmt : {"csv", "json"}
    detail : bool
        Also return ``quarantine_detail``: for a line that is not a reading, the first field
        that failed and why (``Temperature: 'abc' is not a number``, ``expected 7 fields
        (8 with a leading device), got 2``, ``not a JSON object``); null for a reading.

    Returns
    -------
    DataFrame
        :data:`READING_SCHEMA` columns plus ``raw_line`` and ``quarantine_reason`` (null for
        a reading, :data:`BAD_READING` otherwise; the reading columns may then be null), and
        ``quarantine_detail`` with ``detail``, behind :func:`logstream.parsing.fenced`: a
        filter on them parses each line once. Header lines and blank lines are dropped.

    Raises
    ------
    ValueError
        When ``fmt`` is neither ``csv`` nor ``json``.
    """
    value = F.col("value")
    stem = F.regexp_extract(F.col("source_file"), r"([^/]+?)(\.[A-Za-z0-9]+)*$", 1)
    if fmt == "csv":
        body = lines.where(
            (F.trim(value) != "") & ~F.lower(value).contains('"date"')  # the header
        )
        fields = F.split(F.regexp_replace(value, '"', ""), ",")
        n = F.size(fields)
        with_device = n == 8
        at = lambda i: F.try_element_at(  # noqa: E731
            fields, F.when(with_device, F.lit(i + 1)).otherwise(F.lit(i))
        )
        device = F.when(with_device, F.trim(F.try_element_at(fields, F.lit(1)))).otherwise(stem)
        parsed = body.select(
            device.alias("device"),
            _time(at(1)).alias("event_time"),
            *(at(2 + i).try_cast("double").alias(m) for i, m in enumerate(METRICS)),
            at(7).try_cast("int").alias("occupancy"),
            "source_file",
            value.alias("raw_line"),
            ((n == 7) | with_device).alias("_shape"),
            *(at(2 + i).alias(f"_{m}_text") for i, m in enumerate(_NUMBERS)),
            *(
                [
                    F.when(
                        (n != 7) & ~with_device,
                        F.format_string("expected 7 fields (8 with a leading device), got %d", n),
                    ).alias("_shape_detail"),
                    at(1).alias("_time_text"),
                ]
                if detail
                else []
            ),
        )
        names = _CSV_NAMES
    elif fmt == "json":
        body = lines.where(F.trim(value) != "")
        j = F.from_json(value, _JSON_SCHEMA)
        parsed = body.select(
            F.coalesce(j["device"], stem).alias("device"),
            _time(j["time"]).alias("event_time"),
            *(j[m].try_cast("double").alias(m) for m in METRICS),
            j["occupancy"].try_cast("int").alias("occupancy"),
            "source_file",
            value.alias("raw_line"),
            j.isNotNull().alias("_shape"),
            *(j[m].alias(f"_{m}_text") for m in _NUMBERS),
            *(
                [
                    # a line that is not JSON reads as an object of nulls (PERMISSIVE)
                    F.when(
                        j.isNull() | F.coalesce(*(j[k] for k in _JSON_SCHEMA.names)).isNull(),
                        F.when(
                            F.try_parse_json(value).isNull(), F.lit("not a JSON object")
                        ).otherwise(F.lit(f"none of the keys {', '.join(_JSON_SCHEMA.names)}")),
                    ).alias("_shape_detail"),
                    j["time"].alias("_time_text"),
                ]
                if detail
                else []
            ),
        )
        names = _JSON_NAMES
    else:
        raise ValueError(f"reading format {fmt!r}: use csv or json")
    good = (
        F.col("_shape")
        & F.col("event_time").isNotNull()
        & F.col("device").isNotNull()
        & (F.col("device") != "")
        & F.col("temperature").isNotNull()
    )
    for field in _NUMBERS:  # a field given must be a number; an empty one is null (optional)
        good = good & ~_not_a_number(field)
    # behind a one-element inline, so that the filters of good and bad readings that follow
    # do not copy the split into themselves: each line is parsed once (logstream.parsing.fenced)
    return fenced(
        parsed.select(
            *READING_SCHEMA.fieldNames(),
            "raw_line",
            F.when(good, F.lit(None).cast("string"))
            .otherwise(F.lit(BAD_READING))
            .alias("quarantine_reason"),
            *([_detail(names).alias("quarantine_detail")] if detail else []),
        )
    )


#: The number fields of a reading, in line order: the metrics, then the occupancy label.
_NUMBERS = (*METRICS, "occupancy")
#: How the detail of a bad line names a field: the UCI header's names for CSV, keys for JSON.
_CSV_NAMES = {
    "device": "device",
    "time": "Date",
    "temperature": "Temperature",
    "humidity": "Humidity",
    "light": "Light",
    "co2": "CO2",
    "humidity_ratio": "HumidityRatio",
    "occupancy": "Occupancy",
}
_JSON_NAMES = {name: name for name in ("device", "time", *_NUMBERS)}


def _not_a_number(field: str) -> Column:
    """The line gives ``field`` (not empty, not null) but it did not parse as a number."""
    text = F.col(f"_{field}_text")
    return F.coalesce(F.trim(text) != "", F.lit(False)) & F.col(field).isNull()


def _detail(names: dict[str, str]) -> Column:
    """The first check of a reading that fails, in the order of ``good``, and why."""

    def bad_value(field: str, text: Column, what: str) -> Column:
        return F.when(
            text.isNull() | (F.trim(text) == ""), F.lit(f"{names[field]}: missing")
        ).otherwise(F.format_string(f"{names[field]}: '%s' is not {what}", text))

    detail = (
        F.when(F.col("_shape_detail").isNotNull(), F.col("_shape_detail"))
        .when(
            F.col("event_time").isNull(),
            bad_value(
                "time",
                F.col("_time_text"),
                "a time (yyyy-MM-dd HH:mm:ss or ISO 8601 with an offset)",
            ),
        )
        .when(
            F.col("device").isNull() | (F.col("device") == ""),
            F.lit(f"{names['device']}: missing"),
        )
        .when(
            F.col("temperature").isNull(),
            bad_value("temperature", F.col("_temperature_text"), "a number"),
        )
    )
    for field in _NUMBERS[1:]:
        detail = detail.when(
            _not_a_number(field), bad_value(field, F.col(f"_{field}_text"), "a number")
        )
    return detail


#: The columns of a device registry (a reference table, CSV or Parquet): ``device`` → ``room``,
#: ``type`` and an optional upper threshold per metric (``<metric>_max``).
REGISTRY_COLUMNS = ("device", "room", "type", *(f"{m}_max" for m in METRICS))


def with_registry(readings: DataFrame, registry: DataFrame | None) -> DataFrame:
    """Join the device registry to every reading (a broadcast hash join on ``device``).

    Parameters
    ----------
    readings : DataFrame
        :data:`READING_SCHEMA` rows (batch or streaming).
    registry : DataFrame, optional
        :data:`REGISTRY_COLUMNS` (thresholds as doubles, null = none); None: no registry.

    Returns
    -------
    DataFrame
        The readings' columns, ``room`` and ``type`` (``unknown`` for a device not in the
        registry) and the ``<metric>_max`` thresholds (null without one).
    """
    cols = [F.col(c) for c in readings.columns]
    if registry is None:
        return readings.select(
            *cols,
            F.lit("unknown").alias("room"),
            F.lit("unknown").alias("type"),
            *(F.lit(None).cast("double").alias(f"{m}_max") for m in METRICS),
        )
    reg = registry.select(
        F.col("device").alias("_device"),
        *(F.col(c) for c in REGISTRY_COLUMNS[1:]),
    )
    joined = readings.join(F.broadcast(reg), F.col("device") == F.col("_device"), "left")
    return joined.select(
        *cols,
        F.coalesce(F.col("room"), F.lit("unknown")).alias("room"),
        F.coalesce(F.col("type"), F.lit("unknown")).alias("type"),
        *(F.col(f"{m}_max") for m in METRICS),
    )


def device_windows(readings: DataFrame, window: str = "5 minutes") -> DataFrame:
    """Mean, minimum and maximum of every metric per device and tumbling event-time window
    (the book's Ex. 8-4 and 8-5).

    Parameters
    ----------
    readings : DataFrame
        Registry-joined readings (:func:`with_registry`), batch or streaming; a streaming
        caller sets the watermark on ``event_time``.
    window : str
        Spark interval of the tumbling window.

    Returns
    -------
    DataFrame
        ``device``, ``room``, ``window_start``, ``window_end`` (timestamp), ``readings``
        (bigint), ``<metric>_mean``, ``<metric>_min``, ``<metric>_max`` (double, in the
        metric's unit: :data:`METRICS`), ``occupied_share`` (0–1: readings labelled occupied).
        When the readings are scored (a ``prediction`` column, 0/1:
        :func:`logstream.ml.occupancy.score_readings`), also the window's confusion matrix
        over its labelled readings: :data:`CONFUSION_COLUMNS`, ``predicted_readings``,
        ``tp``, ``fp``, ``tn``, ``fn`` (bigint; ``predicted_readings`` counts the readings
        with a label, ``tp`` those labelled and predicted occupied …) and ``accuracy``
        (double, (tp + tn) / predicted_readings; null when no reading has a label). Without
        a ``prediction`` column these columns are absent.
    """
    w = F.window("event_time", window)
    aggs = []
    for m in METRICS:
        aggs += [
            F.avg(m).alias(f"{m}_mean"),
            F.min(m).alias(f"{m}_min"),
            F.max(m).alias(f"{m}_max"),
        ]
    scored = "prediction" in readings.columns
    if scored:
        from logstream.ml.model import confusion_counts

        aggs += [
            F.count("occupancy").alias("predicted_readings"),
            *confusion_counts(F.col("occupancy"), F.col("prediction")),
        ]
    confusion = []
    if scored:
        confusion = [
            *CONFUSION_COLUMNS[:-1],
            F.when(
                F.col("predicted_readings") > 0,
                (F.col("tp") + F.col("tn")) / F.col("predicted_readings"),
            ).alias("accuracy"),
        ]
    return (
        readings.groupBy("device", "room", w.alias("w"))
        .agg(F.count("*").alias("readings"), *aggs, F.avg("occupancy").alias("occupied_share"))
        .select(
            "device",
            "room",
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            "readings",
            *(f"{m}_{s}" for m in METRICS for s in ("mean", "min", "max")),
            "occupied_share",
            *confusion,
        )
    )


def threshold_alerts(readings: DataFrame) -> DataFrame:
    """Readings above their device's threshold (the book's Ex. 8-3), one row per reading and
    metric over its threshold; stateless, so batch and stream alike.

    Parameters
    ----------
    readings : DataFrame
        Registry-joined readings (:func:`with_registry`).

    Returns
    -------
    DataFrame
        ``device``, ``room``, ``event_time``, ``metric`` (string), ``value``, ``threshold``
        (double, the metric's unit).
    """
    over = [
        F.when(
            F.col(m) > F.col(f"{m}_max"),
            F.struct(
                F.lit(m).alias("metric"),
                F.col(m).alias("value"),
                F.col(f"{m}_max").alias("threshold"),
            ),
        )
        for m in METRICS
    ]
    return (
        readings.select(
            "device",
            "room",
            "event_time",
            F.explode(F.array(*over)).alias("a"),  # no higher-order filter: generated code
        )
        .where(F.col("a").isNotNull())
        .select("device", "room", "event_time", "a.metric", "a.value", "a.threshold")
    )
