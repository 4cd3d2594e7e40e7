"""The victim solver: scenarios of victims for a pending job, tried inside Statements."""

from kaipolicy.actions.solver.scenario import AnyScenario, Scenario, ScenarioView, Victim
from kaipolicy.actions.solver.solve import JobSolver, Solution, Validator
from kaipolicy.actions.solver.views import feasible_nodes, tasks_to_evict

__all__ = ["AnyScenario", "JobSolver", "Scenario", "ScenarioView", "Solution", "Validator", "Victim", "feasible_nodes", "tasks_to_evict"]
