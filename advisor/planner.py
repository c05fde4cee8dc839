"""Planner: search the legal layouts the rules allow, keep those that fit, rank them by the cost model.

1. Shapes. (tp, pp, cp, ep, etp, vpp) combinations that satisfy the frameworks' structural rules
   (Megatron M1/M2/M5/M6/M8/M9/M14/M15, DeepSpeed's ZeRO-with-pipeline limit) and the rules'
   decisions: the strategy (zero-dp keeps tp = pp = 1), limits (tp inside the NVLink domain), and the
   enabled features (CP only from 8K tokens).
2. Memory. For each shape, micro-batch size and ZeRO stage, the most memory-frugal option (full
   recompute) is estimated first; when even it does not fit, the shape (with its larger micro-batches
   and virtual stages) is pruned. Otherwise recompute levels are tried from none up and the first that
   fits is kept (more recompute never runs faster). Offload is tried only when nothing else fits, and
   only in the ZeRO data-parallel family. This runs coarse to fine: every shape first at plain 1F1B and
   its smallest micro-batch; virtual stages and larger micro-batches only for shapes within
   REFINE_WITHIN of the best coarse estimate (at least MIN_REFINED of them).
3. Rank. Every survivor gets a full estimate; the fastest step wins, except that candidates within
   `NEAR_TIE` of the fastest are ordered by `_tie_break` (no CP; with the rules' "tp_before_pp", more
   TP inside the NVLink domain and more memory headroom; then fewer parallel dimensions, smaller model
   parallelism, even pipeline split, no VPP, lower ZeRO stage, less recompute), because the estimate
   is not that precise. The audit's legality rules then have the last word on each pick.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .actions import Decisions
from .layout import Layout
from .specs import Cluster, Model, Training

__all__ = ["Alternative", "PlanResult", "plan", "NEAR_TIE"]

_RECOMPUTE = ("none", "selective", "full")
_OFFLOAD = ("none", "optimizer", "optimizer+params")
# Estimates this close are treated as ties: the time model's mean |error| on measured runs is ~6%,
# single runs up to ~25% (benchmarks/calibrate_throughput.py). 8% maximised agreement with published
# layouts in benchmarks/published_planner.py among 3/8/15% (the tie-break carries the preference).
NEAR_TIE = 0.08
MAX_ALTERNATIVES = 4
MAX_REJECT_EVENTS = 10          # rejections written to the trace one by one; the rest are counted
MBS_OPTIONS = (1, 2, 4)         # micro-batch sizes searched when the caller gives none
MAX_VPP_OPTIONS = 3             # virtual-stage counts tried per pipeline shape
REFINE_WITHIN = 1.30            # shapes within 30% of the best coarse estimate get VPP / micro-batch variants
MIN_REFINED = 6                 # ... and at least this many of the best shapes
# Layouts that fill more than this share of GPU memory rank after every layout with room left: the
# memory estimate is within ~4% of Korthikanti et al.'s measurements, so above 95% a "fit" may not be
# one (NVIDIA/Megatron-LM#525: an estimate that fit 23.3 of 32 GB went out of memory); published runs
# often sit at 90-95% by our estimate and ran. The audit warns at the same threshold (advice.memory-tight).
MAX_MEMORY_UTILIZATION = 0.95
# Among near-tied layouts, one using at most this share of GPU memory goes before one using more.
COMFORTABLE_MEMORY = 0.80


@dataclass(frozen=True)
class Alternative:
    layout: Layout
    estimate: object
    reason: str


@dataclass
class PlanResult:
    layout: Layout | None
    estimate: object | None
    framework: str | None
    alternatives: list[Alternative] = field(default_factory=list)
    events: list[tuple[str, str, str | None]] = field(default_factory=list)   # (op, message, candidate id)
    examined: int = 0
    ranking: list[tuple[Layout, object]] = field(default_factory=list)
    """Every layout that fit, best first (before the audit's check), for benchmarks and tools."""


@dataclass(frozen=True)
class _Shape:
    tp: int
    pp: int
    cp: int
    ep: int
    etp: int
    vpp: int
    dp: int

    @property
    def dims(self) -> int:
        return sum(d > 1 for d in (self.tp, self.pp, self.cp, self.ep))


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _even_or_expressible(layers: int, pp: int) -> bool:
    """Megatron splits evenly, or with --decoder-first/last-pipeline-num-layers when the middle stages
    take one layer more than the first and last (remainder == pp - 2): the split the cost model uses."""
    base, extra = divmod(layers, pp)
    return base >= 1 and (extra == 0 or (pp > 2 and extra == pp - 2))


def _vpp_options(layers: int, pp: int) -> list[int]:
    """1, plus a few virtual-stage counts that split each rank's layers evenly (Megatron M8/M9).
    Megatron's MoE guide recommends 'a middle value' of the divisors of L/PP."""
    if pp < 2 or layers % pp:
        return [1]
    per_stage = layers // pp
    divs = [d for d in _divisors(per_stage) if d > 1]
    if not divs:
        return [1]
    picks = sorted({divs[0], divs[len(divs) // 2], divs[-1]})
    return [1] + picks[: MAX_VPP_OPTIONS - 1]


def _shapes(cluster: Cluster, model: Model, training: Training, decisions: Decisions, strategy: str,
            framework: str) -> list[_Shape]:
    world, seq = cluster.gpus, training.seq_len
    domain = min(cluster.nvlink_domain, world)
    tp_cap = min(decisions.upper("tp") or domain, domain)
    megatron = framework.startswith("megatron")
    if strategy == "zero-dp":
        tps, pps, eps = [1], [1], [1]
    else:
        # Megatron M5 (heads % tp) and M6 (query groups vs tp).
        tps = [t for t in _divisors(world) if t <= tp_cap and model.heads % t == 0
               and (model.kv_heads % t == 0 or t % model.kv_heads == 0)]
        # M8: even split, or Megatron's first/last-stage form; DeepSpeed's PipelineModule balances any split.
        pps = [p for p in _divisors(world) if p <= model.layers and
               (model.layers % p == 0 or (megatron and _even_or_expressible(model.layers, p))
                or framework == "megatron+deepspeed")]
        # M14: experts % ep; EP is folded into the dp*cp*tp ranks (M2 checked below).
        eps = _divisors(model.experts) if model.is_moe else [1]
    # M15: seq % (2 * cp); CP only where a rule enabled it (long sequences).
    cps = [1]
    if "cp" in decisions.features:
        cps = [c for c in _divisors(world) if c & (c - 1) == 0 and seq % (2 * c) == 0 and seq // c >= 1024]
    def within(dim: str, value: int) -> bool:      # the rules' `limit` actions, every dimension
        upper = decisions.upper(dim)
        return decisions.lower(dim) <= value and (upper is None or value <= upper)

    out = []
    for tp in (t for t in tps if within("tp", t)):
        for pp in (p for p in pps if within("pp", p)):
            for cp in (c for c in cps if within("cp", c)):
                mp = tp * pp * cp
                if world % mp:                                  # M1
                    continue
                dp = world // mp
                if not within("dp", dp):
                    continue
                for ep in (e for e in eps if within("ep", e)):
                    etp = 1 if (model.is_moe and tp > 1) else tp   # MoE zoo: expert TP 1 with EP
                    if ep > 1 and (world % (etp * ep * pp) or ep > dp * cp * tp):   # M2; EP folds into dp*cp*tp
                        continue
                    for vpp in _vpp_options(model.layers, pp) if megatron else [1]:
                        out.append(_Shape(tp, pp, cp, ep, etp, vpp, dp))
    return out


def _stages(decisions: Decisions, framework: str, pp: int) -> list[int]:
    stages = sorted(decisions.zero_stages[0]) if decisions.zero_stages else ([1] if framework.startswith("megatron") else [1, 2, 3])
    if framework in ("deepspeed", "megatron+deepspeed") and pp > 1:
        stages = [z for z in stages if z <= 1] or [1]       # DeepSpeed pipe/engine.py: ZeRO-2/3 not with PP
    return stages


def _tie_break(layout: Layout, est, model: Model, tp_before_pp: bool) -> tuple:
    """Order of candidates the estimate cannot separate (within NEAR_TIE of each other).

    No CP first (the seed keeps CP for long sequences; its KV exchange crosses nodes). With the rules'
    "tp_before_pp" (seed row 2 "TP first, then PP"; Narayanan takeaway #1: TP up to the server, then
    PP): more TP inside the NVLink domain (fastest links, no bubble), then a layout that leaves
    COMFORTABLE_MEMORY of the GPU free over one that does not (robust to estimate error, the way
    expert-chosen layouts leave room), then simplicity (which puts fewer pipeline stages first)."""
    if tp_before_pp:
        crowded = est.memory.total > COMFORTABLE_MEMORY * est.memory.capacity
        return (layout.cp, -layout.tp, crowded, *_plain_simplicity(layout, model))
    return (layout.cp, *_plain_simplicity(layout, model))


def _plain_simplicity(layout: Layout, model: Model) -> tuple:
    return (sum(d > 1 for d in (layout.tp, layout.pp, layout.cp, layout.ep)), layout.tp * layout.pp * layout.cp,
            model.layers % layout.pp != 0, layout.vpp, _OFFLOAD.index(layout.offload), layout.zero_stage,
            _RECOMPUTE.index(layout.recompute), layout.pp, -layout.micro_batch_size)


def _memory_share(est) -> float:
    return est.memory.total / est.memory.capacity


def _why_lost(alt, chosen, model: Model) -> str:
    a, c = alt[0], chosen[0]
    ta, tc = alt[1].step_time, chosen[1].step_time
    ua, uc = _memory_share(alt[1]), _memory_share(chosen[1])
    if ua > MAX_MEMORY_UTILIZATION >= uc:
        return (f"uses {ua:.0%} of GPU memory (> {MAX_MEMORY_UTILIZATION:.0%}): est. step {ta:.2f} s vs "
                f"{tc:.2f} s ({ta / tc - 1:+.0%}), too little headroom")
    if ta > tc * (1 + NEAR_TIE):
        return f"slower: est. step {ta:.2f} s vs {tc:.2f} s ({ta / tc - 1:+.0%})"
    diffs = []
    for name in ("tp", "pp", "cp", "ep", "vpp"):
        if getattr(a, name) != getattr(c, name):
            diffs.append(f"{name} {getattr(a, name)} vs {getattr(c, name)}")
    for name in ("zero_stage", "recompute", "offload", "micro_batch_size"):
        if getattr(a, name) != getattr(c, name):
            diffs.append(f"{name} {getattr(a, name)} vs {getattr(c, name)}")
    return (f"about as fast (est. step {ta:.2f} s vs {tc:.2f} s, within {NEAR_TIE:.0%}); the tie-break prefers "
            f"the choice: " + ", ".join(diffs))


def _search(cluster, model, training, decisions, strategy, framework, result: PlanResult,
            memory_fn, estimate_fn, check_fn, allow_offload: bool):
    gbs = training.global_batch_size
    mbs_options = (training.micro_batch_size,) if training.micro_batch_size else MBS_OPTIONS
    recomputes = ("none", "full") if framework == "deepspeed" else _RECOMPUTE   # selective is Megatron's
    offloads = _OFFLOAD if allow_offload else ("none",)
    found: list[tuple[Layout, bool, object]] = []        # (layout, above MAX_MEMORY_UTILIZATION, estimate)
    closest = None
    logged: set[tuple] = set()

    def explore(shape: _Shape, mbs: int) -> bool:
        """Add the fitting (ZeRO, recompute, offload) options of one shape and micro-batch; False if none fits."""
        nonlocal closest
        m = gbs // (mbs * shape.dp)

        def layout_for(zero, recompute, offload):
            # Valid by construction (every degree >= 1, literals from the closed sets above): built
            # without re-validation, as this is the innermost loop of the search.
            return Layout.model_construct(
                framework=framework, tp=shape.tp, pp=shape.pp, dp=shape.dp, cp=shape.cp, ep=shape.ep,
                etp=shape.etp if shape.ep > 1 else None, vpp=shape.vpp, overlap_p2p_comm=True,
                sp=shape.tp > 1 and "sp" in decisions.features, zero_stage=zero, micro_batch_size=mbs,
                num_microbatches=m, recompute=recompute, offload=offload, offload_device="cpu")

        shape_fits = False
        for zero in _stages(decisions, framework, shape.pp):
            for offload in offloads:
                # DeepSpeed offload_config.py: parameter offload needs ZeRO-3; optimizer offload a stage >= 1.
                if (offload == "optimizer+params" and zero != 3) or (offload == "optimizer" and zero < 1):
                    continue
                # Memory only shrinks with more recompute: test the most frugal level first, and skip
                # the others when even it does not fit.
                frugal = layout_for(zero, recomputes[-1], offload)
                frugal_mem = mem = memory_fn(cluster, model, frugal, training)
                result.examined += 1
                if not (mem.fits and mem.host_fits):
                    if closest is None or mem.total < closest[1].total:
                        closest = (frugal, mem)
                    key = (shape.tp, shape.pp, shape.cp, shape.ep, zero, offload)
                    if mbs == mbs_options[0] and shape.vpp == 1 and key not in logged \
                            and len(logged) < MAX_REJECT_EVENTS:
                        logged.add(key)
                        result.events.append((
                            "reject", f"memory: {mem.total / 2**30:.1f} GiB per GPU > {mem.capacity / 2**30:.1f}"
                                      f" GiB even with recompute {recomputes[-1]}", frugal.id))
                    continue
                for recompute in recomputes:
                    if recompute == recomputes[-1]:
                        layout, mem = frugal, frugal_mem
                    else:
                        layout = layout_for(zero, recompute, offload)
                        mem = memory_fn(cluster, model, layout, training)
                        result.examined += 1
                    if mem.fits and mem.host_fits:
                        tight = mem.total > MAX_MEMORY_UTILIZATION * mem.capacity
                        found.append((layout, tight, estimate_fn(cluster, model, layout, training)))
                        shape_fits = True
                        if not tight:
                            break                                # more recompute is never faster
                if shape_fits and offload == "none":
                    break                                        # offload only when nothing fits
        return shape_fits

    def base(shape) -> tuple:
        return (shape.tp, shape.pp, shape.cp, shape.ep, shape.dp)

    # Coarse pass: every shape at plain 1F1B and its smallest legal micro-batch.
    shapes = _shapes(cluster, model, training, decisions, strategy, framework)
    first_mbs: dict[tuple, int] = {}
    for shape in shapes:
        if shape.vpp > 1:
            continue
        for mbs in mbs_options:
            if gbs % (mbs * shape.dp) == 0:                      # M11
                if explore(shape, mbs):
                    first_mbs[base(shape)] = mbs
                break
    # Fine pass: virtual stages and larger micro-batches, only for shapes that could win. VPP divides
    # the bubble by v and a larger micro-batch mostly buys GEMM efficiency, so a shape more than
    # REFINE_WITHIN behind the best coarse estimate cannot catch up; the best few are refined anyway.
    best_by_base: dict[tuple, float] = {}
    for layout, _tight, est in found:
        key = (layout.tp, layout.pp, layout.cp, layout.ep, layout.dp)
        best_by_base[key] = min(best_by_base.get(key, float("inf")), est.step_time)
    if best_by_base:
        ordered_bases = sorted(best_by_base, key=best_by_base.get)
        best = best_by_base[ordered_bases[0]]
        refine = {b for i, b in enumerate(ordered_bases) if i < MIN_REFINED or best_by_base[b] <= best * REFINE_WITHIN}
        for shape in shapes:
            if base(shape) not in refine:
                continue
            for mbs in mbs_options:
                if gbs % (mbs * shape.dp):                       # M11
                    continue
                if shape.vpp == 1 and mbs == first_mbs[base(shape)]:
                    continue                                     # done in the coarse pass
                m = gbs // (mbs * shape.dp)
                if shape.vpp > 1 and (m < shape.pp or m % shape.pp):   # M10
                    continue
                if not explore(shape, mbs) and mbs > first_mbs[base(shape)]:
                    break                                        # a larger micro-batch will not fit either
    if not found:
        return None, closest
    tp_first = "tp_before_pp" in decisions.features
    ordered = []
    for group in (False, True):          # layouts with memory headroom first, tight ones after
        scored = [(layout, est) for layout, tight, est in found if tight is group]
        if not scored:
            continue
        best_time = min(est.step_time for _, est in scored)
        ordered += sorted((c for c in scored if c[1].step_time <= best_time * (1 + NEAR_TIE)),
                          key=lambda c: (_tie_break(c[0], c[1], model, tp_first), c[1].step_time))
        ordered += sorted((c for c in scored if c[1].step_time > best_time * (1 + NEAR_TIE)),
                          key=lambda c: (c[1].step_time, _tie_break(c[0], c[1], model, tp_first)))
    n_tight = sum(tight for _, tight, _ in found)
    result.ranking = ordered
    chosen = None
    shapes_listed: set[tuple] = set()
    for layout, est in ordered:
        if chosen is not None and len(result.alternatives) >= MAX_ALTERNATIVES:
            break
        shape = (layout.tp, layout.pp, layout.cp, layout.ep, layout.zero_stage)
        if chosen is not None and shape in shapes_listed:
            continue
        errors = check_fn(layout, est)
        if errors:
            # The audit's legality rules have the last word: never return what they call an error.
            rule_id, message = errors[0]
            result.events.append(("reject", f"rule {rule_id}: {message}", layout.id))
            continue
        shapes_listed.add(shape)
        if chosen is None:
            chosen = (layout, est)
            ties = "no CP, more TP, memory headroom, then simplicity" if tp_first else "no CP, then simplicity"
            result.events.append(("note", f"{len(found)} layouts fit in memory ({n_tight} above "
                                          f"{MAX_MEMORY_UTILIZATION:.0%} of it, ranked last); ranked by estimated "
                                          f"step time; ties within {NEAR_TIE:.0%} go to {ties}", None))
            if est.memory.total > MAX_MEMORY_UTILIZATION * est.memory.capacity:
                result.events.append(("note", f"every fitting layout uses more than {MAX_MEMORY_UTILIZATION:.0%} "
                                              "of GPU memory: expect little room for fragmentation", None))
        else:
            result.alternatives.append(Alternative(layout, est, _why_lost((layout, est), chosen, model)))
    return chosen, closest


def _other_family(cluster, model, training, decisions: Decisions, strategy: str, result: PlanResult,
                  memory_fn, estimate_fn, check_fn) -> None:
    """Evaluate the family the rules did not choose, so users see what they would gain or lose.
    Its best layout joins the alternatives with the rule that preferred the chosen family."""
    import copy

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
    chosen, _ = _search(cluster, model, training, other, family, framework, side, memory_fn, estimate_fn,
                        check_fn, allow_offload=False)
    result.examined += side.examined
    seen = {(l.tp, l.pp, l.cp, l.ep) for l, _ in result.ranking}
    result.ranking += [c for c in side.ranking if (c[0].tp, c[0].pp, c[0].cp, c[0].ep) not in seen]
    if chosen is None or result.estimate is None:
        return
    layout, est = chosen
    rule = decisions.strategy[1] if decisions.strategy else "the default strategy"
    delta = est.step_time / result.estimate.step_time - 1
    result.alternatives.append(Alternative(layout, est, (
        f"family {family} ({framework}): est. step {est.step_time:.2f} s ({delta:+.0%}); "
        f"rule {rule} prefers {strategy} for this cluster and model")))


def plan(cluster: Cluster, model: Model, training: Training, decisions: Decisions, estimate_fn, memory_fn=None,
         check_fn=lambda layout, est: []) -> PlanResult:
    """Pick the fastest layout (by the cost model) that the rules allow, that fits, and that has no
    error from `check_fn` (the audit's legality rules: a list of (rule id, message))."""
    memory_fn = memory_fn or (lambda c, m, l, t: estimate_fn(c, m, l, t).memory)
    framework = decisions.framework[0] if decisions.framework else "megatron"
    strategy = decisions.strategy[0] if decisions.strategy else "model-parallel"
    result = PlanResult(None, None, framework)
    if not decisions.strategy:
        result.events.append(("note", "no rule chose a strategy: model-parallel", None))
    args = (cluster, model, training)
    chosen, closest = _search(*args, decisions, strategy, framework, result, memory_fn, estimate_fn, check_fn,
                              allow_offload=False)
    if chosen is None and strategy == "zero-dp":
        chosen, closest = _search(*args, decisions, strategy, framework, result, memory_fn, estimate_fn, check_fn,
                                  allow_offload=True)
        if chosen is not None:
            result.events.append(("note", "nothing fits on the GPUs alone: ZeRO offload to host memory", None))
    if chosen is None and strategy == "zero-dp":
        # ZeRO alone (even with offload) cannot hold the model: widen to TP/PP, and say so.
        best = f"; closest {closest[0].id} needs {closest[1].total / 2**30:.1f} GiB" if closest else ""
        result.events.append(("reject", f"family zero-dp: no ZeRO stage or offload fits{best}", "zero-dp"))
        framework = "megatron"
        decisions.zero_stages = ((1,), "planner")
        decisions.features.setdefault("sp", "planner")
        result.framework = framework
        result.events.append(("note", "widening to model-parallel with Megatron-LM (TP inside the NVLink domain, then PP)", None))
        chosen, closest = _search(*args, decisions, "model-parallel", framework, result, memory_fn, estimate_fn,
                                  check_fn, allow_offload=False)
    if chosen is None:
        if closest is not None:
            result.events.append(("reject", f"no layout fits; closest {closest[0].id} needs "
                                            f"{closest[1].total / 2**30:.1f} GiB of {closest[1].capacity / 2**30:.1f} GiB",
                                  closest[0].id))
        else:
            result.events.append(("reject", "no layout satisfies the divisibility constraints "
                                            "(heads, layers, global batch vs dp)", None))
        return result
    result.layout, result.estimate = chosen
    _other_family(cluster, model, training, decisions, strategy, result, memory_fn, estimate_fn, check_fn)
    return result
