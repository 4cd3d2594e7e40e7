"""The cyclic collector is held off while the model is built and a cycle runs, and handed back."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from kaipolicy.cache.scenario_source import load_scenario, scenario_from_doc
from kaipolicy.collector import paused_gc
from kaipolicy.errors import ScenarioError
from tests.unit.helpers import job, node, scenario


def test_nested_pauses_leave_it_to_the_outermost_to_resume_even_after_an_error() -> None:
    assert gc.isenabled()
    with pytest.raises(RuntimeError), paused_gc():
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
        raise RuntimeError("inside")
    assert gc.isenabled()


def test_a_collector_paused_by_the_caller_stays_paused() -> None:
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_loading_a_scenario_pauses_the_collector_and_hands_it_back(tmp_path: Path) -> None:
    seen: list[bool] = []
    gc.callbacks.append(lambda phase, info: seen.append(phase == "start"))
    try:
        doc = scenario([node("n0")], [job(f"j{i}") for i in range(50)]).doc
        gc.collect()
        seen.clear()
        scenario_from_doc(doc, "ok.yaml")
        assert gc.isenabled() and seen == []   # no pass of the collector while it loaded
        bad = tmp_path / "bad.yaml"
        bad.write_text("name: x\nactions: [allocate]\njobs: [{name: j}]\n")
        with pytest.raises(ScenarioError):
            load_scenario(bad)
        assert gc.isenabled()
    finally:
        gc.callbacks.pop()
