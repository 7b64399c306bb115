"""The copy dedupe's one decision without Spark: which window a query runs with."""

from __future__ import annotations


def test_a_started_checkpoint_keeps_its_copy_dedupe() -> None:
    """Spark cannot add or remove the dedupe operator on a started checkpoint: a new one
    takes the setting, a started one keeps what it has, with a warning when they differ."""
    from materializer.spark.copy_dedupe import DEFAULT_WINDOW_S, effective_window

    assert effective_window(30, started=False, has_dedupe=False) == (30, None)
    assert effective_window(0, started=False, has_dedupe=False) == (0, None)
    assert effective_window(30, started=True, has_dedupe=True) == (30, None)
    assert effective_window(0, started=True, has_dedupe=False) == (0, None)
    window, warning = effective_window(120, started=True, has_dedupe=False)
    assert window == 0 and "without the copy dedupe" in warning
    window, warning = effective_window(0, started=True, has_dedupe=True)
    assert window == DEFAULT_WINDOW_S and "cannot take out" in warning
