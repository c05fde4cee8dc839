"""The two families, ZeRO data parallel (DeepSpeed) and model parallel (Megatron-LM): the frameworks
each runs on, and the steps of plan() that search a family other than the rules' (widen, narrow,
compare, move; planner/__init__.py). Each returns a new PlanResult; the rules' Decisions are only read."""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from ..rulebook.actions import Decisions
from .alternatives import listed_with_reason, search_family, set_aside, with_kinds
from .candidates import Closest, PlanResult
from .events import PlanEvent
from .job import MAX_ALTERNATIVES, Family, Job, Outcome
from .messages import need_and_capacity, needs
from .ranking import NEAR_TIE
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


def family_policy(family: str, framework: str, policy: Policy) -> Policy:
    """The policy a family is searched with when the rules chose the other one: model-parallel prefers TP
    before PP (unless the MoE preference or sharded DP first applies) with Megatron's own defaults on a
    Megatron framework; zero-dp tries every ZeRO stage the rules' bound leaves."""
    if family == "model-parallel":
        return (megatron_policy(policy) if framework.startswith("megatron") else policy)._replace(
            tie_order=policy.tie_order if policy.tie_order in ("ep_over_tp", "dp_before_tp") else "tp_before_pp")
    return policy._replace(zero_stages=bounded((1, 2, 3), policy.decisions))


def beyond_rule_stages(job: Job, result: PlanResult, family: Family) -> tuple[PlanResult, Outcome | None]:
    """Nothing fits with the ZeRO stages the rules chose for the zero-dp family (e.g. ZeRO-1/2 where the model
    states fit one GPU but its activations do not) nor with model parallelism: the stages beyond them that
    the rules' bound leaves, with offload. ZeRO-3 shards the weights and can offload them to the host, the
    one way left on a single GPU (DeepSpeed runtime/zero/offload_config.py: parameter offload needs stage
    3). Returns the plan so far and that search's outcome (None: the rules allowed every stage already)."""
    chose = family.policy.zero_stages
    # only the stages that shard more than the rules' choice can hold what it could not
    extra = tuple(s for s in bounded((1, 2, 3), job.decisions) if chose and s > max(chose))
    if not extra:
        return result, None
    rule = job.decisions.zero_stages[1] if job.decisions.zero_stages else None
    tried = ", ".join(f"ZeRO-{s}" for s in extra)
    result = result.noted(PlanEvent("note", f"no layout fits with ZeRO stages {', '.join(map(str, sorted(chose)))} "
                                            f"(the rules' choice) or with model parallelism: trying {tried}, with "
                                            "offload", "zero-dp", rule_id=rule))
    wider = tuple(sorted(set(chose) | set(extra)))
    outcome = search_family(job, family._replace(policy=family.policy._replace(zero_stages=wider), allow_offload=True),
                            result.logged)
    result = absorb(result, outcome)
    if outcome.chosen is not None:
        result = replace(result, framework=family.framework)
    return result, outcome


class Narrowed(NamedTuple):
    """What narrow_framework found: the plan so far, the search's outcome (None: none found) and the
    family it searched."""
    result: PlanResult
    outcome: Outcome | None = None
    family: str | None = None


def compare_other(job: Job, result: PlanResult, strategy: str) -> PlanResult:
    """Evaluate the family the rules did not choose. A rule's zero-dp strategy is a preference for
    the simpler family (on a few nodes, start with ZeRO rather than TP/PP; the ranking goes by step
    time, then simplicity), so it holds among estimates that cannot be told apart: when the
    model-parallel family's best is faster by more than NEAR_TIE, the cost model wins and the choice
    moves to it, saying so (move_to). The other way round the rules stand: a model-parallel strategy
    comes from the model outgrowing a node, where ZeRO-3's per-layer gathers over the whole cluster
    are modelled optimistically (bucketed calls, no per-module latency). Otherwise the other family's
    best joins the alternatives with the rule that preferred the chosen family."""
    decisions, policy = job.decisions, job.policy
    family = "model-parallel" if strategy == "zero-dp" else "zero-dp"
    framework = family_framework(family, result.framework, decisions)
    refused = family_refused(family, framework, decisions)
    if refused:
        return result.noted(PlanEvent("note", refused, family, rule_id=refusing_rule(decisions, framework)))
    other = Family(family, framework, family_policy(family, framework, policy), max_alternatives=0)
    side = search_family(job, other)
    result = replace(result, examined=result.examined + side.examined,
                     ranking=merge_rankings(result.ranking, side.ranking or []))
    if side.chosen is None:
        return result
    layout, est = side.pick
    if layout == result.layout:
        # the rules' family searched this layout too (e.g. Megatron-FSDP at tp = pp = 1)
        return with_kinds(result.noted(PlanEvent(
            "note", f"family {family} ({framework}): its best layout is the choice itself", family)), side)
    if strategy == "zero-dp" and est.step_time * (1 + NEAR_TIE) < result.estimate.step_time:
        return move_to(job, result, other._replace(max_alternatives=MAX_ALTERNATIVES), side)
    return with_kinds(listed_with_reason(result, side, strategy, decisions), side)


