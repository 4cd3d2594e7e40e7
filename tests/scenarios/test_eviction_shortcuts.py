"""The eviction solver's shortcuts change what a cycle costs, never what it decides: with each
shortcut off (the reference's way) every shared scenario with an eviction action and every
fuzz seed gives the same report (placements, evictions and their messages, fit errors) and the
same audit log (detailed) as with it on."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from kaipolicy.actions import consolidation, ordering
from kaipolicy.actions.solver import filters, solve, victim_queue, views
from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.errors import KaipolicyError
from kaipolicy.framework import session
from kaipolicy.framework.audit import Audit
from kaipolicy.simulate import simulate, without_timings
from tests.fuzz.generate import scenario
from tests.scenarios.shared import default_bundle, scenario_files, scenario_id

EVICTING = {"reclaim", "preempt", "consolidation"}
SHARED = [p for p in scenario_files() if EVICTING & set(yaml.safe_load(p.read_text()).get("actions", []))]
SEEDS = range(240)
BLOCK = 60

#: Each shortcut: the module holding its switch, the switch's name.
SHORTCUTS = {
    "victim queues judged by a running sum of the victims taken": (ordering, "SUM_TAKEN_VICTIMS"),
    "a simulation stops after the last job that takes part": (solve, "STOP_AFTER_LAST_TURN"),
    "the last job to take part takes its turn at once": (solve, "LAST_TURN_AT_ONCE"),
    "a streak of pops from one leaf queue made without re-ordering": (solve, "STREAKS_POPPED_AT_ONCE"),
    "consolidation keeps each node's free room between preemptors": (consolidation, "FREE_ROOM_PER_NODE_KEPT"),
    "consolidation keeps which jobs could be victims between preemptors": (consolidation, "VICTIMS_KEPT"),
    "victims kept in key order per leaf queue between victim queues": (victim_queue, "LEAVES_KEPT"),
    "feasible nodes read from each node's idle and releasing GPUs kept in the node table": (views, "GPU_ROOM_KEPT"),
    "the idle-GPU filter reads each node's free GPUs kept in the node table": (filters, "FREE_GPUS_KEPT"),
    "a whole job's order key remembered by its count of status changes": (session, "WHOLE_JOB_KEYS_BY_COUNT"),
    "queue keys remembered by allocation, request and victims": (session, "SHARE_KEYED_QUEUE_KEYS"),
}


@contextmanager
def switched(on: bool) -> Iterator[None]:
    saved = [(module, name, getattr(module, name)) for module, name in SHORTCUTS.values()]
    try:
        for module, name in SHORTCUTS.values():
            setattr(module, name, on)
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def outcome(doc: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]] | str:
    audit = Audit(enabled=True, detail=True)
    try:
        res = simulate(scenario_from_doc(doc, "<test>"), default_bundle(), audit=audit)
    except KaipolicyError as e:
        return f"error: {e}"
    return without_timings(res.report()), audit.records


def same_with_and_without_shortcuts(doc: dict[str, Any]) -> bool:
    with switched(True):
        fast = outcome(doc)
    with switched(False):
        plain = outcome(doc)
    return fast == plain


def test_every_shortcut_has_a_switch_that_is_on_by_default() -> None:
    assert all(getattr(module, name) is True for module, name in SHORTCUTS.values())


@pytest.mark.parametrize("path", SHARED, ids=scenario_id)
def test_a_shared_scenario_decides_alike_with_the_shortcuts_off(path: Path) -> None:
    assert same_with_and_without_shortcuts(yaml.safe_load(path.read_text()))


@pytest.mark.parametrize("start", range(SEEDS.start, SEEDS.stop, BLOCK))
def test_random_scenarios_decide_alike_with_the_shortcuts_off(start: int) -> None:
    differ = [seed for seed in range(start, start + BLOCK) if not same_with_and_without_shortcuts(scenario(seed))]
    assert differ == []


def _bench_shapes() -> Any:
    """bench/eviction.py, whose shapes are the reference's benchmarks (long runs of alike jobs)."""
    path = Path(__file__).resolve().parents[2] / "bench" / "eviction.py"
    spec = importlib.util.spec_from_file_location("bench_eviction", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("kind", "nodes"), [("reference-consolidation", 10), ("reference-consolidation", 50),
                                             ("reference-full-cycle", 10), ("consolidation", 10), ("preempt", 10)])
def test_the_benchmark_shapes_decide_alike_with_the_shortcuts_off(kind: str, nodes: int) -> None:
    assert same_with_and_without_shortcuts(_bench_shapes().SHAPES[kind](nodes))
