"""The shared /health, /metrics, /status server (both stages): health follows the loop age."""

from __future__ import annotations

import json
import time

from shared.http_server import local_url, serve
from shared.metrics import Registry

from support.services import http_get


def test_health_turns_503_when_the_loop_stalls() -> None:
    registry = Registry()
    registry.counter("casscade_test_total", "a counter").inc(3)
    last = [time.monotonic()]
    server = serve("127.0.0.1", 0, registry, lambda: {"state": "x"}, lambda: last[0], 30.0)
    port = server.server_address[1]
    try:
        code, body = http_get(port, "/health")
        assert code == 200 and json.loads(body)["status"] == "ok"
        last[0] = time.monotonic() - 31  # no progress for longer than the stale window
        code, body = http_get(port, "/health")
        assert code == 503 and json.loads(body)["status"] == "stalled"
        assert "casscade_test_total 3" in http_get(port, "/metrics")[1]
        assert json.loads(http_get(port, "/status")[1]) == {"state": "x"}
    finally:
        server.shutdown()
        server.server_close()


def test_a_server_on_every_address_is_asked_on_loopback() -> None:
    assert local_url("0.0.0.0", 8000, "/status") == "http://127.0.0.1:8000/status"
    assert local_url("::", 8000, "/status") == "http://[::1]:8000/status"
    assert local_url("10.0.0.5", 8001, "/health") == "http://10.0.0.5:8001/health"
    assert local_url("fe80::1", 8000, "/") == "http://[fe80::1]:8000/"
