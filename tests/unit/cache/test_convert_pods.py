"""Pods and pod groups as the scheduler reads them, from objects recorded off a real API server:
requests as kube-scheduler counts them, GPU sharing from the reference's annotations, node and pod
constraints kept; a bad annotation or quantity is refused naming the pod."""

from __future__ import annotations

from typing import Any

import pytest

from kaipolicy.cache import convert_pods
from tests.unit.cache.recorded import recorded, refusal


def test_a_gang_member_gives_its_request_group_and_constraints() -> None:
    view = convert_pods.pod(recorded("pods", "train-gang-0"))
    assert (view.group, view.queue, view.scheduler, view.phase, view.node) == (
        "train-gang", "research", "kai-scheduler", "Pending", "")
    task = view.task
    # containers summed (8 + 0.5 CPUs), raised to the largest init container where it is bigger
    assert task["resources"] == {"cpuMillis": 8500, "memoryBytes": 64 * 2**30 + 256 * 2**20, "gpus": 2}
    assert task["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert task["requiredNodeAffinity"] == [
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1", "z2"]}]}]
    assert task["tolerations"][0] == {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert task["podAffinity"] == {"labels": {"app": "train"}, "antiTopologyKey": "kubernetes.io/hostname"}
    assert task["labels"]["training.kubeflow.org/job-role"] == "master"


def test_nothing_but_what_scheduling_reads_is_kept() -> None:
    view = convert_pods.pod(recorded("pods", "train-gang-0"))
    text = repr(view.task)
    assert "token-abc" not in text and "TOKEN" not in text and "last-applied" not in text


def test_a_running_fractional_pod_keeps_its_gpu_group_and_node() -> None:
    view = convert_pods.pod(recorded("pods", "notebook"))
    assert (view.phase, view.node, view.group) == ("Running", "gpu-node-1", "")
    assert view.task["resources"] == {"cpuMillis": 2000, "memoryBytes": 4 * 2**30, "gpus": 0.25, "gpuDevices": 1}
    assert view.task["gpuGroups"] == ["1f0c2a"]
    assert "runai-gpu-group" not in view.task["labels"]
    assert view.usage == {"cpuMillis": 2000, "memoryBytes": 4 * 2**30, "gpus": 0.25}


def test_a_gated_gpu_memory_pod_over_two_devices() -> None:
    view = convert_pods.pod(recorded("pods", "mem-pod"))
    assert view.gated
    assert view.task["resources"] == {"cpuMillis": 0, "memoryBytes": 0, "gpuMemoryMiB": 20000, "gpuDevices": 2}


def test_a_resource_given_only_as_a_limit_is_requested_at_the_limit_and_overhead_adds() -> None:
    obj = recorded("pods", "mem-pod")
    obj["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "1"}}
    obj["spec"]["overhead"] = {"cpu": "250m"}
    assert convert_pods.pod(obj).task["resources"]["cpuMillis"] == 1250
    assert convert_pods.pod(obj).task["resources"]["memoryBytes"] == 2**30


def test_legacy_mig_annotations_ask_for_mig_slices() -> None:
    obj = recorded("pods", "mem-pod")
    obj["metadata"]["annotations"] = {"nvidia.com/mig-1g.10gb": "2"}
    resources = convert_pods.pod(obj).task["resources"]
    assert (resources["mig"], resources["legacyMig"]) == ({"nvidia.com/mig-1g.10gb": 2}, True)


def _annotated(**annotations: str) -> dict[str, Any]:
    obj = recorded("pods", "mem-pod")
    obj["metadata"]["annotations"] = annotations
    return obj


@pytest.mark.parametrize(("obj", "problem"), [
    (_annotated(**{"gpu-fraction": "half"}), "annotation gpu-fraction: 'half' is not a fraction in [0.01, 1]"),
    (_annotated(**{"gpu-fraction": "1.5"}), "annotation gpu-fraction: '1.5' is not a fraction in [0.01, 1]"),
    (_annotated(**{"gpu-fraction": "0.001"}), "annotation gpu-fraction: '0.001' is not a fraction in [0.01, 1]"),
    (_annotated(**{"gpu-memory": "-5"}), "annotation gpu-memory: '-5' is below 1"),
    (_annotated(**{"gpu-memory": "2000", "gpu-fraction": "0.5"}),
     "annotations gpu-fraction and gpu-memory together: give one"),
    (_annotated(**{"gpu-fraction": "0.5", "gpu-fraction-num-devices": "two"}),
     "annotation gpu-fraction-num-devices: 'two' is not an integer"),
    (_annotated(**{"nvidia.com/mig-1g.10gb": "x"}), "annotation nvidia.com/mig-1g.10gb: 'x' is not an integer"),
])
def test_a_bad_gpu_annotation_is_refused_naming_the_pod(obj: dict[str, Any], problem: str) -> None:
    assert refusal(convert_pods.pod, obj) == f"Pod/team-a/mem-pod: {problem}"


def test_a_pod_asking_for_whole_gpus_and_a_fraction_is_refused() -> None:
    obj = recorded("pods", "train-gang-0")
    obj["metadata"]["annotations"]["gpu-fraction"] = "0.5"
    assert "asks for nvidia.com/gpu and for a shared GPU" in refusal(convert_pods.pod, obj)


def test_a_negative_request_is_refused_naming_the_container() -> None:
    obj = recorded("pods", "train-gang-0")
    obj["spec"]["containers"][1]["resources"]["requests"]["cpu"] = "-100m"
    assert refusal(convert_pods.pod, obj).endswith("spec.containers[1].resources[cpu]: negative quantity '-100m'")


def test_pod_affinity_beyond_the_simple_form_is_refused_rather_than_ignored() -> None:
    obj = recorded("pods", "train-gang-0")
    term = obj["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    term["labelSelector"] = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["train"]}]}
    assert "spec.affinity.podAntiAffinity: only one required term" in refusal(convert_pods.pod, obj)


def test_a_pod_in_phase_unknown_is_read_as_failed() -> None:
    obj = recorded("pods", "notebook")
    obj["status"]["phase"] = "Unknown"
    assert convert_pods.pod(obj).phase == "Failed"


def test_a_pod_group_gives_its_gang_size_topology_and_last_start() -> None:
    view = convert_pods.pod_group(recorded("podgroups", "train-gang"))
    assert (view.queue, view.priority_class, view.preemptibility) == ("research", "train", "")
    assert view.job == {"topologyConstraint": {"topology": "dc", "requiredLevel": "topology.kubernetes.io/zone"},
                        "minAvailable": 4, "lastStart": 1767261600.0}


def test_a_pod_group_with_sub_groups_gives_the_tree_and_its_leaves() -> None:
    view = convert_pods.pod_group(recorded("podgroups", "leader-workers"))
    assert view.sub_groups == {"leader", "workers"}
    assert view.job == {"subGroups": [
        {"name": "all", "topology": {"topology": "dc", "preferredLevel": "topology.kubernetes.io/zone"}},
        {"name": "leader", "parent": "all", "minAvailable": 1},
        {"name": "workers", "parent": "all", "minAvailable": 2}]}


@pytest.mark.parametrize(("change", "problem"), [
    ({"queue": ""}, "spec.queue is empty: a pod group needs a queue"),
    ({"subGroups": [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}]}, "spec.subGroups: 'a' is its own ancestor"),
    ({"subGroups": [{"name": "a", "parent": "z"}]}, "spec.subGroups: unknown parent 'z'"),
    ({"preemptibility": "maybe"}, "preemptibility 'maybe' is not preemptible or non-preemptible"),
])
def test_a_bad_pod_group_is_refused_naming_it(change: dict[str, Any], problem: str) -> None:
    obj = recorded("podgroups", "leader-workers")
    obj["spec"].update(change)
    assert refusal(convert_pods.pod_group, obj) == f"PodGroup/team-a/leader-workers: {problem}"


def test_a_bad_last_start_annotation_is_refused() -> None:
    obj = recorded("podgroups", "train-gang")
    obj["metadata"]["annotations"]["kai.scheduler/last-start-timestamp"] = "yesterday"
    assert "annotation kai.scheduler/last-start-timestamp: 'yesterday' is not an RFC 3339" in refusal(
        convert_pods.pod_group, obj)
