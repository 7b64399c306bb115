"""support.suite_sections: `make test`'s two sections and the suite's closing line."""

from __future__ import annotations

from pathlib import Path

from devstack.settings import StackSettings

from support.suite_sections import SECTIONS, closing_line, counts

ROOT = Path(__file__).resolve().parents[3]


def test_pytest_summaries_are_counted_errors_as_failures() -> None:
    line = ("==== 1 failed, 835 passed, 2 skipped, 1 deselected, 3 errors in 2958.12s "
            "(0:49:18) ====")
    assert counts(line) == {"passed": 835, "failed": 4, "skipped": 2}


def test_the_closing_line_sums_the_sections_and_a_section_without_a_summary_fails() -> None:
    summaries = {"stack": "======= 700 passed, 1 deselected in 1500.00s (0:25:00) =======",
                 "ring": "======= 1 failed, 20 passed in 1400.00s (0:23:20) ======="}
    assert closing_line(summaries) == "suite: 720 passed, 1 failed"
    assert closing_line({**summaries, "ring": ""}) == "suite: 700 passed, 1 failed"


def test_the_sections_hold_every_test_directory_once_on_brokers_of_their_own() -> None:
    stack, ring = SECTIONS
    assert all((ROOT / path).exists() for section in SECTIONS for path in section.paths)
    # what `make unit` and `make integration` run, each directory in one section only
    assert {*stack.paths, *ring.paths} == {"tests/unit", "tests/devstack/unit",
                                           "tests/integration", "tests/devstack/integration",
                                           *stack.ignore}
    assert set(stack.ignore) < set(ring.paths)
    assert "CASSCADE_KAFKA_PORT" not in stack.env
    # clear of every broker the stack section starts: its own and the locked stack's (a
    # clean run failed 14 locked-stack tests at "port already in use" once `ring` ran late)
    plain = StackSettings(state_dir=Path("/state"))
    taken = {p for s in (plain, plain.secured()) for p in (s.kafka_port, s.kafka_controller_port)}
    assert not taken & {int(ring.env["CASSCADE_KAFKA_PORT"]),
                        int(ring.env["CASSCADE_KAFKA_CONTROLLER_PORT"])}
    assert ".casscade" in ring.env["CASSCADE_STATE_DIR"]
