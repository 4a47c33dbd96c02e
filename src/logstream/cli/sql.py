"""``logstream sql``: SQL over live result tables kept by Spark's memory sink.

The command reads log files (or directories, watched for new files) as a stream, parses them
with :mod:`logstream.parsing` and keeps three streaming queries in Spark's **memory sink**,
each under its ``queryName`` as a table of the session:

===================  ====================================================  =============
table                rows (analytics function)                             output mode
===================  ====================================================  =============
``urlranks``         requests and bytes per URL path, the ``--top`` most   complete
                     requested (:func:`logstream.analytics.top_urls`)
``status_classes``   requests per status class                             complete
                     (:func:`logstream.analytics.status_class_counts`)
``traffic``          requests, bytes, status classes and error rate per    append
                     ``--window`` (:func:`logstream.analytics.traffic_per_window`),
                     a window once the watermark (``--watermark``) passes it
===================  ====================================================  =============

Complete mode rewrites the whole table every micro-batch, which is what a ranking needs (the
book's ``urlranks`` example, "Stream Processing with Apache Spark", Ch. 10–11: *The Memory
Sink*); the windowed table is appended once per final window. Spark's memory sink supports
only the append and complete modes (Spark guide, "Output Sinks"), so there is no update-mode
table. The memory sink keeps its rows in the driver and has no fault tolerance: it is for
interactive exploration and small inputs, not for the pipeline's outputs.

With ``--execute SQL`` (repeatable) the statements run once every available input line has
been processed (``processAllAvailable``: the same answer every time) and the result is printed
as tables, or as JSON lines with ``--json``. Without it an interactive prompt opens, also
after the available input is processed; then every statement reads the tables as they are at
that moment while the queries keep running (a watched directory's new files show up).
Prompt commands: ``.tables``, ``.status``, ``.help``, ``.quit``.
"""

from __future__ import annotations

import cmd
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from logstream.cli.app import FormatOption, MasterOption, app
from logstream.config import SparkSettings
from logstream.errors import ConfigError
from logstream.units import plural

__all__ = ["TABLES", "sql"]

#: The live tables: name → (output mode, what a row is).
TABLES = {
    "urlranks": ("complete", "requests and bytes per URL path, most requested first"),
    "status_classes": ("complete", "requests per status class"),
    "traffic": ("append", "requests, bytes, status classes per final window"),
}

#: Values are printed as they are: no Rich markup (URL paths may hold ``[ ]``), no emoji
#: shortcodes (``root:x:0:0`` must not become ``root❌0:0``), no highlighting.
_out = Console(soft_wrap=True, highlight=False, markup=False, emoji=False)


