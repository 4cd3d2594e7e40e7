"""Whether a node's evictions would leave the partial job room, told before evicting
(solve.NO_ROOM_BEFORE_EVICTING): whenever it tells, evicting the pods and asking as the
simulation asks tells the same, on clusters under reclaim pressure and on the openb trace's samples."""

from __future__ import annotations

from typing import Any

import pytest

from kaipolicy.actions.solver import solve
from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.simulate import simulate
from tests.fuzz import reclaim_pressure
from tests.scenarios.shared import default_bundle
from tests.scenarios.test_eviction_shortcuts import _bench


def checked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every answer of the check is compared with the evictions' own; returns [no room, asked,
    told from sums, told from a trial]."""
    counts = [0, 0, 0, 0]
    told_before = solve._room_after_evicting
    summed, tried = solve._free_after_evicting, solve._evicted_in_nodes

    def summing(*args: Any) -> Any:
        free = summed(*args)
        counts[2] += free is not None
        return free

    def trying(*args: Any) -> Any:
        counts[3] += 1
        return tried(*args)

    monkeypatch.setattr(solve, "_free_after_evicting", summing)
    monkeypatch.setattr(solve, "_evicted_in_nodes", trying)

    def compared(solver: Any, preemptor: Any, feasible: dict[str, Any], recorded: Any, tasks: Any) -> bool | None:
        room = told_before(solver, preemptor, feasible, recorded, tasks)
        counts[1] += 1
        if room is not None:
            counts[0] += room is False
            ssn = solver.ssn
            stmt = ssn.statement()
            solve.evict_all(ssn, stmt, tasks, preemptor, solver.action, solver.rules)
            after = dict(feasible)
            for t in tasks:
                after.setdefault(t.node, ssn.cluster.nodes[t.node])
            victims = [*recorded, *tasks]
            assert solve._preemptor_cannot_fit(solver, preemptor, solver.node_list(after), victims, after) is not room
            stmt.discard()
        return room

    monkeypatch.setattr(solve, "_room_after_evicting", compared)
    return counts


def test_no_room_told_before_evicting_is_what_evicting_tells(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = checked(monkeypatch)
    for seed in range(60):
        simulate(scenario_from_doc(reclaim_pressure.scenario(seed), "<test>"), default_bundle())
    assert counts[0] >= 10 and counts[1] > counts[0] and counts[2] >= 10 and counts[3] >= 10


def test_no_room_on_the_openb_samples_is_what_evicting_tells(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = checked(monkeypatch)
    openb = _bench("openb")
    nodes = openb.read_csv("openb_node_list_all_node.csv")
    pods = sorted(openb.read_csv("openb_pod_list_default.csv"), key=lambda p: int(p["creation_time"]))
    for offset in range(2):
        doc = openb.scenario_doc(nodes[offset::25], pods[offset::25], ["allocate", "reclaim"])
        simulate(scenario_from_doc(doc, "<openb sample>"), default_bundle())
    assert counts[0] >= 20 and counts[2] >= 20 and counts[3] >= 20
