"""List and watch one kind of object into a local store, on a thread of its own, for as long as
it runs: a broken watch resumes from the last resourceVersion seen, a 410 Gone lists afresh
(objects deleted meanwhile are dropped), and an unreachable API server is retried with backoff.

The kubernetes client's own SharedInformer was considered: it builds typed models for every
object, retries a broken connection at once in a tight loop, and cannot say when it has synced.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from kaipolicy.cache.kubeapi import Kind, KubeApi, Obj, WatchStream
from kaipolicy.errors import ClusterError, WatchExpired

log = logging.getLogger("kaipolicy.cache")

#: called with the key of every object added, changed or deleted (from the informer's thread)
OnChange = Callable[[str], None]


@dataclass
class Backoff:
    """Doubling delays between reconnection attempts, from `first` up to `limit` seconds."""

    first: float = 0.5
    limit: float = 30.0
    _next: float = 0.0

    def next(self) -> float:
        self._next = self.first if self._next == 0 else min(self._next * 2, self.limit)
        return self._next

    def reset(self) -> None:
        self._next = 0.0


def object_key(obj: Obj) -> str:
    m = obj.get("metadata") or {}
    ns = m.get("namespace")
    return f"{ns}/{m.get('name')}" if ns else str(m.get("name"))


class Informer:
    def __init__(self, api: KubeApi, kind: Kind, on_change: OnChange, *, namespace: str | None = None,
                 field_selector: str | None = None, backoff: Backoff | None = None, watch_seconds: int = 240) -> None:
        self.api, self.kind, self.on_change = api, kind, on_change
        self.namespace, self.field_selector = namespace, field_selector
        self.backoff = backoff or Backoff()
        self.watch_seconds = watch_seconds
        self.synced = threading.Event()
        self.lists = 0                  # full lists done (the first, and one after each 410)
        self.watches = 0                # watches opened (each from the last resourceVersion seen)
        self.errors = 0                 # failed calls and broken streams
        self.last_error: ClusterError | None = None
        self._objects: dict[str, Obj] = {}
        self._lock = threading.Lock()
        self._version = ""              # resourceVersion to resume from; '' = list first
        self._stop = threading.Event()
        self._stream: WatchStream | None = None
        self._thread: threading.Thread | None = None

    # ---- reading the store (any thread) ---------------------------------------------------
    def get(self, key: str) -> Obj | None:
        with self._lock:
            return self._objects.get(key)

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._objects)

    def reached(self, resource_version: str) -> bool:
        """Whether the store reflects the API at `resource_version` or later. resourceVersions are
        opaque to clients, but an etcd-backed server's are increasing integers: when either is not
        one, this says False (the caller then has to see the object itself)."""
        try:
            return int(self._version) >= int(resource_version)
        except ValueError:
            return False

    # ---- running ----------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.kind.plural}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if not self._version:
                    self._list()
                self._watch()
            except WatchExpired as e:
                log.info("%s: %s; listing again", self.kind.kind, e)
                self._version = ""
            except ClusterError as e:
                if self._stop.is_set():
                    return  # stop() broke the stream on purpose
                self.last_error = e
                self.errors += 1
                delay = self.backoff.next()
                log.warning("%s: %s; retrying in %.1fs", self.kind.kind, e, delay)
                self._stop.wait(delay)

    def _list(self) -> None:
        items, version = self.api.list(self.kind, self.namespace, field_selector=self.field_selector)
        fresh = {object_key(o): _slim(o) for o in items}
        with self._lock:
            old, self._objects = self._objects, fresh
        self._version = version
        self.lists += 1
        self.backoff.reset()
        changed = [k for k in old.keys() - fresh.keys()]
        changed += [k for k, o in fresh.items() if _version(old.get(k)) != _version(o)]
        for key in sorted(changed):
            self.on_change(key)
        self.synced.set()

    def _watch(self) -> None:
        self._stream = stream = self.api.watch(self.kind, self._version, self.namespace,
                                               field_selector=self.field_selector,
                                               timeout_seconds=self.watch_seconds)
        self.watches += 1
        started, events = time.monotonic(), 0
        if self._stop.is_set():  # stop() ran before the stream existed: nothing would close it
            stream.close()
            return
        for event in stream:
            events += 1
            if events == 1:
                # the server answers again: a stream that breaks later starts its backoff afresh
                # (otherwise flaky connections would stretch the pauses to the limit one by one)
                self.backoff.reset()
            self._apply(event.type, event.object)
        self._stream = None
        if events == 0 and time.monotonic() - started < 1.0 and not self._stop.is_set():
            # a server that closes every watch at once must not be asked again in a tight loop
            self._stop.wait(self.backoff.next())
        else:
            self.backoff.reset()

    def _apply(self, kind: str, obj: Obj) -> None:
        version = _version(obj)
        if kind == "BOOKMARK":
            self._version = version or self._version
            return
        key = object_key(obj)
        with self._lock:
            if kind == "DELETED":
                self._objects.pop(key, None)
            else:
                self._objects[key] = _slim(obj)
        self._version = version or self._version
        self.on_change(key)


def _slim(obj: Obj) -> Obj:
    """The object without its managedFields: nothing here reads them, and they often double an
    object's size (client-go informers drop them the same way)."""
    (obj.get("metadata") or {}).pop("managedFields", None)
    return obj


def _version(obj: Obj | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion", ""))
