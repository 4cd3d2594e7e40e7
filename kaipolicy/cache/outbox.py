"""Events and status writes that must not hold up a cycle: sent from one thread of their own.

Events are rate-limited the way a pending job needs: the same reason and message on the same
object is not sent again within `window` seconds, and when more than `capacity` writes wait, new
events are dropped (counted) while status writes keep their place. Status writes are coalesced per
object: a newer one replaces one not yet sent. A write the API server could not take for the moment
(unreachable, 429, 5xx) is retried a few times; failures are logged and counted, never raised.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from kaipolicy import metrics
from kaipolicy.cache.kubeapi import Kind, KubeApi, Obj
from kaipolicy.errors import ClusterError

log = logging.getLogger("kaipolicy.commit")

Write = Callable[[], Any]
RETRIES = 4


class Outbox:
    def __init__(self, api: KubeApi, window: float = 300.0, capacity: int = 5000,
                 component: str = "kai-scheduler", retry_delay: float = 0.5) -> None:
        self.api, self.window, self.capacity, self.component = api, window, capacity, component
        self.retry_delay = retry_delay
        self._pending: OrderedDict[tuple[str, ...], tuple[str, str, Write]] = OrderedDict()
        self._sent: dict[tuple[str, ...], float] = {}
        self._lock = threading.Condition()
        self._stopping = False
        self._busy = False
        self._thread = threading.Thread(target=self._run, name="outbox", daemon=True)
        self._thread.start()

    # ---- what callers put in -------------------------------------------------------------------
    def event(self, kind: Kind, involved: Obj, reason: str, message: str, type_: str = "Normal",
              annotations: dict[str, str] | None = None) -> bool:
        """Queue an Event on `involved`; False when it was suppressed (sent recently, or no room)."""
        meta = involved.get("metadata") or {}
        key = ("event", str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"), reason, message)
        now = time.monotonic()
        with self._lock:
            if now - self._sent.get(key, -self.window - 1.0) < self.window or key in self._pending:
                metrics.EVENTS_SUPPRESSED.labels(why="repeated").inc()
                return False
            if len(self._pending) >= self.capacity:
                metrics.EVENTS_SUPPRESSED.labels(why="full").inc()
                return False
            self._sent[key] = now
            if len(self._sent) > 4 * self.capacity:
                self._forget(now)

            def send() -> Any:
                return self.api.create_event(kind, involved, reason, message, type_, self.component, annotations)
            self._pending[key] = ("create", "Event", send)
            self._lock.notify()
        return True

    def write(self, key: tuple[str, ...], verb: str, kind: str, fn: Write) -> None:
        """Queue a status write; a newer write with the same key replaces one not sent yet."""
        with self._lock:
            self._pending.pop(key, None)
            self._pending[key] = (verb, kind, fn)
            self._lock.notify()

    def drain(self, timeout: float) -> bool:
        """Wait until everything queued is sent (True) or `timeout` passes (False)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._pending or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)
        return True

    def stop(self, timeout: float = 2.0) -> None:
        """Send what can be sent within `timeout`, then stop (the rest is dropped and counted)."""
        self.drain(timeout)
        with self._lock:
            self._stopping = True
            dropped = len(self._pending)
            self._pending.clear()
            self._lock.notify_all()
        if dropped:
            log.warning("%d event(s) and status write(s) not sent at shutdown", dropped)
        self._thread.join(timeout=5)

    # ---- the sending thread ---------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._stopping:
                    self._lock.wait()
                if self._stopping:
                    return
                _, (verb, kind, fn) = self._pending.popitem(last=False)
                self._busy = True
            try:
                self._send(verb, kind, fn)
            finally:
                with self._lock:
                    self._busy = False
                    self._lock.notify_all()

    def _send(self, verb: str, kind: str, fn: Write) -> None:
        """One write, retried with backoff (`retry_delay` doubling, RETRIES times) while the API server is
        unreachable or overloaded: an Event should outlive an apiserver restart."""
        for attempt in range(RETRIES + 1):
            try:
                fn()
                return
            except ClusterError as e:
                transient = e.status is None or e.status == 429 or e.status >= 500
                if not transient or attempt == RETRIES or self._stopping:
                    metrics.API_ERRORS.labels(verb=verb, kind=kind).inc()
                    log.warning("could not %s %s: %s", verb, kind, e)
                    return
            with self._lock:
                self._lock.wait_for(lambda: self._stopping, self.retry_delay * 2**attempt)

    def _forget(self, now: float) -> None:
        for key in [k for k, at in self._sent.items() if now - at >= self.window]:
            del self._sent[key]
