"""A cycle's outcome, read off the session, in the terms the cluster writes: a list of BindRequests
per job (each gang written all or nothing), the evictions, and what each job's PodGroup and pods
should say (phase, the reference's scheduling condition, Events).

Pure: nothing here talks to the API server. Names are turned back into objects through the
snapshot's `origins`; shared-GPU groups the session made up get cluster-wide unique ids.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass, field

from kaipolicy.api.job import Job
from kaipolicy.api.resources import RequestType
from kaipolicy.api.task import ACTIVE_ALLOCATED, Status, Task
from kaipolicy.cache.assemble import Assembly
from kaipolicy.cache.bindrequests import Placement
from kaipolicy.cache.eviction import Eviction
from kaipolicy.cache.podgroups import DEFAULT_POD_ERROR, FitError, JobReport, fit_errors_message
from kaipolicy.framework.closing import pending_reason
from kaipolicy.framework.outcome import EvictionRecord
from kaipolicy.framework.session import Session

Origin = tuple[str, str, str, str]          # kind, namespace, name, uid
_GROUP_IDS = uuid.UUID("7d4c4a52-5b1e-4f57-9a63-3c1c2f6f1d0b")   # uuid5 namespace of minted GPU groups
#: the reference's reasons for its two queue gates, known by the start of their messages
_GATE_REASONS = (("Non-preemptible workload is over quota", "NonPreemptibleOverQuota"),)
_LIMIT_TEXT, _LIMIT_REASON = "quota has reached the allowable limit", "OverLimit"
PLACEMENT_REASON = "PodSchedulingErrors"


@dataclass(frozen=True)
class EvictionDecision:
    eviction: Eviction
    job: Origin                   # the victim's job (its PodGroup, or the pod of a job of one)
    action: str
    served: Origin | None         # the job it made room for, when known
    gang_size: int = 1            # pods of the victim's job evicted together


@dataclass(frozen=True)
class JobDecision:
    origin: Origin
    report: JobReport
    pod_messages: tuple[tuple[Origin, str], ...] = ()   # pending pods and why
    events: tuple[tuple[str, str, str], ...] = ()        # (type, reason, message) on the job's object


@dataclass
class Decisions:
    gangs: list[tuple[Origin, list[Placement]]] = field(default_factory=list)
    evictions: list[EvictionDecision] = field(default_factory=list)
    jobs: list[JobDecision] = field(default_factory=list)
    pipelined: list[tuple[Origin, str]] = field(default_factory=list)    # pod, message
    scheduled_by_action: dict[str, int] = field(default_factory=dict)   # jobs served per action
    created: dict[str, float] = field(default_factory=dict)            # pod uid -> creation (epoch)


def decide(ssn: Session, assembly: Assembly) -> Decisions:
    """The cycle's end state as writes. A pod placed and then moved by a later action of the same
    cycle (consolidation relocating what allocate just placed) is neither written nor evicted: it
    was never bound, so it stays pending and the next cycle places it, as simulate's next cycle
    does, instead of a BindRequest followed by the deletion of a pod that never ran."""
    out = Decisions()
    origins, now = assembly.origins, assembly.now
    groups = _GroupIds(ssn, assembly)
    by_job: dict[str, list[Placement]] = defaultdict(list)
    served: dict[str, set[str]] = defaultdict(set)
    placed_now: set[tuple[str, str]] = set()
    for b in ssn.binds:
        job = ssn.cluster.jobs[b.job]
        task = _task(job, b.task)
        served[b.action].add(b.job)
        if (b.job, b.task) in placed_now:
            continue
        placed_now.add((b.job, b.task))
        if task.status != Status.BINDING:
            continue     # moved again later in the cycle: its final place is not a binding one
        origin = origins[task.name]
        by_job[b.job].append(_placement(task, origin, task.node, groups.real(task.gpu_groups, origin[3]),
                                        b.annotations))
        out.created[origin[3]] = now + task.created
    out.gangs = [(origins[name], placements) for name, placements in by_job.items()]
    for p in ssn.pipelines:
        served[p.action].add(p.job)
        out.pipelined.append((origins[p.task], p.message))
    for e in ssn.evictions:
        served[e.action].add(e.reason.get("job", ""))
        if (e.job, e.task) not in placed_now:
            out.evictions.append(_eviction(e, origins))
    out.scheduled_by_action = {action: len(jobs - {""}) for action, jobs in sorted(served.items())
                               if action not in ("", "stalegangeviction")}
    warnings = _warnings_by_job(ssn)
    for job in sorted(ssn.cluster.jobs.values(), key=lambda j: j.order):
        out.jobs.append(_job_decision(ssn, job, origins, now, warnings.get(job.name, ())))
    return out


def _task(job: Job, name: str) -> Task:
    return next(t for t in job.tasks.values() if t.name == name)


def _placement(task: Task, origin: Origin, node: str, gpu_groups: tuple[str, ...],
               annotations: dict[str, str]) -> Placement:
    """The GPUs the pod receives on its node, as the reference's BindRequest says them."""
    got = task.accepted or task.request
    if got.kind == RequestType.MIG:
        kind, count, portion = "MigInstance", 0, 0.0
    elif got.kind in (RequestType.FRACTION, RequestType.GPU_MEMORY):
        kind, count, portion = "Fraction", got.count, got.portion
    else:
        kind, count, portion = "Regular", int(got.gpus), 1.0 if got.gpus >= 1 else 0.0
    return Placement(origin[1], origin[2], origin[3], node, gpu_groups, kind, count, portion, dict(annotations))


