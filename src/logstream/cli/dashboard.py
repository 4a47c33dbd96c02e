"""``logstream dashboard``: the live web page over the serving store (no Spark here)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from logstream.cli.app import app, err_console
from logstream.config import DEFAULT_STORE
from logstream.errors import ConfigError


@app.command()
def dashboard(
    store: Annotated[
        str,
        typer.Option(
            "--store",
            help="The serving store `logstream run --store` writes (by default the same "
            "file): a SQLite file's PATH (or sqlite:///PATH) or "
            "postgresql://USER@HOST:PORT/DBNAME (docs/serving.md).",
        ),
    ] = f"sqlite:///{DEFAULT_STORE}",
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Address to listen on. The default accepts only this machine; another "
            "address (0.0.0.0) exposes the page, which then asks for the password of "
            "$LOGSTREAM_DASHBOARD_PASSWORD (HTTP basic authentication; see --no-auth).",
        ),
    ] = "127.0.0.1",
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            metavar="NAME",
            help="Also answer requests that name this host (repeatable), e.g. the public "
            "name of a reverse proxy. Others than the --host address and localhost get 400.",
            show_default=False,
        ),
    ] = None,
    no_auth: Annotated[
        bool,
        typer.Option(
            "--no-auth",
            help="Listen on an address other machines reach without a password (when a "
            "reverse proxy in front of it authenticates).",
        ),
    ] = False,
    port: Annotated[int, typer.Option("--port", help="TCP port (0 = any free port).")] = 8050,
    refresh: Annotated[
        float,
        typer.Option("--refresh", help="Seconds between refreshes of the page (0.5–60)."),
    ] = 2.0,
    top: Annotated[
        int | None,
        typer.Option(
            "--top", help="Trending pages listed. Default: the pipeline's --top (in the store)."
        ),
    ] = None,
    devices: Annotated[
        Path | None,
        typer.Option(
            "--devices",
            help="Also show the device pipeline's outputs: the --output-dir of "
            "`logstream devices run`.",
        ),
    ] = None,
    spark_ui: Annotated[
        str | None,
        typer.Option(
            "--spark-ui",
            help="URL of Spark's UI linked from the page. Default: port 4040 on the host the "
            "browser used to reach the dashboard.",
        ),
    ] = None,
) -> None:
    """Serve the live dashboard from a serving store.

    Trending pages, traffic, visitors, late and quarantined lines, pipeline health.

    It reads only the serving store (read-only) and refreshes itself.

    Example: logstream dashboard --store out/stream/logstream.db --port 8050
    """
    from logstream.dashboard import serve_dashboard
    from logstream.dashboard.guard import allowed_hosts, check_exposure, credentials_from_env
    from logstream.serving import store_file

    # a plain path is a SQLite file, as sqlite:///PATH; another URL scheme is refused
    path = store_file(store) if ":" in store.split("/", 1)[0] else Path(store)
    if not 0.5 <= refresh <= 60:
        raise ConfigError(f"--refresh {refresh:g} is out of range: use 0.5–60 seconds (e.g. 2)")
    if top is not None and not 1 <= top <= 1000:
        raise ConfigError(f"--top {top} is out of range: use 1–1000 (e.g. 10)")
    credentials = credentials_from_env()
    check_exposure(host, credentials, no_auth)  # before the store is looked at
    allowed_hosts(host, allowed_host or ())  # a bad --allowed-host stops here
    if path is None:  # PostgreSQL: a bad URL or an unreachable server stops here
        from logstream.serving.postgres import check_server, redact_url

        check_server(store)
    shown = redact_url(store) if path is None else str(path)

    def ready(url: str) -> None:
        waiting = (
            " (it does not exist yet: the page waits for it)"
            if path is not None and not path.exists()
            else ""
        )
        err_console.print(
            f"dashboard on [bold]{url}[/bold] reading {shown}{waiting}; Ctrl-C to stop",
            highlight=False,
        )

    serve_dashboard(
        store if path is None else path,
        host,
        port,
        refresh_s=refresh,
        top=top,
        spark_ui_url=spark_ui,
        on_ready=ready,
        devices_dir=devices,
        allowed=tuple(allowed_host or ()),
        credentials=credentials,
        no_auth=no_auth,
    )
    err_console.print("dashboard stopped")
