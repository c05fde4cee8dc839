"""The search: size the shapes the space allows, keep the layouts that fit, rank them, screen the
best with the audit's legality rules.

For each shape, micro-batch size and ZeRO stage, the most memory-frugal option (full recompute) is
sized first; when even it does not fit, the shape (with its larger micro-batches and virtual stages)
is pruned. Otherwise the least recompute that fits is found by bisection over the levels and kept
(more recompute never runs faster). Offload is tried only when nothing else fits, and only in the
ZeRO data-parallel family. This runs coarse to fine: every shape first at plain 1F1B and its
smallest micro-batch, which also gives a floor for each of its other (micro-batch, virtual stages)
variants (estimate.time.variant_floors); a variant is sized only when its floor is within the
near-tie band of the best layout found so far, so the choice is the one trying every variant would
make (tests/test_planner_refine.py), at a fraction of the cost. A variant whose sizing shows it needs
more recompute than its floor assumed gets the floor of that level (estimate.floor_of) and waits
until a threshold reaches it; a larger micro-batch of the same shape and vpp starts at that level.
The alternatives are then the ones trying every variant would list: each variant that could come
before a listed layout is tried, until the list stands. Last, the best of each KINDS entry (sharded
data parallelism, TP x PP, expert parallelism for MoE) that the list leaves out is found the same way
and added, so the answer always shows what each kind of layout would give.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from operator import itemgetter
from typing import Callable, NamedTuple

from .._unchecked import build_unchecked
from ..costmodel import Assumptions
from ..costmodel.sizing import Sized, floor_of, floor_of_layout, resize, size, step_and_floors, step_time_of
from ..inputs.layout import Layout
from ..inputs.specs import Cluster, Model, Training
from .candidates import Alternative, Candidate, Closest, PlanResult
from .events import PlanEvent
from ..results.audit import Screening
from .messages import (advice_move_note, advice_note, host_need, host_short, need_and_capacity, note_search,
                       pipeline_note, short_of, shortfall)
from .ranking import Ties, ordered, tie_break, tie_terms, why_lost
from .space import MBS_OPTIONS, OFFLOAD, RECOMPUTE, Policy, Shape, base_of, shapes, stages, variants_of

MAX_ALTERNATIVES = 4


class Kind(NamedTuple):
    """A kind of layout the alternatives always show when one fits (issue 17 item 4): its `name` in
    the alternative's reason, whether it concerns the model (`moe_only`), the test on (tp, pp, ep),
    and the highest ZeRO stage it has (None: any)."""
    name: str
    moe_only: bool
    test: Callable[[int, int, int], bool]
    zero_max: int | None = None

    def applies(self, model: Model) -> bool:
        return model.is_moe or not self.moe_only

    def holds(self, layout: Layout) -> bool:
        zero_ok = self.zero_max is None or layout.zero_stage <= self.zero_max
        return zero_ok and self.test(layout.tp, layout.pp, layout.ep)

    def holds_shape(self, b: tuple) -> bool:       # b: a base_of(shape), (tp, pp, cp, ep, ...); any ZeRO stage
        return self.test(b[0], b[1], b[3])


# The families a reader compares (issue 17 item 4): fully sharded data parallelism alone (ZeRO-3 /
# FSDP / Megatron-FSDP at tp = pp = 1); TP x PP with the states at most optimizer- and gradient-sharded
# (Megatron-LM's distributed optimizer, ZeRO-1/2), the layout Megatron's own recipes ran before
# Megatron-FSDP, so that a choice that mixes TP with ZeRO-3 does not hide it; expert parallelism.
KINDS = (
    Kind("sharded data-parallel (tp = pp = 1)", False, lambda tp, pp, ep: tp * pp == 1),
    Kind("TP x PP (ZeRO <= 2)", False, lambda tp, pp, ep: tp * pp > 1, zero_max=2),
    Kind("expert-parallel", True, lambda tp, pp, ep: ep > 1),
)
MAX_REJECT_EVENTS = 10          # rejections written to the trace one by one; the rest are counted


# One (shape, micro-batch, ZeRO, offload) option's sizings: (base layout, first recompute index
# sized, {recompute index: (layout, sized)}). A plain tuple: one is built per option in the hot loop.
Sizings = tuple[Layout, int, dict[int, tuple[Layout, Sized]]]


def advised(cand: Candidate) -> set[str]:
    """The rule ids of the audit's advice on a screened candidate."""
    return {rule_id for rule_id, _ in cand.advice or ()}


