"""A local webhook receiver for the sink tests: records every POST, can fail the first ones."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class HookServer:
    """An ``http.server`` in a thread that records POSTed JSON arrays by ``Idempotency-Key``.

    ``fail_first`` POSTs are answered ``fail_status`` (500: retried by the writer) without
    recording them; ``fail_keys`` answers 500 to every POST of those keys. ``accepted`` lists
    every accepted (key, rows) in arrival order, duplicates included; ``rows_by_key`` keeps the
    first delivery of each key, as a de-duplicating receiver would.
    """

    def __init__(self, fail_first: int = 0, fail_status: int = 500) -> None:
        self.fail_first = fail_first
        self.fail_status = fail_status
        self.fail_keys: set[str] = set()
        self.failed = 0
        self.accepted: list[tuple[str, list[dict[str, Any]]]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                key = self.headers["Idempotency-Key"]
                with server.lock:
                    fail = server.failed < server.fail_first or key in server.fail_keys
                    if fail:
                        server.failed += 1
                    else:
                        server.accepted.append((key, json.loads(body)))
                self.send_response(server.fail_status if fail else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> HookServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def keys(self) -> list[str]:
        with self.lock:
            return [key for key, _ in self.accepted]

    @property
    def rows_by_key(self) -> dict[str, list[dict[str, Any]]]:
        with self.lock:
            first: dict[str, list[dict[str, Any]]] = {}
            for key, rows in self.accepted:
                first.setdefault(key, rows)
            return first

    def unique_rows(self, prefix: str = "") -> list[dict[str, Any]]:
        """Rows of the first delivery of every key starting with ``prefix``."""
        return [
            row for key, rows in self.rows_by_key.items() if key.startswith(prefix) for row in rows
        ]
