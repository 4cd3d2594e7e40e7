"""Where the integration tests find kube-apiserver and etcd, and what they say when they cannot."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.apiserver import ROOT, binaries, reason_unavailable


def _fake_binaries(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name in ("kube-apiserver", "etcd"):
        (folder / name).write_text("#!/bin/sh\n")
        (folder / name).chmod(0o755)
    return folder


def test_kubebuilder_assets_is_used_when_it_holds_both_binaries(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    assets = _fake_binaries(tmp_path / "assets")
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(assets))
    assert binaries() == assets


def test_without_binaries_the_reason_says_how_to_get_them(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    monkeypatch.setenv("KAIPOLICY_KAPI_CACHE", str(tmp_path / "empty-cache"))
    assert binaries() is None
    reason = reason_unavailable()
    assert reason is not None and "tools/kube-apiserver/build.sh" in reason and "KUBEBUILDER_ASSETS" in reason


def test_a_kubebuilder_assets_folder_missing_one_binary_is_not_used(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    assets = _fake_binaries(tmp_path / "half")
    (assets / "etcd").unlink()
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(assets))
    monkeypatch.setenv("KAIPOLICY_KAPI_CACHE", str(tmp_path / "empty-cache"))
    assert binaries() is None


def _run_one_test_needing_the_apiserver(folder: Path, ci: str, cache: Path) -> subprocess.CompletedProcess[str]:
    folder.mkdir()
    (folder / "conftest.py").write_text("from tests.integration.conftest import apiserver  # noqa: F401\n")
    (folder / "test_it.py").write_text("def test_needs_it(apiserver):\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k != "KUBEBUILDER_ASSETS"}
    env |= {"CI": ci, "KAIPOLICY_KAPI_CACHE": str(cache), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(folder)],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_the_fixture_fails_under_ci_and_skips_elsewhere_without_binaries(tmp_path: Path) -> None:
    under_ci = _run_one_test_needing_the_apiserver(tmp_path / "ci", "true", tmp_path / "empty-cache")
    assert under_ci.returncode == 1 and "1 error" in under_ci.stdout
    assert "integration tests cannot run: kube-apiserver and etcd are not built" in under_ci.stdout
    elsewhere = _run_one_test_needing_the_apiserver(tmp_path / "dev", "", tmp_path / "empty-cache")
    assert elsewhere.returncode == 0 and "1 skipped" in elsewhere.stdout
    assert "kube-apiserver and etcd are not built: run tools/kube-apiserver/build.sh" in elsewhere.stdout
