"""Planner: the fastest layout the rules allow that fits, with its alternatives, each explained.

The job (job.Job: inputs, the rules' decisions, the audit's screening) is built once and only read.
Each family search (alternatives.search_family) returns its own Outcome; plan() combines them:
1. The rules' family: "zero-dp" (DeepSpeed ZeRO) or "model-parallel" (Megatron-LM TP x PP), on the
   framework the rules chose or, when their allow_frameworks excludes it, the first allowed one that
   runs it (families.family_framework). zero-dp retries with offload when nothing fits on the GPUs,
   then widens to model-parallel; when the audit refuses every layout that fits on one framework and
   none is stated, another framework is searched (families.narrow_framework).
2. One search (search.py): the shapes (space.shapes: tp, pp, cp, ep, etp, vpp within the rules'
   limits and the frameworks' divisibility rules) are sized coarse to fine. Coarse: every shape at
   plain 1F1B and its smallest micro-batch, at the least recompute that fits (bisection: memory only
   shrinks with recompute), which also gives a floor (a lower bound of the step time) for each of its
   other (micro-batch, vpp) variants. Fine: a variant is sized only when its floor can reach the best
   (then the near-tie band) so far, so the choice is the one sizing every variant would make
   (tests/test_planner_refine.py, tests/test_planner_properties.py).
3. Rank (ranking.py): layouts with memory headroom first; the fastest step wins, except that
   near-ties (within the step-time estimate's measured error, Ties.band) go by the rules' tie order
   (ranking.CRITERIA). The audit's legality rules have the last word on each pick, and its advice
   decides among near-ties (alternatives.pick).
4. Alternatives (alternatives.py): up to four other shapes, each with the reason it lost; the list an
   exhaustive search would give, and the best of each kind (sharded DP, TP x PP, expert-parallel)
   the list leaves out.
5. The other family (families.compare_other): its best joins the alternatives with the rule that
   preferred the chosen family; when the rules chose zero-dp and model-parallel is faster beyond the
   near-tie band, the choice moves to it, and the trace says so (families.move_to).
Every departure from the rules' decisions is a Policy of the planner's own (space.Policy) and a note
in the trace (events.PlanEvent, worded in messages.py). Evidence behind the constants and the
planner's measured work: docs/evidence/planner.md.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from ..costmodel import Assumptions
from ..inputs.specs import Cluster, Model, Training
from ..rulebook.actions import Decisions
from .alternatives import search_family
from .candidates import Closest, PlanResult
from .events import PlanEvent
from .families import (absorb, beyond_rule_stages, compare_other, family_framework, family_refused, narrow_framework,
                       widen_to_megatron)
from .job import Family, Job, no_screening
from .messages import need_and_capacity, needs, offload_basis, preference_set_aside

__all__ = ["PlanEvent", "PlanResult", "plan"]


def plan(cluster: Cluster, model: Model, training: Training, decisions: Decisions, check_fn=no_screening,
         keep_ranking: bool = False, assumptions: Assumptions | None = None) -> PlanResult:
    """Pick the fastest layout (by the cost model) that the rules allow, that fits, and that has no
    error from `check_fn` (the audit's screening of a layout: results.audit.Screening). `assumptions`:
    the cost model's knobs (None: Assumptions' defaults). `decisions` is only read."""
    job = Job(cluster, model, training, decisions, check_fn, keep_ranking, assumptions)
    result, family = opening(job)
    if family is None:
        return result
    result, found = search_rules_family(job, result, family)
    if found.chosen is None:
        return nothing_fits(result, found.closest)
    result = replace(result, layout=found.chosen[0], estimate=found.chosen[1])
    if not found.widened:      # (when widened, the other family is the ZeRO one that just failed, in the trace)
        result = compare_other(job, result, family.strategy)
    return result


def opening(job: Job) -> tuple[PlanResult, Family | None]:
    """The family the rules chose, on the framework it runs on, and the trace's first notes; no family
    when the rules' allowed frameworks run none of it."""
    decisions = job.decisions
    framework = decisions.framework[0] if decisions.framework else "megatron"
    strategy = decisions.strategy[0] if decisions.strategy else "model-parallel"
    events = []
    if not decisions.strategy:
        events.append(PlanEvent("note", "no rule chose a strategy: model-parallel"))
    if not decisions.allows(framework):
        # the rules chose a framework their own allow_frameworks excludes: the family runs on an allowed one
        family = "zero-dp" if strategy == "zero-dp" else "model-parallel"
        moved = family_framework(family, framework, decisions)
        refused = family_refused(family, moved, decisions)
        if refused:
            events.append(PlanEvent("reject", refused, family, rule_id=decisions.frameworks[1]))
            return PlanResult(None, None, framework, events=tuple(events)), None
        events.append(PlanEvent("note", f"framework {framework} is not among those rule "
                                        f"{decisions.frameworks[1]} allows: family {family} runs on {moved}",
                                rule_id=decisions.frameworks[1]))
        framework = moved
    aside = preference_set_aside(decisions.features, job.policy.tie_order)
    if aside is not None:
        events.append(aside)
    return PlanResult(None, None, framework, events=tuple(events)), Family(strategy, framework, job.policy)


