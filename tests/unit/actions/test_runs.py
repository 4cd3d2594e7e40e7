"""A run of pods (one pod set placed one after another onto one node set) carries its fit mask
and scores to the next pod only while nothing but the node the last pod landed on has changed
and the next pod asks for an equal request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kaipolicy.actions import placement
from kaipolicy.cycle import open_session
from kaipolicy.framework.config import config_from
from kaipolicy.rules import load_bundle
from kaipolicy.rules.standard import VOCABULARY
from tests.unit.helpers import job, node, scenario

POLICIES = Path(__file__).resolve().parents[3] / "policies"


def _placed_first() -> tuple[Any, Any, Any, placement._Run]:
    """A session where the first pod of a three-pod gang has just been placed with a run, on n1,
    which it leaves one GPU free (a full node keeps bin-packing's least free at 0, two empty ones
    its most free at 8)."""
    busy = job("busy", tasks=[{"state": "Running", "node": "n1"}] * 6)
    full = job("full", tasks=[{"state": "Running", "node": "n3"}] * 8)
    gang = job("gang", tasks=[{"state": "Pending"}] * 3, minAvailable=3)
    other = job("other", perTask={"gpus": 2, "cpuMillis": 1000, "memoryBytes": 10**9})
    scn = scenario([node(f"n{i}", gpus=8) for i in range(4)], [busy, full, gang, other])
    ssn = open_session(scn.snapshot(), config_from(None, actions=["allocate"]), load_bundle([POLICIES], VOCABULARY))
    gang_job = ssn.cluster.jobs["gang"]
    run = placement._Run()
    tasks = sorted(gang_job.tasks.values(), key=lambda t: t.name)
    assert placement.allocate_task(ssn, ssn.statement(), ssn.node_list, gang_job, tasks[0], True, run)
    assert tasks[0].node == "n1"       # bin-packing: the fullest node
    return ssn, gang_job, tasks, run


def test_the_next_pod_of_a_run_takes_what_the_last_left() -> None:
    ssn, _, tasks, run = _placed_first()
    fits, scores, scope = run.carried(ssn, ssn.table.view(ssn.node_list), tasks[1])
    assert fits is not None and scores is not None and scope is not None
    assert fits.tolist() == [True, True, True, False]


def test_a_pod_asking_for_another_request_works_them_out_afresh() -> None:
    ssn, _, _, run = _placed_first()
    other = next(iter(ssn.cluster.jobs["other"].tasks.values()))
    assert run.carried(ssn, ssn.table.view(ssn.node_list), other)[:2] == (None, None)


def test_another_node_changed_since_and_nothing_is_carried() -> None:
    ssn, _, tasks, run = _placed_first()
    ssn.table.mark(ssn.cluster.nodes["n2"])
    assert run.carried(ssn, ssn.table.view(ssn.node_list), tasks[1])[:2] == (None, None)


def test_the_node_the_last_pod_landed_on_is_asked_again() -> None:
    ssn, _, tasks, run = _placed_first()
    n1 = ssn.cluster.nodes["n1"]
    placement._place(ssn, ssn.statement(), tasks[1], n1, True)    # its last GPU
    run.count = ssn.table.change_count() - 1     # as if the last pod's own placement had filled it
    fits, _, _ = run.carried(ssn, ssn.table.view(ssn.node_list), tasks[2])
    assert run.fits[1] and fits is not None and fits.tolist() == [True, False, True, False]
