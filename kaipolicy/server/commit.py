"""Writing a cycle's decisions to the cluster: BindRequests gang by gang, evictions, then (from
the outbox's thread) PodGroup status, pod conditions and Events.

Every write that fails is logged, counted and leaves the decision to the next cycle; nothing here
raises. What was written is remembered until the informers have seen it (`caught_up`): the next
cycle waits for that, so a pod is never placed twice on a snapshot that missed its BindRequest.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kaipolicy import metrics
from kaipolicy.cache import kubeapi
from kaipolicy.cache.bindrequests import BindRequestWriter, Written
from kaipolicy.cache.eviction import CONDITION as EVICTION_CONDITION
from kaipolicy.cache.eviction import evict
from kaipolicy.cache.k8s_source import K8sSource
from kaipolicy.cache.kubeapi import Kind, KubeApi, Obj
from kaipolicy.cache.outbox import Outbox
from kaipolicy.cache.podgroups import DEFAULT_NODE_POOL, annotations_patch, status_patch
from kaipolicy.server.decisions import Decisions, EvictionDecision, JobDecision, Origin

log = logging.getLogger("kaipolicy.commit")


@dataclass
class Summary:
    binds: int = 0
    gangs_failed: int = 0
    evictions: int = 0
    evictions_failed: int = 0
    abandoned: int = 0          # gangs not written: the process is stopping or lost the lease
    errors: list[str] = field(default_factory=list)


class Committer:
    def __init__(self, api: KubeApi, source: K8sSource, outbox: Outbox, backoff_limit: int, partition: str) -> None:
        self.api, self.source, self.outbox = api, source, outbox
        self.partition = partition
        self.writer = BindRequestWriter(api, backoff_limit, partition)
        self.unseen: list[Written] = []         # created, not yet in the informer
        self.to_delete: list[Written] = []      # withdrawals that failed: retried before each cycle
        self.withdrawn: list[Written] = []      # deleted, maybe still in the informer
        self.evicted: list[Origin] = []         # evicted pods, maybe still shown running

    # ---- before a cycle ---------------------------------------------------------------------
    def caught_up(self) -> bool:
        """Retry withdrawals that failed and forget what the informers now reflect; True when
        the informers show everything this scheduler wrote."""
        if self.to_delete:
            failed = self.writer.withdraw(self.to_delete)
            self.withdrawn += [w for w in self.to_delete if w not in failed]
            self.to_delete = failed
        requests = self.source.informers["BindRequest"]
        self.unseen = [w for w in self.unseen if not (self._shown(w) or requests.reached(w.version))]
        self.withdrawn = [w for w in self.withdrawn if self._shown(w)]
        pods = self.source.informers["Pod"]
        self.evicted = [o for o in self.evicted if _alive(pods.get(f"{o[1]}/{o[2]}"), o[3])]
        return not (self.unseen or self.to_delete or self.withdrawn or self.evicted)

    def waiting_for(self) -> str:
        return (f"{len(self.unseen)} BindRequest(s) written, {len(self.to_delete) + len(self.withdrawn)} withdrawn "
                f"and {len(self.evicted)} eviction(s)")

    def forget(self) -> None:
        """Stop waiting (the informers never caught up); withdrawals that failed are kept."""
        self.unseen, self.withdrawn, self.evicted = [], [], []

    def _shown(self, w: Written) -> bool:
        obj = self.source.informers["BindRequest"].get(f"{w.namespace}/{w.name}")
        return obj is not None and (obj.get("metadata") or {}).get("uid") == w.uid

    # ---- the cycle's writes -----------------------------------------------------------------
    def apply(self, d: Decisions, nodes: set[str], may_write: Callable[[], bool]) -> Summary:
        out = Summary()
        for job, placements in d.gangs:
            if not may_write():
                out.abandoned += 1
                continue
            result = self.writer.write_gang(placements, nodes, may_write)
            if result.ok:
                out.binds += len(result.written)
                self.unseen += result.written
                for p in placements:
                    metrics.TASK_SCHEDULING_LATENCY.observe(max(time.time() - d.created[p.pod_uid], 0.0) * 1000.0)
                    self._event(kubeapi.POD, (p.namespace, p.pod), "Normal", "Scheduled",
                                f"Successfully assigned pod {p.namespace}/{p.pod} to node {p.node} at node-pool "
                                f"{self.partition or DEFAULT_NODE_POOL}")
                continue
            out.gangs_failed += 1
            self.withdrawn += [w for w in result.written if w not in result.leftovers]
            self.to_delete += result.leftovers
            message = f"BindRequests of {len(placements)} pod(s) not written: {result.error}"
            if result.written:
                gone = len(result.written) - len(result.leftovers)
                message += f"; withdrew {gone} of the {len(result.written)} written" + (
                    " (the rest is retried before the next cycle)" if result.leftovers else "")
            out.errors.append(f"{job[0]}/{job[1]}/{job[2]}: {message}")
            log.error("gang %s/%s not committed: %s", job[1], job[2], message)
            self._event(_kind(job), (job[1], job[2]), "Warning", "FailedBinding", message)
        for e in d.evictions:
            if not may_write():
                out.abandoned += 1
                continue
            self._evict(e, out)
        return out

    def _evict(self, e: EvictionDecision, out: Summary) -> None:
        error = evict(self.api, e.eviction)
        if error is not None:
            out.evictions_failed += 1
            out.errors.append(f"Pod/{e.eviction.namespace}/{e.eviction.pod}: {error}")
            return
        out.evictions += 1
        self.evicted.append(("Pod", e.eviction.namespace, e.eviction.pod, e.eviction.pod_uid))
        annotations = {"evictor-action-type": e.action, "num-evicted-pods": str(e.gang_size)}
        if e.served is not None:
            annotations |= {"evictor-pod-group-name": e.served[2], "evictor-pod-group-namespace": e.served[1]}
        self._event(_kind(e.job), (e.job[1], e.job[2]), "Normal", "Evict", e.eviction.message, annotations)
        metrics.POD_GROUP_EVICTED_PODS.labels(podgroup=e.job[2], namespace=e.job[1], uid=e.job[3],
                                              nodepool=self.partition or DEFAULT_NODE_POOL, action=e.action).inc()

    # ---- status and events (sent from the outbox's thread) -----------------------------------
    def report(self, d: Decisions, now: float) -> None:
        for pod, message in d.pipelined:
            self._event(kubeapi.POD, (pod[1], pod[2]), "Normal", "Pipelined", message)
        for job in d.jobs:
            self._job(job, now)

    def _job(self, j: JobDecision, now: float) -> None:
        kind = _kind(j.origin)
        for type_, reason, message in j.events:
            if kind is kubeapi.POD and reason == "Unschedulable":
                continue     # a job of one: its pod's own event says it
            self._event(kind, (j.origin[1], j.origin[2]), type_, reason, message)
        for pod, message in j.pod_messages:
            self._event(kubeapi.POD, (pod[1], pod[2]), "Warning", "Unschedulable", message)
            self._pod_condition(pod, message)
        if kind is kubeapi.POD_GROUP:
            self._pod_group(j, now)

    def _pod_group(self, j: JobDecision, now: float) -> None:
        key = f"{j.origin[1]}/{j.origin[2]}"
        obj = self.source.informers["PodGroup"].get(key)
        if obj is None:
            return
        for patch, status in ((annotations_patch(obj, j.report), False), (status_patch(obj, j.report, now), True)):
            if patch is not None:
                self.outbox.write(("PodGroup", key, str(status)), "patch", "PodGroup",
                                  _patcher(self.api, kubeapi.POD_GROUP, j.origin, patch, status))

    def _pod_condition(self, pod: Origin, message: str) -> None:
        obj = self.source.informers["Pod"].get(f"{pod[1]}/{pod[2]}")
        if obj is None or (obj.get("spec") or {}).get("nodeName"):
            return
        have: Obj = next((c for c in (obj.get("status") or {}).get("conditions") or []
                          if c.get("type") == "PodScheduled"), {})
        if have.get("status") == "False" and have.get("reason") == "Unschedulable" and have.get("message") == message:
            return
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
                     "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        self.outbox.write(("Pod", f"{pod[1]}/{pod[2]}", "condition"), "patch", "Pod",
                          lambda: self.api.patch_strategic(kubeapi.POD, pod[2], {"status": {"conditions": [condition]}},
                                                           pod[1], status=True))

    def _event(self, kind: Kind, where: tuple[str, str], type_: str, reason: str, message: str,
               annotations: dict[str, str] | None = None) -> None:
        informer = self.source.informers.get(kind.kind)
        obj = informer.get(f"{where[0]}/{where[1]}") if informer is not None else None
        involved: Obj = obj or {"metadata": {"namespace": where[0], "name": where[1]}}
        self.outbox.event(kind, involved, reason, message, type_, annotations)


def _kind(origin: Origin) -> Kind:
    return kubeapi.POD_GROUP if origin[0] == "PodGroup" else kubeapi.POD


def _alive(obj: Obj | None, uid: str) -> bool:
    """The evicted pod still shows as it was: same uid, not being deleted."""
    meta = (obj or {}).get("metadata") or {}
    return obj is not None and meta.get("uid") == uid and not meta.get("deletionTimestamp")


def _patcher(api: KubeApi, kind: Kind, origin: Origin, patch: Obj, status: bool) -> Callable[[], Obj]:
    return lambda: api.patch(kind, origin[2], patch, origin[1], status=status)


__all__ = ["EVICTION_CONDITION", "Committer", "Summary"]
