"""`kaipolicy binder` as real processes: one of two replicas leads and binds, `/metrics` and
`/healthz` answer, SIGTERM ends the leader cleanly (exit 0, lease released) and the other takes
over at once; SIGTERM in the middle of a GPU-sharing binding undoes it and leaves the request to
the next leader, which finishes it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.apiserver import ApiServer
from tests.integration.binder_env import (
    BinderProcess,
    FakeKubelet,
    bind_request,
    request_of,
    reservations,
    wait_settled,
)
from tests.integration.cluster import Cluster
from tests.polling import wait_for


@pytest.fixture
def names(scheduler: str, reserved: str) -> tuple[str, str]:
    return scheduler, reserved


@pytest.fixture
def replicas(apiserver: ApiServer, namespace: str, names: tuple[str, str]) -> Iterator[list[BinderProcess]]:
    started = [BinderProcess(apiserver.kubeconfig, *names, namespace) for _ in range(2)]
    yield started
    for p in started:
        p.kill()


def leader(replicas: list[BinderProcess]) -> BinderProcess:
    return wait_for("a leader", lambda: next((p for p in replicas if p.logged("leading:")), None), 30)


def samples(text: str, name: str) -> dict[str, float]:
    return {s.labels.get("result", ""): s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name == name}


def test_one_replica_leads_binds_and_reports_and_the_other_takes_over_after_sigterm(
        replicas: list[BinderProcess], cluster: Cluster, namespace: str, partition: str,
        names: tuple[str, str]) -> None:
    node = f"n-{partition}"
    cluster.node(node, partition)
    first = leader(replicas)
    other = next(p for p in replicas if p is not first)
    pod = cluster.pod(namespace, "one", partition, scheduler=names[0])
    assert wait_settled(cluster, namespace, bind_request(cluster, namespace, pod, node))["status"]["phase"] == "Succeeded"
    assert first.get("/healthz") == (200, "ok\n") and first.get("/readyz") == (200, "ok\n")
    _, text = first.get("/metrics")
    assert samples(text, "kaipolicy_binder_bind_attempts_total") == {"succeeded": 1.0}
    assert samples(text, "kaipolicy_binder_leader") == {"": 1.0}
    assert not other.logged("leading:")
    assert first.terminate() == 0
    assert first.logged("released Lease/")
    wait_for("the other replica to lead", lambda: other.logged("leading:"), 5)   # well within the 3s lease
    pod = cluster.pod(namespace, "two", partition, scheduler=names[0])
    assert wait_settled(cluster, namespace, bind_request(cluster, namespace, pod, node))["status"]["phase"] == "Succeeded"


def test_sigterm_in_the_middle_of_a_binding_undoes_it_and_the_next_leader_finishes_it(
        apiserver: ApiServer, replicas: list[BinderProcess], cluster: Cluster, namespace: str, partition: str,
        names: tuple[str, str]) -> None:
    scheduler, reserved = names
    node = f"n-{partition}"
    cluster.node(node, partition, gpus=1)
    first = leader(replicas)
    standby = next(p for p in replicas if p is not first)
    wait_for("the stand-by to watch", lambda: standby.logged("watching BindRequests"), 30)
    assert standby.terminate() == 0   # the stand-by goes first: the next leader comes later
    with FakeKubelet(cluster, reserved) as kubelet:
        kubelet.hold("g-term")
        pod = cluster.pod(namespace, "shared", partition, scheduler=scheduler, annotations={"gpu-fraction": "0.5"})
        name = bind_request(cluster, namespace, pod, node, groups=["g-term"])
        wait_for("the reservation pod", lambda: reservations(cluster, reserved), 10)
        assert first.terminate() == 0
        status = request_of(cluster, namespace, name).get("status") or {}
        assert status.get("failedAttempts", 0) == 0 and status.get("phase") != "Succeeded"
        got = cluster.core.read_namespaced_pod("shared", namespace)
        assert not got.spec.node_name and "runai-gpu-group" not in (got.metadata.labels or {})
        assert not reservations(cluster, reserved)
        kubelet.release("g-term")
        replicas.append(BinderProcess(apiserver.kubeconfig, scheduler, reserved, namespace))
        request = wait_settled(cluster, namespace, name)
    assert (request["status"]["phase"], request["status"].get("failedAttempts", 0)) == ("Succeeded", 0)
