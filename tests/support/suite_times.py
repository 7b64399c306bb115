"""A pytest plugin: where the suite's time went, by test file, printed at the end of the
run (after pytest's --durations, before its short summary, so a CI log's tail has it).

A file's time is its tests' setup, call and teardown: a session fixture's start (the stack,
the ring, a Spark cluster) counts in the file of the first test that asked for it.

Every phase of every test is also written to `durations.tsv` in the run's base temporary
directory (pytest keeps the last three), so a run whose output is gone, a passing CI's,
still says where its time went: `sort -t$'\t' -k3 -rn durations.tsv | head`.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

SHOWN = 15  # files listed; the rest are summed in one line

_by_file: dict[str, float] = defaultdict(float)
_phases: list[tuple[str, str, float]] = []
_written_to: list[Path] = []


@pytest.fixture(scope="session", autouse=True)
def _durations_file(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Where durations.tsv goes: the run's base temporary directory."""
    _written_to.append(tmp_path_factory.getbasetemp() / "durations.tsv")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add one phase of one test to its file's time."""
    _by_file[report.nodeid.split("::", 1)[0]] += report.duration
    _phases.append((report.nodeid, report.when, report.duration))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write every phase's time to durations.tsv in the run's base temporary directory."""
    if _written_to and _phases:
        _written_to[0].write_text("".join(f"{nodeid}\t{when}\t{seconds:.2f}\n"
                                          for nodeid, when, seconds in _phases))


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
