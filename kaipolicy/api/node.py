"""Nodes and their GPU accounting: idle / used / releasing amounts and shared-GPU groups.

Whole GPUs are counted in `idle`, `used` and `releasing`. A shared (fractional) GPU is a group
id whose memory is tracked in `shared_used`, `shared_allocated` and `shared_releasing`
(MiB); the first task on a group takes one whole device out of `idle`, the last one to leave
gives it back. These rules follow the reference scheduler's node accounting exactly, because
the scenarios' expected placements depend on them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from kaipolicy.api.resources import Request, RequestType, Resources, covers_amounts, mig_gpu_portion
from kaipolicy.api.task import ACTIVE_USED, Status, Task

DEFAULT_GPU_MEMORY = 100


class PodOnNode:
    """What a node remembers of a pod placed on it, as it was then (the pod itself moves on)."""

    __slots__ = ("accepted", "gpu_groups", "key", "labels", "legacy_mig", "name", "namespace", "pod_affinity", "request",
                 "status", "uid")

    def __init__(self, task: Task) -> None:
        self.uid = task.uid
        self.name = task.name
        self.namespace = task.namespace
        self.key = task.key
        self.status = task.status
        self.request = task.request
        self.accepted = task.accepted
        self.gpu_groups = list(task.gpu_groups)
        self.labels = task.labels
        self.legacy_mig = task.legacy_mig
        self.pod_affinity = task.pod_affinity

    @property
    def is_shared_allocation(self) -> bool:
        return self.accepted is not None and self.accepted.is_shared


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint; `NoSchedule` and `NoExecute` keep off pods that do not tolerate it."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


#: Node conditions that keep new pods off a node, as the reference checks them.
NODE_CONDITIONS = ("NotReady", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")


#: A node's amounts as `Node.snapshot()` keeps them: cpu, memory, GPUs, pods and MIG slices (None
#: for none), plain values rather than a Resources object (a snapshot is taken per operation and
#: restored only on rollback).
Amounts = tuple[float, float, float, float, "dict[str, float] | None"]
#: What `Node.snapshot()` keeps: idle, used, releasing, tasks, shared used / releasing /
#: allocated, shared groups marked releasing, legacy-MIG task uids.
NodeState = tuple[Amounts, Amounts, Amounts, dict[str, PodOnNode], dict[str, int], dict[str, int],
                  dict[str, int], set[str], set[str]]


def _amounts(r: Resources) -> Amounts:
    return (r.cpu, r.memory, r.gpus, r.pods, dict(r.mig) if r.mig else None)


def _put(r: Resources, a: Amounts) -> None:
    r.cpu, r.memory, r.gpus, r.pods = a[0], a[1], a[2], a[3]
    if a[4]:
        r.mig = dict(a[4])
    elif r.mig:
        r.mig = {}


@dataclass(slots=True, eq=False)
class Node:
    name: str
    allocatable: Resources
    labels: dict[str, str] = field(default_factory=dict)
    gpu_memory: int = DEFAULT_GPU_MEMORY   # MiB of one device
    gpu_memory_synced: bool = True
    mig_enabled: bool = False
    mig_strategy: str = "none"
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    conditions: tuple[str, ...] = ()       # of NODE_CONDITIONS: why the node takes no new pods
    other_pods: Resources | None = None    # held by pods this scheduler does not manage
    index: int = 0                         # row in the session's node table
    idle: Resources = field(init=False)
    used: Resources = field(init=False)
    releasing: Resources = field(init=False)
    tasks: dict[str, PodOnNode] = field(default_factory=dict)   # key -> the pod as the node saw it
    shared_used: dict[str, int] = field(default_factory=dict)
    shared_releasing: dict[str, int] = field(default_factory=dict)
    shared_allocated: dict[str, int] = field(default_factory=dict)
    shared_marked_releasing: set[str] = field(default_factory=set)
    legacy_mig_tasks: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.idle = self.allocatable.clone()
        self.used = Resources()
        self.releasing = Resources()
        if self.other_pods is not None:
            # pods of other schedulers (and DaemonSets) are used, never releasing, never victims
            self.used.add(self.other_pods, +1)
            self.idle.add(self.other_pods, -1)

    # ---- static facts -------------------------------------------------------------------
    @property
    def gpu_count(self) -> int:
        label = self.labels.get("nvidia.com/gpu.count")
        if label is not None:
            try:
                return int(label)
            except ValueError:
                pass
        return int(self.allocatable.gpus)

    @property
    def cpu_only(self) -> bool:
        return not self.mig_enabled and self.allocatable.gpus <= 0

    @property
    def ready(self) -> bool:
        """Takes new pods: not cordoned and no bad condition (the reference's node-ready check)."""
        return not self.unschedulable and not self.conditions

    @property
    def not_ready_reason(self) -> str:
        return ", ".join(f"node has {c} condition" for c in self.conditions)

    @property
    def tainted(self) -> bool:
        return bool(self.taints)

    # ---- read-only names the rules see (CEL camelCase -> these attributes) ----------------
    @property
    def idle_gpus(self) -> float:
        return self.idle.gpus

    @property
    def releasing_gpus(self) -> float:
        return self.releasing.gpus

    @property
    def free_gpus(self) -> float:
        return self.idle.gpus + self.releasing.gpus

    @property
    def allocatable_gpus(self) -> float:
        return self.allocatable.gpus

    @property
    def nothing_releasing(self) -> bool:
        """No resource of the node is on its way out: what fits on idle and what fits on idle or
        releasing resources are then the same (for requests that are not empty)."""
        r = self.releasing
        return (r.cpu == 0 and r.memory == 0 and r.gpus == 0 and r.pods == 0 and not (r.mig and any(r.mig.values()))
                and not (self.shared_releasing and any(self.shared_releasing.values())))

    @property
    def free_cpu_millis(self) -> float:
        return self.idle.cpu + self.releasing.cpu

    @property
    def allocatable_cpu_millis(self) -> float:
        return self.allocatable.cpu

    @property
    def free_memory_bytes(self) -> float:
        return self.idle.memory + self.releasing.memory

    @property
    def allocatable_memory_bytes(self) -> float:
        return self.allocatable.memory

    @property
    def idle_cpu_millis(self) -> float:
        return self.idle.cpu

    @property
    def idle_memory_bytes(self) -> float:
        return self.idle.memory

    @property
    def idle_pods(self) -> float:
        return self.idle.pods

    @property
    def free_pods(self) -> float:
        return self.idle.pods + self.releasing.pods

    @property
    def kind_signature(self) -> str:
        """What decides which kinds of GPU request the node serves (MIG mode and strategy)."""
        return f"{self.mig_enabled}/{self.mig_strategy}/{bool(self.legacy_mig_tasks)}"

    # ---- GPU memory arithmetic ----------------------------------------------------------
    def gpu_memory_of(self, req: Request) -> int:
        if req.gpu_memory > 0:
            return req.gpu_memory
        return int(req.portion * self.gpu_memory)

    def portion_of_memory(self, memory: int) -> float:
        """The GPU portion `memory` covers, rounded up to hundredths as the reference rounds it:
        straight from the float quotient, so a device holding a 0.55 pod (17,600 of 32,000 MiB) counts
        0.56 used: 17,600 / 32,000 x 100 is just above 55 in floats. Fractions 0.07, 0.14, 0.28 and
        0.56 turn into memory and back one hundredth higher in the same way."""
        return math.ceil(memory / self.gpu_memory * 100) / 100

    def gpu_portion_of(self, req: Request) -> float:
        if req.gpu_memory > 0:
            return self.portion_of_memory(req.gpu_memory)
        return req.portion

    def valid_portion(self, req: Request) -> bool:
        p = self.gpu_portion_of(req)
        return p <= 1 or p == int(p)

    # ---- fitting ------------------------------------------------------------------------
    def non_allocated(self) -> Resources:
        return self.idle.plus(self.releasing)

    def fits_idle(self, task: Task) -> bool:
        """IsTaskAllocatable: the task fits on idle resources right now."""
        req = task.request
        if req.is_empty and req.kind != RequestType.GPU_MEMORY:
            return True
        return self._fits_on(req, self.idle)

    def fits_idle_or_releasing(self, task: Task) -> bool:
        req = task.request
        if req.mig:
            return self._fits_on(req, self.non_allocated())
        # the sums non_allocated() makes, without building it (asked per node in every simulation)
        idle, releasing = self.idle, self.releasing
        return self._fits_amounts(req, idle.cpu + releasing.cpu, idle.memory + releasing.memory,
                                  idle.gpus + releasing.gpus, idle.pods + releasing.pods)

    def _fits_on(self, req: Request, free: Resources) -> bool:
        if req.mig and not req.is_shared:
            return self.valid_portion(req) and free.covers(req)
        return self._fits_amounts(req, free.cpu, free.memory, free.gpus, free.pods)

    def _fits_amounts(self, req: Request, cpu: float, memory: float, gpus: float, pods: float) -> bool:
        """_fits_on for a request without MIG slices (or a shared one), on free amounts given one
        by one."""
        if not req.is_shared:
            return self.valid_portion(req) and covers_amounts(req, cpu, memory, gpus, pods)
        if req.cpu > cpu or req.memory > memory or pods < 1:
            return False
        if not self.valid_portion(req):
            return False
        return math.floor(gpus + 1e-9) + self.matching_shared_groups(req) >= req.count

    def matching_shared_groups(self, req: Request) -> int:
        n = 0
        for group in self.shared_used:
            if self.fits_on_group(req, group):
                n += 1
                if n >= req.count:
                    break
        return n

    @property
    def shared_room(self) -> float:
        """The most GPU memory (MiB) a task could still take on one of the node's shared groups
        (`fits_on_group` holds exactly for requests up to it); -inf when no group can be joined."""
        best = -math.inf
        for group, used in self.shared_used.items():
            if used == 0 or self._all_released(group):
                continue
            room = self.gpu_memory - self.shared_allocated.get(group, 0) + self.shared_releasing.get(group, 0)
            best = max(best, room)
        return best

    @property
    def shared_room_total(self) -> float:
        """GPU memory (MiB) left in all the shared groups a task could still join, together."""
        total = 0.0
        for group, used in self.shared_used.items():
            if used == 0 or self._all_released(group):
                continue
            total += max(self.gpu_memory - self.shared_allocated.get(group, 0) + self.shared_releasing.get(group, 0), 0)
        return total

    def fits_on_group(self, req: Request, group: str) -> bool:
        return (self.shared_used.get(group, 0) != 0 and self._enough_on_gpu(req, group)
                and not self._all_released(group))

    def fits_idle_on_group(self, req: Request, group: str) -> bool:
        if group not in self.shared_allocated:
            return False  # a pipelined-only group
        return self.gpu_memory - self.shared_allocated[group] - self.gpu_memory_of(req) >= 0

    def _enough_on_gpu(self, req: Request, group: str) -> bool:
        return (self.gpu_memory - self.shared_allocated.get(group, 0) + self.shared_releasing.get(group, 0)
                - self.gpu_memory_of(req)) >= 0

    def _all_released(self, group: str) -> bool:
        return self.shared_allocated.get(group, 0) == self.shared_releasing.get(group, 0)

    def used_gpu_portion(self, group: str) -> float:
        return self.shared_used.get(group, 0) / self.gpu_memory if self.gpu_memory else 0.0

    # ---- summaries ----------------------------------------------------------------------
    @property
    def has_shared_groups(self) -> bool:
        if not self.shared_used:
            return False   # (most nodes: no generator made)
        return any(v > 0 for v in self.shared_used.values())

    def shared_gpus_in_use(self) -> int:
        if not self.shared_used:
            return 0
        return sum(1 for v in self.shared_used.values() if v > 0)

    def used_gpus_total(self) -> int:
        return int(self.used.gpus) + self.shared_gpus_in_use()

    def idle_gpus_total(self) -> float:
        """Idle whole GPUs, free parts of shared GPUs and idle MIG slices (GetSumOfIdleGPUs)."""
        shared = sum(1 - self.portion_of_memory(v) for v in self.shared_allocated.values() if v > 0) \
            if self.shared_allocated else 0
        return shared + self.idle.gpus + self.idle.mig_gpus

    def releasing_gpus_total(self) -> float:
        shared = sum(self.portion_of_memory(v) for v in self._partly_releasing()) if self.shared_releasing else 0
        return shared + self.releasing.gpus + self.releasing.mig_gpus

    def releasing_shared_memory(self) -> int:
        """GPU memory being released on shared GPUs (GetSumOfReleasingGPUs' memory)."""
        return sum(self._partly_releasing()) if self.shared_releasing else 0

    def _partly_releasing(self) -> Iterator[int]:
        """The memory being released on each shared GPU that keeps a pod: a shared GPU whose every
        pod is releasing is a whole releasing GPU instead."""
        return (v for g, v in self.shared_releasing.items() if v > 0 and not self._gpu_releasing_from_shared(g))

    def _gpu_releasing_from_shared(self, group: str) -> bool:
        used = self.shared_used.get(group, 0)
        return used != 0 and self.shared_releasing.get(group) == used

    # ---- tasks coming and going -----------------------------------------------------------
    def accept(self, task: Task) -> None:
        """Resolve what the task receives on this node (fractions against its GPU memory)."""
        if task.status not in ACTIVE_USED:
            return
        req = task.request
        if req.kind == RequestType.MIG:
            task.accepted = req
        elif req.is_shared:
            task.accepted = req.with_portion(self.gpu_portion_of(req), self.gpu_memory_of(req))
        else:
            task.accepted = req

    def add_task(self, task: Task, move_shared: bool = False) -> None:
        self.accept(task)
        key = task.key
        if task.is_shared_allocation and move_shared:
            self.tasks.pop(key, None)
        elif key in self.tasks:
            raise ValueError(f"task {key} already on node {self.name}")
        self.tasks[key] = PodOnNode(task)
        if task.legacy_mig:
            self.legacy_mig_tasks.add(task.uid)
        self._track(task, +1)

    def remove_task(self, task: Task) -> None:
        stored = self.tasks.pop(task.key, None)
        if stored is None:
            raise ValueError(f"task {task.key} is not on node {self.name}")
        self.legacy_mig_tasks.discard(stored.uid)
        self._track(stored, -1)

    def snapshot(self) -> NodeState:
        """Everything tasks change on the node, to restore exactly on rollback."""
        return (_amounts(self.idle), _amounts(self.used), _amounts(self.releasing), dict(self.tasks),
                dict(self.shared_used), dict(self.shared_releasing), dict(self.shared_allocated),
                set(self.shared_marked_releasing), set(self.legacy_mig_tasks))

    def restore(self, snap: NodeState) -> None:
        # the amounts written back into the node's own Resources: a rollback restores a node
        # for every eviction and placement a simulation made
        _put(self.idle, snap[0])
        _put(self.used, snap[1])
        _put(self.releasing, snap[2])
        (self.tasks, self.shared_used, self.shared_releasing, self.shared_allocated, self.shared_marked_releasing,
         self.legacy_mig_tasks) = snap[3:]

    def update_task(self, task: Task) -> None:
        self.remove_task(task)
        self.add_task(task)

    def _track(self, task: Task | PodOnNode, sign: int) -> None:
        # what the pod takes (its grant, shared devices counted by group below), added without
        # building a Resources: this runs for every pod placed, evicted and put back by every
        # simulation
        accepted = task.accepted
        acc = accepted or task.request
        shared = accepted is not None and accepted.is_shared
        status = task.status
        if acc.mig:
            amounts = (acc.cpu, acc.memory, 0.0 if shared else acc.gpus, 1.0, acc.mig)
            self.used.add_amounts(*amounts, sign)
            if status == Status.RELEASING:
                self.releasing.add_amounts(*amounts, sign)
                self.idle.add_amounts(*amounts, -sign)
            elif status == Status.PIPELINED:
                self.releasing.add_amounts(*amounts, -sign)
            else:
                self.idle.add_amounts(*amounts, -sign)
        else:
            # add_amounts written out (the same operations on each amount), as this runs for
            # every pod placed, evicted and put back
            cpu, memory, gpus = acc.cpu, acc.memory, 0.0 if shared else acc.gpus
            used = self.used
            used.cpu += sign * cpu
            used.memory += sign * memory
            used.gpus += sign * gpus
            used.pods += sign * 1.0
            if status == Status.RELEASING:
                releasing = self.releasing
                releasing.cpu += sign * cpu
                releasing.memory += sign * memory
                releasing.gpus += sign * gpus
                releasing.pods += sign * 1.0
            # a pipelined pod takes from what is releasing, any other from what is idle
            into, by = (self.releasing if status == Status.PIPELINED else self.idle), -sign
            into.cpu += by * cpu
            into.memory += by * memory
            into.gpus += by * gpus
            into.pods += by * 1.0
        if shared:
            for group in task.gpu_groups:
                if sign > 0:
                    self._add_shared(task, group)
                else:
                    self._remove_shared(task, group)

    def _add_shared(self, task: Task | PodOnNode, group: str) -> None:
        mem = self.gpu_memory_of(task.request)
        self.shared_used[group] = self.shared_used.get(group, 0) + mem
        if task.status == Status.RELEASING:
            self.shared_releasing[group] = self.shared_releasing.get(group, 0) + mem
            self.shared_allocated[group] = self.shared_allocated.get(group, 0) + mem
            if self.shared_used[group] == self.shared_releasing[group]:
                if group not in self.shared_marked_releasing:
                    self.releasing.gpus += 1
                    self.shared_marked_releasing.add(group)
                if self.gpu_count < int(self.idle.gpus) + self.used_gpus_total():
                    self.idle.gpus -= 1
        elif task.status == Status.PIPELINED:
            self.shared_releasing[group] = self.shared_releasing.get(group, 0) - mem
            if self.shared_used[group] - mem == self.shared_releasing[group] + mem:
                self.releasing.gpus -= 1
        else:
            self.shared_allocated[group] = self.shared_allocated.get(group, 0) + mem
            if self.shared_used[group] <= mem and self.gpu_count < int(self.idle.gpus) + self.used_gpus_total():
                self.idle.gpus -= 1
            if group in self.shared_marked_releasing:
                self.releasing.gpus -= 1
                self.shared_marked_releasing.discard(group)

    def _remove_shared(self, task: Task | PodOnNode, group: str) -> None:
        mem = self.gpu_memory_of(task.request)
        self.shared_used[group] = self.shared_used.get(group, 0) - mem
        if task.status == Status.RELEASING:
            self.shared_releasing[group] = self.shared_releasing.get(group, 0) - mem
            self.shared_allocated[group] = self.shared_allocated.get(group, 0) - mem
            if self.shared_used[group] <= 0:
                if self.gpu_count >= int(self.idle.gpus) + self.used_gpus_total():
                    self.idle.gpus += 1
                if group in self.shared_marked_releasing:
                    self.releasing.gpus -= 1
                    self.shared_marked_releasing.discard(group)
        elif task.status == Status.PIPELINED:
            self.shared_releasing[group] = self.shared_releasing.get(group, 0) + mem
            used_before = self.shared_used[group] + mem
            releasing_before = self.shared_releasing[group] - mem
            if used_before == releasing_before or (self.shared_used[group] == 0
                                                   and self.shared_releasing[group] == 0):
                self.releasing.gpus += 1
        else:
            self.shared_allocated[group] = self.shared_allocated.get(group, 0) - mem
            if self.shared_used[group] <= 0 and self.gpu_count >= int(self.idle.gpus) + self.used_gpus_total():
                self.idle.gpus += 1
            if self._gpu_releasing_from_shared(group) and group not in self.shared_marked_releasing:
                self.releasing.gpus += 1
                self.shared_marked_releasing.add(group)

    def mig_gpu_slices(self) -> float:
        return float(sum(mig_gpu_portion(n)[0] * c for n, c in self.allocatable.mig.items()))

    def __repr__(self) -> str:
        return f"Node({self.name}, idle={self.idle}, releasing={self.releasing})"

