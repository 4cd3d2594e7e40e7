"""Waiting for something that happens on another thread or in another process."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(what: str, check: Callable[[], T | None], seconds: float = 20.0) -> T:
    """Poll until `check` returns something truthy and return it; fail naming `what` otherwise."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds:.0f}s waiting for {what}")
        time.sleep(0.05)
