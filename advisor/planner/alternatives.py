"""The choice of one search and its alternatives, in one place: the pick among the layouts that fit
(screened by the audit), the alternatives an exhaustive search would list, the best of each kind of
layout the list leaves out, the notes on the audit's advice, each alternative's reason, and the
entries the other family adds to the answer."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Callable, NamedTuple

from ..inputs.layout import Layout
from ..inputs.specs import Model
from ..rulebook.actions import Decisions
from .candidates import Alternative, Candidate, PlanResult
from .events import PlanEvent
from .job import MAX_REJECT_EVENTS, Family, Job, Outcome
from .messages import advice_move_note, advice_note, note_search, pipeline_note
from .ranking import NEAR_TIE, ordered, tie_break, why_lost
from .search import Search


class Kind(NamedTuple):
    """A kind of layout the alternatives always show when one fits: its `name` in the alternative's
    reason, whether it concerns MoE models only (`moe_only`), the test on (tp, pp, ep), and the
    highest ZeRO stage it has (None: any)."""
    name: str
    moe_only: bool
    test: Callable[[int, int, int], bool]
    zero_max: int | None = None

    def applies(self, model: Model) -> bool:
        return model.is_moe or not self.moe_only

    def holds(self, layout: Layout) -> bool:
        zero_ok = self.zero_max is None or layout.zero_stage <= self.zero_max
        return zero_ok and self.test(layout.tp, layout.pp, layout.ep)

    def holds_shape(self, b) -> bool:       # b: a space.Base; any ZeRO stage
        return self.test(b.tp, b.pp, b.ep)


# The kinds a reader compares: fully sharded data parallelism alone (ZeRO-3 / FSDP / Megatron-FSDP
# at tp = pp = 1); TP x PP with the states at most optimizer- and gradient-sharded (Megatron-LM's
# distributed optimizer, ZeRO-1/2), the layout Megatron's own recipes ran before Megatron-FSDP, so
# that a choice that mixes TP with ZeRO-3 does not hide it; expert parallelism.
KINDS = (
    Kind("sharded data-parallel (tp = pp = 1)", False, lambda tp, pp, ep: tp * pp == 1),
    Kind("TP x PP (ZeRO <= 2)", False, lambda tp, pp, ep: tp * pp > 1, zero_max=2),
    Kind("expert-parallel", True, lambda tp, pp, ep: ep > 1),
)


class Picked(NamedTuple):
    """What `pick` found: the choice (None: the audit refused every layout), its alternatives, the
    refusals [(rule id, message, layout id)] in the order met, and the tie-break's first legal
    layout when the audit's advice passed it over (else None)."""
    chosen: Candidate | None
    alternatives: list[Candidate]
    rejected: list[tuple[str, str, str]]
    passed_over: Candidate | None


def advised(cand: Candidate) -> set[str]:
    """The rule ids of the audit's advice on a screened candidate."""
    return {rule_id for rule_id, _ in cand.advice or ()}


def screened(search: Search, cand: Candidate):
    """The audit's Screening of a candidate (cached across the search); sets its advice."""
    screening = search.checked.get(id(cand))
    if screening is None:
        screening = search.checked[id(cand)] = search.job.check_fn(cand.layout, cand.estimate)
        cand.advice = screening.advice
    return screening


def pick(search: Search, ranked: list[Candidate], max_alternatives: int, band: float) -> Picked:
    """The choice and up to max_alternatives more of other shapes, in `ranked`'s order, skipping every
    layout the audit's legality rules refuse. The choice is the first legal layout, unless its own
    audit advises against it (an "advice"-tier warning) and a legal near-tie (within `band` of the
    fastest of its group) draws only part of that advice: then the first such layout in the tie
    order, and so on from it, so that the pick never carries advice that a near-tie avoids (band 0:
    the first legal layout)."""
    rejected: dict[int, tuple[str, str, str]] = {}       # id(candidate) -> its refusal, in the order met

    def legal(cand: Candidate) -> bool:
        screening = screened(search, cand)
        if screening.errors:
            # The audit's legality rules have the last word: never return what they call an error.
            rule_id, message = screening.errors[0]
            rejected.setdefault(id(cand), (rule_id, message, cand.layout.id))
        return not screening.errors

    chosen = first = next((c for c in ranked if legal(c)), None)
    if chosen is None:
        return Picked(None, [], list(rejected.values()), None)
    if chosen.advice and band > 0:
        limit = min(c.step_time for c in ranked if c.tight is chosen.tight) * (1 + band)
        for cand in ranked[ranked.index(chosen) + 1:]:
            if cand.tight is not chosen.tight or cand.step_time > limit:
                continue
            if legal(cand) and advised(cand) < advised(chosen):
                chosen = cand
                if not chosen.advice:
                    break
    alternatives = []
    listed = {(chosen.layout.tp, chosen.layout.pp, chosen.layout.cp, chosen.layout.ep, chosen.layout.zero_stage)}
    for cand in ranked:
        if len(alternatives) >= max_alternatives:
            break
        layout = cand.layout
        shape = (layout.tp, layout.pp, layout.cp, layout.ep, layout.zero_stage)
        if shape in listed or not legal(cand):
            continue
        listed.add(shape)
        alternatives.append(cand)
    return Picked(chosen, alternatives, list(rejected.values()), first if first is not chosen else None)


