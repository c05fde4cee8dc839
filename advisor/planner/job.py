"""The planner's values: the job it is given (built once, never written to), the family one search
covers, and the outcome each search returns. `plan()` (planner/__init__.py) combines outcomes; no
search writes into another's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from ..costmodel import Assumptions
from ..inputs.layout import Layout
from ..inputs.specs import Cluster, Model, Training
from ..results.audit import Screening
from ..rulebook.actions import Decisions
from .candidates import Alternative, Candidate, Closest
from .events import PlanEvent
from .ranking import Ties
from .space import Policy

MAX_ALTERNATIVES = 4
MAX_REJECT_EVENTS = 10          # rejections written to the trace one by one; the rest are counted


def no_screening(layout: Layout, estimate) -> Screening:
    """The screening of a plan without an audit: nothing to say."""
    return Screening()


@dataclass(frozen=True)
class Job:
    """What the planner is asked: the inputs, the rules' decisions (only read), the audit's screening
    of a layout (results.audit.Screening), whether to rank every layout (benchmarks, tests) and the
    cost model's knobs (None: Assumptions' defaults)."""
    cluster: Cluster
    model: Model
    training: Training
    decisions: Decisions
    check_fn: Callable = no_screening
    keep_ranking: bool = False
    assumptions: Assumptions | None = None
    policy: Policy = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "policy", Policy.of(self.decisions))

    def ties(self, order: str) -> Ties:
        """The near-tie order `order` (ranking.CRITERIA's key) for this model on this cluster."""
        return Ties.for_job(order, self.model, self.cluster, self.training)


class Family(NamedTuple):
    """What one search covers: a strategy ("zero-dp" or "model-parallel") on one framework, with the
    policy it is searched under; offload only when asked; how many alternatives it lists (0: a
    comparison search that gives its family's best alone)."""
    strategy: str
    framework: str
    policy: Policy
    allow_offload: bool = False
    max_alternatives: int = MAX_ALTERNATIVES


@dataclass(frozen=True)
class Outcome:
    """What one search found. `chosen`: its choice (None: none); `closest`: the layout that came
    closest to fitting, when some did not; `alternatives`: the choice's runners-up, each with its reason;
    `events`: what it tells the trace, in order; `examined`: the layouts it sized; `ranking`: every
    layout that fit, best first (only when the job keeps the ranking and something fit, else None);
    `blocked_by`: (rule id, message) when layouts fit but the audit refused every one; `logged`: the
    memory rejections it wrote (messages' keys), so that a following search does not repeat them;
    `missing_kinds`: the best layout of each alternatives.KINDS entry a list of layouts leaves out."""
    family: Family
    chosen: Candidate | None
    closest: Closest | None
    alternatives: tuple[Alternative, ...] = ()
    events: tuple[PlanEvent, ...] = ()
    examined: int = 0
    ranking: list | None = None
    blocked_by: tuple[str, str] | None = None
    logged: frozenset = frozenset()
    missing_kinds: Callable[[list[Layout]], list[Candidate]] = lambda listed: []

    @property
    def pick(self):
        """(layout, estimate) of the choice, or None."""
        return None if self.chosen is None else (self.chosen.layout, self.chosen.estimate)
