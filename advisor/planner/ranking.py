"""Ranking: every layout that fits gets a step time; the fastest step wins, except that candidates
within `NEAR_TIE` of the fastest are ordered by `tie_break` (with the rules' "ep_over_tp" for MoE, less
TP; with "tp_before_pp", more TP inside the NVLink domain; then more memory headroom; less CP; then
fewer parallel dimensions, an even pipeline split, smaller model parallelism, no VPP, lower ZeRO
stage, less recompute), because the estimate is not that precise. The audit's legality rules then
have the last word on each pick (search.pick).
"""

from __future__ import annotations

from typing import NamedTuple

from ..actions import Decisions
from .candidates import Candidate
from .space import OFFLOAD_RANK, RECOMPUTE_RANK

# Estimates this close are treated as ties: the time model's mean |error| on measured runs is ~6%,
# single runs up to ~25% (benchmarks/calibrate_throughput.py). 8% maximised agreement with published
# layouts in benchmarks/published_planner.py among 3/8/15% (the tie-break carries the preference).
NEAR_TIE = 0.08

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


class Ties(NamedTuple):
    order: str        # the rules' preference: "ep_over_tp", "tp_before_pp" or "simplicity"
    layers: int
    domain: int       # GPUs per NVLink domain (in this job)


def tie_break(cand: Candidate, ties: Ties) -> tuple:
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
        key = cand.tie_key = tie_key(lay.tp, lay.pp, lay.cp, lay.ep, lay.vpp, lay.offload, lay.zero_stage,
                                      lay.recompute, lay.micro_batch_size, cand.memory_share > COMFORTABLE_MEMORY,
                                      ties)
    return key


def tie_key(tp, pp, cp, ep, vpp, offload, zero, recompute, mbs, crowded, ties: Ties) -> tuple:
    simplicity = ((tp > 1) + (pp > 1) + (cp > 1) + (ep > 1), ties.layers % pp != 0, tp * pp * cp, vpp,
                  OFFLOAD_RANK[offload], zero, RECOMPUTE_RANK[recompute], pp, -mbs)
    if ties.order == "ep_over_tp":
        # the all-to-all group is ep x etp consecutive ranks; the planner's MoE shapes use etp 1 (_shapes)
        return (tp, ep == 1, ep > ties.domain, crowded, cp, *simplicity)
    if ties.order == "tp_before_pp":
        return (-tp, crowded, cp, *simplicity)
    return (cp, *simplicity)


def tie_order(decisions: Decisions) -> str:
    """Which preference orders near-ties: the MoE one first, then TP-before-PP, else simplicity."""
    for feature in ("ep_over_tp", "tp_before_pp"):
        if feature in decisions.features:
            return feature
    return "simplicity"


TIE_WORDS = {"ep_over_tp": "less TP, EP x expert TP inside the NVLink domain, memory headroom, less CP, then simplicity",
              "tp_before_pp": "more TP, memory headroom, less CP, then simplicity",
              "simplicity": "less CP, then simplicity"}


# What each position of tie_key prefers, per tie order, as the explanation names it: (words, the
# layout fields it reads, shown as "alternative vs choice"). "memory" reads the memory share.
SIMPLICITY_WORDS = (("fewer parallel dimensions", ("tp", "pp", "cp", "ep")), ("an even pipeline split", ("pp",)),
                     ("less model parallelism", ("tp", "pp", "cp")), ("fewer virtual stages", ("vpp",)),
                     ("less offload", ("offload",)), ("a lower ZeRO stage", ("zero_stage",)),
                     ("less recompute", ("recompute",)), ("fewer pipeline stages", ("pp",)),
                     ("a larger micro-batch", ("micro_batch_size",)))
KEY_WORDS = {
    "ep_over_tp": (("less TP", ("tp",)), ("EP over none", ("ep",)), ("the expert group inside the NVLink domain", ("ep",)),
                   ("memory headroom", ("memory",)), ("less CP", ("cp",)), *SIMPLICITY_WORDS),
    "tp_before_pp": (("more TP inside the NVLink domain", ("tp",)), ("memory headroom", ("memory",)), ("less CP", ("cp",)),
                     *SIMPLICITY_WORDS),
    "simplicity": (("less CP", ("cp",)), *SIMPLICITY_WORDS),
}


def why_lost(alt: Candidate, chosen: Candidate, fastest: float, tie_order: str) -> str:
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
    words = KEY_WORDS[tie_order]
    at = next((i for i, (x, y) in enumerate(zip(alt.tie_key or (), chosen.tie_key or ())) if x != y), None)
    head = f"about as fast (est. step {ta:.2f} s vs {tc:.2f} s, within {NEAR_TIE:.0%}); the tie-break prefers the choice"
    if at is None or at >= len(words):           # same preference: the faster of the two goes first
        return head + (" as faster; it differs in " + ", ".join(map(shown, diffs)) if diffs else " as faster")
    criterion, fields = words[at]
    decisive = [n for n in diffs if n in fields]
    rest = [n for n in diffs if n not in fields]
    text = f"{head} for {criterion}" + (f" ({', '.join(map(shown, decisive))})" if decisive else "")
    return text + (f"; it also differs in {', '.join(map(shown, rest))}" if rest else "")


def ordered(found: list[Candidate], ties: Ties) -> list[Candidate]:
    """Best first: layouts with memory headroom before tight ones; in each group the near-ties of its
    fastest by `tie_break`, then the rest by step time."""
    ordered = []
    for group in (False, True):
        scored = [c for c in found if c.tight is group]
        if not scored:
            continue
        limit = min([c.step_time for c in scored]) * (1 + NEAR_TIE)
        # (c.tie_key: tie_break's cached key, a non-empty tuple, saving the call once it is known)
        ordered += sorted([c for c in scored if c.step_time <= limit],
                          key=lambda c: (c.tie_key or tie_break(c, ties), c.step_time))
        ordered += sorted([c for c in scored if c.step_time > limit],
                          key=lambda c: (c.step_time, c.tie_key or tie_break(c, ties)))
    return ordered

