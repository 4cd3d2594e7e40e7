"""GPU fragmentation as Weng et al. measure it (ATC'23, "Beware of Fragmentation"): the free GPU
capacity of a node that a pod of a given size could not use, now or after another pod lands.

A node's GPUs are read as the free portion of each device (1 for an idle device, what is left
of a shared one, 0 for a used one), largest first; arrays are nodes x devices, so one node is a
one-row array and both rule forms compute alike. The policy that weighs these measures over a
workload lives in a rule file (examples/policies/fragmentation-aware/).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kaipolicy.api.node import Node
from kaipolicy.api.task import Task


def devices(node: Node, width: int) -> list[float]:
    """Free portion of each of the node's GPU devices, largest first (as many as the node has,
    then zeros up to `width`)."""
    free = [1.0] * max(int(node.idle.gpus + 1e-9), 0)
    free += [max(1.0 - node.portion_of_memory(used), 0.0) for used in node.shared_allocated.values() if used > 0]
    free.sort(reverse=True)
    count = max(node.gpu_count, 0)
    return (free + [0.0] * count)[:count] + [0.0] * max(width - count, 0)


def fragments(free: np.ndarray, cpu: np.ndarray, gpus: float, cpu_millis: float) -> np.ndarray:
    """Per node (row): the free GPU capacity a pod asking `gpus` (a portion of one device below 1,
    else whole devices; 0 for a CPU-only pod) and `cpu_millis` could not use: all of it when the
    pod does not fit the node, else the devices with less free than the pod takes from one."""
    total: np.ndarray = free.sum(axis=1)
    if gpus <= 0:
        return total
    if gpus < 1:
        usable = free >= gpus
        fits = usable.any(axis=1)
    else:
        usable = free >= 1.0
        fits = usable.sum(axis=1) >= gpus
    left: np.ndarray = np.where(usable, 0.0, free).sum(axis=1)
    out: np.ndarray = np.where(fits & (cpu >= cpu_millis), left, total)
    return out


def after(free: np.ndarray, gpu_memory: np.ndarray, task: Task) -> np.ndarray:
    """The devices' free portions once `task` lands on each node: a shared pod on the fullest
    device it fits (best fit), a whole-GPU pod on idle devices; a node it does not fit keeps its
    devices as they are."""
    req = task.request
    out = free.copy()
    rows = np.arange(len(out))
    if req.is_shared:
        portion = (np.full(len(out), req.portion) if req.gpu_memory <= 0
                   else np.ceil(req.gpu_memory / gpu_memory * 100) / 100)
        for _ in range(req.count):
            room = np.where(out >= portion[:, None], out, np.inf)
            best = room.argmin(axis=1)
            hit = np.isfinite(room[rows, best])
            out[rows[hit], best[hit]] -= portion[hit]
    elif req.count:
        taken = (np.arange(out.shape[1]) < req.count) & (out >= 1.0)
        out = np.where(taken, 0.0, out)
    return out


# ---- the rule functions (both forms) ----
def device_state(node: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(free portion of every GPU device, idle CPU, device memory) per node: one row for a Node,
    the table's derived matrix rows for a NodeVector (the framework's view over nodes)."""
    if isinstance(node, Node):
        width = max(node.gpu_count, 1)
        return (np.array([devices(node, width)]), np.array([node.idle_cpu_millis]),
                np.array([float(node.gpu_memory)]))
    table = node.table
    width = table.constant("most-gpus", lambda: max([n.gpu_count for n in table.nodes] + [1]))
    every = table.derived(("gpu-devices", width),
                          lambda: np.array([devices(n, width) for n in table.nodes], dtype=float),
                          lambda n: devices(n, width))
    return every if node.every else every[node.index], node.idle_cpu_millis, node.gpu_memory


def on_node(node: Any, gpus: float, cpu_millis: float) -> Any:
    """`gpu.fragments(node, gpus, cpuMillis)`: for a Node a number, for a NodeVector an array."""
    free, cpu, _ = device_state(node)
    out = fragments(free, cpu, gpus, cpu_millis)
    return float(out[0]) if isinstance(node, Node) else out


def after_task(task: Task, node: Any, gpus: float, cpu_millis: float) -> Any:
    """`gpu.fragmentsAfter(task, node, gpus, cpuMillis)`: the same once `task` lands on the node."""
    free, cpu, memory = device_state(node)
    out = fragments(after(free, memory, task), cpu - task.request.cpu, gpus,
                                  cpu_millis)
    return float(out[0]) if isinstance(node, Node) else out
