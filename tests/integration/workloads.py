"""Workloads and expectations that several integration modules share: the realistic mix of issue 6
(queues over quota, a gang, shared GPUs, a CPU-only pod) and what `kaipolicy simulate` decides for
it on `kaipolicy snapshot` of the live state."""

from __future__ import annotations

import contextlib
import io
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from kaipolicy.cli.main import main
from tests.integration.cluster import Cluster


def cli(*argv: str) -> str:
    """`kaipolicy ARGV...` in this process; its standard output (it must exit 0)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    assert code == 0, err.getvalue()
    return out.getvalue()


def realistic_mix(cluster: Cluster, ns: str, p: str, scheduler: str = "kai-scheduler") -> list[str]:
    """Two queues whose pods ask for more than the cluster has, a gang of 4, shared GPUs (fractions,
    GPU memory, a fraction of two devices) and a CPU-only pod; the pods' names."""
    memory = {"nvidia.com/gpu.memory": "40960"}
    cluster.node(f"gpu-a-{p}", p, gpus=8, cpu="64", memory="512Gi", labels=memory | {"pool": "a"})
    cluster.node(f"gpu-b-{p}", p, gpus=8, cpu="64", memory="512Gi", labels=memory | {"pool": "b"})
    cluster.node(f"cpu-{p}", p, cpu="32", memory="128Gi", labels={"pool": "cpu"})
    cluster.queue(f"dept-{p}", p)
    cluster.queue(f"team-a-{p}", p, parent=f"dept-{p}", gpu=(4, -1))
    cluster.queue(f"team-b-{p}", p, parent=f"dept-{p}", gpu=(4, -1))
    a, b = f"team-a-{p}", f"team-b-{p}"
    s = {"scheduler": scheduler}
    cluster.pod_group(ns, "train", p, a, min_member=4)
    pods = [cluster.pod(ns, f"train-{i}", p, group="train", gpus=1, **s) for i in range(4)]
    pods += [cluster.pod(ns, f"sweep-{i}", p, queue=a, gpus=2, **s) for i in range(2)]
    pods += [cluster.pod(ns, f"half-{i}", p, queue=b, annotations={"gpu-fraction": "0.5"}, **s) for i in range(3)]
    pods.append(cluster.pod(ns, "mem", p, queue=b, annotations={"gpu-memory": "20000"}, **s))
    pods.append(cluster.pod(ns, "two-halves", p, queue=b,
                            annotations={"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}, **s))
    pods.append(cluster.pod(ns, "cpu-only", p, queue=b, cpu="4", memory="8Gi", nodeSelector={"pool": "cpu"}, **s))
    pods += [cluster.pod(ns, f"infer-{i}", p, queue=b, gpus=1, **s) for i in range(6)]
    return [pod["metadata"]["name"] for pod in pods]


def simulated(kubeconfig: Path, shard: str, scheduler: str, tmp_path: Path, cycles: int = 1) -> dict[str, dict[str, Any]]:
    """`kaipolicy simulate` on `kaipolicy snapshot` of the shard, over `cycles` cycles settled in
    between as the scenario format settles them: each pod's task (status, node, gpuGroups) after
    the last, by pod name."""
    snapshot = tmp_path / "snapshot.yaml"
    cli("snapshot", "--kubeconfig", str(kubeconfig), "--shard", shard, "--scheduler-name", scheduler,
        "-o", str(snapshot))
    if cycles != 1:
        doc = yaml.safe_load(snapshot.read_text())
        doc["cycles"] = cycles
        snapshot.write_text(yaml.safe_dump(doc, sort_keys=False))
    report = json.loads(cli("simulate", str(snapshot), "--output", "json"))
    return {t["name"].split("/", 1)[1]: t for t in report["tasks"]}


def same_groups(one: dict[str, list[str]], other: dict[str, list[str]]) -> bool:
    """Pods share a GPU group in one exactly where they share one in the other (the ids differ:
    the simulation numbers new groups, the scheduler gives them cluster-wide unique ids)."""
    def partition(groups: dict[str, list[str]]) -> set[frozenset[str]]:
        members: dict[str, set[str]] = defaultdict(set)
        for pod, gs in groups.items():
            for g in gs:
                members[g].add(pod)
        return {frozenset(m) for m in members.values()}
    return partition(one) == partition(other)
