"""Ranking: the order of the layouts that fit (`ordered`), the tie-break among near-ties (`Ties`,
`CRITERIA`), and why each alternative ranks after the choice (`why_lost`). The algorithm:
planner/__init__.py."""

from __future__ import annotations

from operator import itemgetter
from typing import Callable, NamedTuple

from ..inputs.uncertainty import EXPERT_MEMORY_SHARE, STEP_TIME_ERROR, memory_headroom
from .candidates import Candidate
from .space import OFFLOAD_RANK, RECOMPUTE_RANK

# Estimates closer than this are near-ties: the estimate's measured error (its median |log(est/measured)|
# over the dev files' runs; advisor.inputs.uncertainty, recomputed by benchmarks/uncertainty.py).
NEAR_TIE = STEP_TIME_ERROR.value
# Among near-ties, a layout using at most the share of GPU memory that 85 in 100 published expert
# layouts use (by this estimate) goes before one using more: where experts had near-tied layouts, they
# kept that room (inputs.uncertainty.EXPERT_MEMORY_SHARE).
COMFORTABLE_MEMORY = EXPERT_MEMORY_SHARE.value


class Criterion(NamedTuple):
    """One preference of the tie-break. `name`: its term of the tie key (TERMS, which tie_terms
    computes; smaller goes first); `words`: how an alternative's reason names it when it decides;
    `fields`: the layout fields it reads, shown there as "alternative vs choice" ("memory": the
    memory share); `summary`: how the trace's one-line summary of the order names it (None: covered
    by a neighbour's)."""
    name: str
    words: str
    fields: tuple[str, ...]
    summary: str | None = None


def tie_terms(degrees: tuple, vpp: int, offload: str, zero: int, recompute: str, mbs: int, crowded: bool,
              ties: Ties) -> tuple:
    """Every criterion's term of one layout, in TERMS order (smaller goes first): `degrees` its
    (tp, pp, cp, ep, ...), `crowded` whether it uses more GPU memory than Ties.roomy. One call per
    layout that fits; each order picks its terms with an itemgetter (TIE_KEYS)."""
    tp, pp, cp, ep = degrees[0], degrees[1], degrees[2], degrees[3]
    return (tp, ep == 1, ep > ties.domain, -tp, crowded, cp,
            (tp > 1) + (pp > 1) + (cp > 1) + (ep > 1), ties.layers % pp != 0, tp * pp * cp, vpp,
            OFFLOAD_RANK[offload], zero, RECOMPUTE_RANK[recompute], pp, -mbs)


TERMS = ("less_tp", "some_ep", "expert_group_in_domain", "more_tp", "headroom", "less_cp",
         "dimensions", "even_split", "model_parallelism", "virtual_stages",
         "offload", "zero_stage", "recompute", "pipeline_stages", "micro_batch")

# Simplicity: fewer parallel dimensions, an even pipeline split (the framework's default, no
# per-stage layer flags), smaller model parallelism, no VPP, less offload, lower ZeRO stage, less
# recompute, fewer stages, larger micro-batch.
SIMPLICITY = (
    Criterion("dimensions", "fewer parallel dimensions", ("tp", "pp", "cp", "ep"), "simplicity"),
    Criterion("even_split", "an even pipeline split", ("pp",)),
    Criterion("model_parallelism", "less model parallelism", ("tp", "pp", "cp")),
    Criterion("virtual_stages", "fewer virtual stages", ("vpp",)),
    Criterion("offload", "less offload", ("offload",)),
    Criterion("zero_stage", "a lower ZeRO stage", ("zero_stage",)),
    Criterion("recompute", "less recompute", ("recompute",)),
    Criterion("pipeline_stages", "fewer pipeline stages", ("pp",)),
    Criterion("micro_batch", "a larger micro-batch", ("micro_batch_size",)),
)
# A layout within COMFORTABLE_MEMORY of the GPU (Ties.roomy): the room expert layouts leave.
HEADROOM = Criterion("headroom", "memory headroom", ("memory",), "memory headroom")
# CP comes after TP and headroom: among equals the smaller ring (its KV exchange crosses nodes) is the
# safer bet (sources of every order: docs/evidence/planner.md).
LESS_CP = Criterion("less_cp", "less CP", ("cp",), "less CP")

