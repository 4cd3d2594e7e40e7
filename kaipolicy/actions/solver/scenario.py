"""A victim scenario: the pending job (as far as it has been grown), the victims recorded by the
previous, smaller solution, and the potential victims added one victim job at a time.

Rules see a scenario through the `Scenario` vocabulary type: `preemptor`, `victims` (each a
`Victim`: the victim's whole `job` and the `tasks` the scenario may take from it) and `action`.

A scenario only grows, so `view()` can keep it as it stands for a simulation that comes later,
after the scenario has grown further (`ScenarioView`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kaipolicy.actions.solver.views import clone_with_tasks
from kaipolicy.api.job import Job
from kaipolicy.api.task import Task
from kaipolicy.builtins.fairshare import QueueShare, Vec


@dataclass(slots=True, eq=False)
class Victim:
    """A victim job and the pods of it a scenario may take (in the order they were added)."""

    job: Job
    tasks: list[Task] = field(default_factory=list)


class Scenario:
    def __init__(self, action: str, jobs: dict[str, Job], preemptor: Job, request: Vec, recorded: list[Job],
                 start_shares: dict[str, QueueShare] | None = None) -> None:
        self.action = action
        self.jobs = jobs                           # the session's jobs, whole
        self.preemptor = preemptor                 # the partial job
        self.pending_tasks: list[Task] = list(preemptor.tasks.values())
        self.request = request                     # what the partial job asks, as quota counts it
        self.start_shares = start_shares           # queue shares when the job's solution started
        self.recorded_jobs = list(recorded)
        self.recorded_tasks: list[Task] = [t for j in recorded for t in j.tasks.values()]
        self.potential_tasks: list[Task] = []
        self.by_job: dict[str, Victim] = {}
        self.groups: dict[str, list[Job]] = {}      # victim uid -> the views its pods came in
        self.jobs_by_node: dict[str, list[str]] = {}
        self._latest: Job | None = None
        self.grown: list[tuple[str, int]] = []     # per growth of a victim: its uid, its pods before
        for view in recorded:
            self._add_group(view)

    # ---- building -------------------------------------------------------------------------------
    def add_potential(self, view: Job, tasks: list[Task]) -> None:
        if not tasks:
            return
        self.potential_tasks.extend(tasks)
        self._latest = self.jobs[view.uid]
        self._add_group(clone_with_tasks(view, tasks))
        for t in tasks:
            uids = self.jobs_by_node.setdefault(t.node, [])
            if t.job not in uids:
                uids.append(t.job)

    def _add_group(self, view: Job) -> None:
        self.groups.setdefault(view.uid, []).append(view)
        victim = self.by_job.get(view.uid)
        if victim is None:
            victim = self.by_job[view.uid] = Victim(self.jobs[view.uid])
        self.grown.append((view.uid, len(victim.tasks)))
        victim.tasks.extend(view.tasks.values())

    # ---- reading --------------------------------------------------------------------------------
    @property
    def latest_potential_victim(self) -> Job | None:
        return self._latest

    def tasks_on_nodes(self, nodes: list[str]) -> list[Task]:
        """Every pod of every victim group that has a potential victim on one of the nodes."""
        out: list[Task] = []
        seen: set[str] = set()
        for node in nodes:
            for uid in self.jobs_by_node.get(node, ()):
                if uid in seen:
                    continue
                seen.add(uid)
                for view in self.groups[uid]:
                    out.extend(view.tasks.values())
        return out

    def group_of(self, task: Task) -> Job | None:
        for view in self.groups.get(task.job, ()):
            if task.uid in view.tasks:
                return view
        return None

    @property
    def victims(self) -> list[Victim]:
        return list(self.by_job.values())

    def view(self) -> ScenarioView:
        return ScenarioView(self)

    def __repr__(self) -> str:
        return (f"Scenario({self.preemptor.name}: {len(self.pending_tasks)} pending, "
                f"{len(self.recorded_tasks)} recorded, {len(self.potential_tasks)} potential)")


class ScenarioView:
    """A scenario as it stands now, read later, once the scenario has grown: what a simulation
    and the validators read of it. Every list of a scenario only grows, so the view keeps their
    lengths; the victims' pods are cut back to them when first asked for (only the victims grown
    since need it), and the pods on the latest victim's nodes are taken now."""

    def __init__(self, live: Scenario) -> None:
        self.live = live
        self.action = live.action
        self.jobs = live.jobs
        self.preemptor = live.preemptor
        self.pending_tasks = live.pending_tasks
        self.request = live.request
        self.start_shares = live.start_shares
        self.recorded_jobs = live.recorded_jobs
        self.recorded_tasks = live.recorded_tasks
        self.latest_potential_victim = latest = live.latest_potential_victim
        self._potential = len(live.potential_tasks)
        self._victims = len(live.by_job)
        self._grown = len(live.grown)
        self._on_node: dict[str, list[Task]] = {}
        if latest is not None:
            for node in {t.node for t in latest.tasks.values()}:
                self._on_node[node] = live.tasks_on_nodes([node])
        self._victims_then: list[Victim] | None = None

    @property
    def potential_tasks(self) -> list[Task]:
        return self.live.potential_tasks[:self._potential]

    def tasks_on_nodes(self, nodes: list[str]) -> list[Task]:
        """As Scenario.tasks_on_nodes, for one node the latest potential victim's pods are on."""
        if len(nodes) != 1 or nodes[0] not in self._on_node:
            raise ValueError(f"a scenario view knows the pods on its latest victim's nodes only, not on {nodes}")
        return self._on_node[nodes[0]]

    def group_of(self, task: Task) -> Job | None:
        # a pod is in one view of its job; views are only appended, after the one holding it
        return self.live.group_of(task)

    @property
    def victims(self) -> list[Victim]:
        if self._victims_then is None:
            live = self.live
            cut: dict[str, int] = {}
            for uid, before in live.grown[self._grown:]:
                cut.setdefault(uid, before)
            victims = list(live.by_job.values())[:self._victims]
            if cut:
                victims = [Victim(v.job, v.tasks[:cut[v.job.uid]]) if v.job.uid in cut else v for v in victims]
            self._victims_then = victims
        return self._victims_then

    def __repr__(self) -> str:
        return (f"ScenarioView({self.preemptor.name}: {len(self.pending_tasks)} pending, "
                f"{len(self.recorded_tasks)} recorded, {self._potential} potential)")


#: What a simulation and the validators are handed: the scenario itself, or a view of it.
AnyScenario = Scenario | ScenarioView
