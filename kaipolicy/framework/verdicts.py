"""What the audit log reads from a session beyond the hooks' results: the last node scoring's
parts per rule, the runner-up probe, and warn and audit predicates on the chosen node."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from kaipolicy.api.job import Job
from kaipolicy.api.node import Node
from kaipolicy.api.task import Task
from kaipolicy.framework import shadow

if TYPE_CHECKING:
    from kaipolicy.framework.session import Rule, Session


class ScoreSheet(NamedTuple):
    """The last node scoring: the nodes, their totals, each rule's weighted part, shadow parts."""

    nodes: Sequence[Node]
    total: np.ndarray
    parts: dict[str, np.ndarray]
    shadow: dict[str, np.ndarray]


def scores_at(ssn: Session, indices: list[int]) -> list[dict[str, Any]]:
    """The total and each nodeOrder rule's part (those that gave 0 left out) for nodes[i] of the
    last scoring, for each i of `indices` (`item` is the cheapest read of one numpy element)."""
    sheet = ssn.last_scores
    out = []
    for i in indices:
        entry: dict[str, Any] = {"total": sheet.total.item(i) if len(sheet.total) else 0.0,
                                 "rules": {rule: x for rule, v in sheet.parts.items() if (x := v.item(i))}}
        if sheet.shadow:
            entry["shadowRules"] = {rule: x for rule, v in sheet.shadow.items() if (x := v.item(i))}
        out.append(entry)
    return out


def passes_predicates(ssn: Session, task: Task, job: Job, node: Node) -> bool:
    """The predicates on one node, recording nothing (a failure counts as a rejection): the
    runner-up is looked for with it, before the chosen node is taken."""
    ssn.quiet, coverage, ssn.coverage = True, ssn.coverage, None
    try:
        for rule in ssn.hooks["predicate"]:
            try:
                if rule.scalar(task, job, node):
                    return False
            except Exception:  # noqa: BLE001 - the real evaluation records failures; this one only asks
                return False
        return True
    finally:
        ssn.quiet, ssn.coverage = False, coverage


def shadow_predicates(ssn: Session, task: Task, job: Job, node: Node) -> list[tuple[Rule, str]]:
    """Warn and audit predicates asked about the node a task is about to be placed on (before it
    takes the node's resources): the ones that would deny, with their messages."""
    out = []
    env = {"task": task, "job": job, "node": node, "cluster": ssn}
    for rule in ssn.shadow["predicate"]:
        value = ssn.evaluate(rule, env)
        if value and not ssn.is_error(value):   # a failure is recorded already
            out.append((rule, rule.message(task, job, node) or f"node {node.name} rejected by {rule.label}"))
    return out


def record_shadows(ssn: Session, verdicts: list[tuple[Rule, str]], task: Task, job: Job, node: Node) -> None:
    env = {"task": task, "job": job, "node": node, "cluster": ssn}
    for rule, message in verdicts:
        shadow.would(ssn, rule, message, env)


def quietly_allowed(ssn: Session, kind: str, env: dict[str, Any], first_only: bool = False) -> bool:
    """No rule of a deny hook (or only its first) denies `env`, asked as a proof asks: no messages,
    nothing recorded, and a rule that fails counts as a denial."""
    was, ssn.quiet = ssn.quiet, True
    try:
        for rule in ssn.hooks[kind][:1] if first_only else ssn.hooks[kind]:
            value = ssn.evaluate(rule, {**env, "cluster": ssn})
            if ssn.is_error(value) or value:
                return False
        return True
    finally:
        ssn.quiet = was


def quietly_passing(ssn: Session, task: Task, job: Job, nodes: Sequence[Node]) -> int | None:
    """How many of `nodes` pass every predicate, asked as a proof asks (no messages, nothing
    recorded); None when a rule fails on one of them."""
    was, ssn.quiet = ssn.quiet, True
    try:
        open_idx = np.arange(len(nodes))
        view = ssn.table.view(nodes)
        for rule in ssn.hooks["predicate"]:
            if len(open_idx) == 0:
                break
            denied, failed = ssn.node_values(rule, task, job, nodes, view, open_idx)
            if failed:
                return None
            if denied is not None:
                open_idx = open_idx[~np.asarray(denied, dtype=bool)]
        return len(open_idx)
    finally:
        ssn.quiet = was
