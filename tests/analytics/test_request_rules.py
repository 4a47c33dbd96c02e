"""GoAccess's request rules as Spark computes them, against their definitions in plain Python:
a content page (its path ends in ``.html``, ``.htm`` or ``/``, any case), a static file (the
text after the target's last dot is a static extension, any case) and a target to decode (it
holds a ``%``), on generated paths and on every path of the real NASA day."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from logstream.analytics import is_content_page
from logstream.analytics.requests import is_static_target, static_names
from logstream.parsing import compile_format, events, parse
from logstream.sources import read_lines

STATIC = set(static_names())
# dots, slashes, the letters of the extensions in both cases, a query, escapes, non-ASCII
PATHS = st.lists(
    st.text(alphabet="./?%2ABhHtTmMlLcsSjpgGiéİ", max_size=12).map(lambda t: "/" + t),
    min_size=1,
    max_size=40,
)


def _page(path: str | None) -> bool:
    return path is not None and (path.endswith("/") or path.lower().endswith((".html", ".htm")))


def _static(target: str) -> bool:
    return "." in target and target.rsplit(".", 1)[1].lower() in STATIC


def _spark_rules(spark, paths: list[str | None]) -> list[tuple]:
    frame = spark.createDataFrame([(p,) for p in paths], "url_path string")
    path = F.col("url_path")
    return [
        tuple(r)
        for r in frame.select(
            "url_path",
            is_content_page().alias("page"),
            F.coalesce(is_static_target(path), F.lit(False)).alias("static"),
            path.contains("%").alias("escaped"),
        ).collect()
    ]


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(paths=PATHS)
def test_the_rules_agree_with_their_definitions_on_generated_paths(spark, paths):
    for path, page, static, escaped in _spark_rules(spark, [*paths, None, "/A.HTML", "/x.Htm"]):
        assert page == _page(path), path
        assert static == (path is not None and _static(path)), path
        assert escaped == (None if path is None else "%" in path), path


def test_the_rules_agree_with_their_definitions_on_every_nasa_path(spark, nasa_day):
    parsed = events(parse(read_lines(spark, [nasa_day]), compile_format("common")))
    paths = [r[0] for r in parsed.select("url_path").distinct().collect()]
    rules = _spark_rules(spark, paths)
    assert len(rules) == len(paths) > 1_500
    assert [r for r in rules if r[1] != _page(r[0]) or r[2] != _static(r[0])] == []
    assert sum(r[1] for r in rules) > 300 and sum(r[2] for r in rules) > 300
