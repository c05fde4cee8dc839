"""The family the rules did not choose: compared with the chosen family's best, and the rankings merged."""

from __future__ import annotations

import copy

from ..actions import Decisions
from ..specs import Cluster, Model, Training
from .candidates import Alternative, PlanResult
from .ranking import NEAR_TIE
from .search import Search

def other_family(cluster: Cluster, model: Model, training: Training, decisions: Decisions, strategy: str,
                 result: PlanResult, check_fn, keep_ranking: bool, assumptions=None) -> None:
    """Evaluate the family the rules did not choose. A rule's zero-dp strategy is a preference for
    the simpler family (the seed's "≤32 cards: start with ZeRO; don't jump to TP/PP"; issue 5 ranks
    by step time, then simplicity), so it holds among estimates that cannot be told apart: when the
    model-parallel family's best is faster by more than NEAR_TIE, the cost model wins and the choice
    moves to it, saying so. The other way round the rules stand: a model-parallel strategy comes
    from the model outgrowing a node, where ZeRO-3's per-layer gathers over the whole cluster are
    modelled optimistically (bucketed calls, no per-module latency). Otherwise the other family's
    best joins the alternatives with the rule that preferred the chosen family."""
    other = copy.deepcopy(decisions)
    if strategy == "zero-dp":
        family, framework = "model-parallel", "megatron"
        other.zero_stages = ((1,), "planner")
        other.features.setdefault("sp", "planner")
        other.features.setdefault("tp_before_pp", "planner")
    else:
        family, framework = "zero-dp", "deepspeed"
        other.zero_stages = ((1, 2, 3), "planner")
    side = PlanResult(None, None, framework)
    chosen, _ = Search(cluster, model, training, other, family, framework, side, check_fn, allow_offload=False,
                       keep_ranking=keep_ranking, max_alternatives=0, assumptions=assumptions).run()
    result.examined += side.examined
    result.ranking = merge_rankings(result.ranking, side.ranking)
    if chosen is None or result.estimate is None:
        return
    layout, est = chosen
    rule = decisions.strategy[1] if decisions.strategy else "the default strategy"
    ours = result.estimate.step_time
    if strategy == "zero-dp" and est.step_time * (1 + NEAR_TIE) < ours:
        # The other family again, now with its alternatives, and the preferred family's best as one.
        moved = PlanResult(None, None, framework)
        chosen, _ = Search(cluster, model, training, other, family, framework, moved, check_fn, allow_offload=False,
                           keep_ranking=False, assumptions=assumptions).run()
        layout, est = chosen
        result.events.append(("note", f"family {family} ({framework}) is estimated {1 - est.step_time / ours:.0%} "
                                      f"faster than the best {strategy} layout ({est.step_time:.2f} s vs {ours:.2f} s), "
                                      f"beyond the {NEAR_TIE:.0%} the estimate cannot separate: it overrides rule "
                                      f"{rule}'s preference for {strategy}", None))
        result.events += moved.events
        kept = Alternative(result.layout, result.estimate, (
            f"family {strategy} ({result.framework}): est. step {ours:.2f} s ({ours / est.step_time - 1:+.0%}); "
            f"rule {rule} prefers it, but the estimate puts it beyond the {NEAR_TIE:.0%} band"))
        result.layout, result.estimate, result.framework = layout, est, framework
        result.alternatives = moved.alternatives + [kept]
        if keep_ranking:                     # the chosen family leads
            theirs = {id(layout) for layout, _ in side.ranking}
            result.ranking = merge_rankings(side.ranking, [c for c in result.ranking if id(c[0]) not in theirs])
        return
    delta = est.step_time / ours - 1
    result.alternatives.append(Alternative(layout, est, (
        f"family {family} ({framework}): est. step {est.step_time:.2f} s ({delta:+.0%}); "
        f"rule {rule} prefers {strategy} for this cluster and model")))


def merge_rankings(ours: list, theirs: list) -> list:
    """Both families' layouts best first: each family keeps its own order (its near-ties broken by
    its own preference) and the two are merged by estimated step time, ours first on a tie and our
    first layout (the choice) first. Every layout stays: a shape's other (micro-batch, vpp, recompute)
    variants are layouts that fit too, and the fastest of them may come after a variant the near-tie
    preference put first."""
    merged = []
    i = j = 0
    while i < len(ours) or j < len(theirs):
        take_ours = j >= len(theirs) or (i < len(ours) and (i == 0 or ours[i][1].step_time <= theirs[j][1].step_time))
        merged.append(ours[i] if take_ours else theirs[j])
        if take_ours:
            i += 1
        else:
            j += 1
    return merged

