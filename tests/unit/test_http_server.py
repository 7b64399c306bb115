"""The shared /health, /metrics, /status server (both stages): health follows the loop age."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from shared.http_server import serve
from shared.metrics import Registry


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_health_turns_503_when_the_loop_stalls() -> None:
    registry = Registry()
    registry.counter("casscade_test_total", "a counter").inc(3)
    last = [time.monotonic()]
    server = serve("127.0.0.1", 0, registry, lambda: {"state": "x"}, lambda: last[0], 30.0)
    port = server.server_address[1]
    try:
        code, body = _get(port, "/health")
        assert code == 200 and json.loads(body)["status"] == "ok"
        last[0] = time.monotonic() - 31  # no progress for longer than the stale window
        code, body = _get(port, "/health")
        assert code == 503 and json.loads(body)["status"] == "stalled"
        assert "casscade_test_total 3" in _get(port, "/metrics")[1]
        assert json.loads(_get(port, "/status")[1]) == {"state": "x"}
    finally:
        server.shutdown()
        server.server_close()
