"""bench/decisions.py: the digest of a cycle's decisions is the same for the same run and moves
with any bind, eviction, fit error or pod state."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.cli.bundle import load
from kaipolicy.cycle import run_cycle
from kaipolicy.framework.config import Params, config_from
from tests.unit.bench_modules import bench_module


@pytest.fixture
def decisions(monkeypatch: pytest.MonkeyPatch) -> Any:
    return bench_module(monkeypatch, "decisions")


def digest_of(decisions: Any, ssn: Any) -> str:
    return hashlib.sha256(json.dumps(decisions.decisions(ssn), default=str).encode()).hexdigest()


def cycle(decisions: Any, which: str) -> Any:
    doc, actions = decisions.shape(which, 40)
    return run_cycle(scenario_from_doc(doc, "<test>").snapshot(), config_from(None, actions=actions, params=Params()),
                     load(None), None).session


def test_the_same_run_gives_the_same_digest_and_a_changed_decision_another(decisions: Any) -> None:
    ssn = cycle(decisions, "openb")
    assert ssn.binds
    first = digest_of(decisions, ssn)
    assert digest_of(decisions, cycle(decisions, "openb")) == first
    bind = ssn.binds[0]
    bind.node, was = "elsewhere", bind.node
    assert digest_of(decisions, ssn) != first
    bind.node = was
    job = next(j for j in ssn.cluster.jobs.values() if j.tasks)
    job.fit_errors.append("a new fit error")
    assert digest_of(decisions, ssn) != first
    job.fit_errors.pop()
    task = next(iter(job.tasks.values()))
    task.gpu_groups = [*task.gpu_groups, "another group"]
    assert digest_of(decisions, ssn) != first


def test_the_large_shape_is_cut_by_the_step(decisions: Any) -> None:
    doc, actions = decisions.shape("large", 40)
    assert len(doc["nodes"]) == 100 and actions[0] == "allocate" and len(actions) == 5
