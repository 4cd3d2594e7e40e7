"""bench/instructions.py: its measured part runs the thinned openb trace's cycle, or a cut of the
large shape (the part callgrind counts), and a wrong switch is refused before anything runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
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


def test_the_inner_run_finds_the_trace_from_its_own_directory(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    # a relative KAIPOLICY_OPENB pointed nowhere from the inner run's temporary directory
    trace = tmp_path / "trace"
    trace.mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KAIPOLICY_OPENB", "trace")
    monkeypatch.delitem(sys.modules, "openb", raising=False)   # it reads the trace's path on import
    env = bench_module(monkeypatch, "instructions").inner_env()
    assert env["KAIPOLICY_OPENB"] == str(trace.resolve()) and env["PYTHONHASHSEED"] == "0"
