"""Queue capacity gates: a limit anywhere up the path closes them, a non-preemptible job keeps
within deserved quota, and a path with neither lets everything through."""

from __future__ import annotations

from kaipolicy.builtins import capacity
from kaipolicy.builtins.fairshare import Shares
from tests.unit.helpers import job, node, scenario

QUEUES = [{"name": "free", "parent": "d-open", "deserved": {"gpu": 4}},
          {"name": "leaf-capped", "parent": "d-open", "deserved": {"gpu": 4}, "limit": {"gpu": 3}},
          {"name": "under-capped", "parent": "d-capped", "deserved": {"gpu": 4}}]
DEPARTMENTS = [{"name": "d-open", "deserved": {"gpu": 8}}, {"name": "d-capped", "deserved": {"gpu": 8}, "limit": {"gpu": 2}}]


def _shares() -> tuple[Shares, dict[str, object]]:
    jobs = [job("on-free", "free", [{"state": "Running", "node": "n0"}]),
            job("firm", "free", priority=125),
            job("next", "leaf-capped", perTask={"gpus": 2, "cpuMillis": 1, "memoryBytes": 1},
                tasks=[{"state": "Running", "node": "n0"}, {"state": "Pending"}]),
            job("big", "under-capped", perTask={"gpus": 3, "cpuMillis": 1, "memoryBytes": 1})]
    cluster = scenario([node("n0", gpus=8)], jobs, queues=QUEUES, departments=DEPARTMENTS).snapshot()
    return Shares.build(cluster), cluster.jobs


def test_only_the_capped_levels_of_a_path_are_listed_leaf_first() -> None:
    shares, _ = _shares()
    assert shares.capped("free", "max_allowed") == []
    assert [(qs.queue.name, r, limit) for qs, r, _, limit in shares.capped("leaf-capped", "max_allowed")] \
        == [("leaf-capped", "gpu", 3.0)]
    assert [(qs.queue.name, r) for qs, r, _, _ in shares.capped("under-capped", "max_allowed")] == [("d-capped", "gpu")]
    assert shares.capped("free", "deserved")[0][0].queue.name == "free"


def test_a_limit_at_the_queue_or_above_it_closes_the_gate() -> None:
    shares, jobs = _shares()
    over = capacity.job_over_capacity(shares, jobs["next"], [t for t in jobs["next"].tasks.values()
                                                              if t.status.name == "PENDING"])
    assert over is not None and over.startswith("leaf-capped quota has reached the allowable limit of GPUs")
    big = jobs["big"]
    assert capacity.job_over_capacity(shares, big, list(big.tasks.values())).startswith("d-capped quota")


def test_a_path_without_limits_lets_a_preemptible_job_through_but_holds_a_firm_one_to_quota() -> None:
    shares, jobs = _shares()
    huge = [t for t in jobs["on-free"].tasks.values()] * 100
    assert capacity.job_over_capacity(shares, jobs["on-free"], huge) is None
    firm = jobs["firm"]
    assert not firm.preemptible
    assert capacity.job_over_capacity(shares, firm, list(firm.tasks.values()) * 10) \
        .startswith("Non-preemptible workload is over quota")


def test_the_key_at_the_last_bound_and_the_greatest_request_is_at_or_above_every_turns_key() -> None:
    # the solver compares one key with the preemptor's queue's key instead of one key per victim
    # turn (solve._VictimLine.all_below): the queue's key at the last turn's bound of what it holds
    # and, per resource, the greatest request of a job at its head. Each element but the last must
    # be at or above that element of every turn's key, the bounds growing as the solver grows them
    import random

    shares, _ = _shares()
    rng = random.Random(3)
    queues = list(shares.queues.values())
    checked = 0
    for _ in range(400):
        qs = rng.choice(queues)
        most = {r: rng.choice([0.0, 1.0, 2.5, 3.0, 8.0, 1e3, 4e9]) * rng.random() for r in ("cpu", "memory", "gpu")}
        held: dict[str, float] = {}
        asked = {r: 0.0 for r in most}
        keys = []
        for _turn in range(rng.randint(1, 5)):
            request = {r: rng.choice([0.0, 0.5, 1.0, 2.0, 3.0, 1e3, 1e9]) for r in most}
            held = {r: v + abs(v) * 1e-9 + 1e-6 for r, v in most.items()}
            keys.append(capacity.queue_order_key_unmemoised(shares, qs, request, None, held)[:-1])
            for r in most:
                asked[r] = max(asked[r], request[r])
                most[r] += request[r] * rng.choice([1.0, 1.0, 2.0])    # what a victim can take back
        bound = capacity.queue_order_key_unmemoised(shares, qs, asked, None, held)[:-1]
        for key in keys:
            assert all(b >= k for b, k in zip(bound, key, strict=True)), (qs.queue.name, bound, key)
            checked += 1
        # and it is the very key when one turn is all there is
        if len(keys) == 1:
            assert bound == keys[0]
    assert checked > 400
