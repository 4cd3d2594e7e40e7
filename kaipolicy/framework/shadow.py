"""Warn and audit rules' would-be verdicts, and the audit records of evictions.

A rule in warn or audit mode sits in the session's shadow slots: it is evaluated beside the
enforced rules and `would` records what it would have denied (warn mode also keeps a warning
for the text output). Shadow victim filters are asked about evictions that happened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kaipolicy.api.job import Job
from kaipolicy.api.task import Task

if TYPE_CHECKING:
    from kaipolicy.framework.session import Rule, Session

VICTIM_FILTERS = {"reclaim": "reclaimVictimFilter", "preempt": "preemptVictimFilter"}


def refuses(value: Any) -> bool:
    """An allow rule's result that refuses: False, not None (the rule does not apply) and not a
    failure (the session's error marker is truthy)."""
    return value is not None and not value


def subject(env: dict[str, Any]) -> dict[str, str]:
    """What a verdict was about, by name."""
    out: dict[str, str] = {}
    job = env.get("job")
    if job is not None:
        out["job"], out["namespace"] = job.name, job.namespace
    for key in ("task", "node", "victim", "queue"):
        value = env.get(key)
        if value is not None and hasattr(value, "name"):
            out[key] = value.name
    return out


def would(ssn: Session, rule: Rule, message: str, env: dict[str, Any]) -> None:
    """A warn or audit rule would have denied (or refused): recorded, and nothing changes."""
    if ssn.quiet:
        return
    about = subject(env)
    if ssn.coverage is not None:
        ssn.coverage.hit(rule.label)
    ssn.audit.add("shadow", action=ssn.action, rule=rule.label, mode=rule.mode, hook=rule.hook_name,
                  verdict="deny", message=message, **about)
    if rule.mode == "warn":
        names = ", ".join(f"{k} {v}" for k, v in about.items() if k != "namespace")
        text = f"{rule.label} (warn) would deny {names} in {ssn.action or 'the cycle'}: {message}"
        ssn.warnings[text] = None
        if "job" in about:
            ssn.warning_jobs.setdefault(text, about["job"])


def audit_eviction(ssn: Session, task: Task, node: str, message: str, reason: dict[str, str]) -> None:
    """The eviction record, then the shadow victim filters: "this rule would have kept it running"."""
    victim = ssn.cluster.jobs[task.job]
    served = reason.get("job", "")
    rules = [r for r in reason.get("rules", "").split(", ") if r]
    note = {"note": reason["rule"]} if "rule" in reason else {}
    ssn.audit.add("eviction", action=ssn.action, job=victim.name, namespace=victim.namespace, queue=victim.queue,
                  task=task.name, node=node, servedJob=served, allowedBy=rules, message=message, **note)
    kind = VICTIM_FILTERS.get(ssn.action, "")
    preemptor = _job_named(ssn, served) if kind and ssn.shadow[kind] else None
    if preemptor is None:
        return
    env = {"job": preemptor, "victim": victim, "cluster": ssn}
    for rule in ssn.shadow[kind]:
        if refuses(ssn.evaluate(rule, env)):
            would(ssn, rule, f"{rule.label} would not let {victim.key} be evicted for {served}",
                  env)


def _job_named(ssn: Session, key: str) -> Job | None:
    return next((j for j in ssn.cluster.jobs.values() if j.key == key), None)
