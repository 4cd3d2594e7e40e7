"""The fit masks over all nodes say exactly what each node's own fits_idle / fits_idle_or_releasing
says, for every kind of request and node the fuzz generator makes, also after tasks come and go
(when the masks are kept as derived arrays and only changed rows are recomputed)."""

from __future__ import annotations

import pytest

from kaipolicy.api.task import Status, Task
from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.cli.bundle import load
from kaipolicy.cycle import open_session
from kaipolicy.framework.config import Params, config_from
from kaipolicy.framework.fits import fits_mask
from kaipolicy.framework.session import Session
from tests.fuzz.generate import scenario
from tests.unit import helpers

#: a spread of seeds, and ones whose chaotic nodes are overcommitted (idle GPUs below zero)
SEEDS = [*range(0, 120, 3), 120, 210, 241]


def session_for(seed: int) -> Session:
    scn = scenario_from_doc(scenario(seed), f"<seed {seed}>")
    return open_session(scn.snapshot(), config_from(None, actions=["allocate"], params=Params()), load(None))


def requests(ssn: Session) -> list[Task]:
    return [t for j in ssn.cluster.jobs.values() for t in j.tasks.values()]


def assert_masks_match(ssn: Session, tasks: list[Task]) -> None:
    nodes = ssn.node_list
    for task in tasks:
        for with_releasing in (True, False):
            mask = fits_mask(ssn.table.view(nodes), task, with_releasing)
            one_by_one = [n.fits_idle_or_releasing(task) if with_releasing else n.fits_idle(task) for n in nodes]
            assert mask.tolist() == one_by_one, (task, with_releasing)


@pytest.mark.parametrize("seed", SEEDS)
def test_fit_masks_match_every_node_on_its_own(seed: int) -> None:
    ssn = session_for(seed)
    assert_masks_match(ssn, requests(ssn))


@pytest.mark.parametrize("seed", SEEDS)
def test_fit_masks_stay_exact_while_tasks_land_and_roll_back(seed: int) -> None:
    ssn = session_for(seed)
    tasks = requests(ssn)
    assert_masks_match(ssn, tasks)       # every request's mask is now kept by the table
    stmt = ssn.statement()
    pending = [t for t in tasks if t.status == Status.PENDING and not t.request.is_shared and not t.request.mig]
    for task in pending[:6]:
        fitting = [n for n in ssn.node_list if n.fits_idle(task)]
        if fitting:
            stmt.allocate(task, fitting[len(fitting) // 2].name)
            assert_masks_match(ssn, tasks)
    stmt.discard()
    assert_masks_match(ssn, tasks)


def test_a_subset_of_nodes_gets_the_masks_of_those_nodes() -> None:
    ssn = session_for(4)
    nodes = ssn.node_list[::2]
    for task in requests(ssn):
        assert fits_mask(ssn.table.view(nodes), task, True).tolist() == [n.fits_idle_or_releasing(task)
                                                                          for n in nodes]


@pytest.mark.parametrize("seed", SEEDS[::3])
@pytest.mark.parametrize("releasing_first", [True, False])
def test_the_second_mask_of_a_request_is_exact_whichever_mask_is_asked_first(seed: int, releasing_first: bool) -> None:
    # with nothing releasing on the view's nodes the second mask is the first one, taken as it is
    ssn = session_for(seed)
    nodes = ssn.node_list
    for task in requests(ssn):
        view = ssn.table.view(nodes)
        for with_releasing in (releasing_first, not releasing_first):
            one_by_one = [n.fits_idle_or_releasing(task) if with_releasing else n.fits_idle(task) for n in nodes]
            assert fits_mask(view, task, with_releasing).tolist() == one_by_one, (task, with_releasing)


@pytest.mark.parametrize("state", ["Running", "Releasing"])
def test_a_node_with_a_releasing_pod_keeps_its_idle_and_its_releasing_masks_apart(state: str) -> None:
    scn = helpers.scenario([helpers.node("n0", gpus=1)],
                           [helpers.job("old", tasks=[{"state": state, "node": "n0"}]), helpers.job("new")])
    ssn = open_session(scn.snapshot(), config_from(None, actions=["allocate"], params=Params()), load(None))
    task = ssn.cluster.jobs["new"].tasks["new-0"]
    view = ssn.table.view(ssn.node_list)
    assert fits_mask(view, task, True).tolist() == [state == "Releasing"]
    assert fits_mask(view, task, False).tolist() == [False]


def test_the_memory_kept_per_request_size_is_each_sizes_own_and_bounded() -> None:
    import numpy as np

    from kaipolicy.api.resources import Request
    from kaipolicy.framework import fits

    ssn = session_for(3)
    view = ssn.table.view(ssn.node_list)
    assert view.every
    sizes = [Request.build(100.0, 1e6, p / 200) for p in range(1, 200)] + [Request.build(100.0, 1e6, 0, 5000)]
    for req in sizes * 2:
        kept = fits.memory_in(view, req)
        assert kept.tolist() == fits.memory_of(req, np.array([n.gpu_memory for n in ssn.node_list], float)).tolist()
        assert not kept.flags.writeable
    assert len(ssn.table.constant(("memory-of",), dict)) <= fits.SIZES_KEPT
    assert hash(Request.build(1.0, 2.0, 0.5)) == hash(Request.build(1.0, 2.0, 0.5))
