"""Key paths into scenario documents, as messages show them, and values as messages quote them.

`render` writes `jobs[j0].tasks[j0-1].state` (list elements by their `name` when they have a
usable one, else by index; keys that are not simple words in brackets); `keys` reads such a
path back against the document, so the loader can find the line it points at.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

_SIMPLE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_STEP = re.compile(r"\.?([A-Za-z_][A-Za-z0-9_-]*)|\[([^\]]*)\]")


def show(value: Any) -> str:
    """A value as a message quotes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return str(value)


def elem(where: str, item: Any, index: int) -> str:
    """`where[name]` for a list element with a usable name, else `where[index]`."""
    name = item.get("name") if isinstance(item, dict) else None
    if isinstance(name, str) and name and "[" not in name and "]" not in name:
        return f"{where}[{name}]"
    return f"{where}[{index}]"


def render(doc: Any, path: Sequence[Any]) -> str:
    """Human key path: `.key` for keys, `[name]` or `[index]` for list elements."""
    out = ""
    node = doc
    for key in path:
        if isinstance(node, list) and isinstance(key, int):
            node = node[key] if 0 <= key < len(node) else None
            out += elem("", node, key)
        else:
            text = key if isinstance(key, str) else show(key)
            out += (("." if out else "") + text) if _SIMPLE_KEY.match(text) else f"[{text}]"
            node = node.get(key) if isinstance(node, dict) else None
    return out


def keys(doc: Any, rendered: str) -> list[Any]:
    """The mapping keys and list indexes a rendered path stands for, as far as they resolve."""
    out: list[Any] = []
    node = doc
    for match in _STEP.finditer(rendered):
        step = match.group(1) if match.group(1) is not None else match.group(2)
        if isinstance(node, dict):
            found = [k for k in node if (k if isinstance(k, str) else show(k)) == step]
            if not found:
                break
            key = found[0]
        elif isinstance(node, list):
            key = _index(node, step)
            if key is None:
                break
        else:
            break
        out.append(key)
        node = node[key]
    return out


def _index(items: list[Any], step: str) -> int | None:
    for i, item in enumerate(items):
        if isinstance(item, dict) and item.get("name") == step:
            return i
    if step.isdigit() and int(step) < len(items):
        return int(step)
    return None


def declared(names: Iterable[str]) -> str:
    """`declared: a, b, c` for an unknown-name message (at most 12 shown)."""
    shown = sorted(set(names))
    if not shown:
        return "none declared"
    more = f", ... ({len(shown)} in all)" if len(shown) > 12 else ""
    return "declared: " + ", ".join(shown[:12]) + more
