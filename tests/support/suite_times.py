"""A pytest plugin: where the suite's time went, by test file, printed at the end of the
run (after pytest's --durations, before its short summary, so a CI log's tail has it), and
each file's seconds at the end of its line of dots as it finishes (so a run cut short, a CI
run over its time, still says where its time went).

A file's time is its tests' setup, call and teardown: a session fixture's start (the stack,
the ring, a Spark cluster) counts in the file of the first test that asked for it.

Every phase of every test is also written to `durations.tsv` in the run's base temporary
directory as it ends (pytest keeps the last three), so a run whose output is gone, a
passing CI's or one stopped, still says where its time went:
`sort -t$'\t' -k3 -rn durations.tsv | head`.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

SHOWN = 15  # files listed; the rest are summed in one line

_by_file: dict[str, float] = defaultdict(float)
_written_to: list[Path] = []


@pytest.fixture(scope="session", autouse=True)
def _durations_file(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Where durations.tsv goes: the run's base temporary directory."""
    _written_to.append(tmp_path_factory.getbasetemp() / "durations.tsv")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add one phase of one test to its file's time, and to durations.tsv."""
    _by_file[report.nodeid.split("::", 1)[0]] += report.duration
    if _written_to:
        with _written_to[0].open("a") as out:
            out.write(f"{report.nodeid}\t{report.when}\t{report.duration:.2f}\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """After a file's last test: its seconds, on its line of dots."""
    yield
    if nextitem is not None and nextitem.path == item.path:
        return
    reporter = item.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and item.config.option.verbose <= 0:
        reporter.write(f" {_by_file[item.nodeid.split('::', 1)[0]]:.0f}s")


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
