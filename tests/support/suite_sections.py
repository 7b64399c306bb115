"""`make test`'s runner: the whole suite as two pytest sessions side by side, each on
services of its own, their output interleaved line by line and their counts summed.

Why two: one session kept the machine's 2 cores 52 % busy on average (a clean clone's
run, sampled every 10 s from its first integration test on), since most integration
tests wait on a JVM, a broker or a job. The sections share nothing that runs:

- `stack`: the integration tests on the one-node stack (Kafka and a Cassandra node) and
  the services beside it (Connect, PostgreSQL, the registry, Prometheus, the images, the
  locked stack, nodes of other lines);
- `ring`: the unit tests (while the ring starts), the jobs that need Kafka alone
  (KAFKA_ONLY), then the RF=3 rings, the Spark standalone cluster and HDFS
  (tests/integration/ring, tests/integration/spark), on a Kafka broker of their own
  (ports 9292-9293, clear of the locked stack's 9192-9193; state under
  `.casscade/section-ring`): its broker restart and the `stack` section's broker outages
  cannot meet.

The jars are fetched once for both (devstack.artifacts locks its lib directory), and so is
the packed environment of the Spark cluster's executors (support.packed_env). Each
section prints its own durations, time by file and phase (support.suite_times); the last
line is the suite's: `suite: N passed, N failed[, N skipped]`. The exit status is 0 only
when both sessions passed (pytest's 5, no test run, is a failure). SIGINT or SIGTERM stops
both sessions (each stops what it started) and ends the run without a traceback.

`python -m support.suite_sections [SECTION ...] [-- PYTEST ARGS]` runs the named sections
(all by default); `make test` runs both.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Section:
    """One pytest session of the suite: its test paths, and the environment that gives it
    services of its own."""

    name: str
    paths: tuple[str, ...]
    ignore: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)

    def command(self, extra: Sequence[str]) -> list[str]:
        """The pytest command line of this section."""
        return [sys.executable, "-m", "pytest", "--durations=0", "--durations-min=20",
                "-m", "not measurement", *self.paths,
                *(f"--ignore={path}" for path in self.ignore), *extra]


RING_PATHS = ("tests/integration/ring", "tests/integration/spark")
# Jobs on a Kafka broker alone (the `broker` fixture), run in the ring section to even the
# two out: in a clean clone's run (da1eaa4) `ring` ended 7 minutes before `stack`.
KAFKA_ONLY = ("tests/integration/materializer/test_cut_input.py",
              "tests/integration/materializer/test_aborted_barrier.py",
              "tests/integration/materializer/test_clean_stops.py",
              "tests/integration/materializer/test_spark_start_fails.py")
SECTIONS = (
    Section("stack", ("tests/integration", "tests/devstack/integration"),
            ignore=(*RING_PATHS, *KAFKA_ONLY)),
    Section("ring", ("tests/unit", "tests/devstack/unit", *KAFKA_ONLY, *RING_PATHS), env={
        "CASSCADE_STATE_DIR": str(ROOT / ".casscade" / "section-ring"),
        "CASSCADE_KAFKA_PORT": "9292", "CASSCADE_KAFKA_CONTROLLER_PORT": "9293"}),
)

# pytest's last line: "==== 1 failed, 835 passed, 1 deselected in 2958.12s (0:49:18) ===="
_SUMMARY = re.compile(r"^=+ (?P<counts>.*?) in [\d.]+s")
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped)")


def counts(summary: str) -> dict[str, int]:
    """passed, failed (errors included) and skipped of a pytest summary line."""
    found = {"passed": 0, "failed": 0, "skipped": 0}
    match = _SUMMARY.match(summary)
    for number, kind in _COUNT.findall(match.group("counts") if match else ""):
        found["failed" if kind.startswith("error") else kind] += int(number)
    return found


def closing_line(summaries: Mapping[str, str]) -> str:
    """The suite's closing line from each section's pytest summary (a section without one,
    stopped or crashed, counts a failure)."""
    total = {"passed": 0, "failed": 0, "skipped": 0}
    for summary in summaries.values():
        found = counts(summary)
        if not _SUMMARY.match(summary):
            found["failed"] += 1
        for kind, number in found.items():
            total[kind] += number
    line = f"suite: {total['passed']} passed, {total['failed']} failed"
    return line + (f", {total['skipped']} skipped" if total["skipped"] else "")


class _Run:
    """One section's pytest process, its output copied to ours a line at a time."""

    def __init__(self, section: Section, extra: Sequence[str], prefix: str,
                 lock: threading.Lock) -> None:
        self.section, self.prefix, self.lock = section, prefix, lock
        self.summary = ""
        self.started = time.monotonic()
        self.seconds = 0.0
        self.proc = subprocess.Popen(
            section.command(extra), cwd=ROOT, env={**os.environ, **section.env},
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, errors="replace", bufsize=1,
            start_new_session=True)  # a terminal's Ctrl-C reaches it once, through stop()
        self.copier = threading.Thread(target=self._copy, daemon=True)
        self.copier.start()

    def _copy(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if _SUMMARY.match(line):
                self.summary = line.strip()
            with self.lock:
                sys.stdout.write(f"{self.prefix}{line}")
                sys.stdout.flush()
        self.seconds = time.monotonic() - self.started  # its output ended: so did it

    def wait(self) -> int:
        """Wait for the session and its output; its exit status."""
        code = self.proc.wait()
        self.copier.join()
        return code


def run(sections: Sequence[Section], extra: Sequence[str]) -> int:
    """Run `sections` side by side; 0 when every one passed."""
    shared = tempfile.mkdtemp(prefix="casscade-spark-env-")
    os.environ["CASSCADE_TEST_SPARK_ENV_DIR"] = shared  # (support.packed_env.SHARED_DIR)
    try:
        return _run(sections, extra)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def _run(sections: Sequence[Section], extra: Sequence[str]) -> int:
    lock = threading.Lock()
    width = max(len(s.name) for s in sections)
    runs = [_Run(s, extra, f"{s.name:<{width}}| " if len(sections) > 1 else "", lock)
            for s in sections]

    def stop(signum: int, _frame: object) -> None:
        for r in runs:  # each session stops what it started, as on Ctrl-C
            if r.proc.poll() is None:
                r.proc.send_signal(signal.SIGINT)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    codes = [r.wait() for r in runs]
    for r, code in zip(runs, codes, strict=True):
        print(f"section {r.section.name}: exit {code} in {r.seconds:.0f} s"
              f" ({r.summary or 'no summary'})")
    print(closing_line({r.section.name: r.summary for r in runs}))
    return 0 if all(code == 0 for code in codes) else 1


def main(argv: Sequence[str]) -> int:
    """`[SECTION ...] [-- PYTEST ARGS]`: run the sections named (all by default)."""
    names, extra = list(argv), []
    if "--" in names:
        at = names.index("--")
        names, extra = names[:at], names[at + 1:]
    known = {s.name: s for s in SECTIONS}
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"unknown section(s) {', '.join(unknown)}; the sections are "
              f"{', '.join(known)}", file=sys.stderr)
        return 2
    return run([known[n] for n in names] if names else list(SECTIONS), extra)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
