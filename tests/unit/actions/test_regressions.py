"""Regressions found by running the reference's unseen test cases through kaipolicy."""

from __future__ import annotations

from typing import Any

from kaipolicy.simulate import simulate
from tests.scenarios.shared import default_bundle
from tests.unit.helpers import job, node, scenario


def _running(name: str, queue: str, minutes: int) -> dict[str, Any]:
    return job(name, queue, tasks=[{"state": "Running", "node": "n0"}], createdMinutesAgo=minutes,
               lastStartMinutesAgo=1)


def test_reclaim_takes_victims_alternately_from_equally_over_share_queues() -> None:
    # Two queues deserving 1 GPU run 3 each; a reclaimer deserving 2 needs 2. Judged with the
    # victims already taken from it, the queue that gave one falls behind the other, so each
    # queue gives one (the newest job of each).
    queues = [{"name": "d1", "deserved": {"gpu": 1}},
              {"name": "qa", "parent": "d1", "deserved": {"gpu": 1}, "creationOrder": 0},
              {"name": "qb", "parent": "d1", "deserved": {"gpu": 1}, "creationOrder": 1},
              {"name": "qr", "parent": "d1", "deserved": {"gpu": 2}, "overQuotaWeight": {"gpu": 0},
               "creationOrder": 2}]
    jobs = [_running("a2", "qa", 7), _running("b2", "qb", 6), _running("a0", "qa", 5), _running("a1", "qa", 4),
            _running("b0", "qb", 3), _running("b1", "qb", 2),
            job("reclaimer", "qr", minAvailable=2, tasks=[{"state": "Pending"}] * 2)]
    report = simulate(scenario([node("n0", gpus=6)], jobs, queues=queues, actions=["reclaim"],
                               defaultDepartment=False), default_bundle()).report()
    status = {t["job"]: t["status"] for t in report["tasks"]}
    assert {j for j, s in status.items() if s == "Releasing"} == {"a1", "b1"}
    assert status["reclaimer"] == "Pipelined"


def test_a_pending_pod_keeps_the_node_it_names_across_cycles() -> None:
    scn = scenario([node("n0", gpus=2)], [job("p", tasks=[{"state": "Pending", "node": "n0"}],
                                              perTask={"gpus": 4, "cpuMillis": 1000, "memoryBytes": 10**6})],
                   cycles=2)
    report = simulate(scn, default_bundle()).report()
    assert [(t["status"], t["node"]) for t in report["tasks"]] == [("Pending", "n0")]
