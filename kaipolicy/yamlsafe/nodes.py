"""Node graphs for rule files (which need every node's place) and places of key paths.

`compose` checks the same limits as `load` before libyaml composes; `positions` composes a text
`load` accepted once more, to find where an error's key path is (for messages only).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml
from yaml import events as ev

from kaipolicy.errors import YamlError
from kaipolicy.yamlsafe.events import (
    alias_refused,
    check_collection,
    check_document,
    check_scalar,
    events,
    scalar_text_value,
)
from kaipolicy.yamlsafe.text import Limits


def compose(text: str, name: str, limits: Limits) -> yaml.Node | None:
    """The node graph of the one document in `text` (None when empty), checked against `limits`
    (depth, tags, one document) before libyaml composes it. Aliases are refused whatever the
    limits say: a node graph shares an alias's node with its anchor, so its place would be wrong
    and every walk of the graph would expand it again."""
    depth = documents = 0
    for event in events(text, name, limits):
        if isinstance(event, ev.CollectionStartEvent):
            check_collection(event, depth, name, limits)
            depth += 1
        elif isinstance(event, ev.CollectionEndEvent):
            depth -= 1
        elif isinstance(event, ev.ScalarEvent):
            check_scalar(event, name, limits)
        elif isinstance(event, ev.AliasEvent):
            raise alias_refused(event, name, limits)
        elif isinstance(event, ev.DocumentStartEvent):
            documents += 1
            check_document(event, documents, name, limits)
    try:
        node: yaml.Node | None = yaml.compose(text.encode("utf-8"), Loader=yaml.CSafeLoader)
    except yaml.YAMLError as err:  # the events above passed, so this is not expected
        raise YamlError(name, "syntax", f"malformed YAML: {err}") from err
    return node


def positions(text: str, paths: Sequence[Sequence[Any]]) -> list[tuple[int, int] | None]:
    """(line, column) of the value at each path (mapping keys and list indexes) in a text that
    `load` accepted; for a path ending in a mapping key, the key's place; None where absent.
    (Composes the text once more, so it is for error messages, not for every value.)"""
    try:
        root = yaml.compose(text.encode("utf-8"), Loader=yaml.CSafeLoader)
    except yaml.YAMLError:
        return [None for _ in paths]
    return [_place(root, path) for path in paths]


def _place(node: yaml.Node | None, path: Sequence[Any]) -> tuple[int, int] | None:
    place = node
    for step in path:
        if isinstance(node, yaml.MappingNode):
            found = [(k, v) for k, v in node.value if _key_of(k) == step]
            if not found:
                return None
            place, node = found[-1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and 0 <= step < len(node.value):
            place = node = node.value[step]
        else:
            return None
    if place is None:
        return None
    return place.start_mark.line + 1, place.start_mark.column + 1


def _key_of(node: yaml.Node) -> Any:
    if not isinstance(node, yaml.ScalarNode):
        return None
    try:
        return scalar_text_value(node.tag, node.value)
    except (yaml.YAMLError, ValueError, OverflowError, KeyError):
        return node.value
