"""The compiler's stages keep to their rooms, and the smaller stages behave as documented."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from kaipolicy.rules import lint
from kaipolicy.rules.arguments import coerce
from kaipolicy.rules.lint import format_diagnostics
from kaipolicy.rules.parse import ParseError, parse
from kaipolicy.rules.source import read_source
from kaipolicy.rules.vocabulary import Vocabulary

PACKAGE = Path(__file__).resolve().parents[3] / "kaipolicy" / "rules"


def test_only_the_compile_stage_calls_compile_or_exec() -> None:
    calls = re.compile(r"(?<![.\w])(compile|exec|eval)\(")
    offenders = [p.name for p in PACKAGE.glob("*.py") if p.name != "compile.py" and calls.search(p.read_text())]
    assert offenders == []


def test_every_module_opens_with_a_docstring_and_stays_small() -> None:
    for path in PACKAGE.glob("*.py"):
        text = path.read_text()
        assert text.startswith('"""'), path.name
        assert len(text.splitlines()) <= 400, path.name


@pytest.mark.parametrize("style", ["plain", "double", "single", "literal", "folded"])
def test_an_offset_inside_any_scalar_style_maps_back_to_the_file(style: str) -> None:
    body = {"plain": "a: x && task.gpuz", "double": 'a: "x && task.gpuz"', "single": "a: 'x && task.gpuz'",
            "literal": "a: |\n  x &&\n    task.gpuz", "folded": "a: >\n  x &&\n  task.gpuz"}[style]
    src, diags = read_source("f.yaml", body + "\n")
    assert diags == []
    line, col = src.expr_place(("a",), src.data["a"].index("gpuz"))
    assert src.line_text(line)[col - 1:col + 3] == "gpuz"


@pytest.mark.parametrize(("text", "pos"), [("1 +", 2), ("a ++ b", 3), ("1 + $", 4), ("f(1,", 3),
                                           ("'\\q'", 1), ("'ok\\xZZ'", 3), ("9223372036854775808", 0)])
def test_syntax_errors_carry_the_offset_of_the_problem(text: str, pos: int) -> None:
    with pytest.raises(ParseError) as info:
        parse(text)
    assert info.value.pos == pos


@pytest.mark.parametrize(("arg_type", "given", "want"), [
    ("double", "1.5", 1.5), ("double", 2, 2.0), ("int", "0x10", 16), ("uint", "3", 3),
    ("bool", "True", True), ("bool", False, False), ("string", "binpack", "binpack"),
])
def test_configuration_strings_are_coerced_to_the_declared_type(arg_type: str, given: object,
                                                                want: object) -> None:
    assert coerce(arg_type, given) == want


@pytest.mark.parametrize(("arg_type", "given"), [("int", True), ("uint", "-1"), ("string", 3), ("bool", "yes"),
                                              ("double", "inf"), ("double", "nan"), ("double", "1e999"),
                                              ("double", float("inf"))])
def test_values_of_the_wrong_type_are_refused(arg_type: str, given: object) -> None:
    with pytest.raises(ValueError):
        coerce(arg_type, given)


def test_lint_formats_diagnostics_as_text_and_json(tmp_path: Path, vocabulary: Vocabulary,
                                                   write: Callable[[str, str], Path]) -> None:
    path = write("r.yaml", "plugin: x\nrules:\n  - name: a\n    hook: predicate\n    deny: task.gpuz > 1.0\n")
    diags = lint([path], vocabulary)
    records = json.loads(format_diagnostics(diags, "json"))
    assert [(r["code"], r["line"], r["column"], r["rule"]) for r in records] == [("E302", 5, 16, "a")]
    assert format_diagnostics(diags, "text").endswith("1 error(s), 0 warning(s)")
    assert format_diagnostics([], "text") == "no problems found"
