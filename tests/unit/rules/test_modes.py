"""Rule modes: `mode: enforce | warn | audit` per rule, checked at load, switchable per bundle;
test suites (`*_test.yaml`) beside rule files are never loaded as rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from kaipolicy.errors import RuleError
from kaipolicy.rules import load_bundle
from kaipolicy.rules.standard import VOCABULARY

RULES = """\
plugin: guard
rules:
  - name: no-cordoned
    hook: predicate
    mode: {mode}
    deny: "node.unschedulable"
  - name: first
    hook: jobOrder
    key: "[-job.priority]"
"""


def _bundle(tmp_path: Path, text: str) -> Path:
    (tmp_path / "guard.yaml").write_text(text)
    return tmp_path


@pytest.mark.parametrize("mode", ["enforce", "warn", "audit"])
def test_a_rule_carries_the_mode_its_file_gives(tmp_path: Path, mode: str) -> None:
    bundle = load_bundle([_bundle(tmp_path, RULES.format(mode=mode))], VOCABULARY)
    assert bundle.plugins["guard"].rules[0].mode == mode
    assert bundle.plugins["guard"].rules[1].mode == "enforce"


def test_an_unknown_mode_is_a_schema_error_with_its_line(tmp_path: Path) -> None:
    with pytest.raises(RuleError) as err:
        load_bundle([_bundle(tmp_path, RULES.format(mode="dry-run"))], VOCABULARY)
    assert "E102" in str(err.value) and "guard.yaml:5:" in str(err.value)


def test_a_builtin_rule_cannot_be_put_in_audit_mode(tmp_path: Path) -> None:
    text = ("plugin: topo\nrules:\n  - name: split\n    hook: subsetNodes\n    mode: audit\n"
            "    builtin: topology.subsetNodes\n")
    with pytest.raises(RuleError) as err:
        load_bundle([_bundle(tmp_path, text)], VOCABULARY)
    assert "E104" in str(err.value) and "always enforced" in str(err.value)


def test_with_modes_switches_named_rules_and_changes_the_hash(tmp_path: Path) -> None:
    bundle = load_bundle([_bundle(tmp_path, RULES.format(mode="audit"))], VOCABULARY)
    enforced = bundle.with_modes({"guard/no-cordoned": "enforce", "guard/first": "warn"})
    assert [r.mode for r in enforced.plugins["guard"].rules] == ["enforce", "warn"]
    assert enforced.hash != bundle.hash
    assert bundle.plugins["guard"].rules[0].mode == "audit"


@pytest.mark.parametrize(("modes", "says"), [
    ({"guard/nope": "audit"}, "no rule 'guard/nope'"),
    ({"guard/first": "shadow"}, "not one of enforce, warn, audit"),
])
def test_with_modes_refuses_unknown_rules_and_modes(tmp_path: Path, modes: dict[str, str], says: str) -> None:
    bundle = load_bundle([_bundle(tmp_path, RULES.format(mode="audit"))], VOCABULARY)
    with pytest.raises(RuleError, match=says):
        bundle.with_modes(modes)


def test_test_suites_beside_rule_files_are_not_loaded_as_rules(tmp_path: Path) -> None:
    _bundle(tmp_path, RULES.format(mode="enforce"))
    (tmp_path / "guard_test.yaml").write_text("tests: []\n")
    assert list(load_bundle([tmp_path], VOCABULARY).plugins) == ["guard"]
