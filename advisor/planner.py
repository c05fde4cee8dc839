"""Planner: search the legal layouts the rules allow, keep those that fit, rank them by the cost model.

1. Shapes. (tp, pp, cp, ep, etp, vpp) combinations that satisfy the frameworks' structural rules
   (Megatron M1/M2/M5/M6/M8/M9/M14/M15, DeepSpeed's ZeRO-with-pipeline limit) and the rules'
   decisions: the strategy (zero-dp keeps tp = pp = 1), limits (tp inside the NVLink domain), and the
   enabled features (CP only from 8K tokens).
2. Memory. For each shape, micro-batch size and ZeRO stage, the most memory-frugal option (full
   recompute) is sized first; when even it does not fit, the shape (with its larger micro-batches
   and virtual stages) is pruned. Otherwise the least recompute that fits is found by bisection over
   the levels and kept (more recompute never runs faster). Offload is tried only when nothing else fits, and
   only in the ZeRO data-parallel family. This runs coarse to fine: every shape first at plain 1F1B and
   its smallest micro-batch, which also gives a floor for each of its other (micro-batch, virtual
   stages) variants (estimate.time.variant_floors); a variant is sized only when its floor is within
   the near-tie band of the best layout found so far, so the choice is the one trying every variant
   would make (tests/test_planner_refine.py), at a fraction of the cost. A variant whose sizing shows
   it needs more recompute than its floor assumed gets the floor of that level (estimate.floor_of)
   and waits until a threshold reaches it; a larger micro-batch of the same shape and vpp starts at
   that level. The alternatives are then the ones trying every variant would list: each variant
   that could come before a listed layout is tried, until the list stands.
3. Rank. Every survivor gets a step time; the fastest step wins, except that candidates within
   `NEAR_TIE` of the fastest are ordered by `_tie_break` (with the rules' "ep_over_tp" for MoE, less
   TP; with "tp_before_pp", more TP inside the NVLink domain; then more memory headroom; less CP; then
   fewer parallel dimensions, an even pipeline split, smaller model parallelism, no VPP, lower ZeRO stage, less
   recompute), because the estimate is not that precise. The audit's legality rules then have the last word on each pick.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from operator import itemgetter
from typing import NamedTuple

from ._unchecked import build_unchecked
from .costmodel import Assumptions
from .costmodel.sizing import estimate_of, floor_of, floor_of_layout, resize, size, step_and_floors, step_time_of
from .inputs.layout import Layout
from .inputs.pipeline import megatron_split
from .inputs.specs import Cluster, Model, Training
from .rulebook.actions import Decisions

__all__ = ["Alternative", "PlanResult", "plan", "NEAR_TIE"]

_RECOMPUTE = ("none", "selective", "full")
_OFFLOAD = ("none", "optimizer", "optimizer+params")
# each one's position in its tuple, for _tie_key (a subscript instead of a call to .index)
_RECOMPUTE_RANK = {r: i for i, r in enumerate(_RECOMPUTE)}
_OFFLOAD_RANK = {o: i for i, o in enumerate(_OFFLOAD)}
# Estimates this close are treated as ties: the time model's mean |error| on measured runs is ~6%,
# single runs up to ~25% (benchmarks/calibrate_throughput.py). 8% maximised agreement with published
# layouts in benchmarks/published_planner.py among 3/8/15% (the tie-break carries the preference).
NEAR_TIE = 0.08
MAX_ALTERNATIVES = 4
MAX_REJECT_EVENTS = 10          # rejections written to the trace one by one; the rest are counted
# Micro-batch sizes searched when the caller gives none: the published dev set's stated micro-batches
# are 1 (48 records), 2 (11) and 4 (10); 8 and more appear three times, all small-model fine-tunes.
MBS_OPTIONS = (1, 2, 4)
# Virtual-stage counts tried per pipeline shape: 1 and the two smallest of the smallest, middle and
# largest usable divisor (_vpp_options); the middle one is what Megatron's MoE guide recommends.
MAX_VPP_OPTIONS = 3
# Layouts that fill more than this share of GPU memory rank after every layout with room left: the
# memory estimate is within ~4% of Korthikanti et al.'s measurements, so above 95% a "fit" may not be
# one (NVIDIA/Megatron-LM#525: an estimate that fit 23.3 of 32 GB went out of memory); published runs
# often sit at 90-95% by our estimate and ran. The audit warns at the same threshold (advice.memory-tight).
MAX_MEMORY_UTILIZATION = 0.95
# Among near-tied layouts, one using at most this share of GPU memory goes before one using more
# (headroom absorbs estimate error and fragmentation). No source gives a figure: scanned on the
# published dev set (benchmarks/published_planner.py, both passes), 0.80 keeps the most published
# shapes in the top five; 0.85 trades two of them for two (TP, PP) matches; 0.75 and 1.0 lose on both.
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
    blocked_by: tuple[str, str] | None = None
    """(rule id, message) when layouts fit but the audit's legality rules refused every one."""
    logged: set[tuple] = field(default_factory=set)
    """(framework, tp, pp, cp, ep, ZeRO stage, offload[, "cpu" when moved to NVMe]) already rejected for
    memory in the trace: a second search (with offload allowed) sizes the same options again and must
    not repeat them."""


class _Shape(NamedTuple):   # a NamedTuple: several times cheaper to build than a frozen dataclass
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
    """Megatron splits evenly, or with --decoder-first/last-pipeline-num-layers around even middle
    stages (estimate.context.megatron_split, the split the cost model uses)."""
    return pp <= layers and megatron_split(layers, pp) is not None


