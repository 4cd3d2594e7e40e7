"""Checking one policy test's `expect` against a simulation and its audit log.

`check` returns the failures (expected vs actual, one line each) and the context that explains
them: `kaipolicy explain` for a job or pod that is not where the test wants it, the rule's own
decisions for a decision that is missing or should not be there.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kaipolicy.errors import InputError
from kaipolicy.simulate import SimulationResult
from kaipolicy.workflow.decisions import decisions, matches, show
from kaipolicy.workflow.explain import explain

Lines = list[str]


def check(expect: dict[str, Any], result: SimulationResult, records: list[dict[str, Any]]) -> tuple[Lines, Lines]:
    failures: Lines = []
    context: Lines = []
    report = result.report()
    by_job: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in report["tasks"]:
        by_job[t["job"]].append(t)
    evicted = {(result.cluster.jobs[e.job].name if e.job in result.cluster.jobs else e.job, e.task)
               for _, e in result.evictions}
    explained: set[str] = set()
    for name, want in (expect.get("jobs") or {}).items():
        tasks = by_job.get(name)
        if tasks is None:
            failures.append(f"job {name}: no such job in the scenario")
            continue
        problems = _placement(f"job {name}", tasks, want, evicted)
        problems += _reason(name, want, records)
        failures += problems
        if problems:
            _explain(name, records, explained, context)
    all_tasks = {t["name"]: t for t in report["tasks"]}
    for name, want in (expect.get("tasks") or {}).items():
        task = all_tasks.get(name)
        if task is None:
            failures.append(f"pod {name}: no such pod in the scenario")
            continue
        problems = _placement(f"pod {name}", [task], want, evicted)
        failures += problems
        if problems:
            _explain(name, records, explained, context)
    _decisions(expect, records, failures, context)
    for text in expect.get("warnings") or []:
        if not any(text in w for w in result.warnings):
            failures.append(f"expected a warning containing {text!r}; warnings: {result.warnings or 'none'}")
    return failures, context


def _placement(who: str, tasks: list[dict[str, Any]], want: dict[str, Any], evicted: set[tuple[str, str]]) -> Lines:
    out = []
    actual = ", ".join(f"{t['name']} {t['status']}" + (f" on {t['node']}" if t["node"] else "") for t in tasks)
    if "status" in want and any(t["status"] != want["status"] for t in tasks):
        out.append(f"{who}: expected {want['status']}, got {actual}")
    if "node" in want and any(t["node"] != want["node"] for t in tasks):
        out.append(f"{who}: expected on node {want['node']}, got {actual}")
    if "gpuGroups" in want and any(t["gpuGroups"] != want["gpuGroups"] for t in tasks):
        groups = ", ".join(f"{t['name']} {t['gpuGroups']}" for t in tasks)
        out.append(f"{who}: expected GPU groups {want['gpuGroups']}, got {groups}")
    if "evicted" in want:
        got = any((t["job"], t["name"]) in evicted for t in tasks)
        if got != want["evicted"]:
            out.append(f"{who}: expected {'an' if want['evicted'] else 'no'} eviction, got "
                       f"{'one' if got else 'none'}")
    return out


def _reason(job: str, want: dict[str, Any], records: list[dict[str, Any]]) -> Lines:
    if "reasonContains" not in want:
        return []
    outcomes = [r for r in records if r["kind"] == "outcome" and r["job"] == job]
    reason = outcomes[-1]["reason"] if outcomes else "(no outcome recorded: nothing decided about it)"
    if want["reasonContains"] in reason:
        return []
    return [f"job {job}: expected the reason to contain {want['reasonContains']!r}, got {reason!r}"]


def _explain(name: str, records: list[dict[str, Any]], done: set[str], context: Lines) -> None:
    if name in done:
        return
    done.add(name)
    try:
        context += explain(records, name).render().splitlines()
    except InputError as e:
        context.append(f"{name}: {e}")


def _decisions(expect: dict[str, Any], records: list[dict[str, Any]], failures: Lines, context: Lines) -> None:
    made = decisions(records)
    for want in expect.get("decisions") or []:
        if any(matches(want, d) for d in made):
            continue
        failures.append(f"expected decision {_show_expected(want)} was not made")
        same_rule = [d for d in made if d["rule"] == want["rule"]]
        if not same_rule:
            context.append(f"rule {want['rule']} decided nothing in this test")
        context += [f"decision of {want['rule']}: {show(d)}" for d in same_rule[:8]]
        if len(same_rule) > 8:
            context.append(f"... and {len(same_rule) - 8} more decisions of {want['rule']}")
    for unwanted in expect.get("absent") or []:
        hits = [d for d in made if matches(unwanted, d)]
        if hits:
            failures.append(f"decision {_show_expected(unwanted)} should not be made; made: {show(hits[0])}")


def _show_expected(want: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in want.items()) + "}"
