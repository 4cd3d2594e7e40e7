"""Scheduling signatures: jobs that kube would place by different rules never share one."""

from __future__ import annotations

from typing import Any

import pytest

from kaipolicy.actions.signatures import signature
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
