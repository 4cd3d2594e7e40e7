"""What a cycle writes on a PodGroup: its timestamps, phase and counts, and the reference's
`UnschedulableOnNodePool` scheduling condition, each as a patch against the live object (None when
the object already says so, so that a steady cluster costs no writes).

The condition is kept as the reference keeps it: one per node pool, the newest last, with a
transition id one above the newest one seen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kaipolicy.cache.convert import LAST_START_ANNOTATION, NODE_POOL_LABEL, STALE_SINCE_ANNOTATION
from kaipolicy.cache.kubeapi import Obj

CONDITION_TYPE, CONDITION_REASON = "UnschedulableOnNodePool", "Unschedulable"
DEFAULT_NODE_POOL = "default"
DEFAULT_POD_ERROR = "Unable to schedule pod"
DEFAULT_PODGROUP_ERROR = "Unable to schedule podgroup"
_COMPARED = ("type", "nodePool", "reason", "message", "status")
_SEPARATOR = ". \n"     # the reference's, between the messages of several fit errors


@dataclass(frozen=True)
class FitError:
    reason: str      # PodSchedulingErrors, OverLimit, NonPreemptibleOverQuota, or the rule that closed a gate
    message: str


@dataclass(frozen=True)
class JobReport:
    """A job's state after a cycle, in the terms the PodGroup status speaks."""

    namespace: str
    name: str
    phase: str                                   # Pending | Running
    counts: dict[str, int] = field(hash=False)   # running, pending, succeeded, failed
    fit_errors: tuple[FitError, ...] = ()
    #: set the condition: pods are pending, the job is ready and none of its pods holds a node
    unschedulable: bool = False
    last_start: float | None = None              # seconds since the epoch
    stale_since: float | None = None


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def fit_errors_message(errors: tuple[FitError, ...]) -> str:
    """The reference's one-line summary: the single reason (or the generic one), then the
    messages sorted, a repeated one prefixed with its count."""
    reason = errors[0].reason if len(errors) == 1 else DEFAULT_PODGROUP_ERROR
    counts: dict[str, int] = {}
    for e in errors:
        counts[e.message] = counts.get(e.message, 0) + 1
    parts = sorted(f"{n} {m}" if n > 1 else m for m, n in counts.items())
    return f"{reason}: {_SEPARATOR.join(parts)}." if parts else reason


def annotations_patch(obj: Obj, report: JobReport) -> Obj | None:
    """The last-start and stale timestamps, set or removed."""
    have = (obj.get("metadata") or {}).get("annotations") or {}
    want: dict[str, str | None] = {}
    for key, when in ((LAST_START_ANNOTATION, report.last_start), (STALE_SINCE_ANNOTATION, report.stale_since)):
        if when is None:
            if key in have:
                want[key] = None
        elif _moved(have.get(key), when):
            want[key] = rfc3339(when)
    return {"metadata": {"annotations": want}} if want else None


def _moved(text: str | None, when: float) -> bool:
    """Whether the annotation is a second or more away from `when`: it keeps whole seconds, and a
    time read back from it through the snapshot's minutes-ago comes back a hair off."""
    if not text:
        return True
    try:
        return abs(datetime.fromisoformat(text).timestamp() - when) >= 1.0
    except ValueError:
        return True


def status_patch(obj: Obj, report: JobReport, now: float) -> Obj | None:
    """Phase, counts and (for an unschedulable job) the scheduling condition."""
    have = obj.get("status") or {}
    want: dict[str, Any] = {k: v for k, v in ({"phase": report.phase} | report.counts).items() if have.get(k) != v}
    if report.unschedulable:
        conditions = _conditions(obj, report, now)
        if conditions is not None:
            want["schedulingConditions"] = conditions
    return {"status": want} if want else None


def _conditions(obj: Obj, report: JobReport, now: float) -> list[Obj] | None:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    pool = labels.get(NODE_POOL_LABEL) or DEFAULT_NODE_POOL
    message = fit_errors_message(report.fit_errors) if report.fit_errors else DEFAULT_PODGROUP_ERROR
    if ((obj.get("spec") or {}).get("schedulingBackoff")) == 1:
        message = f"Node-Pool '{pool}': {message}"
    new: Obj = {"type": CONDITION_TYPE, "nodePool": pool, "reason": CONDITION_REASON, "message": message,
                "status": "True", "reasons": [{"reason": e.reason, "message": e.message} for e in report.fit_errors]}
    current: list[Obj] = list((obj.get("status") or {}).get("schedulingConditions") or [])
    last = max(current, key=_transition, default=None)
    ours_last = bool(current) and current[-1].get("nodePool") == pool
    if last is not None and all(last.get(k) == new[k] for k in _COMPARED) and ours_last:
        return None
    new["transitionID"] = str((_transition(last) if last is not None else 0) + 1)
    new["lastTransitionTime"] = rfc3339(now)
    return [c for c in current if c.get("nodePool") != pool] + [new]


def _transition(condition: Obj) -> int:
    try:
        return max(int(str(condition.get("transitionID", "0"))), 0)
    except ValueError:
        return 0
