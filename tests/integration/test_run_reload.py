"""Hot reload on a real API server: the shard's rule bundle lives in a ConfigMap; a good edit
changes placement from the next cycle, a broken one is refused (Event on the shard and on the
ConfigMap, metric, log line, each naming file:line:col) while the last good bundle keeps
scheduling, and no cycle is lost either way. A shard naming a missing ConfigMap is not ready."""

from __future__ import annotations

from pathlib import Path

from tests.integration.apiserver import ApiServer
from tests.integration.cluster import Cluster
from tests.integration.scheduler import Scheduler, nodes_of
from tests.polling import wait_for

ROOT = Path(__file__).resolve().parents[2]
AVOID = """plugin: avoid
description: Keeps pods off one node (a platform team draining it by policy).
enable: always
rules:
  - name: not-that-node
    hook: predicate
    deny: "node.name == '{node}'"
    message: "'node ' + node.name + ' is kept free by policy'"
"""
BROKEN = """plugin: avoid
enable: always
rules:
  - name: not-that-node
    hook: predicate
    deny: "node.name == "
"""


def _default_rules() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((ROOT / "policies").glob("*.yaml"))}


def _set_rules(cluster: Cluster, namespace: str, data: dict[str, str]) -> None:
    cluster.core.replace_namespaced_config_map("rules", namespace, {
        "metadata": {"name": "rules", "namespace": namespace}, "data": data})


def test_a_good_bundle_changes_placement_next_cycle_and_a_broken_one_is_refused_with_no_cycle_lost(
        cluster: Cluster, apiserver: ApiServer, namespace: str, partition: str, tmp_path: Path) -> None:
    ns, p = namespace, partition
    cluster.core.create_namespaced_config_map(ns, {"metadata": {"name": "rules"}, "data": _default_rules()})
    cluster.shard(p, p, ruleBundle={"configMaps": [{"namespace": ns, "name": "rules"}]})
    for n in ("n1", "n2"):
        cluster.node(f"{n}-{p}", p, gpus=4)
    cluster.queue(f"q-{p}", p)
    cluster.pod(ns, "first", p, queue=f"q-{p}", gpus=1)
    scheduler = Scheduler(apiserver.kubeconfig, tmp_path / "run.log", ns, "--shard", p)
    try:
        first = wait_for("the first pod placed", lambda: nodes_of(cluster, ns).get("first"))
        other = f"n2-{p}" if first == f"n1-{p}" else f"n1-{p}"
        # a good edit: the node the first pod went to (and bin-packing prefers) is kept free
        _set_rules(cluster, ns, _default_rules() | {"avoid.yaml": AVOID.format(node=first)})
        wait_for("the new bundle", lambda: scheduler.sample("kaipolicy_bundle_reloads_total", result="success") == 2)
        cluster.pod(ns, "second", p, queue=f"q-{p}", gpus=1)
        assert wait_for("the second pod placed", lambda: nodes_of(cluster, ns).get("second")) == other

        lost = (scheduler.cycles("skipped"), scheduler.cycles("error"))
        ok = scheduler.cycles()
        _set_rules(cluster, ns, _default_rules() | {"avoid.yaml": BROKEN})
        wait_for("the refusal", lambda: scheduler.sample("kaipolicy_bundle_reloads_total", result="failure") == 1)
        cluster.pod(ns, "third", p, queue=f"q-{p}", gpus=1)
        assert wait_for("the third pod placed", lambda: nodes_of(cluster, ns).get("third")) == other  # old bundle
        scheduler.wait_cycles(3)
        assert (scheduler.cycles("skipped"), scheduler.cycles("error")) == lost
        assert scheduler.cycles() > ok + 3
    finally:
        assert scheduler.stop() == 0
    where = f"configmap/{ns}/rules/avoid.yaml:6:"
    (line,) = [e for e in scheduler.lines() if "refused" in e["message"]]
    assert where in line["message"] and "the last good bundle" in line["message"]
    assert any(d.startswith(where) for d in line["diagnostics"])
    for events in (cluster.events_about(ns, "rules"), cluster.events_about("default", p)):
        (event,) = [e for e in events if e["reason"] == "RuleBundleRefused"]
        assert where in event["message"] and event["type"] == "Warning"


def test_a_shard_naming_a_missing_configmap_is_not_ready_and_schedules_nothing_until_it_exists(
        cluster: Cluster, apiserver: ApiServer, namespace: str, partition: str, tmp_path: Path) -> None:
    ns, p = namespace, partition
    cluster.shard(p, p, ruleBundle={"configMaps": [{"namespace": ns, "name": "rules"}]})
    cluster.node(f"n-{p}", p, gpus=4)
    cluster.queue(f"q-{p}", p)
    cluster.pod(ns, "waiting", p, queue=f"q-{p}", gpus=1)
    scheduler = Scheduler(apiserver.kubeconfig, tmp_path / "run.log", ns, "--shard", p)
    try:
        _, body = wait_for("the reason it is not ready", lambda: (r := scheduler.get("/readyz"))[0] == 503
                                and "do not exist" in r[1] and r)
        assert f"ConfigMap(s) that do not exist: {ns}/rules" in body
        assert scheduler.get("/healthz")[0] == 200
        wait_for("a few skipped cycles", lambda: scheduler.cycles("skipped") >= 3)
        assert nodes_of(cluster, ns) == {}
        cluster.core.create_namespaced_config_map(ns, {"metadata": {"name": "rules"}, "data": _default_rules()})
        wait_for("the pod placed", lambda: nodes_of(cluster, ns).get("waiting"), 30)
        assert scheduler.get("/readyz") == (200, "ok\n")
    finally:
        assert scheduler.stop() == 0
