"""/health, /metrics (Prometheus text) and /status (JSON) of a running stage (the publisher
agent, the materializer driver)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from shared.metrics import Registry


@dataclass
class HttpSettings:
    """/health, /metrics and /status; port 0 turns the server off."""

    host: str = "127.0.0.1"
    port: int = 8000


def local_url(host: str, port: int, path: str) -> str:
    """The URL a client on the same host uses for a server listening on `host`: one that
    listens on every address (0.0.0.0, ::) answers on loopback."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    return f"http://{f'[{host}]' if ':' in host else host}:{port}{path}"


def serve(host: str, port: int, registry: Registry, status: Callable[[], dict[str, Any]],
          last_loop: Callable[[], float], stale_after_s: float = 30.0) -> ThreadingHTTPServer:
    """Start the server in a daemon thread and return it (`.shutdown()` stops it)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                self._send(200, registry.render(), "text/plain; version=0.0.4")
            elif self.path == "/health":
                age = time.monotonic() - last_loop()
                ok = age < stale_after_s
                self._send(200 if ok else 503, json.dumps(
                    {"status": "ok" if ok else "stalled", "loop_age_s": round(age, 1)}),
                    "application/json")
            elif self.path == "/status":
                self._send(200, json.dumps(status(), default=str), "application/json")
            else:
                self._send(404, "not found\n", "text/plain")

        def _send(self, code: int, body: str, ctype: str) -> None:
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_args: Any) -> None:  # keep scrapes out of the logs
            return

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server
