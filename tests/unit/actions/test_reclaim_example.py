"""Regression: an elastic victim giving up pods one by one is evicted once per pod."""

from __future__ import annotations

from pathlib import Path

from kaipolicy.simulate import simulate_file
from tests.scenarios.shared import default_bundle

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "reclaim.yaml"


def test_each_reclaimed_pod_is_evicted_once_and_the_reclaimer_binds_next_cycle() -> None:
    report = simulate_file(EXAMPLE, default_bundle()).report()
    evicted = [(e["cycle"], e["task"]) for e in report["evictionReasons"]]
    assert len(evicted) == len(set(evicted)) == report["perCycle"][0]["evictions"] == 2
    assert report["perCycle"][1]["binds"] == 2
    assert {t["status"] for t in report["tasks"] if t["job"] == "llm-finetune"} == {"Binding"}
    assert all(e["job"] == "default/llm-finetune" and "proportion/" in e["rules"] for e in report["evictionReasons"])
