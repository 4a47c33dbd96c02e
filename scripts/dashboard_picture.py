"""Make the README's picture of the dashboard again, from the demo's store, in Chromium.

What ``make run`` shows, taken as a user sees it:

1. the demo runs (``logstream run`` with no source: the real NASA day replayed live into a
   rotated log, followed by the pipeline, its dashboard served) under a temporary directory;
2. once its store holds ``--event-hours`` hours of event time, Debian's Chromium (driven by
   Playwright, as ``tests/dashboard/test_browser.py`` drives it; Playwright's own browser is
   never downloaded) opens the dashboard at 1400 px, chooses the ``--range`` time range and
   takes the whole page;
3. the demo is stopped (Ctrl-C) and the picture written to ``--out`` with what made it in the
   PNG's text chunks: ``Software`` (this script), ``Source`` (the demo's log and store),
   ``Range`` and ``Panels`` (the ids of the page's panels and tiles pictured), which
   ``tests/dashboard/test_picture.py`` checks against the current page.

Usage::

    python scripts/dashboard_picture.py            # docs/dashboard.png, about two minutes

It needs Java, the real NASA log in ``$LOGSTREAM_DATA_DIR`` and ``/usr/bin/chromium``
(``scripts/ensure-chromium.sh``).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
#: The PNG text chunk naming the script that made the picture.
SOFTWARE = "scripts/dashboard_picture.py"


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def event_hours(store: Path) -> float:
    """Hours of event time the demo's store holds (0 before its first micro-batch)."""
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=1) as conn:
            row = conn.execute(
                "SELECT MIN(window_start), MAX(window_end) FROM traffic_per_minute"
            ).fetchone()
    except sqlite3.Error:
        return 0.0
    if not row or row[0] is None:
        return 0.0
    first, last = (time.mktime(time.strptime(t[:19], "%Y-%m-%dT%H:%M:%S")) for t in row)
    return (last - first) / 3600


def png_with_text(data: bytes, text: dict[str, str]) -> bytes:
    """``data`` (a PNG) with a ``tEXt`` chunk per item of ``text``, before its ``IEND``."""
    end = data.rindex(b"IEND") - 4  # the chunk's length field
    chunks = b""
    for key, value in text.items():
        body = key.encode("latin-1") + b"\0" + value.encode("latin-1", "replace")
        crc = zlib.crc32(b"tEXt" + body) & 0xFFFFFFFF
        chunks += struct.pack(">I", len(body)) + b"tEXt" + body + struct.pack(">I", crc)
    return data[:end] + chunks + data[end:]


def main() -> int:
    """Run the demo, take the page, write the picture; the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "dashboard.png")
    parser.add_argument("--range", default="6h", help="the page's time range (a control value)")
    parser.add_argument("--event-hours", type=float, default=8.0, help="event time to wait for")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait at most")
    args = parser.parse_args()
    if not CHROMIUM.exists():
        print(f"{CHROMIUM} is missing: run scripts/ensure-chromium.sh", file=sys.stderr)
        return 2
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")  # never fetch a browser
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="logstream-picture-") as tmp:
        # the demo as make run starts it, in a directory of its own: its store is
        # out/demo/logstream.db, as the page names it for a user
        out, port = Path(tmp) / "out" / "demo", free_port()
        env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
        demo = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "logstream",
                "run",
                "--demo-out",
                "out/demo",
                "--port",
                str(port),
            ],
            cwd=tmp,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + args.timeout
            while event_hours(out / "logstream.db") < args.event_hours:
                if demo.poll() is not None or time.monotonic() > deadline:
                    print("the demo ended or took too long", file=sys.stderr)
                    return 1
                time.sleep(1)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(f"http://127.0.0.1:{port}/")
                page.wait_for_selector("#kpis .kpi", timeout=60_000)
                page.check(f"#range input[value='{args.range}']")
                page.wait_for_timeout(4000)  # a refresh, and plotly's drawing
                panels = page.evaluate(  # the page's own elements, not plotly's
                    "() => [...document.querySelectorAll('main [id]')]"
                    ".filter(e => e.offsetParent !== null && !e.closest('.js-plotly-plot'))"
                    ".map(e => e.id)"
                )
                picture = page.screenshot(full_page=True)
                browser.close()
        finally:
            if demo.poll() is None:
                demo.send_signal(signal.SIGINT)  # Ctrl-C: the demo stops as a user stops it
                try:
                    demo.wait(90)
                except subprocess.TimeoutExpired:
                    os.killpg(demo.pid, signal.SIGKILL)
                    demo.wait()
    text = {
        "Software": SOFTWARE,
        "Source": "the demo (logstream run with no source) over "
        "NASA_access_log_Jul95_day09.log.gz; its store out/demo/logstream.db",
        "Range": args.range,
        "Panels": ",".join(sorted(set(panels))),
    }
    args.out.write_bytes(png_with_text(picture, text))
    print(f"written {args.out} ({len(picture):,} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
