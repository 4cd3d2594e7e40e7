"""The session: one cycle's snapshot, the hook slots filled from the plugins, and the outbox.

Plugins arrive as instances of compiled rule files; their rules are grouped per hook kind
in tier order, and every hook result is combined here, as `framework/hooks.py` says. Actions
read hook results only through the methods below and change state only through a Statement.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, Protocol

import numpy as np

from kaipolicy.api.job import Job, PodSet, TakenVictims
from kaipolicy.api.node import Node
from kaipolicy.api.queue import Queue
from kaipolicy.api.snapshot import ClusterInfo
from kaipolicy.api.task import ACTIVE_ALLOCATED, Status, Task
from kaipolicy.builtins import capacity, fairshare, topology
from kaipolicy.builtins.labelled import LabelledUsage
from kaipolicy.framework import shadow
from kaipolicy.framework.audit import Audit
from kaipolicy.framework.config import SchedulerConfig
from kaipolicy.framework.coverage import Coverage
from kaipolicy.framework.hooks import BY_NAME
from kaipolicy.framework.nodetable import NodeTable, NodeVector
from kaipolicy.framework.outcome import OK, BindRecord, Code, EvictionRecord, Outcome, PipelineRecord
from kaipolicy.framework.statement import Statement
from kaipolicy.framework.tasks import init_request_quantities
from kaipolicy.framework.verdicts import ScoreSheet

#: Remember a whole job's order key by its count of status changes (False: by its state tuple
#: only), and queue keys by queue allocation, request and victims when the queue order is the
#: proportion built-in's (False: evaluate the rule every time). The tests compare both.
WHOLE_JOB_KEYS_BY_COUNT = True
SHARE_KEYED_QUEUE_KEYS = True

#: Keep each pod's order key for the session when the task-order rules read only its fields that
#: never change (False: evaluate them at every sort; the tests compare both).
TASK_KEYS_KEPT = True

#: Status changes the status log holds before it starts over (see Session.status_changed_since).
STATUS_LOG_KEPT = 1 << 20

#: Remember, per pod and node, that every predicate reading only their fields that never change
#: passed, and skip those predicates when the pod is asked about that node again (False: ask
#: them every time; the tests compare both). See Session.predicate_on.
FIXED_PREDICATES_KEPT = True
#: Pod and node pairs remembered so, at most (the memo starts over past it).
FIXED_PASSES_KEPT = 1 << 20


class JobsWaiting(Protocol):
    """The jobs an eviction action has yet to try (its order of preemptors)."""

    def holding(self, uids: Collection[str]) -> bool: ...


class Rule(Protocol):
    """What the framework needs of a compiled rule (see kaipolicy.rules); `vector` is called only
    when `vectorizable`."""

    name: str
    plugin: str
    file: str
    line: int
    weight: float
    builtin: str | None
    with_args: dict[str, Any]
    variables: tuple[str, ...]
    reads: frozenset[str]          # the variables its expressions name
    label: str                     # "plugin/rule", as audit records and outcomes name it
    mode: str                      # enforce | warn | audit (see add_rules)

    @property
    def hook_name(self) -> str: ...
    def scalar(self, *values: Any) -> Any: ...
    def vector(self, *values: Any) -> Any: ...
    # the vector body alone, errors raised as they come (None when the rule has no vector form)
    vector_raw: Callable[..., Any] | None
    vocabulary_calls: frozenset[str]          # the vocabulary functions it calls
    selects: frozenset[tuple[str, str]]       # the (variable, field) pairs it reads
    total: bool                               # its evaluation cannot fail (rules/total.py)
    # the (variable, attribute) pairs it reads when plain fields are all it reads (else None)
    field_reads: tuple[tuple[str, str], ...] | None
    def message(self, *values: Any) -> str | None: ...
    @property
    def vectorizable(self) -> bool: ...


class Session:
    def __init__(self, cluster: ClusterInfo, config: SchedulerConfig, builtins: dict[str, Any] | None = None,
                 k_value: float = 1.0, audit: Audit | None = None, vectorize: bool = True) -> None:
        self.cluster = cluster
        self.config = config
        self.params = config.params
        self.audit = audit or Audit(enabled=False)
        self.hooks: dict[str, list[Rule]] = {k: [] for k in BY_NAME}
        # warn and audit rules: evaluated beside the enforced ones, their verdicts only recorded
        self.shadow: dict[str, list[Rule]] = {k: [] for k in BY_NAME}
        self.shadowing = False
        self.quiet = False        # asking without recording (the audit log's runner-up search)
        self.warnings: dict[str, None] = {}      # warn-mode verdicts, in order, once each
        self.warning_jobs: dict[str, str] = {}   # warn-mode verdict -> the job it was about (Events on a cluster)
        self.coverage: Coverage | None = None     # set by `kaipolicy test --coverage`
        self.job_denials: dict[str, dict[str, Outcome]] = {}   # job uid -> action -> the gate that closed
        self.gangs_short: dict[str, dict[str, Any]] = {}        # job uid -> the gang allocate could not fill
        self.refusals: Counter[str] = Counter()   # allow rules' refusals since the eviction loop's last job
        self._job_keys_pure = False
        self._job_keys: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self._whole_job_keys: dict[tuple[str, int], tuple[Any, ...]] = {}
        self._job_key_attrs: tuple[str, ...] | None = None    # see add_rules
        self._job_keys_by_fields: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self._task_keys: dict[str, tuple[Any, ...]] = {}
        self._task_keys_fixed = False
        self._fixed_predicates: list[bool] | None = None    # see add_rules
        self._fixed_passes: set[tuple[str, str]] = set()   # (pod uid, node name): see predicate_on
        self._queue_keys_by_share = False
        self._summing_scores = False     # see add_rules
        self._lone_unscored = False
        self._score_scopes: tuple[Any, ...] | None = None
        self._queue_keys: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self.builtins = builtins or {}
        self.shares = fairshare.Shares.build(cluster, k_value)
        self.node_list = sorted(cluster.nodes.values(), key=lambda n: n.name)
        self.table = NodeTable(self.node_list)
        self.binds: list[BindRecord] = []
        self.evictions: list[EvictionRecord] = []
        self.evicted: set[str] = set()          # uids of pods whose eviction was committed
        self.status_changes: dict[str, int] = {}  # per job uid: how often its pods changed status
        self.opened_as: dict[str, Status] = {}    # per pod key: its status when the session opened, once changed
        # jobs whose status changes are noted in `status_touched` (see watch_status)
        self._watched: set[str] = set()
        self.status_touched: set[str] = set()
        self.watched_changes = 0     # status changes of the watched jobs' pods so far
        # the job of every status change since change number `status_log_base`, in order, once a
        # reader has asked where the log stands (see status_changed_since)
        self.status_log: list[str] | None = None
        self.status_log_base = 0
        self.pipelines: list[PipelineRecord] = []
        self.action = ""
        self.cache: dict[Any, Any] = {}   # per-session memo for built-ins (keyed by their own tuples)
        # per job uid, until one of its pods changes status: the pods to place next and what they
        # ask for (framework/tasks.py)
        self.next_tasks: dict[str, list[Task]] = {}
        self.next_request: dict[str, fairshare.Vec] = {}
        # the jobs an eviction action has yet to try, while it runs (see eviction_loop): their
        # gates will read what is remembered of them above
        self.preemptors_waiting: JobsWaiting | None = None
        self.labelled: dict[str, LabelledUsage] = {}   # GPUs per queue by node label, once a rule asks
        self.errors: list[Outcome] = []
        # while work is done ahead of its turn (see hold_errors): the held errors' audit fields
        self._held: list[tuple[str, str, str, str]] | None = None
        # (what, action): jobs tried, scenarios simulated and filtered (the reference's counters)
        self.tally: Counter[tuple[str, str]] = Counter()
        self.plugin_seconds: dict[str, float] = {}   # binding each plugin's rules at session open
        self.groups_minted = 0      # shared-GPU group ids minted (a simulation undone sets it back)
        self._groups_taken: set[str] | None = None   # group ids the snapshot already uses
        self.scoring_nodes: Sequence[Node] = ()
        self.last_scores = ScoreSheet((), np.zeros(0), {}, {})
        self.scoring_memo: dict[Any, Any] = {}
        self.vectorize = vectorize        # False: every node-level rule runs node by node (tests compare)

    def new_gpu_group(self) -> str:
        """A fresh shared-GPU group id, the same on every run: never one the snapshot's nodes or
        pods already name (pods placed in an earlier cycle keep their `new-N` ids), so a new group
        never merges with a running one."""
        if self._groups_taken is None:
            self._groups_taken = {g for n in self.cluster.nodes.values() for g in n.shared_used}
            self._groups_taken.update(g for j in self.cluster.jobs.values() for t in j.tasks.values()
                                      for g in t.gpu_groups)
        while True:
            self.groups_minted += 1
            group = f"new-{self.groups_minted}"
            if group not in self._groups_taken:
                return group

    @property
    def job_keys_pure(self) -> bool:
        """Job order keys depend only on the job (no job-order rule consults the session)."""
        return self._job_keys_pure

    def add_rules(self, rules: Iterable[Rule]) -> None:
        """Fill the hook slots, in the order given (tier by tier, plugin by plugin). Rules in warn or
        audit mode go to the shadow slots: the combining code below never sees them."""
        for r in rules:
            (self.hooks if r.mode == "enforce" else self.shadow)[r.hook_name].append(r)
        self.shadowing = any(self.shadow.values())
        # Every subsetNodes rule is the topology built-in, which gives a group without a topology
        # constraint all the nodes it is handed.
        self.subsets_by_topology_only = all(self.builtins.get(rule.builtin or "") is topology.subset_nodes
                                            for rule in self.hooks["subsetNodes"])
        # Job keys can be remembered per job state unless a job-order rule consults the session.
        self._job_keys_pure = all("cluster" not in r.reads for r in self.hooks["jobOrder"])
        # ... and by the values of the job's fields they read, when plain fields of the job are
        # all they read (which rules out the session too; no shadow rule runs: its key would be
        # set aside unseen)
        reads = [r.field_reads for r in self.hooks["jobOrder"]]
        self._job_key_attrs = (
            tuple(sorted({attr for pairs in reads if pairs is not None for _, attr in pairs}))
            if not self.shadow["jobOrder"]
            and all(pairs is not None and all(var == "job" for var, _ in pairs) for pairs in reads)
            else None)
        # Queue keys can be remembered by queue allocation, request and victims when the one
        # queue-order rule is the proportion built-in's key as it stands (and no shadow rule runs).
        self._queue_keys_by_share = (not self.shadow["queueOrder"] and
                                     [getattr(r, "calls", "") for r in self.hooks["queueOrder"]]
                                     == ["fairshare.queueOrderKey"])
        # Scores can be summed in one pass when every node-order rule has a vector form (the
        # parts per rule are then only kept when the audit log or coverage asks for them).
        self._summing_scores = (self.vectorize and not self.shadow["nodeOrder"]
                                and all(r.vectorizable and r.vector_raw is not None
                                        for r in self.hooks["nodeOrder"]))
        # A lone candidate needs no scores when scoring it could record nothing either: every
        # node-order rule is total (cannot fail) and none is a shadow.
        self._lone_unscored = (not self.shadow["nodeOrder"]
                               and all(r.total for r in self.hooks["nodeOrder"]))
        # Scores can be carried to the next pod of a run (see score_scope) when they are summed in
        # one pass, every rule is total and scores the other nodes alike for that pod
        # (rules/alike.py): what the set-relative calls among them compare against, else None.
        scopes = [getattr(r, "alike_scopes", None) for r in self.hooks["nodeOrder"]]
        self._score_scopes = (tuple(dict.fromkeys(x for each in scopes if each is not None for x in each))
                              if self._summing_scores and self._lone_unscored and None not in scopes else None)
        self._queue_keys.clear()
        self._job_keys.clear()
        self._whole_job_keys.clear()
        self._job_keys_by_fields.clear()
        # A pod's order key is its own all session long when every task-order rule reads only the
        # pod's fields that never change and its arguments (rules/alike.py); no shadow rule runs.
        self._task_keys_fixed = (TASK_KEYS_KEPT and not self.shadow["taskOrder"]
                                 and all(getattr(r, "fixed_for_pod", False) for r in self.hooks["taskOrder"]))
        self._task_keys.clear()
        # Predicates whose verdict for a pod on a node is the same all session long (rules/alike.py:
        # fixed_on_the_node), by position; None when none is, or when coverage counts every
        # evaluation.
        fixed = [bool(getattr(r, "fixed_on_node", False)) for r in self.hooks["predicate"]]
        self._fixed_predicates = fixed if any(fixed) else None
        self._fixed_passes.clear()

    def release(self) -> None:
        """Drop everything the session holds, once its cycle has been read (see cycle.release):
        its rules, memos and orders point back at it, so it would otherwise wait for the cyclic
        collector. The session cannot be used afterwards."""
        self.__dict__.clear()

    # ---- state changes (called by the Statement) ----------------------------------------------
    def statement(self) -> Statement:
        return Statement(self)

    def watch_status(self, uids: Iterable[str]) -> None:
        """From now on, a status change of these jobs' pods adds the job's uid to `status_touched`
        (never emptied): a reader of `status_changes` for many jobs need only look at those."""
        self._watched.update(uids)

    def status_log_at(self) -> int:
        """A position in the status log, which is kept from the first call on (a session whose
        readers never ask keeps none). Past STATUS_LOG_KEPT changes the log starts over here, so
        it holds at most that many plus what one reader's turn adds."""
        log = self.status_log
        if log is None:
            log = self.status_log = []
        elif len(log) >= STATUS_LOG_KEPT:
            self.status_log_base += len(log)
            log.clear()
        return self.status_log_base + len(log)

    def status_changed_since(self, at: int) -> set[str] | None:
        """The jobs whose pods changed status since `status_log_at()` gave `at`; None when the log
        has started over since (the caller looks at every job then)."""
        log = self.status_log
        if log is None or at < self.status_log_base:
            return None
        return set(log[at - self.status_log_base:])

    def set_status(self, task: Task, status: Status) -> None:
        self.opened_as.setdefault(task.key, task.status)
        task.status = status
        self.status_changes[task.job] = self.status_changes.get(task.job, 0) + 1
        log = self.status_log
        if log is not None:
            log.append(task.job)
        if task.job in self._watched:
            self.status_touched.add(task.job)
            self.watched_changes += 1
        self.next_tasks.pop(task.job, None)
        self.next_request.pop(task.job, None)

    def on_allocate(self, task: Task) -> None:
        self.shares.on_allocate(self.cluster.jobs[task.job], task, +1.0)
        node = self.cluster.nodes.get(task.node)
        if node is not None:
            self.table.mark(node)
        for usage in self.labelled.values():
            usage.add(self.cluster.jobs[task.job], task, +1.0)

    def on_deallocate(self, task: Task) -> None:
        self.shares.on_allocate(self.cluster.jobs[task.job], task, -1.0)
        node = self.cluster.nodes.get(task.node)
        if node is not None:
            self.table.mark(node)
        for usage in self.labelled.values():
            usage.add(self.cluster.jobs[task.job], task, -1.0)

    def labelled_usage(self, label: str) -> LabelledUsage:
        """GPUs per queue by node label value, counted from the first rule that asks and kept current."""
        usage = self.labelled.get(label)
        if usage is None:
            usage = self.labelled[label] = LabelledUsage(
                self.cluster, label, lambda uid: [qs.queue.uid for qs in self.shares.path(uid)])
        return usage

    def record_bind(self, task: Task) -> None:
        self.set_status(task, Status.BINDING)
        self.binds.append(BindRecord(task.job, task.name, task.namespace, task.node, list(task.gpu_groups),
                                     task.request.gpus, self.action, self.bind_request_annotations(task)))

    def bind_request_annotations(self, task: Task) -> dict[str, str]:
        """The bindRequestMutate rules' annotations for the task on its node, merged in rule order
        (a later rule's key wins); a rule that fails is recorded and adds nothing."""
        rules = self.hooks["bindRequestMutate"]
        if not rules:
            return {}
        env = self._env(task=task, node=self.cluster.nodes[task.node])
        out: dict[str, str] = {}
        for rule in rules:
            value = self._eval(rule, env)
            if isinstance(value, dict):
                out.update((str(k), str(v)) for k, v in value.items())
        return out

    def evictable(self, task: Task) -> bool:
        """Active and not already evicted in this session: a victim that was evicted and placed
        again (moved) is not taken a second time."""
        return task.status in ACTIVE_ALLOCATED and task.uid not in self.evicted

    def has_evictable(self, job: Job) -> bool:
        """Some pod of the job is `evictable` (a loop, not a generator: the eviction actions ask
        it of every job for every job they try)."""
        evictable = self.evictable
        for t in job.tasks.values():
            if evictable(t):
                return True
        return False

    def record_eviction(self, task: Task, message: str, reason: dict[str, str], node: str = "") -> None:
        """`node`: where the pod was evicted from (a victim the solver moved is elsewhere by now)."""
        self.evicted.add(task.uid)
        node = node or task.node
        self.evictions.append(EvictionRecord(task.job, task.name, task.namespace, node, self.action,
                                             message, reason))
        if self.audit.enabled or self.shadowing:
            shadow.audit_eviction(self, task, node, message, reason)

    def note_denial(self, job: Job, outcome: Outcome) -> None:
        """A job-level gate (queue capacity, canReclaim, ...) closed for `job` in this action."""
        self.job_denials.setdefault(job.uid, {})[self.action] = outcome

    def record_pipeline(self, task: Task, message: str) -> None:
        self.pipelines.append(PipelineRecord(task.job, task.name, task.node, self.action, message))

    # ---- evaluation helpers --------------------------------------------------------------------
    def _args(self, rule: Rule, env: dict[str, Any]) -> list[Any]:
        return [env[v] for v in rule.variables]

    def evaluate(self, rule: Rule, env: dict[str, Any]) -> Any:
        """One rule on the names in `env` (a failure is recorded and returns the error marker)."""
        return self._eval(rule, env)

    @staticmethod
    def is_error(value: Any) -> bool:
        return value is _ERROR

    def _eval(self, rule: Rule, env: dict[str, Any], vector: bool = False) -> Any:
        try:
            return rule.scalar(*self._args(rule, env))
        except Exception as e:  # noqa: BLE001 - a failing rule is an error outcome, never allow/deny
            return self._failed(rule, e)

    def _failed(self, rule: Rule, e: Exception) -> _Error:
        if not self.quiet:
            self.rule_error(rule, e)
        return _ERROR

    def _node_call(self, rule: Rule, task: Task, job: Job, node: Node) -> Any:
        """_eval for the node-level hooks, whose variables are always (task, job, node): the hot
        path calls the rule directly instead of going through an environment dict."""
        try:
            return rule.scalar(task, job, node)
        except Exception as e:  # noqa: BLE001 - a failing rule is an error outcome, never allow/deny
            return self._failed(rule, e)

    def rule_error(self, rule: Rule, error: BaseException, what: str = "") -> Outcome:
        """Record a rule that failed while evaluating: an `error` outcome naming the rule and
        where it is written, counted and audited."""
        reason = getattr(error, "message", None) or f"{type(error).__name__}: {error}"
        out = Outcome(Code.ERROR, rule.label, f"{rule.file}:{rule.line}: {what}{reason}")
        self.errors.append(out)
        if self._held is not None:
            self._held.append((rule.label, out.message, rule.hook_name, self.action))
        else:
            self.audit.error(rule.label, out.message, rule.hook_name, self.action)
        if self.coverage is not None:
            self.coverage.hit(rule.label)
        return out

    # ---- work done ahead of its turn ------------------------------------------------------------
    # The eviction solver builds scenarios ahead of their simulation. A rule error recorded while
    # building one must be recorded where the scenario's turn comes, and not at all if the search
    # ends before it: it is held, taken out of the record, and put back (or dropped) by the solver.
    def hold_errors(self) -> int:
        """From now on, errors are still listed (the code recording one reads it back at once) but
        not audited; returns the mark `held_errors` takes them back from."""
        self._held = []
        return len(self.errors)

    @property
    def errors_held(self) -> bool:
        """Errors are being held (see hold_errors)."""
        return self._held is not None

    def held_errors(self, mark: int) -> list[tuple[Outcome, tuple[str, str, str, str]]]:
        """The errors recorded since `hold_errors` returned `mark`, taken out of the record, with
        their audit fields; errors are recorded as usual again."""
        held = list(zip(self.errors[mark:], self._held or []))
        del self.errors[mark:]
        self._held = None
        return held

    def record_held(self, held: list[tuple[Outcome, tuple[str, str, str, str]]]) -> None:
        """Record errors taken out by `held_errors`, as they were recorded then."""
        for out, fields in held:
            self.errors.append(out)
            self.audit.error(*fields)

    def _message(self, rule: Rule, values: Sequence[Any], fallback: str) -> str:
        """A denying rule's message; one that fails is a recorded rule error and the denial
        keeps a fallback message (the cycle goes on)."""
        try:
            msg = rule.message(*values)
        except Exception as e:  # noqa: BLE001 - a failing message must not abort the cycle
            self.rule_error(rule, e, "its message failed: ")
            return f"{fallback} (its message failed)"
        return msg or fallback

    def _env(self, **values: Any) -> dict[str, Any]:
        values["cluster"] = self
        return values

    def _key(self, kind: str, env: dict[str, Any]) -> list[Any]:
        """One element per rule (its own key as a tuple), so the first rule that tells two items
        apart decides even when rules give keys of different lengths; a rule that failed sorts
        its item last and is recorded as an error outcome."""
        key: list[Any] = []
        parts: list[Any] | None = [] if self.coverage is not None else None
        for rule in self.hooks[kind]:
            value = self._eval(rule, env)
            if parts is not None:
                parts.append(None if value is _ERROR else value)
            if value is _ERROR:
                key.append((LAST,))
            elif value is not None:
                # plain elements ranked here as _ordered ranks them, without a call each
                plain = _TYPE_RANK.get
                key.append(tuple([(n, v) if (n := plain(type(v))) is not None else _ordered(v) for v in value]))
        if self.coverage is not None and parts is not None:
            self.coverage.key([r.label for r in self.hooks[kind]], parts)
        if self.shadowing and self.shadow[kind]:
            # shadow order rules run (a failure is recorded) and their keys are set aside
            keys = [self._eval(rule, env) for rule in self.shadow[kind]]
            if self.coverage is not None:
                self.coverage.key([r.label for r in self.shadow[kind]], [None if p is _ERROR else p for p in keys])
        return key

    # ---- order hooks ---------------------------------------------------------------------------
    def job_key(self, job: Job) -> tuple[Any, ...]:
        if not self._job_keys_pure:
            return (*self._key("jobOrder", self._env(job=job)), job.created, job.uid)
        whole = WHOLE_JOB_KEYS_BY_COUNT and self.cluster.jobs.get(job.uid) is job
        if whole:
            # a whole job's tasks and gang sizes are fixed, and its task statuses change only
            # through set_status: its count of status changes stands for the state below
            counted = (job.uid, self.status_changes.get(job.uid, 0))
            key = self._whole_job_keys.get(counted)
            if key is not None:
                return key
        attrs = self._job_key_attrs
        by_fields: tuple[Any, ...] | None = None
        key = None
        if attrs is not None and self.coverage is None:
            # the rules' part of the key is a function of these values (typed: True is not 1)
            values = tuple([getattr(job, a) for a in attrs])
            by_fields = (values, tuple([type(v) for v in values]))
            part = self._job_keys_by_fields.get(by_fields)
            if part is not None:
                key = (*part, job.created, job.uid)
        if key is None:
            # what job-order rules can see change only with task statuses and gang sizes (the
            # solver's partial copies of a job share its uid but not its tasks or minimums)
            state = (job.uid, tuple((t.uid, t.status) for t in job.tasks.values()),
                     tuple(ps.min_available for ps in job.pod_sets.values()))
            key = self._job_keys.get(state)
            if key is None:
                key = self._job_keys[state] = (*self._key("jobOrder", self._env(job=job)), job.created, job.uid)
            if by_fields is not None and not self.key_failed(key):
                # a key holding a rule's error is not shared: each job records its own
                if len(self._job_keys_by_fields) >= capacity.ORDER_KEYS_KEPT:
                    self._job_keys_by_fields.clear()
                self._job_keys_by_fields[by_fields] = key[:-2]
        if whole:
            if len(self._whole_job_keys) >= capacity.ORDER_KEYS_KEPT:
                self._whole_job_keys.clear()   # what is dropped is found again by its state below
            self._whole_job_keys[counted] = key
        return key

    def task_key(self, task: Task, job: Job) -> tuple[Any, ...]:
        keep = self._task_keys_fixed and self.coverage is None
        if keep and (kept := self._task_keys.get(task.uid)) is not None:
            return kept
        key = (*self._key("taskOrder", self._env(task=task, job=job)), task.created, task.uid)
        if keep and not self.key_failed(key):
            self._task_keys[task.uid] = key     # (a failed key is asked again: that records the error again)
        return key

    def pod_set_key(self, pod_set: PodSet, job: Job) -> tuple[Any, ...]:
        return (*self._key("podSetOrder", self._env(podSet=pod_set, job=job)), pod_set.name)

    def queue_key(self, queue: Queue, job: Job | None, victims: Sequence[Job] = ()) -> tuple[Any, ...]:
        # pending orders judge a queue by its next job, victim orders by the victims already
        # taken from it plus its next one (job is then None)
        if self.queue_keys_remembered:
            return self._share_keyed(queue, job, victims)
        env = self._env(queue=queue, job=job, victims=victims if isinstance(victims, list) else list(victims))
        return (*self._key("queueOrder", env), queue.created, queue.uid)

    @property
    def queue_keys_remembered(self) -> bool:
        """Queue keys are remembered by queue allocation, request and victims (see _share_keyed)."""
        return self._queue_keys_by_share and self.coverage is None and SHARE_KEYED_QUEUE_KEYS

    @staticmethod
    def key_failed(key: tuple[Any, ...]) -> bool:
        """An order key holding a rule's error (asking again records the error again)."""
        return any(isinstance(part, tuple) and len(part) == 1 and part[0] is LAST for part in key)

    def _share_keyed(self, queue: Queue, job: Job | None, victims: Sequence[Job]) -> tuple[Any, ...]:
        """queue_key when the one queue-order rule is the proportion built-in's key: a value of
        the queue's allocation, the job's request and the victims' resources (what the built-in
        remembers its keys by; all else it reads is fixed for the session), so the whole key is
        remembered by those. A key holding a rule error is not kept: the error is recorded again."""
        req = self.job_request(job) if job is not None else None
        vict = self._victims_taken(victims) if victims else None
        state = capacity.order_key_inputs(self.shares.queues[queue.uid], req, vict)
        key = self._queue_keys.get(state)
        if key is None:
            key = self._built_in_queue_key(queue, req, vict)
            if key is None:
                env = self._env(queue=queue, job=job, victims=victims if isinstance(victims, list) else list(victims))
                key = (*self._key("queueOrder", env), queue.created, queue.uid)
            if not self.key_failed(key):
                if len(self._queue_keys) >= capacity.ORDER_KEYS_KEPT:
                    self._queue_keys.clear()
                self._queue_keys[state] = key
        return key

    def _built_in_queue_key(self, queue: Queue, req: fairshare.Vec | None,
                            vict: fairshare.Vec | None) -> tuple[Any, ...] | None:
        """The key the one queue-order rule gives, computed without the rule: the rule is the
        built-in's call as written (see _share_keyed), so its value is the built-in's, and
        _key would rank each element as done here. None when the built-in fails: the rule then
        runs and records its error."""
        try:
            # (not through the built-in's own memo: the caller remembers the key by the same inputs)
            value = capacity.queue_order_key_unmemoised(self.shares, self.shares.queues[queue.uid], req, vict)
        except Exception:  # noqa: BLE001 - the rule's own evaluation records the failure
            return None
        plain = _TYPE_RANK.get
        return (tuple([(n, v) if (n := plain(type(v))) is not None else _ordered(v) for v in value]),
                queue.created, queue.uid)

    # ---- job-level gates -------------------------------------------------------------------------
    def _first_deny(self, kind: str, env: dict[str, Any], first_only: bool = False) -> Outcome:
        result = OK
        for rule in self.hooks[kind]:
            value = self._eval(rule, env)
            if value is _ERROR:
                result = self.errors[-1]
                break
            if value:
                msg = self._message(rule, self._args(rule, env), f"denied by {rule.label}")
                result = Outcome(Code.DENY, rule.label, msg)
                if self.coverage is not None:
                    self.coverage.hit(rule.label)
                break
            if first_only:
                break
        if self.shadowing and self.shadow[kind]:
            for rule in self.shadow[kind]:
                value = self._eval(rule, env)
                if value is not _ERROR and value:
                    shadow.would(self, rule, rule.message(*self._args(rule, env)) or f"{rule.label} would deny", env)
        return result

    def over_capacity(self, job: Job, tasks: Sequence[Task]) -> Outcome:
        return self._first_deny("overCapacity", self._env(job=job, queue=self.cluster.queues.get(job.queue),
                                                          tasks=list(tasks)), first_only=True)

    def non_preemptible_over_quota(self, job: Job, tasks: Sequence[Task]) -> Outcome:
        return self._first_deny("nonPreemptibleOverQuota",
                                self._env(job=job, queue=self.cluster.queues.get(job.queue), tasks=list(tasks)),
                                first_only=True)

    def task_over_capacity_on_node(self, task: Task, job: Job, node: Node) -> Outcome:
        return self._first_deny("taskOverCapacityOnNode", self._env(task=task, job=job, node=node),
                                first_only=True)

    def pre_predicate(self, task: Task, job: Job) -> Outcome:
        return self._first_deny("prePredicate", self._env(task=task, job=job))

    # ---- eviction hooks ---------------------------------------------------------------------------
    def _all_allow(self, kind: str, env: dict[str, Any], first_only: bool = False,
                   default: bool = True, shadows: bool = True) -> Outcome:
        """ALL_ALLOW (or FIRST_ONLY) over allow-rules; the refusing rule is stamped on the outcome.
        Shadow victim filters are asked about evictions that happen instead (`shadow=False` here)."""
        if shadows and self.shadowing and self.shadow[kind]:
            for rule in self.shadow[kind]:
                if shadow.refuses(self._eval(rule, env)):
                    shadow.would(self, rule, f"{rule.label} would refuse", env)
        rules = self.hooks[kind]
        if not rules:
            return OK if default else Outcome(Code.DENY, "", f"no {kind} rule allows it")
        for rule in rules[:1] if first_only else rules:
            value = self._eval(rule, env)
            if value is _ERROR:
                return self.errors[-1]
            if value is None:
                continue
            if not value:
                if self.coverage is not None:
                    self.coverage.hit(rule.label)
                self.refusals[rule.label] += 1
                return Outcome(Code.DENY, rule.label, f"refused by {rule.label}")
        return OK

    def allowing_rules(self, kind: str) -> list[str]:
        """The rules that (together) allowed an eviction, for its reason."""
        return [f"{r.plugin}/{r.name}" for r in self.hooks[kind]]

    def can_reclaim(self, job: Job) -> Outcome:
        # Only the first registered rule is consulted and no rule means "no", as in the reference.
        return self._all_allow("canReclaim", self._env(job=job, queue=self.cluster.queues.get(job.queue)),
                               first_only=True, default=False)

    def reclaim_victim_filter(self, job: Job, victim: Job) -> Outcome:
        return self._all_allow("reclaimVictimFilter", self._env(job=job, victim=victim), shadows=False)

    def preempt_victim_filter(self, job: Job, victim: Job) -> Outcome:
        return self._all_allow("preemptVictimFilter", self._env(job=job, victim=victim), shadows=False)

    def reclaim_scenario_validator(self, job: Job, scenario: Any) -> Outcome:
        return self._all_allow("reclaimScenarioValidator", self._env(job=job, scenario=scenario))

    def preempt_scenario_validator(self, job: Job, scenario: Any) -> Outcome:
        return self._all_allow("preemptScenarioValidator", self._env(job=job, scenario=scenario))

    def on_job_solution_start(self) -> None:
        for rule in self.hooks["onJobSolutionStart"]:
            self.builtin(rule)(self)
            if self.coverage is not None:
                self.coverage.hit(rule.label)

    def pre_job_allocation(self, job: Job) -> None:
        for rule in self.hooks["preJobAllocation"]:
            self.builtin(rule)(self, job)
            if self.coverage is not None:
                self.coverage.hit(rule.label)

    def builtin(self, rule: Rule) -> Any:
        fn = self.builtins.get(rule.builtin or "")
        if fn is None:
            raise KeyError(f"{rule.plugin}/{rule.name}: unknown built-in {rule.builtin!r}")
        return fn

    def subset_nodes(self, job: Job, group: Any, pod_sets: Sequence[PodSet], tasks: Sequence[Task],
                     nodes: list[Node]) -> list[list[Node]]:
        sets = [nodes]
        for rule in self.hooks["subsetNodes"]:
            fn = self.builtin(rule)
            before = sets
            sets = [s for current in sets for s in fn(self, rule.with_args, job, group, pod_sets, tasks, current)]
            if self.coverage is not None and (len(sets) != len(before) or sum(map(len, sets)) != sum(map(len, before))):
                self.coverage.hit(rule.label)
        return sets

    # ---- node-level hooks ----------------------------------------------------------------------
    def predicate_results(self, task: Task, job: Job, nodes: Sequence[Node]) -> list[Outcome | None]:
        """Per node: None when every predicate passes, else the first denial (rule and message),
        or the error of the rule that failed on it: the node is rejected, and the error recorded."""
        out: list[Outcome | None] = [None] * len(nodes)
        rules = self.hooks["predicate"]
        if not rules or not nodes:
            return out
        view = self.table.view(nodes)
        open_idx = np.arange(len(nodes))
        for rule in rules:
            if len(open_idx) == 0:
                break
            denied, failed = self.node_values(rule, task, job, nodes, view, open_idx)
            if denied is None:
                continue
            mask = np.asarray(denied, dtype=bool)
            for k in np.nonzero(mask)[0]:
                i = int(open_idx[k])
                node = nodes[i]
                error = failed.get(int(k))
                if error is not None:
                    out[i] = _node_error(node, error)
                else:
                    msg = self._message(rule, (task, job, node), f"node {node.name} rejected by {rule.label}")
                    out[i] = Outcome(Code.DENY, rule.label, msg)
            if self.coverage is not None and mask.any():
                self.coverage.hit(rule.label)
            open_idx = open_idx[~mask]
        return out

    def predicate_on(self, task: Task, job: Job, node: Node) -> Outcome | None:
        """The predicates on one node, scalar: None when all pass, else the first denial.

        Once every predicate passed for the pod on the node, those that read only fields of both
        that never change (`_fixed_predicates`) are not asked again there: they would pass again,
        and a passing rule records nothing. A denial or an error is asked again each time, as
        it records each time."""
        fixed = self._fixed_predicates if FIXED_PREDICATES_KEPT and self.coverage is None else None
        pair = (task.uid, node.name)
        passed = fixed is not None and pair in self._fixed_passes
        skip = fixed if passed else None
        for k, rule in enumerate(self.hooks["predicate"]):
            if skip is not None and skip[k]:
                continue
            value = self._node_call(rule, task, job, node)
            if value is _ERROR:
                return _node_error(node, self.errors[-1])
            if value:
                if self.coverage is not None:
                    self.coverage.hit(rule.label)
                msg = self._message(rule, (task, job, node), f"node {node.name} rejected by {rule.label}")
                return Outcome(Code.DENY, rule.label, msg)
        if fixed is not None and not passed:
            if len(self._fixed_passes) >= FIXED_PASSES_KEPT:
                self._fixed_passes.clear()
            self._fixed_passes.add(pair)
        return None

    def node_values(self, rule: Rule, task: Task, job: Job, nodes: Sequence[Node], view: NodeVector,
                     idx: np.ndarray) -> tuple[np.ndarray | None, dict[int, Outcome]]:
        """A node-level rule for nodes[idx], vectorised when it can be, and the error outcome of
        each position whose evaluation failed (a failing predicate denies, a failing score is 0).

        A vector call that raises is not an outcome: the scalar form then decides node by node,
        with exact CEL semantics, so only the nodes that really fail get an error."""
        if rule.vectorizable and self.vectorize:
            sub = view if len(idx) == len(nodes) else self.table.view([nodes[i] for i in idx])
            try:
                value = rule.vector(task, job, sub)
            except Exception:  # noqa: BLE001 - fall back to the scalar form below
                value = _FALLBACK
            if value is None:
                return None, {}
            if value is not _FALLBACK:
                arr = np.asarray(value)
                return (arr if arr.shape == (len(idx),) else np.broadcast_to(arr, (len(idx),))), {}
        values = []
        failed: dict[int, Outcome] = {}
        for k, i in enumerate(idx):
            v = self._node_call(rule, task, job, nodes[i])
            if v is _ERROR:
                failed[k] = self.errors[-1]
                v = rule.hook_name == "predicate"
            values.append(0 if v is None else v)
        return np.asarray(values), failed

    @property
    def lone_candidate_unscored(self) -> bool:
        """A task that fits one node only goes there or nowhere, and scoring the node would record
        nothing (total rules, no shadow rule, no coverage): the caller may skip the scores (it
        keeps them when the audit log asks for them)."""
        return self._lone_unscored and self.coverage is None

    def node_scores(self, task: Task, job: Job, nodes: Sequence[Node], read: np.ndarray | None = None) -> np.ndarray:
        """Every node's weighted sum of the node-order rules. `read`: a mask of the nodes whose
        scores the caller reads; when they are few, only they may be scored (the others are 0)."""
        rules = self.hooks["nodeOrder"]
        if not rules or not nodes:
            return np.zeros(len(nodes))
        # what node-set-relative functions (bin-packing) compare against in scalar mode
        self.scoring_nodes = nodes
        self.scoring_memo = {}
        view = self.table.view(nodes)
        if self._summing_scores and not self.audit.enabled and self.coverage is None:
            if read is not None and self._lone_unscored and PARTS_SCORED:
                part = _part_scores(rules, task, job, view, read)
                if part is not None:
                    return part
            summed = _summed_scores(rules, task, job, view, len(nodes))
            if summed is not None:
                return summed
        total = np.zeros(len(nodes))
        idx = np.arange(len(nodes))
        parts: dict[str, np.ndarray] = {}
        for rule in rules:
            values, _ = self.node_values(rule, task, job, nodes, view, idx)
            if values is not None:
                # x * 1.0 is x, bit for bit: a float array of weight 1 that the rule made for
                # this call (not a live column) is its own weighted part
                weighted = values if rule.weight == 1.0 and values.dtype == np.float64 and values.flags.owndata \
                    else np.multiply(values, rule.weight, dtype=np.float64)
                total += weighted
                parts[rule.label] = weighted
        shadow_parts: dict[str, np.ndarray] = {}
        for rule in self.shadow["nodeOrder"] if self.shadowing else ():
            values, _ = self.node_values(rule, task, job, nodes, view, idx)
            if values is not None:
                shadow_parts[rule.label] = rule.weight * values.astype(np.float64)
        if self.coverage is not None:
            for label, values in (*parts.items(), *shadow_parts.items()):
                if len(values) > 1 and np.ptp(values) > 0:
                    self.coverage.hit(label)
        self.last_scores = ScoreSheet(nodes, total, parts, shadow_parts)
        return total

    def score_scope(self, view: NodeVector) -> tuple[Any, ...] | None:
        """What the node-order rules compare each node against over the view's whole node set,
        when a run's scores may be carried from one pod to the next (`rescored`); None when they
        may not be (a rule reads more than its node, scoring records the audit log's or the
        coverage's parts, or parts are not scored)."""
        if self._score_scopes is None or not PARTS_SCORED or self.audit.enabled or self.coverage is not None:
            return None
        return tuple(key(view, *args) for key, args in self._score_scopes)

    def rescored(self, task: Task, job: Job, nodes: Sequence[Node], view: NodeVector, scores: np.ndarray,
                 pos: int) -> np.ndarray | None:
        """`node_scores` for the next pod of a run, from the last pod's `scores` over the same
        nodes: only the node at `pos`, where the last pod landed, is scored again. The caller has
        checked that nothing else changed since, that the requests are equal and that
        `score_scope` is the same; the rules then give every other node the same bits (a rule's
        value at a node is worked out from that node alone, as for part scoring). None when the
        one node's score cannot be summed in one pass."""
        self.scoring_nodes = nodes
        self.scoring_memo = {}
        one = _summed_scores(self.hooks["nodeOrder"], task, job, view.part_of(np.array([pos])), 1)
        if one is None:
            return None
        out = scores.copy()
        out[pos] = one[0]
        return out

    def gpu_score(self, task: Task, node: Node, group: str) -> float:
        total = 0.0
        for rule in self.hooks["gpuOrder"]:
            v = self._eval(rule, self._env(task=task, node=node, gpu=GpuView(node, group)))
            if v is not None and v is not _ERROR:
                total += rule.weight * float(v)
                if self.coverage is not None and v:
                    self.coverage.hit(rule.label)
        return total

    # ---- values the rules ask for (the `cluster` variable) -------------------------------------
    def queue_share(self, queue_uid: str) -> fairshare.QueueShare:
        return self.shares.queues[queue_uid]

    def job_request(self, job: Job) -> dict[str, float]:
        return init_request_quantities(self, job)

    def queue_order_key(self, queue: Queue, job: Job | None, victims: Sequence[Job] = ()) -> list[Any]:
        req = self.job_request(job) if job is not None else None
        vict = self._victims_taken(victims) if victims else None
        return capacity.queue_order_key(self.shares, self.shares.queues[queue.uid], req, vict)

    @staticmethod
    def _victims_taken(victims: Sequence[Job]) -> fairshare.Vec:
        vict = fairshare.vec()
        if isinstance(victims, TakenVictims):
            # the earlier victims' sum, kept by the order: the same additions in the same order
            vict["cpu"], vict["memory"], vict["gpu"] = victims.taken
            victims = [victims.last]
        for v in victims:
            res = v.allocated_resources()
            vict["cpu"] += res.cpu
            vict["memory"] += res.memory
            vict["gpu"] += res.gpus
        return vict


