"""`kaipolicy run` and `kaipolicy binder` as real processes against the real apiserver (issue 7,
item 5): a realistic mix of pods created through the API ends bound (`spec.nodeName`) to the nodes,
and sharing the GPU devices, that `kaipolicy simulate` chooses on the snapshot of the same state; a
gang of 8 ends all bound or none; fractional-GPU pods share a device through one reservation pod;
and the chart's own command lines and ServiceAccounts do all of it. The tests play the kubelet: the
reservation pods' device annotation, and phase Running for bound pods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.apiserver import ApiServer
from tests.integration.binder_env import GROUP, BinderProcess, FakeKubelet, reservations
from tests.integration.chart import install, service_account_kubeconfig
from tests.integration.cluster import Cluster
from tests.integration.scheduler import Scheduler, bind_requests
from tests.integration.workloads import realistic_mix, same_groups, simulated
from tests.polling import wait_for

Processes = list[Scheduler | BinderProcess]


@pytest.fixture
def names(cluster: Cluster, partition: str, scheduler: str, reserved: str) -> dict[str, str]:
    cluster.shard(partition, partition)
    return {"scheduler": scheduler, "reserved": reserved, "shard": partition}


@pytest.fixture
def processes() -> Iterator[Processes]:
    """What a test starts; each must stop cleanly (exit 0) on SIGTERM at the end."""
    started: Processes = []
    yield started
    codes = [p.stop() if isinstance(p, Scheduler) else p.terminate() for p in started]
    assert codes == [0] * len(started)


@pytest.fixture
def start_scheduler(apiserver: ApiServer, names: dict[str, str], namespace: str, tmp_path: Path,
                    processes: Processes) -> Callable[[], Scheduler]:
    """`kaipolicy run` for this test's shard and schedulerName, its Lease in the test's namespace."""
    def start() -> Scheduler:
        processes.append(Scheduler(apiserver.kubeconfig, tmp_path / "run.log", namespace,
                                   "--scheduler-name", names["scheduler"], "--shard", names["shard"]))
        return processes[-1]
    return start


@pytest.fixture
def binder(apiserver: ApiServer, names: dict[str, str], namespace: str, processes: Processes) -> BinderProcess:
    processes.append(BinderProcess(apiserver.kubeconfig, names["scheduler"], names["reserved"], namespace))
    return processes[-1]


def nodes_of(cluster: Cluster, namespace: str, pods: list[str], *alive: Scheduler | BinderProcess) -> dict[str, str]:
    """Each pod's node (None while unbound); fails at once, with its log, when a process died."""
    for process in alive:
        process.check_alive()
    listed = cluster.api.sanitize_for_serialization(cluster.core.list_namespaced_pod(namespace))["items"]
    found = {p["metadata"]["name"]: p for p in listed}
    return {pod: (found[pod].get("spec") or {}).get("nodeName") for pod in pods}


def gpu_groups(pod: dict[str, Any]) -> list[str]:
    """The GPU groups the binder labelled a pod with (`runai-gpu-group`, `runai-gpu-group/<g>`)."""
    labels = pod["metadata"].get("labels") or {}
    return sorted(v for k, v in labels.items() if k == "runai-gpu-group" or k.startswith("runai-gpu-group/"))


def test_a_realistic_mix_ends_bound_where_and_as_simulate_places_it_on_the_snapshot(
        apiserver: ApiServer, cluster: Cluster, namespace: str, names: dict[str, str], binder: BinderProcess,
        start_scheduler: Callable[[], Scheduler], tmp_path: Path) -> None:
    ns, p = namespace, names["shard"]
    pods = realistic_mix(cluster, ns, p, names["scheduler"])
    # Three cycles: a pod the first cycle pipelines (consolidation may move a pod it has just
    # allocated, to make room for a later one) is bound by the next; a third changes nothing.
    expected = simulated(apiserver.kubeconfig, p, names["scheduler"], tmp_path, cycles=3)
    placed = {pod: t["node"] for pod, t in expected.items() if t["status"] in ("Binding", "Running")}
    assert 0 < len(placed) < len(pods) and {f"train-{i}" for i in range(4)} <= set(placed)
    with FakeKubelet(cluster, names["reserved"], runs=ns):
        scheduler = start_scheduler()
        wait_for("every placed pod bound", lambda: all(
            nodes_of(cluster, ns, list(placed), scheduler, binder).values()), 60)
        wait_for("the gang running, as the scheduler sees it", lambda: (cluster.custom.get_namespaced_custom_object(
            GROUP, "v2alpha2", ns, "podgroups", "train").get("status") or {}).get("phase") == "Running", 30)
        scheduler.wait_cycles(3)       # later cycles, on a cluster with pods running, change nothing
        final = nodes_of(cluster, ns, pods, scheduler, binder)
    assert final == {pod: placed.get(pod) for pod in pods}
    live = {p["metadata"]["name"]: p for p in cluster.api.sanitize_for_serialization(
        cluster.core.list_namespaced_pod(ns))["items"]}
    labelled = {pod: gpu_groups(live[pod]) for pod in placed}
    assert same_groups({pod: expected[pod].get("gpuGroups") or [] for pod in placed}, labelled)
    # one reservation pod per shared GPU group, on that group's node
    held = {r["metadata"]["labels"]["runai-gpu-group"]: r["spec"]["nodeName"] for r in reservations(
        cluster, names["reserved"])}
    assert held == {g: placed[pod] for pod, groups in labelled.items() for g in groups}
    requests = bind_requests(cluster, ns)
    assert {pod: (br.get("status") or {}).get("phase") for pod, br in requests.items()} == {
        pod: "Succeeded" for pod in placed}
    assert all(any(c["type"] == "PodBound" and c["status"] == "True" for c in live[pod]["status"]["conditions"])
               for pod in placed)


