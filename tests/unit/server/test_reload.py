"""The policy a cycle runs: the bundled rules without ConfigMaps; a ConfigMap bundle swapped in
only when it compiles and fits the configuration; a refusal reported once, with file:line:col, on
the shard and the ConfigMap, while the last good policy keeps deciding."""

from __future__ import annotations

from pathlib import Path

import pytest

from kaipolicy import metrics
from kaipolicy.framework.config import PluginOption, SchedulerConfig
from kaipolicy.server.reload import Reloader, file_name
from tests.scenarios.shared import default_bundle

ROOT = Path(__file__).resolve().parents[3]
CONFIG = SchedulerConfig()
BROKEN = "plugin: avoid\nrules:\n  - name: r\n    hook: predicate\n    deny: \"node.name == \"\n"


def _rules(**extra: str) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((ROOT / "policies").glob("*.yaml"))} | extra


class Reports(list[tuple[str, str, str, str]]):
    def __call__(self, kind: str, namespace: str, name: str, message: str) -> None:
        self.append((kind, namespace, name, message))


@pytest.fixture
def reports() -> Reports:
    return Reports()


@pytest.fixture
def reloader(reports: Reports) -> Reloader:
    return Reloader(default_bundle(), "bundled rules", reports)


def _reloads(result: str) -> float:
    return metrics.BUNDLE_RELOADS.labels(result=result)._value.get()


def test_without_configmaps_the_bundled_rules_decide(reloader: Reloader) -> None:
    policy = reloader.select(None, CONFIG)
    assert policy is not None and policy.bundle is default_bundle() and policy.source == "bundled rules"


def test_a_configmap_bundle_that_compiles_is_swapped_in(reloader: Reloader, reports: Reports) -> None:
    successes = _reloads("success")
    policy = reloader.select({("kai", "rules"): _rules()}, CONFIG)
    assert policy is not None and policy.source == "configmap/kai/rules"
    assert policy.bundle.hash == default_bundle().hash       # the same rule files: the same hash
    assert reports == [] and _reloads("success") == successes + 1


def test_a_broken_bundle_is_refused_once_and_the_last_good_one_keeps_deciding(
        reloader: Reloader, reports: Reports) -> None:
    good = reloader.select({("kai", "rules"): _rules()}, CONFIG)
    failures = _reloads("failure")
    for _ in range(3):
        assert reloader.select({("kai", "rules"): _rules(**{"avoid.yaml": BROKEN})}, CONFIG) is good
    assert _reloads("failure") == failures + 1
    where = f"{file_name('kai', 'rules', 'avoid.yaml')}:5:"
    assert [(kind, ns, name) for kind, ns, name, _ in reports] == [("SchedulingShard", "", ""),
                                                                   ("ConfigMap", "kai", "rules")]
    assert all(where in message and "the last good bundle" in message for *_, message in reports)


def test_before_any_good_bundle_there_is_nothing_to_run_and_the_reason_is_kept(reloader: Reloader) -> None:
    assert reloader.select({("kai", "rules"): {"avoid.yaml": BROKEN}}, CONFIG) is None
    assert reloader.problem.startswith("the rule bundle from configmap/kai/rules was refused: configmap/kai/rules/")


def test_a_missing_configmap_is_refused_naming_it(reloader: Reloader, reports: Reports) -> None:
    assert reloader.select({("kai", "rules"): _rules(), ("kai", "extra"): None}, CONFIG) is None
    assert "ConfigMap(s) that do not exist: kai/extra" in reloader.problem
    assert [kind for kind, *_ in reports] == ["SchedulingShard"]


def test_a_bundle_without_a_configured_plugin_is_refused(reloader: Reloader) -> None:
    rules = {k: v for k, v in _rules().items() if k != "proportion.yaml"}
    assert reloader.select({("kai", "rules"): rules}, CONFIG) is None
    assert "plugin 'proportion', which the rule bundle does not have" in reloader.problem


def test_a_configuration_the_bundle_cannot_run_keeps_the_last_good_policy(reloader: Reloader) -> None:
    good = reloader.select(None, CONFIG)
    odd = SchedulerConfig(tiers=((PluginOption("nodeplacement", {"gpu": "sideways"}),),))
    assert reloader.select(None, odd) is good


def test_keys_that_are_not_rule_files_are_left_out(reloader: Reloader) -> None:
    policy = reloader.select({("kai", "rules"): _rules(**{"README": "notes", "x_test.yaml": "suite: x"})}, CONFIG)
    assert policy is not None and policy.bundle.hash == default_bundle().hash
