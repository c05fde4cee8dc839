"""The two families, ZeRO data parallel (DeepSpeed) and model parallel (Megatron-LM): the one the
rules did not choose is compared with the chosen one's best, and a ZeRO strategy that cannot hold
the model widens to Megatron-LM. Where the planner departs from the rules' decisions it does so in
a Policy of its own (space.Policy) and says so in the trace; the rules' Decisions stay as they are."""

from __future__ import annotations

from typing import NamedTuple

from ..inputs.specs import Cluster, Model, Training
from ..rulebook.actions import Decisions
from .candidates import Alternative, Closest, PlanResult
from .events import PlanEvent
from .messages import need_and_capacity, needs
from .ranking import NEAR_TIE
from .search import Search
from .space import Policy


def megatron_policy(policy: Policy) -> Policy:
    """Megatron-LM's own defaults: its distributed optimizer (ZeRO-1) and sequence parallelism, where the
    stated framework has them (Decisions.zero_bound, a disabled sp)."""
    return policy._replace(zero_stages=bounded((1,), policy.decisions), sp="sp" not in policy.decisions.disabled)


def bounded(stages: tuple[int, ...], decisions: Decisions) -> tuple[int, ...]:
    """A family's own ZeRO stages within the bound a constraint rule set (Decisions.zero_bound: what a
    stated framework has, e.g. no distributed optimizer before Megatron-LM 2022); the bound itself when
    none of the family's stages is in it."""
    if decisions.zero_bound is None:
        return stages
    allowed = decisions.zero_bound[0]
    return tuple(s for s in stages if s in allowed) or allowed


# The framework each family runs on: DeepSpeed for ZeRO data parallelism, Megatron-LM for TP x PP,
# unless the rules chose Megatron-DeepSpeed, which runs both (its DeepSpeed engine shards with ZeRO,
# its Megatron model code splits with TP and PP).
FAMILY_FRAMEWORKS = {"zero-dp": "deepspeed", "model-parallel": "megatron"}
# Where the rules allow only some frameworks (allow_frameworks: a stated training stack), a family
# runs on the first allowed one that can run it, after the family's own framework and the chosen one:
# sharded data parallelism is also torchtitan's FSDP2 and Megatron-LM's distributed optimizer or
# Megatron-FSDP; TP x PP is also Megatron-DeepSpeed, torchtitan, and DeepSpeed's pipeline engine.
FAMILY_FALLBACKS = {"zero-dp": ("torchtitan", "megatron", "megatron+deepspeed"),
                    "model-parallel": ("megatron+deepspeed", "torchtitan", "deepspeed")}
FRAMEWORK_NAMES = {"megatron": "Megatron-LM", "megatron+deepspeed": "Megatron-DeepSpeed", "deepspeed": "DeepSpeed",
                   "torchtitan": "torchtitan"}


def family_framework(family: str, chosen: str, decisions: Decisions | None = None) -> str | None:
    """The framework `family` runs on; None when the rules' allow_frameworks leave none that runs it."""
    options = ((chosen,) if chosen == "megatron+deepspeed" else ()) + (FAMILY_FRAMEWORKS[family], chosen) \
        + FAMILY_FALLBACKS[family]
    return next((f for f in options if decisions is None or decisions.allows(f)), None)


def family_refused(family: str, framework: str | None, decisions: Decisions) -> str | None:
    """Why the rules leave `family` nothing to search (a trace message), or None: no allowed framework
    runs it, or (model-parallel) the rules' limits keep both tp and pp at 1."""
    if framework is None:
        allowed, rule = decisions.frameworks
        return f"family {family} not searched: rule {rule} allows only {', '.join(allowed)}, none of which runs it"
    if family == "model-parallel" and decisions.upper("tp") == 1 and decisions.upper("pp") == 1:
        tp_rule, pp_rule = decisions.max["tp"].rule_id, decisions.max["pp"].rule_id
        by = f"rule {tp_rule} (tp <= 1, pp <= 1)" if tp_rule == pp_rule else \
            f"rules {tp_rule} (tp <= 1) and {pp_rule} (pp <= 1)"
        return f"family {family} not searched: {by} leaves it no tensor or pipeline parallelism"
    return None


def refusing_rule(decisions: Decisions, framework: str | None) -> str | None:
    """The rule named by family_refused's message: the allow_frameworks rule, else the tp limit's."""
    if framework is None and decisions.frameworks:
        return decisions.frameworks[1]
    return decisions.max["tp"].rule_id if "tp" in decisions.max else None


