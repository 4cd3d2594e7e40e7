"""Min-runtime protection of victims: a job that started less than its min-runtime ago may not be
preempted or reclaimed (elastic jobs may still lose the pods above their minimum).

Queue min-runtimes are inherited down the queue tree; the plugin's defaults apply where no queue
sets one. For reclaim, the `lca` method reads the value from the child of the two queues' lowest
common ancestor on the victim's side (and up from there); `queue` reads the victim's own queue
(and up). Durations are Go-style strings such as "90s", "1h30m".
"""

from __future__ import annotations

import re
from typing import Any

from kaipolicy.api.job import DEFAULT_SUB_GROUP, Job
from kaipolicy.api.queue import Queue
from kaipolicy.api.task import ACTIVE_USED

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Seconds in a Go duration string; a malformed or negative one is an error."""
    s = text.strip()
    if s in ("0", ""):
        return 0.0
    if s.startswith("-"):
        raise ValueError(f"min-runtime {text!r} is negative")
    s = s.lstrip("+")
    pos, total = 0, 0.0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            raise ValueError(f"min-runtime {text!r} is not a duration (e.g. 90s, 1h30m)")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return total


def _path_down(queues: dict[str, Queue], uid: str) -> list[Queue]:
    """Top-level queue first, down to `uid`."""
    out: list[Queue] = []
    q = queues.get(uid)
    while q is not None:
        out.append(q)
        q = queues.get(q.parent) if q.parent else None
    return out[::-1]


def preempt_min_runtime(queues: dict[str, Queue], victim_queue: str, default: float) -> float:
    for q in reversed(_path_down(queues, victim_queue)):
        if q.preempt_min_runtime is not None:
            return float(q.preempt_min_runtime)
    return default


def reclaim_min_runtime(queues: dict[str, Queue], reclaimer_queue: str, victim_queue: str, default: float,
                        method: str) -> float:
    victim_path = _path_down(queues, victim_queue)
    if not victim_path or reclaimer_queue not in queues:
        return default
    if method == "queue":
        start = len(victim_path) - 1
    else:
        reclaimer_path = _path_down(queues, reclaimer_queue)
        if reclaimer_path[0].uid != victim_path[0].uid:
            # different top-level trees: siblings under an implicit root
            top = victim_path[0].reclaim_min_runtime
            return default if top is None else float(top)
        lca = 0
        for i, (a, b) in enumerate(zip(reclaimer_path, victim_path)):
            if a.uid != b.uid:
                break
            lca = i
        start = lca + 1 if lca + 1 < len(victim_path) else lca
    for q in reversed(victim_path[: start + 1]):
        if q.reclaim_min_runtime is not None:
            return float(q.reclaim_min_runtime)
    return default


def protected(now: float, victim: Job, minimum: float) -> bool:
    return victim.last_start is not None and now < victim.last_start + minimum


def reclaim_protected(cluster: Any, job: Job, victim: Job, default: str, method: str) -> bool:
    key = ("minruntime-reclaim", job.queue, victim.queue, default, method)
    minimum = cluster.cache.get(key)
    if minimum is None:
        minimum = cluster.cache[key] = reclaim_min_runtime(cluster.cluster.queues, job.queue, victim.queue,
                                                           parse_duration(default), method)
    return protected(cluster.cluster.now, victim, minimum)


def preempt_protected(cluster: Any, victim: Job, default: str) -> bool:
    key = ("minruntime-preempt", victim.queue, default)
    minimum = cluster.cache.get(key)
    if minimum is None:
        minimum = cluster.cache[key] = preempt_min_runtime(cluster.cluster.queues, victim.queue,
                                                           parse_duration(default))
    return protected(cluster.cluster.now, victim, minimum)


def keeps_min_available(victim: Any) -> bool:
    """Taking the victim's listed pods leaves each of its pod sets at least its minimum
    (pods already Releasing still count as running, as in the reference)."""
    job: Job = victim.job
    taken: dict[str, int] = {}
    for t in victim.tasks:
        name = t.sub_group or DEFAULT_SUB_GROUP
        taken[name] = taken.get(name, 0) + 1
    for name, n in taken.items():
        ps = job.pod_sets.get(name)
        if ps is None:
            continue
        running = sum(1 for t in ps.tasks.values() if t.status in ACTIVE_USED)
        if ps.min_available > running - n:
            return False
    return True
