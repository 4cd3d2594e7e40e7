"""Which nodes a task fits, as boolean arrays over a NodeVector: exactly `Node.fits_idle` and
`Node.fits_idle_or_releasing` for every node at once (MIG requests ask each node).

A mask is a derived array of the node table (over all nodes, then taken for the view's nodes),
so a request seen before costs only the rows changed since.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kaipolicy.api.node import Node
from kaipolicy.api.resources import Request, RequestType
from kaipolicy.api.task import Task
from kaipolicy.framework.nodetable import NodeVector, distinct


def fits_mask(view: NodeVector, task: Task, with_releasing: bool) -> np.ndarray:
    """Node.fits_idle / fits_idle_or_releasing for every node of the view, as arrays; MIG
    requests ask each node."""
    req = task.request
    known = view.fits.get((id(req), with_releasing))
    if known is not None and known[0] is req:
        return known[1]
    other = view.fits.get((id(req), not with_releasing))
    if other is not None and other[0] is req and _same_either_way(view, req):
        view.fits[id(req), with_releasing] = other     # read-only already
        return other[1]
    if req.mig:
        mask = _fits_mask(view, task, with_releasing)
    else:
        table = view.table
        check = Node.fits_idle_or_releasing if with_releasing else Node.fits_idle
        every = table.derived(("fits", req, with_releasing), lambda: _fits_mask(table.whole(), task, with_releasing),
                              lambda node: check(node, task))
        mask = every if view.every else every[view.index]
    mask.flags.writeable = False
    view.fits[id(req), with_releasing] = (req, mask)
    return mask


def _same_either_way(view: NodeVector, req: Request) -> bool:
    """Whether the request fits the view's nodes on idle resources exactly where it fits on idle
    or releasing ones: nothing is releasing on them (and the request is not empty, which fits
    idle resources anywhere; MIG requests are asked node by node)."""
    if req.mig or (req.is_empty and req.kind != RequestType.GPU_MEMORY):
        return False
    quiet: np.ndarray = view.nothing_releasing
    return bool(np.logical_and.reduce(quiet))     # (ndarray.all's reduction, without its Python wrapper)


def _fits_mask(view: NodeVector, task: Task, with_releasing: bool) -> np.ndarray:
    req = task.request
    if not with_releasing and req.is_empty and req.kind != RequestType.GPU_MEMORY:
        return np.ones(len(view), dtype=bool)
    if req.mig:
        check: Callable[[Node], bool] = (
            (lambda n: n.fits_idle_or_releasing(task)) if with_releasing else (lambda n: n.fits_idle(task)))
        return np.fromiter((check(n) for n in view.nodes), dtype=bool, count=len(view))
    cpu: np.ndarray  # NodeVector columns are numeric arrays, looked up by name at run time
    mem: np.ndarray
    gpus: np.ndarray
    pods: np.ndarray
    if with_releasing:
        cpu, mem, gpus, pods = view.free_cpu_millis, view.free_memory_bytes, view.free_gpus, view.free_pods
    else:
        cpu, mem, gpus, pods = view.idle_cpu_millis, view.idle_memory_bytes, view.idle_gpus, view.idle_pods
    fits: np.ndarray = (cpu >= req.cpu) & (mem >= req.memory) & (pods >= 1)
    gpu_fits: np.ndarray = (gpus + 1e-9 >= req.gpus) if not req.is_shared else shared_gpus_fit(view, task, gpus)
    both: np.ndarray = fits & gpu_fits
    return both


def shared_gpus_fit(view: NodeVector, task: Task, gpus: np.ndarray) -> np.ndarray:
    """The GPU part of Node._fits_on for a shared request: a valid portion on the node, and
    `count` devices among whole free ones (floor(gpus) >= k is gpus >= k) and shared groups
    with room for the task."""
    req = task.request
    if req.gpu_memory > 0:
        valid: np.ndarray | None = valid_portions(view, task)
    elif req.portion <= 1 or req.portion == int(req.portion):
        valid = None
    else:
        return np.zeros(len(view), dtype=bool)
    joinable: np.ndarray = view.shared_room >= memory_in(view, req)
    if req.count == 1:
        # floor(gpus) + (1 if joinable) >= 1; an overcommitted node's floor(gpus) is below 0
        ok = (gpus + 1e-9 >= 1) | (joinable & (gpus + 1e-9 >= 0))
    else:
        whole = np.floor(gpus + 1e-9)
        ok = whole >= req.count
        # several devices: count the joinable groups one node at a time where whole GPUs fall short
        for i in np.flatnonzero(~ok & joinable).tolist():
            ok[i] = whole[i] + view.node(i).matching_shared_groups(req) >= req.count
    return ok if valid is None else ok & valid


#: Request sizes whose GPU memory per device over every node is kept at once.
SIZES_KEPT = 64


def memory_in(view: NodeVector, req: Request) -> np.ndarray:
    """memory_of over the view's nodes (read-only). Over every node it is kept per request size:
    a device's size never changes."""
    if not view.every:
        return memory_of(req, view.gpu_memory)
    kept: dict[tuple[float, float], np.ndarray] = view.table.constant(("memory-of",), dict)
    size = (req.gpu_memory, req.portion)
    known = kept.get(size)
    if known is None:
        if len(kept) >= SIZES_KEPT:
            kept.clear()
        known = kept[size] = memory_of(req, view.gpu_memory)
        known.flags.writeable = False
    return known


def memory_of(req: Request, gpu_memory: np.ndarray) -> np.ndarray:
    """Node.gpu_memory_of for every node: MiB per device of a shared request."""
    if req.gpu_memory > 0:
        return np.full(len(gpu_memory), float(req.gpu_memory))
    return np.floor(req.portion * gpu_memory)


def valid_portions(view: NodeVector, task: Task) -> np.ndarray:
    """Node.valid_portion for every node; a GPU-memory request is judged once per distinct
    device size, on the first node of that size."""
    req = task.request
    if req.gpu_memory <= 0:
        p = req.portion
        return np.full(len(view), p <= 1 or p == int(p))
    memory: np.ndarray = view.gpu_memory
    first, inverse = distinct(memory)
    verdicts = np.array([view.node(i).valid_portion(req) for i in first], dtype=bool)
    out: np.ndarray = verdicts[inverse]
    return out
