"""What the search finds and hands back: the layouts that fit (and the closest one that did not),
the alternatives, the plan's result."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import NamedTuple

from ..costmodel import Estimate
from ..costmodel.sizing import Sized, estimate_of
from ..inputs.layout import Layout
from .events import PlanEvent


@dataclass(frozen=True)
class Alternative:
    layout: Layout
    estimate: Estimate
    reason: str
    family: str | None = None
    """The other family's best, listed for comparison: its strategy; None for a runner-up of the choice's."""
    kind: str | None = None
    """alternatives.KINDS' name when listed as the best of a kind the other entries do not show."""


@dataclass(frozen=True)
class PlanResult:
    """What plan() answers: the choice (layout and estimate; None when none), its framework, its
    alternatives, the trace's events, the layouts sized (`examined`), and, when asked, every layout that
    fit, best first (`ranking`, before the audit's check, for benchmarks and tools). `blocked_by`:
    (rule id, message) when layouts fit but the audit's legality rules refused every one; `logged`: the
    memory rejections in the trace, (framework, tp, pp, cp, ep, ZeRO stage, offload[, "cpu" when moved
    to NVMe]), so that a following search of the same family does not repeat them."""
    layout: Layout | None
    estimate: Estimate | None
    framework: str | None
    alternatives: tuple[Alternative, ...] = ()
    events: tuple[PlanEvent, ...] = ()
    examined: int = 0
    ranking: list[tuple[Layout, Estimate]] = field(default_factory=list)
    blocked_by: tuple[str, str] | None = None
    logged: frozenset = frozenset()

    def noted(self, *events: PlanEvent) -> PlanResult:
        """This result with `events` added to its trace."""
        return replace(self, events=self.events + events)


class Closest(NamedTuple):
    """The layout that came closest to fitting, at its most frugal recompute level."""
    layout: Layout
    sized: Sized
    shortfall: float             # messages.shortfall: the share of its memory it needs (> 1)


class Candidate:
    """A layout that fits, with its sizing and step time; its full Estimate is built only when it
    reaches the output (the choice, an alternative, the audit's screening, or the full ranking)."""

    __slots__ = ("layout", "sized", "step_time", "floor", "tight", "_estimate", "tie_key", "kind", "advice")

    def __init__(self, layout: Layout, sized: Sized, step_time: float, floor: dict | None, tight: bool):
        self.layout, self.sized, self.step_time, self.floor, self.tight = layout, sized, step_time, floor, tight
        self._estimate: Estimate | None = None
        self.tie_key: tuple | None = None   # ranking.tie_break's, once computed (a candidate lives in one search)
        self.kind: str | None = None        # alternatives.KINDS' name when listed as the best of its kind
        self.advice: tuple | None = None    # (rule id, message) of the audit's advice, once screened (alternatives.pick)

    @property
    def memory_share(self) -> float:
        return self.sized.total / self.sized.capacity

    @property
    def estimate(self) -> Estimate:
        if self._estimate is None:
            self._estimate = estimate_of(self.sized)    # the same numbers; races build equal objects
        return self._estimate