# The order of candidates the estimate cannot separate (within Ties.band of each other), by the
# rules' preference (Ties.order):
CRITERIA: dict[str, tuple[Criterion, ...]] = {
    # MoE (Megatron-LM's MoE README): minimise model parallelism, EP over TP for the experts, the expert
    # group inside the NVLink domain. The all-to-all group is ep x etp consecutive ranks; the planner's
    # MoE shapes use etp 1 (space.shapes).
    "ep_over_tp": (Criterion("less_tp", "less TP", ("tp",), "less TP"),
                   Criterion("some_ep", "EP over none", ("ep",)),
                   Criterion("expert_group_in_domain", "the expert group inside the NVLink domain", ("ep",),
                             "EP x expert TP inside the NVLink domain"),
                   HEADROOM, LESS_CP, *SIMPLICITY),
    # Narayanan et al. 2021 (arXiv:2104.04473): TP up to the server, then PP.
    "tp_before_pp": (Criterion("more_tp", "more TP inside the NVLink domain", ("tp",), "more TP"),
                     HEADROOM, LESS_CP, *SIMPLICITY),
    # Megatron-LM's parallelism guide: data parallelism (FSDP) first, TP only if the model does not fit.
    "dp_before_tp": (HEADROOM,
                     Criterion("model_parallelism", "less model parallelism (sharded data parallelism first)",
                               ("tp", "pp", "cp"), "less model parallelism"),
                     Criterion("less_tp", "less TP", ("tp",), "less TP"),
                     # (tp, cp and tp * pp * cp settle pp: the split criteria that read only pp cannot decide)
                     LESS_CP, *(c for c in SIMPLICITY if c.name not in ("model_parallelism", "even_split"))),
    "simplicity": (LESS_CP, *SIMPLICITY),
}


def _picker(criteria: tuple[Criterion, ...]) -> Callable:
    """The tie key of `criteria` from a layout's terms (tie_terms)."""
    return itemgetter(*(TERMS.index(c.name) for c in criteria))


def _summary(criteria: tuple[Criterion, ...]) -> str:
    named = [c.summary for c in criteria if c.summary]
    return ", ".join(named[:-1]) + ", then " + named[-1]


TIE_KEYS = {order: _picker(criteria) for order, criteria in CRITERIA.items()}
# "less CP, then simplicity" and the like: what the trace says near-ties go to
TIE_WORDS = {order: _summary(criteria) for order, criteria in CRITERIA.items()}


class Ties(NamedTuple):
    order: str        # the rules' preference: "ep_over_tp", "dp_before_tp", "tp_before_pp" or "simplicity"
    layers: int
    domain: int       # GPUs per NVLink domain (in this job)
    pick: Callable    # TIE_KEYS[order]: the tie key from tie_terms
    band: float = NEAR_TIE                    # step times within (1 + band) of the fastest are near-ties
    tight: float = 1 - memory_headroom(None)  # a layout above this share of GPU memory ranks after all others
    roomy: float = COMFORTABLE_MEMORY         # among near-ties, a layout within this share goes first

    @classmethod
    def of(cls, order: str, layers: int, domain: int, training=None) -> Ties:
        return cls(order, layers, domain, TIE_KEYS[order], tight=1 - memory_headroom(training),
                   roomy=min(COMFORTABLE_MEMORY, 1 - memory_headroom(training)))

    @classmethod
    def for_job(cls, order: str, model, cluster, training=None) -> Ties:
        """The ties of `order` for this model on this cluster (the NVLink domain the job can use), with
        the memory margin `training` asks for (Training.memory_headroom; None: the measured error)."""
        return cls.of(order, model.layers, min(cluster.nvlink_domain, cluster.gpus), training)

    def is_tight(self, share: float) -> bool:
        """A layout using `share` of GPU memory leaves less free than the margin."""
        return share > self.tight


def tie_break(cand: Candidate, ties: Ties) -> tuple:
    """The candidate's tie key (cached on it), by the criteria of `ties.order`."""
    key = cand.tie_key
    if key is None:
        lay = cand.layout
        key = cand.tie_key = ties.pick(tie_terms((lay.tp, lay.pp, lay.cp, lay.ep), lay.vpp, lay.offload,
                                                 lay.zero_stage, lay.recompute, lay.micro_batch_size,
                                                 cand.memory_share > ties.roomy, ties))
    return key


