"""Which pods of a job are placed next (tasks_to_allocate)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kaipolicy.api.job import Job, PodSet, SubGroupSet
from kaipolicy.api.resources import Request
from kaipolicy.api.task import DEFAULT_SUB_GROUP, Status, Task
from kaipolicy.framework.tasks import tasks_to_allocate


def _session() -> Any:
    def no_order(*_: Any) -> Any:
        raise AssertionError("an order key was asked of a single item")
    return SimpleNamespace(next_tasks={}, next_request={}, pod_set_key=no_order, task_key=no_order)


def _job(statuses: list[Status], min_available: int, virtual: bool = False) -> Job:
    ps = PodSet(DEFAULT_SUB_GROUP, min_available)
    job = Job("j", "j", "ns", "q", 100, True, 0.0, SubGroupSet("root", pod_sets=[ps]), {DEFAULT_SUB_GROUP: ps})
    for i, status in enumerate(statuses):
        job.add_task(Task(uid=f"p{i}", name=f"p{i}", namespace="ns", job="j", request=Request.build(1000, 1e9, gpus=1),
                          status=status, is_virtual=virtual))
    return job


@pytest.mark.parametrize("min_available", [0, 1, 2])
@pytest.mark.parametrize("status", list(Status))
@pytest.mark.parametrize("virtual", [False, True])
@pytest.mark.parametrize("real", [False, True])
def test_a_one_pod_job_places_its_pod_exactly_when_the_pod_should_be_placed(min_available: int, status: Status,
                                                                             virtual: bool, real: bool) -> None:
    # pending, or (in a simulation) evicted there: whatever the pod set's minimum asks
    job = _job([status], min_available, virtual)
    (task,) = job.tasks.values()
    expected = [task] if status == Status.PENDING or (not real and status == Status.RELEASING and virtual) else []
    assert tasks_to_allocate(_session(), job, real) == expected


@pytest.mark.parametrize(("statuses", "placed"), [
    ([Status.PENDING, Status.PENDING, Status.PENDING, Status.RUNNING], ["p0", "p1"]),
    ([Status.PENDING, Status.PENDING, Status.RUNNING, Status.RUNNING, Status.RUNNING], ["p0"]),
])
def test_a_gang_places_what_its_minimum_still_lacks_else_one_pod(statuses: list[Status], placed: list[str]) -> None:
    ssn = _session()
    ssn.task_key = lambda t, j: (t.uid,)
    assert [t.uid for t in tasks_to_allocate(ssn, _job(statuses, min_available=3), True)] == placed
