"""The Statement: the only way actions change the session's world.

Operations (allocate, pipeline, evict) apply to the in-memory snapshot at once and are logged;
`checkpoint()` marks a point, `rollback(cp)` undoes newest-first back to it, `discard()` undoes
everything, and `commit()` hands the surviving operations to the session's outbox (binds,
evictions, pipeline notes). This mirrors the reference scheduler's statement, including its
quirk that pipelining a task back onto the node it is being evicted from simply un-evicts it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kaipolicy.api.node import NodeState
from kaipolicy.api.resources import Request
from kaipolicy.api.task import Status, Task
from kaipolicy.builtins.fairshare import ShareValues
from kaipolicy.errors import StatementError

if TYPE_CHECKING:
    from kaipolicy.framework.session import Session


@dataclass(slots=True)
class Operation:
    kind: str                 # allocate | pipeline | evict
    task: Task
    node: str                 # the node the operation is about
    previous_status: Status
    previous_node: str
    previous_groups: list[str]
    previous_virtual: bool
    node_before: NodeState | None   # the node's accounting before the operation (None for an
                                    # unevict of a pod without shared GPUs, undone by evicting again)
    message: str = ""
    reason: dict[str, str] = field(default_factory=dict)
    valid: bool = True
    undoes: Operation | None = None   # for an unevict: the eviction it cancelled
    previous_accepted: Request | None = None   # the pod's grant before the operation
    # the allocations on the pod's queue path before the operation, where it is the first on
    # that queue since the last checkpoint (see Statement._record)
    shares_before: ShareValues | None = None


#: Evictions from one node between two checkpoints share the first one's record of the node
#: (False: each records it; the tests compare both). See Statement.evict.
EVICTIONS_SHARE_RECORD = True

#: Pipelines onto a node share the record of the first eviction or pipeline on it since the last
#: checkpoint, as evictions do (False: each pipeline records the node; the tests compare both).
#: See Statement.pipeline.
PIPELINES_SHARE_RECORD = True


class Statement:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.operations: list[Operation] = []
        # nodes an eviction since the last checkpoint (or rollback, or commit) recorded as they
        # were before it: the next evictions from them need not record them again (see evict)
        self._kept_nodes: set[str] = set()
        # queues whose allocations an operation since the last checkpoint recorded (see _record)
        self._kept_queues: set[str] = set()

    # ---- operations -------------------------------------------------------------------------
    def allocate(self, task: Task, node_name: str) -> None:
        ssn = self.session
        node = ssn.cluster.nodes[node_name]
        op = self._record("allocate", task, node_name)
        ssn.set_status(task, Status.ALLOCATED)
        task.node = node_name
        node.add_task(task)
        ssn.on_allocate(task)
        task.is_virtual = True
        self.operations.append(op)

    def pipeline(self, task: Task, node_name: str, update_if_on_node: bool = True) -> None:
        ssn = self.session
        node = ssn.cluster.nodes[node_name]
        on_node = node.tasks.get(task.key)
        moved_gpu = bool(on_node is not None and task.gpu_groups and task.is_shared_allocation
                         and task.gpu_groups != ["-1"] and task.gpu_groups != on_node.gpu_groups)
        if on_node is not None and not update_if_on_node and not moved_gpu:
            groups_before = list(task.gpu_groups)
            task.gpu_groups = list(on_node.gpu_groups)
            self.unevict(task, groups_before)
            return
        # Only the first eviction or pipeline on a node since the last checkpoint records the
        # node: a rollback ends at a checkpoint and undoes that one too, which restores the node
        # (see evict). An allocation records the node always: converting a job's allocations to
        # pipelines takes their records out of the log (a commit follows at once).
        first = not (PIPELINES_SHARE_RECORD and node_name in self._kept_nodes)
        op = self._record("pipeline", task, node_name, keep_node=first)
        if first and PIPELINES_SHARE_RECORD:
            self._kept_nodes.add(node_name)
        if moved_gpu and on_node is not None:
            op.previous_groups = list(on_node.gpu_groups)
        ssn.set_status(task, Status.PIPELINED)
        task.node = node_name
        if moved_gpu:
            node.add_task(task, move_shared=True)
        elif on_node is not None:
            node.update_task(task)
        else:
            node.add_task(task)
        ssn.on_allocate(task)
        op.message = f"Pod {task.key} was pipelined to node {node_name}"
        task.is_virtual = True
        self.operations.append(op)

    def evict(self, task: Task, message: str, reason: dict[str, str] | None = None) -> None:
        ssn = self.session
        if task.node not in ssn.cluster.nodes:
            raise StatementError(f"cannot evict {task.key}: node {task.node!r} is not in the session")
        node = ssn.cluster.nodes[task.node]
        # A rollback ends at a checkpoint, so it undoes the first eviction from a node since the
        # last checkpoint whenever it undoes a later one: only that first one records the node
        # (see EVICTIONS_SHARE_RECORD). Its record is an eviction, which nothing but a rollback
        # takes out of the log.
        first = not (EVICTIONS_SHARE_RECORD and task.node in self._kept_nodes)
        op = self._record("evict", task, task.node, keep_node=first)
        op.message = message
        op.reason = dict(reason or {})
        ssn.set_status(task, Status.RELEASING)
        node.update_task(task)
        ssn.on_deallocate(task)
        task.is_virtual = True
        self.operations.append(op)
        if first:
            self._kept_nodes.add(task.node)

    def unevict(self, task: Task, groups_before: list[str] | None = None) -> None:
        """Undo the earliest still-valid eviction of `task` (it fits back where it was).

        Unlike the reference, the cancellation is itself logged, so that rolling back past it
        evicts the task again and a rollback restores exactly the state of its checkpoint. Evicting
        again gives a node back its accounting by arithmetic, exact but for a shared-GPU pod's
        groups (their releasing marks), so for those the record keeps the node as it was."""
        for op in self.operations:
            if op.valid and op.kind == "evict" and op.task is task:
                record = self._record("unevict", task, op.node, keep_node=task.request.is_shared)
                if groups_before is not None:
                    record.previous_groups = groups_before
                self._undo(op)
                op.valid = False
                record.undoes = op
                self.operations.append(record)
                return
        raise StatementError(f"no eviction of {task.key} to undo")

    def _record(self, kind: str, task: Task, node: str, keep_node: bool = True) -> Operation:
        ssn = self.session
        # The first operation on a queue since the last checkpoint keeps the allocations on its
        # path as they are, so that a rollback gives them back exactly rather than by adding and
        # taking off again, which leaves float remainders (a fraction added and taken off need not
        # come back to the same sum): a rolled-back simulation then leaves the shares as it found
        # them, whether it was run or a shortcut stood in for it. An allocation always records them,
        # as it records its node: converting allocations to pipelines takes their records out.
        queue = ssn.cluster.jobs[task.job].queue
        shares = None
        if queue not in self._kept_queues or kind == "allocate":
            shares = ssn.shares.allocations_on_path(queue)
            self._kept_queues.add(queue)
        return Operation(kind, task, node, task.status, task.node, list(task.gpu_groups), task.is_virtual,
                         node_before=ssn.cluster.nodes[node].snapshot() if keep_node else None,
                         previous_accepted=task.accepted, shares_before=shares)

    # ---- undo ---------------------------------------------------------------------------------
    def checkpoint(self) -> int:
        self._kept_nodes.clear()
        self._kept_queues.clear()
        return len(self.operations)

    def rollback(self, cp: int, grants: bool = False) -> None:
        """Undo newest-first back to `cp`. Each node gets back exactly the accounting it had before
        the operation (the reference re-applies its arithmetic instead, which can drift once a
        pipelined task has taken more than the node's releasing share).

        A placed pod keeps its last grant, as in the reference (taking a pod off a node leaves its
        grant as it is), but undoing an eviction grants the pod again for the node it goes back
        to, as the reference's unevict does. `grants` gives each placed pod back the grant it had
        before, so that the shares come back to where they were: for undoing what the reference
        never undoes (a simulation run again, or a shortcut's turns that could not be told)."""
        if cp < 0 or cp > len(self.operations):
            raise StatementError(f"invalid checkpoint {cp}; the statement has {len(self.operations)} operations")
        for op in reversed(self.operations[cp:]):
            if op.valid:
                self._undo(op, exact=True)
                if op.shares_before is not None:
                    self.session.shares.restore_allocations(op.shares_before)
                if grants and op.kind in ("allocate", "pipeline"):
                    op.task.accepted = op.previous_accepted
        del self.operations[cp:]
        self._kept_nodes.clear()
        self._kept_queues.clear()

    def note_moved(self) -> None:
        """Mark the pods this statement's pipelines moved off a node that still lists them, once
        the statement is left in effect (committed, or left applied by an eviction action whose
        job stayed short of its gang, as the reference leaves it): see Task.listed_elsewhere."""
        nodes = self.session.cluster.nodes
        for op in self.operations:
            if op.valid and op.kind == "pipeline" and op.previous_node != op.node:
                left = nodes.get(op.previous_node)
                if left is not None and op.task.key in left.tasks:
                    op.task.listed_elsewhere = True

    def discard(self, grants: bool = False) -> None:
        self.rollback(0, grants)

    def _undo(self, op: Operation, exact: bool = False) -> None:
        ssn = self.session
        task = op.task
        node = ssn.cluster.nodes[op.node]
        if op.kind in ("allocate", "pipeline"):
            ssn.on_deallocate(task)
            ssn.set_status(task, op.previous_status)
            task.node = op.previous_node
            task.gpu_groups = list(op.previous_groups)
            task.is_virtual = op.previous_virtual
            if exact:
                if op.node_before is not None:
                    node.restore(op.node_before)
                # else an earlier eviction or pipeline on the node, undone after this, restores it
            else:
                node.remove_task(task)
            # Kept on purpose: like the reference, the task keeps what it was last granted; the
            # next placement overwrites it and pending tasks are counted by their request.
            ssn.table.mark(node)
        elif op.kind == "unevict":   # evict it again
            ssn.set_status(task, op.previous_status)
            task.gpu_groups = list(op.previous_groups)
            task.is_virtual = op.previous_virtual
            if exact and op.node_before is not None:
                ssn.cluster.nodes[op.node].restore(op.node_before)
            else:
                ssn.cluster.nodes[op.node].update_task(task)
            ssn.on_deallocate(task)
            if op.undoes is not None:
                op.undoes.valid = True
        else:  # evict
            ssn.set_status(task, op.previous_status)
            task.gpu_groups = list(op.previous_groups)
            task.is_virtual = op.previous_virtual
            if exact:
                if op.node_before is not None:
                    node.restore(op.node_before)
                # else an earlier eviction from the node, undone after this one, restores it
                # The pod is granted again for this node, as putting it back on the node does in
                # the reference (its unevict re-adds the pod, which sets its grant for the node):
                # a placement elsewhere since, undone already, leaves no other grant behind.
                node.accept(task)
            elif task.key in node.tasks:
                node.update_task(task)
            else:
                node.add_task(task)
            ssn.on_allocate(task)

    # ---- pipelining a whole job ---------------------------------------------------------------
    def convert_allocated_to_pipelined(self, job_uid: str) -> None:
        """The job could only partly start now: every allocation of it becomes a pipeline."""
        kept: list[Operation] = []
        converted: list[Operation] = []
        for op in self.operations:
            if op.valid and op.kind == "allocate" and op.task.job == job_uid:
                converted.append(op)
            else:
                kept.append(op)
        self.operations = kept
        for op in converted:
            task, node = op.task, op.task.node
            self._undo(op)
            task.is_virtual = True
            self.pipeline(task, node, True)

    # ---- commit -------------------------------------------------------------------------------
    def commit(self) -> None:
        ssn = self.session
        for op in self.operations:
            if not op.valid or op.kind == "unevict":
                continue
            if op.kind == "evict":
                # A pod evicted twice in one statement (the solver re-evicts an elastic victim's
                # recorded pods with its next ones, as the reference does) is one eviction.
                if op.task.uid not in ssn.evicted:
                    ssn.record_eviction(op.task, op.message, op.reason, op.node)
                op.task.is_virtual = False
            elif op.kind == "allocate":
                node = ssn.cluster.nodes[op.task.node]
                if op.task.is_shared_allocation:
                    for g in op.task.gpu_groups:
                        node.shared_used.setdefault(g, 0)
                ssn.record_bind(op.task)
            else:
                ssn.record_pipeline(op.task, op.message)
        self.note_moved()
        self.operations = []
        self._kept_nodes.clear()
        self._kept_queues.clear()
