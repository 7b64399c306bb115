"""The registry's Prometheus text: sample values written in full."""

from __future__ import annotations

from shared.metrics import Registry, sample


def test_a_unix_time_and_a_large_counter_keep_every_digit() -> None:
    registry = Registry()
    registry.gauge("casscade_test_last_seconds", "a time").set(1795923349.762)
    registry.counter("casscade_test_rows_total", "rows").inc(12_345_678)
    text = registry.render()
    assert "casscade_test_last_seconds 1795923349.762" in text
    assert "casscade_test_rows_total 12345678" in text


def test_special_and_small_values() -> None:
    assert [sample(v) for v in (0.0, 3, 0.25, 1e-7, float("inf"), float("-inf"))] == [
        "0", "3", "0.25", "1e-07", "+Inf", "-Inf"]
    assert sample(float("nan")) == "NaN"
    assert sample(2.0**60) == repr(2.0**60)  # beyond exact integers: the float's own form