def search_family(job: Job, family: Family, logged: frozenset = frozenset()) -> Outcome:
    """One family's search and its choice: its Outcome. `logged`: the memory rejections the plan's
    earlier searches wrote to the trace (not repeated)."""
    search = Search(job, family, logged)
    if not search.run():
        return outcome_of(search, None)
    chosen, alternatives, blocked_by, ranking = choose(search)
    return outcome_of(search, chosen, tuple(alternatives), blocked_by, ranking)


def outcome_of(search: Search, chosen: Candidate | None, alternatives: tuple = (), blocked_by=None,
               ranking=None) -> Outcome:
    return Outcome(search.family, chosen, search.closest, alternatives, tuple(search.events), search.examined,
                   ranking, blocked_by, frozenset(search.newly_logged),
                   lambda listed: best_of_missing_kinds(search, listed))


def choose(search: Search):
    """The search's choice and what the answer says of it: (chosen or None, its alternatives with
    their reasons, the audit rule that refused every layout when none is chosen, the full ranking
    when the job keeps it); the trace's events go to search.events."""
    picked = settle(search)
    chosen, alternatives = picked.chosen, picked.alternatives
    if chosen is not None and search.family.max_alternatives:
        alternatives += best_of_missing_kinds(search, [c.layout for c in (chosen, *alternatives)])
        explain_advice(search, chosen)
        if picked.passed_over is not None:
            search.events.append(PlanEvent("note", advice_move_note(picked.passed_over, chosen, search.ties),
                                           chosen.layout.id))
    blocked_by = report(search, chosen, picked.rejected)
    ranking = rank_everything(search) if search.job.keep_ranking else None
    if chosen is None:
        return None, [], blocked_by, ranking
    return chosen, reasons(search, chosen, alternatives), blocked_by, ranking


def settle(search: Search) -> Picked:
    """Pick the choice and its alternatives, trying every variant that could change the list of
    alternatives, until it stands. When the tie-break's first draws the audit's advice, every variant
    within the band is sized first, so that a near-tie without that advice is found wherever it is."""
    every = search.every
    max_alternatives = search.family.max_alternatives
    band_sized = False
    while True:
        # (a comparison-only search, with no alternatives (families.compare_other), gives its family's
        # best by the tie-break alone; a move to that family searches it again, advice included)
        picked = pick(search, ordered(search.found, search.ties), max_alternatives,
                      search.ties.band if max_alternatives else 0.0)
        chosen = picked.chosen
        if chosen is not None and chosen.advice and max_alternatives and not band_sized:
            band_sized = True
            before = len(search.found)
            for b in search.coarse.floors:
                search.refine(b, search.best * (1 + search.ties.band))
            if len(search.found) != before:
                continue
        if chosen is None or not complete_alternatives(search, picked, every):
            return picked


def complete_alternatives(search: Search, picked: Picked, every: list) -> bool:
    """Try the variants that could enter the list of alternatives; whether any new layout fit.

    The alternatives an exhaustive search would list, each at its best. `ordered` lists the
    near-ties (within the band) by the tie-break, then the rest by step time. So a variant can
    change the list only if it could come before the entry it would displace: its own shape's
    entry when that shape is listed, else the last one listed. Before an entry outside the
    band: any layout in the band or faster; before one inside: one in the band whose tie-break
    key, at its most favourable, and floor come first. Every variant that could is tried (all
    of them when a tight layout closes the list, or fewer were listed than asked because the
    audit refused some); the list is made again until it stands. The choice does not move
    (step 2 of the fine pass)."""
    max_alternatives = search.family.max_alternatives
    if not max_alternatives:
        return False          # a comparison search lists only its choice, which does not move
    chosen, alternatives = picked.chosen, picked.alternatives
    band = search.best * (1 + search.ties.band)
    entries: dict[tuple, Candidate] = {}      # (tp, pp, cp, ep, ZeRO stage) -> its listed layout
    for c in (chosen, *alternatives):
        lay = c.layout
        entries[lay.tp, lay.pp, lay.cp, lay.ep, lay.zero_stage] = c
    last = alternatives[-1] if max_alternatives and len(alternatives) == max_alternatives else None
    everything = bool((alternatives and alternatives[-1].tight and not chosen.tight)
                      or (len(alternatives) < max_alternatives and picked.rejected))
    limit = float("inf") if everything else max(band, *(c.step_time for c in entries.values()))
    before = len(search.found)
    levels = search.coarse.levels
    for floor, key in every:
        if floor > limit:
            break
        threshold = float("inf") if everything else None
        for zero, _ in levels[key.base] if not everything else ():
            entry = entries.get((*key.base[:4], zero), last)     # an unlisted key competes with the last one
            if entry is None or entry is chosen:
                continue                                  # nothing to displace, or the choice (step 2)
            t = could_precede(search, key, floor, entry, band)
            if t is not None and (threshold is None or t > threshold):
                threshold = t
        if threshold is not None:
            search.try_variant(key, threshold)
    return len(search.found) != before