def test_a_gang_of_8_ends_all_bound_or_none(
        cluster: Cluster, namespace: str, names: dict[str, str], binder: BinderProcess,
        start_scheduler: Callable[[], Scheduler]) -> None:
    ns, p = namespace, names["shard"]
    for i in range(2):
        cluster.node(f"n{i}-{p}", p, gpus=4)
    cluster.queue(f"q-{p}", p)
    cluster.pod_group(ns, "gang", p, f"q-{p}", min_member=8)
    first = [f"g{i}" for i in range(8)]
    for pod in first:
        cluster.pod(ns, pod, p, group="gang", gpus=1, scheduler=names["scheduler"])
    scheduler = start_scheduler()
    wait_for("the gang bound", lambda: all(nodes_of(cluster, ns, first, scheduler, binder).values()), 60)
    cluster.pod_group(ns, "too-big", p, f"q-{p}", min_member=8)
    second = [f"t{i}" for i in range(8)]
    for pod in second:
        cluster.pod(ns, pod, p, group="too-big", gpus=1, scheduler=names["scheduler"])
    # the scheduler has looked at it and said why it waits: no room left for 8 more GPUs
    wait_for("the second gang's scheduling condition", lambda: (cluster.custom.get_namespaced_custom_object(
        GROUP, "v2alpha2", ns, "podgroups", "too-big").get("status") or {}).get("schedulingConditions"), 30)
    scheduler.wait_cycles(3)
    assert nodes_of(cluster, ns, second, scheduler, binder) == dict.fromkeys(second)
    assert set(bind_requests(cluster, ns)) == set(first)


def test_fractional_pods_share_a_device_through_one_reservation(
        cluster: Cluster, namespace: str, names: dict[str, str], binder: BinderProcess,
        start_scheduler: Callable[[], Scheduler]) -> None:
    ns, p = namespace, names["shard"]
    cluster.node(f"n-{p}", p, gpus=1)
    cluster.queue(f"q-{p}", p)
    halves = [f"f{i}" for i in range(2)]
    with FakeKubelet(cluster, names["reserved"], runs=ns):
        for pod in halves:
            cluster.pod(ns, pod, p, queue=f"q-{p}", scheduler=names["scheduler"], annotations={"gpu-fraction": "0.5"})
        scheduler = start_scheduler()
        wait_for("both halves bound", lambda: all(nodes_of(cluster, ns, halves, scheduler, binder).values()), 60)
    (reservation,) = reservations(cluster, names["reserved"])
    groups = {cluster.core.read_namespaced_pod(pod, ns).metadata.labels["runai-gpu-group"] for pod in halves}
    assert groups == {reservation["metadata"]["labels"]["runai-gpu-group"]}


