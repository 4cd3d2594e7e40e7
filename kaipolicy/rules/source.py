"""Stage 1, source: read a rule file's YAML keeping the place of every node.

`SourceFile` holds the plain data (for the schema), the node at every key path, and
maps an offset inside an expression scalar back to the file's line and column, for
plain, quoted and block scalars alike.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kaipolicy import yamlsafe
from kaipolicy.errors import YamlError
from kaipolicy.rules.diagnostics import ERROR, Diagnostic

KeyPath = tuple[str | int, ...]
#: A rule file is small: 1 MiB, 32 levels of nesting, no aliases (an alias's node would stand
#: in two places at once, and expanding aliases is how a few hundred bytes become gigabytes).
LIMITS = yamlsafe.Limits(max_bytes=2**20, max_depth=32, alias_values=0, what="rule file")
#: YamlError kinds -> diagnostic codes (everything else is E002, malformed YAML).
_CODES = {"read": "E001", "encoding": "E001", "size": "E006", "alias": "E007", "depth": "E008",
          "duplicate-key": "E004"}
_ESCAPES = {"0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f",
            "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85",
            "_": "\xa0", "L": "\u2028", "P": "\u2029"}
_HEX = {"x": 2, "u": 4, "U": 8}


@dataclass
class SourceFile:
    path: str
    text: str
    data: Any = None
    nodes: dict[KeyPath, yaml.Node] = field(default_factory=dict)
    keys: dict[KeyPath, yaml.Node] = field(default_factory=dict)
    _starts: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._starts = [0] + [i + 1 for i, c in enumerate(self.text) if c == "\n"]

    def line_col(self, index: int) -> tuple[int, int]:
        """1-based line and column of a character index into the text."""
        line = bisect.bisect_right(self._starts, index) - 1
        return line + 1, index - self._starts[line] + 1

    def line_text(self, line: int) -> str:
        lines = self.text.splitlines()
        return lines[line - 1] if 0 < line <= len(lines) else ""

    def place(self, path: KeyPath, *, key: bool = False) -> tuple[int, int]:
        """Where the value (or, with key=True, the key) at `path` starts; the nearest parent if absent."""
        table = self.keys if key else self.nodes
        while path and path not in table:
            path = path[:-1]
            table = self.nodes
        node = table.get(path)
        if node is None:
            return 1, 1
        return node.start_mark.line + 1, node.start_mark.column + 1

    def expr_place(self, path: KeyPath, offset: int) -> tuple[int, int]:
        """Where character `offset` of the expression scalar at `path` is in the file."""
        node = self.nodes.get(path)
        if not isinstance(node, yaml.ScalarNode):
            return self.place(path)
        return self.line_col(scalar_index(self.text, node, offset))

    def diagnostic(self, code: str, message: str, line: int, column: int, *, rule: str = "",
                   severity: str = ERROR) -> Diagnostic:
        return Diagnostic(code, severity, self.path, line, column, message, rule, self.line_text(line))


def read_source(path: str | Path, text: str | None = None) -> tuple[SourceFile, list[Diagnostic]]:
    """Read and compose one file; YAML errors become diagnostics, never exceptions."""
    name = str(path)
    try:
        if text is None:
            text = yamlsafe.read_text(path, LIMITS)
        elif len(text) > LIMITS.max_bytes or len(text.encode("utf-8", "surrogatepass")) > LIMITS.max_bytes:
            raise YamlError(name, "size", f"the rule file is larger than {LIMITS.max_bytes // 2**20} MiB, "
                                          "the limit for one document")
        src = SourceFile(name, text)
        root = yamlsafe.compose(text, name, LIMITS)
    except YamlError as err:
        src = SourceFile(name, text or "")
        code = _CODES.get(err.code, "E002")
        line, col = (err.line, err.column) if err.line else ((0, 0) if code == "E001" else (1, 1))
        return src, [src.diagnostic(code, err.message, line, col)]
    if root is None:
        return src, [src.diagnostic("E003", "the file is empty", 1, 1)]
    diags: list[Diagnostic] = []
    src.data = _walk(src, root, (), diags)
    return src, diags


def _walk(src: SourceFile, node: yaml.Node, path: KeyPath, diags: list[Diagnostic]) -> Any:
    src.nodes[path] = node
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _scalar(src, key_node, diags) if isinstance(key_node, yaml.ScalarNode) else None
            key = key if isinstance(key, str) else str(key)
            if key in out:
                line, col = key_node.start_mark.line + 1, key_node.start_mark.column + 1
                diags.append(src.diagnostic("E004", f"duplicate key {key!r}", line, col))
            src.keys[path + (key,)] = key_node
            out[key] = _walk(src, value_node, path + (key,), diags)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_walk(src, item, path + (i,), diags) for i, item in enumerate(node.value)]
    return _scalar(src, node, diags)


def _scalar(src: SourceFile, node: yaml.Node, diags: list[Diagnostic]) -> Any:
    """A scalar's value; one that cannot be read (a 5000-digit number) is kept as its text."""
    try:
        return yamlsafe.scalar_value(node)
    except ValueError as err:
        line, col = node.start_mark.line + 1, node.start_mark.column + 1
        diags.append(src.diagnostic("E002", f"cannot read {str(node.value)[:40]!r}: {err}", line, col))
        return node.value


