"""Predicates asked of one pod on one node: those reading only fields that never change in a session
are not asked again once every predicate passed there; a denial and an error are asked (and
recorded) every time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kaipolicy.cycle import open_session
from kaipolicy.framework import session as session_module
from kaipolicy.framework.config import config_from
from kaipolicy.rules import load_bundle
from kaipolicy.rules.standard import VOCABULARY
from tests.unit.helpers import job, node, scenario

POLICIES = Path(__file__).resolve().parents[3] / "policies"

# fixed: reads the node's labels only; moving: reads what is free on the node; failing: fixed,
# and divides by zero on the pod labelled `boom`
RULES = """plugin: preds
rules:
  - {name: fixed, hook: predicate, deny: "node.labels['pool'] == 'b'"}
  - {name: moving, hook: predicate, deny: "node.freePods < 1.0"}
  - {name: failing, hook: predicate, deny: "'boom' in task.labels && 1 / (size(task.name) - size(task.name)) > 0"}
"""


def session(tmp_path: Path) -> Any:
    (tmp_path / "preds.yaml").write_text(RULES, encoding="utf-8")
    bundle = load_bundle([POLICIES, tmp_path], VOCABULARY)
    nodes = [node("a", labels={"pool": "a"}), node("b", labels={"pool": "b"})]
    scn = scenario(nodes, [job("j", tasks=[{"state": "Pending"}, {"state": "Pending", "labels": {"boom": "1"}}])])
    return open_session(scn.snapshot(), config_from({"tiers": [{"plugins": [{"name": "preds"}]}]},
                                                    actions=["allocate"]), bundle)


def asked(monkeypatch: pytest.MonkeyPatch, ssn: Any) -> list[str]:
    names: list[str] = []
    real = ssn._node_call

    def noting(rule: Any, task: Any, job: Any, node: Any) -> Any:
        names.append(rule.name)
        return real(rule, task, job, node)

    monkeypatch.setattr(ssn, "_node_call", noting)
    return names


def test_fixed_predicates_that_passed_for_a_pod_on_a_node_are_not_asked_there_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ssn = session(tmp_path)
    names = asked(monkeypatch, ssn)
    j = ssn.cluster.jobs["j"]
    plain, boom = sorted(j.tasks.values(), key=lambda t: t.name)
    a, b = ssn.cluster.nodes["a"], ssn.cluster.nodes["b"]
    assert ssn.predicate_on(plain, j, a) is None
    assert names == ["fixed", "moving", "failing"]
    names.clear()
    assert ssn.predicate_on(plain, j, a) is None
    assert names == ["moving"]                      # the fixed ones passed here before
    names.clear()
    for _ in range(2):                              # a denial is asked again: it records
        denied = ssn.predicate_on(plain, j, b)
        assert denied is not None and denied.rule.endswith("fixed")
    assert names == ["fixed", "fixed"]
    names.clear()
    errors = len(ssn.errors)
    for _ in range(2):                              # an error is asked again: it records each time
        assert ssn.predicate_on(boom, j, a) is not None
    assert len(ssn.errors) == errors + 2 and names == ["fixed", "moving", "failing"] * 2


def test_with_the_switch_off_every_predicate_is_asked_every_time(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_module, "FIXED_PREDICATES_KEPT", False)
    ssn = session(tmp_path)
    names = asked(monkeypatch, ssn)
    j = ssn.cluster.jobs["j"]
    plain = min(j.tasks.values(), key=lambda t: t.name)
    for _ in range(2):
        assert ssn.predicate_on(plain, j, ssn.cluster.nodes["a"]) is None
    assert names == ["fixed", "moving", "failing"] * 2
