"""A pytest plugin: where the suite's time went, by test file, printed at the end of the
run (after pytest's --durations, before its short summary, so a CI log's tail has it).

A file's time is its tests' setup, call and teardown: a session fixture's start (the stack,
the ring, a Spark cluster) counts in the file of the first test that asked for it.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

SHOWN = 15  # files listed; the rest are summed in one line

_by_file: dict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add one phase of one test to its file's time."""
    _by_file[report.nodeid.split("::", 1)[0]] += report.duration


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the files that took longest, and the total."""
    if not _by_file:
        return
    ranked = sorted(_by_file.items(), key=lambda item: -item[1])
    total = sum(_by_file.values())
    terminalreporter.write_sep("=", f"time by test file: {total:.0f} s in all")
    for path, seconds in ranked[:SHOWN]:
        terminalreporter.write_line(f"{seconds:8.1f}s {100 * seconds / total:4.1f}%  {path}")
    rest = ranked[SHOWN:]
    if rest:
        terminalreporter.write_line(f"{sum(s for _p, s in rest):8.1f}s        "
                                    f"the other {len(rest)} files")
