"""One attempt at a BindRequest, and its undoing. The attempt reads the pod and the node afresh
(never trusting a watch for what decides), makes the GPU-sharing reservations and labels the pod
with its groups, sets the `received-resource-type` annotation, and binds through `pods/binding`.
A binding whose answer is lost is settled by reading the pod again, never by binding twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from kaipolicy.binder.reservations import Reservations, group_label, valid_group
from kaipolicy.binder.settings import RECEIVED_TYPE_ANNOTATION, SHARED
from kaipolicy.cache import kubeapi
from kaipolicy.cache.kubeapi import KubeApi, Obj
from kaipolicy.errors import BindError, BindUncertain, ClusterError

log = logging.getLogger("kaipolicy.binder")


@dataclass(frozen=True)
class Request:
    """The parts of a BindRequest an attempt reads."""

    namespace: str
    name: str
    uid: str
    pod: str
    node: str
    resource_type: str
    groups: tuple[str, ...]
    pod_uid: str            # from the owner reference, when the scheduler wrote one

    @staticmethod
    def of(obj: Obj) -> Request:
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        owner = next((o.get("uid", "") for o in meta.get("ownerReferences") or [] if o.get("kind") == "Pod"), "")
        return Request(str(meta.get("namespace", "")), str(meta.get("name", "")), str(meta.get("uid", "")),
                       str(spec.get("podName", "")), str(spec.get("selectedNode", "")),
                       str(spec.get("receivedResourceType") or ""),
                       tuple(str(g) for g in spec.get("selectedGPUGroups") or ()), str(owner))

    @property
    def pod_key(self) -> str:
        return f"{self.namespace}/{self.pod}"

    @property
    def shared(self) -> bool:
        return self.resource_type == SHARED

    def labels(self) -> dict[str, str]:
        """The GPU-group labels the pod gets (none unless it shares GPUs)."""
        multi = len(self.groups) > 1
        return {group_label(g, multi): g for g in self.groups} if self.shared else {}


BOUND, ALREADY, FOREIGN = "bound", "already bound", "foreign"   # what an attempt found or did


class Binding:
    def __init__(self, api: KubeApi, reservations: Reservations, scheduler_name: str) -> None:
        self.api, self.reservations, self.scheduler_name = api, reservations, scheduler_name

    def attempt(self, request: Request, gone: Callable[[], str | None]) -> str:
        """Bind the pod where the request says: BOUND, or ALREADY when it was bound there before,
        or FOREIGN when the pod belongs to another scheduler (its binder's to bind; nothing is
        done). Raises BindError (final when retrying cannot help)."""
        pod = self.read_pod(request)
        if (pod.get("spec") or {}).get("schedulerName") != self.scheduler_name:
            return FOREIGN
        if _node_of(pod):
            return self._already(request, pod)
        self._read_node(request, "does not exist")
        if request.shared:
            self._reserve(request, gone)
            self._read_node(request, "was deleted while its GPU reservation was made")
        self._annotate(request, pod)
        try:
            self.api.bind(request.namespace, request.pod, request.node, uid=str(pod["metadata"].get("uid") or ""))
        except ClusterError as e:
            return self._settle(request, e)
        return BOUND

    def rollback(self, request: Request) -> None:
        """Undo an attempt that did not bind: the pod's GPU-group labels and the annotation go (the
        binder owns both), then the groups' reservations go unless something else uses them. Only
        called when the pod is known not to be bound. Raises ClusterError when the API fails."""
        undo: Obj = {"annotations": {RECEIVED_TYPE_ANNOTATION: None}}
        if request.labels():
            undo["labels"] = {key: None for key in request.labels()}   # null removes a key in a merge patch
        try:
            self.api.patch(kubeapi.POD, request.pod, {"metadata": undo}, request.namespace)
        except ClusterError as e:
            if e.status != 404:    # a pod that is gone has nothing left to undo
                raise
        for group in request.groups if request.shared else ():
            self.reservations.sync(group)

    # ---- steps ----------------------------------------------------------------------------------
    def read_pod(self, request: Request) -> Obj:
        where = f"pod {request.pod_key}"
        try:
            pod = self.api.get(kubeapi.POD, request.pod, request.namespace)
        except ClusterError as e:
            if e.status == 404:
                raise BindError(f"{where} no longer exists", final=True) from e
            raise
        meta = pod.get("metadata") or {}
        if request.pod_uid and meta.get("uid") != request.pod_uid:
            raise BindError(f"{where} was deleted and made again since it was scheduled", final=True)
        if meta.get("deletionTimestamp"):
            raise BindError(f"{where} is being deleted", final=True)
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            raise BindError(f"{where} has finished", final=True)
        return pod

    def _already(self, request: Request, pod: Obj) -> str:
        if _node_of(pod) != request.node:
            raise BindError(f"pod {request.pod_key} is already bound to node {_node_of(pod)}", final=True)
        return ALREADY

    def _read_node(self, request: Request, missing: str) -> None:
        try:
            self.api.get(kubeapi.NODE, request.node)
        except ClusterError as e:
            if e.status == 404:
                raise BindError(f"node {request.node} {missing}", final=True) from e
            raise

    def _reserve(self, request: Request, gone: Callable[[], str | None]) -> None:
        if not request.groups:
            raise BindError("a GPU-sharing (Fraction) request names no GPU group", final=True)
        bad = [g for g in request.groups if not valid_group(g)]
        if bad:
            raise BindError(f"GPU group {bad[0]!r} is not a valid label value", final=True)
        labels = request.labels()
        for group in request.groups:
            key = next(k for k, v in labels.items() if v == group)
            # Labelled under the group's lock: a sweep for unused reservations sees the reservation
            # together with its new user, or neither.
            with self.reservations.locks.hold(group):
                self.reservations.ensure(request.node, group, gone)
                try:
                    self.api.patch(kubeapi.POD, request.pod, {"metadata": {"labels": {key: group}}},
                                   request.namespace)
                except ClusterError as e:
                    if e.status == 404:
                        raise BindError(f"pod {request.pod_key} was deleted while it was being bound",
                                        final=True) from e
                    raise

    def _annotate(self, request: Request, pod: Obj) -> None:
        current = ((pod.get("metadata") or {}).get("annotations") or {}).get(RECEIVED_TYPE_ANNOTATION)
        if not request.resource_type or current == request.resource_type:
            return
        try:
            self.api.patch(kubeapi.POD, request.pod,
                           {"metadata": {"annotations": {RECEIVED_TYPE_ANNOTATION: request.resource_type}}},
                           request.namespace)
        except ClusterError as e:
            if e.status == 404:
                raise BindError(f"pod {request.pod_key} was deleted while it was being bound", final=True) from e
            raise

    def _settle(self, request: Request, error: ClusterError) -> str:
        """The binding call failed: the pod, read again, says whether it is bound all the same
        (the answer was lost, or a conflict hid a binding that went through)."""
        if error.status == 404:
            raise BindError(f"pod {request.pod_key} was deleted while it was being bound", final=True) from error
        try:
            pod = self.read_pod(request)
        except ClusterError as e:
            if error.status is None or error.status >= 500:
                raise BindUncertain(f"binding pod {request.pod_key} may have happened ({error}); "
                                    f"the pod cannot be read: {e}") from e
            raise BindError(str(error)) from error
        node = _node_of(pod)
        if node == request.node:
            log.info("pod %s is bound to %s although the binding call failed (%s)", request.pod_key, node, error)
            return BOUND
        if node:
            raise BindError(f"pod {request.pod_key} is already bound to node {node}", final=True) from error
        raise BindError(f"cannot bind pod {request.pod_key} to node {request.node}: {error}") from error


def _node_of(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")