def could_precede(search: Search, key, floor: float, entry: Candidate, band: float) -> float | None:
    """The threshold to try the variant against, or None when it cannot come before entry."""
    if entry.step_time > band:
        reach = max(band, entry.step_time)
        return reach if floor <= reach else None
    if floor > band:
        return None
    fav = search.favourable_key(key)
    return band if (fav, floor) <= (tie_break(entry, search.ties), entry.step_time) else None


def best_of_missing_kinds(search: Search, listed: list[Layout]) -> list[Candidate]:
    """The best layout of each kind (KINDS) the search found that `listed` leaves out, so that the
    answer always shows what sharded data parallelism, TP x PP and, for MoE, expert parallelism would
    give. Exact: the kind's shapes are refined until no variant's floor is below its best, as the
    fine pass does for the choice; legal: the audit's legality rules screen it like any pick."""
    extra = []
    for kind in KINDS:
        if not kind.applies(search.job.model) or any(kind.holds(layout) for layout in listed):
            continue
        best = best_where(search, lambda c: kind.holds(c.layout) and not screened(search, c).errors,
                          [b for b in search.coarse.floors if kind.holds_shape(b)])
        if best is not None:
            best.kind = kind.name
            extra.append(best)
    return extra


def best_where(search: Search, keep: Callable[[Candidate], bool], bases: list) -> Candidate | None:
    """The first layout `keep` accepts in the order the choice is made in (layouts with headroom
    first, then by step time), as trying every variant would find it: the variants of `bases` whose
    floor is within the current best's step time are sized until none is left (all of them while
    the best is tight, since a roomy one would come first whatever its time)."""
    while True:
        best = first_kept(search.found, keep)
        limit = float("inf") if best is None or best.tight else best.step_time
        before = len(search.found)
        for b in bases:
            search.refine(b, limit)
        if len(search.found) == before:
            return best


def first_kept(found: list[Candidate], keep: Callable[[Candidate], bool]) -> Candidate | None:
    """The first candidate `keep` accepts, layouts with headroom first, then by step time (a stable
    order: decorated tuples, the index last, instead of a key function called per candidate)."""
    for *_, i in sorted([(c.tight, c.step_time, i) for i, c in enumerate(found)]):
        if keep(found[i]):
            return found[i]
    return None


def explain_advice(search: Search, chosen: Candidate) -> None:
    """Why the choice still draws each advice of its own audit (pick prefers a near-tie without it):
    a note naming the advice and the fastest layout without it (best_where), with its cost."""
    kept = advised(chosen)
    for rule_id, message in chosen.advice or ():
        best = best_where(search, lambda c: not screened(search, c).errors and rule_id not in advised(c),
                          list(search.coarse.floors))
        fastest = min(c.step_time for c in search.found if c.tight is chosen.tight)
        search.events.append(PlanEvent("note", advice_note(rule_id, message, chosen, best, kept, search.ties,
                                                           fastest), chosen.layout.id, rule_id=rule_id))