def why_lost(alt: Candidate, chosen: Candidate, fastest: float, ties: Ties) -> str:
    """Why `alt` ranks after `chosen`; `fastest` is the best step time of chosen's group, which the
    near-tie band is measured from (the tie-break may have chosen a slightly slower layout). A near-tie
    names the first preference of the tie order that tells the two apart, then the other differences."""
    a, c = alt.layout, chosen.layout
    ta, tc = alt.step_time, chosen.step_time
    ua, uc = alt.memory_share, chosen.memory_share
    band = ties.band
    if ties.is_tight(ua) and not ties.is_tight(uc):
        return (f"uses {ua:.0%} of GPU memory (> {ties.tight:.0%}, the memory estimate's margin): est. step "
                f"{ta:.2f} s vs {tc:.2f} s ({ta / tc - 1:+.0%}), too little headroom")
    if ta > fastest * (1 + band):
        behind = "" if fastest >= tc else f"; more than {band:.1%} behind the fastest, {fastest:.2f} s"
        return f"slower: est. step {ta:.2f} s vs {tc:.2f} s ({ta / tc - 1:+.0%}){behind}"
    ours = {r for r, _ in chosen.advice or ()}
    theirs = {r for r, _ in alt.advice or ()}
    if ours < theirs and ((alt.tie_key or ()), ta) < ((chosen.tie_key or ()), tc):   # first in the tie order, set aside
        avoided = ", ".join(sorted(theirs - ours))
        return (f"about as fast (est. step {ta:.2f} s vs {tc:.2f} s, within {band:.1%}) and first by the tie-break, "
                f"but its own audit advises against it ({avoided}) and the choice avoids that")

    def shown(name: str) -> str:
        if name == "memory":
            return f"memory {ua:.0%} vs {uc:.0%} of the GPU"
        return f"{name} {getattr(a, name)} vs {getattr(c, name)}"

    diffs = []
    if (ua > ties.roomy) != (uc > ties.roomy):
        diffs.append("memory")
    diffs += [n for n in ("tp", "pp", "cp", "ep", "vpp", "zero_stage", "recompute", "offload", "micro_batch_size")
              if getattr(a, n) != getattr(c, n)]
    criteria = CRITERIA[ties.order]
    at = next((i for i, (x, y) in enumerate(zip(alt.tie_key or (), chosen.tie_key or ())) if x != y), None)
    head = f"about as fast (est. step {ta:.2f} s vs {tc:.2f} s, within {band:.1%}); the tie-break prefers the choice"
    if at is None:                               # same preference: the faster of the two goes first
        return head + (" as faster; it differs in " + ", ".join(map(shown, diffs)) if diffs else " as faster")
    criterion = criteria[at]
    decisive = [n for n in diffs if n in criterion.fields]
    rest = [n for n in diffs if n not in criterion.fields]
    text = f"{head} for {criterion.words}" + (f" ({', '.join(map(shown, decisive))})" if decisive else "")
    return text + (f"; it also differs in {', '.join(map(shown, rest))}" if rest else "")


def ordered(found: list[Candidate], ties: Ties) -> list[Candidate]:
    """Best first: layouts with memory headroom before tight ones; in each group the near-ties of its
    fastest by `tie_break`, then the rest by step time."""
    ordered = []
    for group in (False, True):
        scored = [c for c in found if c.tight is group]
        if not scored:
            continue
        limit = min([c.step_time for c in scored]) * (1 + ties.band)
        # Sorted by decorated tuples (a comprehension, not a key function called per candidate), the
        # index last so that equal keys keep their order, as a stable sort does. (c.tie_key:
        # tie_break's cached key, a non-empty tuple, saving the call once it is known.)
        near = sorted([(c.tie_key or tie_break(c, ties), c.step_time, i)
                       for i, c in enumerate(scored) if c.step_time <= limit])
        far = sorted([(c.step_time, c.tie_key or tie_break(c, ties), i)
                      for i, c in enumerate(scored) if c.step_time > limit])
        ordered += [scored[i] for *_, i in near] + [scored[i] for *_, i in far]
    return ordered

