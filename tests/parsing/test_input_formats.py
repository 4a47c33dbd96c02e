"""More inputs: the NASA TSV files and JSON lines (the book's NASA data set is JSON), parsed
into the same events as the Common Log Format, in batch and in the stream."""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from tests import oracle
from tests.conftest import data_file
from tests.pipeline.helpers import config, run_to_end

from logstream.errors import LogFormatError
from logstream.parsing import compile_format, detect_format, events, parse, quarantine
from logstream.pipeline import Pipeline
from logstream.sources import read_lines

TSV_DAY = "NASA_19950801_fullday_imhotep.tsv.gz"
TSV_FIRST = "NASA_19950701_first10000.tsv.gz"
EVENT_KEY = ["client_host", "event_time", "method", "url_path", "query_string", "status"]


def tsv_rows(name: str) -> list[dict[str, str]]:
    """The TSV file read by the csv module (the oracle): its header names the columns."""
    with gzip.open(data_file(name), "rt", encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def head(path: Path, n: int = 100) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        return [fh.readline() for _ in range(n)]


def test_auto_detects_the_tsv_files_and_skips_their_header(spark):
    fmt = detect_format(head(data_file(TSV_DAY)))
    assert fmt.name == "nasa-tsv"
    parsed = parse(read_lines(spark, [data_file(TSV_DAY)]), fmt)
    rows = tsv_rows(TSV_DAY)
    assert len(rows) == 33_996
    assert quarantine(parsed).count() == 0  # the header is not a log line
    ev = events(parsed)
    totals = ev.agg(F.count("*"), F.sum("bytes_sent"), F.min("event_time")).first()
    assert totals[0] == len(rows)
    assert totals[1] == sum(int(r["bytes"]) for r in rows)
    assert totals[2] == datetime(1995, 8, 1, 4, 0, 1, tzinfo=UTC).replace(
        tzinfo=None
    )  # 00:00:01 -0400
    by_status = {r["status"]: r["count"] for r in ev.groupBy("status").count().collect()}
    assert by_status == dict(Counter(int(r["response"]) for r in rows))
    top = ev.groupBy("url_path").count().orderBy(F.desc("count"), "url_path").limit(10)
    want = Counter(r["url"].partition("?")[0] for r in rows)
    assert [(r[0], r[1]) for r in top.collect()] == sorted(
        want.items(), key=lambda kv: (-kv[1], kv[0])
    )[:10]


def book_json(refs: list[oracle.Ref]) -> list[str]:
    """The NASA lines as the book's JSON data set: host, ISO timestamp with the line's offset,
    the request line, http_reply and bytes (as numbers)."""
    out = []
    for r in refs:
        target = r.url_path + (f"?{r.query_string}" if r.query_string is not None else "")
        request = " ".join(p for p in (r.method, target, r.protocol) if p)
        obj = {
            "host": r.client_host,
            "timestamp": r.event_time.isoformat(),
            "request": request,
            "http_reply": r.status,
            "bytes": r.bytes_sent,
        }
        out.append(json.dumps(obj))
    return out


@pytest.fixture(scope="module")
def nasa_refs_2000() -> list[oracle.Ref]:
    refs = [
        oracle.parse_line(line)
        for line in oracle.read_lines(data_file("NASA_access_log_Jul95_first2000.log.gz"))
    ]
    return [r for r in refs if r is not None and r.url_path is not None]


def test_book_json_parses_into_the_same_events_as_the_common_log(spark, nasa_refs_2000, tmp_path):
    lines = book_json(nasa_refs_2000)
    bad = ['{"host": "cut', "[1, 2]", '{"host":"h","timestamp":"yesterday","http_reply":200}']
    path = tmp_path / "nasa.json"
    path.write_text("\n".join(lines + bad) + "\n")
    fmt = detect_format(head(path))
    assert fmt.name == "json"
    parsed = parse(read_lines(spark, [path]), fmt)
    got = events(parsed).select(*EVENT_KEY, "protocol", "bytes_sent")
    want = spark.createDataFrame(
        [
            (
                r.client_host,
                r.event_time.astimezone(UTC).replace(tzinfo=None),
                r.method,
                r.url_path,
                r.query_string,
                r.status,
                r.protocol,
                r.bytes_sent,
            )
            for r in nasa_refs_2000
        ],
        got.schema,
    )
    assert got.count() == len(nasa_refs_2000) > 1900
    assert got.exceptAll(want).count() == 0 and want.exceptAll(got).count() == 0
    reasons = sorted(r["reason"] for r in quarantine(parsed).collect())
    assert reasons == ["bad_timestamp", "format_mismatch", "format_mismatch"]


def test_a_field_mapping_reads_other_keys(spark, nasa_refs_2000, tmp_path):
    rows = [
        {"ip": r.client_host, "ts": r.epoch, "path": r.url_path, "code": str(r.status)}
        for r in nasa_refs_2000[:300]
    ]
    path = tmp_path / "mapped.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    fmt = compile_format("json:client_host=ip,event_time=ts,url_path=path,status=code")
    ev = events(parse(read_lines(spark, [path]), fmt))
    assert ev.where(F.col("bytes_sent") != 0).count() == 0  # no size mapped: nothing sent
    ev = ev.select("client_host", "event_time", "url_path", "status")
    got = sorted(
        (r[0], int(r[1].replace(tzinfo=UTC).timestamp()), r[2], r[3]) for r in ev.collect()
    )
    assert got == sorted((r["ip"], r["ts"], r["path"], int(r["code"])) for r in rows)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("json:client_host=ip,status", "is not FIELD=KEY"),
        ("json:host=ip,event_time=ts,status=s", "unknown field 'host'"),
        ("json:client_host=ip,status=s", "does not map event_time"),
    ],
)
def test_a_bad_field_mapping_is_rejected_with_the_fix(spec, message):
    with pytest.raises(LogFormatError, match=message):
        compile_format(spec)


def test_the_stream_reads_the_tsv_files_with_auto_detection(spark, tmp_path):
    """A directory of NASA TSV files streamed with --format auto: every line an event, each
    final one-minute window equal to a count of the file by the csv module."""
    landing = tmp_path / "in"
    landing.mkdir()
    raw = gzip.open(data_file(TSV_FIRST), "rb").read()
    (landing / "nasa_19950701.tsv").write_bytes(raw)
    cfg = config(
        tmp_path, landing, log_format="auto", queries="traffic_per_minute", watermark="1 minute"
    )
    pipeline = Pipeline(spark, cfg)
    run_to_end(pipeline)
    rows = list(csv.DictReader(io.StringIO(raw.decode()), delimiter="\t"))
    assert pipeline.totals.events == len(rows) == 9_999
    assert pipeline.totals.quarantined == 0
    minutes = Counter(int(r["time"]) // 60 * 60 for r in rows)
    watermark_s = pipeline.ingest.watermark_for_next_batch() // 1000
    assert watermark_s == max(int(r["time"]) for r in rows) - 60
    traffic = spark.read.parquet(str(tmp_path / "out" / "traffic_per_minute"))
    got = {
        int(r[0].replace(tzinfo=UTC).timestamp()): r[1]
        for r in traffic.select("window_start", "requests").collect()
    }
    want = {m: n for m, n in minutes.items() if m + 60 <= watermark_s}
    assert got == want and len(got) > 200
