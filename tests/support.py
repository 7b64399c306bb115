"""Small helpers for tests (importable because pytest puts tests/ on sys.path)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(probe: Callable[[], T | None], timeout_s: float, what: str,
               interval_s: float = 0.25) -> T:
    """Poll `probe` until it returns something truthy; AssertionError naming `what` if not."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what} (last: {last!r})")
