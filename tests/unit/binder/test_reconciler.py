"""What the reconciler reads of a BindRequest: which are still to act on, the retry delays, the
GPU-group labels a request gives its pod."""

from __future__ import annotations

from typing import Any

import pytest

from kaipolicy.binder.binding import Request
from kaipolicy.binder.reconciler import live
from kaipolicy.binder.settings import BinderSettings


def request(status: dict[str, Any] | None = None, deleting: bool = False, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns", "uid": "u1"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"podName": "p", "selectedNode": "n", **spec}, "status": status or {}}


@pytest.mark.parametrize("obj, expected", [
    (request(), True),
    (request({"phase": "Pending"}, backoffLimit=3), True),
    (request({"phase": "Failed", "failedAttempts": 2}, backoffLimit=3), True),     # a retry is due
    (request({"phase": "Failed", "failedAttempts": 3}, backoffLimit=3), False),    # failed for good
    (request({"phase": "Failed", "failedAttempts": 1}), False),                    # no limit: never retried
    (request({"phase": "Succeeded"}, backoffLimit=3), False),
    (request(deleting=True), False),
])
def test_a_request_is_acted_on_until_it_succeeded_or_failed_for_good(obj: dict[str, Any], expected: bool) -> None:
    assert live(obj) is expected


def test_retries_wait_1_2_4_times_the_base_up_to_the_limit() -> None:
    settings = BinderSettings(retry_base=0.5, retry_limit=3.0)
    assert [settings.retry_delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


@pytest.mark.parametrize("kind, groups, labels", [
    ("Regular", [], {}),
    ("Fraction", ["g1"], {"runai-gpu-group": "g1"}),
    ("Fraction", ["g1", "g2"], {"runai-gpu-group/g1": "g1", "runai-gpu-group/g2": "g2"}),   # KAI's multi-device form
])
def test_a_shared_gpu_request_labels_its_pod_with_its_groups(kind: str, groups: list[str],
                                                             labels: dict[str, str]) -> None:
    obj = request(receivedResourceType=kind, selectedGPUGroups=groups)
    obj["metadata"]["ownerReferences"] = [{"kind": "Pod", "name": "p", "uid": "pod-uid"}]
    r = Request.of(obj)
    assert (r.labels(), r.pod_key, r.pod_uid, r.shared) == (labels, "ns/p", "pod-uid", kind == "Fraction")
