"""yamlsafe.nodes: node graphs with character places, limits checked first; places of key paths."""

from __future__ import annotations

import datetime

import pytest
import yaml

from kaipolicy import yamlsafe
from kaipolicy.errors import YamlError

NO_ALIASES = yamlsafe.Limits(max_bytes=4096, max_depth=8, alias_values=0, what="rule file")


def test_compose_keeps_character_offsets_for_non_ascii_text() -> None:
    text = "é: 'wörld'\nb: \"ü\"\n"
    root = yamlsafe.compose(text, "doc.yaml", NO_ALIASES)
    assert isinstance(root, yaml.MappingNode)
    value = root.value[1][1]
    assert text[value.start_mark.index:value.end_mark.index] == '"ü"'


def test_compose_checks_depth_and_documents_like_load() -> None:
    with pytest.raises(YamlError, match="nested deeper"):
        yamlsafe.compose("a: " + "[" * 9 + "]" * 9, "doc.yaml", NO_ALIASES)
    with pytest.raises(YamlError, match="more than one YAML document"):
        yamlsafe.compose("a\n---\nb\n", "doc.yaml", NO_ALIASES)
    assert yamlsafe.compose("", "doc.yaml", NO_ALIASES) is None


def test_positions_find_keys_and_list_elements() -> None:
    text = "jobs:\n- name: a\n  tasks:\n  - {state: Pending}\n  - state: Running\n1: x\n"
    assert yamlsafe.positions(text, [["jobs", 0, "tasks", 1, "state"], ["jobs", 0, "tasks", 0], [1], ["nope"], []]) \
        == [(5, 5), (4, 5), (6, 1), None, (1, 1)]


def test_scalar_values_of_composed_nodes() -> None:
    root = yamlsafe.compose("a: 1\nb: 2001-01-01\nc: <<\nd: " + "9" * 5000 + "\n", "doc.yaml", NO_ALIASES)
    assert isinstance(root, yaml.MappingNode)
    values = [n for _, n in root.value]
    assert yamlsafe.scalar_value(values[0]) == 1
    assert yamlsafe.scalar_value(values[1]) == datetime.date(2001, 1, 1)
    assert yamlsafe.scalar_value(values[2]) == "<<"
    with pytest.raises(ValueError, match="4300"):
        yamlsafe.scalar_value(values[3])
