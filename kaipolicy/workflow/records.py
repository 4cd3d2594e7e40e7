"""Reading audit records: from a file of JSON lines, and the ones about one job or pod.

`load_records` refuses a line that is not a JSON object, naming the file and line; `Subject`
finds which job a name means (a job, or a pod of it; `namespace/name` or `name`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kaipolicy.api.task import qualified
from kaipolicy.errors import InputError

Record = dict[str, Any]


class AuditFileError(InputError):
    """An audit log that cannot be read; names the file and line."""


class UnknownSubject(InputError):
    """No record names the job or pod asked about."""


def load_records(path: str | Path) -> list[Record]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise AuditFileError(f"{path}: cannot read the audit log: {e}") from e
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise AuditFileError(f"{path}:{number}: not a JSON record: {e.msg}") from e
        if not isinstance(record, dict) or "kind" not in record or "job" not in record and "rule" not in record:
            raise AuditFileError(f"{path}:{number}: not an audit record (needs a kind and a job or rule)")
        records.append(record)
    return records


@dataclass(frozen=True)
class Subject:
    """The job asked about (and the pod, when a pod was named), in the run that last mentions it."""

    job: str
    namespace: str
    task: str | None
    source: str | None


def find_subject(records: list[Record], name: str) -> Subject:
    found: Subject | None = None
    for r in records:
        namespace = r.get("namespace")
        if not isinstance(namespace, str):
            continue
        if "job" in r and _names(namespace, str(r["job"]), name):
            found = Subject(r["job"], namespace, None, r.get("source"))
        elif "task" in r and _names(namespace, str(r["task"]), name):
            found = Subject(r["job"], namespace, r["task"], r.get("source"))
    if found is None:
        jobs = sorted({qualified(r["namespace"], r["job"]) for r in records if "job" in r and "namespace" in r})
        known = ", ".join(jobs[:12]) + (", ..." if len(jobs) > 12 else "")
        raise UnknownSubject(f"no job or pod named {name!r} in the audit records (jobs: {known or 'none'})")
    return found


def _names(namespace: str, recorded: str, asked: str) -> bool:
    """Whether `asked` (a name, or namespace/name) names this recorded job or pod. A scenario's
    records name it `name`, a live cluster's `namespace/name` already."""
    full = qualified(namespace, recorded)
    return asked == full if "/" in asked else full.rpartition("/")[2] == asked


def about(records: list[Record], subject: Subject) -> list[Record]:
    """The subject's records in its run's last cycle that mentions it, plus that run's evictions of it."""
    run = [r for r in records if r.get("source") == subject.source]
    mine = [r for r in run if r.get("job") == subject.job and r.get("namespace") == subject.namespace]
    if not mine:
        return []
    last = max(r["cycle"] for r in mine)
    return [r for r in mine if r["cycle"] == last or r["kind"] == "eviction"]