def other_family(cluster: Cluster, model: Model, training: Training, policy: Policy, strategy: str,
                 result: PlanResult, check_fn, keep_ranking: bool, assumptions=None) -> None:
    """Evaluate the family the rules did not choose. A rule's zero-dp strategy is a preference for
    the simpler family (the seed's "≤32 cards: start with ZeRO; don't jump to TP/PP"; issue 5 ranks
    by step time, then simplicity), so it holds among estimates that cannot be told apart: when the
    model-parallel family's best is faster by more than NEAR_TIE, the cost model wins and the choice
    moves to it, saying so. The other way round the rules stand: a model-parallel strategy comes
    from the model outgrowing a node, where ZeRO-3's per-layer gathers over the whole cluster are
    modelled optimistically (bucketed calls, no per-module latency). Otherwise the other family's
    best joins the alternatives with the rule that preferred the chosen family."""
    decisions = policy.decisions
    family = "model-parallel" if strategy == "zero-dp" else "zero-dp"
    framework = family_framework(family, result.framework, decisions)
    refused = family_refused(family, framework, decisions)
    if refused:
        result.events.append(PlanEvent("note", refused, family, rule_id=refusing_rule(decisions, framework)))
        return
    other = family_policy(family, framework, policy)
    side = PlanResult(None, None, framework)
    search = Search(cluster, model, training, other, family, framework, side, check_fn, allow_offload=False,
                    keep_ranking=keep_ranking, max_alternatives=0, assumptions=assumptions)
    chosen, _ = search.run()
    result.examined += side.examined
    result.ranking = merge_rankings(result.ranking, side.ranking)
    if chosen is None or result.estimate is None:
        return
    layout, est = chosen
    rule_id = policy.decisions.strategy[1] if policy.decisions.strategy else None
    rule = rule_id or "the default strategy"
    ours = result.estimate.step_time
    if layout == result.layout:
        # the rules' family searched this layout too (e.g. Megatron-FSDP at tp = pp = 1)
        result.events.append(PlanEvent("note", f"family {family} ({framework}): its best layout is the choice itself",
                                       family))
    elif strategy == "zero-dp" and est.step_time * (1 + NEAR_TIE) < ours:
        move_to(cluster, model, training, other, family, framework, result, side, check_fn, rule_id, keep_ranking,
                assumptions)
        return
    else:
        preferred = f"rule {rule} prefers {strategy} for this cluster and model"
        listed = next((i for i, a in enumerate(result.alternatives) if a.layout == layout), None)
        if listed is None:
            result.alternatives.append(Alternative(layout, est, (
                f"family {family} ({framework}): est. step {est.step_time:.2f} s ({est.step_time / ours - 1:+.0%}); "
                f"{preferred}"), family))
        else:     # the chosen family's search listed it already (e.g. Megatron-FSDP at tp = pp = 1): once
            a = result.alternatives[listed]
            result.alternatives[listed] = Alternative(a.layout, a.estimate, (
                f"{a.reason}; also the best of family {family} ({framework}): {preferred}"), family, a.kind)
    # and the best of each kind of layout this family has that the answer does not show yet (search.KINDS)
    for cand in search.best_of_missing_kinds([result.layout, *(a.layout for a in result.alternatives)]):
        est = cand.estimate
        result.alternatives.append(Alternative(cand.layout, est, (
            f"best {cand.kind} layout, family {family} ({framework}): est. step {est.step_time:.2f} s "
            f"({est.step_time / ours - 1:+.0%})"), family, cand.kind))


def family_policy(family: str, framework: str, policy: Policy) -> Policy:
    """The policy a family is searched with when the rules chose the other one: model-parallel prefers TP
    before PP (unless the MoE preference or sharded DP first applies) with Megatron's own defaults on a
    Megatron framework; zero-dp tries every ZeRO stage the rules' bound leaves."""
    if family == "model-parallel":
        return (megatron_policy(policy) if framework.startswith("megatron") else policy)._replace(
            tie_order=policy.tie_order if policy.tie_order in ("ep_over_tp", "dp_before_tp") else "tp_before_pp")
    return policy._replace(zero_stages=bounded((1, 2, 3), policy.decisions))


class Narrowed(NamedTuple):
    """What narrow_framework found: Search.run's (choice, closest) and the family it searched (None: none)."""
    chosen: tuple | None
    closest: Closest | None
    family: str | None


def narrow_framework(cluster: Cluster, model: Model, training: Training, policy: Policy, strategy: str,
                     result: PlanResult, check_fn, keep_ranking: bool, assumptions=None) -> Narrowed:
    """Layouts fit, but the audit refused every one on the framework the rules chose (result.blocked_by),
    and no stated training stack fixed the framework (no allow_frameworks): one framework's limit narrows
    the framework, it does not empty the search (issue 29). The family is searched again on each other
    framework that runs it (FAMILY_FRAMEWORKS, FAMILY_FALLBACKS), then the other family likewise, every
    layout screened by the same audit; the trace names the rule and the framework set aside. A stated
    stack keeps its infeasible answer: its own limit is the user's fact."""
    if result.blocked_by is None or policy.decisions.frameworks is not None:
        return Narrowed(None, None, None)
    rule_id, refused = result.blocked_by[0], result.framework
    first = "zero-dp" if strategy == "zero-dp" else "model-parallel"
    for family in (first, "model-parallel" if first == "zero-dp" else "zero-dp"):
        for framework in dict.fromkeys((FAMILY_FRAMEWORKS[family], *FAMILY_FALLBACKS[family])):
            if framework == refused:
                continue
            side = PlanResult(None, None, framework)
            searched = policy if family == first else family_policy(family, framework, policy)
            found, closest = Search(cluster, model, training, searched, family, framework, side, check_fn,
                                    allow_offload=False, keep_ranking=keep_ranking, assumptions=assumptions).run()
            result.examined += side.examined
            if found is None:
                continue
            result.events.append(PlanEvent("note", (
                f"every fitting {FRAMEWORK_NAMES[refused]} layout is refused by rule {rule_id}, a limit of "
                f"{FRAMEWORK_NAMES[refused]}, and training.framework is not stated: the framework narrows to "
                f"{FRAMEWORK_NAMES[framework]} (family {family})"), family, rule_id=rule_id))
            result.events += side.events
            result.framework, result.blocked_by = framework, None
            result.alternatives, result.ranking = side.alternatives, merge_rankings(result.ranking, side.ranking)
            return Narrowed(found, closest, family)
    return Narrowed(None, None, None)


