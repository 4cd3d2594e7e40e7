"""The exception tree of kaipolicy.

    KaipolicyError                 (Exception)  everything we raise on purpose
    ├── InputError                 (ValueError) bad input a person can fix
    │   ├── PlacedError                         at a place in a file: file, line:column, key path
    │   │   ├── YamlError                       a YAML text refused before its content is read
    │   │   │                                   (size, encoding, syntax, aliases, depth, keys)
    │   │   └── ScenarioError                   a scenario file: key path (+ line:column)
    │   ├── RuleError                           rule files: carries every Diagnostic
    │   ├── ObjectError                         a cluster object: kind/namespace/name + what is wrong
    │   └── ConfigError                         scheduler configuration (tiers, arguments)
    ├── StatementError             (RuntimeError) an operation the session state forbids
    ├── TimeLimitExceeded          (RuntimeError) a run went past the time limit set around it
    ├── ClusterError               (RuntimeError) the cluster API failed (wraps the cause)
    │   └── WatchExpired                          a watch's resourceVersion is gone (410): list again
    └── BindError                  (RuntimeError) a BindRequest could not be carried out (this attempt)
        ├── BindInterrupted                       the binder is stopping: undone, not counted
        └── BindUncertain                         the binding was sent but its answer is lost:
                                                  nothing is undone until the pod is read again

Messages name the file and the place (key path or line:column) or the object
(kind/namespace/name); the CLI prints them without a traceback.
"""

from __future__ import annotations

from typing import Any


class KaipolicyError(Exception):
    """Base of every error kaipolicy raises on purpose."""


class InputError(KaipolicyError, ValueError):
    """Input a person wrote is wrong; the message says where."""


class PlacedError(InputError):
    """Bad input at a place in a file: `file`, 1-based `line` and `column` (0 when not known), and
    for a structured document the key `path`. The message starts with `file:line:column: path: `."""

    def __init__(self, file: str, message: str, line: int = 0, column: int = 0, path: str = "") -> None:
        self.file = file
        self.path = path
        self.message = message
        self.line = line
        self.column = column
        where = f"{file}:{line}:{column}" if line and column else f"{file}:{line}" if line else file
        super().__init__(f"{where}: {path}: {message}" if path else f"{where}: {message}")


class YamlError(PlacedError):
    """A YAML text was refused as text (too large, not UTF-8, malformed, aliases, too deep,
    duplicate keys...); `code` names the kind of problem."""

    def __init__(self, file: str, code: str, message: str, line: int = 0, column: int = 0) -> None:
        self.code = code
        super().__init__(file, message, line, column)


class ScenarioError(PlacedError):
    """A scenario file is malformed; names the file, the key path and, when known, the line."""

    def __init__(self, file: str, path: str, message: str, line: int = 0, column: int = 0) -> None:
        super().__init__(file, message, line, column, path)


class RuleError(InputError):
    """Rule files failed to load; `diagnostics` holds every problem found."""

    def __init__(self, diagnostics: list[Any]) -> None:
        self.diagnostics = diagnostics
        lines = [str(d) for d in diagnostics[:20]]
        if len(diagnostics) > 20:
            lines.append(f"... and {len(diagnostics) - 20} more")
        super().__init__("\n".join(lines) if lines else "rule bundle failed to load")


class ObjectError(InputError):
    """A Kubernetes object kaipolicy cannot use (bad annotation, negative quantity, unknown queue):
    it is reported and left out of the snapshot."""

    def __init__(self, kind: str, namespace: str, name: str, problem: str) -> None:
        self.kind = kind
        self.namespace = namespace
        self.name = name
        self.problem = problem
        where = "/".join(p for p in (kind, namespace, name) if p)
        super().__init__(f"{where}: {problem}")


class ConfigError(InputError):
    """The scheduler configuration names an unknown plugin, action or argument."""


class StatementError(KaipolicyError, RuntimeError):
    """A statement operation does not fit the session state (a bug or a race)."""


class TimeLimitExceeded(KaipolicyError, RuntimeError):
    """A run of the engine went past the wall-clock limit its caller set (kaipolicy/timelimit.py);
    the message says where it stopped."""


class ClusterError(KaipolicyError, RuntimeError):
    """The Kubernetes API failed; the cause is chained. `status` is the HTTP status when the API
    answered (404, 409, 422, ...) and None when it could not be reached; `reason` its Status reason."""

    def __init__(self, message: str, status: int | None = None, reason: str = "") -> None:
        self.status = status
        self.reason = reason
        super().__init__(message)


class WatchExpired(ClusterError):
    """The resourceVersion a list or watch resumed from is no longer kept: list afresh."""


class BindError(KaipolicyError, RuntimeError):
    """One attempt at a BindRequest failed; the message is what its status `reason` says. `final`
    when no retry can help (the pod or the node is gone, the pod is bound elsewhere)."""

    def __init__(self, message: str, final: bool = False) -> None:
        self.final = final
        super().__init__(message)


class BindInterrupted(BindError):
    """The binder stopped during the attempt: what it changed is undone and the attempt not counted."""


class BindUncertain(BindError):
    """The binding may have happened (its answer was lost and the pod could not be read since):
    nothing may be undone; the request is looked at again shortly."""
