"""Text for a terminal: names and messages that come from input files are shown, never obeyed.

A job named `"\x1b[2K\r..."` or holding a right-to-left override would otherwise rewrite or
forge lines of the output; every character that is not printable is shown as an escape.
"""

from __future__ import annotations

import io
import sys


def printable(text: str) -> str:
    """`text` with every non-printable character (controls, format characters such as bidi
    overrides, lone surrogates, line separators) written as a Python-style escape; a tab stays."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == "\t" else _escape(c) for c in text)


def printable_lines(text: str) -> str:
    """The same, line by line: the line breaks of a multi-line message are kept."""
    return "\n".join(printable(line) for line in text.split("\n"))


def internal_error(e: BaseException) -> str:
    """One line for an exception kaipolicy did not expect (a bug, or memory running out)."""
    return (f"internal error: {type(e).__name__}: {printable(str(e))[:300]} "
            "(a bug in kaipolicy: please report it; KAIPOLICY_TRACEBACK=1 shows where)")


def _escape(c: str) -> str:
    code = ord(c)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def tolerant_streams() -> None:
    """stdout and stderr write what the terminal's encoding cannot hold as escapes, not an error."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