class _GroupIds:
    """Shared-GPU groups the session made up ("new-1"...) get ids unique across the cluster and
    the same for the same decision: derived from the first pod placed in the group."""

    def __init__(self, ssn: Session, assembly: Assembly) -> None:
        existing = {g for j in assembly.doc.get("jobs") or [] for t in j.get("tasks") or []
                    for g in t.get("gpuGroups") or []}
        self.minted = {g for j in ssn.cluster.jobs.values() for t in j.tasks.values() for g in t.gpu_groups
                       if g.startswith("new-") and g not in existing}
        self.ids: dict[str, str] = {}

    def real(self, groups: list[str], pod_uid: str) -> tuple[str, ...]:
        out = []
        for g in groups:
            if g in self.minted:
                g = self.ids.setdefault(g, str(uuid.uuid5(_GROUP_IDS, f"{pod_uid}/{g}")))
            out.append(g)
        return tuple(out)


def _eviction(e: EvictionRecord, origins: dict[str, Origin]) -> EvictionDecision:
    pod = origins[e.task]
    served = origins.get(e.reason.get("job", ""))
    size = e.reason.get("gangSize", "1")
    return EvictionDecision(Eviction(pod[1], pod[2], pod[3], e.message), origins[e.job], e.action, served,
                            int(size) if str(size).isdigit() else 1)


def _warnings_by_job(ssn: Session) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = defaultdict(list)
    for text, job in ssn.warning_jobs.items():
        out[job].append(text)
    return {job: tuple(texts) for job, texts in out.items()}


def _job_decision(ssn: Session, job: Job, origins: dict[str, Origin], now: float,
                  warnings: tuple[str, ...]) -> JobDecision:
    statuses = [t.status for t in job.tasks.values()]
    counts = {"running": statuses.count(Status.RUNNING),
              "pending": sum(s not in (Status.RUNNING, Status.SUCCEEDED, Status.FAILED, Status.RELEASING)
                             for s in statuses),
              "succeeded": statuses.count(Status.SUCCEEDED), "failed": statuses.count(Status.FAILED)}
    fit = tuple(FitError(_reason(ssn, job, m), m) for m in job.fit_errors)
    pending = [t for t in sorted(job.tasks.values(), key=lambda t: t.order) if t.status == Status.PENDING]
    events: list[tuple[str, str, str]] = [("Warning", "PolicyWarning", w) for w in warnings]
    not_ready = job.not_ready_reason()
    messages: list[tuple[Origin, str]] = []
    if job.stale_since is not None:
        stale = f"Job is stale. {job.active_used} pods are active, minMember is {job.min_available}"
        events.append(("Normal", "StaleJob", stale))
    if not_ready is not None:
        events.append(("Normal", "NotReady", not_ready))
    elif pending:
        why = fit_errors_message(fit) if fit else pending_reason(ssn, job)
        events.append(("Normal", "Unschedulable", why))
        for t in pending:
            messages.append((origins[t.name], job.task_fit_errors.get(t.uid) or why or DEFAULT_POD_ERROR))
    report = JobReport(job.namespace, origins[job.name][2], _phase(job), counts, fit,
                       unschedulable=bool(pending) and not_ready is None and job.active_allocated == 0,
                       last_start=None if job.last_start is None else now + job.last_start,
                       stale_since=None if job.stale_since is None else now + job.stale_since)
    return JobDecision(origins[job.name], report, tuple(messages), tuple(events))


def _phase(job: Job) -> str:
    """kaipolicy's phase (the reference's scheduler leaves it empty): Pending until the job's
    minimum holds nodes, Scheduled once it does, Running once that minimum runs."""
    if not job.gang_satisfied() or job.count(ACTIVE_ALLOCATED) < job.min_available:
        return "Pending"
    running = sum(1 for t in job.tasks.values() if t.status == Status.RUNNING)
    return "Running" if running >= job.min_available else "Scheduled"


def _reason(ssn: Session, job: Job, message: str) -> str:
    """The reference's reason for a fit error: its queue gates by their messages, another rule's
    gate by the rule, anything else a pod-placement error."""
    denial = ssn.job_denials.get(job.uid, {}).get("allocate")
    if denial is None or denial.message != message:
        return PLACEMENT_REASON
    if _LIMIT_TEXT in message:
        return _LIMIT_REASON
    for start, reason in _GATE_REASONS:
        if message.startswith(start):
            return reason
    return denial.rule or PLACEMENT_REASON