def _vpp_options(layers: int, pp: int) -> list[int]:
    """1, plus a few virtual-stage counts that split the (middle) ranks' layers evenly (Megatron M8/M9).
    Megatron's MoE guide recommends 'a middle value' of the divisors of L/PP. With lighter first and
    last stages (megatron_split) the count is capped at their layers, so that every chunk holds one:
    context.virtual_stage_layers, which the Megatron export writes as --pipeline-model-parallel-layout
    (126 layers on PP 16, Llama 3's split 7 | 8 x 14 | 7, interleave as 3 | 4 x 30 | 3 with vpp 2)."""
    split = megatron_split(layers, pp) if pp >= 2 else None
    if split is None:
        return [1]
    divs = [d for d in _divisors(max(split)) if 1 < d <= min(split)]
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
        # TP groups are contiguous ranks (rank order tp-cp-ep-dp-pp), so t must divide the NVLink
        # domain for every group to stay inside one (tp 6 on 8-GPU servers would straddle two).
        tps = [t for t in _divisors(world) if t <= tp_cap and domain % t == 0 and model.heads % t == 0
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

    tps, pps, cps, eps = ([v for v in values if within(dim, v)]
                          for dim, values in (("tp", tps), ("pp", pps), ("cp", cps), ("ep", eps)))
    # Virtual stages are Megatron-LM's interleaved 1F1B. Under Megatron-DeepSpeed a pipeline runs on
    # DeepSpeed's PipelineEngine (microsoft/Megatron-DeepSpeed megatron/arguments.py: pp > 1 requires
    # ds_pipeline_enabled, i.e. not --no-pipeline-parallel; training.py train_step calls
    # PipelineEngine.train_batch), whose TrainSchedule is plain 1F1B over one model chunk per stage
    # (deepspeedai/DeepSpeed deepspeed/runtime/pipe/schedule.py): no virtual stages there.
    vpps = {pp: _vpp_options(model.layers, pp) if framework == "megatron" else [1] for pp in pps}
    moe = model.is_moe
    out = []
    for tp in tps:
        for pp in pps:
            for cp in cps:
                mp = tp * pp * cp
                if world % mp:                                  # M1
                    continue
                dp = world // mp
                if not within("dp", dp):
                    continue
                for ep in eps:
                    etp = 1 if (moe and tp > 1) else tp   # MoE zoo: expert TP 1 with EP
                    if ep > 1 and (world % (etp * ep * pp) or ep > dp * cp * tp):   # M2; EP folds into dp*cp*tp
                        continue
                    for vpp in vpps[pp]:
                        out.append(_Shape(tp, pp, cp, ep, etp, vpp, dp))
    return out


def base_of(shape) -> tuple:
    """A _Shape's or a Layout's degrees (tp, pp, cp, ep, dp): the shape its variants share."""
    return (shape.tp, shape.pp, shape.cp, shape.ep, shape.dp)


def _stages(decisions: Decisions, framework: str, pp: int) -> list[int]:
    stages = sorted(decisions.zero_stages[0]) if decisions.zero_stages else ([1] if framework.startswith("megatron") else [1, 2, 3])
    if framework in ("deepspeed", "megatron+deepspeed") and pp > 1:
        stages = [z for z in stages if z <= 1] or [1]       # DeepSpeed pipe/engine.py: ZeRO-2/3 not with PP
    return stages


class _Candidate:
    """A layout that fits, with its sizing and step time; its full Estimate is built only when it
    reaches the output (the choice, an alternative, the audit's screening, or the full ranking)."""

    __slots__ = ("layout", "sized", "step_time", "floor", "tight", "_estimate", "tie_key")

    def __init__(self, layout: Layout, sized, step_time: float, floor: dict | None, tight: bool):
        self.layout, self.sized, self.step_time, self.floor, self.tight = layout, sized, step_time, floor, tight
        self._estimate = None
        self.tie_key = None     # _tie_break's, once computed (a candidate lives in one search, one _Ties)

    @property
    def memory_share(self) -> float:
        return self.sized.total / self.sized.capacity

    @property
    def estimate(self):
        if self._estimate is None:
            self._estimate = estimate_of(self.sized)    # the same numbers; races build equal objects
        return self._estimate


class _Ties(NamedTuple):
    order: str        # the rules' preference: "ep_over_tp", "tp_before_pp" or "simplicity"
    layers: int
    domain: int       # GPUs per NVLink domain (in this job)


def _tie_break(cand: _Candidate, ties: _Ties) -> tuple:
    """Order of candidates the estimate cannot separate (within NEAR_TIE of each other), by the
    rules' preference `ties.order`:

    "ep_over_tp" (MoE; Megatron-LM MoE README best practices: minimise model parallelism, prefer EP
    over TP for the experts (Mixtral EP8 x TP1 beats EP4 x TP2), keep the expert group inside the NVLink
    domain): less TP first, then some EP over none, then EP x expert TP inside the NVLink domain, then a
    layout that leaves COMFORTABLE_MEMORY of the GPU free, then simplicity.
    "tp_before_pp" (seed row 2 "TP first, then PP"; Narayanan takeaway #1: TP up to the server, then
    PP): more TP inside the NVLink domain (fastest links, no bubble), then memory headroom (robust to
    estimate error, the way expert-chosen layouts leave room), then simplicity.
    Then less CP, then simplicity: fewer parallel dimensions, an even pipeline split (the framework's
    default, no per-stage layer flags), smaller model parallelism, no VPP, less offload, lower ZeRO
    stage, less recompute, fewer stages, larger micro-batch.
    CP comes after TP and headroom, not first: the rules enable it only for long sequences, where
    Megatron-LM's guide recommends it (its reference table: TP4 PP4 CP2 for a 70B model at 8K on 64
    GPUs), but among equals the smaller ring (its KV exchange crosses nodes) is the safer bet."""
    key = cand.tie_key
    if key is None:
        lay = cand.layout
        key = cand.tie_key = _tie_key(lay.tp, lay.pp, lay.cp, lay.ep, lay.vpp, lay.offload, lay.zero_stage,
                                      lay.recompute, lay.micro_batch_size, cand.memory_share > COMFORTABLE_MEMORY,
                                      ties)
    return key


def _tie_key(tp, pp, cp, ep, vpp, offload, zero, recompute, mbs, crowded, ties: _Ties) -> tuple:
    simplicity = ((tp > 1) + (pp > 1) + (cp > 1) + (ep > 1), ties.layers % pp != 0, tp * pp * cp, vpp,
                  _OFFLOAD_RANK[offload], zero, _RECOMPUTE_RANK[recompute], pp, -mbs)
    if ties.order == "ep_over_tp":
        # the all-to-all group is ep x etp consecutive ranks; the planner's MoE shapes use etp 1 (_shapes)
        return (tp, ep == 1, ep > ties.domain, crowded, cp, *simplicity)
    if ties.order == "tp_before_pp":
        return (-tp, crowded, cp, *simplicity)
    return (cp, *simplicity)


def _tie_order(decisions: Decisions) -> str:
    """Which preference orders near-ties: the MoE one first, then TP-before-PP, else simplicity."""
    for feature in ("ep_over_tp", "tp_before_pp"):
        if feature in decisions.features:
            return feature
    return "simplicity"


_TIE_WORDS = {"ep_over_tp": "less TP, EP x expert TP inside the NVLink domain, memory headroom, less CP, then simplicity",
              "tp_before_pp": "more TP, memory headroom, less CP, then simplicity",
              "simplicity": "less CP, then simplicity"}


# What each position of _tie_key prefers, per tie order, as the explanation names it: (words, the
# layout fields it reads, shown as "alternative vs choice"). "memory" reads the memory share.
_SIMPLICITY_WORDS = (("fewer parallel dimensions", ("tp", "pp", "cp", "ep")), ("an even pipeline split", ("pp",)),
                     ("less model parallelism", ("tp", "pp", "cp")), ("fewer virtual stages", ("vpp",)),
                     ("less offload", ("offload",)), ("a lower ZeRO stage", ("zero_stage",)),
                     ("less recompute", ("recompute",)), ("fewer pipeline stages", ("pp",)),
                     ("a larger micro-batch", ("micro_batch_size",)))
_KEY_WORDS = {
    "ep_over_tp": (("less TP", ("tp",)), ("EP over none", ("ep",)), ("the expert group inside the NVLink domain", ("ep",)),
                   ("memory headroom", ("memory",)), ("less CP", ("cp",)), *_SIMPLICITY_WORDS),
    "tp_before_pp": (("more TP inside the NVLink domain", ("tp",)), ("memory headroom", ("memory",)), ("less CP", ("cp",)),
                     *_SIMPLICITY_WORDS),
    "simplicity": (("less CP", ("cp",)), *_SIMPLICITY_WORDS),
}


def _why_lost(alt: _Candidate, chosen: _Candidate, fastest: float, tie_order: str) -> str:
    """Why `alt` ranks after `chosen`; `fastest` is the best step time of chosen's group, which the
    near-tie band is measured from (the tie-break may have chosen a slightly slower layout). A near-tie
    names the first preference of the tie order that tells the two apart, then the other differences."""
    a, c = alt.layout, chosen.layout
    ta, tc = alt.step_time, chosen.step_time
    ua, uc = alt.memory_share, chosen.memory_share
    if ua > MAX_MEMORY_UTILIZATION >= uc:
        return (f"uses {ua:.0%} of GPU memory (> {MAX_MEMORY_UTILIZATION:.0%}): est. step {ta:.2f} s vs "
                f"{tc:.2f} s ({ta / tc - 1:+.0%}), too little headroom")
    if ta > fastest * (1 + NEAR_TIE):
        behind = "" if fastest >= tc else f"; more than {NEAR_TIE:.0%} behind the fastest, {fastest:.2f} s"
        return f"slower: est. step {ta:.2f} s vs {tc:.2f} s ({ta / tc - 1:+.0%}){behind}"

    def shown(name: str) -> str:
        if name == "memory":
            return f"memory {ua:.0%} vs {uc:.0%} of the GPU"
        return f"{name} {getattr(a, name)} vs {getattr(c, name)}"

    diffs = []
    if (ua > COMFORTABLE_MEMORY) != (uc > COMFORTABLE_MEMORY):
        diffs.append("memory")
    diffs += [n for n in ("tp", "pp", "cp", "ep", "vpp", "zero_stage", "recompute", "offload", "micro_batch_size")
              if getattr(a, n) != getattr(c, n)]
    words = _KEY_WORDS[tie_order]
    at = next((i for i, (x, y) in enumerate(zip(alt.tie_key or (), chosen.tie_key or ())) if x != y), None)
    head = f"about as fast (est. step {ta:.2f} s vs {tc:.2f} s, within {NEAR_TIE:.0%}); the tie-break prefers the choice"
    if at is None or at >= len(words):           # same preference: the faster of the two goes first
        return head + (" as faster; it differs in " + ", ".join(map(shown, diffs)) if diffs else " as faster")
    criterion, fields = words[at]
    decisive = [n for n in diffs if n in fields]
    rest = [n for n in diffs if n not in fields]
    text = f"{head} for {criterion}" + (f" ({', '.join(map(shown, decisive))})" if decisive else "")
    return text + (f"; it also differs in {', '.join(map(shown, rest))}" if rest else "")


def _ordered(found: list[_Candidate], ties: _Ties) -> list[_Candidate]:
    """Best first: layouts with memory headroom before tight ones; in each group the near-ties of its
    fastest by `_tie_break`, then the rest by step time."""
    ordered = []
    for group in (False, True):
        scored = [c for c in found if c.tight is group]
        if not scored:
            continue
        limit = min([c.step_time for c in scored]) * (1 + NEAR_TIE)
        # (c.tie_key: _tie_break's cached key, a non-empty tuple, saving the call once it is known)
        ordered += sorted([c for c in scored if c.step_time <= limit],
                          key=lambda c: (c.tie_key or _tie_break(c, ties), c.step_time))
        ordered += sorted([c for c in scored if c.step_time > limit],
                          key=lambda c: (c.step_time, c.tie_key or _tie_break(c, ties)))
    return ordered


def _search(cluster, model, training, decisions, strategy, framework, result: PlanResult, check_fn,
            allow_offload: bool, keep_ranking: bool, max_alternatives: int = MAX_ALTERNATIVES, assumptions=None):
    gbs = training.global_batch_size
    mbs_options = (training.micro_batch_size,) if training.micro_batch_size else MBS_OPTIONS
    recomputes = ("none", "full") if framework == "deepspeed" else _RECOMPUTE   # selective is Megatron's
    offloads = _OFFLOAD if allow_offload else ("none",)
    sp = "sp" in decisions.features
    found: list[_Candidate] = []
    closest = None
    logged = result.logged
    n_logged = [0]                           # memory rejections written by this search (capped)
    # the best step time in the group the choice is made in (layouts with headroom, else all)
    best, roomy_seen = [float("inf")], [False]
    level_hint: list[int | None] = [None]    # the recompute level the last explored layout needed
    last_fitted = [False]                    # whether the last explored (shape, ZeRO, offload) fitted at all
    # the ZeRO stages to try, by pp > 1 (all _stages reads of pp), worked out once per search
    zero_stages = {pipelined: _stages(decisions, framework, 2 if pipelined else 1) for pipelined in (False, True)}

    def timed(sized_at, hi: int, top: int, variants_of_shape: list | None) -> None:
        """Time the least recompute level that fits (hi) and, while the layout stays tight, more;
        with variants_of_shape (the coarse pass), with the floors of those variants."""
        for i in range(hi, top + 1):
            layout, sized = sized_at(i)
            if sized.fits and sized.host_fits:
                tight = sized.total > MAX_MEMORY_UTILIZATION * sized.capacity
                if variants_of_shape is None:
                    step, floor = step_time_of(sized), None
                else:
                    step, floor = step_and_floors(sized, variants_of_shape)
                found.append(_Candidate(layout, sized, step, floor, tight))
                if tight is False and not roomy_seen[0]:
                    roomy_seen[0] = True
                    best[0] = step
                elif step < best[0] and (not tight or not roomy_seen[0]):
                    best[0] = step
                if not tight:
                    break                                # more recompute is never faster

    # The fine pass's knowledge beyond the floors: (base, vpp, zero, offload) -> [(micro-batch, least
    # recompute index that fitted)], and (base, micro-batch, vpp) -> options sized but not yet timed,
    # as [(floor at their level, sized_at, level, top)].
    needed: dict[tuple, list] = {}
    parked: dict[tuple, list] = {}
    probe: dict[tuple, Layout] = {}         # base -> its coarse layout, to build variants from
    level_floors: dict[tuple, tuple] = {}   # (base, micro-batch, vpp) -> (known level, floor there), untried

    def explore(shape: _Shape, b: tuple, mbs: int, variants_of_shape: list | None, levels: dict | None = None,
                threshold: float | None = None) -> bool:
        """Add the fitting (ZeRO, recompute, offload) options of one shape (b: its base_of) and micro-batch;
        False if none fits. With variants_of_shape (the coarse pass), each also gets their floors. With levels
        ({(zero, offload): first recompute index that fitted the coarse layout}), a variant tries
        only those: memory grows with the micro-batch and the virtual stages (activations per
        micro-batch, chunks in flight), so what did not fit the coarse layout cannot fit it.
        With threshold (the fine pass), an option whose sizing needs more recompute than its floor
        assumed is timed only if its floor at that level (estimate.floor_of) is within threshold;
        otherwise it waits in `parked` for a larger threshold (time.shape_floor)."""
        nonlocal closest
        m = gbs // (mbs * shape.dp)
        etp = shape.etp if shape.ep > 1 else None

        def layout_for(zero, recompute, offload, device="cpu"):
            # Valid by construction (every degree >= 1, literals from the closed sets above): built
            # without re-validation, as this is the innermost loop of the search.
            return build_unchecked(Layout, {
                "framework": framework, "tp": shape.tp, "pp": shape.pp, "dp": shape.dp, "cp": shape.cp, "ep": shape.ep,
                "etp": etp, "vpp": shape.vpp, "overlap_p2p_comm": True, "sp": shape.tp > 1 and sp, "zero_stage": zero,
                "micro_batch_size": mbs, "num_microbatches": m, "recompute": recompute, "offload": offload,
                "offload_device": device})

        shape_fits = False
        for zero in zero_stages[shape.pp > 1]:
            for offload in offloads:
                # DeepSpeed offload_config.py: parameter offload needs ZeRO-3; optimizer offload a stage >= 1.
                if (offload == "optimizer+params" and zero != 3) or (offload == "optimizer" and zero < 1):
                    continue
                if levels is not None and (zero, offload) not in levels:
                    continue
                first = 0 if levels is None else levels[zero, offload]
                top = len(recomputes) - 1
                # The first sizing: at the level the previous layout needed (neighbouring shapes mostly
                # need the same one, and then it is the only sizing), or, after a layout that did not
                # fit at all, at the most frugal level, which alone decides whether anything fits.
                hint = level_hint[0]
                start = hint if last_fitted[0] and hint is not None and first <= hint < top else top
                base = layout_for(zero, recomputes[start], offload)
                at = {start: (base, size(cluster, model, base, training, assumptions))}
                result.examined += 1
                if offload != "none" and zero == 3 and not at[start][1].host_fits:
                    # The offloaded states (whatever the recompute level) exceed host memory: ZeRO-Infinity
                    # puts them on NVMe instead, which DeepSpeed allows with ZeRO-3 only (offload_config.py;
                    # rule deepspeed.nvme-offload-needs-zero3). Their capacity is not checked.
                    key = (framework, shape.tp, shape.pp, shape.cp, shape.ep, zero, offload, "cpu")
                    if key not in logged and n_logged[0] < MAX_REJECT_EVENTS:
                        logged.add(key)
                        n_logged[0] += 1
                        result.events.append(("reject", _host_short(at[start][1]) + "; offloading to NVMe instead",
                                              base.id))
                    base = layout_for(zero, recomputes[start], offload, "nvme")
                    at = {start: (base, size(cluster, model, base, training, assumptions))}
                    result.examined += 1

                def sized_at(i: int, at=at, base=base, start=start):   # (bound now: parked ones run later)
                    if i not in at:
                        # base at another recompute level (layout_for's fields, in its order), sized
                        # from base's: the rest of the layout is the same (resize equals size exactly)
                        lay = build_unchecked(Layout, dict(base.__dict__, recompute=recomputes[i]))
                        at[i] = (lay, resize(at[start][1], lay))
                        result.examined += 1
                    return at[i]

                # Memory only shrinks with more recompute: when the first level does not fit, the most
                # frugal one decides whether any does; then the least level that fits, by bisection.
                sized = at[start][1]
                if sized.fits and sized.host_fits:
                    lo, hi = first, start            # hi fits
                else:
                    frugal, sized = sized_at(top)
                    if not (sized.fits and sized.host_fits):
                        last_fitted[0] = False
                        short = _shortfall(sized)
                        if closest is None or short < closest[2]:
                            closest = (frugal, sized, short)
                        key = (framework, shape.tp, shape.pp, shape.cp, shape.ep, zero, offload)
                        if mbs == mbs_options[0] and shape.vpp == 1 and key not in logged \
                                and n_logged[0] < MAX_REJECT_EVENTS:
                            logged.add(key)
                            n_logged[0] += 1
                            result.events.append(("reject", _short_of(sized, recomputes[-1]), frugal.id))
                        continue
                    lo, hi = start + 1, top
                while lo < hi:
                    mid = (lo + hi) // 2
                    sized = sized_at(mid)[1]
                    if sized.fits and sized.host_fits:
                        hi = mid
                    else:
                        lo = mid + 1
                level_hint[0] = hi
                last_fitted[0] = True
                shape_fits = True
                if threshold is not None:
                    # larger micro-batches of this shape and vpp need at least this level (try_variant)
                    needed.setdefault((b, shape.vpp, zero, offload), []).append((mbs, hi))
                    if hi > first:
                        floor = floor_of(sized_at(hi)[1], (mbs, shape.vpp))
                        if floor > threshold:
                            parked.setdefault((b, mbs, shape.vpp), []).append((floor, sized_at, hi, top))
                            if offload == "none":
                                break
                            continue
                timed(sized_at, hi, top, variants_of_shape)
                if shape_fits and offload == "none":
                    break                                        # offload only when nothing fits
        return shape_fits

    # Coarse pass: every shape at plain 1F1B and its smallest legal micro-batch.
    shapes = [(shape, base_of(shape)) for shape in _shapes(cluster, model, training, decisions, strategy, framework)]
    variants: dict[tuple, list[tuple[int, int]]] = {}    # base -> its (micro-batch, vpp) options, M10/M11
    for shape, b in shapes:
        for mbs in mbs_options:
            m = gbs // (mbs * shape.dp)
            if gbs % (mbs * shape.dp) == 0 and (shape.vpp == 1 or (m >= shape.pp and m % shape.pp == 0)):
                variants.setdefault(b, []).append((mbs, shape.vpp))
    floors: dict[tuple, dict] = {}      # base -> {(micro-batch, vpp): floor}, for shapes that fit
    levels: dict[tuple, dict] = defaultdict(dict)   # base -> {(zero, offload): first fitting recompute index}
    tried: set[tuple] = set()           # (base, micro-batch, vpp) explored
    for shape, b in shapes:
        if shape.vpp > 1 or b not in variants:
            continue
        mbs = variants[b][0][0]                                  # the smallest legal micro-batch
        n = len(found)
        tried.add((b, mbs, 1))
        if explore(shape, b, mbs, variants[b]):
            fitting = found[n:]
            probe[b] = fitting[0].layout
            if len(fitting) == 1:                   # the usual case: one (ZeRO, offload) option fits
                floors[b] = dict(fitting[0].floor)
            else:
                floors[b] = {v: min(c.floor[v] for c in fitting) for v in variants[b]}
            for c in fitting:
                key = (c.layout.zero_stage, c.layout.offload)
                levels[b][key] = min(levels[b].get(key, 9), recomputes.index(c.layout.recompute))
    if not found:
        return None, closest
    by_vpp = {(b, s.vpp): s for s, b in shapes}
    failed: dict[tuple, int] = {}       # (base, vpp) -> smallest micro-batch that did not fit

    def try_variant(b: tuple, mbs: int, vpp: int, threshold: float) -> None:
        """Size and time one variant that its floor says could be within threshold. Its options that
        need more recompute than the coarse layout did, by its own sizing or a smaller micro-batch's
        (memory grows with the micro-batch), are timed only when their floor at that level is."""
        key = (b, mbs, vpp)
        if key in tried:
            waiting = parked.get(key)
            if waiting and min(w[0] for w in waiting) <= threshold:
                parked[key] = [w for w in waiting if w[0] > threshold]
                for _floor, sized_at, hi, top in waiting:
                    if _floor <= threshold:
                        timed(sized_at, hi, top, None)
            return
        if failed.get((b, vpp), mbs + 1) <= mbs:
            return                                               # a smaller one did not fit
        start = dict(levels[b])
        for zero, offload in levels[b]:
            for smaller, level in needed.get((b, vpp, zero, offload), ()):
                if smaller <= mbs and level > start[zero, offload]:
                    start[zero, offload] = level
        # One option (the usual case) known to need more recompute than the coarse layout did: its
        # floor at that level (otherwise the coarse floor, which the caller checked, holds)
        if len(start) == 1 and start != levels[b]:
            level = next(iter(start.values()))
            hit = level_floors.get(key)
            if hit is None or hit[0] != level:
                layout = build_unchecked(Layout, dict(probe[b].__dict__, micro_batch_size=mbs, vpp=vpp,
                                                      num_microbatches=gbs // (mbs * b[4]),
                                                      recompute=recomputes[level]))
                hit = level_floors[key] = (level, floor_of_layout(cluster, model, layout, training, assumptions))
            if hit[1] > threshold:
                return                           # not tried: a larger threshold may come back to it
        tried.add(key)
        if not explore(by_vpp[b, vpp], b, mbs, None, start, threshold):
            failed[b, vpp] = mbs

    def refine(b: tuple, threshold: float) -> None:
        """The variants of one shape whose floor is within threshold."""
        for (mbs, vpp), floor in floors[b].items():
            if floor <= threshold:
                try_variant(b, mbs, vpp, threshold)

    # Fine pass: only the variants that could change the choice. No variant runs faster than its
    # floor (time.variant_floors). The choice is the tie-break's first among the layouts within
    # NEAR_TIE of the best, in the group it is made in (layouts with headroom; the tight ones when
    # none has any). So: (1) every variant whose floor is below the best so far, until none is
    # left: the best is then final; (2) in tie-break order, the variants whose floor is within the
    # band and whose tie-break key (at its most favourable: least recompute, lowest ZeRO stage,
    # memory headroom) does not come after the current pick's. tests/test_planner_refine.py checks
    # that this makes the choice trying every variant makes.
    ties = _Ties(_tie_order(decisions), model.layers, min(cluster.nvlink_domain, cluster.gpus))
    pending = sorted([(floor, b, mbs, vpp) for b in floors for (mbs, vpp), floor in floors[b].items()
                      if (b, mbs, vpp) not in tried], key=itemgetter(0))     # stable: ties keep this order
    while True:
        before = (len(tried), len(found))
        for floor, b, mbs, vpp in pending:
            if floor > best[0]:
                break
            try_variant(b, mbs, vpp, best[0])
        if (len(tried), len(found)) == before:      # the best can rise once, when the first roomy layout appears
            break
    band = best[0] * (1 + NEAR_TIE)
    zero_min = min(_stages(decisions, framework, 1))

    def pick_key() -> tuple:
        group = [c for c in found if not c.tight] or found
        return min((_tie_break(c, ties), c.step_time) for c in group if c.step_time <= band)

    # (base, micro-batch, vpp) -> the variant's tie-break key at its most favourable (least recompute,
    # lowest ZeRO stage, no offload, memory headroom); the rounds below ask for it again
    favourable: dict[tuple, tuple] = {}

    def favourable_key(b: tuple, mbs: int, vpp: int) -> tuple:
        key = favourable.get((b, mbs, vpp))
        if key is None:
            key = favourable[b, mbs, vpp] = _tie_key(b[0], b[1], b[2], b[3], vpp, offloads[0], zero_min,
                                                     recomputes[0], mbs, False, ties)
        return key

    hopefuls = sorted((favourable_key(b, mbs, vpp), floor, b, mbs, vpp)
                      for floor, b, mbs, vpp in pending
                      if floor <= band and ((b, mbs, vpp) not in tried or parked.get((b, mbs, vpp))))
    current = pick_key()
    for key, _floor, b, mbs, vpp in hopefuls:
        if (key, _floor) > current:
            break
        if (b, mbs, vpp) not in tried or parked.get((b, mbs, vpp)):
            try_variant(b, mbs, vpp, band)
            current = pick_key()
    chosen: _Candidate | None = None
    checked: dict[int, list] = {}      # id(candidate) -> check_fn's errors, across rounds
    every = sorted([(floor, b, mbs, vpp) for b in floors for (mbs, vpp), floor in floors[b].items()],
                   key=itemgetter(0))
    while True:
        ordered = _ordered(found, ties)
        chosen, alternatives, rejected = _pick(ordered, check_fn, checked, max_alternatives)
        if chosen is None:
            break
        # The alternatives an exhaustive search would list, each at its best. _ordered lists the
        # near-ties (within the band) by the tie-break, then the rest by step time. So a variant can
        # change the list only if it could come before the entry it would displace: its own shape's
        # entry when that shape is listed, else the last one listed. Before an entry outside the
        # band: any layout in the band or faster; before one inside: one in the band whose tie-break
        # key, at its most favourable, and floor come first. Every variant that could is tried (all
        # of them when a tight layout closes the list, or fewer were listed than asked because the
        # audit refused some); the list is made again until it stands. The choice does not move
        # (step 2 above).
        band_now = best[0] * (1 + NEAR_TIE)
        entries: dict[tuple, _Candidate] = {}      # (tp, pp, cp, ep, ZeRO stage) -> its listed layout
        for c in (chosen, *alternatives):
            lay = c.layout
            entries[lay.tp, lay.pp, lay.cp, lay.ep, lay.zero_stage] = c
        last = alternatives[-1] if max_alternatives and len(alternatives) == max_alternatives else None
        everything = bool((alternatives and alternatives[-1].tight and not chosen.tight)
                          or (len(alternatives) < max_alternatives and rejected))
        limit = float("inf") if everything else max(band_now, *(c.step_time for c in entries.values()))

        def could_precede(b, mbs, vpp, floor, entry) -> float | None:
            """The threshold to try the variant against, or None when it cannot come before entry."""
            if entry.step_time > band_now:
                reach = max(band_now, entry.step_time)
                return reach if floor <= reach else None
            if floor > band_now:
                return None
            key = favourable_key(b, mbs, vpp)
            return band_now if (key, floor) <= (_tie_break(entry, ties), entry.step_time) else None

        before = len(found)
        for floor, b, mbs, vpp in every:
            if floor > limit:
                break
            threshold = float("inf") if everything else None
            for zero, _ in levels[b] if not everything else ():
                entry = entries.get((*b[:4], zero), last)     # an unlisted key competes with the last one
                if entry is None or entry is chosen:
                    continue                                  # nothing to displace, or the choice (step 2)
                t = could_precede(b, mbs, vpp, floor, entry)
                if t is not None and (threshold is None or t > threshold):
                    threshold = t
            if threshold is not None:
                try_variant(b, mbs, vpp, threshold)
        if len(found) == before:
            break
    for rule_id, message, layout_id in rejected[:MAX_REJECT_EVENTS]:
        result.events.append(("reject", f"rule {rule_id}: {message}", layout_id))
    if len(rejected) > MAX_REJECT_EVENTS:
        counts = Counter(r[0] for r in rejected[MAX_REJECT_EVENTS:])
        result.events.append(("note", f"{len(rejected) - MAX_REJECT_EVENTS} more layouts refused by the audit: "
                                      + ", ".join(f"rule {r} ({n})" for r, n in counts.most_common()), None))
    if chosen is None:
        # Layouts fit, but the audit refused every one: say which rule, not "nothing fits".
        rule_id, message = Counter((r[0], r[1]) for r in rejected).most_common(1)[0][0]
        result.blocked_by = (rule_id, message)
        result.events.append(("reject", f"every layout that fits is refused by the audit; first of all by rule "
                                        f"{rule_id}: {message}", None))
    else:
        _note_search(result, found, floors, variants, tried, ties.order)
    if keep_ranking:
        # every variant of every shape, for benchmarks and tests; the answer above is already made
        examined, nearest = result.examined, closest
        for b in floors:
            refine(b, float("inf"))
        result.ranking = [(c.layout, c.estimate) for c in _ordered(found, ties)]
        result.examined, closest = examined, nearest
    if chosen is None:
        return None, closest
    if chosen.tight:
        result.events.append(("note", f"every fitting layout uses more than {MAX_MEMORY_UTILIZATION:.0%} "
                                      "of GPU memory: expect little room for fragmentation", None))
    fastest = min(c.step_time for c in found if c.tight is chosen.tight)
    result.alternatives += [Alternative(c.layout, c.estimate, _why_lost(c, chosen, fastest, ties.order)) for c in alternatives]
    return (chosen.layout, chosen.estimate), closest


def _note_search(result: PlanResult, found: list[_Candidate], floors: dict, variants: dict, tried: set,
                 tie_order: str) -> None:
    n_tight = sum(c.tight for c in found)
    ties = _TIE_WORDS[tie_order]
    result.events.append(("note", f"{len(found)} layouts fit in memory ({n_tight} above "
                                  f"{MAX_MEMORY_UTILIZATION:.0%} of it, ranked last); ranked by estimated "
                                  f"step time; ties within {NEAR_TIE:.0%} go to {ties}", None))
    n_variants = sum(len(v) for b, v in variants.items() if b in floors)
    shapes = "1 shape fits; {} of its" if len(floors) == 1 else f"{len(floors)} shapes fit; {{}} of their"
    result.events.append(("note", shapes.format(len([t for t in tried if t[0] in floors])) +
                                  f" {n_variants} (micro-batch, vpp) variants sized; the others' floors (compute, "
                                  f"unhidden communication, least bubble) cannot change the choice", None))


def _pick(ordered: list[_Candidate], check_fn, checked: dict, max_alternatives: int):
    """The first candidate the audit's legality rules accept, and up to max_alternatives more of
    other shapes; (chosen, alternatives, [(rule id, message, layout id) of each refused one])."""
    chosen, alternatives, rejected = None, [], []
    listed: set[tuple] = set()
    for cand in ordered:
        if chosen is not None and len(alternatives) >= max_alternatives:
            break
        layout = cand.layout
        shape = (layout.tp, layout.pp, layout.cp, layout.ep, layout.zero_stage)
        if chosen is not None and shape in listed:
            continue
        errors = checked.get(id(cand))
        if errors is None:
            errors = checked[id(cand)] = check_fn(layout, cand.estimate)
        if errors:
            # The audit's legality rules have the last word: never return what they call an error.
            rule_id, message = errors[0]
            rejected.append((rule_id, message, layout.id))
            continue
        listed.add(shape)
        if chosen is None:
            chosen = cand
        else:
            alternatives.append(cand)
    return chosen, alternatives, rejected


def _host_need(sized) -> float:
    """Host memory per GPU the offloaded states need, with DeepSpeed's buffer factor (bytes)."""
    return sized.host_bytes * sized.assumptions.host_buffer_factor


def _shortfall(sized) -> float:
    """How far a layout that does not fit is from fitting: the share of GPU memory it needs, or when
    the GPU has room, of host memory (of NVMe, for states offloaded there)."""
    if not sized.fits:
        return sized.total / sized.capacity
    if sized.ctx.offload_device == "nvme":
        return sized.nvme_bytes / sized.ctx.nvme_per_gpu
    return _host_need(sized) / sized.ctx.host_per_gpu


def _short_of(sized, recompute: str) -> str:
    """Why a layout does not fit, at its most frugal recompute level: GPU memory, else host memory."""
    if not sized.fits:
        return (f"memory: {sized.total / 2**30:.1f} GiB per GPU > {sized.capacity / 2**30:.1f} GiB even with "
                f"recompute {recompute}")
    if sized.ctx.offload_device == "nvme":
        return _nvme_short(sized)
    return _host_short(sized) + "; NVMe offload needs ZeRO-3"


def _nvme_short(sized) -> str:
    return (f"NVMe: {sized.nvme_bytes / 2**30:,.0f} GiB per GPU of offloaded states > {sized.ctx.nvme_per_gpu / 2**30:,.0f} "
            f"GiB of NVMe per GPU (Cluster.nvme_per_node)")


def _host_short(sized) -> str:
    what = "optimizer states and parameters" if sized.ctx.offload == "optimizer+params" else "optimizer states"
    return (f"host memory: offloading the {what} needs {_host_need(sized) / 2**30:.1f} GiB per GPU "
            f"(x{sized.assumptions.host_buffer_factor:g} for buffers) > {sized.ctx.host_per_gpu / 2**30:.1f} GiB of "
            f"host memory per GPU")


def _needs(closest: tuple) -> str:
    """'<id> needs ...' for the layout that came closest to fitting: (layout, sized, shortfall)."""
    layout, sized = closest[0], closest[1]
    if not sized.fits:
        return f"{layout.id} needs {sized.total / 2**30:.1f} GiB of {sized.capacity / 2**30:.1f} GiB"
    if sized.ctx.offload_device == "nvme":
        return f"{layout.id} fits the GPU but not its NVMe: {_nvme_short(sized)}"
    return (f"{layout.id} fits the GPU but needs {_host_need(sized) / 2**30:.1f} GiB of host memory per GPU "
            f"of {sized.ctx.host_per_gpu / 2**30:.1f} GiB")


def _offload_basis(cluster: Cluster, layout: Layout, est, A: Assumptions) -> str:
    """What an offloaded layout's time rests on: host figures the cost model assumes rather than
    measures (Assumptions.pcie_bandwidth, cpu_adam_params_per_second, nvme_bandwidth), and how much of
    the step they decide, so that a reader knows which of their own numbers to pass."""
    figures = [f"PCIe {A.pcie_bandwidth / 1e9:.0f} GB/s per GPU (pcie_bandwidth)",
               f"CPU Adam {A.cpu_adam_params_per_second:.2g} parameters/s per GPU (cpu_adam_params_per_second)"]
    if layout.offload_device == "nvme":
        figures.append(f"NVMe {A.nvme_bandwidth / 1e9:.0f} GB/s per GPU (nvme_bandwidth)")
        if cluster.nvme_per_node is None:
            capacity = "(its capacity is not checked: give Cluster.nvme_per_node)"
        else:
            capacity = f"of {cluster.nvme_per_node / cluster.gpus_in_node / 2**30:,.0f} GiB"
        figures.append(f"{est.memory.offloaded_to_nvme / 2**30:,.0f} GiB per GPU on NVMe {capacity}")
    return (f"The best offloaded layout, {layout.id}, spends {est.optimizer_time:.2f} s of its {est.step_time:.2f} s "
            f"step in the optimizer and its transfers, at host figures assumed from others' measurements, not yours: "
            + ", ".join(figures) + "; pass your hosts' figures as assumptions")


def _other_family(cluster, model, training, decisions: Decisions, strategy: str, result: PlanResult,
                  check_fn, keep_ranking: bool, assumptions=None) -> None:
    """Evaluate the family the rules did not choose. A rule's zero-dp strategy is a preference for
    the simpler family (the seed's "≤32 cards: start with ZeRO; don't jump to TP/PP"; issue 5 ranks
    by step time, then simplicity), so it holds among estimates that cannot be told apart: when the
    model-parallel family's best is faster by more than NEAR_TIE, the cost model wins and the choice
    moves to it, saying so. The other way round the rules stand: a model-parallel strategy comes
    from the model outgrowing a node, where ZeRO-3's per-layer gathers over the whole cluster are
    modelled optimistically (bucketed calls, no per-module latency). Otherwise the other family's
    best joins the alternatives with the rule that preferred the chosen family."""
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
    chosen, _ = _search(cluster, model, training, other, family, framework, side, check_fn,
                        allow_offload=False, keep_ranking=keep_ranking, max_alternatives=0, assumptions=assumptions)
    result.examined += side.examined
    result.ranking = _merge_rankings(result.ranking, side.ranking)
    if chosen is None or result.estimate is None:
        return
    layout, est = chosen
    rule = decisions.strategy[1] if decisions.strategy else "the default strategy"
    ours = result.estimate.step_time
    if strategy == "zero-dp" and est.step_time * (1 + NEAR_TIE) < ours:
        # The other family again, now with its alternatives, and the preferred family's best as one.
        moved = PlanResult(None, None, framework)
        chosen, _ = _search(cluster, model, training, other, family, framework, moved, check_fn,
                            allow_offload=False, keep_ranking=False, assumptions=assumptions)
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
            result.ranking = _merge_rankings(side.ranking, [c for c in result.ranking if id(c[0]) not in theirs])
        return
    delta = est.step_time / ours - 1
    result.alternatives.append(Alternative(layout, est, (
        f"family {family} ({framework}): est. step {est.step_time:.2f} s ({delta:+.0%}); "
        f"rule {rule} prefers {strategy} for this cluster and model")))


def _merge_rankings(ours: list, theirs: list) -> list:
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


def plan(cluster: Cluster, model: Model, training: Training, decisions: Decisions,
         check_fn=lambda layout, est: [], keep_ranking: bool = False, assumptions=None) -> PlanResult:
    """Pick the fastest layout (by the cost model) that the rules allow, that fits, and that has no
    error from `check_fn` (the audit's legality rules: a list of (rule id, message)). `assumptions`:
    the cost model's knobs (advisor.Assumptions; None: its defaults)."""
    framework = decisions.framework[0] if decisions.framework else "megatron"
    strategy = decisions.strategy[0] if decisions.strategy else "model-parallel"
    result = PlanResult(None, None, framework)
    if not decisions.strategy:
        result.events.append(("note", "no rule chose a strategy: model-parallel", None))
    args = (cluster, model, training)
    chosen, closest = _search(*args, decisions, strategy, framework, result, check_fn,
                              allow_offload=False, keep_ranking=keep_ranking, assumptions=assumptions)
    if chosen is None and strategy == "zero-dp":
        chosen, closest = _search(*args, decisions, strategy, framework, result, check_fn,
                                  allow_offload=True, keep_ranking=keep_ranking, assumptions=assumptions)
        if chosen is not None:
            where = ("NVMe (host memory cannot hold the offloaded states)" if chosen[0].offload_device == "nvme"
                     else "host memory")
            result.events.append(("note", f"nothing fits on the GPUs alone: ZeRO offload to {where}. "
                                  + _offload_basis(cluster, chosen[0], chosen[1], assumptions or Assumptions()), None))
    if chosen is None and strategy == "zero-dp":
        # ZeRO alone (even with offload) cannot hold the model: widen to TP/PP, and say so.
        if result.blocked_by:
            why = f"every fitting ZeRO layout is refused by rule {result.blocked_by[0]}"
        elif closest is not None:
            why = f"no ZeRO stage or offload fits; closest {_needs(closest)}"
        else:               # nothing was sized: no shape, or no micro-batch that divides the batch
            why = (f"no ZeRO layout is legal: global batch {training.global_batch_size} vs micro-batch x "
                   f"data-parallel ranks on {cluster.gpus} GPUs (DeepSpeed's batch identity), within the rules' limits")
        result.events.append(("reject", f"family zero-dp: {why}", "zero-dp"))
        result.blocked_by = None
        framework = "megatron"
        decisions.zero_stages = ((1,), "planner")
        decisions.features.setdefault("sp", "planner")
        result.framework = framework
        result.events.append(("note", "widening to model-parallel with Megatron-LM (TP inside the NVLink domain, then PP)", None))
        strategy = "model-parallel"
        chosen, closest = _search(*args, decisions, strategy, framework, result, check_fn,
                                  allow_offload=False, keep_ranking=keep_ranking, assumptions=assumptions)
        widened = True
    else:
        widened = False
    if chosen is None:
        if result.blocked_by:
            pass                             # _search said which rule refused the layouts that fit
        elif closest is not None:
            result.events.append(("reject", f"no layout fits; closest {_needs(closest)}", closest[0].id))
        else:
            result.events.append(("reject", "no layout satisfies the divisibility constraints "
                                            "(heads, layers, global batch vs dp)", None))
        return result
    result.layout, result.estimate = chosen
    if not widened:      # (when widened, the other family is the ZeRO one that just failed, in the trace)
        _other_family(cluster, model, training, decisions, strategy, result, check_fn, keep_ranking, assumptions)
    return result
