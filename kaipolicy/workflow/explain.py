"""`kaipolicy explain`: why a job (or pod) is pending, placed where it is, or was evicted, in
plain language built from the audit records alone, naming the rules and the numbers.

`explain(records, name)` gives an `Explanation`; `render()` is the text, `to_dict()` the JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kaipolicy.api.task import qualified
from kaipolicy.framework.audit import RESOURCES_RULE
from kaipolicy.workflow.records import Record, Subject, UnknownSubject, about, find_subject

ACTION_FAILED = {
    "consolidation": "consolidation found no running pods it could move to make room",
    "reclaim": "reclaim found no pods of other queues it may take back within the fair-share rules",
    "preempt": "preempt found no lower-priority pods of its own queue whose eviction makes room",
}


@dataclass
class Explanation:
    job: str
    namespace: str
    queue: str
    task: str | None
    status: str                 # pending | bound | pipelined | evicted | unchanged
    cycle: int
    summary: str
    details: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)      # every rule the answer names, in order
    queue_numbers: dict[str, Any] | None = None

    def render(self) -> str:
        who = (f"pod {qualified(self.namespace, self.task)} (job {self.job})" if self.task
               else f"job {qualified(self.namespace, self.job)}")
        lines = [f"{who} in queue {self.queue}, cycle {self.cycle}: {self.summary}"]
        lines += ["  - " + d.replace("\n", "\n      ") for d in self.details]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "namespace": self.namespace, "queue": self.queue, "task": self.task,
                "status": self.status, "cycle": self.cycle, "summary": self.summary, "details": self.details,
                "rules": self.rules, "queueNumbers": self.queue_numbers}


def explain_run(records: list[Record], report: dict[str, Any], name: str) -> Explanation:
    """explain() for a scenario just run: a job the cycle left alone is described from the report."""
    try:
        return explain(records, name)
    except UnknownSubject:
        short = name.rpartition("/")[2]
        tasks = [t for t in report["tasks"] if short in (t["job"], t["name"])]
        if not tasks:
            raise
        job = next(j for j in report["jobs"] if j["name"] == tasks[0]["job"])
        states = ", ".join(sorted({f"{t['status']}" + (f" on {t['node']}" if t["node"] else "") for t in tasks}))
        return Explanation(job["name"], "", job["queue"], short if short != job["name"] else None, "unchanged",
                           report["cycles"], f"no action decided anything about it; its pods are {states}")


def explain(records: list[Record], name: str) -> Explanation:
    subject = find_subject(records, name)
    mine = about(records, subject)
    cycle = max(r["cycle"] for r in mine)
    now = [r for r in mine if r["cycle"] == cycle]
    outcome = next((r for r in reversed(now) if r["kind"] == "outcome"), None)
    queue = next((r["queue"] for r in mine if "queue" in r), "?")
    ex = Explanation(subject.job, subject.namespace, queue, subject.task,
                     outcome["status"] if outcome else "unchanged", cycle,
                     outcome["reason"] if outcome else "nothing about it was decided in its last cycle")
    ex.queue_numbers = (outcome or {}).get("queueNumbers") or _last_numbers(now)
    _evictions(ex, subject, mine, records)
    for r in now:
        if r["kind"] == "task" and (subject.task is None or r["task"] == subject.task):
            _task(ex, r)
        elif r["kind"] == "job":
            _job(ex, r)
        elif r["kind"] in ("shadow", "error"):
            _side(ex, r)
    _victim_shadows(ex, subject, records, cycle)
    if ex.queue_numbers is not None:
        ex.details.append(_queue_line(ex.queue_numbers))
    return ex


def _name(ex: Explanation, rule: str) -> str:
    if rule and not rule.startswith("(") and rule not in ex.rules:   # "(...)": a check built into the engine
        ex.rules.append(rule)
    return rule


def _task(ex: Explanation, r: Record) -> None:
    pod = f"pod {r['task']}"
    if r.get("deniedBy"):
        d = r["deniedBy"]
        ex.details.append(f"{r['action']}: {pod} was refused on every node by rule {_name(ex, d['rule'])}: {d['message']}")
        return
    groups = r.get("rejected") or []
    rejected = "; ".join(_group(ex, g) for g in groups)
    if r["outcome"] == "unplaced":
        total = sum(g["count"] for g in groups)
        ex.details.append(f"{r['action']}: {pod} found no node: {total} of {r['nodes']} nodes rejected ({rejected})"
                          if groups else f"{r['action']}: {pod} found no node among {r['nodes']}")
        return
    chosen, runner = r["scores"]["chosen"], r["scores"]["runnerUp"]
    line = f"{r['action']}: {pod} {r['outcome']} on {chosen['node']} (score {_score(ex, chosen)})"
    if runner is not None:
        line += f"; runner-up {runner['node']} (score {_score(ex, runner)})"
    if groups:
        line += f"; better-scored nodes passed over: {rejected}"
    ex.details.append(line)


def _group(ex: Explanation, g: Record) -> str:
    n = g["count"]
    nodes = f"{n} node" + ("" if n == 1 else "s")
    if g["rule"] == RESOURCES_RULE:
        return f"{nodes} lacked free resources (closest: {g['message']})"
    return f"{nodes} by rule {_name(ex, g['rule'])} (e.g. node {g['sampleNode']}: {g['message']})"


def _score(ex: Explanation, s: Record) -> str:
    parts = ", ".join(f"{_name(ex, rule)} {value:g}" for rule, value in sorted(s["rules"].items(), key=lambda kv: -kv[1]))
    text = f"{s['total']:g}" + (f" = {parts}" if parts else "")
    shadow = s.get("shadowRules") or {}
    if shadow:
        text += "; not counted (warn/audit): " + ", ".join(f"{_name(ex, k)} {v:g}" for k, v in shadow.items())
    return text


def _job(ex: Explanation, r: Record) -> None:
    action = r["action"]
    if r.get("deniedBy"):
        d = r["deniedBy"]
        why = d["message"]
        if why.startswith("refused by") and r.get("queueNumbers"):
            # an allow rule has no message of its own: the queue's numbers are what it judged
            q = r["queueNumbers"]
            why = (f"queue {q['name']} holds {q['allocatedGpus']:g} GPUs and the job asks for "
                   f"{q['requestedGpus']:g} more; fair share {_amount(q['fairShareGpus'])}, "
                   f"deserved {_amount(q['deservedGpus'])}, limit {_amount(q['limitGpus'])}")
        ex.details.append(f"{action}: rule {_name(ex, d['rule'])} refused the job: {why}")
    elif r["outcome"] == "pending" and r.get("gang") and r["gang"]["needed"] > 1:
        g = r["gang"]
        where = f" in sub-group {g['subGroup']}" if g["subGroup"] else ""
        ex.details.append(f"{action}: the gang needs {g['needed']} pods{where} and only {g['placed']} fit; "
                          f"pod {g['task']}: {g['why']}")
    elif r["outcome"] == "pending" and action in ACTION_FAILED:
        refused = "; ".join(f"rule {_name(ex, rule)} refused {n} time(s)" for rule, n in (r.get("refusals") or {}).items())
        ex.details.append(ACTION_FAILED[action] + (f" ({refused})" if refused else ""))
    elif r["outcome"] == "skipped":
        ex.details.append(f"{action}: skipped, {r.get('reason', '')}")
    elif r["outcome"] in ("reclaimed", "preempted", "consolidated") and r.get("victims"):
        ex.details.append(f"{action}: made room by evicting {', '.join(r['victims'])}")
    if r.get("queueNumbers"):
        ex.queue_numbers = r["queueNumbers"]


def _side(ex: Explanation, r: Record) -> None:
    if r["kind"] == "error":
        ex.details.append(f"{r['action'] or 'cycle'}: rule {_name(ex, r['rule'])} failed ({r['message']}); "
                          "a failure never counts as allow or deny")
        return
    ex.details.append(f"{r['action']}: rule {_name(ex, r['rule'])} ({r['mode']} mode) would deny: {r['message']}")


def _evictions(ex: Explanation, subject: Subject, mine: list[Record], records: list[Record]) -> None:
    for r in mine:
        if r["kind"] != "eviction" or (subject.task is not None and r["task"] != subject.task):
            continue
        rules = ", ".join(_name(ex, rule) for rule in r["allowedBy"]) or r.get("note", "no rule")
        numbers = "".join(f"\n{line}" for line in r["message"].split("\n")[1:])
        ex.details.append(f"cycle {r['cycle']} {r['action']}: pod {r['task']} on {r['node']} evicted for "
                          f"{r['servedJob']}, allowed by {rules}" + (f"; the queues then:{numbers}" if numbers else ""))


def _victim_shadows(ex: Explanation, subject: Subject, records: list[Record], cycle: int) -> None:
    for r in records:
        if r["kind"] == "shadow" and r.get("victim") == subject.job and r.get("source") == subject.source:
            ex.details.append(f"cycle {r['cycle']} {r['action']}: rule {_name(ex, r['rule'])} ({r['mode']} mode) "
                              f"would have kept it: {r['message']}")


def _last_numbers(records: list[Record]) -> dict[str, Any] | None:
    return next((r["queueNumbers"] for r in reversed(records) if r.get("queueNumbers")), None)


def _amount(v: float | None) -> str:
    return "unlimited" if v is None else f"{v:g}"


def _queue_line(q: dict[str, Any]) -> str:
    return (f"queue {q['name']}: {_amount(q['allocatedGpus'])} GPUs allocated, deserved {_amount(q['deservedGpus'])}, "
            f"fair share {_amount(q['fairShareGpus'])}, limit {_amount(q['limitGpus'])}; "
            f"its pending pods ask for {_amount(q['requestedGpus'])} GPUs")
