"""Stage 2, schema: check a file's structure and turn it into a PluginSpec.

JSON Schema (schemas/rulefile.schema.json) catches unknown keys and wrong types; the
checks here need the hook table: the form key must match the hook, rule names are
unique, argument defaults fit their type and enum. Expressions are not parsed yet.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, cast

import jsonschema

from kaipolicy.framework.hooks import BY_NAME, Form, HookKind
from kaipolicy.paths import data_dir
from kaipolicy.rules.arguments import Argument, check_value, coerce, valid_type
from kaipolicy.rules.check import RESERVED_PREFIX, RESERVED_REASON
from kaipolicy.rules.diagnostics import Diagnostic
from kaipolicy.rules.source import KeyPath, SourceFile

SCHEMA_PATH = data_dir("schemas") / "rulefile.schema.json"
FORM_KEYS: dict[Form, str] = {f: f.value for f in Form}
_EXTRA_KEYS: dict[str, Form] = {"message": Form.DENY, "weight": Form.SCORE, "with": Form.BUILTIN}
# Forms whose result can be computed and then set aside: a warn or audit rule of these forms is
# evaluated and changes nothing. Built-ins act by side effect, and value or annotation rules
# have no decision to shadow, so they are always enforced.
SHADOWABLE = frozenset({Form.DENY, Form.ALLOW, Form.SCORE, Form.KEY})


@dataclass(frozen=True)
class RuleSpec:
    """A structurally valid rule: its expressions are still text, with their key paths."""

    name: str
    hook: HookKind
    index: int
    line: int
    description: str = ""
    weight: float = 1.0
    builtin: str = ""
    with_args: dict[str, Any] = field(default_factory=dict)
    expressions: dict[str, str] = field(default_factory=dict)  # "when", "deny", "annotations.k", ...
    mode: str = "enforce"     # enforce | warn | audit

    def path(self, key: str) -> KeyPath:
        return ("rules", self.index, *key.split(".", 1))


@dataclass(frozen=True)
class PluginSpec:
    name: str
    file: str
    description: str
    reference: str
    arguments: dict[str, Argument]
    rules: tuple[RuleSpec, ...]
    enable: str = "configured"    # always: runs even where the scheduler configuration does not list it


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema


def check_structure(src: SourceFile) -> tuple[PluginSpec | None, list[Diagnostic]]:
    """Schema errors plus hook/form/name/argument checks; a spec of every valid part."""
    validator = jsonschema.Draft202012Validator(load_schema())
    diags = [d for err in validator.iter_errors(src.data) for d in _schema_diagnostics(src, err)]
    data = src.data
    if not isinstance(data, dict) or not isinstance(data.get("plugin"), str):
        return None, diags
    arguments = _arguments(src, data.get("arguments"), diags)
    rules = _rules(src, data.get("rules"), diags)
    spec = PluginSpec(data["plugin"], src.path, _text(data.get("description")),
                      _text(data.get("reference")), arguments, tuple(rules), _text(data.get("enable")) or "configured")
    return spec, diags


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _rule_name(src: SourceFile, path: KeyPath) -> str:
    if len(path) >= 2 and path[0] == "rules" and isinstance(path[1], int):
        rules = src.data.get("rules") if isinstance(src.data, dict) else None
        if isinstance(rules, list) and path[1] < len(rules) and isinstance(rules[path[1]], dict):
            return _text(rules[path[1]].get("name"))
    return ""


def _schema_diagnostics(src: SourceFile, err: jsonschema.ValidationError) -> list[Diagnostic]:
    path: KeyPath = tuple(err.absolute_path)
    rule = _rule_name(src, path)
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        # The stubs allow a boolean or unset schema; iter_errors sets it, and the rule-file
        # schema's additionalProperties sits on object schemas only.
        schema = cast("Mapping[str, Any]", err.schema)
        allowed = set(schema.get("properties", {}))
        out = []
        for key in sorted(k for k in err.instance if k not in allowed):
            line, col = src.place(path + (key,), key=True)
            hint = _suggest(key, allowed)
            out.append(src.diagnostic("E101", f"unknown key {key!r}{hint}", line, col, rule=rule))
        return out
    line, col = src.place(path)
    if err.validator == "enum" and path[-1:] == ("hook",):
        hint = _suggest(str(err.instance), set(BY_NAME))
        return [src.diagnostic("E103", f"unknown hook {err.instance!r}{hint}", line, col, rule=rule)]
    where = "/".join(str(p) for p in path) or "the file"
    return [src.diagnostic("E102", f"{where}: {err.message}", line, col, rule=rule)]


def _suggest(word: str, choices: set[str]) -> str:
    close = difflib.get_close_matches(word, sorted(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _arguments(src: SourceFile, raw: Any, diags: list[Diagnostic]) -> dict[str, Argument]:
    out: dict[str, Argument] = {}
    if not isinstance(raw, dict):
        return out
    for name, decl in raw.items():
        if not isinstance(decl, dict) or not isinstance(decl.get("type"), str):
            continue
        if not valid_type(decl["type"]):
            line, col = src.place(("arguments", name, "type"))
            msg = (f"argument {name!r}: type {decl['type']!r} is not int, uint, double, bool, string, "
                   "list<T> or map<string,T>")
            diags.append(src.diagnostic("E106", msg, line, col))
            continue
        if str(name).startswith(RESERVED_PREFIX):
            line, col = src.place(("arguments", name), key=True)
            diags.append(src.diagnostic("E307", f"argument name {name!r}: {RESERVED_REASON}", line, col))
            continue
        arg = _argument(src, name, decl, diags)
        if arg is not None:
            out[name] = arg
    return out


def _argument(src: SourceFile, name: str, decl: dict[str, Any], diags: list[Diagnostic]) -> Argument | None:
    enum: tuple[Any, ...] | None = None
    if isinstance(decl.get("enum"), list):
        try:
            enum = tuple(coerce(decl["type"], v) for v in decl["enum"])
        except ValueError as err:
            line, col = src.place(("arguments", name, "enum"))
            diags.append(src.diagnostic("E106", f"argument {name!r}: enum value {err}", line, col))
            return None
    arg = Argument(name, decl["type"], "", enum, _text(decl.get("description")))
    try:
        default = check_value(arg, decl.get("default"))
    except ValueError as err:
        line, col = src.place(("arguments", name, "default"))
        diags.append(src.diagnostic("E106", f"argument {name!r}: default {err}", line, col))
        return None
    return Argument(name, arg.type, default, enum, arg.description)


def _rules(src: SourceFile, raw: Any, diags: list[Diagnostic]) -> list[RuleSpec]:
    out: list[RuleSpec] = []
    seen: dict[str, int] = {}
    for index, rule in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(rule, dict) or not isinstance(rule.get("name"), str):
            continue
        name = rule["name"]
        if name in seen:
            line, col = src.place(("rules", index, "name"))
            msg = f"duplicate rule name {name!r} (first at line {seen[name]})"
            diags.append(src.diagnostic("E105", msg, line, col, rule=name))
            continue
        seen[name] = src.place(("rules", index))[0]
        spec = _rule(src, index, rule, diags)
        if spec is not None:
            out.append(spec)
    return out


def _rule(src: SourceFile, index: int, rule: dict[str, Any], diags: list[Diagnostic]) -> RuleSpec | None:
    hook = BY_NAME.get(rule.get("hook", ""))
    if hook is None:
        return None
    name, before = rule["name"], len(diags)
    _form_keys(src, index, rule, hook, diags)
    for key in ("when", "deny", "message", "score", "key", "allow", "value"):
        if isinstance(rule.get(key), bool):  # YAML `true` composes to a bool; keep the CEL text
            rule = {**rule, key: str(rule[key]).lower()}
    if len(diags) > before or any(_bad_type(src, index, k) for k in rule):
        return None
    exprs: dict[str, str] = {k: str(rule[k]) for k in ("when", "deny", "message", "score", "key", "allow", "value") if k in rule}
    for key, text in (rule.get("annotations") or {}).items():
        exprs[f"annotations.{key}"] = str(text)
    weight = rule.get("weight", 1.0)
    return RuleSpec(name, hook, index, src.place(("rules", index))[0], _text(rule.get("description")),
                    float(weight) if isinstance(weight, (int, float)) else 1.0,
                    _text(rule.get("builtin")), dict(rule.get("with") or {}), exprs,
                    _text(rule.get("mode")) or "enforce")


def _bad_type(src: SourceFile, index: int, key: str) -> bool:
    """True when the schema already refused this key (its diagnostic is reported elsewhere)."""
    rule = src.data["rules"][index]
    value = rule.get(key)
    if key in ("name", "description", "builtin", "mode"):
        return not isinstance(value, str)
    if key == "weight":
        return not isinstance(value, (int, float)) or isinstance(value, bool)
    if key in ("with", "annotations"):
        return not isinstance(value, dict)
    return isinstance(value, (dict, list)) or value is None


def _form_keys(src: SourceFile, index: int, rule: dict[str, Any], hook: HookKind,
               diags: list[Diagnostic]) -> None:
    want = FORM_KEYS[hook.form]
    name = rule["name"]
    if want not in rule:
        line, col = src.place(("rules", index))
        msg = f"hook {hook.name!r} is of form {hook.form.value!r}: the rule needs a {want!r} key"
        diags.append(src.diagnostic("E104", msg, line, col, rule=name))
    for key in rule:
        form = next((f for f, k in FORM_KEYS.items() if k == key), None) or _EXTRA_KEYS.get(key)
        if (form is not None and form != hook.form) or (key == "when" and hook.form == Form.BUILTIN):
            line, col = src.place(("rules", index, key), key=True)
            msg = f"key {key!r} does not fit hook {hook.name!r} (form {hook.form.value!r}, key {want!r})"
            diags.append(src.diagnostic("E104", msg, line, col, rule=name))
    if rule.get("mode", "enforce") != "enforce" and hook.form not in SHADOWABLE:
        line, col = src.place(("rules", index, "mode"))
        msg = (f"mode {rule['mode']!r} needs a deny, allow, score or key rule; hook {hook.name!r} "
               f"(form {hook.form.value!r}) is always enforced")
        diags.append(src.diagnostic("E104", msg, line, col, rule=name))