def narrow_framework(job: Job, result: PlanResult, strategy: str) -> Narrowed:
    """Layouts fit, but the audit refused every one on the framework the rules chose (result.blocked_by),
    and no stated training stack fixed the framework (no allow_frameworks): one framework's limit narrows
    the framework, it does not empty the search. The family is searched again on each other framework
    that runs it (FAMILY_FRAMEWORKS, FAMILY_FALLBACKS), then the other family likewise, every layout
    screened by the same audit; the trace names the rule and the framework set aside. A stated stack
    keeps its infeasible answer: its own limit is the user's fact."""
    if result.blocked_by is None or job.decisions.frameworks is not None:
        return Narrowed(result)
    rule_id, refused = result.blocked_by[0], result.framework
    first = "zero-dp" if strategy == "zero-dp" else "model-parallel"
    for family in (first, "model-parallel" if first == "zero-dp" else "zero-dp"):
        for framework in dict.fromkeys((FAMILY_FRAMEWORKS[family], *FAMILY_FALLBACKS[family])):
            if framework == refused:
                continue
            searched = job.policy if family == first else family_policy(family, framework, job.policy)
            side = search_family(job, Family(family, framework, searched))
            result = replace(result, examined=result.examined + side.examined)
            if side.chosen is None:
                continue
            note = PlanEvent("note", (
                f"every fitting {FRAMEWORK_NAMES[refused]} layout is refused by rule {rule_id}, a limit of "
                f"{FRAMEWORK_NAMES[refused]}, and training.framework is not stated: the framework narrows to "
                f"{FRAMEWORK_NAMES[framework]} (family {family})"), family, rule_id=rule_id)
            return Narrowed(replace(result, events=result.events + (note, *side.events), framework=framework,
                                    blocked_by=None, alternatives=side.alternatives,
                                    ranking=merge_rankings(result.ranking, side.ranking or [])), side, family)
    return Narrowed(result)


def move_to(job: Job, result: PlanResult, family: Family, side: Outcome) -> PlanResult:
    """The other family (`side`, its comparison search) is beyond NEAR_TIE faster: search it again, now
    with its alternatives, and make its best the choice, with the preferred family's best as an
    alternative. The note that says so carries the rule whose zero-dp strategy it sets aside."""
    rule_id = job.decisions.strategy[1] if job.decisions.strategy else None
    rule = rule_id or "the default strategy"
    strategy, ours = "zero-dp", result.estimate.step_time
    moved = search_family(replace(job, keep_ranking=False), family)
    layout, est = moved.pick
    note = PlanEvent("note", f"family {family.strategy} ({family.framework}) is estimated "
                             f"{1 - est.step_time / ours:.0%} faster than the best {strategy} layout "
                             f"({est.step_time:.2f} s vs {ours:.2f} s), beyond the {NEAR_TIE:.1%} the estimate "
                             f"cannot separate (its measured error): it overrides rule {rule}'s preference for "
                             f"{strategy}", rule_id=rule_id, kind="family_move")
    kept = set_aside(result, est.step_time, rule)
    ranking = result.ranking
    if job.keep_ranking:                 # the chosen family leads
        theirs = {id(layout) for layout, _ in side.ranking or []}
        ranking = merge_rankings(side.ranking or [], [c for c in result.ranking if id(c[0]) not in theirs])
    # (the moved-to search may list the layout set aside too: it is listed once, as the one set aside)
    return replace(result, layout=layout, estimate=est, framework=family.framework,
                   events=result.events + (note, *moved.events), ranking=ranking,
                   alternatives=tuple(a for a in moved.alternatives if a.layout != kept.layout) + (kept,))


def widen_to_megatron(job: Job, result: PlanResult, closest: Closest | None) -> tuple[PlanResult, Outcome | None]:
    """ZeRO alone (even with offload) cannot hold the model: widen to TP/PP, and say so. Returns the
    plan so far and the model-parallel search's outcome (None: the rules leave no framework for it)."""
    refused_by = have = want = None
    if result.blocked_by:
        refused_by = result.blocked_by[0]
        why = f"every fitting ZeRO layout is refused by rule {refused_by}"
    elif closest is not None:
        chose = job.policy.zero_stages
        which = f"with the rules' ZeRO stages ({', '.join(map(str, sorted(chose)))})" if chose else "with any ZeRO stage"
        why = f"no layout {which} fits, even with offload; closest {needs(closest)}"
        have, want = need_and_capacity(closest.sized)
    else:               # nothing was sized: no shape, or no micro-batch that divides the batch
        why = (f"no ZeRO layout is legal: global batch {job.training.global_batch_size} vs micro-batch x "
               f"data-parallel ranks on {job.cluster.gpus} GPUs (DeepSpeed's batch identity), within the rules' "
               f"limits")
    result = result.noted(PlanEvent("reject", f"family zero-dp: {why}", "zero-dp", rule_id=refused_by, have=have,
                                    want=want))
    decisions = job.decisions
    framework = family_framework("model-parallel", result.framework, decisions)
    refused = family_refused("model-parallel", framework, decisions)
    if refused:                          # the stated stack has no model parallelism to widen to
        return result.noted(PlanEvent("note", refused, "model-parallel",
                                      rule_id=refusing_rule(decisions, framework))), None
    strategy_rule = decisions.strategy[1] if decisions.strategy else None   # set aside here
    result = replace(result, blocked_by=None, framework=framework).noted(PlanEvent(
        "note", f"widening to model-parallel with {FRAMEWORK_NAMES[framework]} (TP inside the NVLink domain, "
                "then PP)", rule_id=strategy_rule))
    widened = megatron_policy(job.policy) if framework.startswith("megatron") else job.policy
    outcome = search_family(job, Family("model-parallel", framework, widened), result.logged)
    return absorb(result, outcome), outcome


def absorb(result: PlanResult, outcome: Outcome) -> PlanResult:
    """The plan with a search of its own chain (the rules' family, with offload, widened) added: its
    alternatives, events and memory rejections, what it sized, the audit rule that refused every layout
    it found, and its ranking when it made one."""
    return replace(result, alternatives=result.alternatives + outcome.alternatives,
                   events=result.events + outcome.events, examined=result.examined + outcome.examined,
                   ranking=result.ranking if outcome.ranking is None else outcome.ranking,
                   blocked_by=outcome.blocked_by or result.blocked_by, logged=result.logged | outcome.logged)


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

