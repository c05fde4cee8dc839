"""The search space: which (tp, pp, cp, ep, etp, vpp) shapes, micro-batches, ZeRO stages, recompute
and offload levels the search may try. Policy only: what fits and what is fastest is the search's.

Shapes follow the rules' decisions (the strategy: zero-dp keeps tp = pp = 1; limits: tp inside the
NVLink domain; features: CP only from 8K tokens) and skip what the audit's error rules would refuse
anyway, to save the sizing: each such check below is the statement of one audit rule, named in
LEGALITY, and tests/test_space_legality.py proves that whatever it drops, that rule refuses. The
audit rules stay the one statement of what is legal; every pick is screened by them (alternatives.pick).
"""

from __future__ import annotations

from typing import NamedTuple

from ..rulebook.actions import Decisions
from ..inputs.batch import divisors
from ..inputs.pipeline import megatron_split
from ..inputs.specs import Cluster, Model, Training

RECOMPUTE = ("none", "selective", "full")
OFFLOAD = ("none", "optimizer", "optimizer+params")
# each one's position in its tuple, for the tie key (a subscript instead of a call to .index)
RECOMPUTE_RANK = {r: i for i, r in enumerate(RECOMPUTE)}
OFFLOAD_RANK = {o: i for i, o in enumerate(OFFLOAD)}
# Micro-batch sizes searched when the caller gives none: those of the published dev set's records
# (docs/evidence/planner.md).
MBS_OPTIONS = (1, 2, 4)
# Virtual-stage counts tried per pipeline shape, 1 included (vpp_options; docs/evidence/planner.md).
MAX_VPP_OPTIONS = 3


# --- structural checks: each drops only what the named audit rule refuses (LEGALITY) ---

def heads_divide(model: Model, tp: int) -> bool:
    return model.heads % tp == 0                                  # Megatron M5


def query_groups_divide(model: Model, tp: int) -> bool:
    return model.kv_heads % tp == 0 or tp % model.kv_heads == 0   # Megatron M6


def stages_have_layers(model: Model, pp: int) -> bool:
    return pp <= model.layers


def experts_divide(model: Model, ep: int) -> bool:
    return model.experts % ep == 0                                # Megatron M14


def sequence_splits(seq: int, cp: int) -> bool:
    return cp == 1 or seq % (2 * cp) == 0                         # Megatron M15: two chunks per CP rank


def world_divides(world: int, tp: int, pp: int, cp: int) -> bool:
    return world % (tp * pp * cp) == 0                            # Megatron M1


def expert_grid_divides(world: int, etp: int, ep: int, pp: int) -> bool:
    return world % (etp * ep * pp) == 0                           # Megatron M2


LEGALITY = {
    heads_divide: "layout.heads-divisible-by-tp",
    query_groups_divide: "megatron.gqa-groups-vs-tp",
    stages_have_layers: "layout.more-stages-than-layers",
    experts_divide: "megatron.experts-divisible-by-ep",
    sequence_splits: "megatron.cp-sequence-divisible",
    world_divides: "megatron.world-divisible-by-model-parallel",
    expert_grid_divides: "megatron.expert-grid",
}


def tie_order(decisions: Decisions) -> str:
    """Which preference orders near-ties: the MoE one first, then sharded DP before TP (a stack with
    Megatron-FSDP), then TP-before-PP, else simplicity."""
    for feature in ("ep_over_tp", "dp_before_tp", "tp_before_pp"):
        if feature in decisions.features:
            return feature
    return "simplicity"


class Policy(NamedTuple):
    """What a search takes from the rules' decisions. The planner departs from them only through
    a Policy of its own (families.py: the other family, widening to Megatron-LM), so that the
    rules' Decisions, which the trace has already reported, are never written to."""
    decisions: Decisions                  # the limits and enabled features (CP), as the rules left them
    zero_stages: tuple[int, ...] | None   # the ZeRO stages allowed; None: the framework's default
    sp: bool                              # sequence parallelism wherever tp > 1
    tie_order: str                        # ranking.CRITERIA's key: "ep_over_tp", "dp_before_tp", "tp_before_pp", "simplicity"

    @classmethod
    def of(cls, decisions: Decisions) -> Policy:
        return cls(decisions, decisions.zero_choice(), decisions.has("sp"),
                   tie_order(decisions))


class Shape(NamedTuple):   # a NamedTuple: several times cheaper to build than a frozen dataclass
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


def even_or_expressible(layers: int, pp: int) -> bool:
    """Megatron splits evenly, or with --decoder-first/last-pipeline-num-layers around even middle
    stages (inputs.pipeline.megatron_split, the split the cost model uses)."""
    return pp <= layers and megatron_split(layers, pp) is not None


