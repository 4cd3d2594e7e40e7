"""libyaml's events, their errors placed in the text, and the checks one event can fail.

Scalars are resolved as YAML 1.1 and PyYAML's safe loader resolve them; only the core tags are
allowed. Messages name the document by `Limits.what` ("rule file", "scenario").
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import yaml
from yaml import events as ev
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from kaipolicy.errors import YamlError
from kaipolicy.yamlsafe.text import Limits, line_col

STR = "tag:yaml.org,2002:str"
INT = "tag:yaml.org,2002:int"
MERGE = "tag:yaml.org,2002:merge"
_SCALAR_TAGS = frozenset({STR, INT, "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null"})
_COLLECTION_TAGS = frozenset({"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"})
_CONSTRUCTOR = SafeConstructor()
_IMPLICIT: dict[str, list[tuple[str, re.Pattern[str]]]] = Resolver.yaml_implicit_resolvers
MAX_DIGITS = 4300   # what Python converts from text to int (sys.get_int_max_str_digits)


def events(text: str, name: str, limits: Limits) -> Iterator[ev.Event]:
    """libyaml's events; its errors become YamlErrors with the place in `text`."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as err:  # lone surrogates, only from text that never was bytes
        line, column = line_col(text, err.start)
        raise YamlError(name, "encoding", f"character U+{ord(text[err.start]):04X} cannot be encoded",
                        line, column) from err
    try:
        yield from yaml.parse(data, Loader=yaml.CSafeLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        what = str(err.problem or err.context)
        if "maximum nesting depth" in what:   # libyaml's own limit (1000) met while scanning ahead
            raise YamlError(name, "depth", _too_deep(limits), line, column) from err
        if err.problem and err.context:
            at = err.context_mark
            what += f" ({err.context}" + (f" that starts at line {at.line + 1}, column {at.column + 1})" if at else ")")
        raise YamlError(name, "syntax", f"malformed YAML: {what}", line, column) from err
    except yaml.reader.ReaderError as err:
        # libyaml reports a byte offset into the UTF-8 text
        index = len(data[:err.position].decode("utf-8", errors="replace"))
        line, column = line_col(text, index)
        raise YamlError(name, "syntax", f"malformed YAML: character U+{err.character:04X} is not allowed "
                                        f"({err.reason})", line, column) from err
    except yaml.YAMLError as err:
        raise YamlError(name, "syntax", f"malformed YAML: {err}") from err


def where(event: ev.Event) -> tuple[int, int]:
    mark = event.start_mark
    return (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)


def resolve(value: str) -> str:
    """The tag YAML 1.1 gives a plain scalar (what PyYAML's Resolver does, without its node
    argument): int, float, bool, null, timestamp, merge, or str."""
    for tag, pattern in _IMPLICIT.get(value[:1], ()):
        if pattern.match(value):
            return str(tag)
    return STR


def refuse(event: ev.Event, name: str, code: str, message: str) -> YamlError:
    line, column = where(event)
    return YamlError(name, code, message, line, column)


def check_collection(event: ev.Event, depth: int, name: str, limits: Limits) -> None:
    """A mapping or list opening at `depth` (0 = the top level)."""
    if depth >= limits.max_depth:
        raise refuse(event, name, "depth", _too_deep(limits))
    tag = getattr(event, "tag", None)
    if tag not in (None, "!") and tag not in _COLLECTION_TAGS:
        raise refuse(event, name, "tag", f"the tag {tag!r} is not allowed in a {limits.what}")


def check_scalar(event: ev.ScalarEvent, name: str, limits: Limits) -> None:
    if event.tag not in (None, "!") and event.tag not in _SCALAR_TAGS:
        raise refuse(event, name, "tag", f"the tag {event.tag!r} is not allowed in a {limits.what}")


def check_document(event: ev.Event, number: int, name: str, limits: Limits) -> None:
    if number > 1:
        raise refuse(event, name, "documents", f"more than one YAML document (---): a {limits.what} "
                                                "is one document")


def too_long(digits: str) -> str:
    return f"an integer of {len(digits)} digits is too long to read ({MAX_DIGITS} at most)"


def _too_deep(limits: Limits) -> str:
    return f"nested deeper than {limits.max_depth} levels, the limit for a {limits.what}"


def alias_refused(event: ev.AliasEvent, name: str, limits: Limits) -> YamlError:
    return refuse(event, name, "alias", f"aliases (*{event.anchor}) are not allowed in a {limits.what}: "
                                         "write the value out")


def scalar_text_value(tag: str, text: str) -> Any:
    """A resolved scalar's value. (SafeConstructor's per-tag functions, called directly: its
    `construct_object` would remember every node it ever saw.)"""
    if tag == STR:
        return text
    return _CONSTRUCTOR.yaml_constructors[tag](_CONSTRUCTOR, yaml.ScalarNode(tag, text))


def scalar_value(node: yaml.Node) -> Any:
    """The value of a composed scalar node; ValueError (with the reason) when it cannot be read.
    A merge key (<<) is kept as its text: only `load` merges."""
    if node.tag == MERGE:
        return node.value
    if node.tag == INT and len(node.value) > MAX_DIGITS:
        raise ValueError(too_long(node.value))
    try:
        return scalar_text_value(node.tag, node.value)
    except KeyError as err:
        raise ValueError(f"the tag {node.tag!r} is not allowed") from err
    except (yaml.YAMLError, OverflowError) as err:
        raise ValueError(getattr(err, "problem", None) or str(err)) from err
