"""Scheduling signatures: jobs that kube would place by different rules never share one."""

from __future__ import annotations

from typing import Any

import pytest

from kaipolicy.actions.signatures import FailedSignatures, signature
from kaipolicy.api.task import Status
from kaipolicy.cycle import open_session
from kaipolicy.framework.config import SchedulerConfig
from tests.scenarios.shared import default_bundle
from tests.unit.helpers import job, node, scenario


def _signature(**task: Any) -> tuple[Any, ...]:
    cluster = scenario([node("n0")], [job("j", tasks=[{"state": "Pending", **task}])]).snapshot()
    return signature(cluster.jobs["j"])


@pytest.mark.parametrize("constraint", [
    {"nodeSelector": {"gpu": "h100"}},
    {"requiredNodeAffinity": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]},
    {"tolerations": [{"key": "dedicated", "operator": "Exists"}]},
])
def test_a_node_constraint_changes_the_signature(constraint: dict[str, Any]) -> None:
    assert _signature(**constraint) != _signature()
    assert _signature(**constraint) == _signature(**constraint)


def test_a_job_keeps_the_signature_it_had_when_the_session_opened() -> None:
    # Regression (busy_three_levels seed 277, against the reference's Go with signatures taken as
    # its snapshot takes them): the reference takes every job's signature when the session opens
    # and keeps it, so a job one of whose pods was placed since still shares it with a job of
    # two pending pods, which is then skipped after the first failed.
    two = [{"state": "Pending"}, {"state": "Pending"}]
    scn = scenario([node("n0")], [job("first", tasks=two), job("second", tasks=two)],
                   params={"useSchedulingSignatures": True})
    ssn = open_session(scn.snapshot(), SchedulerConfig(), default_bundle())
    first, second = ssn.cluster.jobs["first"], ssn.cluster.jobs["second"]
    failed = FailedSignatures(ssn)
    ssn.set_status(next(iter(first.tasks.values())), Status.PIPELINED)
    assert signature(first) != signature(second)   # as the pods stand now
    failed.remember(first)
    assert failed.skip(second) is first            # as the session opened: one signature