def test_a_share_of_two_devices_holds_both_once_bound_and_a_whole_gpu_waits(
        apiserver: ApiServer, cluster: Cluster, namespace: str, names: dict[str, str], binder: BinderProcess,
        start_scheduler: Callable[[], Scheduler], tmp_path: Path) -> None:
    # The binder labels a share of several devices `runai-gpu-group/<g>` only (as KAI's does): the
    # scheduler once read no group from that, saw both devices free and put a whole-GPU pod there.
    ns, p = namespace, names["shard"]
    cluster.node(f"n-{p}", p, gpus=2)
    cluster.queue(f"q-{p}", p)
    with FakeKubelet(cluster, names["reserved"], runs=ns):
        cluster.pod(ns, "two", p, queue=f"q-{p}", scheduler=names["scheduler"],
                    annotations={"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"})
        scheduler = start_scheduler()
        wait_for("the share bound", lambda: nodes_of(cluster, ns, ["two"], scheduler, binder)["two"], 60)
        for pod, request in (("whole", {"gpus": 1}), ("half", {"annotations": {"gpu-fraction": "0.5"}})):
            cluster.pod(ns, pod, p, queue=f"q-{p}", scheduler=names["scheduler"], **request)
        wait_for("the half bound", lambda: nodes_of(cluster, ns, ["half"], scheduler, binder)["half"], 60)
        scheduler.wait_cycles(3)
        assert nodes_of(cluster, ns, ["whole"], scheduler, binder) == {"whole": None}
    live = {pod: cluster.api.sanitize_for_serialization(cluster.core.read_namespaced_pod(pod, ns))
            for pod in ("two", "half")}
    (half_group,) = gpu_groups(live["half"])
    assert len(gpu_groups(live["two"])) == 2 and half_group in gpu_groups(live["two"])
    assert len(reservations(cluster, names["reserved"])) == 2
    after = simulated(apiserver.kubeconfig, p, names["scheduler"], tmp_path)   # the snapshot reads the share too
    assert (after["two"]["status"], len(after["two"]["gpuGroups"]), after["whole"]["status"]) == (
        "Running", 2, "Pending")


def test_the_charts_processes_schedule_and_bind_with_its_command_lines_and_service_accounts(
        apiserver: ApiServer, cluster: Cluster, namespace: str, partition: str, scheduler: str, reserved: str,
        processes: Processes, tmp_path: Path) -> None:
    """RBAC checked by use: every call either process makes is allowed, or the run says so."""
    ns, p = namespace, partition
    chart = install(cluster, ns, f"schedulerName={scheduler}", f"defaultShard.name=shard-{p}",
                    f"defaultShard.partitionLabelValue={p}", f"resourceReservation.namespace={reserved}",
                    "defaultQueues.create=false", "priorityClasses.create=false")
    kubeconfig = {c: service_account_kubeconfig(apiserver, cluster, ns, chart.service_account(c), tmp_path / c)
                  for c in ("scheduler", "binder")}
    here = "--metrics-address=127.0.0.1:0"    # after the chart's own :8080, which it overrides
    run = Scheduler(kubeconfig["scheduler"], tmp_path / "run.log", ns, *chart.args("scheduler")[1:], here)
    bind = BinderProcess(kubeconfig["binder"], scheduler, reserved, ns, *chart.args("binder")[1:], here)
    processes += [run, bind]
    cluster.node(f"n-{p}", p, gpus=2)
    cluster.queue(f"q-{p}", p)
    cluster.pod_group(ns, "pair", p, f"q-{p}", min_member=2)
    pods = ["pair-0", "pair-1", "half"]
    with FakeKubelet(cluster, reserved, runs=ns):
        for pod in pods[:2]:
            cluster.pod(ns, pod, p, group="pair", gpus=1 if pod == "pair-0" else 0, scheduler=scheduler,
                        annotations={} if pod == "pair-0" else {"gpu-fraction": "0.5"})
        cluster.pod(ns, "half", p, queue=f"q-{p}", scheduler=scheduler, annotations={"gpu-fraction": "0.5"})
        cluster.pod(ns, "too-big", p, queue=f"q-{p}", scheduler=scheduler, gpus=4)
        wait_for("the pods bound", lambda: all(nodes_of(cluster, ns, pods, run, bind).values()), 60)
        # the pending pod's condition: a pods/status write of the scheduler's
        wait_for("the pending pod's PodScheduled condition", lambda: any(
            c.type == "PodScheduled" and c.reason == "Unschedulable"
            for c in cluster.core.read_namespaced_pod("too-big", ns).status.conditions or []), 30)
        run.wait_cycles(3)
    assert run.get("/readyz") == (200, "ok\n") and bind.get("/readyz") == (200, "ok\n")
    assert run.sample("kaipolicy_leader") == 1 and run.sample("kaipolicy_bundle_reloads_total", result="success") == 1
    refused = [line for line in run.lines() + bind.lines
               if line.get("level") in ("warning", "error") and "403" in str(line.get("message"))]
    assert not refused, refused
    assert not [k for k in run.metrics() if k[0] == "kaipolicy_api_errors_total"]