def pick(ordered: list[Candidate], check_fn, checked: dict, max_alternatives: int, band: float):
    """The choice and up to max_alternatives more of other shapes, in `ordered`'s order, skipping every
    layout the audit's legality rules refuse; (chosen, alternatives, [(rule id, message, layout id) of
    each refused one], the first legal layout when the advice below passed it over, else None). The choice is the first legal layout, unless its own audit advises against it
    (an "advice"-tier warning) and a legal near-tie (within `band` of the fastest of its group) draws
    only part of that advice: then the first such layout in the tie order, and so on from it, so that
    the pick never carries advice that a near-tie avoids (band 0: the first legal layout)."""
    rejected: dict[int, tuple[str, str, str]] = {}       # id(candidate) -> its refusal, in the order met

    def legal(cand: Candidate) -> bool:
        screening = checked.get(id(cand))
        if screening is None:
            screening = checked[id(cand)] = check_fn(cand.layout, cand.estimate)
            cand.advice = screening.advice
        if screening.errors:
            # The audit's legality rules have the last word: never return what they call an error.
            rule_id, message = screening.errors[0]
            rejected.setdefault(id(cand), (rule_id, message, cand.layout.id))
        return not screening.errors

    chosen = first = next((c for c in ordered if legal(c)), None)
    if chosen is None:
        return None, [], list(rejected.values()), None
    if chosen.advice and band > 0:
        limit = min(c.step_time for c in ordered if c.tight is chosen.tight) * (1 + band)
        for cand in ordered[ordered.index(chosen) + 1:]:
            if cand.tight is not chosen.tight or cand.step_time > limit:
                continue
            if legal(cand) and advised(cand) < advised(chosen):
                chosen = cand
                if not chosen.advice:
                    break
    alternatives = []
    listed = {(chosen.layout.tp, chosen.layout.pp, chosen.layout.cp, chosen.layout.ep, chosen.layout.zero_stage)}
    for cand in ordered:
        if len(alternatives) >= max_alternatives:
            break
        layout = cand.layout
        shape = (layout.tp, layout.pp, layout.cp, layout.ep, layout.zero_stage)
        if shape in listed or not legal(cand):
            continue
        listed.add(shape)
        alternatives.append(cand)
    return chosen, alternatives, list(rejected.values()), (first if first is not chosen else None)


