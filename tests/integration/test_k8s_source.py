"""The cluster source on a real API server: what is created through the API appears in the
snapshot with the model's values; BindRequests place pods; the watch survives an apiserver
restart and a 410; malformed objects are reported and left out."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from kaipolicy import metrics
from kaipolicy.api.resources import RequestType
from kaipolicy.api.task import Status
from kaipolicy.cache import kubeapi
from kaipolicy.cache.informer import Backoff
from kaipolicy.cache.k8s_source import K8sSource
from kaipolicy.cache.kubeapi import KubeApi
from tests.integration.apiserver import ApiServer
from tests.integration.cluster import Cluster
from tests.polling import wait_for


def _jobs(source: K8sSource) -> set[str]:
    return {j["name"] for j in source.scenario().doc["jobs"]}


def _task(source: K8sSource, name: str) -> Any:
    """The task of that name in a fresh snapshot; None while the informers have not shown its pod."""
    cluster = source.snapshot()
    return next((t for j in cluster.jobs.values() for t in j.tasks.values() if t.name == name), None)


def test_objects_created_through_the_api_appear_in_the_snapshot_with_the_model_values(
        source: K8sSource, cluster: Cluster, namespace: str, partition: str) -> None:
    p = partition
    cluster.node(f"gpu-{p}", p, gpus=8, cpu="64", memory="512Gi", labels={"nvidia.com/gpu.memory": "81559"})
    cluster.queue(f"dept-{p}", p)
    cluster.queue(f"team-{p}", p, parent=f"dept-{p}", gpu=(4, 6), weight=2)
    cluster.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": f"infer-{p}"},
                    "value": 125})
    cluster.pod_group(namespace, "gang", p, f"team-{p}", min_member=2, priorityClassName=f"infer-{p}")
    for i in range(2):
        cluster.pod(namespace, f"gang-{i}", p, group="gang", gpus=1)
    cluster.pod(namespace, "half", p, queue=f"team-{p}", annotations={"gpu-fraction": "0.5"})
    wait_for("both jobs", lambda: len(_jobs(source)) == 2)

    snap = source.snapshot()
    node = snap.nodes[f"gpu-{p}"]
    assert (node.allocatable.gpus, node.allocatable.cpu, node.gpu_memory) == (8, 64000, 81500)
    team = snap.queues[f"team-{p}"]
    assert (team.parent, team.deserved.gpu, team.limit.gpu, team.over_quota_weight.gpu) == (f"dept-{p}", 4, 6, 2)
    assert snap.queues[f"dept-{p}"].children == [f"team-{p}"]
    gang = snap.jobs[f"{namespace}/gang"]
    assert (gang.priority, gang.preemptible, gang.queue) == (125, False, f"team-{p}")
    assert [ps.min_available for ps in gang.pod_sets.values()] == [2]
    assert sorted(t.name for t in gang.tasks.values()) == [f"{namespace}/gang-0", f"{namespace}/gang-1"]
    half = snap.jobs[f"{namespace}/half"]
    (task,) = half.tasks.values()
    assert (task.request.kind, task.request.portion, task.status) == (RequestType.FRACTION, 0.5, Status.PENDING)
    assert (half.priority, half.preemptible) == (50, True)  # a bare pod: no class, the default 50


def test_a_pending_bind_request_places_its_pod_and_a_failed_one_frees_it(
        source: K8sSource, cluster: Cluster, namespace: str, partition: str) -> None:
    cluster.node(f"n-{partition}", partition, gpus=2)
    cluster.queue(f"q-{partition}", partition)
    cluster.pod(namespace, "p", partition, queue=f"q-{partition}", gpus=1)
    cluster.bind_request(namespace, "p", f"n-{partition}")
    task = wait_for("the pod to be Binding", lambda: (t := _task(source, f"{namespace}/p")) is not None
                    and t.status == Status.BINDING and t)
    assert task.node == f"n-{partition}"
    assert source.snapshot().nodes[f"n-{partition}"].idle.gpus == 1

    cluster.bind_request(namespace, "p", f"n-{partition}", phase="Failed")  # a newer request, failed for good
    for br in cluster.custom.list_namespaced_custom_object("scheduling.run.ai", "v1alpha2", namespace,
                                                           "bindrequests")["items"]:
        cluster.custom.patch_namespaced_custom_object_status("scheduling.run.ai", "v1alpha2", namespace,
                                                             "bindrequests", br["metadata"]["name"],
                                                             {"status": {"phase": "Failed"}})
    wait_for("the pod to be Pending again", lambda: getattr(_task(source, f"{namespace}/p"), "status", None)
             == Status.PENDING)


def test_pods_of_other_schedulers_hold_their_resources_and_are_not_scheduled(
        source: K8sSource, cluster: Cluster, namespace: str, partition: str) -> None:
    cluster.node(f"n-{partition}", partition, gpus=4)
    cluster.queue(f"q-{partition}", partition)
    cluster.pod(namespace, "theirs", partition, gpus=2, scheduler="default-scheduler", nodeName=f"n-{partition}")
    cluster.set_phase(namespace, "theirs", "Running")
    cluster.pod(namespace, "theirs-pending", partition, gpus=1, scheduler="default-scheduler")
    cluster.pod(namespace, "ours", partition, queue=f"q-{partition}", gpus=1)
    wait_for("our pod", lambda: _jobs(source) == {f"{namespace}/ours"})
    node = wait_for("the other pod's GPUs", lambda: (n := source.snapshot().nodes[f"n-{partition}"]).idle.gpus == 2
                    and n)
    assert node.other_pods is not None and node.other_pods.gpus == 2


def test_the_shard_sees_only_its_partition(source: K8sSource, cluster: Cluster, namespace: str,
                                           partition: str) -> None:
    cluster.node(f"mine-{partition}", partition)
    cluster.node(f"other-{partition}", "elsewhere")
    cluster.queue(f"q-{partition}", partition)
    cluster.pod(namespace, "mine", partition, queue=f"q-{partition}")
    cluster.pod(namespace, "other", "elsewhere", queue=f"q-{partition}")
    wait_for("my pod", lambda: _jobs(source) == {f"{namespace}/mine"})
    assert list(source.snapshot().nodes) == [f"mine-{partition}"]


def test_the_watch_resumes_after_an_apiserver_restart_with_nothing_lost_or_doubled(
        source: K8sSource, cluster: Cluster, apiserver: ApiServer, namespace: str, partition: str) -> None:
    cluster.queue(f"q-{partition}", partition)
    for i in range(3):
        cluster.pod(namespace, f"p{i}", partition, queue=f"q-{partition}")
    wait_for("three pods", lambda: len(_jobs(source)) == 3)
    apiserver.restart_apiserver()
    cluster.core.delete_namespaced_pod("p0", namespace, grace_period_seconds=0)
    cluster.pod(namespace, "p3", partition, queue=f"q-{partition}")
    want = {f"{namespace}/p{i}" for i in (1, 2, 3)}
    wait_for("the changes made after the restart", lambda: _jobs(source) == want, 60)
    names = [t["name"] for j in source.scenario().doc["jobs"] for t in j["tasks"]]
    assert sorted(names) == sorted(want)
    # the watch ended and was reopened: a server shutting down may close the stream cleanly or
    # break it (only then is an error counted), and the restarted one may answer the old version
    # with 410, in which case the informer listed again: either way nothing is lost or doubled
    pods = source.informers["Pod"]
    assert pods.watches >= 2


class StaleOnce:
    """The real API, except that the first watch of each kind resumes from a version long gone."""

    def __init__(self, api: KubeApi) -> None:
        self.api, self.host, self.stale = api, api.host, set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.api, name)

    def watch(self, kind: kubeapi.Kind, version: str, *args: Any, **kwargs: Any) -> Any:
        if kind.kind not in self.stale:
            self.stale.add(kind.kind)
            version = "1"
        return self.api.watch(kind, version, *args, **kwargs)


def test_a_410_makes_the_informer_list_again(cluster: Cluster, api: KubeApi, namespace: str,
                                             partition: str) -> None:
    cluster.shard(partition, partition)
    cluster.queue(f"q-{partition}", partition)
    cluster.pod(namespace, "before", partition, queue=f"q-{partition}")
    source = K8sSource(StaleOnce(api), shard_name=partition, backoff=lambda: Backoff(0.2, 1.0))  # type: ignore[arg-type]
    source.start(timeout=30)
    try:
        wait_for("a second list after the 410", lambda: source.informers["Pod"].lists >= 2)
        cluster.pod(namespace, "after", partition, queue=f"q-{partition}")
        wait_for("both pods", lambda: _jobs(source) == {f"{namespace}/before", f"{namespace}/after"})
    finally:
        source.stop()


def test_a_malformed_pod_annotation_is_reported_once_and_skipped(
        source: K8sSource, cluster: Cluster, namespace: str, partition: str, caplog: pytest.LogCaptureFixture) -> None:
    count = metrics.REGISTRY.get_sample_value("kaipolicy_malformed_objects_total", {"kind": "Pod"}) or 0.0
    cluster.queue(f"q-{partition}", partition)
    cluster.pod(namespace, "bad", partition, queue=f"q-{partition}", annotations={"gpu-fraction": "half"})
    cluster.pod(namespace, "good", partition, queue=f"q-{partition}", annotations={"gpu-fraction": "0.5"})
    with caplog.at_level(logging.WARNING, "kaipolicy.cache"):
        wait_for("the good pod", lambda: _jobs(source) == {f"{namespace}/good"})
        source.snapshot()
    message = f"Pod/{namespace}/bad: annotation gpu-fraction: 'half' is not a fraction in [0.01, 1]"
    assert [r.getMessage() for r in caplog.records if "left out" in r.getMessage()] == [
        f"left out of the snapshot: {message}"]
    assert metrics.REGISTRY.get_sample_value("kaipolicy_malformed_objects_total", {"kind": "Pod"}) == count + 1
    (event,) = wait_for("the Event", lambda: cluster.events_about(namespace, "bad"))
    assert event["reason"] == "NotSchedulable" and "gpu-fraction: 'half'" in event["message"]


def test_a_pod_group_naming_a_missing_queue_is_reported_and_left_out(
        source: K8sSource, cluster: Cluster, namespace: str, partition: str) -> None:
    cluster.pod_group(namespace, "lost", partition, "no-such-queue")
    cluster.pod(namespace, "lost-0", partition, group="lost")
    problems = wait_for("the problem", lambda: [str(p) for p in source.scenario().problems])
    assert problems == [f"PodGroup/{namespace}/lost: queue 'no-such-queue' does not exist"]
    assert not _jobs(source)


def test_the_shards_rule_configmaps_are_watched_and_edits_seen(cluster: Cluster, api: KubeApi, namespace: str,
                                                              partition: str) -> None:
    rules = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rules", "namespace": namespace},
             "data": {"mine.yaml": "plugin: mine\nrules: []\n"}}
    cluster.shard(partition, partition, ruleBundle={"configMaps": [{"namespace": namespace, "name": "rules"},
                                                                   {"namespace": namespace, "name": "missing"}]})
    cluster.core.create_namespaced_config_map(namespace, rules)
    source = K8sSource(api, shard_name=partition, backoff=lambda: Backoff(0.2, 1.0))
    source.start(timeout=30)
    try:
        assert source.shard() is not None
        bundle = wait_for("the rule ConfigMaps", lambda: (b := source.rule_bundle()) and b[(namespace, "rules")] and b)
        assert bundle == {(namespace, "missing"): None, (namespace, "rules"): {"mine.yaml": "plugin: mine\nrules: []\n"}}
        cluster.core.patch_namespaced_config_map("rules", namespace, {"data": {"mine.yaml": "plugin: mine2\n"}})
        wait_for("the edit", lambda: (source.rule_bundle() or {}).get((namespace, "rules")) == {
            "mine.yaml": "plugin: mine2\n"})
    finally:
        source.stop()


def test_without_a_rule_bundle_the_bundled_rules_apply(source: K8sSource) -> None:
    assert source.rule_bundle() is None