def report(search: Search, chosen: Candidate | None, rejected: list) -> tuple[str, str] | None:
    """The audit's refusals (the first few one by one, then counted), and what the search sized; the
    (rule id, message) that refused every layout that fits, when none is chosen."""
    events = search.events
    for rule_id, message, layout_id in rejected[:MAX_REJECT_EVENTS]:
        events.append(PlanEvent("reject", f"rule {rule_id}: {message}", layout_id, rule_id=rule_id))
    if len(rejected) > MAX_REJECT_EVENTS:
        counts = Counter(r[0] for r in rejected[MAX_REJECT_EVENTS:])
        refused = ", ".join(f"rule {r} ({n})" for r, n in counts.most_common())
        events.append(PlanEvent("note", f"{len(rejected) - MAX_REJECT_EVENTS} more layouts refused by the "
                                        f"audit: {refused}"))
    if chosen is not None:
        events += note_search(search.found, search.coarse.floors, search.coarse.variants, search.fine.tried,
                              search.ties)
        return None
    # Layouts fit, but the audit refused every one: say which rule, not "nothing fits".
    rule_id, message = Counter((r[0], r[1]) for r in rejected).most_common(1)[0][0]
    events.append(PlanEvent("reject", f"every layout that fits is refused by the audit; first of all by "
                                      f"rule {rule_id}: {message}", rule_id=rule_id))
    return rule_id, message


def rank_everything(search: Search) -> list:
    """Every variant of every shape, best first, for benchmarks and tests; the answer is already
    made, so what this sizes is not counted as examined."""
    examined, nearest = search.examined, search.closest
    for b in search.coarse.floors:
        search.refine(b, float("inf"))
    search.examined, search.closest = examined, nearest
    return [(c.layout, c.estimate) for c in ordered(search.found, search.ties)]


def reasons(search: Search, chosen: Candidate, alternatives: list[Candidate]) -> list[Alternative]:
    """The notes on the choice (tight memory, an interleaved split) and each alternative's reason."""
    if chosen.tight:
        search.events.append(PlanEvent("note", f"every fitting layout uses more than {search.ties.tight:.0%} "
                                               "of GPU memory: expect little room for fragmentation"))
    split_note = pipeline_note(chosen.layout, search.job.model)
    if split_note is not None:
        search.events.append(PlanEvent("note", split_note, chosen.layout.id))
    fastest = min(c.step_time for c in search.found if c.tight is chosen.tight)
    return [Alternative(c.layout, c.estimate, (f"best {c.kind} layout: " if c.kind else "")
                        + why_lost(c, chosen, fastest, search.ties), kind=c.kind)
            for c in alternatives]


# -- the other family's entries (families.compare_other, families.move_to) -------------------------

def listed_with_reason(result: PlanResult, side: Outcome, strategy: str, decisions: Decisions) -> PlanResult:
    """The other family's best among the alternatives, with the rule that preferred the chosen family;
    once: when the chosen family's search listed it already (e.g. Megatron-FSDP at tp = pp = 1), that
    entry says so."""
    (layout, est), family, framework = side.pick, side.family.strategy, side.family.framework
    rule = decisions.strategy[1] if decisions.strategy else "the default strategy"
    preferred = f"rule {rule} prefers {strategy} for this cluster and model"
    ours = result.estimate.step_time
    alternatives = list(result.alternatives)
    listed = next((i for i, a in enumerate(alternatives) if a.layout == layout), None)
    if listed is None:
        alternatives.append(Alternative(layout, est, (
            f"family {family} ({framework}): est. step {est.step_time:.2f} s ({est.step_time / ours - 1:+.0%}); "
            f"{preferred}"), family))
    else:
        a = alternatives[listed]
        alternatives[listed] = Alternative(a.layout, a.estimate, (
            f"{a.reason}; also the best of family {family} ({framework}): {preferred}"), family, a.kind)
    return replace(result, alternatives=tuple(alternatives))


def with_kinds(result: PlanResult, side: Outcome) -> PlanResult:
    """The best of each kind of layout the other family has that the answer does not show yet
    (alternatives.KINDS), each with its step time against the choice's."""
    family, framework, ours = side.family.strategy, side.family.framework, result.estimate.step_time
    found = side.missing_kinds([result.layout, *(a.layout for a in result.alternatives)])
    return replace(result, alternatives=result.alternatives + tuple(Alternative(cand.layout, cand.estimate, (
        f"best {cand.kind} layout, family {family} ({framework}): est. step {cand.estimate.step_time:.2f} s "
        f"({cand.estimate.step_time / ours - 1:+.0%})"), family, cand.kind) for cand in found))


def set_aside(result: PlanResult, step_time: float, rule: str) -> Alternative:
    """The rules' zero-dp choice as an alternative, once the choice moved to a family `step_time` (s)
    fast enough to set aside `rule`'s preference."""
    ours = result.estimate.step_time
    return Alternative(result.layout, result.estimate, (
        f"family zero-dp ({result.framework}): est. step {ours:.2f} s ({ours / step_time - 1:+.0%}); "
        f"rule {rule} prefers it, but the estimate puts it beyond the {NEAR_TIE:.1%} band"), "zero-dp")
