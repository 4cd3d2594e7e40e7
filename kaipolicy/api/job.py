"""Jobs (pod groups): pod sets with their own gang sizes, the sub-group tree, fit errors."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

from kaipolicy.api.resources import Resources
from kaipolicy.api.task import ACTIVE_ALLOCATED, ACTIVE_USED, ALIVE, ALLOCATED, Status, Task, qualified

DEFAULT_SUB_GROUP = "default"


@dataclass(frozen=True, slots=True)
class TopologyConstraint:
    topology: str
    required_level: str = ""
    preferred_level: str = ""


_ALIVE_UNGATED = ALIVE - {Status.GATED}


class CountsTasks:
    """Status counts over `self.tasks`, shared by pod sets and jobs."""

    __slots__ = ()
    tasks: dict[str, Task]

    def count(self, statuses: frozenset[Status]) -> int:
        n = 0
        for t in self.tasks.values():   # (a loop: most jobs have one pod, and a generator costs more)
            if t.status in statuses:
                n += 1
        return n

    @property
    def active_allocated(self) -> int:
        return self.count(ACTIVE_ALLOCATED)

    @property
    def active_used(self) -> int:
        return self.count(ACTIVE_USED)


@dataclass(slots=True, eq=False)
class PodSet(CountsTasks):
    """A leaf of the sub-group tree: tasks that form one gang of `min_available`."""

    name: str
    min_available: int
    topology: TopologyConstraint | None = None
    parent: SubGroupSet | None = None
    tasks: dict[str, Task] = field(default_factory=dict)

    def ready(self) -> bool:
        return self.count(_ALIVE_UNGATED) >= self.min_available

    def gang_satisfied(self) -> bool:
        return self.active_used >= self.min_available

    def is_elastic(self) -> bool:
        return self.min_available < len(self.tasks)

    @property
    def satisfied(self) -> bool:
        return self.active_allocated >= self.min_available

    @property
    def allocation_ratio(self) -> float:
        return self.active_allocated / self.min_available if self.min_available else 0.0


@dataclass(slots=True, eq=False)
class SubGroupSet:
    """An inner node of the sub-group tree; may carry a topology constraint."""

    name: str
    topology: TopologyConstraint | None = None
    parent: SubGroupSet | None = None
    groups: list[SubGroupSet] = field(default_factory=list)
    pod_sets: list[PodSet] = field(default_factory=list)

    def all_pod_sets(self) -> list[PodSet]:
        out = list(self.pod_sets)
        for g in self.groups:
            out.extend(g.all_pod_sets())
        return out


@dataclass(slots=True, eq=False)
class Job(CountsTasks):
    uid: str
    name: str
    namespace: str
    queue: str
    priority: int
    preemptible: bool
    created: float                      # seconds on the scenario clock
    root: SubGroupSet
    pod_sets: dict[str, PodSet]
    tasks: dict[str, Task] = field(default_factory=dict)   # uid -> task
    last_start: float | None = None     # scenario clock seconds
    stale_since: float | None = None
    deleted: bool = False
    order: int = 0
    fit_errors: list[str] = field(default_factory=list)
    task_fit_errors: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """namespace/name (see `qualified`)."""
        return qualified(self.namespace, self.name)

    def add_task(self, task: Task) -> None:
        self.tasks[task.uid] = task
        self.pod_sets[task.sub_group].tasks[task.uid] = task

    @property
    def has_pending(self) -> bool:
        for t in self.tasks.values():   # (a loop, as in count: most jobs have one pod)
            if t.status == Status.PENDING:
                return True
        return False

    @property
    def num_allocated(self) -> int:
        return self.count(ALLOCATED)

    def ready(self) -> bool:
        return all(ps.ready() for ps in self.pod_sets.values())

    def gang_satisfied(self) -> bool:
        return all(ps.gang_satisfied() for ps in self.pod_sets.values())

    def not_ready_reason(self) -> str | None:
        """Why a job with pending or gated pods is not even tried (too few pods for a gang), in the
        words of the reference's "not ready" event; None when it is ready or has nothing to place."""
        gated = frozenset({Status.GATED})
        if self.ready() or (not self.has_pending and not self.count(gated)):
            return None
        message = "Job is not ready for scheduling."
        for ps in self.pod_sets.values():
            if ps.ready():
                continue
            alive, n_gated = ps.count(ALIVE), ps.count(gated)
            if ps.name == DEFAULT_SUB_GROUP:
                message += f" Waiting for {ps.min_available} pods, currently {alive} exist, {n_gated} are gated"
            else:
                message += (f" Waiting for {ps.min_available} pods for SubGroup {ps.name}, currently {alive} "
                            f"exist, {n_gated} are gated.")
        return message

    def is_elastic(self) -> bool:
        for ps in self.pod_sets.values():   # (a loop: asked of every victim, most have one pod set)
            if ps.is_elastic():
                return True
        return False

    def is_stale(self) -> bool:
        """Some pod set is below its minimum while the job has active pods and none succeeded;
        one pass over the pods (their pod sets partition them), as every cycle asks every job."""
        active, short = 0, False
        for ps in self.pod_sets.values():
            used = 0
            for t in ps.tasks.values():
                status = t.status
                if status == Status.SUCCEEDED:
                    return False
                if status in ACTIVE_USED:
                    used += 1
            active += used
            short = short or used < ps.min_available
        return active > 0 and short

    def should_pipeline(self) -> bool:
        """Some pod set has a pipelined task and too few allocated ones: pipeline it all."""
        for ps in self.pod_sets.values():
            piped, allocated = False, 0
            for t in ps.tasks.values():
                status = t.status
                if status == Status.PIPELINED:
                    piped = True
                elif status in ACTIVE_ALLOCATED:
                    allocated += 1
            if piped and allocated < ps.min_available:
                return True
        return False

    def has_tasks_to_allocate(self, real: bool) -> bool:
        return any(t.should_allocate(real) for t in self.tasks.values())

    def unlink(self) -> None:
        """Drop the parent links of the job's sub-group tree, its only reference cycles, once
        nothing reads the job again: reference counting then frees it (see cycle.release)."""
        stack = [self.root]
        while stack:
            group = stack.pop()
            group.parent = None
            stack.extend(group.groups)
        for ps in self.pod_sets.values():
            ps.parent = None

    def allocated_resources(self) -> Resources:
        # summed in the pods' order as Resources.add would (x + 1.0 * a is x + a), without a
        # Resources per pod: every victim popped from an eviction order asks
        cpu = memory = gpus = pods = 0.0
        for t in self.tasks.values():
            if t.status in ALLOCATED:
                # the pod's request, as the reference's PodGroupInfo.Allocated adds ResReq up
                # (job_info.go AddTaskInfo): a GPU-memory request counts no GPUs there
                acc = t.request
                cpu += acc.cpu
                memory += acc.memory
                gpus += acc.gpus_quota
                pods += 1.0
        return Resources(cpu, memory, gpus, pods)

    def elastic_state(self) -> int:
        """0 below min-available in some pod set, 1 exactly at it, 2 above it (elastic order)."""
        exactly = True
        for ps in self.pod_sets.values():
            n = ps.active_allocated
            if n < ps.min_available:
                return 0
            if n > ps.min_available:
                exactly = False
        return 1 if exactly else 2

    @property
    def elastic(self) -> int:
        return self.elastic_state()

    @property
    def min_available(self) -> int:
        return sum(ps.min_available for ps in self.pod_sets.values())

    def add_fit_error(self, message: str) -> None:
        if message not in self.fit_errors:
            self.fit_errors.append(message)

    def __repr__(self) -> str:
        return f"Job({self.name}, queue={self.queue})"


