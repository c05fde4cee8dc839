"""Planner: search the legal layouts the rules allow, keep those that fit, rank them by the cost model.

1. Shapes (space.py): (tp, pp, cp, ep, etp, vpp) combinations that satisfy the frameworks'
   structural rules and the rules' decisions.
2. Memory and time (search.py): for each shape, micro-batch, ZeRO stage and offload, the least
   recompute that fits, coarse to fine, sizing only the variants that could change the answer.
3. Rank (ranking.py): the fastest step wins, except that near-ties (within the estimate's measured
   error, inputs.uncertainty) go by the tie-break criteria; the audit's legality rules then have the
   last word on each pick, and its advice decides among near-ties (search.pick).
4. Families (families.py): the family the rules did not choose is compared, and a ZeRO strategy that
   cannot hold the model widens to Megatron-LM.
5. Advice (search.py): each advice of the audit that the choice still draws gets a note saying why.
What the search finds is in candidates.py, what it tells the trace in events.py (typed) and
messages.py (the wording).
"""

from __future__ import annotations

from ..rulebook.actions import Decisions
from ..costmodel import Assumptions
from ..results.audit import Screening
from ..inputs.specs import Cluster, Model, Training
from .candidates import PlanResult
from .families import family_framework, family_refused, narrow_framework, other_family, widen_to_megatron
from .events import PlanEvent
from .messages import need_and_capacity, needs, offload_basis, preference_set_aside
from .search import Search
from .space import Policy

__all__ = ["PlanEvent", "PlanResult", "plan"]


def plan(cluster: Cluster, model: Model, training: Training, decisions: Decisions,
         check_fn=lambda layout, est: Screening(), keep_ranking: bool = False, assumptions=None) -> PlanResult:
    """Pick the fastest layout (by the cost model) that the rules allow, that fits, and that has no
    error from `check_fn` (the audit's screening of a layout: results.audit.Screening). `assumptions`:
    the cost model's knobs (advisor.estimate.Assumptions; None: its defaults). `decisions` is only read."""
    framework = decisions.framework[0] if decisions.framework else "megatron"
    strategy = decisions.strategy[0] if decisions.strategy else "model-parallel"
    policy = Policy.of(decisions)
    result = PlanResult(None, None, framework)
    if not decisions.strategy:
        result.events.append(PlanEvent("note", "no rule chose a strategy: model-parallel"))
    if not decisions.allows(framework):
        # the rules chose a framework their own allow_frameworks excludes: the family runs on an allowed one
        family = "zero-dp" if strategy == "zero-dp" else "model-parallel"
        moved = family_framework(family, framework, decisions)
        refused = family_refused(family, moved, decisions)
        if refused:
            result.events.append(PlanEvent("reject", refused, family, rule_id=decisions.frameworks[1]))
            return result
        result.events.append(PlanEvent("note", f"framework {framework} is not among those rule "
                                               f"{decisions.frameworks[1]} allows: family {family} runs on {moved}",
                                       rule_id=decisions.frameworks[1]))
        framework = result.framework = moved
    aside = preference_set_aside(decisions.features, policy.tie_order)
    if aside is not None:
        result.events.append(aside)
    args = (cluster, model, training, policy, strategy, framework, result, check_fn)
    chosen, closest = Search(*args, allow_offload=False, keep_ranking=keep_ranking, assumptions=assumptions).run()
    if chosen is None and strategy == "zero-dp":
        chosen, closest = Search(*args, allow_offload=True, keep_ranking=keep_ranking, assumptions=assumptions).run()
        if chosen is not None:
            where = ("NVMe (host memory cannot hold the offloaded states)" if chosen[0].offload_device == "nvme"
                     else "host memory")
            basis = offload_basis(cluster, chosen[0], chosen[1], assumptions or Assumptions())
            result.events.append(PlanEvent("note", f"nothing fits on the GPUs alone: ZeRO offload to {where}. {basis}"))
    widened = chosen is None and strategy == "zero-dp"
    if widened:
        chosen, closest = widen_to_megatron(cluster, model, training, policy, result, closest, check_fn, keep_ranking,
                                            assumptions)
    if chosen is None and result.blocked_by is not None:
        # one framework's audit rule refused every fitting layout: another framework, if none is stated
        searched = "model-parallel" if widened or strategy != "zero-dp" else "zero-dp"
        narrowed = narrow_framework(cluster, model, training, policy, searched, result, check_fn, keep_ranking,
                                    assumptions)
        if narrowed.chosen is not None:
            chosen, closest = narrowed.chosen, narrowed.closest
            widened = widened or narrowed.family != searched     # the other family is the one found
    if chosen is None:
        if result.blocked_by:
            pass                             # the search said which rule refused the layouts that fit
        elif closest is not None:
            have, want = need_and_capacity(closest.sized)
            result.events.append(PlanEvent("reject", f"no layout fits; closest {needs(closest)}", closest.layout.id,
                                           have=have, want=want))
        else:
            result.events.append(PlanEvent("reject", "no layout satisfies the divisibility constraints "
                                                     "(heads, layers, global batch vs dp)"))
        return result
    result.layout, result.estimate = chosen
    if not widened:      # (when widened, the other family is the ZeRO one that just failed, in the trace)
        other_family(cluster, model, training, policy, strategy, result, check_fn, keep_ranking, assumptions)
    return result