class Search:
    """One search of one family (framework and strategy): `run()` returns ((layout, estimate) of
    the choice or None, the Closest layout that did not fit or None), and fills `result`."""

    def __init__(self, cluster: Cluster, model: Model, training: Training, policy: Policy, strategy: str,
                 framework: str, result: PlanResult, check_fn: Callable, allow_offload: bool, keep_ranking: bool,
                 max_alternatives: int = MAX_ALTERNATIVES, assumptions: Assumptions | None = None):
        self.cluster, self.model, self.training, self.assumptions = cluster, model, training, assumptions
        self.policy, self.strategy, self.framework = policy, strategy, framework
        self.result, self.check_fn = result, check_fn
        self.keep_ranking, self.max_alternatives = keep_ranking, max_alternatives
        self.gbs = training.global_batch_size
        self.mbs_options = (training.micro_batch_size,) if training.micro_batch_size else MBS_OPTIONS
        self.recomputes = ("none", "full") if framework == "deepspeed" else RECOMPUTE   # selective is Megatron's
        self.top = len(self.recomputes) - 1                  # the most frugal recompute level
        self.offloads = OFFLOAD if allow_offload else ("none",)
        self.sp = policy.sp
        # the ZeRO stages to try, by pp > 1 (all that stages() reads of pp), worked out once per search
        self.zero_stages = {pipelined: stages(policy.zero_stages, framework, 2 if pipelined else 1)
                            for pipelined in (False, True)}
        self.ties = Ties.for_job(policy.tie_order, model, cluster, training)
        self.found: list[Candidate] = []
        self.closest: Closest | None = None
        self.n_logged = 0                    # memory rejections written by this search (capped)
        # the best step time in the group the choice is made in (layouts with headroom, else all)
        self.best, self.roomy_seen = float("inf"), False
        self.level_hint: int | None = None   # the recompute level the last explored layout needed
        self.last_fitted = False             # whether the last explored (shape, ZeRO, offload) fitted at all
        # Coarse pass results: base -> its (micro-batch, vpp) options (M10/M11); base -> {(micro-batch,
        # vpp): floor} for the shapes that fit; base -> {(zero, offload): first fitting recompute index};
        # base -> its coarse layout, to build variants from; (base, micro-batch, vpp) explored.
        self.variants: dict[tuple, list[tuple[int, int]]] = {}
        self.floors: dict[tuple, dict] = {}
        self.levels: dict[tuple, dict] = defaultdict(dict)
        self.probe: dict[tuple, Layout] = {}
        self.tried: set[tuple] = set()
        self.by_vpp: dict[tuple, Shape] = {}    # (base, vpp) -> its shape
        # The fine pass's knowledge beyond the floors: (base, vpp, zero, offload) -> [(micro-batch, least
        # recompute index that fitted)], and (base, micro-batch, vpp) -> options sized but not yet timed,
        # as [(floor at their level, Sizings, level, top)].
        self.needed: dict[tuple, list] = {}
        self.parked: dict[tuple, list] = {}
        self.level_floors: dict[tuple, tuple] = {}   # (base, micro-batch, vpp) -> (known level, floor there), untried
        self.failed: dict[tuple, int] = {}           # (base, vpp) -> smallest micro-batch that did not fit
        # (base, micro-batch, vpp) -> the variant's tie-break key at its most favourable (least
        # recompute, lowest ZeRO stage, no offload, memory headroom); several rounds ask for it again
        self.favourable: dict[tuple, tuple] = {}
        self.zero_min = min(stages(policy.zero_stages, framework, 1))
        self.band = float("inf")               # ties.band above the best, once the fine pass has settled it
        self.checked: dict[int, Screening] = {}   # id(candidate) -> check_fn's Screening, once asked

    def run(self):
        self.coarse()
        if not self.found:
            return None, self.closest
        self.fine()
        chosen, alternatives, rejected, passed_over = self.settle()
        if chosen is not None and self.max_alternatives:
            alternatives += self.best_of_missing_kinds([c.layout for c in (chosen, *alternatives)])
            self.explain_advice(chosen)
            if passed_over is not None:
                self.result.events.append(PlanEvent("note", advice_move_note(passed_over, chosen, self.ties),
                                                    chosen.layout.id))
        self.report(chosen, rejected)
        if self.keep_ranking:
            self.rank_everything()
        if chosen is None:
            return None, self.closest
        return self.choice(chosen, alternatives), self.closest

    # -- sizing one shape ------------------------------------------------------------------------

    def layout_for(self, shape: Shape, mbs: int, m: int, zero: int, recompute: str, offload: str,
                   device: str = "cpu") -> Layout:
        # Valid by construction (every degree >= 1, literals from the closed sets above): built
        # without re-validation, as this is the innermost loop of the search.
        return build_unchecked(Layout, {
            "framework": self.framework, "tp": shape.tp, "pp": shape.pp, "dp": shape.dp, "cp": shape.cp,
            "ep": shape.ep, "etp": shape.etp if shape.ep > 1 else None, "vpp": shape.vpp, "overlap_p2p_comm": True,
            "sp": shape.tp > 1 and self.sp, "zero_stage": zero, "micro_batch_size": mbs, "num_microbatches": m,
            "recompute": recompute, "offload": offload, "offload_device": device})

    def sized_at(self, sizings: Sizings, i: int) -> tuple[Layout, Sized]:
        base, start, at = sizings
        if i not in at:
            # base at another recompute level (layout_for's fields, in its order), sized from
            # base's: the rest of the layout is the same (resize equals size exactly)
            lay = build_unchecked(Layout, dict(base.__dict__, recompute=self.recomputes[i]))
            at[i] = (lay, resize(at[start][1], lay))
            self.result.examined += 1
        return at[i]

    def may_log(self, key: tuple) -> bool:
        """Whether a memory rejection goes to the trace: once per key across searches, capped per search."""
        if key in self.result.logged or self.n_logged >= MAX_REJECT_EVENTS:
            return False
        self.result.logged.add(key)
        self.n_logged += 1
        return True

    def first_sizing(self, shape: Shape, mbs: int, m: int, zero: int, offload: str, start: int) -> Sizings:
        cluster, model, training, assumptions = self.cluster, self.model, self.training, self.assumptions
        base = self.layout_for(shape, mbs, m, zero, self.recomputes[start], offload)
        sized = size(cluster, model, base, training, assumptions)
        self.result.examined += 1
        if offload != "none" and zero == 3 and not sized.host_fits:
            # The offloaded states (whatever the recompute level) exceed host memory: ZeRO-Infinity
            # puts them on NVMe instead, which DeepSpeed allows with ZeRO-3 only (offload_config.py;
            # rule deepspeed.nvme-offload-needs-zero3). Their capacity is not checked.
            if self.may_log((self.framework, shape.tp, shape.pp, shape.cp, shape.ep, zero, offload, "cpu")):
                self.result.events.append(PlanEvent("reject", host_short(sized) + "; offloading to NVMe instead",
                                                    base.id, have=host_need(sized), want=sized.ctx.host_per_gpu))
            base = self.layout_for(shape, mbs, m, zero, self.recomputes[start], offload, "nvme")
            sized = size(cluster, model, base, training, assumptions)
            self.result.examined += 1
        return base, start, {start: (base, sized)}

    def no_fit(self, shape: Shape, mbs: int, zero: int, offload: str, frugal: Layout, sized: Sized) -> None:
        """Even the most frugal recompute level does not fit: remember the closest, say why (once)."""
        self.last_fitted = False
        short = shortfall(sized)
        if self.closest is None or short < self.closest.shortfall:
            self.closest = Closest(frugal, sized, short)
        if mbs == self.mbs_options[0] and shape.vpp == 1 and \
                self.may_log((self.framework, shape.tp, shape.pp, shape.cp, shape.ep, zero, offload)):
            have, want = need_and_capacity(sized)
            self.result.events.append(PlanEvent("reject", short_of(sized, self.recomputes[-1]), frugal.id,
                                                have=have, want=want))

    def explore(self, shape: Shape, b: tuple, mbs: int, variants_of_shape: list | None, levels: dict | None = None,
                threshold: float | None = None) -> bool:
        """Add the fitting (ZeRO, recompute, offload) options of one shape (b: its base_of) and micro-batch;
        False if none fits. With variants_of_shape (the coarse pass), each also gets their floors. With levels
        ({(zero, offload): first recompute index that fitted the coarse layout}), a variant tries
        only those: memory grows with the micro-batch and the virtual stages (activations per
        micro-batch, chunks in flight), so what did not fit the coarse layout cannot fit it."""
        m = self.gbs // (mbs * shape.dp)
        shape_fits = False
        explore_option = self.explore_option
        for zero in self.zero_stages[shape.pp > 1]:
            for offload in self.offloads:
                # DeepSpeed offload_config.py: parameter offload needs ZeRO-3; optimizer offload a stage >= 1.
                if (offload == "optimizer+params" and zero != 3) or (offload == "optimizer" and zero < 1):
                    continue
                if levels is not None and (zero, offload) not in levels:
                    continue
                first = 0 if levels is None else levels[zero, offload]
                if explore_option(shape, b, mbs, m, zero, offload, first, variants_of_shape, threshold):
                    shape_fits = True
                    if offload == "none":
                        break                                    # offload only when nothing fits
        return shape_fits

    def explore_option(self, shape: Shape, b: tuple, mbs: int, m: int, zero: int, offload: str, first: int,
                       variants_of_shape: list | None, threshold: float | None) -> bool:
        """One (ZeRO, offload) option from recompute index `first` up: whether any level fits. With
        threshold (the fine pass), an option whose sizing needs more recompute than its floor
        assumed is timed only if its floor at that level (estimate.floor_of) is within threshold;
        otherwise it waits in `parked` for a larger threshold (time.shape_floor)."""
        top = self.top
        # The first sizing: at the level the previous layout needed (neighbouring shapes mostly need
        # the same one, and then it is the only sizing), or, after a layout that did not fit at all,
        # at the most frugal level, which alone decides whether anything fits.
        hint = self.level_hint
        start = hint if self.last_fitted and hint is not None and first <= hint < top else top
        sizings = self.first_sizing(shape, mbs, m, zero, offload, start)
        sized_at = self.sized_at
        # Memory only shrinks with more recompute: when the first level does not fit, the most
        # frugal one decides whether any does; then the least level that fits, by bisection.
        sized = sizings[2][start][1]
        if sized.fits and sized.host_fits:
            lo, hi = first, start            # hi fits
        else:
            frugal, sized = sized_at(sizings, top)
            if not (sized.fits and sized.host_fits):
                self.no_fit(shape, mbs, zero, offload, frugal, sized)
                return False
            lo, hi = start + 1, top
        while lo < hi:
            mid = (lo + hi) // 2
            sized = sized_at(sizings, mid)[1]
            if sized.fits and sized.host_fits:
                hi = mid
            else:
                lo = mid + 1
        self.level_hint = hi
        self.last_fitted = True
        if threshold is not None:
            # larger micro-batches of this shape and vpp need at least this level (try_variant)
            self.needed.setdefault((b, shape.vpp, zero, offload), []).append((mbs, hi))
            if hi > first:
                floor = floor_of(sized_at(sizings, hi)[1], (mbs, shape.vpp))
                if floor > threshold:
                    self.parked.setdefault((b, mbs, shape.vpp), []).append((floor, sizings, hi, top))
                    return True
        self.timed(sizings, hi, top, variants_of_shape)
        return True

    def timed(self, sizings: Sizings, hi: int, top: int, variants_of_shape: list | None) -> None:
        """Time the least recompute level that fits (hi) and, while the layout stays tight, more;
        with variants_of_shape (the coarse pass), with the floors of those variants."""
        for i in range(hi, top + 1):
            layout, sized = self.sized_at(sizings, i)
            if sized.fits and sized.host_fits:
                tight = sized.total > self.ties.tight * sized.capacity
                if variants_of_shape is None:
                    step, floor = step_time_of(sized), None
                else:
                    step, floor = step_and_floors(sized, variants_of_shape)
                self.found.append(Candidate(layout, sized, step, floor, tight))
                if tight is False and not self.roomy_seen:
                    self.roomy_seen = True
                    self.best = step
                elif step < self.best and (not tight or not self.roomy_seen):
                    self.best = step
                if not tight:
                    break                                # more recompute is never faster

    # -- coarse pass -------------------------------------------------------------------------------

    def coarse(self) -> None:
        """Every shape at plain 1F1B and its smallest legal micro-batch; the floors of its variants."""
        found, floors, levels, variants = self.found, self.floors, self.levels, self.variants
        legal = shapes(self.cluster, self.model, self.training, self.policy.decisions, self.strategy, self.framework)
        shaped = [(shape, base_of(shape)) for shape in legal]
        variants.update(variants_of(shaped, self.gbs, self.mbs_options))
        for shape, b in shaped:
            if shape.vpp > 1 or b not in variants:
                continue
            mbs = variants[b][0][0]                                  # the smallest legal micro-batch
            n = len(found)
            self.tried.add((b, mbs, 1))
            if self.explore(shape, b, mbs, variants[b]):
                fitting = found[n:]
                self.probe[b] = fitting[0].layout
                if len(fitting) == 1:                   # the usual case: one (ZeRO, offload) option fits
                    floors[b] = dict(fitting[0].floor)
                else:
                    floors[b] = {v: min(c.floor[v] for c in fitting) for v in variants[b]}
                for c in fitting:
                    key = (c.layout.zero_stage, c.layout.offload)
                    levels[b][key] = min(levels[b].get(key, 9), self.recomputes.index(c.layout.recompute))
        self.by_vpp = {(b, s.vpp): s for s, b in shaped}

    # -- fine pass ---------------------------------------------------------------------------------

    def try_variant(self, b: tuple, mbs: int, vpp: int, threshold: float) -> None:
        """Size and time one variant that its floor says could be within threshold. Its options that
        need more recompute than the coarse layout did, by its own sizing or a smaller micro-batch's
        (memory grows with the micro-batch), are timed only when their floor at that level is."""
        key = (b, mbs, vpp)
        if key in self.tried:
            waiting = self.parked.get(key)
            if waiting and min(w[0] for w in waiting) <= threshold:
                self.parked[key] = [w for w in waiting if w[0] > threshold]
                for floor, sizings, hi, top in waiting:
                    if floor <= threshold:
                        self.timed(sizings, hi, top, None)
            return
        if self.failed.get((b, vpp), mbs + 1) <= mbs:
            return                                               # a smaller one did not fit
        levels = self.levels[b]
        start = dict(levels)
        for zero, offload in levels:
            for smaller, level in self.needed.get((b, vpp, zero, offload), ()):
                if smaller <= mbs and level > start[zero, offload]:
                    start[zero, offload] = level
        # One option (the usual case) known to need more recompute than the coarse layout did: its
        # floor at that level (otherwise the coarse floor, which the caller checked, holds)
        if len(start) == 1 and start != levels and self.level_floor(key, next(iter(start.values()))) > threshold:
            return                               # not tried: a larger threshold may come back to it
        self.tried.add(key)
        if not self.explore(self.by_vpp[b, vpp], b, mbs, None, start, threshold):
            self.failed[b, vpp] = mbs

    def level_floor(self, key: tuple, level: int) -> float:
        """The floor of variant key = (base, micro-batch, vpp) at recompute index `level`."""
        hit = self.level_floors.get(key)
        if hit is None or hit[0] != level:
            b, mbs, vpp = key
            layout = build_unchecked(Layout, dict(self.probe[b].__dict__, micro_batch_size=mbs, vpp=vpp,
                                                  num_microbatches=self.gbs // (mbs * b[4]),
                                                  recompute=self.recomputes[level]))
            hit = self.level_floors[key] = (level, floor_of_layout(self.cluster, self.model, layout, self.training,
                                                                   self.assumptions))
        return hit[1]

    def refine(self, b: tuple, threshold: float) -> None:
        """The variants of one shape whose floor is within threshold."""
        for (mbs, vpp), floor in self.floors[b].items():
            if floor <= threshold:
                self.try_variant(b, mbs, vpp, threshold)

    def pick_key(self) -> tuple:
        group = [c for c in self.found if not c.tight] or self.found
        band, ties = self.band, self.ties
        return min((tie_break(c, ties), c.step_time) for c in group if c.step_time <= band)

    def favourable_key(self, b: tuple, mbs: int, vpp: int) -> tuple:
        key = self.favourable.get((b, mbs, vpp))
        if key is None:
            ties = self.ties
            key = self.favourable[b, mbs, vpp] = ties.pick(tie_terms(b[0], b[1], b[2], b[3], vpp, self.offloads[0],
                                                                     self.zero_min, self.recomputes[0], mbs, False,
                                                                     ties))
        return key

    def fine(self) -> None:
        """Only the variants that could change the choice. No variant runs faster than its floor
        (time.variant_floors). The choice is the tie-break's first among the layouts within ties.band
        of the best, in the group it is made in (layouts with headroom; the tight ones when none has
        any). So: (1) every variant whose floor is below the best so far, until none is left: the
        best is then final; (2) in tie-break order, the variants whose floor is within the band and
        whose tie-break key (at its most favourable: least recompute, lowest ZeRO stage, memory
        headroom) does not come after the current pick's. tests/test_planner_refine.py checks that
        this makes the choice trying every variant makes."""
        floors, tried, parked, try_variant = self.floors, self.tried, self.parked, self.try_variant
        pending = sorted([(floor, b, mbs, vpp) for b in floors for (mbs, vpp), floor in floors[b].items()
                          if (b, mbs, vpp) not in tried], key=itemgetter(0))     # stable: ties keep this order
        while True:
            before = (len(tried), len(self.found))
            for floor, b, mbs, vpp in pending:
                if floor > self.best:
                    break
                try_variant(b, mbs, vpp, self.best)
            if (len(tried), len(self.found)) == before:  # the best can rise once, when the first roomy layout appears
                break
        band = self.band = self.best * (1 + self.ties.band)
        hopefuls = sorted((self.favourable_key(b, mbs, vpp), floor, b, mbs, vpp)
                          for floor, b, mbs, vpp in pending
                          if floor <= band and ((b, mbs, vpp) not in tried or parked.get((b, mbs, vpp))))
        current = self.pick_key()
        for key, floor, b, mbs, vpp in hopefuls:
            if (key, floor) > current:
                break
            if (b, mbs, vpp) not in tried or parked.get((b, mbs, vpp)):
                try_variant(b, mbs, vpp, band)
                current = self.pick_key()

    # -- the choice and its alternatives ---------------------------------------------------------

    def settle(self):
        """Pick the choice and its alternatives, trying every variant that could change the list of
        alternatives, until it stands; (chosen, alternatives, rejected) as `pick` returns them. When the
        tie-break's first draws the audit's advice, every variant within the band is sized first, so that
        a near-tie without that advice is found wherever it is."""
        every = sorted([(floor, b, mbs, vpp) for b in self.floors for (mbs, vpp), floor in self.floors[b].items()],
                       key=itemgetter(0))
        band_sized = False
        while True:
            # (a comparison-only search, with no alternatives (families.other_family), gives its family's
            # best by the tie-break alone; a move to that family searches it again, advice included)
            chosen, alternatives, rejected, passed_over = pick(ordered(self.found, self.ties), self.check_fn,
                                                               self.checked,
                                                  self.max_alternatives, self.ties.band if self.max_alternatives else 0.0)
            if chosen is not None and chosen.advice and self.max_alternatives and not band_sized:
                band_sized = True
                before = len(self.found)
                for b in self.floors:
                    self.refine(b, self.best * (1 + self.ties.band))
                if len(self.found) != before:
                    continue
            if chosen is None or not self.complete_alternatives(chosen, alternatives, rejected, every):
                return chosen, alternatives, rejected, passed_over

    def complete_alternatives(self, chosen: Candidate, alternatives: list[Candidate], rejected: list,
                              every: list) -> bool:
        """Try the variants that could enter the list of alternatives; whether any new layout fit.

        The alternatives an exhaustive search would list, each at its best. `ordered` lists the
        near-ties (within the band) by the tie-break, then the rest by step time. So a variant can
        change the list only if it could come before the entry it would displace: its own shape's
        entry when that shape is listed, else the last one listed. Before an entry outside the
        band: any layout in the band or faster; before one inside: one in the band whose tie-break
        key, at its most favourable, and floor come first. Every variant that could is tried (all
        of them when a tight layout closes the list, or fewer were listed than asked because the
        audit refused some); the list is made again until it stands. The choice does not move
        (step 2 of `fine`)."""
        band = self.best * (1 + self.ties.band)
        max_alternatives = self.max_alternatives
        entries: dict[tuple, Candidate] = {}      # (tp, pp, cp, ep, ZeRO stage) -> its listed layout
        for c in (chosen, *alternatives):
            lay = c.layout
            entries[lay.tp, lay.pp, lay.cp, lay.ep, lay.zero_stage] = c
        last = alternatives[-1] if max_alternatives and len(alternatives) == max_alternatives else None
        everything = bool((alternatives and alternatives[-1].tight and not chosen.tight)
                          or (len(alternatives) < max_alternatives and rejected))
        limit = float("inf") if everything else max(band, *(c.step_time for c in entries.values()))
        before = len(self.found)
        for floor, b, mbs, vpp in every:
            if floor > limit:
                break
            threshold = float("inf") if everything else None
            for zero, _ in self.levels[b] if not everything else ():
                entry = entries.get((*b[:4], zero), last)     # an unlisted key competes with the last one
                if entry is None or entry is chosen:
                    continue                                  # nothing to displace, or the choice (step 2)
                t = self.could_precede(b, mbs, vpp, floor, entry, band)
                if t is not None and (threshold is None or t > threshold):
                    threshold = t
            if threshold is not None:
                self.try_variant(b, mbs, vpp, threshold)
        return len(self.found) != before

    def could_precede(self, b: tuple, mbs: int, vpp: int, floor: float, entry: Candidate, band: float) -> float | None:
        """The threshold to try the variant against, or None when it cannot come before entry."""
        if entry.step_time > band:
            reach = max(band, entry.step_time)
            return reach if floor <= reach else None
        if floor > band:
            return None
        key = self.favourable_key(b, mbs, vpp)
        return band if (key, floor) <= (tie_break(entry, self.ties), entry.step_time) else None

    def best_of_missing_kinds(self, listed: list[Layout]) -> list[Candidate]:
        """The best layout of each kind (KINDS) the search found that the choice and its alternatives
        leave out, so that the answer always shows what sharded data parallelism, TP x PP and, for MoE,
        expert parallelism would give (issue 17 item 4). Exact: the kind's shapes are refined until no
        variant's floor is below its best, as the fine pass does for the choice; legal: the audit's
        legality rules screen it like any pick."""
        kinds = [k for k in KINDS if k.applies(self.model)]
        extra = []
        for kind in kinds:
            if any(kind.holds(layout) for layout in listed):
                continue
            best = self.best_of_kind(kind)
            if best is not None:
                extra.append(best)
        return extra

    def best_of_kind(self, kind: Kind) -> Candidate | None:
        """The first legal layout of `kind` in the order the choice is made in, as trying every variant
        would find it (best_where)."""
        best = self.best_where(lambda c: kind.holds(c.layout) and not self.screened(c).errors,
                               [b for b in self.floors if kind.holds_shape(b)])
        if best is not None:
            best.kind = kind.name
        return best

    def best_where(self, keep: Callable[[Candidate], bool], bases: list) -> Candidate | None:
        """The first layout `keep` accepts in the order the choice is made in (layouts with headroom
        first, then by step time), as trying every variant would find it: the variants of `bases` whose
        floor is within the current best's step time are sized until none is left (all of them while
        the best is tight, since a roomy one would come first whatever its time)."""
        while True:
            best = next((c for c in sorted(self.found, key=lambda c: (c.tight, c.step_time)) if keep(c)), None)
            limit = float("inf") if best is None or best.tight else best.step_time
            before = len(self.found)
            for b in bases:
                self.refine(b, limit)
            if len(self.found) == before:
                return best

    def screened(self, cand: Candidate):
        """The audit's Screening of a candidate (cached across the search); sets its advice."""
        screening = self.checked.get(id(cand))
        if screening is None:
            screening = self.checked[id(cand)] = self.check_fn(cand.layout, cand.estimate)
            cand.advice = screening.advice
        return screening

    def explain_advice(self, chosen: Candidate) -> None:
        """Why the choice still draws each advice of its own audit (pick prefers a near-tie without it):
        a note naming the advice and the fastest layout without it (best_where), with its cost."""
        kept = advised(chosen)
        for rule_id, message in chosen.advice or ():
            best = self.best_where(lambda c: not self.screened(c).errors and rule_id not in advised(c), list(self.floors))
            fastest = min(c.step_time for c in self.found if c.tight is chosen.tight)
            self.result.events.append(PlanEvent("note", advice_note(rule_id, message, chosen, best, kept, self.ties,
                                                                    fastest), chosen.layout.id, rule_id=rule_id))

    def report(self, chosen: Candidate | None, rejected: list) -> None:
        """The audit's refusals (the first few one by one, then counted), and what the search sized."""
        result = self.result
        for rule_id, message, layout_id in rejected[:MAX_REJECT_EVENTS]:
            result.events.append(PlanEvent("reject", f"rule {rule_id}: {message}", layout_id, rule_id=rule_id))
        if len(rejected) > MAX_REJECT_EVENTS:
            counts = Counter(r[0] for r in rejected[MAX_REJECT_EVENTS:])
            refused = ", ".join(f"rule {r} ({n})" for r, n in counts.most_common())
            result.events.append(PlanEvent("note", f"{len(rejected) - MAX_REJECT_EVENTS} more layouts refused by the "
                                                   f"audit: {refused}"))
        if chosen is None:
            # Layouts fit, but the audit refused every one: say which rule, not "nothing fits".
            rule_id, message = Counter((r[0], r[1]) for r in rejected).most_common(1)[0][0]
            result.blocked_by = (rule_id, message)
            result.events.append(PlanEvent("reject", f"every layout that fits is refused by the audit; first of all by "
                                                     f"rule {rule_id}: {message}", rule_id=rule_id))
        else:
            note_search(result, self.found, self.floors, self.variants, self.tried, self.ties)

    def rank_everything(self) -> None:
        """Every variant of every shape, for benchmarks and tests; the answer is already made."""
        examined, nearest = self.result.examined, self.closest
        for b in self.floors:
            self.refine(b, float("inf"))
        self.result.ranking = [(c.layout, c.estimate) for c in ordered(self.found, self.ties)]
        self.result.examined, self.closest = examined, nearest

    def choice(self, chosen: Candidate, alternatives: list[Candidate]):
        result = self.result
        if chosen.tight:
            result.events.append(PlanEvent("note", f"every fitting layout uses more than {self.ties.tight:.0%} "
                                                   "of GPU memory: expect little room for fragmentation"))
        split_note = pipeline_note(chosen.layout, self.model)
        if split_note is not None:
            result.events.append(PlanEvent("note", split_note, chosen.layout.id))
        fastest = min(c.step_time for c in self.found if c.tight is chosen.tight)
        result.alternatives += [Alternative(c.layout, c.estimate, (f"best {c.kind} layout: " if c.kind else "")
                                            + why_lost(c, chosen, fastest, self.ties), kind=c.kind)
                                for c in alternatives]
        return chosen.layout, chosen.estimate
