"""Every problem in a rule file is reported with a code, file, line and column, all at once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kaipolicy.errors import RuleError
from kaipolicy.rules import Diagnostic, lint, load_bundle
from kaipolicy.rules.vocabulary import Vocabulary

Write = Callable[[str, str], Path]


def diagnostics(write: Write, vocabulary: Vocabulary, text: str) -> list[Diagnostic]:
    return lint([write("rules.yaml", text)], vocabulary)


def only(diags: list[Diagnostic], code: str) -> Diagnostic:
    found = [d for d in diags if d.code == code]
    assert len(found) == 1, [str(d) for d in diags]
    return found[0]


def column_of(text: str, line: int, needle: str) -> int:
    return text.splitlines()[line - 1].index(needle) + 1


def test_malformed_yaml_is_reported_with_its_line(write: Write, vocabulary: Vocabulary) -> None:
    text = "plugin: x\nrules:\n  - name: a\n    hook: [predicate\n"
    diag = only(diagnostics(write, vocabulary, text), "E002")
    assert diag.line >= 4 and "malformed YAML" in diag.message


def test_an_unknown_key_points_at_the_key(write: Write, vocabulary: Vocabulary) -> None:
    text = "plugin: x\nrules:\n  - name: a\n    hook: predicate\n    deny: 'false'\n    denny: 'true'\n"
    diag = only(diagnostics(write, vocabulary, text), "E101")
    assert (diag.line, diag.column) == (6, 5)
    assert diag.rule == "a" and "'denny'" in diag.message and "did you mean 'deny'" in diag.message


def test_an_unknown_top_level_key_is_reported(write: Write, vocabulary: Vocabulary) -> None:
    diag = only(diagnostics(write, vocabulary, "plugin: x\nrulez: []\nrules: []\n"), "E101")
    assert (diag.line, diag.column) == (2, 1)


def test_a_form_key_that_does_not_match_the_hook_is_reported(write: Write, vocabulary: Vocabulary) -> None:
    text = "plugin: x\nrules:\n  - name: a\n    hook: predicate\n    score: '1.0'\n"
    diags = [d for d in diagnostics(write, vocabulary, text) if d.code == "E104"]
    assert len(diags) == 2  # 'score' does not fit, and 'deny' is missing
    assert any(d.line == 5 and "'score'" in d.message for d in diags)
    assert any("needs a 'deny' key" in d.message for d in diags)


def test_an_unknown_hook_is_reported_with_a_suggestion(write: Write, vocabulary: Vocabulary) -> None:
    text = "plugin: x\nrules:\n  - name: a\n    hook: predicat\n    deny: 'false'\n"
    diag = only(diagnostics(write, vocabulary, text), "E103")
    assert (diag.line, diag.column) == (4, 11) and "did you mean 'predicate'" in diag.message


@pytest.mark.parametrize("deny", ["node.idleGpus < task.gpuz", '"node.idleGpus < task.gpuz"',
                                  "'node.idleGpus < task.gpuz'"])
def test_an_unknown_field_points_at_the_field_inside_the_scalar(write: Write, vocabulary: Vocabulary,
                                                                deny: str) -> None:
    text = f"plugin: x\nrules:\n  - name: fits\n    hook: predicate\n    deny: {deny}\n"
    diag = only(diagnostics(write, vocabulary, text), "E302")
    assert (diag.line, diag.column) == (5, column_of(text, 5, "gpuz"))
    assert "Task has no field 'gpuz'" in diag.message and "did you mean 'gpus'" in diag.message


def test_an_unknown_field_in_a_folded_multi_line_scalar_points_at_its_line(write: Write,
                                                                           vocabulary: Vocabulary) -> None:
    text = ("plugin: x\nrules:\n  - name: fits\n    hook: predicate\n    deny: >\n"
            "      node.idleGpus < task.gpus &&\n      task.gpuz > 1.0\n")
    diag = only(diagnostics(write, vocabulary, text), "E302")
    assert (diag.line, diag.column) == (7, column_of(text, 7, "gpuz"))


def test_an_escape_before_the_field_keeps_the_column_exact(write: Write, vocabulary: Vocabulary) -> None:
    text = 'plugin: x\nrules:\n  - name: fits\n    hook: predicate\n    deny: "\\"a\\" == task.gpuz"\n'
    diag = only(diagnostics(write, vocabulary, text), "E302")
    assert (diag.line, diag.column) == (5, column_of(text, 5, "gpuz"))


def test_a_type_mismatch_is_reported_at_the_operator(write: Write, vocabulary: Vocabulary) -> None:
    text = "plugin: x\nrules:\n  - name: s\n    hook: nodeOrder\n    score: node.pods + 1.5\n"
    diag = only(diagnostics(write, vocabulary, text), "E305")
    assert (diag.line, diag.column) == (5, column_of(text, 5, "+")) and "int and double" in diag.message


def test_a_map_literal_key_given_twice_is_reported_at_the_second(write: Write, vocabulary: Vocabulary) -> None:
    text = ("plugin: x\nrules:\n  - name: s\n    hook: predicate\n"
            "    deny: \"{'gpu': 1, 'cpu': 2, 'gpu': 3}[node.name] > 1\"\n")
    diag = only(diagnostics(write, vocabulary, text), "E309")
    assert (diag.line, diag.column) == (5, text.splitlines()[4].rindex("'gpu'") + 1)


def test_a_malformed_escape_is_reported_at_its_backslash(write: Write, vocabulary: Vocabulary) -> None:
    text = "plugin: x\nrules:\n  - name: s\n    hook: predicate\n    deny: node.name == 'a\\xZZ'\n"
    diag = only(diagnostics(write, vocabulary, text), "E201")
    assert (diag.line, diag.column) == (5, column_of(text, 5, "\\")) and "hexadecimal" in diag.message


def test_a_body_of_the_wrong_type_is_reported(write: Write, vocabulary: Vocabulary) -> None:
    text = "plugin: x\nrules:\n  - name: s\n    hook: predicate\n    deny: node.idleGpus\n"
    diag = only(diagnostics(write, vocabulary, text), "E306")
    assert "'deny' must be a bool" in diag.message


def test_a_syntax_error_points_at_the_unexpected_token(write: Write, vocabulary: Vocabulary) -> None:
    text = "plugin: x\nrules:\n  - name: s\n    hook: predicate\n    deny: node.pods > > 1\n"
    diag = only(diagnostics(write, vocabulary, text), "E201")
    assert (diag.line, diag.column) == (5, text.splitlines()[4].rindex(">") + 1)


def test_an_unknown_function_is_reported(write: Write, vocabulary: Vocabulary) -> None:
    text = "plugin: x\nrules:\n  - name: s\n    hook: nodeOrder\n    score: placement.binpak(1.0, task)\n"
    diag = only(diagnostics(write, vocabulary, text), "E303")
    assert "did you mean 'placement.binpackShare'" in diag.message


def test_an_unknown_name_is_reported(write: Write, vocabulary: Vocabulary) -> None:
    text = "plugin: x\nrules:\n  - name: s\n    hook: jobOrder\n    key: '[queue.priority]'\n"
    diag = only(diagnostics(write, vocabulary, text), "E301")  # jobOrder sees job, not queue
    assert "unknown name 'queue'" in diag.message


def test_duplicate_rule_names_are_reported_at_the_second_name(write: Write, vocabulary: Vocabulary) -> None:
    text = ("plugin: x\nrules:\n  - name: a\n    hook: predicate\n    deny: 'false'\n"
            "  - name: a\n    hook: predicate\n    deny: 'true'\n")
    diag = only(diagnostics(write, vocabulary, text), "E105")
    assert diag.line == 6 and "first at line 3" in diag.message


def test_an_argument_default_of_the_wrong_type_or_outside_its_enum_is_reported(write: Write,
                                                                              vocabulary: Vocabulary) -> None:
    text = ("plugin: x\narguments:\n  w: {type: double, default: heavy}\n"
            "  mode: {type: string, default: fast, enum: [binpack, spread]}\nrules: []\n")
    diags = [d for d in diagnostics(write, vocabulary, text) if d.code == "E106"]
    assert [d.line for d in diags] == [3, 4]


def test_several_independent_errors_are_all_reported_in_order(write: Write, vocabulary: Vocabulary) -> None:
    text = ("plugin: x\nrules:\n"
            "  - name: a\n    hook: predicate\n    deny: task.gpuz > 1.0\n"
            "  - name: b\n    hook: nodeOrder\n    score: 1 +\n"
            "  - name: c\n    hook: predicate\n    deny: frob(1)\n    extra: 1\n")
    with pytest.raises(RuleError) as info:
        load_bundle([write("rules.yaml", text)], vocabulary)
    codes = [(d.line, d.code) for d in info.value.diagnostics]
    assert codes == [(5, "E302"), (8, "E201"), (11, "E303"), (12, "E101")]
    assert "rules.yaml:5:" in str(info.value)


def test_render_shows_the_source_line_with_a_caret(write: Write, vocabulary: Vocabulary) -> None:
    text = "plugin: x\nrules:\n  - name: fits\n    hook: predicate\n    deny: task.gpuz > 1.0\n"
    rendered = only(diagnostics(write, vocabulary, text), "E302").render().splitlines()
    assert rendered[1].strip() == "deny: task.gpuz > 1.0"
    assert rendered[2].index("^") == rendered[1].index("gpuz")


def test_an_expression_over_the_cost_limit_is_refused(write: Write, vocabulary: Vocabulary) -> None:
    expr = " + ".join(["node.idleGpus"] * 40)
    text = f"plugin: x\nrules:\n  - name: s\n    hook: nodeOrder\n    score: {expr}\n"
    path = write("rules.yaml", text)
    assert only(lint([path], vocabulary, cost_limit=50), "E401").rule == "s"
    assert lint([path], vocabulary) == []


def test_an_empty_file_and_a_missing_directory_are_reported(write: Write, vocabulary: Vocabulary,
                                                            tmp_path: Path) -> None:
    assert only(diagnostics(write, vocabulary, "# nothing\n"), "E003").line == 1
    assert only(lint([tmp_path / "empty-dir-does-not-exist"], vocabulary), "E001")
