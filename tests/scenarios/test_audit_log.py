"""The audit log over every shared scenario: every record validates against the published
schema (`schemas/audit.schema.json`), and `kaipolicy explain` answers for every job left
pending or evicted, naming at least one rule or its queue's quota numbers."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kaipolicy.framework.audit import Audit
from kaipolicy.simulate import simulate_file
from kaipolicy.workflow.explain import explain
from tests.scenarios.shared import REPO, default_bundle, scenario_files, scenario_id


@lru_cache(maxsize=1)
def validators() -> dict[str, jsonschema.Draft202012Validator]:
    """The published schema, and per record kind the same schema with its `oneOf` narrowed to that
    kind's branch: the same checks for a record of that kind, at half the cost."""
    schema = json.loads((REPO / "schemas" / "audit.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    out = {"": jsonschema.Draft202012Validator(schema)}
    for kind in schema["properties"]["kind"]["enum"]:
        out[kind] = jsonschema.Draft202012Validator({**schema, "oneOf": [{"$ref": f"#/$defs/{kind}"}]})
    return out


def schema_errors(record: dict[str, Any]) -> list[str]:
    every = validators()
    return sorted(e.message for e in every.get(record.get("kind", ""), every[""]).iter_errors(record))


def _pending_or_evicted(report: dict[str, Any]) -> list[str]:
    jobs = {t["job"] for t in report["tasks"] if t["status"] == "Pending"}
    evicted_tasks = {e["task"] for e in report["evictionReasons"]}
    jobs |= {t["job"] for t in report["tasks"] if t["name"] in evicted_tasks}
    return sorted(jobs)


@pytest.mark.parametrize("path", scenario_files(), ids=scenario_id)
def test_every_record_validates_and_explain_names_a_rule_or_quota_number_for_each_pending_or_evicted_job(
        path: Path) -> None:
    audit = Audit(enabled=True)
    report = simulate_file(path, default_bundle(), audit=audit).report()
    records = [json.loads(line) for line in audit.lines()]
    for record in records:
        errors = schema_errors(record)
        assert not errors, f"{record}: {errors}"
    rules = set(default_bundle().rule_labels())
    for job in _pending_or_evicted(report):
        answer = explain(records, job)
        text = answer.render()
        named = {rule for rule in rules if rule in text}
        numbers = answer.queue_numbers is not None and "deserved " in text
        assert named or numbers, f"{job}: {text}"
        assert set(answer.rules) <= rules