class GpuView:
    """One candidate GPU on a node, as gpuOrder rules see it."""

    __slots__ = ("group", "node")

    def __init__(self, node: Node, group: str) -> None:
        self.node = node
        self.group = group

    @property
    def whole(self) -> bool:
        from kaipolicy.api.task import WHOLE_GPU
        return self.group == WHOLE_GPU

    @property
    def used_portion(self) -> float:
        return 0.0 if self.whole else self.node.used_gpu_portion(self.group)


#: Score only the nodes the caller reads when they are at most this share of the nodes, every
#: node-order rule is total and the sum is taken in one pass (False: score every node; the tests
#: compare both).
PARTS_SCORED = True
PART_SHARE = 0.25


def _part_scores(rules: Sequence[Rule], task: Task, job: Job, view: NodeVector, read: np.ndarray) -> np.ndarray | None:
    """`_summed_scores` at the nodes `read` marks, 0 elsewhere, when they are few of some nodes;
    else None (over every node the rules read the table's live columns and kept arrays, which
    costs less than taking the few nodes' rows).

    Exact: a rule's vector value at a node is worked out from that node alone, but for the
    node-set-relative functions, which compare against the view's `scope` (the whole set); the
    rules are total, so the nodes left out could record no error either."""
    if view.every:
        return None
    rows = np.flatnonzero(read)
    if len(rows) > PART_SHARE * len(view):
        return None
    summed = _summed_scores(rules, task, job, view.part_of(rows), len(rows))
    if summed is None:
        return None
    out = np.zeros(len(view))
    out[rows] = summed
    return out


