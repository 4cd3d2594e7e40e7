"""Evicting a pod through the Eviction API (PodDisruptionBudgets are honoured), then giving it the
reference's condition: `DisruptionTarget`, reason `PreemptionByScheduler`, with the eviction
message. The condition is written after the eviction because the Eviction API writes its own
(`EvictionByEvictionAPI`, no message) over any that is there. The pod group's `Evict` Event and
the metric are the caller's (they are about the whole gang).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from kaipolicy import metrics
from kaipolicy.cache import kubeapi
from kaipolicy.cache.kubeapi import KubeApi
from kaipolicy.errors import ClusterError

log = logging.getLogger("kaipolicy.commit")

CONDITION, REASON = "DisruptionTarget", "PreemptionByScheduler"


@dataclass(frozen=True)
class Eviction:
    namespace: str
    pod: str
    pod_uid: str
    message: str


def evict(api: KubeApi, e: Eviction) -> ClusterError | None:
    """Evict one pod; the error when it could not be (a pod already gone counts as evicted)."""
    try:
        api.evict(e.namespace, e.pod, uid=e.pod_uid or None)
    except ClusterError as err:
        if err.status == 404:
            return None
        metrics.API_ERRORS.labels(verb="evict", kind="Pod").inc()
        log.error("could not evict Pod/%s/%s: %s", e.namespace, e.pod, err)
        return err
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {"type": CONDITION, "status": "True", "reason": REASON, "message": e.message[:32768],
                 "lastTransitionTime": now}
    try:
        api.patch_strategic(kubeapi.POD, e.pod, {"status": {"conditions": [condition]}}, e.namespace, status=True)
    except ClusterError as err:
        if err.status != 404:     # gone already (it had no node): nobody reads its conditions
            metrics.API_ERRORS.labels(verb="patch", kind="Pod").inc()
            log.warning("evicted Pod/%s/%s, but could not write its condition: %s", e.namespace, e.pod, err)
    return None