def vpp_options(layers: int, pp: int) -> list[int]:
    """1, plus the smallest, middle and largest virtual-stage counts (at most MAX_VPP_OPTIONS in all)
    that split the middle ranks' layers evenly (Megatron M8/M9), capped at the first and last ranks'
    layers + 1 (their chunks may hold the embedding or the loss alone: the split that counts them as
    layers). Examples and sources: docs/evidence/planner.md."""
    split = megatron_split(layers, pp) if pp >= 2 else None
    if split is None:
        return [1]
    cap = min(split[0] + 1, split[-1] + 1, *split[1:-1])
    divs = [d for d in divisors(max(split)) if 1 < d <= cap]
    if not divs:
        return [1]
    picks = sorted({divs[0], divs[len(divs) // 2], divs[-1]})
    return [1] + picks[: MAX_VPP_OPTIONS - 1]


def shapes(cluster: Cluster, model: Model, training: Training, decisions: Decisions, strategy: str,
           framework: str) -> list[Shape]:
    world, seq = cluster.gpus, training.seq_len
    domain = min(cluster.nvlink_domain, world)
    tp_cap = min(decisions.upper("tp") or domain, domain)
    megatron = framework.startswith("megatron")
    if strategy == "zero-dp":
        tps, pps, eps = [1], [1], [1]
    else:
        # TP groups are contiguous ranks (rank order tp-cp-ep-dp-pp), so t must divide the NVLink
        # domain for every group to stay inside one (tp 6 on 8-GPU servers would straddle two).
        tps = [t for t in divisors(world) if t <= tp_cap and domain % t == 0 and heads_divide(model, t)
               and query_groups_divide(model, t)]
        # Policy: an even split, or Megatron's first/last-stage form that its export writes (the audit
        # only warns otherwise); DeepSpeed's PipelineModule balances any split.
        pps = [p for p in divisors(world) if stages_have_layers(model, p) and
               (model.layers % p == 0 or (megatron and even_or_expressible(model.layers, p))
                or framework == "megatron+deepspeed")]
        eps = [e for e in divisors(model.experts) if experts_divide(model, e)] if model.is_moe else [1]
    # CP only where a rule enabled it (long sequences); policy: rings of a power of two, >= 1K tokens each.
    cps = [1]
    if "cp" in decisions.features:
        cps = [c for c in divisors(world) if c & (c - 1) == 0 and sequence_splits(seq, c) and seq // c >= 1024]

    def within(dim: str, value: int) -> bool:      # the rules' `limit` actions, every dimension
        upper = decisions.upper(dim)
        return decisions.lower(dim) <= value and (upper is None or value <= upper)

    tps, pps, cps, eps = ([v for v in values if within(dim, v)]
                          for dim, values in (("tp", tps), ("pp", pps), ("cp", cps), ("ep", eps)))
    # Virtual stages are Megatron-LM's interleaved 1F1B; Megatron-DeepSpeed pipelines run on DeepSpeed's
    # PipelineEngine, plain 1F1B (docs/evidence/planner.md).
    vpps = {pp: vpp_options(model.layers, pp) if framework == "megatron" else [1] for pp in pps}
    moe = model.is_moe
    dp_low, dp_high = decisions.lower("dp"), decisions.upper("dp")     # within("dp", .), read once
    out = []
    for tp in tps:
        for pp in pps:
            for cp in cps:
                if not world_divides(world, tp, pp, cp):
                    continue
                dp = world // (tp * pp * cp)
                if dp < dp_low or (dp_high is not None and dp > dp_high):
                    continue
                for ep in eps:
                    etp = 1 if (moe and tp > 1) else tp   # MoE zoo: expert TP 1 with EP
                    # (ep > dp*cp*tp breaks the expert grid too: etp*ep*pp would exceed the world)
                    if ep > 1 and not expert_grid_divides(world, etp, ep, pp):
                        continue
                    for vpp in vpps[pp]:
                        out.append(Shape(tp, pp, cp, ep, etp, vpp, dp))
    return out


class Base(NamedTuple):
    """A shape's degrees without its virtual stages: what its (micro-batch, vpp) variants share."""
    tp: int
    pp: int
    cp: int
    ep: int
    dp: int



def variants_of(shapes_and_bases: list[tuple[Shape, Base]], gbs: int, mbs_options: tuple) -> dict[Base, list]:
    """base -> its (micro-batch, vpp) options: the micro-batch divides the global batch over dp
    (DeepSpeed's batch identity), and interleaving needs the micro-batches to fill the stages (M10/M11)."""
    variants: dict[Base, list[tuple[int, int]]] = {}
    # (what is legal depends on (dp, pp, vpp) alone, shared by many shapes: worked out once for each)
    legal_for: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
    for shape, b in shapes_and_bases:
        key = dp, pp, vpp = shape.dp, shape.pp, shape.vpp
        if key not in legal_for:
            legal_for[key] = [(mbs, vpp) for mbs in mbs_options if gbs % (mbs * dp) == 0
                              and (vpp == 1 or (gbs // (mbs * dp) >= pp and gbs // (mbs * dp) % pp == 0))]
        legal = legal_for[key]
        if legal:
            if b in variants:
                variants[b] += legal
            else:
                variants[b] = legal[:]
    return variants


def stages(allowed_stages: tuple[int, ...] | None, framework: str, pp: int) -> list[int]:
    """The ZeRO stages to try: those allowed (Policy.zero_stages), else the framework's default."""
    allowed = sorted(allowed_stages) if allowed_stages else ([1] if framework.startswith("megatron") else [1, 2, 3])
    if framework in ("deepspeed", "megatron+deepspeed") and pp > 1:
        allowed = [z for z in allowed if z <= 1] or [1]       # DeepSpeed pipe/engine.py: ZeRO-2/3 not with PP
    return allowed
