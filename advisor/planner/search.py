"""One family's search: size the shapes the space allows, keep the layouts that fit, coarse to fine
(the algorithm: planner/__init__.py). The choice among them and its alternatives: alternatives.py."""

from __future__ import annotations

from .._unchecked import build_unchecked
from ..costmodel.sizing import Sized, floor_of, floor_of_layout, resize, size, step_and_floors, step_time_of
from ..inputs.layout import Layout
from .candidates import Candidate, Closest
from .events import PlanEvent
from .job import MAX_REJECT_EVENTS, Family, Job
from ..results.audit import Screening
from .messages import host_need, host_short, need_and_capacity, short_of, shortfall
from .ranking import tie_break, tie_terms
from .space import MBS_OPTIONS, OFFLOAD, RECOMPUTE, Base, Shape, shapes, stages, variants_of
from .state import Coarse, Fine, Option, Parked, Sizings, Variant


class Search:
    """One search of one family: `run()` sizes its layouts; alternatives.search_family makes its
    Outcome. Its state (found, coarse, fine, best) is its own: it writes to nothing else."""

    def __init__(self, job: Job, family: Family, logged: frozenset = frozenset()):
        self.job, self.family = job, family
        self.gbs = job.training.global_batch_size
        self.mbs_options = (job.training.micro_batch_size,) if job.training.micro_batch_size else MBS_OPTIONS
        # selective recompute is Megatron's
        self.recomputes = ("none", "full") if family.framework == "deepspeed" else RECOMPUTE
        self.top = len(self.recomputes) - 1                  # the most frugal recompute level
        self.offloads = OFFLOAD if family.allow_offload else ("none",)
        # the ZeRO stages to try, by pp > 1 (all that stages() reads of pp), worked out once per search
        self.zero_stages = {pipelined: stages(family.policy.zero_stages, family.framework, 2 if pipelined else 1)
                            for pipelined in (False, True)}
        self.zero_min = min(self.zero_stages[False])
        # the options to try, by pp > 1, each ZeRO stage's in offload order; DeepSpeed offload_config.py:
        # parameter offload needs ZeRO-3, optimizer offload a stage >= 1
        self.options = {pipelined: [[Option(zero, offload) for offload in self.offloads
                                     if not ((offload == "optimizer+params" and zero != 3)
                                             or (offload == "optimizer" and zero < 1))]
                                    for zero in self.zero_stages[pipelined]]
                        for pipelined in (False, True)}
        self.ties = job.ties(family.policy.tie_order)
        self.found: list[Candidate] = []
        self.closest: Closest | None = None
        self.events: list[PlanEvent] = []
        self.examined = 0
        self.logged, self.newly_logged = logged, set()     # memory rejections in the trace: before, by this one
        # the best step time in the group the choice is made in (layouts with headroom, else all)
        self.best, self.roomy_seen = float("inf"), False
        self.band = float("inf")               # ties.band above the best, once the fine pass has settled it
        self.level_hint: int | None = None   # the recompute level the last explored layout needed
        self.last_fitted = False             # whether the last explored (shape, ZeRO, offload) fitted at all
        self.coarse, self.fine = Coarse(), Fine()
        self.every: list[tuple[float, Variant]] = []   # every variant of the shapes that fit, by floor
        self.checked: dict[int, Screening] = {}   # id(candidate) -> the audit's Screening, once asked

    def run(self) -> bool:
        """Size the shapes coarse to fine; whether any layout fits."""
        self.coarse_pass()
        if not self.found:
            return False
        self.fine_pass()
        return True

    # -- sizing one shape ------------------------------------------------------------------------

    def layout_for(self, shape: Shape, mbs: int, option: Option, recompute: str, device: str = "cpu") -> Layout:
        # Valid by construction (every degree >= 1, literals from the closed sets above): built
        # without re-validation, as this is the innermost loop of the search.
        return build_unchecked(Layout, {
            "framework": self.family.framework, "tp": shape.tp, "pp": shape.pp, "dp": shape.dp, "cp": shape.cp,
            "ep": shape.ep, "etp": shape.etp if shape.ep > 1 else None, "vpp": shape.vpp, "overlap_p2p_comm": True,
            "sp": shape.tp > 1 and self.family.policy.sp, "zero_stage": option.zero, "micro_batch_size": mbs,
            "num_microbatches": self.gbs // (mbs * shape.dp), "recompute": recompute, "offload": option.offload,
            "offload_device": device})

    def sized_at(self, sizings: Sizings, i: int) -> tuple[Layout, Sized]:
        at = sizings.at
        if i not in at:
            # base at another recompute level (layout_for's fields, in its order), sized from
            # base's: the rest of the layout is the same (resize equals size exactly)
            lay = build_unchecked(Layout, dict(sizings.base.__dict__, recompute=self.recomputes[i]))
            at[i] = (lay, resize(at[sizings.start][1], lay))
            self.examined += 1
        return at[i]

    def may_log(self, key: tuple) -> bool:
        """Whether a memory rejection goes to the trace: once per key across the searches of a plan
        (`logged`), at most MAX_REJECT_EVENTS per search."""
        if key in self.logged or key in self.newly_logged or len(self.newly_logged) >= MAX_REJECT_EVENTS:
            return False
        self.newly_logged.add(key)
        return True

    def first_sizing(self, shape: Shape, mbs: int, option: Option, start: int) -> Sizings:
        job = self.job
        cluster, model, training, assumptions = job.cluster, job.model, job.training, job.assumptions
        base = self.layout_for(shape, mbs, option, self.recomputes[start])
        sized = size(cluster, model, base, training, assumptions)
        self.examined += 1
        if option.offload != "none" and option.zero == 3 and not sized.host_fits:
            # The offloaded states (whatever the recompute level) exceed host memory: ZeRO-Infinity
            # puts them on NVMe instead, which DeepSpeed allows with ZeRO-3 only (offload_config.py;
            # rule deepspeed.nvme-offload-needs-zero3). Their capacity is not checked.
            if self.may_log((self.family.framework, shape.tp, shape.pp, shape.cp, shape.ep, *option, "cpu")):
                self.events.append(PlanEvent("reject", host_short(sized) + "; offloading to NVMe instead",
                                             base.id, have=host_need(sized), want=sized.ctx.host_per_gpu))
            base = self.layout_for(shape, mbs, option, self.recomputes[start], "nvme")
            sized = size(cluster, model, base, training, assumptions)
            self.examined += 1
        return Sizings(base, start, {start: (base, sized)})

    def no_fit(self, shape: Shape, mbs: int, option: Option, frugal: Layout, sized: Sized) -> None:
        """Even the most frugal recompute level does not fit: remember the closest, say why (once)."""
        self.last_fitted = False
        short = shortfall(sized)
        if self.closest is None or short < self.closest.shortfall:
            self.closest = Closest(frugal, sized, short)
        if mbs == self.mbs_options[0] and shape.vpp == 1 and \
                self.may_log((self.family.framework, shape.tp, shape.pp, shape.cp, shape.ep, *option)):
            have, want = need_and_capacity(sized)
            self.events.append(PlanEvent("reject", short_of(sized, self.recomputes[-1]), frugal.id,
                                         have=have, want=want))

    def explore(self, shape: Shape, b: Base, mbs: int, variants_of_shape: list | None, levels: dict | None = None,
                threshold: float | None = None) -> bool:
        """Add the fitting (ZeRO, recompute, offload) options of one shape (b: its Base) and micro-batch; False if
        none fits. With variants_of_shape (the coarse pass), each also gets their floors. With levels
        ({Option: first recompute index that fitted the coarse layout}), a variant tries only
        those: memory grows with the micro-batch and the virtual stages (activations per
        micro-batch, chunks in flight), so what did not fit the coarse layout cannot fit it."""
        shape_fits = False
        explore_option = self.explore_option
        for by_zero in self.options[shape.pp > 1]:
            for option in by_zero:
                if levels is not None and option not in levels:
                    continue
                first = 0 if levels is None else levels[option]
                if explore_option(shape, b, mbs, option, first, variants_of_shape, threshold):
                    shape_fits = True
                    if option.offload == "none":
                        break                                    # offload only when nothing fits
        return shape_fits

    def explore_option(self, shape: Shape, b: Base, mbs: int, option: Option, first: int,
                       variants_of_shape: list | None, threshold: float | None) -> bool:
        """One option from recompute index `first` up: whether any level fits. With threshold (the
        fine pass), an option whose sizing needs more recompute than its floor assumed is timed only
        if its floor at that level (costmodel.sizing.floor_of) is within threshold; otherwise it is
        parked for a larger threshold."""
        top = self.top
        # The first sizing: at the level the previous layout needed (neighbouring shapes mostly need
        # the same one, and then it is the only sizing), or, after a layout that did not fit at all,
        # at the most frugal level, which alone decides whether anything fits.
        hint = self.level_hint
        start = hint if self.last_fitted and hint is not None and first <= hint < top else top
        sizings = self.first_sizing(shape, mbs, option, start)
        sized_at = self.sized_at
        # Memory only shrinks with more recompute: when the first level does not fit, the most
        # frugal one decides whether any does; then the least level that fits, by bisection.
        sized = sizings.at[start][1]
        if sized.fits and sized.host_fits:
            lo, hi = first, start            # hi fits
        else:
            frugal, sized = sized_at(sizings, top)
            if not (sized.fits and sized.host_fits):
                self.no_fit(shape, mbs, option, frugal, sized)
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
            self.fine.needed.setdefault((b, shape.vpp, option), []).append((mbs, hi))
            if hi > first:
                floor = floor_of(sized_at(sizings, hi)[1], (mbs, shape.vpp))
                if floor > threshold:
                    key = Variant(b, mbs, shape.vpp)
                    self.fine.parked.setdefault(key, []).append(Parked(floor, sizings, hi))
                    return True
        self.timed(sizings, hi, variants_of_shape)
        return True

    def timed(self, sizings: Sizings, hi: int, variants_of_shape: list | None) -> None:
        """Time the least recompute level that fits (hi) and, while the layout stays tight, more;
        with variants_of_shape (the coarse pass), with the floors of those variants."""
        at = sizings.at
        for i in range(hi, self.top + 1):
            layout, sized = at[i] if i in at else self.sized_at(sizings, i)     # (no call when sized already)
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

    def coarse_pass(self) -> None:
        """Every shape at plain 1F1B and its smallest legal micro-batch; the floors of its variants."""
        found, coarse = self.found, self.coarse
        job, family = self.job, self.family
        legal = shapes(job.cluster, job.model, job.training, family.policy.decisions, family.strategy,
                       family.framework)
        shaped = [(s, Base(s.tp, s.pp, s.cp, s.ep, s.dp)) for s in legal]
        variants = coarse.variants
        variants.update(variants_of(shaped, self.gbs, self.mbs_options))
        for shape, b in shaped:
            if shape.vpp > 1 or b not in variants:
                continue
            mbs = variants[b][0][0]                                  # the smallest legal micro-batch
            n = len(found)
            self.fine.tried.add(Variant(b, mbs, 1))
            if self.explore(shape, b, mbs, variants[b]):
                self.learn(b, found[n:])
        coarse.by_vpp = {(b, s.vpp): s for s, b in shaped}

    def learn(self, b: Base, fitting: list[Candidate]) -> None:
        """What the coarse layouts of base b that fit say of its variants: their floors, and the least
        recompute each option needed."""
        coarse = self.coarse
        coarse.probe[b] = fitting[0].layout
        if len(fitting) == 1:                   # the usual case: one (ZeRO, offload) option fits
            coarse.floors[b] = dict(fitting[0].floor)
        else:
            coarse.floors[b] = {v: min(c.floor[v] for c in fitting) for v in coarse.variants[b]}
        levels = coarse.levels[b]
        for c in fitting:
            key = Option(c.layout.zero_stage, c.layout.offload)
            levels[key] = min(levels.get(key, 9), self.recomputes.index(c.layout.recompute))

    # -- fine pass ---------------------------------------------------------------------------------

    def try_variant(self, key: Variant, threshold: float) -> None:
        """Size and time one variant that its floor says could be within threshold. Its options that
        need more recompute than the coarse layout did, by its own sizing or a smaller micro-batch's
        (memory grows with the micro-batch), are timed only when their floor at that level is."""
        fine = self.fine
        if key in fine.tried:
            waiting = fine.parked.get(key)
            if waiting and min(w.floor for w in waiting) <= threshold:
                fine.parked[key] = [w for w in waiting if w.floor > threshold]
                for w in waiting:
                    if w.floor <= threshold:
                        self.timed(w.sizings, w.level, None)
            return
        b, mbs, vpp = key
        if fine.failed.get((b, vpp), mbs + 1) <= mbs:
            return                                               # a smaller one did not fit
        levels = self.coarse.levels[b]
        start = dict(levels)
        for option in levels:
            for smaller, level in fine.needed.get((b, vpp, option), ()):
                if smaller <= mbs and level > start[option]:
                    start[option] = level
        # One option (the usual case) known to need more recompute than the coarse layout did: its
        # floor at that level (otherwise the coarse floor, which the caller checked, holds)
        if len(start) == 1 and start != levels and self.level_floor(key, next(iter(start.values()))) > threshold:
            return                               # not tried: a larger threshold may come back to it
        fine.tried.add(key)
        if not self.explore(self.coarse.by_vpp[b, vpp], b, mbs, None, start, threshold):
            fine.failed[b, vpp] = mbs

    def level_floor(self, key: Variant, level: int) -> float:
        """The floor (s) of a variant at recompute index `level`."""
        hit = self.fine.level_floors.get(key)
        if hit is None or hit[0] != level:
            b = key.base
            layout = build_unchecked(Layout, dict(self.coarse.probe[b].__dict__, micro_batch_size=key.mbs,
                                                  vpp=key.vpp, num_microbatches=self.gbs // (key.mbs * b.dp),
                                                  recompute=self.recomputes[level]))
            hit = self.fine.level_floors[key] = (level, floor_of_layout(self.job.cluster, self.job.model, layout,
                                                                        self.job.training, self.job.assumptions))
        return hit[1]

    def refine(self, b: Base, threshold: float) -> None:
        """The variants of one shape whose floor is within threshold."""
        for floor, key in self.coarse.by_base[b]:
            if floor <= threshold:
                self.try_variant(key, threshold)

    def pick_key(self) -> tuple:
        group = [c for c in self.found if not c.tight] or self.found
        band, ties = self.band, self.ties
        # (c.tie_key: tie_break's cached key, a non-empty tuple, saving the call once it is known)
        return min((c.tie_key or tie_break(c, ties), c.step_time) for c in group if c.step_time <= band)

    def favourable_key(self, key: Variant) -> tuple:
        """The variant's tie-break key at its most favourable (least recompute, lowest ZeRO stage, no
        offload, memory headroom); several rounds ask for it again."""
        found = self.fine.favourable.get(key)
        if found is None:
            b, ties = key.base, self.ties
            found = self.fine.favourable[key] = ties.pick(tie_terms(b, key.vpp, self.offloads[0], self.zero_min,
                                                                    self.recomputes[0], key.mbs, False, ties))
        return found

    def fine_pass(self) -> None:
        """Only the variants that could change the choice. No variant runs faster than its floor
        (costmodel.time.variant_floors). The choice is the tie-break's first among the layouts within
        ties.band of the best, in the group it is made in (layouts with headroom; the tight ones when
        none has any). So: (1) every variant whose floor is below the best so far, until none is
        left: the best is then final; (2) in tie-break order, the variants whose floor is within the
        band and whose tie-break key (at its most favourable) does not come after the current
        pick's. tests/test_planner_refine.py checks that this makes the choice trying every variant makes."""
        fine, try_variant = self.fine, self.try_variant
        self.every = self.coarse.pending()
        pending = [p for p in self.every if p[1] not in fine.tried]
        while True:
            before = (len(fine.tried), len(self.found))
            for floor, key in pending:
                if floor > self.best:
                    break
                try_variant(key, self.best)
            if (len(fine.tried), len(self.found)) == before:  # the best can rise once, when the first roomy layout appears
                break
        band = self.band = self.best * (1 + self.ties.band)
        tried, parked = fine.tried, fine.parked     # a variant waits: never tried, or options of it parked
        hopefuls = sorted((self.favourable_key(key), floor, key) for floor, key in pending
                          if floor <= band and (key not in tried or parked.get(key)))
        current = self.pick_key()
        for fav, floor, key in hopefuls:
            if (fav, floor) > current:
                break
            if key not in tried or parked.get(key):
                try_variant(key, band)
                current = self.pick_key()
