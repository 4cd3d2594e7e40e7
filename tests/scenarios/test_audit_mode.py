"""Audit mode changes nothing: the default bundle with a copy of every one of its rules added in
audit mode (each copy just before its original, so it is asked first) places, pipelines and
evicts exactly as the default bundle on every shared scenario, and its records validate."""

from __future__ import annotations

import copy
import json
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from kaipolicy.framework.audit import Audit
from kaipolicy.framework.hooks import BY_NAME
from kaipolicy.rules.schema import SHADOWABLE
from kaipolicy.simulate import simulate_file, without_timings
from tests.scenarios.shared import REPO, run, scenario_files, scenario_id
from tests.scenarios.test_audit_log import schema_errors


def with_audit_copies(doc: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    rules: list[dict[str, Any]] = []
    for rule in doc.get("rules") or []:
        if BY_NAME[rule["hook"]].form in SHADOWABLE:
            rules.append({**copy.deepcopy(rule), "name": f"{rule['name']}-audit", "mode": "audit"})
        rules.append(rule)
    out["rules"] = rules
    return out


@lru_cache(maxsize=1)
def shadowed_bundle() -> Any:
    from kaipolicy.cli.bundle import load

    with tempfile.TemporaryDirectory(prefix="kaipolicy-audit-copies-") as name:
        folder = Path(name)
        for path in sorted((REPO / "policies").glob("*.yaml")):
            doc = yaml.safe_load(path.read_text())
            (folder / path.name).write_text(yaml.safe_dump(with_audit_copies(doc), sort_keys=False))
        return load([str(folder)])


def test_every_shadowable_rule_of_the_default_bundle_has_an_audit_copy() -> None:
    plugins = shadowed_bundle().plugins
    audit = {f"{p}/{r.name}" for p, plugin in plugins.items() for r in plugin.rules if r.mode == "audit"}
    enforced = [f"{p}/{r.name}" for p, plugin in plugins.items() for r in plugin.rules
                if r.mode == "enforce" and r.form in SHADOWABLE]
    assert enforced and audit == {f"{label}-audit" for label in enforced}


@pytest.mark.parametrize("path", scenario_files(), ids=scenario_id)
def test_audit_copies_of_every_rule_change_no_decision(path: Path) -> None:
    audit = Audit(enabled=True)
    shadowed = without_timings(simulate_file(path, shadowed_bundle(), audit=audit).report())
    assert shadowed == run(path)
    # the records the default bundle's run writes are validated in test_audit_log; here the ones
    # only audit-mode rules add: shadow records and the shadow score parts of task records
    for line in audit.lines():
        record = json.loads(line)
        if record["kind"] == "shadow" or "shadowRules" in json.dumps(record.get("scores")):
            assert not schema_errors(record), record
