"""BindRequests: their shape, and a gang written all or nothing (a write failing part-way withdraws
what was written; a name taken by a request that no longer counts is replaced)."""

from __future__ import annotations

from typing import Any

import pytest

from kaipolicy import metrics
from kaipolicy.cache import kubeapi
from kaipolicy.cache.bindrequests import BindRequestWriter, Placement, body
from tests.unit.fakeapi import FakeApi

NODES = {"n1", "n2"}


def _gang(n: int, node: str = "n1") -> list[Placement]:
    return [Placement("team", f"w-{i}", f"pod-uid-{i}", node) for i in range(n)]


def _requests(api: FakeApi) -> dict[str, Any]:
    return {name: obj for (kind, _, name), obj in api.objects.items() if kind == "BindRequest"}


@pytest.mark.parametrize(("note", "placement", "partition", "want_spec", "want_labels"), [
    ("whole GPUs", Placement("ns", "p", "u", "n1", (), "Regular", 2, 1.0), "",
     {"podName": "p", "selectedNode": "n1", "receivedResourceType": "Regular",
      "receivedGPU": {"count": 2, "portion": "1.00"}, "backoffLimit": 3}, {"selected-node": "n1"}),
    ("a shared GPU in a group, in a partition", Placement("ns", "p", "u", "n1", ("g1",), "Fraction", 1, 0.25),
     "pool-a", {"podName": "p", "selectedNode": "n1", "receivedResourceType": "Fraction",
                "receivedGPU": {"count": 1, "portion": "0.25"}, "backoffLimit": 3, "selectedGPUGroups": ["g1"]},
     {"selected-node": "n1", "kai.scheduler/node-pool": "pool-a"}),
    ("a CPU-only pod", Placement("ns", "p", "u", "n1"), "",
     {"podName": "p", "selectedNode": "n1", "receivedResourceType": "Regular",
      "receivedGPU": {"count": 0, "portion": "0.00"}, "backoffLimit": 3}, {"selected-node": "n1"}),
    ("a node name too long for a label value", Placement("ns", "p", "u", "n" * 64), "",
     {"podName": "p", "selectedNode": "n" * 64, "receivedResourceType": "Regular",
      "receivedGPU": {"count": 0, "portion": "0.00"}, "backoffLimit": 3}, {}),
])
def test_a_bind_request_has_the_references_shape(note: str, placement: Placement, partition: str,
                                                 want_spec: dict[str, Any], want_labels: dict[str, str]) -> None:
    obj = body(placement, 3, partition)
    assert (obj["apiVersion"], obj["kind"]) == ("scheduling.run.ai/v1alpha2", "BindRequest")
    assert obj["metadata"]["name"] == placement.pod and obj["metadata"]["namespace"] == placement.namespace
    assert obj["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u"}]
    assert obj["spec"] == want_spec
    assert obj["metadata"]["labels"] == want_labels


def test_rules_annotations_go_on_the_bind_request() -> None:
    obj = body(Placement("ns", "p", "u", "n1", annotations={"example.com/rack": "r7"}), 3)
    assert obj["metadata"]["annotations"] == {"example.com/rack": "r7"}


def test_a_gang_is_written_in_order() -> None:
    api = FakeApi()
    result = BindRequestWriter(api).write_gang(_gang(4), NODES)
    assert result.ok and [w.name for w in result.written] == ["w-0", "w-1", "w-2", "w-3"]
    assert sorted(_requests(api)) == ["w-0", "w-1", "w-2", "w-3"]
    assert all(w.version for w in result.written)


def test_a_write_failing_part_way_withdraws_the_gangs_requests_already_written() -> None:
    api = FakeApi()
    api.fail("create", "BindRequest", "w-2", status=500)
    rollbacks = metrics.GANG_ROLLBACKS._value.get()
    result = BindRequestWriter(api).write_gang(_gang(4), NODES)
    assert not result.ok and "w-2: 500" in str(result.error)
    assert _requests(api) == {}
    assert api.verbs("BindRequest") == ["create team/w-0", "create team/w-1", "create team/w-2",
                                        "delete team/w-1", "delete team/w-0"]
    assert result.leftovers == []
    assert metrics.GANG_ROLLBACKS._value.get() == rollbacks + 1


def test_a_withdrawal_that_fails_is_handed_back_to_retry() -> None:
    api = FakeApi()
    api.fail("create", "BindRequest", "w-2")
    api.fail("delete", "BindRequest", "w-0")
    writer = BindRequestWriter(api)
    result = writer.write_gang(_gang(3), NODES)
    assert [w.name for w in result.leftovers] == ["w-0"]
    assert sorted(_requests(api)) == ["w-0"]
    assert writer.withdraw(result.leftovers) == []
    assert _requests(api) == {}


def test_losing_the_right_to_write_part_way_withdraws_the_gang() -> None:
    api = FakeApi()
    allowed = iter([True, True, False])
    result = BindRequestWriter(api).write_gang(_gang(3), NODES, may_write=lambda: next(allowed))
    assert not result.ok and "leadership lost" in str(result.error)
    assert _requests(api) == {}


@pytest.mark.parametrize(("note", "existing", "replaced"), [
    ("failed for good", {"spec": {"selectedNode": "n1", "backoffLimit": 2},
                         "status": {"phase": "Failed", "failedAttempts": 2}}, True),
    ("failed without a limit", {"spec": {"selectedNode": "n1"}, "status": {"phase": "Failed"}}, True),
    ("made for an earlier pod of the same name", {"spec": {"selectedNode": "n1"}, "owner": "old-uid"}, True),
    ("for a node that is gone", {"spec": {"selectedNode": "gone"}}, True),
    ("still being retried by the binder", {"spec": {"selectedNode": "n1", "backoffLimit": 3},
                                           "status": {"phase": "Failed", "failedAttempts": 1}}, False),
    ("pending", {"spec": {"selectedNode": "n2"}}, False),
    ("succeeded", {"spec": {"selectedNode": "n1"}, "status": {"phase": "Succeeded"}}, False),
])
def test_a_taken_name_is_replaced_only_when_its_request_no_longer_counts(
        note: str, existing: dict[str, Any], replaced: bool) -> None:
    api = FakeApi()
    old = api.put(kubeapi.BIND_REQUEST, {
        "metadata": {"name": "w-1", "namespace": "team", "ownerReferences": [
            {"kind": "Pod", "name": "w-1", "uid": existing.get("owner", "pod-uid-1")}]},
        "spec": {"podName": "w-1"} | existing["spec"], "status": existing.get("status", {})})
    result = BindRequestWriter(api).write_gang(_gang(2), NODES)
    assert result.ok is replaced
    if replaced:
        assert _requests(api)["w-1"]["metadata"]["uid"] != old["metadata"]["uid"]
        assert _requests(api)["w-1"]["spec"]["selectedNode"] == "n1"
    else:
        assert "already has a BindRequest that counts" in str(result.error)
        assert sorted(_requests(api)) == ["w-1"]       # w-0 withdrawn, the old one left alone
        assert _requests(api)["w-1"]["metadata"]["uid"] == old["metadata"]["uid"]


def test_a_bug_part_way_through_a_gang_withdraws_what_was_written_and_is_raised() -> None:
    api = FakeApi()
    writer = BindRequestWriter(api)
    calls = iter([True, True, True])

    def may_write() -> bool:
        if next(calls, None) is None:
            raise RuntimeError("a bug")
        return True
    with pytest.raises(RuntimeError, match="a bug"):
        writer.write_gang(_gang(4), NODES, may_write)
    assert _requests(api) == {}
