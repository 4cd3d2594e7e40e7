"""The default bundle and schemas are found in a checkout, and a wheel ships them."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from kaipolicy import paths

ROOT = Path(__file__).resolve().parents[2]


def test_a_checkout_finds_its_own_policies_and_schemas() -> None:
    assert (paths.data_dir("policies") / "predicates.yaml").is_file()
    assert (paths.data_dir("schemas") / "scenario.schema.json").is_file()


def test_an_installed_copy_is_found_under_the_prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    installed = tmp_path / "share" / "kaipolicy" / "policies"
    installed.mkdir(parents=True)
    monkeypatch.setattr(paths, "_CHECKOUT", tmp_path / "nowhere")
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    assert paths.data_dir("policies") == installed


def test_the_wheel_ships_every_rule_file_and_schema() -> None:
    data_files = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]
    shipped = {p for patterns in data_files.values() for pattern in patterns for p in ROOT.glob(pattern)}
    assert set((ROOT / "policies").glob("*.yaml")) | set((ROOT / "schemas").glob("*.json")) <= shipped
