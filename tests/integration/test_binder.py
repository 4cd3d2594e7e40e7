"""The binder against a real apiserver: BindRequests in the reference scheduler's shape become
bound pods with their status, condition and Event; GPU-sharing requests get one reservation pod per
group (the test plays the kubelet); failures are undone and retried up to the limit; a pod or a
node deleted mid-bind ends the request Failed with that reason; unused reservations are swept."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from kaipolicy.binder.settings import ReservationSettings
from tests.integration.apiserver import ApiServer
from tests.integration.binder_env import (
    BinderInThread,
    FakeKubelet,
    bind_request,
    quick_settings,
    request_of,
    reservations,
    wait_settled,
)
from tests.integration.cluster import Cluster
from tests.polling import wait_for


@pytest.fixture
def kubelet(cluster: Cluster, reserved: str) -> Iterator[FakeKubelet]:
    with FakeKubelet(cluster, reserved) as k:
        yield k


def binder(apiserver: ApiServer, scheduler: str, reserved: str, namespace: str, **changes: Any) -> BinderInThread:
    return BinderInThread(apiserver.kubeconfig, quick_settings(scheduler, reserved, namespace, **changes))


def pod_of(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    return dict(cluster.api.sanitize_for_serialization(cluster.core.read_namespaced_pod(name, namespace)))


def condition(pod: dict[str, Any]) -> tuple[str, str] | None:
    found = [c for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] == "PodBound"]
    return (found[0]["status"], found[0]["reason"]) if found else None


def test_a_bind_request_binds_its_pod_and_says_so_in_status_condition_and_event(
        apiserver: ApiServer, cluster: Cluster, namespace: str, partition: str, scheduler: str, reserved: str) -> None:
    node = f"n-{partition}"
    cluster.node(node, partition, gpus=2)
    pod = cluster.pod(namespace, "p", partition, scheduler=scheduler, gpus=1)
    with binder(apiserver, scheduler, reserved, namespace):
        name = bind_request(cluster, namespace, pod, node)
        request = wait_settled(cluster, namespace, name)
    assert request["status"]["phase"] == "Succeeded"
    got = pod_of(cluster, namespace, "p")
    assert got["spec"]["nodeName"] == node
    assert got["metadata"]["annotations"]["received-resource-type"] == "Regular"
    assert condition(got) == ("True", "Bound")
    assert [e["reason"] for e in cluster.events_about(namespace, "p")] == ["Bound"]


def test_pods_sharing_a_gpu_get_one_reservation_that_outlives_them_only_while_one_is_bound(
        apiserver: ApiServer, cluster: Cluster, namespace: str, partition: str, scheduler: str, reserved: str,
        kubelet: FakeKubelet) -> None:
    node = f"n-{partition}"
    cluster.node(node, partition, gpus=1)
    shared = ["0c1a5f2e-group-a"]
    pods = [cluster.pod(namespace, f"s{i}", partition, scheduler=scheduler, annotations={"gpu-fraction": "0.5"})
            for i in range(2)]
    with binder(apiserver, scheduler, reserved, namespace):
        names = [bind_request(cluster, namespace, p, node, groups=shared) for p in pods]
        assert [wait_settled(cluster, namespace, n)["status"]["phase"] for n in names] == ["Succeeded"] * 2
        (reservation,) = reservations(cluster, reserved)
        assert reservation["spec"]["nodeName"] == node
        assert reservation["metadata"]["labels"] == {"app": "kai-resource-reservation", "runai-gpu-group": shared[0]}
        assert reservation["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
        for i in range(2):
            got = pod_of(cluster, namespace, f"s{i}")
            assert (got["spec"]["nodeName"], got["metadata"]["labels"]["runai-gpu-group"]) == (node, shared[0])
            assert got["metadata"]["annotations"]["received-resource-type"] == "Fraction"
        cluster.set_phase(namespace, "s0", "Succeeded")
        time.sleep(3.5)   # the sweep runs every second: three must keep the reservation of a group in use
        assert len(reservations(cluster, reserved)) == 1
        cluster.set_phase(namespace, "s1", "Succeeded")
        wait_for("the unused reservation to go", lambda: not reservations(cluster, reserved), 10)


def test_a_failed_attempt_is_undone_and_retried_with_backoff_until_the_limit(
        apiserver: ApiServer, cluster: Cluster, namespace: str, partition: str, scheduler: str, reserved: str,
        kubelet: FakeKubelet) -> None:
    node = f"n-{partition}"
    cluster.node(node, partition, gpus=1)
    pod = cluster.pod(namespace, "never", partition, scheduler=scheduler, annotations={"gpu-fraction": "0.5"})
    kubelet.hold("held-group")   # its reservation never reports a device
    with binder(apiserver, scheduler, reserved, namespace,
                reservations=ReservationSettings(namespace=reserved, timeout=0.5)):
        name = bind_request(cluster, namespace, pod, node, groups=["held-group"], backoff_limit=3)
        request = wait_settled(cluster, namespace, name)
        wait_for("the reservation to be undone", lambda: not reservations(cluster, reserved), 10)
    status = request["status"]
    assert (status["phase"], status["failedAttempts"]) == ("Failed", 3)
    assert "reported no device within 0.5s" in status["reason"] and "attempt 3 of 3; giving up" in status["reason"]
    got = pod_of(cluster, namespace, "never")
    assert not got["spec"].get("nodeName")
    assert "runai-gpu-group" not in (got["metadata"].get("labels") or {})
    assert "received-resource-type" not in (got["metadata"].get("annotations") or {})
    assert condition(got) == ("False", "BindingError")


def test_a_retry_that_succeeds_keeps_the_count_of_failed_attempts(
        apiserver: ApiServer, cluster: Cluster, namespace: str, partition: str, scheduler: str, reserved: str,
        kubelet: FakeKubelet) -> None:
    node = f"n-{partition}"
    cluster.node(node, partition, gpus=1)
    pod = cluster.pod(namespace, "later", partition, scheduler=scheduler, annotations={"gpu-fraction": "0.5"})
    kubelet.hold("late-group")
    # the retry comes 5 s after the first failure: the hold is released well before it, even on
    # a loaded machine (with 1 s, a slow poll let the second attempt time out too, 2 failures)
    with binder(apiserver, scheduler, reserved, namespace, retry_base=5.0, retry_limit=5.0,
                reservations=ReservationSettings(namespace=reserved, timeout=0.5)):
        name = bind_request(cluster, namespace, pod, node, groups=["late-group"], backoff_limit=5)
        wait_for("the first failure", lambda: (request_of(cluster, namespace, name).get("status") or {})
                 .get("failedAttempts") == 1, 10)
        kubelet.release("late-group")
        request = wait_settled(cluster, namespace, name)
    assert (request["status"]["phase"], request["status"]["failedAttempts"]) == ("Succeeded", 1)
    assert "reason" not in request["status"]


@pytest.mark.parametrize("bound_to, phase, reason", [
    ("asked", "Succeeded", None),
    ("other", "Failed", "is already bound to node"),
])
def test_a_pod_bound_before_the_binder_looks_is_never_bound_again(
        apiserver: ApiServer, cluster: Cluster, namespace: str, partition: str, scheduler: str, reserved: str,
        bound_to: str, phase: str, reason: str | None) -> None:
    nodes = [f"a-{partition}", f"b-{partition}"]
    for n in nodes:
        cluster.node(n, partition)
    pod = cluster.pod(namespace, "early", partition, scheduler=scheduler)
    cluster.core.create_namespaced_pod_binding(
        "early", namespace, {"metadata": {"name": "early"}, "target": {"kind": "Node", "name":
                                                                       nodes[0] if bound_to == "asked" else nodes[1]}},
        _preload_content=False)
    with binder(apiserver, scheduler, reserved, namespace):
        name = bind_request(cluster, namespace, pod, nodes[0])
        request = wait_settled(cluster, namespace, name)
    assert request["status"]["phase"] == phase
    if reason:
        assert reason in request["status"]["reason"] and "(not retried)" in request["status"]["reason"]


@pytest.mark.parametrize("missing, reason", [
    ("pod", "no longer exists"),
    ("node", "does not exist"),
])
def test_a_request_for_a_missing_pod_or_node_fails_at_once_and_is_not_retried(
        apiserver: ApiServer, cluster: Cluster, namespace: str, partition: str, scheduler: str, reserved: str,
        missing: str, reason: str) -> None:
    node = f"n-{partition}"
    if missing != "node":
        cluster.node(node, partition)
    pod = cluster.pod(namespace, "lost", partition, scheduler=scheduler)
    if missing == "pod":
        cluster.core.delete_namespaced_pod("lost", namespace, grace_period_seconds=0)
    with binder(apiserver, scheduler, reserved, namespace):
        name = bind_request(cluster, namespace, pod, node, backoff_limit=4)
        request = wait_settled(cluster, namespace, name)
    assert request["status"]["phase"] == "Failed" and request["status"]["failedAttempts"] == 4
    assert reason in request["status"]["reason"]


@pytest.mark.parametrize("deleted", ["pod", "node"])
def test_a_pod_or_node_deleted_mid_bind_ends_the_request_failed_with_that_reason_and_nothing_left(
        apiserver: ApiServer, cluster: Cluster, namespace: str, partition: str, scheduler: str, reserved: str,
        kubelet: FakeKubelet, deleted: str) -> None:
    node = f"n-{partition}"
    cluster.node(node, partition, gpus=1)
    pod = cluster.pod(namespace, "mid", partition, scheduler=scheduler, annotations={"gpu-fraction": "0.5"})
    kubelet.hold("mid-group")
    with binder(apiserver, scheduler, reserved, namespace):
        name = bind_request(cluster, namespace, pod, node, groups=["mid-group"], backoff_limit=3)
        wait_for("the reservation pod", lambda: reservations(cluster, reserved), 10)
        if deleted == "pod":
            cluster.core.delete_namespaced_pod("mid", namespace, grace_period_seconds=0)
        else:
            cluster.core.delete_node(node)
        kubelet.release("mid-group")
        request = wait_settled(cluster, namespace, name)
        wait_for("the reservation to be undone", lambda: not reservations(cluster, reserved), 10)
    status = request["status"]
    assert status["phase"] == "Failed" and "(not retried)" in status["reason"]
    assert (f"pod {namespace}/mid was deleted" if deleted == "pod" else f"node {node} was deleted") in status["reason"]
    if deleted == "node":
        got = pod_of(cluster, namespace, "mid")
        assert not got["spec"].get("nodeName") and "runai-gpu-group" not in (got["metadata"].get("labels") or {})


def test_a_new_request_for_a_pod_whose_old_one_failed_for_good_is_carried_out(
        apiserver: ApiServer, cluster: Cluster, namespace: str, partition: str, scheduler: str, reserved: str) -> None:
    node = f"n-{partition}"
    cluster.node(node, partition)
    pod = cluster.pod(namespace, "again", partition, scheduler=scheduler)
    with binder(apiserver, scheduler, reserved, namespace):
        old = bind_request(cluster, namespace, pod, "gone-node", name="again-1", backoff_limit=1)
        assert "does not exist" in wait_settled(cluster, namespace, old)["status"]["reason"]
        new = bind_request(cluster, namespace, pod, node, name="again-2", backoff_limit=1)
        assert wait_settled(cluster, namespace, new)["status"]["phase"] == "Succeeded"
    assert pod_of(cluster, namespace, "again")["spec"]["nodeName"] == node
    assert request_of(cluster, namespace, old)["status"]["phase"] == "Failed"
