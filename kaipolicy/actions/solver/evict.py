"""Evicting a scenario's victims through the Statement, each with the reference's message and a
reason naming the preemptor, the action and the rules that allowed it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kaipolicy.api.job import Job
from kaipolicy.api.queue import RESOURCES, UNLIMITED, Queue
from kaipolicy.api.task import Task
from kaipolicy.framework.session import Session
from kaipolicy.framework.statement import Statement


def evict_all(ssn: Session, stmt: Statement, tasks: Sequence[Task], preemptor: Job, action: str,
              rules: str) -> None:
    reason = {"job": preemptor.key, "action": action, "rules": rules,
              "gangSize": str(len(tasks))}
    # Every message is written before the first eviction, so all of them show the same queue
    # numbers, as in the reference; the queue lines are therefore the same for one victim queue.
    details: dict[str, str] = {}
    messages = [eviction_message(ssn, action, t, preemptor, details) for t in tasks]
    for task, message in zip(tasks, messages):
        stmt.evict(task, message, reason)


def eviction_message(ssn: Session, action: str, task: Task, preemptor: Job,
                     details: dict[str, str] | None = None) -> str:
    if action == "preempt":
        return f"Pod {task.key} was preempted by higher priority workload {preemptor.key}"
    if action == "consolidation":
        return (f"Pod {task.key} was preempted and rescheduled due to bin packing "
                "(resource consolidation) procedure")
    msg = f"Pod {task.key} was preempted by workload {preemptor.key}."
    victim_job = ssn.cluster.jobs.get(task.job)
    if victim_job is None:
        return msg
    if details is None:
        details = {}
    lines = details.get(victim_job.queue)
    if lines is None:
        lines = details[victim_job.queue] = _reclaim_details(ssn, preemptor.queue, victim_job.queue)
    return f"{msg}\n{lines}" if lines else msg


def _reclaim_details(ssn: Session, reclaimer_queue: str, reclaimee_queue: str) -> str:
    queues = ssn.cluster.queues
    reclaimer, reclaimee = queues.get(reclaimer_queue), queues.get(reclaimee_queue)
    if reclaimer is None or reclaimee is None:
        return ""
    if reclaimer.parent != reclaimee.parent:
        reclaimer = queues.get(reclaimer.parent or "")
        reclaimee = queues.get(reclaimee.parent or "")
        if reclaimer is None or reclaimee is None:
            return ""
    # The lines read only the two queues' allocations beyond what is fixed for the session (fair
    # share, quota, priority): remembered by those, as every scenario of a job writes them again.
    memo: dict[tuple[Any, ...], str] = ssn.cache.setdefault(("reclaim-details",), {})
    key = (reclaimee.uid, reclaimer.uid, _allocated(ssn, reclaimee), _allocated(ssn, reclaimer))
    text = memo.get(key)
    if text is None:
        if len(memo) >= DETAILS_KEPT:
            memo.clear()
        text = memo[key] = f"{_queue_details(ssn, reclaimee)}\n{_queue_details(ssn, reclaimer)}"
    return text


#: Queue lines of eviction messages remembered at once.
DETAILS_KEPT = 4096


def _allocated(ssn: Session, queue: Queue) -> tuple[float, ...]:
    shares = ssn.queue_share(queue.uid).shares
    return tuple(shares[r].allocated for r in RESOURCES)


def _queue_details(ssn: Session, queue: Queue) -> str:
    share = ssn.queue_share(queue.uid)
    return (f"{queue.name} uses <{_resources(share.get('allocated'))}> with a quota of "
            f"<{_resources(share.get('deserved'))}>, fair-share of <{_resources(share.get('fair_share'))}> "
            f"and queue priority of <{queue.priority}>.")


def _resources(v: dict[str, float]) -> str:
    return f"GPU: {_human(v['gpu'], 1)}, CPU: {_human(v['cpu'], 1000)} (cores), memory: {_human(v['memory'], 1e9)} (GB)"


def _human(value: float, unit: float) -> str:
    if value == UNLIMITED:
        return "Unlimited"
    text = f"{value / unit:.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text
