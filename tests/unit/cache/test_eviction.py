"""Evicting a pod: the Eviction API first (it writes its own condition), then the reference's
condition with the message; a pod already gone counts as evicted, a refusal is an error."""

from __future__ import annotations

from kaipolicy.cache import kubeapi
from kaipolicy.cache.eviction import Eviction, evict
from tests.unit.fakeapi import FakeApi

VICTIM = Eviction("team", "p", "u1", "Pod team/p was preempted by workload team/q.")


def _api() -> FakeApi:
    api = FakeApi()
    api.put(kubeapi.POD, {"metadata": {"name": "p", "namespace": "team", "uid": "u1"}, "status": {}})
    return api


def test_an_eviction_goes_through_the_eviction_api_then_leaves_the_references_condition() -> None:
    api = _api()
    assert evict(api, VICTIM) is None 
    assert api.verbs("Pod") == ["evict team/p", "patch status team/p"]
    pod = api.objects[("Pod", "team", "p")]
    assert pod["metadata"]["deletionTimestamp"]
    (condition,) = pod["status"]["conditions"]
    assert {k: condition[k] for k in ("type", "status", "reason", "message")} == {
        "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler", "message": VICTIM.message}


def test_a_pod_already_gone_counts_as_evicted() -> None:
    assert evict(FakeApi(), VICTIM) is None 


def test_a_refused_eviction_is_an_error_and_leaves_the_pod_alone() -> None:
    api = _api()
    api.fail("evict", "Pod", "p", status=429, message="Cannot evict pod as it would violate the pod's disruption budget")
    error = evict(api, VICTIM) 
    assert error is not None and error.status == 429
    assert api.verbs("Pod") == ["evict team/p"]


def test_a_condition_that_cannot_be_written_does_not_undo_the_eviction() -> None:
    api = _api()
    api.fail("patch status", "Pod", "p", status=500)
    assert evict(api, VICTIM) is None 