def _summed_scores(rules: Sequence[Rule], task: Task, job: Job, view: NodeVector, n: int) -> np.ndarray | None:
    """The weighted sum of the node-order rules' vector values, as node_scores adds them (the
    same products added in the same order, so the same bits), without the parts. None when a
    rule raises or gives an odd shape: the caller then scores rule by rule, which records errors
    and falls back to scalar evaluation as it must. A cycle runs under numpy's error state that
    ignores floating-point errors (run_cycle), as the rules' IEEE semantics want; called outside
    one, a rule's division by zero may warn, or raise under a raising state and be scored rule by
    rule: the values are the same."""
    total = np.zeros(n)
    try:
        for rule in rules:
            raw = rule.vector_raw
            if raw is None:
                return None
            value = raw(task, job, view)
            if value is None:
                continue
            arr = value if type(value) is np.ndarray else np.asarray(value)
            if arr.ndim == 0:
                # a constant part: its product once, added to every node (0 changes nothing:
                # the total starts at +0.0 and a sum of doubles is never -0.0 from there); a
                # real number's product in Python's doubles is numpy's, bit for bit
                part = float(arr) * rule.weight if arr.dtype.kind in "biuf" \
                    else np.multiply(arr, rule.weight, dtype=np.float64)
                if part != 0.0:
                    total += part
            elif arr.shape != (n,):
                return None
            elif rule.weight == 1.0 and arr.dtype == np.float64:
                total += arr
            else:
                total += np.multiply(arr, rule.weight, dtype=np.float64)
    except Exception:  # noqa: BLE001 - scored again rule by rule, which records the error
        return None
    return total


