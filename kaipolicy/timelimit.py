"""A wall-clock limit around a run of the engine: the CLI sets one around each scenario it runs,
and the engine's loops check it once per job and once per victim scenario, so that no input keeps
a command busy past its limit. Without a limit set (the scheduler's cycles) a check costs one
context-variable read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from kaipolicy.errors import TimeLimitExceeded

#: (monotonic deadline, the limit in seconds) of the innermost `time_limit`, or None
_LIMIT: ContextVar[tuple[float, float] | None] = ContextVar("kaipolicy_time_limit", default=None)


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Checks inside the block fail once `seconds` have passed; None or 0: no limit."""
    if not seconds:
        yield
        return
    token = _LIMIT.set((time.monotonic() + seconds, seconds))
    try:
        yield
    finally:
        _LIMIT.reset(token)


def check(where: str) -> None:
    """Raise TimeLimitExceeded, saying `where` the run was, once the limit has passed."""
    limit = _LIMIT.get()
    if limit is not None and time.monotonic() > limit[0]:
        raise TimeLimitExceeded(f"ran past its time limit of {limit[1]:g} s and was stopped {where}")
