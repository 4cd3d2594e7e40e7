"""Closing a session for the audit log: each job's failure in an action, and its final outcome
in one sentence, with the queue numbers behind it.

`job_failure` is the record an action writes when a job is not served; `close_session` writes
one `outcome` record per job the cycle touched (placed, pipelined, evicted or still pending).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from kaipolicy.api.job import Job
from kaipolicy.api.queue import UNLIMITED
from kaipolicy.api.task import Status, qualified

if TYPE_CHECKING:
    from kaipolicy.framework.session import Session


def queue_numbers(ssn: Session, job: Job) -> dict[str, Any] | None:
    """The job's queue in GPUs (allocated, deserved, fair share, limit; null = unlimited) and what
    the job's pending pods ask for."""
    share = ssn.shares.queues.get(job.queue)
    if share is None:
        return None
    gpu = share.shares["gpu"]
    asked = sum(t.request.gpus for t in job.tasks.values() if t.status == Status.PENDING)
    return {"name": share.queue.name, "allocatedGpus": _gpus(gpu.allocated), "deservedGpus": _gpus(gpu.deserved),
            "fairShareGpus": _gpus(gpu.fair_share), "limitGpus": _gpus(gpu.max_allowed),
            "requestedGpus": round(asked, 4)}


def _gpus(value: float) -> float | None:
    return None if value == UNLIMITED else round(value, 4)


def job_failure(ssn: Session, job: Job, action: str) -> dict[str, Any]:
    """The `job` record of an action that did not serve `job`: the gate that closed, the fit
    errors, the gang that fell short and the queue numbers."""
    record: dict[str, Any] = {"action": action, "job": job.name, "namespace": job.namespace, "queue": job.queue,
                              "outcome": "pending"}
    denial = ssn.job_denials.get(job.uid, {}).get(action)
    if denial is not None:
        record["deniedBy"] = {"rule": denial.rule, "message": denial.message}
    if action == "allocate" and job.fit_errors:
        record["reasons"] = list(job.fit_errors)
    refusals = {rule: n for rule, n in ssn.refusals.items() if not denial or rule != denial.rule}
    if refusals and action != "allocate":
        record["refusals"] = dict(sorted(refusals.items()))
    gang = ssn.gangs_short.get(job.uid)
    if gang is not None and action == "allocate":
        record["gang"] = gang
    numbers = queue_numbers(ssn, job)
    if numbers is not None:
        record["queueNumbers"] = numbers
    return record


def close_session(ssn: Session) -> None:
    """One `outcome` record per job the cycle placed, pipelined, evicted or left pending."""
    if not ssn.audit.enabled:
        return
    bound: dict[str, list[str]] = defaultdict(list)
    for b in ssn.binds:
        bound[b.job].append(b.node)
    piped: dict[str, list[str]] = defaultdict(list)
    for p in ssn.pipelines:
        piped[p.job].append(p.node)
    evicted: dict[str, list[Any]] = defaultdict(list)
    for e in ssn.evictions:
        evicted[e.job].append(e)
    for job in sorted(ssn.cluster.jobs.values(), key=lambda j: j.order):
        pending = sum(1 for t in job.tasks.values() if t.status == Status.PENDING)
        if not (pending or job.uid in bound or job.uid in piped or job.uid in evicted):
            continue
        status, reason = _outcome(ssn, job, pending, bound.get(job.uid, []), piped.get(job.uid, []),
                                  evicted.get(job.uid, []))
        record: dict[str, Any] = {"job": job.name, "namespace": job.namespace, "queue": job.queue,
                                  "status": status, "reason": reason}
        if status in ("pending", "evicted") or pending:
            numbers = queue_numbers(ssn, job)
            if numbers is not None:
                record["queueNumbers"] = numbers
        ssn.audit.add("outcome", action="", **record)


def _outcome(ssn: Session, job: Job, pending: int, bound: list[str], piped: list[str],
             evicted: list[Any]) -> tuple[str, str]:
    if evicted:
        first = evicted[0]
        rules = first.reason.get("rules") or first.reason.get("rule") or "no rule named"
        return "evicted", (f"evicted by {first.action} for {first.reason.get('job', '?')}: {len(evicted)} pod(s) "
                           f"released, allowed by {rules}")
    rest = f"; {pending} pod(s) still pending: {pending_reason(ssn, job)}" if pending else ""
    if bound:
        return "bound", f"bound: {len(bound)} pod(s) sent to {_nodes(bound)}{rest}"
    if piped:
        return "pipelined", (f"pipelined: {len(piped)} pod(s) wait on {_nodes(piped)} for resources being "
                             f"released{rest}")
    return "pending", f"pending: {pending_reason(ssn, job)}"


def pending_reason(ssn: Session, job: Job) -> str:
    """Why a job's pods are still pending, in one sentence."""
    # allocate's reason first: the eviction actions only say why they could not help
    denials = ssn.job_denials.get(job.uid, {})
    for action, outcome in sorted(denials.items(), key=lambda kv: kv[0] != "allocate"):
        if action == "allocate" or "allocate" not in ssn.config.actions:
            return f"{outcome.rule or 'the scheduler'} refused it in {action}: {one_sentence(outcome.message)}"
    gang = ssn.gangs_short.get(job.uid)
    if gang is not None and gang["needed"] > 1:
        return (f"its gang needs {gang['needed']} pods and only {gang['placed']} fit"
                f"{_sub_group(gang)}: {one_sentence(gang['why'])}")
    if gang is not None:
        return f"no node takes pod {qualified(job.namespace, gang['task'])}: {one_sentence(gang['why'])}"
    if job.fit_errors:
        return one_sentence(job.fit_errors[0])
    if job.gang_satisfied() and job.is_elastic():
        return (f"its minimum of {job.min_available} pods is met; the other pods are elastic extras "
                "that found no room this cycle")
    for action, outcome in denials.items():
        return f"{outcome.rule or 'the scheduler'} refused it in {action}: {one_sentence(outcome.message)}"
    if not job.ready():
        return f"fewer pods are ready than its minimum of {job.min_available} (gated or missing pods)"
    return "no action reached it this cycle (queue depth, or a job with the same requirements already failed)"


def _sub_group(gang: dict[str, Any]) -> str:
    return f" in sub-group {gang['subGroup']}" if gang.get("subGroup") else ""


def one_sentence(text: str) -> str:
    return text.strip().rstrip(".").replace(". ", "; ").replace("\n", " ")


def _nodes(names: list[str]) -> str:
    unique = sorted(set(names))
    return ("node " if len(unique) == 1 else "nodes ") + ", ".join(unique)
