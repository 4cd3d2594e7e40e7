"""bench/machine.py: the machine a benchmark ran on, printed with its figures."""

from __future__ import annotations

import pytest

from tests.unit.bench_modules import bench_module


def test_the_machine_is_named_and_timed_on_both_kinds_of_work(monkeypatch: pytest.MonkeyPatch) -> None:
    machine = bench_module(monkeypatch, "machine")
    described = machine.describe()
    assert set(described) == {"cpu", "cores", "pythonLoopMs", "numpyPassUs"}
    assert isinstance(described["cpu"], str) and described["cpu"]
    assert described["cores"] >= 1
    assert described["pythonLoopMs"] > 0 and described["numpyPassUs"] > 0
