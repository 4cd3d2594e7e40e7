"""The parser's trees: where a minus is a number's sign, and chains of one operator."""

from __future__ import annotations

import pytest

from kaipolicy.rules import tree as t
from kaipolicy.rules.expression import compile_text
from kaipolicy.rules.parse import ParseError, parse


def test_one_minus_before_a_number_is_its_sign() -> None:
    literal = parse("-9223372036854775808")
    assert isinstance(literal, t.Literal) and literal.value == -2**63
    grouped = parse("-(5)")
    assert isinstance(grouped, t.Unary) and isinstance(grouped.operand, t.Literal)


@pytest.mark.parametrize(("text", "shown"), [
    ("--x", "x"), ("---x", "-x"), ("----x", "x"), ("!!x", "x"), ("!!!x", "!x"),
    ("-(-x)", "--x"),                     # parentheses end a chain
    ("--5", "5"), ("---5", "-5"),
])
def test_a_chain_of_one_operator_cancels_in_pairs_as_in_cels_grammar(text: str, shown: str) -> None:
    def show(node: t.Expr) -> str:
        if isinstance(node, t.Unary):
            return node.op + show(node.operand)
        return node.name if isinstance(node, t.Ident) else str(node.value)
    assert show(parse(text)) == shown


@pytest.mark.parametrize("text", ["--9223372036854775808", "---9223372036854775808", "-(9223372036854775808)"])
def test_a_minus_that_is_no_sign_leaves_its_number_out_of_range(text: str) -> None:
    with pytest.raises(ParseError, match="out of range"):
        parse(text)


def test_every_literal_of_a_long_expression_keeps_its_own_sign() -> None:
    # The parser remembers signed literals by id(); a node it dropped must not lend its id (and
    # its sign) to a later literal (found by the differential test: -8.0 once read as --1e999).
    items = ", ".join(["--1.5", "-8.0", "-(2.5)", "---4.0"] * 200)
    assert compile_text(f"[{items}]", {}).scalar() == [1.5, -8.0, -2.5, -4.0] * 200
