"""A clean stop: SIGTERM (what Kubernetes sends a pod) and SIGINT set an event that the process
watches; the previous handlers come back when the process is done."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger("kaipolicy.signals")


@contextmanager
def stopping_on_signals(stopping: threading.Event, doing: str) -> Iterator[threading.Event]:
    """Within the block, SIGTERM and SIGINT set `stopping` (logged: 'received SIGTERM: `doing`')."""
    def stop(signum: int, _frame: object) -> None:
        log.info("received %s: %s", signal.Signals(signum).name, doing)
        stopping.set()
    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stopping
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
