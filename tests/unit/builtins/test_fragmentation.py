"""GPU fragmentation as the ATC'23 paper measures it: the free GPU capacity a pod of a given size
could not use on a node, and the same once another pod has landed there."""

from __future__ import annotations

import numpy as np
import pytest

from kaipolicy.api.node import Node
from kaipolicy.api.resources import Request, Resources
from kaipolicy.api.task import Status, Task
from kaipolicy.builtins import fragmentation

# a node's devices (free portion each) and idle CPU; a pod's GPUs and CPU; the fragments
CASES = [
    ("a CPU-only pod can use no GPU", [1.0, 0.5], 8000, 0.0, 1000, 1.5),
    ("a pod that fits leaves the devices too small for it", [1.0, 0.5, 0.2], 8000, 0.3, 1000, 0.2),
    ("a pod that fits uses every device big enough", [1.0, 0.5], 8000, 0.5, 1000, 0.0),
    ("without the CPU it needs, every free GPU is a fragment", [1.0, 0.5], 500, 0.3, 1000, 1.5),
    ("a whole-GPU pod cannot use parts of devices", [1.0, 1.0, 0.5], 8000, 2.0, 1000, 0.5),
    ("a whole-GPU pod asking more idle devices than there are fits nowhere", [1.0, 0.5], 8000, 2.0, 1000, 1.5),
]


@pytest.mark.parametrize(("free", "cpu", "gpus", "millis", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_fragments_are_the_free_gpu_a_pod_of_that_size_could_not_use(free: list[float], cpu: float, gpus: float,
                                                                       millis: float, want: float) -> None:
    got = fragmentation.fragments(np.array([free]), np.array([cpu]), gpus, millis)
    assert got.tolist() == pytest.approx([want])


def task(gpus: float, devices: int | None = None) -> Task:
    return Task("t", "t", "ns", "j", Request.build(1000, 0, gpus=gpus, devices=devices), Status.PENDING)


AFTER = [
    ("a shared pod takes the fullest device it fits", [1.0, 0.6, 0.3], 0.3, None, [1.0, 0.6, 0.0]),
    ("a shared pod skips devices too small for it", [1.0, 0.6, 0.2], 0.5, None, [1.0, 0.1, 0.2]),
    ("a whole-GPU pod takes idle devices", [1.0, 1.0, 0.5], 2.0, None, [0.0, 0.0, 0.5]),
    ("a pod that fits no device leaves the node as it was", [0.4, 0.2], 0.5, None, [0.4, 0.2]),
    ("a two-device fraction takes two devices", [1.0, 0.6, 0.5], 0.5, 2, [1.0, 0.1, 0.0]),
]


@pytest.mark.parametrize(("free", "gpus", "devices", "want"), [c[1:] for c in AFTER], ids=[c[0] for c in AFTER])
def test_a_pod_lands_on_the_devices_the_measure_assumes(free: list[float], gpus: float, devices: int | None,
                                                         want: list[float]) -> None:
    got = fragmentation.after(np.array([free]), np.array([100.0]), task(gpus, devices))
    assert got[0].tolist() == pytest.approx(want)


def test_a_nodes_devices_are_its_idle_ones_and_what_its_shared_ones_have_left() -> None:
    node = Node("n", Resources(64000, 1e12, 4.0, 110.0), labels={"nvidia.com/gpu.count": "4"}, gpu_memory=100)
    shared = Task("s", "s", "ns", "j", Request.build(0, 0, gpus=0.3), Status.RUNNING, node="n", gpu_groups=["g"])
    whole = Task("w", "w", "ns", "j", Request.build(0, 0, gpus=1), Status.RUNNING, node="n")
    node.add_task(shared)
    node.add_task(whole)
    assert fragmentation.devices(node, 6) == pytest.approx([1.0, 1.0, 0.7, 0.0, 0.0, 0.0])
