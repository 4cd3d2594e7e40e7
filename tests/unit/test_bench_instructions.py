"""bench/instructions.py: its measured part runs the thinned openb trace's cycle, or a cut of the
large shape (the part callgrind counts), and a wrong switch is refused before anything runs."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from kaipolicy.actions.solver import solve
from tests.unit.bench_modules import bench_module


@pytest.fixture
def instructions(monkeypatch: pytest.MonkeyPatch) -> Any:
    return bench_module(monkeypatch, "instructions")


def args(**kw: Any) -> argparse.Namespace:
    return argparse.Namespace(**{"shape": "openb", "step": 40, "offset": 0, "actions": "all", "switch": [], **kw})


def test_the_measured_part_is_the_thinned_traces_snapshot_then_its_cycle(instructions: Any) -> None:
    base = instructions.inner(args(), baseline=True)
    assert base == {"nodes": 39, "pods": 204}
    cycle = instructions.inner(args(), baseline=False)
    assert cycle["binds"] > 0 and cycle["simulated"] > 0


def test_the_large_shape_is_measured_at_a_step_th_of_its_size(instructions: Any) -> None:
    assert instructions.inner(args(shape="large"), baseline=True) == {"nodes": 100, "pods": 125}
    assert instructions.inner(args(shape="large"), baseline=False)["binds"] > 0


def test_a_switch_is_set_and_a_wrong_one_refused(instructions: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(solve, "HOPELESS_AFTER_VICTIMS", True)
    instructions.switch("kaipolicy.actions.solver.solve.HOPELESS_AFTER_VICTIMS=False")
    assert solve.HOPELESS_AFTER_VICTIMS is False
    for wrong in ("kaipolicy.actions.solver.solve.NO_SUCH=1", "HOPELESS_AFTER_VICTIMS", "solve.X=",
                  "kaipolicy.no_such_module.X=1"):
        with pytest.raises(SystemExit):
            instructions.switch(wrong)
