"""A SchedulingShard rendered as the reference's operator renders it: plugins and actions by
priority, the placement strategy's choices, overrides, flags, the partition and the rule bundle."""

from __future__ import annotations

from typing import Any

import pytest

from kaipolicy.cache.shard import shard
from kaipolicy.errors import ObjectError
from kaipolicy.framework.config import config_from


def render(**spec: Any) -> Any:
    return shard({"metadata": {"name": "s"}, "spec": spec})


def plugins(view: Any) -> list[str]:
    return [p["name"] for p in view.config["tiers"][0]["plugins"]]


def test_an_empty_shard_is_the_operators_default_configuration() -> None:
    view = render()
    assert plugins(view) == ["predicates", "proportion", "priority", "nodeavailability", "resourcetype", "podaffinity",
                             "elastic", "kubeflow", "ray", "subgrouporder", "taskorder", "nominatednode",
                             "dynamicresources", "minruntime", "topology", "snapshot", "gpupack", "nodeplacement",
                             "gpusharingorder"]
    assert view.actions == ["allocate", "consolidation", "reclaim", "preempt", "stalegangeviction"]
    assert (view.partition, view.bundle, view.params, view.stale_grace_seconds) == ("", (), {}, None)
    config_from(view.config, actions=view.actions)   # a configuration the engine accepts


def test_spreading_gpus_swaps_the_gpu_plugins_and_turns_consolidation_off() -> None:
    view = render(placementStrategy={"gpu": "spread"})
    assert "gpuspread" in plugins(view) and "gpupack" not in plugins(view) and "gpusharingorder" not in plugins(view)
    assert "consolidation" not in view.actions
    nodeplacement = next(p for p in view.config["tiers"][0]["plugins"] if p["name"] == "nodeplacement")
    assert nodeplacement["arguments"] == {"gpu": "spread", "cpu": "binpack"}


def test_overrides_disable_reorder_and_replace_arguments() -> None:
    view = render(plugins={"predicates": {"priority": 1}, "snapshot": {"enabled": False},
                           "proportion": {"arguments": {"relcaimerSaturationMultiplier": "1.5"}}},
                  actions={"preempt": {"enabled": False}, "reclaim": {"priority": 600}}, kValue=0.5,
                  minRuntime={"preemptMinRuntime": "5m"}, queueDepthPerAction={"allocate": 20})
    names = plugins(view)
    assert names[-1] == "predicates" and "snapshot" not in names
    proportion = next(p for p in view.config["tiers"][0]["plugins"] if p["name"] == "proportion")
    assert proportion["arguments"] == {"relcaimerSaturationMultiplier": "1.5"}   # arguments replace, as in KAI
    minruntime = next(p for p in view.config["tiers"][0]["plugins"] if p["name"] == "minruntime")
    assert minruntime["arguments"] == {"defaultPreemptMinRuntime": "5m"}
    assert view.actions == ["reclaim", "allocate", "consolidation", "stalegangeviction"]
    assert view.config["queueDepthPerAction"] == {"allocate": 20}


def test_scheduler_flags_become_parameters_and_the_rule_bundle_is_named() -> None:
    view = render(partitionLabelValue="pool-a",
                  args={"max-consolidation-preemptees": "4", "full-hierarchy-fairness": "false",
                        "default-staleness-grace-period": "-1s", "leader-elect": "true"},
                  ruleBundle={"configMaps": [{"namespace": "kai", "name": "rules-a"}]})
    assert view.partition == "pool-a"
    assert view.params == {"maxConsolidationPreemptees": 4, "fullHierarchyFairness": False}
    assert view.stale_grace_seconds == -1.0
    assert view.bundle == (("kai", "rules-a"),)


@pytest.mark.parametrize(("spec", "problem"), [
    ({"placementStrategy": {"cpu": "pack"}}, "spec.placementStrategy: 'binpack'/'pack': each must be binpack or spread"),
    ({"args": {"max-consolidation-preemptees": "many"}}, "spec.args[max-consolidation-preemptees]: 'many'"),
])
def test_a_bad_shard_is_refused_naming_it(spec: dict[str, Any], problem: str) -> None:
    with pytest.raises(ObjectError) as e:
        render(**spec)
    assert str(e.value).startswith(f"SchedulingShard/s: {problem}")


@pytest.mark.parametrize(("spec", "problem"), [
    ({"actions": {"backfill": {"priority": 50}}}, "unknown action 'backfill' (kaipolicy runs allocate, consolidation"),
    ({"queueDepthPerAction": {"allocate": -1}}, "spec.queueDepthPerAction: a depth cannot be negative"),
    ({"args": {"max-consolidation-preemptees": "-1"}}, "spec.args[max-consolidation-preemptees]: '-1': cannot be negative"),
])
def test_a_shard_asking_for_what_kaipolicy_cannot_run_is_refused(spec: dict[str, Any], problem: str) -> None:
    with pytest.raises(ObjectError) as e:
        render(**spec)
    assert str(e.value).startswith(f"SchedulingShard/s: {problem}")
