"""What a cycle writes on a PodGroup: the reference's summary of fit errors, its scheduling
condition (one per node pool, newest last, transition ids counting up), phase and counts, and the
timestamp annotations; nothing when the object already says so."""

from __future__ import annotations

from typing import Any

import pytest

from kaipolicy.cache.podgroups import FitError, JobReport, annotations_patch, fit_errors_message, status_patch

NOW = 1_800_000_000.0
COUNTS = {"running": 0, "pending": 2, "succeeded": 0, "failed": 0}
GANG = FitError("PodSchedulingErrors", "Resources were found for 1 pods while 2 are required for gang scheduling.")


def _report(**over: Any) -> JobReport:
    return JobReport(**({"namespace": "team", "name": "train", "phase": "Pending", "counts": COUNTS,
                         "fit_errors": (GANG,), "unschedulable": True} | over))


def _group(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "train", "namespace": "team", "labels": {}}, "spec": {}, "status": status}


@pytest.mark.parametrize(("errors", "want"), [
    ((), "Unable to schedule podgroup"),
    ((FitError("OverLimit", "q quota has reached the allowable limit of GPUs"),),
     "OverLimit: q quota has reached the allowable limit of GPUs."),
    ((FitError("PodSchedulingErrors", "b"), FitError("PodSchedulingErrors", "a"), FitError("X", "b")),
     "Unable to schedule podgroup: 2 b. \na."),
])
def test_fit_errors_are_summed_up_as_the_reference_does(errors: tuple[FitError, ...], want: str) -> None:
    assert fit_errors_message(errors) == want


def test_an_unschedulable_job_gets_the_condition_with_its_reasons() -> None:
    patch = status_patch(_group(), _report(), NOW)
    assert patch is not None
    (condition,) = patch["status"].pop("schedulingConditions")
    assert patch == {"status": {"phase": "Pending"} | COUNTS}
    assert condition == {"type": "UnschedulableOnNodePool", "nodePool": "default", "reason": "Unschedulable",
                         "message": f"PodSchedulingErrors: {GANG.message}.", "status": "True",
                         "reasons": [{"reason": GANG.reason, "message": GANG.message}], "transitionID": "1",
                         "lastTransitionTime": "2027-01-15T08:00:00Z"}


def test_the_same_condition_again_writes_nothing() -> None:
    first = status_patch(_group(), _report(), NOW)
    assert first is not None
    assert status_patch(_group(**first["status"]), _report(), NOW + 60) is None


def test_a_changed_message_replaces_the_pools_condition_with_the_next_transition_id() -> None:
    first = status_patch(_group(), _report(), NOW)
    assert first is not None
    other = FitError("PodSchedulingErrors", "0/2 nodes are available.")
    patch = status_patch(_group(**first["status"]), _report(fit_errors=(other,)), NOW)
    assert patch is not None
    (condition,) = patch["status"]["schedulingConditions"]
    assert (condition["transitionID"], condition["reasons"][0]["message"]) == ("2", other.message)


def test_the_pools_condition_moves_last_when_another_pools_is_newer() -> None:
    mine = status_patch(_group(), _report(), NOW)
    assert mine is not None
    theirs = {"type": "UnschedulableOnNodePool", "nodePool": "other", "reason": "Unschedulable", "message": "x",
              "status": "True", "transitionID": "5"}
    patch = status_patch(_group(**mine["status"] | {"schedulingConditions": [*mine["status"]["schedulingConditions"],
                                                                              theirs]}), _report(), NOW)
    assert patch is not None
    assert [(c["nodePool"], c["transitionID"]) for c in patch["status"]["schedulingConditions"]] == [
        ("other", "5"), ("default", "6")]


def test_a_pod_group_in_a_partition_and_with_single_backoff_names_its_pool() -> None:
    group = _group() | {"spec": {"schedulingBackoff": 1}}
    group["metadata"]["labels"] = {"kai.scheduler/node-pool": "a100"}
    patch = status_patch(group, _report(), NOW)
    assert patch is not None
    (condition,) = patch["status"]["schedulingConditions"]
    assert condition["nodePool"] == "a100" and condition["message"].startswith("Node-Pool 'a100': PodSchedulingErrors")


def test_a_job_with_pods_on_nodes_gets_its_phase_and_counts_but_no_condition() -> None:
    report = _report(phase="Running", counts=COUNTS | {"running": 2, "pending": 0}, unschedulable=False)
    assert status_patch(_group(), report, NOW) == {"status": {"phase": "Running", "running": 2, "pending": 0,
                                                              "succeeded": 0, "failed": 0}}


@pytest.mark.parametrize(("have", "last_start", "want"), [
    ({}, NOW, {"kai.scheduler/last-start-timestamp": "2027-01-15T08:00:00Z"}),
    ({"kai.scheduler/last-start-timestamp": "2027-01-15T08:00:00Z"}, NOW + 0.4, None),   # the same second
    ({"kai.scheduler/last-start-timestamp": "2027-01-15T08:00:00Z"}, NOW - 0.3, None),   # float noise
    ({"kai.scheduler/last-start-timestamp": "2027-01-15T08:00:00Z"}, NOW + 60, {
        "kai.scheduler/last-start-timestamp": "2027-01-15T08:01:00Z"}),
    ({"kai.scheduler/last-start-timestamp": "2027-01-15T08:00:00Z"}, None, {"kai.scheduler/last-start-timestamp": None}),
    ({"kai.scheduler/stale-podgroup-timestamp": "2027-01-15T08:00:00Z"}, None,
     {"kai.scheduler/stale-podgroup-timestamp": None}),
])
def test_the_timestamp_annotations_are_set_moved_or_removed(have: dict[str, str], last_start: float | None,
                                                            want: dict[str, Any] | None) -> None:
    group = _group()
    group["metadata"]["annotations"] = have
    patch = annotations_patch(group, _report(last_start=last_start))
    assert patch == (None if want is None else {"metadata": {"annotations": want}})
