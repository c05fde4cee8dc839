"""Planner: turn the rules' decisions into one concrete, legal layout that fits in memory.

Candidates are generated as plain tuples, filtered by the structural constraints the frameworks
enforce, sorted by a documented preference order, and only then built and estimated, first to
last, until one fits. The preference order encodes the rules' strategy:

    offload level          -- offload only when nothing else fits (seed: "extreme memory limits")
    full recompute         -- +~33% compute, last resort before offload (Korthikanti et al. §5)
    pp                     -- TP grows to the NVLink domain before PP grows (Narayanan takeaway #1)
    cp                     -- context parallel only as far as activations need
    tp                     -- the smallest model-parallel size that fits (Narayanan takeaway #2)
    -ep                    -- for MoE, more EP before TP (Megatron MoE best practices)
    zero stage             -- the lowest ZeRO stage that fits (ZeRO-3 costs 1.5x DP traffic)
    recompute level        -- none before selective

A cost-model ranking replaces the tail of this order in the planner issue; the constraints and the
"rejected" bookkeeping stay.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from .actions import Decisions
from .layout import Layout
from .specs import Cluster, Model, Training

__all__ = ["Alternative", "PlanResult", "plan"]

_RECOMPUTE = ("none", "selective", "full")
_OFFLOAD = ("none", "optimizer", "optimizer+params")
_KEY_NAMES = ("offload", "full recompute", "pp", "cp", "tp", "ep", "ZeRO stage", "recompute")
MAX_ALTERNATIVES = 3
MAX_SCAN_AFTER_CHOICE = 400     # candidates examined past the choice when looking for runners-up
MAX_REJECT_EVENTS = 12          # rejections written to the trace one by one; the rest are counted


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


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _pow2_up_to(n: int) -> list[int]:
    out, v = [], 1
    while v <= n:
        out.append(v)
        v *= 2
    return out


def _shape_candidates(cluster: Cluster, model: Model, training: Training, decisions: Decisions,
                      strategy: str, framework: str) -> Iterator[tuple]:
    """(key, tp, pp, cp, ep, zero, recompute, offload) tuples that pass the structural constraints."""
    world, seq, gbs = cluster.gpus, training.seq_len, training.global_batch_size
    mbs = training.micro_batch_size or 1
    domain = min(cluster.nvlink_domain, world)
    tp_max = min(decisions.upper("tp") or domain, domain)
    zero_dp = strategy == "zero-dp"
    megatron = framework.startswith("megatron")
    stages = sorted(decisions.zero_stages[0]) if decisions.zero_stages else ([1] if megatron else [1, 2, 3])

    tps = [1] if zero_dp else [t for t in _divisors(world) if t <= tp_max
                               # Megatron M5: heads % tp == 0; M6: query groups % tp == 0 or tp % groups == 0
                               and model.heads % t == 0 and (model.kv_heads % t == 0 or t % model.kv_heads == 0)]
    # Megatron M8 (uniform split): layers % pp == 0.
    pps = [1] if zero_dp else [p for p in _divisors(model.layers) if world % p == 0]
    # Megatron M15: seq % (2 * cp) == 0; CP is tried only when a rule enabled it (long sequences).
    cps = [1]
    if "cp" in decisions.features:
        cps = [c for c in _pow2_up_to(world) if seq % (2 * c) == 0]
    # Megatron M14: experts % ep == 0; MoE best practice: EP x TP inside the NVLink domain.
    eps = [1] if (zero_dp or not model.is_moe) else [e for e in _divisors(model.experts)]
    recomputes = ("none", "full") if framework == "deepspeed" else _RECOMPUTE   # selective is Megatron's
    offloads = _OFFLOAD if zero_dp else ("none",)

    for tp in tps:
        for pp in pps:
            for cp in cps:
                mp = tp * pp * cp
                if world % mp:                      # Megatron M1: world % (tp * pp * cp) == 0
                    continue
                dp = world // mp
                if gbs % (mbs * dp):               # Megatron M11: gbs % (mbs * dp) == 0
                    continue
                for ep in eps:
                    # Megatron M2: world % (etp * ep * pp) == 0 (etp = tp); EP x TP within the domain.
                    if ep > 1 and (world % (tp * ep * pp) or tp * ep > domain):
                        continue
                    for zero in stages:
                        if framework == "deepspeed" and pp > 1 and zero >= 2:
                            continue                # DeepSpeed pipe/engine.py: ZeRO-2/3 incompatible with PP
                        for offload in offloads:
                            # DeepSpeed offload_config.py: parameter offload needs ZeRO-3; optimizer
                            # offload needs a ZeRO stage >= 1.
                            if (offload == "optimizer+params" and zero != 3) or (offload == "optimizer" and zero < 1):
                                continue
                            for recompute in recomputes:
                                key = (_OFFLOAD.index(offload), recompute == "full", pp, cp, tp, -ep, zero,
                                       _RECOMPUTE.index(recompute))
                                yield key, tp, pp, cp, ep, dp, zero, recompute, offload


def _layout(row: tuple, framework: str, training: Training, decisions: Decisions) -> Layout:
    _, tp, pp, cp, ep, dp, zero, recompute, offload = row
    mbs = training.micro_batch_size or 1
    return Layout(
        framework=framework, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, zero_stage=zero,
        sp=tp > 1 and "sp" in decisions.features, micro_batch_size=mbs,
        num_microbatches=training.global_batch_size // (mbs * dp), recompute=recompute, offload=offload,
    )


def _why_lost(key: tuple, chosen: tuple) -> str:
    for name, a, b in zip(_KEY_NAMES, key, chosen):
        if a != b:
            if name == "offload":
                return f"needs offload ({_OFFLOAD[a]}) where the choice needs {_OFFLOAD[b]}"
            if name == "full recompute":
                return "needs full recomputation (about a third more compute)"
            if name == "recompute":
                return f"recomputes more ({_RECOMPUTE[a]} vs {_RECOMPUTE[b]})"
            if name == "ep":
                return f"less expert parallelism (ep {-a} vs {-b})"
            more = "more" if a > b else "less"
            return f"{more} {name} ({name} {a} vs {b}); the preference order puts it later"
    return "equal rank; listed after the choice"


def _search(cluster, model, training, decisions, strategy, framework, result: PlanResult, estimate_fn, check_fn):
    rows = sorted(_shape_candidates(cluster, model, training, decisions, strategy, framework))
    chosen = chosen_key = None
    closest = None
    rejected = 0
    shapes_seen: set[tuple] = set()
    rejected_shapes: set[tuple] = set()
    scanned_after = 0
    for row in rows:
        if chosen is not None:
            scanned_after += 1
            if scanned_after > MAX_SCAN_AFTER_CHOICE or len(result.alternatives) >= MAX_ALTERNATIVES:
                break
            shape = row[1:7]
            if shape in shapes_seen:
                continue
        layout = _layout(row, framework, training, decisions)
        est = estimate_fn(cluster, model, layout, training)
        result.examined += 1
        mem = est.memory
        if not mem.fits:
            if chosen is None:
                rejected += 1
                if closest is None or mem.total < closest[1].memory.total:
                    closest = (layout, est)
                if row[1:7] not in rejected_shapes and len(rejected_shapes) < MAX_REJECT_EVENTS:
                    result.events.append(("reject", f"memory: needs {mem.total / 2**30:.1f} GiB per GPU > "
                                                    f"{mem.capacity / 2**30:.1f} GiB (recompute {layout.recompute}"
                                                    f"{', offload ' + layout.offload if layout.offload != 'none' else ''})",
                                          layout.id))
                rejected_shapes.add(row[1:7])
            continue
        errors = check_fn(layout, est)
        if errors:
            # The audit's legality rules have the last word: never return what they call an error.
            rule_id, message = errors[0]
            result.events.append(("reject", f"rule {rule_id}: {message}", layout.id))
            continue
        if chosen is None:
            chosen, chosen_key = (layout, est), row[0]
            shapes_seen.add(row[1:7])
            logged = min(len(rejected_shapes), MAX_REJECT_EVENTS)
            if rejected > logged:
                result.events.append(("note", f"{rejected - logged} more candidates (other recompute, ZeRO or offload "
                                              "options of the shapes above, or further shapes) rejected for memory", None))
            continue
        shapes_seen.add(row[1:7])
        reason = _why_lost(row[0], chosen_key)
        base = chosen[1].step_time
        if base:
            delta = est.step_time / base - 1
            reason += f"; est. step {est.step_time:.2f} s ({delta:+.0%} vs the choice)"
        result.alternatives.append(Alternative(layout, est, reason))
    return chosen, closest


def plan(cluster: Cluster, model: Model, training: Training, decisions: Decisions, estimate_fn,
         check_fn=lambda layout, est: []) -> PlanResult:
    """Pick the first layout in preference order that passes the constraints, fits in memory, and has
    no error from `check_fn` (the audit's legality rules: a list of (rule id, message))."""
    framework = decisions.framework[0] if decisions.framework else "megatron"
    strategy = decisions.strategy[0] if decisions.strategy else "model-parallel"
    result = PlanResult(None, None, framework)
    if not decisions.strategy:
        result.events.append(("note", "no rule chose a strategy: model-parallel (smallest TP, then PP, that fits)", None))
    chosen, closest = _search(cluster, model, training, decisions, strategy, framework, result, estimate_fn, check_fn)
    if chosen is None and strategy == "zero-dp":
        # ZeRO alone (even with offload) cannot hold the model: widen to TP/PP, and say so.
        best = f"; closest {closest[0].id} needs {closest[1].memory.total / 2**30:.1f} GiB" if closest else ""
        result.events.append(("reject", f"family zero-dp: no ZeRO stage or offload fits{best}", "zero-dp"))
        framework = "megatron"
        decisions.zero_stages = ((1,), "planner")
        result.framework = framework
        result.events.append(("note", "widening to model-parallel with Megatron-LM (TP inside the NVLink domain, then PP)", None))
        chosen, closest = _search(cluster, model, training, decisions, "model-parallel", framework, result, estimate_fn, check_fn)
    if chosen is None:
        if closest is not None:
            result.events.append(("reject", f"no layout fits; closest {closest[0].id} needs "
                                            f"{closest[1].memory.total / 2**30:.1f} GiB of "
                                            f"{closest[1].memory.capacity / 2**30:.1f} GiB", closest[0].id))
        else:
            result.events.append(("reject", "no layout satisfies the divisibility constraints "
                                            "(heads, layers, global batch vs dp)", None))
        return result
    result.layout, result.estimate = chosen
    return result
