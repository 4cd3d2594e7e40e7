"""Writing a cycle's placements as BindRequests, one gang at a time, all or nothing.

A BindRequest is named after its pod and owned by it, in the reference's shape. A name already
taken by a request that no longer counts (failed for good, for an earlier pod of the same name,
or for a node that is gone) is replaced; one that still counts means the snapshot was behind, and
the gang is not written. When a write fails part-way, the requests already written for the gang
are deleted again (a partly written gang would start pods that cannot run together).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from kaipolicy import metrics
from kaipolicy.cache import kubeapi
from kaipolicy.cache.convert import NODE_POOL_LABEL
from kaipolicy.cache.kubeapi import KubeApi, Obj
from kaipolicy.errors import ClusterError

log = logging.getLogger("kaipolicy.commit")

SELECTED_NODE_LABEL = "selected-node"
_LABEL_VALUE_MAX = 63


@dataclass(frozen=True)
class Placement:
    """One pod's decision: where it goes, the GPUs it receives there, the rules' annotations."""

    namespace: str
    pod: str
    pod_uid: str
    node: str
    gpu_groups: tuple[str, ...] = ()
    resource_type: str = "Regular"      # Regular | Fraction | MigInstance, as the reference writes it
    gpu_count: int = 0
    gpu_portion: float = 0.0
    annotations: dict[str, str] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Written:
    """A BindRequest this scheduler created: enough to wait for it and to delete exactly it."""

    namespace: str
    name: str
    uid: str
    version: str = ""        # its resourceVersion when created


@dataclass
class GangResult:
    written: list[Written] = field(default_factory=list)
    error: ClusterError | None = None
    #: requests that could not be deleted again after a failure (to retry before the next cycle)
    leftovers: list[Written] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None


def body(p: Placement, backoff_limit: int, partition: str = "") -> Obj:
    """The BindRequest object for a placement."""
    labels = {SELECTED_NODE_LABEL: p.node} if len(p.node) <= _LABEL_VALUE_MAX else {}
    if partition:
        labels[NODE_POOL_LABEL] = partition
    meta: Obj = {"name": p.pod, "namespace": p.namespace, "labels": labels,
                 "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": p.pod, "uid": p.pod_uid}]}
    if p.annotations:
        meta["annotations"] = dict(p.annotations)
    spec: Obj = {"podName": p.pod, "selectedNode": p.node, "receivedResourceType": p.resource_type,
                 "receivedGPU": {"count": p.gpu_count, "portion": f"{p.gpu_portion:.2f}"},
                 "backoffLimit": backoff_limit}
    if p.gpu_groups:
        spec["selectedGPUGroups"] = list(p.gpu_groups)
    return {"apiVersion": kubeapi.BIND_REQUEST.api_version, "kind": "BindRequest", "metadata": meta, "spec": spec}


def stale_reason(existing: Obj, p: Placement, nodes: Collection[str]) -> str:
    """Why an existing BindRequest of the pod's name no longer counts ('' when it still does)."""
    owners = [o.get("uid") for o in (existing.get("metadata") or {}).get("ownerReferences") or []
              if o.get("kind") == "Pod"]
    spec, status = existing.get("spec") or {}, existing.get("status") or {}
    limit = spec.get("backoffLimit")
    if owners and p.pod_uid not in owners:
        return "it was made for an earlier pod of the same name"
    if status.get("phase") == "Failed" and (limit is None or int(status.get("failedAttempts", 0)) >= int(limit)):
        return "the binder gave up on it"
    if spec.get("selectedNode") not in nodes:
        return f"its node {spec.get('selectedNode')!r} is gone"
    return ""


class BindRequestWriter:
    """Creates the BindRequests of one gang at a time through `api`."""

    def __init__(self, api: KubeApi, backoff_limit: int = 3, partition: str = "") -> None:
        self.api, self.backoff_limit, self.partition = api, backoff_limit, partition

    def write_gang(self, placements: list[Placement], nodes: Collection[str],
                   may_write: Callable[[], bool] = lambda: True) -> GangResult:
        """Every placement of one job, in order; on the first failure the ones written are deleted.
        `may_write` is asked before each write (leadership can be lost part-way)."""
        result = GangResult()
        try:
            for p in placements:
                if not may_write():
                    result.error = ClusterError("leadership lost while writing the gang")
                    break
                try:
                    result.written.append(self._create(p, nodes))
                except ClusterError as e:
                    metrics.API_ERRORS.labels(verb="create", kind="BindRequest").inc()
                    result.error = e
                    break
        except Exception:
            self.withdraw(result.written)    # a bug part-way must not leave half a gang either
            raise
        if result.error is not None and result.written:
            result.leftovers = self.withdraw(result.written)
            metrics.GANG_ROLLBACKS.inc()
        return result

    def withdraw(self, written: list[Written]) -> list[Written]:
        """Delete these requests again (newest first); the ones that could not be deleted."""
        failed = []
        for w in reversed(written):
            try:
                self.api.delete_exact(kubeapi.BIND_REQUEST, w.name, w.namespace, w.uid)
            except ClusterError as e:
                metrics.API_ERRORS.labels(verb="delete", kind="BindRequest").inc()
                log.error("could not withdraw BindRequest %s/%s: %s", w.namespace, w.name, e)
                failed.append(w)
        return failed

    def _create(self, p: Placement, nodes: Collection[str]) -> Written:
        obj = body(p, self.backoff_limit, self.partition)
        start = time.perf_counter()
        try:
            created = self.api.create(kubeapi.BIND_REQUEST, obj, p.namespace)
        except ClusterError as e:
            if e.status != 409:
                raise
            created = self._replace(p, obj, nodes, e)
        metrics.TASK_BIND_LATENCY.observe((time.perf_counter() - start) * 1000.0)
        meta = created.get("metadata") or {}
        return Written(p.namespace, p.pod, str(meta.get("uid", "")), str(meta.get("resourceVersion", "")))

    def _replace(self, p: Placement, obj: Obj, nodes: Collection[str], conflict: ClusterError) -> Obj:
        """The name is taken: replace a request that no longer counts, else report the conflict."""
        existing = self.api.get(kubeapi.BIND_REQUEST, p.pod, p.namespace)
        why = stale_reason(existing, p, nodes)
        if not why:
            raise ClusterError(f"{conflict}: pod {p.namespace}/{p.pod} already has a BindRequest that counts "
                               "(the snapshot was behind)", 409, "AlreadyExists") from conflict
        log.info("replacing BindRequest %s/%s: %s", p.namespace, p.pod, why)
        uid = str((existing.get("metadata") or {}).get("uid", ""))
        self.api.delete_exact(kubeapi.BIND_REQUEST, p.pod, p.namespace, uid)
        return self.api.create(kubeapi.BIND_REQUEST, obj, p.namespace)
