"""support.phases: a nested phase takes its seconds from the one around it, by file."""

from __future__ import annotations

import pytest

from support.phases import PhaseClock


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_innermost_phase_counts_and_the_outer_one_goes_on_after_it() -> None:
    at = _Clock()
    clock = PhaseClock(at)
    clock.file = "tests/integration/a/test_a.py"
    clock.enter("jobs")
    at.now = 10.0
    clock.enter("polls")
    at.now = 14.0
    clock.leave()
    at.now = 15.0
    clock.leave()
    assert clock.seconds == {("tests/integration/a/test_a.py", "jobs"): 11.0,
                             ("tests/integration/a/test_a.py", "polls"): 4.0}
    assert clock.marked("tests/integration/a/test_a.py") == 15.0
    assert clock.marked("tests/integration/b/test_b.py") == 0.0


def test_a_phase_counts_in_the_file_running_when_it_ends_each_part_in_its_own() -> None:
    at = _Clock()
    clock = PhaseClock(at)
    clock.file = "first.py"
    clock.enter("starts")  # a session fixture set up by the first file's test...
    at.now = 3.0
    clock.leave()
    clock.file = "second.py"
    clock.enter("stops")  # ...and torn down after the last file's
    at.now = 5.0
    clock.leave()
    assert clock.seconds == {("first.py", "starts"): 3.0, ("second.py", "stops"): 2.0}


def test_an_unknown_phase_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown phase 'waiting'"):
        PhaseClock().enter("waiting")
