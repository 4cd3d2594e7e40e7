"""Text for a terminal: what comes from a file is shown, never obeyed."""

from __future__ import annotations

import pytest

from kaipolicy.cli.text import printable, printable_lines


@pytest.mark.parametrize(("text", "shown"), [
    ("plain-name", "plain-name"),
    ("训练-jöb café", "训练-jöb café"),
    ("tab\tstays", "tab\tstays"),
    ("\x1b[2K\rforged", "\\x1b[2K\\x0dforged"),
    ("line\nbreak", "line\\x0abreak"),
    ("bidi \u202eevil", "bidi \\u202eevil"),
    ("zero\u200bwidth", "zero\\u200bwidth"),
    ("lone \ud800 surrogate", "lone \\ud800 surrogate"),
    ("c1 \x85 next line", "c1 \\x85 next line"),
    ("separator\u2028here", "separator\\u2028here"),
    ("private \U000f0000 use", "private \\U000f0000 use"),
])
def test_non_printable_characters_are_shown_as_escapes(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_line_by_line_keeps_the_line_breaks_and_escapes_the_rest() -> None:
    assert printable_lines("one\x1b\ntwo\r") == "one\\x1b\ntwo\\x0d"
