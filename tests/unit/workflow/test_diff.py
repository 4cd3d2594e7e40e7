"""`kaipolicy diff`: the same scenarios under two bundles; every decision that differs, with the
rules responsible; exit 1 when anything differs, 0 otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kaipolicy.cli.main import main

REPO = Path(__file__).resolve().parents[3]
QUOTA = ["--against", str(REPO / "policies"), "--against", str(REPO / "examples" / "policies" / "gpu-type-quota")]
CLUSTER = str(REPO / "examples" / "gpu-models.yaml")


def test_the_gpu_type_quota_changes_exactly_these_decisions_on_the_two_model_cluster(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", *QUOTA, CLUSTER, "--output", "json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["rules"] == {"added": ["gpu-type-quota/parent-model-quota", "gpu-type-quota/queue-model-quota"],
                            "removed": [], "changed": []}
    (scenario,) = out["scenarios"]
    assert [(d["kind"], d["subject"], d["before"], d["after"], d["rules"]) for d in scenario["differences"]] == [
        # the research department holds 11 of its 12 A100s, so b-tune (2 GPUs, below) is refused the
        # A100s in allocate; consolidation then moves one b-sweep pod to an H100, and b-tune fits
        ("task", "default/b-sweep-6", "Running on a100-1", "Pipelined on h100-0",
         ["new: evicted by consolidation for default/b-tune"]),
        # team-a holds its 4 A100s: its new pods go to the H100s
        ("task", "default/a-train-1", "Binding on a100-0", "Binding on h100-0",
         ["new: gpu-type-quota/queue-model-quota rejected a100-0"]),
        ("task", "default/b-tune-0", "Binding on a100-0", "Pipelined on a100-0",
         ["new: gpu-type-quota/parent-model-quota rejected a100-0"]),
        ("task", "default/a-notebook-0", "Binding on a100-1", "Binding on h100-0",
         ["new: gpu-type-quota/queue-model-quota rejected a100-0, a100-1"]),
        ("eviction", "default/b-sweep-6", "not evicted", "evicted by consolidation in cycle 1 for default/b-tune",
         ["new: allowed by (every victim placed again)"]),
    ]


def test_the_text_output_lists_the_rules_that_changed_and_each_difference(capsys: pytest.CaptureFixture[str]) -> None:
    main(["diff", *QUOTA, CLUSTER])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "rules added: gpu-type-quota/parent-model-quota, gpu-type-quota/queue-model-quota"
    assert "  task default/a-notebook-0: Binding on a100-1 -> Binding on h100-0   " \
           "[new: gpu-type-quota/queue-model-quota rejected a100-0, a100-1]" in lines
    assert lines[-1] == "1 scenario(s), 5 difference(s)"


def test_the_same_bundle_on_both_sides_differs_nowhere_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    small = str(REPO / "examples" / "small-cluster.yaml")
    assert main(["diff", "--against", str(REPO / "policies"), CLUSTER, small]) == 0
    out = capsys.readouterr().out
    assert f"{small}: no difference" in out and out.splitlines()[-1] == "2 scenario(s), 0 difference(s)"


def test_a_queue_whose_gpus_change_is_listed_with_before_and_after(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    cordon = tmp_path / "cordon.yaml"
    cordon.write_text("plugin: cordon\nenable: always\nrules:\n  - name: no-dgx-b\n    hook: predicate\n"
                      "    deny: \"node.name == 'dgx-b'\"\n")
    assert main(["diff", "--against", str(REPO / "policies"), "--against", str(cordon),
                 str(REPO / "examples" / "small-cluster.yaml")]) == 1
    out = capsys.readouterr().out
    assert "queue nlp: 4.5 GPUs -> 0.5 GPUs" in out   # the gang of two 2-GPU pods no longer fits
    assert "new: cordon/no-dgx-b rejected dgx-b" in out
    assert "task default/llm-finetune-0: Binding on dgx-a -> Pending   [new: its gang fell short (1 of 2 pods fit; " \
           "pod llm-finetune-1 found no node)]" in out
