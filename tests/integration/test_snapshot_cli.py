"""`kaipolicy snapshot` against a real API server: the file it writes is the state the scheduler
sees, `kaipolicy simulate` runs it unchanged, and nothing beyond what scheduling reads is in it."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import yaml

from kaipolicy.cli.main import main
from tests.integration.apiserver import ApiServer
from tests.integration.cluster import Cluster
from tests.integration.test_crds import apply_quickstart


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_a_snapshot_of_a_realistic_mix_runs_in_simulate_and_keeps_node_selectors(
        cluster: Cluster, apiserver: ApiServer, namespace: str, partition: str, tmp_path: Path) -> None:
    p = partition
    cluster.shard(p, p)
    cluster.node(f"a-{p}", p, gpus=4, labels={"nvidia.com/gpu.memory": "40960", "pool": "a"})
    cluster.node(f"b-{p}", p, gpus=4, labels={"nvidia.com/gpu.memory": "40960", "pool": "b"})
    cluster.queue(f"dept-{p}", p)
    cluster.queue(f"research-{p}", p, parent=f"dept-{p}", gpu=(2, -1))
    cluster.queue(f"prod-{p}", p, parent=f"dept-{p}", gpu=(2, -1))
    cluster.pod_group(namespace, "gang", p, f"research-{p}", min_member=4)
    for i in range(4):
        cluster.pod(namespace, f"gang-{i}", p, group="gang", gpus=1)
    cluster.pod(namespace, "frac", p, queue=f"prod-{p}", annotations={"gpu-fraction": "0.5", "team-secret": "s3cr3t"})
    cluster.pod(namespace, "cpu", p, queue=f"prod-{p}", nodeSelector={"pool": "b"})
    file = tmp_path / "snapshot.yaml"

    code, _, err = _run("snapshot", "--kubeconfig", str(apiserver.kubeconfig), "--shard", p, "-o", str(file))
    assert code == 0, err
    assert "3 job(s), 2 node(s), 3 queue(s); 0 object(s) left out" in err
    text = file.read_text()
    assert "s3cr3t" not in text and "team-secret" not in text
    doc = yaml.safe_load(text)
    assert {j["name"] for j in doc["jobs"]} == {f"{namespace}/gang", f"{namespace}/frac", f"{namespace}/cpu"}

    code, out, err = _run("simulate", str(file), "--output", "json")
    assert code == 0, err
    report = json.loads(out)
    placed = {t["name"]: (t["status"], t["node"]) for t in report["tasks"]}
    assert placed[f"{namespace}/cpu"] == ("Binding", f"b-{p}")
    assert {placed[f"{namespace}/gang-{i}"][0] for i in range(4)} == {"Binding"}
    assert placed[f"{namespace}/frac"][0] == "Binding"


def test_the_reference_quickstart_applied_unchanged_is_placed_by_simulate_on_its_snapshot(
        cluster: Cluster, apiserver: ApiServer, namespace: str, tmp_path: Path) -> None:
    # no shard: the objects without a node-pool label, as the reference scheduler without a partition
    name = f"qs-{namespace}"
    cluster.core.create_node({"metadata": {"name": name}})
    allocatable = {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "4"}  # room for other tests' pods too
    cluster.core.patch_node_status(name, {"status": {"allocatable": allocatable}})
    cluster.core.patch_node(name, {"spec": {"taints": []}})
    apply_quickstart(cluster, namespace)
    file = tmp_path / "quickstart.yaml"
    code, _, err = _run("snapshot", "--kubeconfig", str(apiserver.kubeconfig), "-o", str(file))
    assert code == 0, err
    jobs = {j["name"]: j for j in yaml.safe_load(file.read_text())["jobs"] if j["namespace"] == namespace}
    assert {n: (j["queue"], j["tasks"][0]["resources"]) for n, j in jobs.items()} == {
        f"{namespace}/cpu-only-pod": ("default-queue", {"cpuMillis": 100, "memoryBytes": 250_000_000}),
        f"{namespace}/gpu-pod": ("default-queue", {"cpuMillis": 0, "memoryBytes": 0, "gpus": 1})}
    code, out, err = _run("simulate", str(file), "--output", "json")
    assert code == 0, err
    placed = {t["name"]: (t["status"], t["node"]) for t in json.loads(out)["tasks"]}
    assert placed[f"{namespace}/gpu-pod"] == ("Binding", name)
    assert placed[f"{namespace}/cpu-only-pod"][0] == "Binding"


def test_an_unknown_shard_is_an_error_naming_it(apiserver: ApiServer) -> None:
    code, _, err = _run("snapshot", "--kubeconfig", str(apiserver.kubeconfig), "--shard", "nope")
    assert code == 2
    assert err.strip() == "kaipolicy: SchedulingShard/nope: not found"


def test_an_output_file_that_cannot_be_written_is_a_one_line_error(apiserver: ApiServer, tmp_path: Path) -> None:
    code, _, err = _run("snapshot", "--kubeconfig", str(apiserver.kubeconfig), "-o", str(tmp_path / "no" / "such.yaml"))
    assert code == 2
    assert err.strip() == f"kaipolicy: cannot write {tmp_path}/no/such.yaml: No such file or directory"


def test_an_unreachable_cluster_is_a_one_line_error(tmp_path: Path, apiserver: ApiServer) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(apiserver.kubeconfig.read_text().replace(f":{apiserver.port}", ":1"))
    code, _, err = _run("snapshot", "--kubeconfig", str(config), "--timeout", "1")
    assert code == 2
    assert err.startswith("kaipolicy: no list of Pod objects within 1s: list Pod: cannot reach the API server")
    assert "Traceback" not in err


@pytest.fixture(autouse=True)
def _quiet_informer_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("ERROR", "kaipolicy.cache")
