"""`kaipolicy run` replicas on a real API server: one leader schedules; when it is killed another
takes over within the lease duration, and a clean stop hands the Lease over at once. The watch
is cut by an apiserver restart and resumed, with nothing lost or written twice."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

from kubernetes import client

from tests.integration.apiserver import ApiServer
from tests.integration.cluster import Cluster
from tests.integration.scheduler import Scheduler, bind_requests, nodes_of
from tests.polling import wait_for

LEASE_SECONDS = 2.0     # tests.integration.scheduler.FAST


def _leader(schedulers: list[Scheduler]) -> Scheduler | None:
    leading = [s for s in schedulers if s.sample("kaipolicy_leader") == 1]
    assert len(leading) <= 1, "two replicas lead at once"
    return leading[0] if leading else None


def _lease(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    lease = client.CoordinationV1Api(cluster.api).read_namespaced_lease(name, namespace)
    return dict(cluster.api.sanitize_for_serialization(lease)["spec"])


def _identity(scheduler: Scheduler) -> str:
    return str(next(e["identity"] for e in scheduler.lines() if "identity" in e))


def test_one_replica_leads_another_takes_over_when_it_is_killed_and_a_clean_stop_hands_over(
        cluster: Cluster, apiserver: ApiServer, namespace: str, partition: str, tmp_path: Path) -> None:
    ns, p = namespace, partition
    cluster.one_node_shard(p, gpus=8)
    replicas = [Scheduler(apiserver.kubeconfig, tmp_path / f"{r}.log", ns, "--shard", p) for r in "ab"]
    try:
        first = wait_for("a leader", lambda: _leader(replicas))
        follower = next(s for s in replicas if s is not first)
        assert _lease(cluster, ns, f"kai-scheduler-{p}")["holderIdentity"] == _identity(first)
        cluster.pod(ns, "one", p, queue=f"q-{p}", gpus=1)
        wait_for("the first pod placed", lambda: nodes_of(cluster, ns).get("one"))
        assert follower.cycles() == 0 and follower.cycles("standby") > 0

        first.stop(signal.SIGKILL)
        killed = time.monotonic()
        cluster.pod(ns, "two", p, queue=f"q-{p}", gpus=1)
        wait_for("the second pod placed", lambda: nodes_of(cluster, ns).get("two"), 20)
        assert time.monotonic() - killed < LEASE_SECONDS + 3.0
        assert _leader([follower]) is follower

        third = Scheduler(apiserver.kubeconfig, tmp_path / "c.log", ns, "--shard", p)
        replicas.append(third)
        wait_for("the third replica standing by", lambda: third.cycles("standby") > 0)
        assert follower.stop() == 0
        stopped = time.monotonic()
        # released (holder cleared), or already taken by the third replica
        assert _lease(cluster, ns, f"kai-scheduler-{p}")["holderIdentity"] in ("", _identity(third))
        wait_for("the third replica to lead", lambda: _leader([third]))
        assert time.monotonic() - stopped < LEASE_SECONDS   # handed over, not waited out
        cluster.pod(ns, "three", p, queue=f"q-{p}", gpus=1)
        wait_for("the third pod placed", lambda: nodes_of(cluster, ns).get("three"))
    finally:
        for s in replicas:
            s.stop()
    requests = bind_requests(cluster, ns)
    assert sorted(requests) == ["one", "three", "two"]
    assert "released lease" in " ".join(follower.messages())


def test_the_watch_is_cut_and_resumed_by_an_apiserver_restart_with_nothing_lost_or_doubled(
        cluster: Cluster, apiserver: ApiServer, namespace: str, partition: str, tmp_path: Path) -> None:
    ns, p = namespace, partition
    cluster.one_node_shard(p, gpus=8)
    for i in range(3):
        cluster.pod(ns, f"before-{i}", p, queue=f"q-{p}", gpus=1)
    scheduler = Scheduler(apiserver.kubeconfig, tmp_path / "run.log", ns, "--shard", p)
    try:
        wait_for("the first pods placed", lambda: len(nodes_of(cluster, ns)) == 3)
        uids = {pod: br["metadata"]["uid"] for pod, br in bind_requests(cluster, ns).items()}
        apiserver.restart_apiserver()
        for i in range(2):
            cluster.pod(ns, f"after-{i}", p, queue=f"q-{p}", gpus=1)
        wait_for("the pods created after the restart placed", lambda: len(nodes_of(cluster, ns)) == 5, 60)
        scheduler.wait_cycles(5, 60)
        requests = bind_requests(cluster, ns)
        assert sorted(requests) == sorted([f"before-{i}" for i in range(3)] + [f"after-{i}" for i in range(2)])
        assert {pod: requests[pod]["metadata"]["uid"] for pod in uids} == uids     # none written again
        assert sum(int(br["spec"]["receivedGPU"]["count"]) for br in requests.values()) == 5
        scheduled = [e for pod in requests for e in cluster.events_about(ns, pod) if e["reason"] == "Scheduled"]
        assert len(scheduled) == 5
    finally:
        assert scheduler.stop() == 0
