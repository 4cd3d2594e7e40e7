"""The pinned helm of tools/helm (built once by its build.sh), and rendering the chart with it.
Without it the chart tests are skipped, saying why, except under CI=true, where they fail."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "kaipolicy"
BUILD = ROOT / "tools" / "helm" / "build.sh"


def helm_binary() -> Path:
    """The helm binary, or the test is skipped (failed under CI=true)."""
    proc = subprocess.run(["bash", str(BUILD), "--where"], capture_output=True, text=True, timeout=60, check=False)
    if proc.returncode == 0 and proc.stdout.strip():
        return Path(proc.stdout.strip().splitlines()[-1])
    why = "helm is not built: run tools/helm/build.sh (a few minutes the first time, needs Go >= 1.26)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(why, pytrace=False)
    pytest.skip(why)


def helm(*args: str) -> str:
    proc = subprocess.run([str(helm_binary()), *args], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, f"helm {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
    return proc.stdout


def render(namespace: str = "kaipolicy-system", release: str = "kaipolicy", *sets: str,
           crds: bool = False) -> list[dict[str, Any]]:
    """The chart's manifests as `helm template` renders them (`--set` for each of `sets`)."""
    args = ["template", release, str(CHART), "--namespace", namespace]
    for s in sets:
        args += ["--set", s]
    if crds:
        args.append("--include-crds")
    return [doc for doc in yaml.safe_load_all(helm(*args)) if doc]


def only(docs: list[dict[str, Any]], kind: str, name_ends: str = "") -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(name_ends)]
    return found
