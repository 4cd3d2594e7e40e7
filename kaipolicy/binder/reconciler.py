"""The binder's control loop: watches BindRequests, the scheduler's pods and the reservation pods;
N workers take pods from a work queue keyed by pod (one pod is never worked on by two), make one
attempt per turn at its live BindRequest, and record the outcome: status, the pod's `PodBound`
condition, an Event. A failure is undone and retried after 1, 2, 4... times the base delay while
`failedAttempts` stays below `backoffLimit`. Sweeps for unused reservations share the queue.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from kaipolicy import metrics
from kaipolicy.binder.binding import BOUND, FOREIGN, Binding, Request
from kaipolicy.binder.reservations import Reservations, groups_of
from kaipolicy.binder.settings import POD_BOUND, BinderSettings
from kaipolicy.binder.workqueue import WorkQueue
from kaipolicy.cache import kubeapi
from kaipolicy.cache.informer import Backoff, Informer
from kaipolicy.cache.kubeapi import KubeApi, Obj
from kaipolicy.errors import BindError, BindInterrupted, BindUncertain, ClusterError

log = logging.getLogger("kaipolicy.binder")

POD, GROUP = "pod:", "group:"      # the two kinds of work-queue keys
UNCERTAIN_DELAY = 1.0              # seconds before a binding whose answer was lost is looked at again


def live(obj: Obj) -> bool:
    """Still to be acted on: not deleted, not Succeeded, not failed for good. A request without a
    backoffLimit is not retried (as KAI reads it)."""
    status, spec = obj.get("status") or {}, obj.get("spec") or {}
    if (obj.get("metadata") or {}).get("deletionTimestamp") or status.get("phase") == "Succeeded":
        return False
    return not (status.get("phase") == "Failed" and int(status.get("failedAttempts") or 0) >= limit_of(spec))


def limit_of(spec: Obj) -> int:
    return int(spec.get("backoffLimit") or 0)


@dataclass
class Outcome:
    """What an attempt leaves to write; kept until written, so a failing API delays it, never loses it."""

    status: Obj
    message: str
    rollback: bool = False
    done: set[str] = field(default_factory=set)


class Reconciler:
    def __init__(self, api: KubeApi, settings: BinderSettings, stop: threading.Event,
                 backoff: Callable[[], Backoff] = Backoff, clock: Callable[[], float] = time.monotonic) -> None:
        self.api, self.settings, self.stop_event, self._clock = api, settings, stop, clock
        self.queue = WorkQueue(clock)
        self.requests = Informer(api, kubeapi.BIND_REQUEST, self._on_request, backoff=backoff())
        self.pods = Informer(api, kubeapi.POD, self._on_pod, backoff=backoff(),
                             field_selector=f"spec.schedulerName={settings.scheduler_name}")
        self.reserved = Informer(api, kubeapi.POD, lambda key: self.reservations.notify(), backoff=backoff(),
                                 namespace=settings.reservations.namespace)
        self.reservations = Reservations(api, settings.reservations, stop, self.reserved.get, self.live_groups,
                                         self.bound_into, clock)
        self.binding = Binding(api, self.reservations, settings.scheduler_name)
        self._lock = threading.Lock()
        self._by_pod: dict[str, set[str]] = {}                      # pod key -> its BindRequests' keys
        self._by_group: dict[str, set[str]] = {}                    # GPU group -> BindRequests naming it
        self._request: dict[str, tuple[str, tuple[str, ...]]] = {}  # BindRequest key -> (pod key, groups)
        self._pod_groups: dict[str, set[str]] = {}                  # pod key -> GPU groups it was seen with
        self._retry_at: dict[str, float] = {}                       # BindRequest uid -> next attempt
        self._unfinished: dict[str, Outcome] = {}                   # BindRequest uid -> outcome to write
        self._errors: dict[str, int] = {}                           # work key -> failures in a row
        self._threads: list[threading.Thread] = []

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> None:
        """Start watching; returns once every watch has listed (ClusterError otherwise)."""
        informers = {"BindRequest": self.requests, "Pod": self.pods, "reservation Pod": self.reserved}
        for informer in informers.values():
            informer.start()
        deadline = self._clock() + timeout
        for name, informer in informers.items():
            if not informer.synced.wait(max(deadline - self._clock(), 0.0)):
                why = f": {informer.last_error}" if informer.last_error else ""
                raise ClusterError(f"no list of {name} objects within {timeout:.0f}s{why}")

    def run(self) -> None:
        """Start the workers and the periodic sweep (the leader only)."""
        self._sweep_all()
        for i in range(self.settings.workers):
            self._threads.append(threading.Thread(target=self._work, name=f"binder-{i}", daemon=True))
        self._threads.append(threading.Thread(target=self._resync, name="binder-resync", daemon=True))
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Workers finish the attempt in hand (a reservation wait ends at once) and stop."""
        self.stop_event.set()
        self.queue.shutdown()
        deadline = self._clock() + timeout
        for thread in self._threads:
            thread.join(max(deadline - self._clock(), 0.1))
        for informer in (self.requests, self.pods, self.reserved):
            informer.stop()

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in (self.requests, self.pods, self.reserved))

    def alive(self) -> bool:
        return all(t.is_alive() for t in self._threads) or self.stop_event.is_set()

    # ---- what the watches say -------------------------------------------------------------------
    def _on_request(self, key: str) -> None:
        obj = self.requests.get(key)
        with self._lock:
            old = self._request.pop(key, None)
            if old:
                self._by_pod.get(old[0], set()).discard(key)
                for group in old[1]:
                    self._by_group.get(group, set()).discard(key)
            if obj is not None:
                request = Request.of(obj)
                self._request[key] = (request.pod_key, request.groups)
                self._by_pod.setdefault(request.pod_key, set()).add(key)
                for group in request.groups:
                    self._by_group.setdefault(group, set()).add(key)
        if obj is not None and live(obj):
            self.queue.add(POD + Request.of(obj).pod_key)
        elif old and (obj is None or (obj.get("status") or {}).get("phase") != "Succeeded"):
            for group in old[1]:       # gone, or failed for good: its reservations may be unused now
                self.queue.add(GROUP + group)

    def _on_pod(self, key: str) -> None:
        obj = self.pods.get(key)
        finished = obj is None or (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        with self._lock:
            seen = self._pod_groups.pop(key, set())
            if obj is not None and not finished and groups_of(obj):
                self._pod_groups[key] = groups_of(obj)
            waiting = bool(self._by_pod.get(key))
        if waiting:
            self.queue.add(POD + key)
        if finished:
            for group in seen | (groups_of(obj) if obj else set()):
                self.queue.add(GROUP + group)

    def live_groups(self, pod_key: str) -> set[str]:
        """The GPU groups a live BindRequest is binding `pod_key` into."""
        with self._lock:
            keys = list(self._by_pod.get(pod_key, ()))
        out: set[str] = set()
        for key in keys:
            obj = self.requests.get(key)
            if obj is not None and live(obj):
                out.update(Request.of(obj).groups)
        return out

    def bound_into(self, group: str) -> bool:
        """Whether a pod that a Succeeded BindRequest bound into `group` is still bound there and
        not finished (as the watch last saw it), whatever its labels say."""
        with self._lock:
            keys = list(self._by_group.get(group, ()))
        for key in keys:
            obj = self.requests.get(key)
            if obj is None or (obj.get("status") or {}).get("phase") != "Succeeded":
                continue
            request = Request.of(obj)
            pod = self.pods.get(request.pod_key)
            if pod is not None and (pod.get("spec") or {}).get("nodeName") == request.node \
                    and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                return True
        return False

    # ---- workers --------------------------------------------------------------------------------
    def _work(self) -> None:
        while (key := self.queue.get()) is not None:
            metrics.BIND_QUEUE.set(len(self.queue))
            try:
                if key.startswith(POD):
                    self._reconcile(key[len(POD):])
                else:
                    self.reservations.sync(key[len(GROUP):])
                self._errors.pop(key, None)
            except Exception as e:   # a worker must outlive any one failure
                failures = self._errors[key] = self._errors.get(key, 0) + 1
                delay = self.settings.retry_delay(failures)
                if isinstance(e, ClusterError):
                    log.warning("%s: %s; again in %.1fs", key, e, delay)
                else:
                    log.exception("%s: unexpected error; again in %.1fs", key, delay)
                self.queue.add_after(key, delay)
            finally:
                self.queue.done(key)

    def _resync(self) -> None:
        while not self.stop_event.wait(self.settings.resync):
            self._sweep_all()

    def _sweep_all(self) -> None:
        """Every reservation's group is checked for users."""
        keys = self.reserved.keys()
        for group in sorted({g for key in keys for g in groups_of(self.reserved.get(key) or {})}):
            self.queue.add(GROUP + group)

    # ---- one pod's turn -------------------------------------------------------------------------
    def _reconcile(self, pod_key: str) -> None:
        with self._lock:
            keys = list(self._by_pod.get(pod_key, ()))
        candidates = sorted((o for k in keys if (o := self.requests.get(k)) is not None), key=_age)
        for obj in candidates:
            uid = str(obj["metadata"].get("uid"))
            if uid in self._unfinished:
                self._finish(Request.of(obj), self._unfinished[uid])
            if not live(obj):
                self._mend(obj)
                continue
            due = self._retry_at.get(uid, 0.0) - self._clock()
            if due > 0:
                self.queue.add_after(POD + pod_key, due)
                return
            fresh = self._read(obj)
            if fresh is None or not live(fresh):
                continue
            self._attempt(fresh)
            retry = self._retry_at.get(uid, 0.0) - self._clock()
            if retry > 0:
                self.queue.add_after(POD + pod_key, retry)
            elif len(candidates) > 1:
                self.queue.add(POD + pod_key)   # the pod's other requests get their turn next
            return

    def _read(self, obj: Obj) -> Obj | None:
        """The request as the API has it now (the watch may lag behind our own status writes)."""
        meta = obj["metadata"]
        try:
            return self.api.get(kubeapi.BIND_REQUEST, meta["name"], meta.get("namespace"))
        except ClusterError as e:
            if e.status == 404:
                return None
            raise

    def _attempt(self, obj: Obj) -> None:
        request = Request.of(obj)
        failed, limit = int((obj.get("status") or {}).get("failedAttempts") or 0), limit_of(obj.get("spec") or {})
        started = self._clock()
        try:
            done = self.binding.attempt(request, self._gone(request.pod_key))
        except BindUncertain as e:
            self._count("uncertain", started)
            log.warning("BindRequest %s/%s: %s", request.namespace, request.name, e)
            self.queue.add_after(POD + request.pod_key, UNCERTAIN_DELAY)
            return
        except BindInterrupted:
            self._count("interrupted", started)
            self._undo_quietly(request)
            return
        except (BindError, ClusterError) as e:
            self._failed(request, e, failed, limit, started)
            return
        if done == FOREIGN:
            log.debug("BindRequest %s/%s: its pod is another scheduler's", request.namespace, request.name)
            return
        self._count("succeeded" if done == BOUND else "already_bound", started)
        self._retry_at.pop(request.uid, None)
        message = f"Pod bound successfully to node {request.node}"
        self._finish(request, Outcome({"phase": "Succeeded", "reason": None}, message))

    def _failed(self, request: Request, error: Exception, failed: int, limit: int, started: float) -> None:
        final = isinstance(error, BindError) and error.final
        attempts = failed + 1
        gives_up = final or attempts >= limit
        delay = self.settings.retry_delay(attempts)
        if final:
            note, attempts = "not retried", max(attempts, limit)   # read as failed for good
        elif gives_up:
            note = f"attempt {attempts} of {max(limit, 1)}; giving up"
        else:
            note = f"attempt {attempts} of {limit}; retrying in {delay:g}s"
            self._retry_at[request.uid] = self._clock() + delay
        reason = f"{error} ({note})"
        self._count("failed" if gives_up else "retrying", started)
        log.warning("BindRequest %s/%s for pod %s: %s", request.namespace, request.name, request.pod_key, reason)
        message = f"Failed to bind pod {request.pod_key} to node {request.node}: {reason}"
        self._finish(request, Outcome({"phase": "Failed", "reason": reason, "failedAttempts": attempts}, message,
                                      rollback=True))

    def _gone(self, pod_key: str) -> Callable[[], str | None]:
        """Why waiting for this pod's reservation is pointless now, if it is: the pod was deleted."""
        seen = self.pods.get(pod_key) is not None

        def gone() -> str | None:
            pod = self.pods.get(pod_key)
            if seen and (pod is None or (pod.get("metadata") or {}).get("deletionTimestamp")):
                return f"pod {pod_key} was deleted while its GPU reservation was made"
            return None
        return gone

    # ---- recording the outcome -----------------------------------------------------------------
    def _finish(self, request: Request, outcome: Outcome) -> None:
        """Undo (on failure), then write the status; a step that fails is done on the pod's next turn."""
        self._unfinished[request.uid] = outcome
        if outcome.rollback and "rollback" not in outcome.done:
            _persist(lambda: self.binding.rollback(request))
            outcome.done.add("rollback")
        _persist(lambda: self.api.patch(kubeapi.BIND_REQUEST, request.name, {"status": outcome.status},
                                        request.namespace, status=True))
        del self._unfinished[request.uid]
        self._tell_pod(request, outcome)

    def _tell_pod(self, request: Request, outcome: Outcome) -> None:
        """The pod's PodBound condition and an Event: best effort (the BindRequest is the record)."""
        ok = outcome.status["phase"] == "Succeeded"
        condition = {"type": POD_BOUND, "status": "True" if ok else "False", "reason": "Bound" if ok else "BindingError",
                     "message": outcome.message[:1024],
                     "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        pod: Obj = {"metadata": {"name": request.pod, "namespace": request.namespace, "uid": request.pod_uid}}
        try:
            _persist(lambda: self.api.patch_strategic(kubeapi.POD, request.pod, {"status": {"conditions": [condition]}},
                                                      request.namespace, status=True))
            self.api.create_event(kubeapi.POD, pod, condition["reason"], outcome.message,
                                  "Normal" if ok else "Warning", component="kaipolicy-binder")
        except ClusterError as e:
            log.info("pod %s not told of its binding: %s", request.pod_key, e)

    def _mend(self, obj: Obj) -> None:
        """A pod whose GPU-group labels or PodBound condition disagree with its final request is put
        right: a write of an earlier attempt that the API server was slow to apply, after its
        client had timed out, can land after the writes that followed it."""
        request = Request.of(obj)
        pod = self.pods.get(request.pod_key)
        if pod is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            return
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if (obj.get("status") or {}).get("phase") != "Succeeded":
            stale = [k for k, v in request.labels().items() if labels.get(k) == v]
            if stale and not (pod.get("spec") or {}).get("nodeName") \
                    and not set(request.groups) & self.live_groups(request.pod_key):
                log.warning("pod %s: GPU-group labels of a failed request removed again", request.pod_key)
                _persist(lambda: self.binding.rollback(request))
            return
        if (pod.get("spec") or {}).get("nodeName") != request.node:
            return
        missing = {k: v for k, v in request.labels().items() if labels.get(k) != v}
        if missing:
            log.warning("pod %s: GPU-group labels set again after a late write", request.pod_key)
            _persist(lambda: self.api.patch(kubeapi.POD, request.pod, {"metadata": {"labels": missing}},
                                            request.namespace))
        conditions = (pod.get("status") or {}).get("conditions") or []
        if any(c.get("type") == POD_BOUND and c.get("status") != "True" for c in conditions):
            log.info("pod %s: PodBound set again after a late write", request.pod_key)
            self._tell_pod(request, Outcome({"phase": "Succeeded"}, f"Pod bound successfully to node {request.node}"))

    def _undo_quietly(self, request: Request) -> None:
        try:
            self.binding.rollback(request)
        except ClusterError as e:
            log.warning("BindRequest %s/%s: could not undo an interrupted attempt: %s", request.namespace,
                        request.name, e)

    def _count(self, result: str, started: float) -> None:
        metrics.BIND_ATTEMPTS.labels(result=result).inc()
        metrics.BIND_LATENCY.labels(result=result).observe(self._clock() - started)


def _persist(call: Callable[[], object], tries: int = 5, pause: float = 0.1) -> None:
    """Call until it succeeds; API failures that may pass (no answer, 409, 429, 5xx) are tried
    `tries` times with doubling pauses, then raised like any other."""
    for n in range(tries):
        try:
            call()
            return
        except ClusterError as e:
            passing = e.status is None or e.status in (409, 429) or e.status >= 500
            if not passing or n == tries - 1:
                raise
            time.sleep(pause * 2 ** n)


def _age(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("creationTimestamp", "")), str(meta.get("name", ""))