def _spark_errors() -> tuple[type[BaseException], ...]:
    """The errors of a failed statement: PySpark's (its base class) and Py4J's (a Java-side
    exception PySpark does not convert, ``Py4JJavaError``, is one)."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return (PySparkException, Py4JError)


def spark_error_line(error: BaseException) -> str:
    """One line saying what a failed statement's Spark error is.

    A PySpark error (:class:`pyspark.errors.PySparkException`: analysis, parse, runtime,
    arithmetic …) gives its first line. A Java-side error that PySpark does not convert
    (:class:`py4j.protocol.Py4JJavaError`, e.g. ``java.sql.SQLException: No suitable driver``
    of a JDBC view) gives the Java exception's own first line, and its root cause's when that
    differs (a failed job's ``SparkException`` wraps the task's exception). Any other error
    gives its type and first line.
    """
    from py4j.protocol import Py4JJavaError

    def first(text: str) -> str:
        lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
        return lines[0] if lines else ""

    if isinstance(error, Py4JJavaError):
        try:
            java = error.java_exception
            line = first(java.toString())
            root = java
            while root.getCause() is not None and root.getCause() is not root:
                root = root.getCause()
            cause = first(root.toString())
            if cause and cause not in line:
                line = f"{line} (caused by {cause})"
            return line
        except Exception:  # the JVM is gone: what Py4J said
            pass
    line = first(str(error))
    return line or type(error).__name__


def _start_tables(
    spark: Any,
    inputs: list[str],
    log_format: str,
    tables: list[str],
    top: int,
    window: str,
    watermark: str,
    checkpoints: Path,
) -> list[Any]:
    """Start one memory-sink query per table of ``tables`` (:data:`TABLES`); returns them."""
    from pyspark.sql import functions as F

    from logstream import analytics
    from logstream.parsing import events, parse, resolve_format
    from logstream.pipeline.run import detect_file_format
    from logstream.sources import input_files

    files = input_files(inputs)
    if log_format == "auto":
        fmt = detect_file_format(Path(files[0]))
    else:
        fmt = resolve_format(log_format)
    streams = []
    for path in inputs:
        reader = spark.readStream.format("text")
        if Path(path).is_dir():
            reader = reader.option("recursiveFileLookup", "true")
        elif Path(path).is_file():  # the file source reads directories: this file of its own
            escaped = re.sub(r"([*?\[\]{}\\])", r"\\\1", Path(path).name)
            reader = reader.option("pathGlobFilter", escaped)
            path = str(Path(path).parent)
        streams.append(
            reader.load(path).select("value", F.col("_metadata.file_path").alias("source_file"))
        )
    lines = streams[0]
    for more in streams[1:]:
        lines = lines.unionByName(more)
    ev = events(parse(lines, fmt))
    frames = {
        "urlranks": lambda: analytics.top_urls(ev, top),
        "status_classes": lambda: analytics.status_class_counts(ev),
        "traffic": lambda: analytics.traffic_per_window(
            ev.withWatermark("event_time", watermark), window
        ),
    }
    queries = []
    for name in tables:
        frame = frames[name]()
        mode = TABLES[name][0]
        spark.sql(f"DROP VIEW IF EXISTS {name}")  # a table of an earlier run in this session
        queries.append(
            frame.writeStream.format("memory")
            .queryName(name)
            .outputMode(mode)
            .option("checkpointLocation", str(checkpoints / name))
            .start()
        )
    return queries


def _rows(spark: Any, statement: str, max_rows: int) -> tuple[list[str], list[Any], bool]:
    """Run one statement: its column names, at most ``max_rows`` rows, and whether cut."""
    df = spark.sql(statement)
    rows = df.limit(max_rows + 1).collect()
    return df.columns, rows[:max_rows], len(rows) > max_rows


def _print_table(columns: list[str], rows: list[Any], cut: bool, title: str | None) -> None:
    from rich.text import Text

    from logstream.sinks.webhook import json_safe

    # Text cells: a value is shown as it is, never read as markup or emoji shortcodes
    table = Table(title=None if title is None else Text(title), title_justify="left")
    for name in columns:
        table.add_column(Text(name))
    for row in rows:
        table.add_row(*(Text("" if v is None else str(json_safe(v))) for v in row))
    _out.print(table)
    if cut:
        _out.print(f"(first {plural(len(rows), 'row')}; raise --max-rows to see more)")


def _json_line(columns: list[str], rows: list[Any]) -> str:
    from logstream.sinks.webhook import json_safe

    return json.dumps([json_safe(dict(zip(columns, row, strict=True))) for row in rows])


class SqlShell(cmd.Cmd):
    """The interactive prompt: SQL statements and ``.`` commands, one a line."""

    intro = (
        "logstream sql: live tables "
        + ", ".join(TABLES)
        + ". End with .quit; .tables lists them, .status shows the queries."
    )
    prompt = "sql> "

    def __init__(self, spark: Any, queries: list[Any], max_rows: int, json_out: bool) -> None:
        super().__init__(stdin=sys.stdin, stdout=sys.stdout)
        self.use_rawinput = sys.stdin.isatty()
        if not self.use_rawinput:
            self.prompt = ""
        self.spark = spark
        self.queries = queries
        self.max_rows = max_rows
        self.json_out = json_out

    def emptyline(self) -> bool:
        """Do nothing on an empty line (``cmd`` would repeat the last command)."""
        return False

    def do_EOF(self, _arg: str) -> bool:
        """Leave at the end of the input."""
        return True

    def default(self, line: str) -> bool:
        """A ``.`` command or a SQL statement."""
        text = line.strip().rstrip(";").strip()
        command = text.lower()
        if command in (".quit", ".exit", "quit", "exit"):
            return True
        if command == ".help":
            _out.print("SQL statements over the tables; .tables, .status, .quit")
        elif command == ".tables":
            for query in self.queries:
                mode, what = TABLES[query.name]
                _out.print(f"{query.name}  ({mode} mode): {what}")
        elif command == ".status":
            for query in self.queries:
                progress = query.lastProgress or {}
                _out.print(
                    f"{query.name}: {query.status['message']}; last batch "
                    f"{progress.get('batchId', '-')}, "
                    f"{plural(progress.get('numInputRows', 0), 'row')}"
                )
        elif command.startswith("."):
            _out.print(f"unknown command {text!r}: .tables, .status, .help or .quit")
        else:
            self._statement(text)
        return False

    def _statement(self, text: str) -> None:
        try:
            columns, rows, cut = _rows(self.spark, text, self.max_rows)
        except _spark_errors() as e:  # any Spark error, Python- or Java-side: the prompt goes on
            _out.print(f"error: {spark_error_line(e)}")
            return
        if self.json_out:
            _out.print(_json_line(columns, rows), soft_wrap=True)
        else:
            _print_table(columns, rows, cut, None)


@app.command("sql")
def sql(
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="PATH", help="Log files or directories (read as a stream; plain or .gz)."
        ),
    ],
    execute: Annotated[
        list[str] | None,
        typer.Option(
            "--execute",
            "-e",
            metavar="SQL",
            help="Run this SQL once the available input is processed, print the result and "
            "exit (repeatable). Without it, an interactive prompt opens.",
        ),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print each result as one JSON array (scripts).")
    ] = False,
    log_format: FormatOption = "auto",
    top: Annotated[
        int, typer.Option("--top", min=1, help="URL paths kept in urlranks (most requested).")
    ] = 1000,
    window: Annotated[
        str, typer.Option("--window", metavar="SPAN", help="Tumbling window of the traffic table.")
    ] = "1 minute",
    watermark: Annotated[
        str,
        typer.Option(
            "--watermark",
            metavar="SPAN",
            help="Event-time delay after which a traffic window is final.",
        ),
    ] = "10 minutes",
    tables: Annotated[
        str,
        typer.Option(
            "--tables",
            metavar="LIST",
            help="Comma-separated tables to keep (each is one streaming query reading the "
            "input): " + ", ".join(TABLES) + ". Default: all.",
        ),
    ] = "all",
    max_rows: Annotated[
        int, typer.Option("--max-rows", min=1, help="Rows printed per statement at most.")
    ] = 1000,
    master: MasterOption = None,
) -> None:
    """Query live result tables with SQL.

    The tables (Spark's memory sink): urlranks, status_classes, traffic.

    Example: logstream sql access.log.gz -e "SELECT url_path, requests FROM urlranks LIMIT 10"
    """
    from logstream.pipeline.config import spark_interval
    from logstream.session import get_spark
    from logstream.sources import expand_inputs

    inputs = expand_inputs(paths)  # before the JVM starts
    chosen = (
        list(TABLES)
        if tables.strip().lower() == "all"
        else [t.strip().lower() for t in tables.split(",") if t.strip()]
    )
    unknown = [t for t in chosen if t not in TABLES]
    if unknown or not chosen:
        raise ConfigError(
            f"--tables {tables!r}: unknown table {unknown[0] if unknown else ''!r}; choose "
            "'all' or from " + ", ".join(TABLES)
        )
    for label, value in (("--window", window), ("--watermark", watermark)):
        try:
            spark_interval(value)
        except ValueError as e:
            raise ConfigError(f"{label}: {e}") from None
    spark = get_spark(SparkSettings.build(master=master))
    with tempfile.TemporaryDirectory(prefix="logstream-sql-") as checkpoints:
        queries = _start_tables(
            spark, inputs, log_format, chosen, top, window, watermark, Path(checkpoints)
        )
        try:
            for query in queries:
                query.processAllAvailable()
            if execute:
                for statement in execute:
                    try:
                        columns, rows, cut = _rows(spark, statement, max_rows)
                    except _spark_errors() as e:
                        raise ConfigError(
                            f"--execute {statement!r} failed: {spark_error_line(e)}"
                        ) from None
                    if json_out:
                        typer.echo(_json_line(columns, rows))
                    else:
                        _print_table(columns, rows, cut, statement)
            else:
                SqlShell(spark, queries, max_rows, json_out).cmdloop()
        finally:
            for query in queries:
                query.stop()