class _Last:
    """Sorts after every other value (the key of a rule that failed)."""

    def __lt__(self, other: object) -> bool:
        return False

    def __gt__(self, other: object) -> bool:
        return other is not self

    def __repr__(self) -> str:
        return "<last>"


LAST = _Last()


_TYPE_RANK = {bool: 0, int: 1, float: 1, str: 2, bytes: 3}   # the plain types, looked up at once


def _ordered(value: Any) -> tuple[int, Any]:
    """A key element that compares with any other: values of different CEL types (which a
    rule over `dyn` may give two items) order by type first instead of raising in a sort."""
    rank = _TYPE_RANK.get(type(value))
    if rank is not None:
        return (rank, value)
    if isinstance(value, (bool, np.bool_)):
        return (0, bool(value))
    if isinstance(value, (int, float, np.integer, np.floating)):
        return (1, value)
    if isinstance(value, (str, bytes)):
        return (2, value) if isinstance(value, str) else (3, value)
    return (4, value)   # an engine value with its own order (a vocabulary function's result)


class _Error:
    def __repr__(self) -> str:
        return "<rule error>"


_ERROR = _Error()
_FALLBACK = _Error()   # a vector call that raised: evaluate node by node


def _node_error(node: Node, error: Outcome) -> Outcome:
    """A predicate that failed on `node` rejects it; the fit error says it was an error, not a denial."""
    return Outcome(Code.ERROR, error.rule, f"node {node.name}: rule error in {error.rule}: {error.message}")
