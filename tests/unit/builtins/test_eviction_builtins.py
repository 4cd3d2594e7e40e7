"""Min-runtime resolution over the queue tree, durations, and the reclaim strategies."""

from __future__ import annotations

import pytest

from kaipolicy.api.queue import Quantities, Queue
from kaipolicy.builtins import minruntime, reclaimable
from kaipolicy.builtins.fairshare import QueueShare, Share


def q(name: str, parent: str | None = None, reclaim: float | None = None, preempt: float | None = None) -> Queue:
    return Queue(name, name, parent, 100, Quantities(), Quantities(-1, -1, -1), Quantities(1, 1, 1), 0,
                 preempt_min_runtime=preempt, reclaim_min_runtime=reclaim)


TREE = {x.uid: x for x in (q("d1", reclaim=100), q("d2", reclaim=300), q("a", "d1", reclaim=10), q("b", "d1"),
                           q("c", "d2", reclaim=20, preempt=7))}


@pytest.mark.parametrize("text, seconds", [("0s", 0), ("90s", 90), ("1h30m", 5400), ("1.5m", 90), ("250ms", 0.25)])
def test_durations_are_read_like_go_durations(text: str, seconds: float) -> None:
    assert minruntime.parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["ten seconds", "-5s", "5"])
def test_a_malformed_or_negative_duration_is_an_error(text: str) -> None:
    with pytest.raises(ValueError):
        minruntime.parse_duration(text)


def test_lca_reads_the_child_of_the_common_ancestor_on_the_victims_side() -> None:
    # siblings under d1: the victim's own leaf 'b' sets nothing, so d1's value applies
    assert minruntime.reclaim_min_runtime(TREE, "a", "b", 0.0, "lca") == 100
    # a victim in 'a' reclaimed from 'b': its leaf sets 10
    assert minruntime.reclaim_min_runtime(TREE, "b", "a", 0.0, "lca") == 10
    # different top-level trees: the victim's top-level queue decides
    assert minruntime.reclaim_min_runtime(TREE, "a", "c", 0.0, "lca") == 300


def test_the_queue_method_reads_the_victims_queue_then_up() -> None:
    assert minruntime.reclaim_min_runtime(TREE, "a", "c", 0.0, "queue") == 20
    assert minruntime.reclaim_min_runtime(TREE, "a", "b", 0.0, "queue") == 100


def test_preempt_min_runtime_is_inherited_down_and_defaults_when_unset() -> None:
    assert minruntime.preempt_min_runtime(TREE, "c", 1.0) == 7
    assert minruntime.preempt_min_runtime(TREE, "b", 1.0) == 1.0


def share(name: str, parent: str | None, deserved: float, fair: float, allocated: float) -> QueueShare:
    out = QueueShare(q(name, parent))
    for r in ("cpu", "memory"):
        out.shares[r] = Share(deserved=-1, fair_share=-1)
    out.shares["gpu"] = Share(deserved=deserved, fair_share=fair, allocated=allocated)
    return out


def test_a_reclaimee_above_its_fair_share_may_lose_resources_but_not_below_it() -> None:
    queues = {"a": share("a", None, 0, 2, 4), "b": share("b", None, 4, 4, 0)}
    from kaipolicy.api.job import Job, SubGroupSet
    reclaimer = Job("j", "j", "default", "b", 50, True, 0.0, SubGroupSet("root"), {})
    one = {"cpu": 0.0, "memory": 0.0, "gpu": 1.0}
    assert reclaimable.reclaimable(queues, reclaimer, True, one, {"a": [one, one]}, 1.0)
    assert reclaimable.reclaimable(queues, reclaimer, True, one, {"a": [one, one, one]}, 1.0)  # deserved guarantee
    queues["b"].shares["gpu"].allocated = 4   # reclaimer already at its deserved quota
    assert not reclaimable.reclaimable(queues, reclaimer, True, one, {"a": [one, one, one]}, 1.0)


def test_a_victim_whose_pods_are_all_still_allocated_gives_up_nothing_when_re_placed_pods_are_skipped() -> None:
    # scenario_reclaimable passes such victims by without building their chunks
    from tests.unit.helpers import job, node, scenario

    spec = job("v", "q0", [{"state": "Running", "node": "n0"}, {"state": "Running", "node": "n0"}], minAvailable=1)
    victim = next(iter(scenario([node("n0")], [spec]).snapshot().jobs.values()))
    tasks = list(victim.tasks.values())
    assert reclaimable.victim_chunks(victim, tasks, skip_reallocated=True) == []
    assert len(reclaimable.victim_chunks(victim, tasks, skip_reallocated=False)) == 2
