"""Tasks: how messages name a pod or a job."""

from __future__ import annotations

import pytest

from kaipolicy.api.task import qualified
from kaipolicy.simulate import simulate
from tests.scenarios.shared import default_bundle
from tests.unit.helpers import job, node, scenario


@pytest.mark.parametrize(("namespace", "name", "want"), [
    ("team", "p", "team/p"),                  # a scenario file's names
    ("team", "team/p", "team/p"),             # a live snapshot's names already carry the namespace
    ("team", "teammate/p", "team/teammate/p"),
    ("default", "", "default/"),
])
def test_a_name_is_qualified_by_its_namespace_once(namespace: str, name: str, want: str) -> None:
    assert qualified(namespace, name) == want


def test_messages_about_a_live_snapshots_pods_name_the_namespace_once() -> None:
    # regression: a live snapshot names tasks and jobs namespace/name, and messages said
    # "Pod team/team/a-1 was preempted by workload team/team/b"
    queues = [{"name": "qa", "deserved": {"gpu": 1}}, {"name": "qb", "deserved": {"gpu": 1}}]
    jobs = [job("team/a", "qa", namespace="team", tasks=[{"name": f"team/a-{i}", "state": "Running", "node": "n0"}
                                                         for i in range(2)]),
            job("team/b", "qb", namespace="team", tasks=[{"name": "team/b-0", "state": "Pending"}])]
    result = simulate(scenario([node("n0", gpus=2)], jobs, queues=queues, actions=["reclaim"]), default_bundle())
    eviction = result.evictions[0]
    assert eviction[1].task.startswith("team/a-")
    assert eviction[1].message.startswith(f"Pod {eviction[1].task} was preempted by workload team/b.")
    assert eviction[1].reason["job"] == "team/b"