def move_to(cluster: Cluster, model: Model, training: Training, policy: Policy, family: str, framework: str,
            result: PlanResult, side: PlanResult, check_fn, rule_id: str | None, keep_ranking: bool,
            assumptions=None) -> None:
    """The other family is beyond NEAR_TIE faster: search it again, now with its alternatives, and
    make its best the choice, with the preferred family's best as an alternative. The note that
    says so carries rule_id, the rule whose zero-dp strategy it sets aside."""
    rule = rule_id or "the default strategy"
    strategy, ours = "zero-dp", result.estimate.step_time
    moved = PlanResult(None, None, framework)
    (layout, est), _ = Search(cluster, model, training, policy, family, framework, moved, check_fn,
                              allow_offload=False, keep_ranking=False, assumptions=assumptions).run()
    result.events.append(PlanEvent("note", f"family {family} ({framework}) is estimated {1 - est.step_time / ours:.0%} "
                                           f"faster than the best {strategy} layout ({est.step_time:.2f} s vs "
                                           f"{ours:.2f} s), beyond the {NEAR_TIE:.1%} the estimate cannot separate (its measured error): it "
                                           f"overrides rule {rule}'s preference for {strategy}", rule_id=rule_id))
    result.events += moved.events
    kept = Alternative(result.layout, result.estimate, (
        f"family {strategy} ({result.framework}): est. step {ours:.2f} s ({ours / est.step_time - 1:+.0%}); "
        f"rule {rule} prefers it, but the estimate puts it beyond the {NEAR_TIE:.1%} band"), strategy)
    result.layout, result.estimate, result.framework = layout, est, framework
    # (the moved-to search may list the layout set aside too: it is listed once, as the one set aside)
    result.alternatives = [a for a in moved.alternatives if a.layout != kept.layout] + [kept]
    if keep_ranking:                     # the chosen family leads
        theirs = {id(layout) for layout, _ in side.ranking}
        result.ranking = merge_rankings(side.ranking, [c for c in result.ranking if id(c[0]) not in theirs])


def widen_to_megatron(cluster: Cluster, model: Model, training: Training, policy: Policy, result: PlanResult,
                      closest: Closest | None, check_fn, keep_ranking: bool, assumptions=None):
    """ZeRO alone (even with offload) cannot hold the model: widen to TP/PP, and say so. Returns
    what Search.run returns."""
    refused_by = have = want = None
    if result.blocked_by:
        refused_by = result.blocked_by[0]
        why = f"every fitting ZeRO layout is refused by rule {refused_by}"
    elif closest is not None:
        why = f"no ZeRO stage or offload fits; closest {needs(closest)}"
        have, want = need_and_capacity(closest.sized)
    else:               # nothing was sized: no shape, or no micro-batch that divides the batch
        why = (f"no ZeRO layout is legal: global batch {training.global_batch_size} vs micro-batch x "
               f"data-parallel ranks on {cluster.gpus} GPUs (DeepSpeed's batch identity), within the rules' limits")
    result.events.append(PlanEvent("reject", f"family zero-dp: {why}", "zero-dp", rule_id=refused_by, have=have,
                                   want=want))
    framework = family_framework("model-parallel", result.framework, policy.decisions)
    refused = family_refused("model-parallel", framework, policy.decisions)
    if refused:                          # the stated stack has no model parallelism to widen to
        result.events.append(PlanEvent("note", refused, "model-parallel",
                                        rule_id=refusing_rule(policy.decisions, framework)))
        return None, closest
    result.blocked_by = None
    result.framework = framework
    strategy_rule = policy.decisions.strategy[1] if policy.decisions.strategy else None   # set aside here
    result.events.append(PlanEvent("note", f"widening to model-parallel with {FRAMEWORK_NAMES[framework]} (TP inside "
                                           "the NVLink domain, then PP)", rule_id=strategy_rule))
    widened = megatron_policy(policy) if framework.startswith("megatron") else policy
    return Search(cluster, model, training, widened, "model-parallel", framework, result, check_fn,
                  allow_offload=False, keep_ranking=keep_ranking, assumptions=assumptions).run()


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

