"""GPU-sharing reservations, KAI Scheduler's protocol: each shared GPU group has one pod in the
reservation namespace, bound to the group's node, requesting a whole `nvidia.com/gpu`, which writes
its device's UUID into an annotation once it runs. `ensure` makes the group's reservation exist and
waits for that annotation; `sync` deletes the reservations nothing uses any more. What a sharing
pod's containers are told about the device (KAI's per-pod ConfigMap) is not done here.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kaipolicy import metrics
from kaipolicy.binder.settings import (
    DEVICE_ANNOTATION,
    GPU_GROUP_LABEL,
    MULTI_GROUP_PREFIX,
    ReservationSettings,
)
from kaipolicy.cache import kubeapi
from kaipolicy.cache.kubeapi import KubeApi, Obj
from kaipolicy.errors import BindError, BindInterrupted, ClusterError

log = logging.getLogger("kaipolicy.binder")

_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_FINISHED = ("Succeeded", "Failed")
POLL = 2.0      # seconds between direct reads while waiting, in case the watch lags or is cut


def valid_group(group: str) -> bool:
    """A group name must be a label value (it is one, on the pods)."""
    return bool(_LABEL_VALUE.match(group))


def group_label(group: str, multi: bool) -> str:
    """The label a pod carries for `group`: `runai-gpu-group` for a one-device share, one
    `runai-gpu-group/<group>` per device for a multi-device share (as KAI labels them)."""
    return MULTI_GROUP_PREFIX + group if multi else GPU_GROUP_LABEL


def groups_of(pod: Obj) -> set[str]:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return {str(v) for k, v in labels.items() if k == GPU_GROUP_LABEL or k.startswith(MULTI_GROUP_PREFIX)}


def device_of(pod: Obj | None) -> str:
    return str(((pod or {}).get("metadata") or {}).get("annotations", {}).get(DEVICE_ANNOTATION) or "")


class GroupLocks:
    """One lock per GPU group, made on first use and dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}

    @contextmanager
    def hold(self, group: str) -> Iterator[None]:
        with self._lock:
            lock, users = self._locks.get(group) or (threading.Lock(), 0)
            self._locks[group] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._lock:
                lock, users = self._locks[group]
                if users == 1:
                    del self._locks[group]
                else:
                    self._locks[group] = (lock, users - 1)


