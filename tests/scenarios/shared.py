"""Helpers for tests over ../shared/scenarios: find them, run them in-process, compare with
their `expect` exactly as ../shared/tools/check-scenarios does (its `compare` is loaded, not copied)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
SCENARIOS = SHARED / "scenarios"


def scenario_files() -> list[Path]:
    return sorted(SCENARIOS.rglob("*.yaml"))


def scenario_id(path: Path) -> str:
    return str(path.relative_to(SCENARIOS))


@lru_cache(maxsize=1)
def checker() -> ModuleType:
    path = SHARED / "tools" / "check-scenarios"
    loader = importlib.machinery.SourceFileLoader("check_scenarios", str(path))
    spec = importlib.util.spec_from_loader("check_scenarios", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@lru_cache(maxsize=1)
def default_bundle() -> Any:
    from kaipolicy.cli.bundle import load
    return load(None)


def run(path: Path, **session_options: Any) -> dict[str, Any]:
    """The report `kaipolicy simulate --output json` would print without its timings, or {"error": ...}."""
    from kaipolicy.errors import KaipolicyError
    from kaipolicy.simulate import simulate_file, without_timings

    try:
        return without_timings(simulate_file(path, default_bundle(), **session_options).report())
    except KaipolicyError as e:
        return {"error": str(e)}


def problems(path: Path, report: dict[str, Any]) -> list[str]:
    doc = yaml.safe_load(path.read_text())
    return list(checker().compare(doc, report))