class Found(NamedTuple):
    """What the rules' family (with offload, widened, narrowed) found: (layout, estimate) of the choice
    or None, the closest layout that did not fit, and whether the search widened to another family."""
    chosen: tuple | None
    closest: Closest | None
    widened: bool


def search_rules_family(job: Job, result: PlanResult, family: Family) -> tuple[PlanResult, Found]:
    """The rules' family; for zero-dp, with offload when nothing fits on the GPUs alone, then widened
    to model parallelism, then with the ZeRO stages beyond the rules' choice; when the audit refused
    every layout that fits, another framework."""
    outcome = search_family(job, family, result.logged)
    result = absorb(result, outcome)
    if outcome.chosen is None and family.strategy == "zero-dp":
        outcome = search_family(job, family._replace(allow_offload=True), result.logged)
        result = absorb(result, outcome)
        if outcome.chosen is not None:
            result = result.noted(offload_note(job, outcome.chosen))
    chosen, closest = outcome.pick, outcome.closest
    widened = chosen is None and family.strategy == "zero-dp"
    if widened:
        result, outcome = widen_to_megatron(job, result, closest)
        if outcome is not None:
            chosen, closest = outcome.pick, outcome.closest
    if chosen is None and widened and result.blocked_by is None:
        result, outcome = beyond_rule_stages(job, result, family)
        if outcome is not None and outcome.chosen is not None:
            chosen, closest = outcome.pick, outcome.closest
            if outcome.chosen.layout.offload != "none":
                result = result.noted(offload_note(job, outcome.chosen))
    if chosen is None and result.blocked_by is not None:
        # one framework's audit rule refused every fitting layout: another framework, if none is stated
        searched = "model-parallel" if widened or family.strategy != "zero-dp" else "zero-dp"
        result, outcome, narrowed_to = narrow_framework(job, result, searched)
        if outcome is not None:
            chosen, closest = outcome.pick, outcome.closest
            widened = widened or narrowed_to != searched     # the other family is the one found
    return result, Found(chosen, closest, widened)


def offload_note(job: Job, chosen) -> PlanEvent:
    """Why the choice offloads, and what its time rests on."""
    where = "NVMe (host memory cannot hold the offloaded states)" if chosen.layout.offload_device == "nvme" \
        else "host memory"
    basis = offload_basis(job.cluster, chosen.layout, chosen.estimate, job.assumptions or Assumptions())
    return PlanEvent("note", f"nothing fits on the GPUs alone: ZeRO offload to {where}. {basis}")


def nothing_fits(result: PlanResult, closest: Closest | None) -> PlanResult:
    """The plan without a choice: why, unless the search already said which rule refused the layouts
    that fit."""
    if result.blocked_by:
        return result
    if closest is not None:
        have, want = need_and_capacity(closest.sized)
        return result.noted(PlanEvent("reject", f"no layout fits; closest {needs(closest)}", closest.layout.id,
                                      have=have, want=want))
    return result.noted(PlanEvent("reject", "no layout satisfies the divisibility constraints "
                                            "(heads, layers, global batch vs dp)"))