class Reservations:
    """`lookup` reads a reservation pod ("namespace/name") from a watched store; `live_groups`
    says which groups a pod ("namespace/name") is being bound into by a BindRequest not yet final;
    `bound_into` whether a Succeeded BindRequest's pod is still bound into a group."""

    def __init__(self, api: KubeApi, settings: ReservationSettings, stop: threading.Event,
                 lookup: Callable[[str], Obj | None], live_groups: Callable[[str], set[str]],
                 bound_into: Callable[[str], bool], clock: Callable[[], float] = time.monotonic) -> None:
        self.api, self.settings, self._stop = api, settings, stop
        self._lookup, self._live_groups, self._bound_into, self._clock = lookup, live_groups, bound_into, clock
        self.locks = GroupLocks()
        self._changed = threading.Condition()

    def notify(self) -> None:
        """A reservation pod changed: wake the workers waiting for one."""
        with self._changed:
            self._changed.notify_all()

    # ---- making one -------------------------------------------------------------------------------
    def ensure(self, node: str, group: str, gone: Callable[[], str | None]) -> tuple[str, bool]:
        """The device of `group`'s reservation on `node`, made when missing; with whether this call
        made it. The caller holds `locks.hold(group)`. `gone` says why waiting is pointless (the pod
        to bind was deleted), or None."""
        existing = self.reservations_of(group)
        here = [p for p in existing if (p.get("spec") or {}).get("nodeName") == node]
        if existing and not here:
            other = (existing[0].get("spec") or {}).get("nodeName")
            raise BindError(f"GPU group {group} is reserved on node {other}, not on {node}", final=True)
        created = not here
        name = _name(here[0]) if here else self._create(node, group)
        return self._wait(name, gone), created

    def reservations_of(self, group: str) -> list[Obj]:
        pods, _ = self.api.list(kubeapi.POD, self.settings.namespace, label_selector=f"{GPU_GROUP_LABEL}={group}")
        return sorted(pods, key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]))

    def _create(self, node: str, group: str) -> str:
        s = self.settings
        # One name per (node, group): a create whose answer was lost and is sent again finds its pod.
        digest = hashlib.sha256(f"{node}/{group}".encode()).hexdigest()[:10]
        name = f"gpu-reservation-{node[:200]}-{digest}"
        container = {
            "name": "resource-reservation", "image": s.image, "imagePullPolicy": "IfNotPresent",
            "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}},
            "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}]}
        spec: Obj = {"nodeName": node, "serviceAccountName": s.service_account, "containers": [container]}
        if s.runtime_class:
            spec["runtimeClassName"] = s.runtime_class
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": s.namespace,
                             "labels": {"app": s.app_label, GPU_GROUP_LABEL: group},
                             "annotations": {"karpenter.sh/do-not-disrupt": "true"}},
                "spec": spec}
        try:
            self.api.create(kubeapi.POD, body)
        except ClusterError as e:
            if e.status != 409 and not self._exists(name):
                raise BindError(f"cannot create the GPU reservation pod for group {group} on node {node}: {e}") from e
        metrics.RESERVATIONS.labels(action="created").inc()
        log.info("reservation %s/%s made for GPU group %s on node %s", s.namespace, name, group, node)
        return name

    def _exists(self, name: str) -> bool:
        try:
            self.api.get(kubeapi.POD, name, self.settings.namespace)
            return True
        except ClusterError:
            return False

    def _wait(self, name: str, gone: Callable[[], str | None]) -> str:
        """The device the reservation pod reports; raises when it does not within the timeout."""
        where = f"{self.settings.namespace}/{name}"
        deadline = self._clock() + self.settings.timeout
        next_read = self._clock() + POLL
        while True:
            device = device_of(self._lookup(where))
            if device:
                return device
            if self._stop.is_set():
                raise BindInterrupted("the binder is stopping")
            why = gone()
            if why:
                raise BindError(why, final=True)
            now = self._clock()
            if now >= deadline:
                raise BindError(f"the GPU reservation pod {where} reported no device within "
                                f"{self.settings.timeout:g}s (annotation {DEVICE_ANNOTATION})")
            if now >= next_read:
                next_read = now + POLL
                device = self._read_device(name)
                if device:
                    return device
            with self._changed:
                self._changed.wait(min(0.5, max(deadline - now, 0.01)))

    def _read_device(self, name: str) -> str:
        try:
            return device_of(self.api.get(kubeapi.POD, name, self.settings.namespace))
        except ClusterError as e:
            if e.status == 404:
                raise BindError(f"the GPU reservation pod {self.settings.namespace}/{name} was deleted "
                                "while waiting for it") from e
            return ""   # the next read or the watch will tell

    # ---- removing unused ones ---------------------------------------------------------------------
    def sync(self, group: str) -> int:
        """Delete `group`'s reservation pods unless a pod uses the group: one bound to a node and not
        finished (labelled with the group, or bound by a request naming it), or one a live
        BindRequest is binding into it. Returns how many were deleted."""
        with self.locks.hold(group):
            reservations = self.reservations_of(group)
            if not reservations or self._in_use(group):
                return 0
            for pod in reservations:
                try:
                    self.api.delete(kubeapi.POD, _name(pod), self.settings.namespace, grace_period_seconds=0)
                except ClusterError as e:
                    if e.status != 404:
                        raise
                metrics.RESERVATIONS.labels(action="deleted").inc()
                log.info("reservation %s/%s deleted: nothing uses GPU group %s", self.settings.namespace,
                         _name(pod), group)
            return len(reservations)

    def _in_use(self, group: str) -> bool:
        if self._bound_into(group):   # whatever its labels say (a late write may have removed them)
            return True
        pods, _ = self.api.list(kubeapi.POD, None, label_selector=f"{GPU_GROUP_LABEL}={group}")
        if valid_group(group):
            more, _ = self.api.list(kubeapi.POD, None, label_selector=MULTI_GROUP_PREFIX + group)
            pods += more
        for pod in pods:
            meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
            if meta.get("namespace") == self.settings.namespace:
                continue
            if (pod.get("status") or {}).get("phase") in _FINISHED:
                continue
            if spec.get("nodeName") or group in self._live_groups(f"{meta.get('namespace')}/{meta.get('name')}"):
                return True
            # a pod left labelled by an attempt that could not undo it: not a user
            log.info("Pod/%s/%s carries GPU group %s but is neither bound nor being bound into it",
                     meta.get("namespace"), meta.get("name"), group)
        return False


def _name(pod: Obj) -> str:
    return str(pod["metadata"]["name"])
