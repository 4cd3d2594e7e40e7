"""Nodes, queues, BindRequests, topologies and priority classes as the scheduler reads them, from
objects recorded off a real API server; bad objects are refused naming kind/namespace/name."""

from __future__ import annotations

from typing import Any

import pytest

from kaipolicy.cache import convert
from tests.unit.cache.recorded import recorded, refusal


def test_a_gpu_node_gives_its_allocatable_gpu_memory_taints_and_bad_conditions() -> None:
    view = convert.node(recorded("nodes", "gpu-node-1"))
    assert view.meta.name == "gpu-node-1"
    assert view.node == {
        "name": "gpu-node-1", "labels": view.meta.labels, "cpuMillis": 96000, "memoryBytes": 2**40, "maxPods": 110,
        "gpus": 8, "gpuMemoryMiB": 81500,   # floored to 100 MiB, as the reference does
        "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        "conditions": ["DiskPressure"],
    }


def test_a_mixed_mig_node_gives_its_slices_and_reads_a_gpu_memory_label_written_in_bytes() -> None:
    view = convert.node(recorded("nodes", "mig-node-1"))
    assert view.node["mig"] == {"nvidia.com/mig-1g.10gb": 7, "nvidia.com/mig-3g.40gb": 1}
    assert (view.node["migStrategy"], view.node["gpus"], view.node["gpuMemoryMiB"]) == ("mixed", 0, 81900)


@pytest.mark.parametrize(("label", "memory"), [(None, None), ("not-a-number", None), ("0", None), ("40536", 40500)])
def test_a_node_without_a_usable_gpu_memory_label_is_not_synced(label: str | None, memory: int | None) -> None:
    obj = recorded("nodes", "gpu-node-1")
    obj["metadata"]["labels"].pop("nvidia.com/gpu.memory")
    if label is not None:
        obj["metadata"]["labels"]["nvidia.com/gpu.memory"] = label
    spec = convert.node(obj).node
    assert (spec.get("gpuMemoryMiB"), spec.get("gpuMemorySynced", True)) == (memory, memory is not None)


@pytest.mark.parametrize(("condition", "status", "bad"), [
    ("Ready", "False", ["NotReady"]), ("Ready", "Unknown", ["NotReady"]), ("PIDPressure", "True", ["PIDPressure"]),
    ("NetworkUnavailable", "True", ["NetworkUnavailable"]), ("MemoryPressure", "False", []),
    ("SomethingElse", "True", []),
])
def test_node_conditions_that_keep_pods_off(condition: str, status: str, bad: list[str]) -> None:
    obj = recorded("nodes", "mig-node-1")
    obj["status"]["conditions"] = [{"type": condition, "status": status}]
    assert convert.node(obj).node.get("conditions", []) == bad


def test_a_node_with_a_negative_allocatable_is_refused_by_name() -> None:
    obj = recorded("nodes", "gpu-node-1")
    obj["status"]["allocatable"]["cpu"] = "-1"
    assert refusal(convert.node, obj) == "Node/gpu-node-1: status.allocatable[cpu]: negative quantity '-1'"


def test_a_queue_gives_quota_limit_weight_memory_in_bytes_and_min_runtime() -> None:
    view = convert.queue(recorded("queues", "research"))
    assert view.parent == "dept-ai"
    assert view.queue == {
        "name": "research", "priority": 150,
        "deserved": {"gpu": 8, "cpu": 64000, "memory": 512e9},      # the Queue's memory is in megabytes
        "limit": {"gpu": 16, "cpu": -1, "memory": -1},
        "overQuotaWeight": {"gpu": 2, "cpu": 1, "memory": 1},
        "preemptMinRuntimeSeconds": 600.0, "parent": "dept-ai",
    }


def test_an_amount_a_queue_leaves_out_is_zero_as_in_the_reference() -> None:
    obj = recorded("queues", "research")
    obj["spec"]["resources"] = {"gpu": {"quota": 2}}
    view = convert.queue(obj)
    assert (view.queue["deserved"]["gpu"], view.queue["limit"]["gpu"], view.queue["overQuotaWeight"]["gpu"]) == (2, 0, 0)
    assert view.queue["deserved"]["cpu"] == 0


@pytest.mark.parametrize(("change", "problem"), [
    ({"resources": {"gpu": {"quota": -3}}}, "spec.resources.gpu.quota: -3 is negative"),
    ({"resources": {"cpu": {"overQuotaWeight": -1}}}, "spec.resources.cpu.overQuotaWeight: -1 is negative"),
    ({"resources": {"memory": {"limit": "lots"}}}, "spec.resources.memory.limit: 'lots' is not a number"),
    ({"reclaimMinRuntime": "soon"}, "spec.reclaimMinRuntime: 'soon' is not a duration like 30m or 1h30m"),
])
def test_a_bad_queue_is_refused_naming_the_field(change: dict[str, Any], problem: str) -> None:
    obj = recorded("queues", "research")
    obj["spec"].update(change)
    assert refusal(convert.queue, obj) == f"Queue/research: {problem}"


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("1h30m", 5400), ("1.5h", 5400), ("250ms", 0.25),
                                               ("-1s", -1), ("0", 0)])
def test_go_durations(text: str, seconds: float) -> None:
    assert convert.go_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "1d", "h", "1h 30m", "ten"])
def test_what_is_not_a_go_duration(text: str) -> None:
    with pytest.raises(ValueError):
        convert.go_duration(text)


@pytest.mark.parametrize(("status", "limit", "failed"), [
    (None, 3, False), ({"phase": "Pending"}, None, False), ({"phase": "Succeeded"}, None, False),
    ({"phase": "Failed"}, None, True),                           # no limit: one failure is final
    ({"phase": "Failed", "failedAttempts": 2}, 3, False),        # the binder will try again
    ({"phase": "Failed", "failedAttempts": 3}, 3, True),
])
def test_a_bind_request_is_failed_for_good_once_the_binder_gives_up(status: dict[str, Any] | None, limit: int | None,
                                                                    failed: bool) -> None:
    obj = recorded("bindrequests", "train-gang-0-c51f71")
    obj["spec"].pop("backoffLimit")
    if limit is not None:
        obj["spec"]["backoffLimit"] = limit
    if status is not None:
        obj["status"] = status
    view = convert.bind_request(obj)
    assert (view.pod, view.node, view.gpu_groups, view.failed) == ("train-gang-0", "gpu-node-1", ("g-1",), failed)


def test_topologies_and_priority_classes() -> None:
    topology = convert.topology({"metadata": {"name": "dc"}, "spec": {"levels": [{"nodeLabel": "zone"},
                                                                                 {"nodeLabel": "rack"}]}})
    assert topology.levels == ("zone", "rack")
    cls = convert.priority_class({"metadata": {"name": "inference"}, "value": 125, "globalDefault": True})
    assert (cls.value, cls.global_default) == (125, True)


@pytest.mark.parametrize(("obj", "problem"), [
    ({"metadata": {"name": "n1"}, "status": {"allocatable": "lots"}}, "Node/n1: cannot be read: AttributeError"),
    ({"metadata": {"name": "n2"}, "spec": {"taints": [{"key": "k"}, "junk"]}}, "Node/n2: cannot be read: AttributeError"),
    ("not an object", "Node/?: cannot be read: AttributeError"),
])
def test_an_object_of_an_unexpected_shape_is_refused_by_name_not_a_traceback(obj: Any, problem: str) -> None:
    assert refusal(lambda o: convert.safely(convert.node, "Node", o), obj).startswith(problem)
