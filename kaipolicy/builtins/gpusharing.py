"""Choosing GPUs for a shared (fractional or GPU-memory) task on one node.

`fitting_gpus` lists existing shared groups with room plus one WHOLE_GPU entry per idle or
releasing device, best GPU-order score first; `choose_groups` takes the first `count` of them,
minting a new group id for each whole device, and says whether the placement can only be
pipelined (it waits on releasing resources).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kaipolicy.api.node import Node
from kaipolicy.api.task import WHOLE_GPU, Task


def fitting_gpus(node: Node, task: Task, score: Callable[[str], float]) -> list[str]:
    candidates = [g for g in node.shared_used if node.fits_on_group(task.request, g)]
    whole = int(node.idle.gpus + 1e-9) + int(node.releasing.gpus + 1e-9)
    if node.idle.gpus > 0 or node.releasing.gpus > 0:
        candidates.extend([WHOLE_GPU] * whole)
    by_group: dict[str, float] = {}     # the whole devices all score alike: ask once
    for g in candidates:
        if g not in by_group:
            by_group[g] = score(g)
    scored = [(by_group[g], i, g) for i, g in enumerate(candidates)]
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [g for _, _, g in scored]


@dataclass(slots=True)
class SharedChoice:
    groups: list[str]
    releasing: bool


def choose_groups(node: Node, task: Task, fitting: list[str], pipeline_only: bool,
                  mint: Callable[[], str]) -> SharedChoice | None:
    """`mint` names a new group for a whole device; new names must not read as numbers."""
    groups: list[str] = []
    releasing = False
    idle_devices = int(node.idle.gpus + 1e-9)
    for g in fitting:
        if g == WHOLE_GPU:
            # A new group takes a whole device: only an idle one can be used now. (The reference
            # asks only whether the task fits the node's idle resources, which an existing
            # group's room can satisfy, and so binds onto a device still being released.)
            releasing = releasing or pipeline_only or not node.fits_idle(task) or idle_devices < 1
            idle_devices -= 1
            groups.append(mint())
        else:
            releasing = releasing or not node.fits_idle_on_group(task.request, g) or not node.fits_idle(task)
            groups.append(g)
        if len(groups) == task.request.count:
            return SharedChoice(groups, releasing)
    return None


def needs_new_group(node: Node, task: Task, score: Callable[[str], float]) -> bool:
    """Would the task land in a group without a reservation pod yet (the predicates' pod-slot
    check: such a group needs a slot for that pod too)?"""
    fitting = fitting_gpus(node, task, score)
    now = choose_groups(node, task, fitting, False, mint=lambda: "new")
    if now is not None and not now.releasing:
        return any(not _has_reservation_pod(g) for g in now.groups)
    later = choose_groups(node, task, fitting, True, mint=lambda: "new")
    if later is not None:
        return any(not _has_reservation_pod(g) for g in later.groups)
    return True


def _has_reservation_pod(group: str) -> bool:
    """The reference's test (predicates' isNewGpuGroup): a group whose id is an integer existed
    before this cycle and has its reservation pod; any other id is new. That includes a group
    opened earlier in this same cycle (our minted ids are never numbers, like its UUIDs), whose
    reservation pod holds no slot yet: joining it needs two free pod slots, as opening it did."""
    text = group[1:] if group[:1] in "+-" else group
    return text.isascii() and text.isdigit() and -(2**63) <= int(group) < 2**63
