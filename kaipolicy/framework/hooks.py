"""The closed table of hook kinds: the reference scheduler's 25 session slots.

Each row says what a rule of that kind writes (its `form`), what it is evaluated
per, which names its expressions see, how the results of several rules combine
and what holds when no rule is present. The rule-file schema lists the same kinds
(a test keeps the two equal); the session combines results only through `COMBINE`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Form(str, Enum):
    """What the body of a rule of this kind is."""

    DENY = "deny"          # bool expression; true rejects, with `message`
    SCORE = "score"        # number, multiplied by the rule's weight
    KEY = "key"            # list of comparables, ascending sorts first
    ALLOW = "allow"        # bool expression; false rejects
    VALUE = "value"        # a value (resources) read by eviction messages
    BUILTIN = "builtin"    # names a built-in with arguments (fair share, topology)
    ANNOTATIONS = "annotations"  # map of string expressions


class Combine(str, Enum):
    """How the results of the rules of one kind combine, tier by tier."""

    FIRST_DENY = "first-deny"        # rules run in order; the first deny decides
    SUM = "sum"                      # weighted scores are added up
    FIRST_DIFFERING_KEY = "first-differing-key"  # = sort by the concatenated keys
    ALL_ALLOW = "all-allow"          # every rule must allow
    FIRST_ONLY = "first-only"        # only the first registered rule is consulted
    CHAIN = "chain"                  # each rule refines the previous result
    ALL_RUN = "all-run"              # side-effect hooks: every one runs
    MERGE = "merge"                  # maps are merged, later keys win


@dataclass(frozen=True, slots=True)
class HookKind:
    name: str               # the key in a rule file
    slot: str               # the reference's session slot
    form: Form
    per: str                # what one evaluation is about
    names: tuple[str, ...]  # variables the expressions see (besides args, cluster)
    combine: Combine
    default: str            # what holds when no rule of this kind is loaded


_K = HookKind
HOOK_KINDS: tuple[HookKind, ...] = (
    _K("gpuOrder", "GpuOrderFns", Form.SCORE, "task x node x gpu", ("task", "node", "gpu"), Combine.SUM, "0"),
    _K("nodePreOrder", "NodePreOrderFns", Form.BUILTIN, "task", ("task", "job"), Combine.ALL_RUN, "nothing"),
    _K("nodeOrder", "NodeOrderFns", Form.SCORE, "task x node", ("task", "job", "node"), Combine.SUM, "0"),
    _K("jobOrder", "JobOrderFns", Form.KEY, "job", ("job",), Combine.FIRST_DIFFERING_KEY,
       "creation time, then uid"),
    _K("podSetOrder", "PodSetOrderFns", Form.KEY, "pod set", ("job", "podSet"), Combine.FIRST_DIFFERING_KEY,
       "name"),
    _K("subGroupSetOrder", "SubGroupSetOrderFns", Form.KEY, "sub-group set", ("job", "subGroup"),
       Combine.FIRST_DIFFERING_KEY, "name"),
    _K("taskOrder", "TaskOrderFns", Form.KEY, "task", ("task", "job"), Combine.FIRST_DIFFERING_KEY,
       "creation time, then uid"),
    _K("queueOrder", "QueueOrderFns", Form.KEY, "queue x its next job (or the victims taken from it)",
       ("queue", "job", "victims"),
       Combine.FIRST_DIFFERING_KEY, "creation order, then name"),
    _K("canReclaim", "CanReclaimResourcesFns", Form.ALLOW, "job", ("job", "queue"), Combine.FIRST_ONLY,
       "false"),
    _K("reclaimVictimFilter", "ReclaimVictimFilterFns", Form.ALLOW, "job x victim", ("job", "victim"),
       Combine.ALL_ALLOW, "true"),
    _K("preemptVictimFilter", "PreemptVictimFilterFns", Form.ALLOW, "job x victim", ("job", "victim"),
       Combine.ALL_ALLOW, "true"),
    _K("reclaimScenarioValidator", "ReclaimScenarioValidatorFns", Form.ALLOW, "scenario", ("job", "scenario"),
       Combine.ALL_ALLOW, "true"),
    _K("preemptScenarioValidator", "PreemptScenarioValidatorFns", Form.ALLOW, "scenario", ("job", "scenario"),
       Combine.ALL_ALLOW, "true"),
    _K("onJobSolutionStart", "OnJobSolutionStartFns", Form.BUILTIN, "solution", (), Combine.ALL_RUN,
       "nothing"),
    _K("queueAllocated", "GetQueueAllocatedResourcesFns", Form.VALUE, "queue", ("queue",), Combine.FIRST_ONLY,
       "empty"),
    _K("queueDeserved", "GetQueueDeservedResourcesFns", Form.VALUE, "queue", ("queue",), Combine.FIRST_ONLY,
       "empty"),
    _K("queueFairShare", "GetQueueFairShareFns", Form.VALUE, "queue", ("queue",), Combine.FIRST_ONLY, "empty"),
    _K("nonPreemptibleOverQuota", "IsNonPreemptibleJobOverQueueQuotaFns", Form.DENY, "job", ("job", "queue"),
       Combine.FIRST_ONLY, "allow"),
    _K("overCapacity", "IsJobOverCapacityFns", Form.DENY, "job", ("job", "queue"), Combine.FIRST_ONLY,
       "allow"),
    _K("taskOverCapacityOnNode", "IsTaskAllocationOnNodeOverCapacityFns", Form.DENY, "task x node",
       ("task", "job", "node"), Combine.FIRST_ONLY, "allow"),
    _K("subsetNodes", "SubsetNodesFns", Form.BUILTIN, "job x sub-group", ("job",), Combine.CHAIN,
       "one set: all nodes"),
    _K("prePredicate", "PrePredicateFns", Form.DENY, "task", ("task", "job"), Combine.FIRST_DENY, "allow"),
    _K("predicate", "PredicateFns", Form.DENY, "task x node", ("task", "job", "node"), Combine.FIRST_DENY,
       "allow"),
    _K("bindRequestMutate", "BindRequestMutateFns", Form.ANNOTATIONS, "task x node", ("task", "node"),
       Combine.MERGE, "no annotations"),
    _K("preJobAllocation", "PreJobAllocationFns", Form.BUILTIN, "job", ("job",), Combine.ALL_RUN, "nothing"),
)

BY_NAME: dict[str, HookKind] = {k.name: k for k in HOOK_KINDS}
