"""A pytest plugin: where the suite's time went, by test file and by phase (starts, stops,
jobs, workloads, polls, sleeps and the rest: support.phases), printed at the end of the run
(after pytest's --durations, before its short summary, so a CI log's tail has it), and
each file's seconds at the end of its line of dots as it finishes (so a run cut short, a CI
run over its time, still says where its time went).

A file's time is its tests' setup, call and teardown: a session fixture's start (the stack,
the ring, a Spark cluster) counts in the file of the first test that asked for it.

Every phase of every test is also written to `durations.tsv` in the run's base temporary
directory as it ends (pytest keeps the last three), so a run whose output is gone, a
passing CI's or one stopped, still says where its time went:
`sort -t$'\t' -k3 -rn durations.tsv | head`; `phases.tsv` beside it has each file's
seconds by phase, written at the end.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from support.phases import CLOCK, PHASES, phase

SHOWN = 15  # files listed; the rest are summed in one line
# The fixtures that start a service or build what one runs: their setup counts as `starts`.
SERVICE_FIXTURES = frozenset({
    "stack", "broker", "ring", "line_node", "cql", "spark_cluster", "hdfs", "agent_node",
    "env", "ring41", "topo", "images", "packed_env", "sink_stack", "registry_up", "reg",
    "locked", "locked_registry", "admin_cql", "node", "session"})

_by_file: dict[str, float] = defaultdict(float)
_starts: dict[str, float] = defaultdict(float)  # service fixture -> seconds of its setups
_written_to: list[Path] = []


@pytest.fixture(scope="session", autouse=True)
def _durations_file(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Where durations.tsv goes: the run's base temporary directory."""
    _written_to.append(tmp_path_factory.getbasetemp() / "durations.tsv")


def _sleep_in_phase(sleep):
    """time.sleep, counted as `sleeps` when a test module calls it (a wait of fixed length)."""

    def timed_sleep(seconds: float) -> None:
        caller = sys._getframe(1).f_code.co_filename
        if (threading.current_thread() is threading.main_thread()
                and Path(caller).name.startswith("test_")):
            with phase("sleeps"):
                sleep(seconds)
        else:
            sleep(seconds)

    return timed_sleep


def pytest_configure(config: pytest.Config) -> None:
    """Count the test modules' own sleeps."""
    time.sleep = _sleep_in_phase(time.sleep)


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest):
    """A service fixture's setup counts as `starts` (and in its own line of them)."""
    if fixturedef.argname not in SERVICE_FIXTURES:
        yield
        return
    began = time.monotonic()
    with phase("starts"):
        yield
    name = fixturedef.argname
    if fixturedef.params:  # line_node[4.1]: each of its values is a start of its own
        name += f"[{request.param}]" if hasattr(request, "param") else ""
    _starts[name] += time.monotonic() - began


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """Every teardown counts as `stops`."""
    with phase("stops"):
        yield


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add one phase of one test to its file's time, and to durations.tsv."""
    _by_file[report.nodeid.split("::", 1)[0]] += report.duration
    if _written_to:
        with _written_to[0].open("a") as out:
            out.write(f"{report.nodeid}\t{report.when}\t{report.duration:.2f}\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """The file whose phases run; after a file's last test: its seconds, on its line of
    dots."""
    CLOCK.file = item.nodeid.split("::", 1)[0]
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
    by_phase = {path: _phases_of(path) for path, _s in ranked}
    terminalreporter.write_sep("=", f"time by test file: {total:.0f} s in all")
    terminalreporter.write_line(f"{'':23}" + "".join(f"{p:>10}" for p in PHASES))
    for path, seconds in ranked[:SHOWN]:
        terminalreporter.write_line(
            f"{seconds:8.1f}s {100 * seconds / total:4.1f}%        "
            + "".join(f"{by_phase[path][p]:10.0f}" for p in PHASES) + f"  {path}")
    rest = ranked[SHOWN:]
    if rest:
        terminalreporter.write_line(f"{sum(s for _p, s in rest):8.1f}s        "
                                    f"the other {len(rest)} files")
    sums = {p: sum(phases[p] for phases in by_phase.values()) for p in PHASES}
    terminalreporter.write_line(
        "time by phase: " + ", ".join(f"{p} {sums[p]:.0f} s" for p in PHASES))
    terminalreporter.write_line("starts by fixture: " + ", ".join(
        f"{name} {seconds:.0f} s" for name, seconds in sorted(_starts.items(),
                                                             key=lambda item: -item[1])))
    if _written_to:
        with (_written_to[0].parent / "phases.tsv").open("w") as out:
            for path, phases in by_phase.items():
                out.writelines(f"{path}\t{p}\t{phases[p]:.2f}\n" for p in PHASES)


def _phases_of(path: str) -> dict[str, float]:
    """A file's seconds by phase; `rest` is what no phase claimed (never below zero: a
    phase's clock and pytest's can differ by a few milliseconds)."""
    found = {p: CLOCK.seconds.get((path, p), 0.0) for p in PHASES}
    found["rest"] = max(0.0, _by_file[path] - CLOCK.marked(path))
    return found