class TakenVictims(Sequence[Job]):
    """The victims a queue is judged by in an eviction order: those already taken from it, then
    its next one. `taken` is the allocated (CPU, memory, GPUs) of all but the last, summed in
    order as the order took them, so judging a queue does not re-sum every earlier victim; the
    whole list is made only when something reads it (a queue-order rule), not at every pop of an
    order that may have taken thousands. `earlier` is read as it stands now: what is appended to
    it later is not part of this sequence."""

    __slots__ = ("_jobs", "_size", "earlier", "last", "taken")

    def __init__(self, earlier: list[Job], last: Job, taken: tuple[float, float, float]) -> None:
        self.earlier, self.last, self.taken = earlier, last, taken
        self._size = len(earlier)
        self._jobs: list[Job] | None = None

    def jobs(self) -> list[Job]:
        """The victims as a list: those taken, then the next one."""
        if self._jobs is None:
            self._jobs = [*self.earlier[:self._size], self.last]
        return self._jobs

    def __len__(self) -> int:
        return self._size + 1

    @overload
    def __getitem__(self, index: int) -> Job: ...
    @overload
    def __getitem__(self, index: slice) -> list[Job]: ...

    def __getitem__(self, index: int | slice) -> Job | list[Job]:
        return self.jobs()[index]

    def __iter__(self) -> Iterator[Job]:
        return iter(self.jobs())
