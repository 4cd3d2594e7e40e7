"""The binder under injected faults: a proxy between it and the real apiserver answers 409s and
500s, loses answers after carrying the request out (held until the client times out, or dropped),
and cuts watch streams. Across seeded runs of hundreds of BindRequests (regular pods, pods sharing
GPUs in pairs, requests for a node that does not exist): no pod is ever bound twice, every request
ends Succeeded or Failed with a reason and the cluster agrees with it, and once the faults stop and
the pods finish, no reservation is left. (A pod or node deleted mid-bind: test_binder.py.)

Default: 2 seeds x 80 requests. The long run: KAIPOLICY_FAULT_SEEDS=0-9 KAIPOLICY_FAULT_REQUESTS=1000.
The figures of each run are printed at the end of the pytest run.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kaipolicy import metrics
from kaipolicy.binder.settings import ReservationSettings
from kaipolicy.cache.lease import LeaseTimings
from tests.integration.apiserver import ApiServer
from tests.integration.binder_env import (
    BinderInThread,
    FakeKubelet,
    bind_request,
    is_settled,
    quick_settings,
    reservations,
)
from tests.integration.cluster import Cluster
from tests.integration.faultproxy import FaultProxy, Rates
from tests.polling import wait_for

REQUESTS = int(os.environ.get("KAIPOLICY_FAULT_REQUESTS", "80"))
RATES = Rates(conflict=0.04, error=0.04, timeout=0.005, drop=0.02, hold=1.5, watch_cut=(0.5, 3.0))


def _seeds() -> list[int]:
    text = os.environ.get("KAIPOLICY_FAULT_SEEDS", "0-1")
    low, _, high = text.partition("-")
    return list(range(int(low), int(high or low) + 1))


@pytest.fixture
def proxy(apiserver: ApiServer, request: pytest.FixtureRequest) -> Iterator[FaultProxy]:
    p = FaultProxy(apiserver.url, apiserver.state / "certs", RATES, seed=request.param).start()
    yield p
    p.stop()


@pytest.mark.parametrize("proxy", _seeds(), indirect=True, ids=lambda s: f"seed{s}")
def test_under_faults_no_pod_is_bound_twice_no_request_is_lost_and_no_reservation_leaks(
        apiserver: ApiServer, cluster: Cluster, namespace: str, partition: str, proxy: FaultProxy,
        scheduler: str, reserved: str, tmp_path: Path, record_property: Any) -> None:
    nodes = [f"n{i}-{partition}" for i in range(6)]
    for node in nodes:
        cluster.node(node, partition, gpus=8, pods=500)
    plan = _plan(random.Random(proxy.seed), nodes)
    before = _attempts()
    started = time.monotonic()
    # the lease at its real timings: renewals go through the faults too, and one replica needs no quick takeover
    settings = quick_settings(scheduler, reserved, namespace, workers=6, resync=5.0, lease=LeaseTimings(),
                              reservations=ReservationSettings(namespace=reserved, timeout=10.0))
    with FakeKubelet(cluster, reserved), \
            BinderInThread(proxy.kubeconfig(apiserver.kubeconfig, tmp_path / "kubeconfig"), settings,
                           request_timeout=(2.0, 1.0)):
        for name, node, groups in plan:
            pod = cluster.pod(namespace, name, partition, scheduler=scheduler, cpu="10m", memory="10Mi",
                              **({"annotations": {"gpu-fraction": "0.5"}} if groups else {"gpus": 1}))
            bind_request(cluster, namespace, pod, node, groups=groups, backoff_limit=5)
        final = wait_for("every BindRequest to settle", lambda: _all_settled(cluster, namespace, plan),
                         60 + REQUESTS)
        took = time.monotonic() - started
        proxy.quiet()
        # A write the API server was slow to apply may land late; the binder mends what it undoes.
        wait_for("the pods to agree with their requests", lambda: not _disagreements(final, _pods(cluster, namespace)), 20)
        pods = {p["metadata"]["name"]: p for p in _pods(cluster, namespace)}
        assert not _disagreements(final, list(pods.values()))
        _check_reservations_match(cluster, reserved, pods)
        for name, pod in pods.items():   # every job ends: the reservations must all go
            if pod["spec"].get("nodeName"):
                cluster.set_phase(namespace, name, "Succeeded")
        swept = _swept(cluster, reserved)
    bound_twice = [pod for pod, status in proxy.bindings if status == 409]
    figures = _figures(proxy, final, before, took) | {"bound_twice": len(bound_twice),
                                                       "leaked_reservations": len(swept)}
    record_property("figures", f"binder under faults, seed {proxy.seed}: {json.dumps(figures)}")
    assert not swept, f"reservations left after every pod finished: {swept}"
    assert not bound_twice, f"bindings sent for pods already bound: {bound_twice}"
    assert Counter(pod for pod, status in proxy.bindings if status < 300).most_common(1)[0][1] == 1
    assert sum(proxy.faults.values()) > REQUESTS / 10, "too few faults were injected to mean anything"


def _plan(rng: random.Random, nodes: list[str]) -> list[tuple[str, str, list[str] | None]]:
    """(pod, node, GPU groups): 55% whole-GPU pods, 40% pods sharing a GPU in pairs (both on the
    group's node), 5% sent to a node that does not exist."""
    plan: list[tuple[str, str, list[str] | None]] = []
    while len(plan) < REQUESTS:
        roll, node, i = rng.random(), rng.choice(nodes), len(plan)
        if roll < 0.05:
            plan.append((f"p{i}", "no-such-node", None))
        elif roll < 0.45:
            group = f"g{i}-{rng.getrandbits(32):08x}"
            plan += [(f"p{i}", node, [group]), (f"p{i + 1}", node, [group])]
        else:
            plan.append((f"p{i}", node, None))
    return plan[:REQUESTS]


def _all_settled(cluster: Cluster, namespace: str, plan: list[Any]) -> dict[str, dict[str, Any]] | None:
    listed = cluster.custom.list_namespaced_custom_object("scheduling.run.ai", "v1alpha2", namespace, "bindrequests")
    out = {r["metadata"]["name"]: r for r in listed["items"] if is_settled(r)}
    return out if len(out) == len(plan) else None


def _pods(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    return list(cluster.api.sanitize_for_serialization(cluster.core.list_namespaced_pod(namespace))["items"])


def _disagreements(final: dict[str, dict[str, Any]], listed: list[dict[str, Any]]) -> list[str]:
    """Where the cluster disagrees with a request's status (none, when all is well)."""
    pods = {p["metadata"]["name"]: p for p in listed}
    wrong = []
    for name, request in final.items():
        status, spec, pod = request["status"], request["spec"], pods[name]
        labels = pod["metadata"].get("labels") or {}
        bound = [c["status"] for c in pod["status"].get("conditions") or [] if c["type"] == "PodBound"]
        if status["phase"] == "Succeeded":
            if pod["spec"].get("nodeName") != spec["selectedNode"]:
                wrong.append(f"{name} succeeded but is bound to {pod['spec'].get('nodeName')}")
            if bound != ["True"]:
                wrong.append(f"{name} succeeded but its PodBound is {bound}")
            if labels.get("runai-gpu-group") != (spec.get("selectedGPUGroups") or [None])[0]:
                wrong.append(f"{name} succeeded but its GPU group label is {labels.get('runai-gpu-group')}")
        else:
            if not status.get("reason"):
                wrong.append(f"{name} failed without a reason")
            if pod["spec"].get("nodeName"):
                wrong.append(f"{name} is bound though its request failed")
            if "runai-gpu-group" in labels:
                wrong.append(f"{name} kept its GPU group though its request failed")
        if spec["selectedNode"] == "no-such-node" and "does not exist" not in str(status.get("reason")):
            wrong.append(f"{name} names no node, yet: {status}")
    return wrong


def _check_reservations_match(cluster: Cluster, reserved: str, pods: dict[str, dict[str, Any]]) -> None:
    """Each group a bound pod uses has exactly one reservation, on that pod's node (none other,
    once the sweep has run)."""
    used = {p["metadata"]["labels"]["runai-gpu-group"]: p["spec"]["nodeName"] for p in pods.values()
            if p["spec"].get("nodeName") and "runai-gpu-group" in (p["metadata"].get("labels") or {})}

    def matching() -> bool:
        held = Counter((r["metadata"]["labels"]["runai-gpu-group"], r["spec"]["nodeName"])
                       for r in reservations(cluster, reserved))
        return held == Counter(used.items())
    wait_for("one reservation per used group and none other", matching, 30)


def _swept(cluster: Cluster, reserved: str) -> list[str]:
    """The reservations still there once the sweep had 30 s to remove them (none, or the leak)."""
    try:
        wait_for("every reservation to be swept", lambda: not reservations(cluster, reserved), 30)
    except AssertionError:
        pass
    return [r["metadata"]["name"] for r in reservations(cluster, reserved)]


def _attempts() -> dict[str, float]:
    return {s.labels["result"]: s.value for m in metrics.BIND_ATTEMPTS.collect() for s in m.samples
            if s.name.endswith("_total")}


def _figures(proxy: FaultProxy, final: dict[str, dict[str, Any]], before: dict[str, float],
             took: float) -> dict[str, Any]:
    after = _attempts()
    attempts = {k: int(v - before.get(k, 0)) for k, v in after.items() if v - before.get(k, 0)}
    outcomes = Counter(r["status"]["phase"] for r in final.values())
    return {"requests": len(final), "seconds": round(took, 1), "faults": dict(proxy.faults),
            "api_requests": dict(proxy.requests), "bindings_sent": len(proxy.bindings),
            "attempts": attempts, "retries": sum(attempts.values()) - len(final),
            "outcomes": dict(outcomes), "lost": len(final) - sum(outcomes.values())}
