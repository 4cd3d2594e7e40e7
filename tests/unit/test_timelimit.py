"""A time limit around a run: checks inside it fail once it has passed, saying where, and
nothing outside it is limited."""

from __future__ import annotations

import time

import pytest

from kaipolicy.errors import TimeLimitExceeded
from kaipolicy.timelimit import check, time_limit


def test_without_a_limit_a_check_never_fails() -> None:
    check("anywhere")
    with time_limit(None), time_limit(0):
        check("anywhere")


def test_a_check_past_the_limit_fails_saying_the_limit_and_where() -> None:
    with time_limit(0.01):
        check("at the start")
        time.sleep(0.03)
        with pytest.raises(TimeLimitExceeded, match=r"time limit of 0\.01 s and was stopped in reclaim"):
            check("in reclaim")


def test_the_limit_ends_with_its_block() -> None:
    with time_limit(0.001):
        time.sleep(0.005)
    check("after the block")
