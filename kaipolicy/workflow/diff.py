"""`kaipolicy diff`: the same scenarios under two bundles, and every decision that differs.

Per scenario: pods placed in one run and pending in the other, or on another node, or in another
state; evictions added or removed; per queue the GPUs allocated after the last cycle; for each
difference the rules responsible, read from the audit log of the run that decided it. Up front,
the rules that differ between the two bundles.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from kaipolicy.framework.audit import Audit
from kaipolicy.rules import Bundle
from kaipolicy.simulate import SimulationResult, simulate_file

HOLDING = frozenset({"Running", "Binding", "Bound", "Allocated", "Pipelined"})


@dataclass
class Difference:
    kind: str             # task | eviction | queue
    subject: str          # namespace/pod, or a queue name
    before: str
    after: str
    rules: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "subject": self.subject, "before": self.before, "after": self.after,
                "rules": self.rules}

    def render(self) -> str:
        why = f"   [{'; '.join(self.rules)}]" if self.rules else ""
        return f"{self.kind} {self.subject}: {self.before} -> {self.after}{why}"


@dataclass
class ScenarioDiff:
    scenario: str
    differences: list[Difference]


def changed_rules(old: Bundle, new: Bundle) -> dict[str, list[str]]:
    """Rules only in one bundle, and rules in both whose text or mode differs."""
    def index(b: Bundle) -> dict[str, tuple[str, str]]:
        return {f"{p.name}/{r.name}": (r.source, r.mode) for p in b.plugins.values() for r in p.rules}
    a, b = index(old), index(new)
    return {"added": sorted(set(b) - set(a)), "removed": sorted(set(a) - set(b)),
            "changed": sorted(k for k in set(a) & set(b) if a[k] != b[k])}


def diff_scenario(path: str, old: Bundle, new: Bundle) -> ScenarioDiff:
    before, after = Audit(enabled=True, detail=True), Audit(enabled=True, detail=True)
    run_old = simulate_file(path, old, audit=before)
    run_new = simulate_file(path, new, audit=after)
    out = _tasks(run_old, run_new, before.records, after.records)
    out += _evictions(run_old, run_new)
    out += _queues(run_old.report(), run_new.report())
    return ScenarioDiff(path, out)


def _tasks(old: SimulationResult, new: SimulationResult, rec_old: list[dict[str, Any]],
           rec_new: list[dict[str, Any]]) -> list[Difference]:
    out = []
    olds = {(t["job"], t["name"]): t for t in old.report()["tasks"]}
    for t in new.report()["tasks"]:
        o = olds.get((t["job"], t["name"]))
        if o is None or (o["status"], o["node"]) == (t["status"], t["node"]):
            continue
        ns = _namespace(new, t["job"])
        rules = _moved(new, "new", t["name"]) + _moved(old, "old", t["name"]) or _responsible(t, o, rec_new, rec_old)
        out.append(Difference("task", f"{ns}/{t['name']}", _state(o), _state(t), rules))
    return out


def _moved(run: SimulationResult, side: str, task: str) -> list[str]:
    """A pod evicted in one run: the eviction is the reason (listed with its own rules)."""
    return [f"{side}: evicted by {e.action} for {e.reason.get('job', '?')}" for _, e in run.evictions if e.task == task]


def _state(t: dict[str, Any]) -> str:
    return f"{t['status']} on {t['node']}" if t["node"] else t["status"]


def _namespace(run: SimulationResult, job: str) -> str:
    found = run.cluster.jobs.get(job)
    return found.namespace if found is not None else "default"


def _responsible(new: dict[str, Any], old: dict[str, Any], rec_new: list[dict[str, Any]],
                 rec_old: list[dict[str, Any]]) -> list[str]:
    """The rule verdicts about this pod (or its job) that one run made and the other did not:
    nodes a rule rejected, a gate that refused the job."""
    sides = {"new": _verdicts(new, rec_new), "old": _verdicts(new, rec_old)}
    out: list[str] = []
    for side, other in (("new", "old"), ("old", "new")):
        by_rule: dict[str, list[str]] = defaultdict(list)
        for rule, what in sides[side]:
            if (rule, what) not in sides[other]:
                by_rule[rule].append(what)
        out += [f"{side}: {rule} {_join(whats)}" for rule, whats in by_rule.items()]
    return out or _gang(new, rec_new, "new") or _gang(new, rec_old, "old") or [_scored(new, old, rec_new)]


def _gang(task: dict[str, Any], records: list[dict[str, Any]], side: str) -> list[str]:
    """The pod could be placed, but its gang could not be completed."""
    for r in reversed(records):
        gang = r.get("gang") if r["kind"] == "job" and r["job"] == task["job"] else None
        if gang is not None and gang["needed"] > 1 and gang["task"] != task["name"]:
            return [(f"{side}: its gang fell short ({gang['placed']} of {gang['needed']} pods fit; "
                    f"pod {gang['task']} found no node)")]
    return []


def _verdicts(task: dict[str, Any], records: list[dict[str, Any]]) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for r in records:
        if r["kind"] == "job" and r["job"] == task["job"] and r.get("deniedBy"):
            out.add((r["deniedBy"]["rule"], f"refused job {r['job']} in {r['action']}"))
        if r["kind"] == "task" and r["task"] == task["name"]:
            if r.get("deniedBy"):
                out.add((r["deniedBy"]["rule"], "refused the pod"))
            for g in r.get("rejected") or []:
                if not g["rule"].startswith("("):
                    out |= {(g["rule"], f"rejected {n}") for n in g.get("nodes") or [g["sampleNode"]]}
    return out


def _join(whats: list[str]) -> str:
    nodes = [w.removeprefix("rejected ") for w in whats if w.startswith("rejected ")]
    rest = [w for w in whats if not w.startswith("rejected ")]
    return ", ".join(rest + ([f"rejected {', '.join(sorted(nodes))}"] if nodes else []))


def _scored(new: dict[str, Any], old: dict[str, Any], rec_new: list[dict[str, Any]]) -> str:
    """No rule refused the other node: say how the scores compared, or that it follows from
    earlier decisions (what the nodes held had changed)."""
    records = [r for r in rec_new if r["kind"] == "task" and r["task"] == new["name"] and r.get("scores")]
    if records and old["node"]:
        chosen, runner = records[-1]["scores"]["chosen"], records[-1]["scores"]["runnerUp"]
        if runner is not None and runner["node"] == old["node"]:
            rules = sorted(k for k in set(chosen["rules"]) | set(runner["rules"])
                           if chosen["rules"].get(k, 0.0) != runner["rules"].get(k, 0.0))
            return (f"new: {chosen['node']} scored {chosen['total']:g} over {runner['node']} {runner['total']:g} "
                    f"({', '.join(rules)})")
    return "no rule refused it: it follows from the other changes (what the nodes held differed)"


def _evictions(old: SimulationResult, new: SimulationResult) -> list[Difference]:
    def index(run: SimulationResult) -> dict[tuple[str, str], Any]:
        return {(_namespace(run, e.job) + "/" + e.task, e.action): (c, e) for c, e in run.evictions}
    a, b = index(old), index(new)
    out = []
    for key in sorted(set(a) | set(b)):
        if key in a and key in b:
            continue
        cycle, e = (b if key in b else a)[key]
        what = f"evicted by {e.action} in cycle {cycle} for {e.reason.get('job', '?')}"
        rules = [r for r in e.reason.get("rules", "").split(", ") if r]
        side = "new" if key in b else "old"
        out.append(Difference("eviction", key[0], "not evicted" if key in b else what,
                              what if key in b else "not evicted", [f"{side}: allowed by {', '.join(rules)}"]
                              if rules else []))
    return out


def _queues(old: dict[str, Any], new: dict[str, Any]) -> list[Difference]:
    a, b = queue_gpus(old), queue_gpus(new)
    return [Difference("queue", q, f"{a.get(q, 0.0):g} GPUs", f"{b.get(q, 0.0):g} GPUs")
            for q in sorted(set(a) | set(b)) if abs(a.get(q, 0.0) - b.get(q, 0.0)) > 1e-9]


def queue_gpus(report: dict[str, Any]) -> dict[str, float]:
    """GPUs each leaf queue's pods hold (or are pipelined to) after the last cycle."""
    queue_of = {j["name"]: j["queue"] for j in report["jobs"]}
    out: dict[str, float] = defaultdict(float)
    for t in report["tasks"]:
        if t["status"] in HOLDING:
            out[queue_of[t["job"]]] += t["gpus"]
    return dict(out)


def render(diffs: list[ScenarioDiff], changed: dict[str, list[str]]) -> str:
    lines = []
    for key in ("added", "removed", "changed"):
        if changed[key]:
            lines.append(f"rules {key}: {', '.join(changed[key])}")
    total = 0
    for d in diffs:
        total += len(d.differences)
        lines.append(f"{d.scenario}: " + (f"{len(d.differences)} difference(s)" if d.differences else "no difference"))
        lines += [f"  {x.render()}" for x in d.differences]
    lines.append(f"{len(diffs)} scenario(s), {total} difference(s)")
    return "\n".join(lines)
