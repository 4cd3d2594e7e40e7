"""The parser's trees: where a minus is a number's sign and where it is an operator."""

from __future__ import annotations

from kaipolicy.rules import tree as t
from kaipolicy.rules.expression import compile_text
from kaipolicy.rules.parse import parse


def test_one_minus_before_a_number_is_its_sign_and_two_are_operators() -> None:
    assert isinstance(parse("-5"), t.Literal)
    assert isinstance(parse("-(5)"), t.Unary)
    double = parse("--5")
    assert isinstance(double, t.Unary) and isinstance(double.operand, t.Unary)
    assert isinstance(double.operand.operand, t.Literal) and double.operand.operand.value == 5


def test_every_literal_of_a_long_expression_keeps_its_own_sign() -> None:
    # The parser remembers signed literals by id(); a node it dropped must not lend its id (and
    # its sign) to a later literal (found by the differential test: -8.0 once read as --1e999).
    items = ", ".join(["--1.5", "-8.0", "-(2.5)", "---4.0"] * 200)
    assert compile_text(f"[{items}]", {}).scalar() == [1.5, -8.0, -2.5, -4.0] * 200
