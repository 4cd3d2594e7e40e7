"""GPUs held per queue by node label value: counted up the queue tree from the snapshot, and kept
current through allocations and evictions inside a session (rolled back with the statement)."""

from __future__ import annotations

from kaipolicy.cli.bundle import load
from kaipolicy.cycle import open_session
from kaipolicy.framework.config import SchedulerConfig
from kaipolicy.framework.session import Session
from tests.unit.helpers import job, node, scenario

LABEL = "nvidia.com/gpu.product"


def _session() -> Session:
    nodes = [node("a0", labels={LABEL: "A100"}), node("h0", labels={LABEL: "H100"}), node("plain")]
    jobs = [job("on-a", "leaf", tasks=[{"state": "Running", "node": "a0"}], perTask={"gpus": 2}),
            job("on-h", "leaf", tasks=[{"state": "Running", "node": "h0"}], perTask={"gpus": 1}),
            job("other", "sibling", tasks=[{"state": "Running", "node": "a0"}], perTask={"gpus": 1}),
            job("waiting", "leaf", perTask={"gpus": 1})]
    queues = [{"name": "dept"}, {"name": "leaf", "parent": "dept"}, {"name": "sibling", "parent": "dept"}]
    return open_session(scenario(nodes, jobs, queues=queues).snapshot(), SchedulerConfig(), load(None))


def test_a_queue_and_every_queue_above_it_hold_their_jobs_gpus_by_label_value() -> None:
    ssn = _session()
    usage = ssn.labelled_usage(LABEL)
    assert [usage.held(q, "A100") for q in ("leaf", "sibling", "dept")] == [2.0, 1.0, 3.0]
    assert usage.held("leaf", "H100") == 1.0 and usage.held("leaf", "V100") == 0.0


def test_allocations_and_their_rollback_move_the_counts() -> None:
    ssn = _session()
    usage = ssn.labelled_usage(LABEL)
    waiting = next(iter(ssn.cluster.jobs["waiting"].tasks.values()))
    stmt = ssn.statement()
    stmt.allocate(waiting, "a0")
    assert (usage.held("leaf", "A100"), usage.held("dept", "A100")) == (3.0, 4.0)
    stmt.evict(next(iter(ssn.cluster.jobs["on-a"].tasks.values())), "room", {})
    assert usage.held("leaf", "A100") == 1.0
    stmt.discard()
    assert (usage.held("leaf", "A100"), usage.held("dept", "A100")) == (2.0, 3.0)