def scalar_index(text: str, node: yaml.ScalarNode, offset: int) -> int:
    """The text index of character `offset` of a scalar's value (best effort for block scalars)."""
    start, end = node.start_mark.index, node.end_mark.index
    if node.style in ("|", ">"):
        pairs = _block(text, start, end, node.style)
    elif node.style in ('"', "'"):
        pairs = _flow(text, start + 1, end - 1, node.style)
    else:
        pairs = _flow(text, start, end, None)
    built = "".join(c for c, _ in pairs)
    if built[: len(node.value)] != node.value or not pairs:
        quote = 1 if node.style in ('"', "'") else 0
        return min(start + quote + offset, max(end - 1, start))
    if offset >= len(pairs):
        return pairs[-1][1] + 1
    return pairs[offset][1]


def _flow(text: str, i: int, end: int, style: str | None) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    while i < end:
        c = text[i]
        if c in "\r\n":
            while out and out[-1][0] in " \t":
                out.pop()
            breaks = 0
            while i < end and text[i] in " \t\r\n":
                breaks += text[i] == "\n"
                i += 1
            out.extend([(" ", i)] if breaks == 1 else [("\n", i)] * (breaks - 1))
        elif style == '"' and c == "\\" and i + 1 < end:
            i = _escape(text, i, out)
        elif style == "'" and c == "'" and text[i + 1:i + 2] == "'":
            out.append(("'", i))
            i += 2
        else:
            out.append((c, i))
            i += 1
    return out


def _escape(text: str, i: int, out: list[tuple[str, int]]) -> int:
    nxt = text[i + 1]
    if nxt in "\r\n":
        i += 2
        while text[i] in " \t\r\n":
            i += 1
        return i
    if nxt in _HEX:
        width = _HEX[nxt]
        out.append((chr(int(text[i + 2:i + 2 + width], 16)), i))
        return i + 2 + width
    out.append((_ESCAPES.get(nxt, nxt), i))
    return i + 2


def _block(text: str, start: int, end: int, style: str) -> list[tuple[str, int]]:
    body = text.index("\n", start) + 1 if "\n" in text[start:end] else end
    lines: list[tuple[int, str]] = []
    pos = body
    while pos < end:
        nl = text.find("\n", pos, end)
        stop = end if nl < 0 else nl
        lines.append((pos, text[pos:stop]))
        pos = stop + 1
    indents = [len(s) - len(s.lstrip(" ")) for _, s in lines if s.strip()]
    indent = indents[0] if indents else 0
    out: list[tuple[str, int]] = []
    for n, (at, line) in enumerate(lines):
        content = line[indent:]
        if style == ">" and out and content and out[-1][0] == "\n" and n and lines[n - 1][1].strip():
            out[-1] = (" ", at + indent)
        out.extend((c, at + indent + k) for k, c in enumerate(content))
        out.append(("\n", at + len(line)))
    return out
