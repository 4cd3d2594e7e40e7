"""A work queue of string keys, as client-go's: a key waits in the queue at most once, is handed to
one worker at a time, and a key added while a worker holds it is handed out again once that worker
is done; `add_after` holds a key back for a while (retries with backoff). Thread-safe.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import deque
from collections.abc import Callable


class WorkQueue:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()         # waiting in the queue, or re-added while held
        self._processing: set[str] = set()    # held by a worker
        self._delayed: list[tuple[float, int, str]] = []   # (due, tie-break, key)
        self._due: dict[str, float] = {}      # the earliest due time of each delayed key
        self._seq = 0
        self._shutdown = False

    def add(self, key: str) -> None:
        with self._cond:
            self._add(key)

    def add_after(self, key: str, delay: float) -> None:
        """Add `key` in `delay` seconds; an earlier pending add of the same key wins."""
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            due = self._clock() + delay
            if self._shutdown or self._due.get(key, float("inf")) <= due:
                return
            self._due[key] = due
            self._seq += 1
            heapq.heappush(self._delayed, (due, self._seq, key))
            self._cond.notify()

    def get(self, timeout: float | None = None) -> str | None:
        """The next key, held until `done(key)`; None once shut down (or after `timeout` seconds)."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while True:
                self._release_due()
                if self._queue:
                    key = self._queue.popleft()
                    self._dirty.discard(key)
                    self._processing.add(key)
                    return key
                if self._shutdown:
                    return None
                wait = self._delayed[0][0] - self._clock() if self._delayed else None
                if deadline is not None:
                    left = deadline - self._clock()
                    if left <= 0:
                        return None
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait)

    def done(self, key: str) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()

    def shutdown(self) -> None:
        """Workers get None from now on (keys already held stay held until done)."""
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    def delayed(self) -> int:
        with self._cond:
            return len(self._due)

    # ---- under the lock ---------------------------------------------------------------------------
    def _add(self, key: str) -> None:
        if self._shutdown or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._cond.notify()

    def _release_due(self) -> None:
        now = self._clock()
        while self._delayed and self._delayed[0][0] <= now:
            due, _, key = heapq.heappop(self._delayed)
            if self._due.get(key) == due:
                del self._due[key]
                self._add(key)
