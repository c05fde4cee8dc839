"""Step time: each stage's micro-batch (compute, costmodel.compute; exposed communication,
costmodel.comm), the pipeline bubble, the DP tail and the optimizer step, and the planner's floors.

- Pipeline: step = (m + (p-1)/v) x (slowest stage's micro-batch time) (Narayanan et al. 2021 §2.2:
  bubble (p-1)/m, interleaved (p-1)/(v*m)), plus DP communication not hidden by the backward of the
  last micro-batch of each model chunk (`_overlapped_tail`), plus the optimizer step.
"""

from __future__ import annotations

from .comm import (
    cp_per_microbatch,
    cp_plan,
    dp_terms,
    ep_per_microbatch,
    ep_plan,
    pp_per_microbatch,
    tp_per_microbatch,
    tp_plan,
    tp_unhidden,
)
from .adapters import stage_adapter_params
from .compute import compute_plan, stage_compute
from .context import Ctx, remember
from .flops import executed_flops_per_step, model_flops_per_step, moe_token_weights, per_token_forward_flops
from .activations import act_layers_of, offloaded_layers

_new = object.__new__

__all__ = ["per_token_forward_flops", "moe_token_weights", "model_flops_per_step", "executed_flops_per_step",
           "stage_times", "time_terms", "variant_floors"]

__all__ = ["per_token_forward_flops", "moe_token_weights", "model_flops_per_step", "executed_flops_per_step",
           "stage_times", "time_terms", "variant_floors", "shape_floor", "optimizer_time"]

_NO_COMM = (0.0, 0.0, 0.0, False)   # what the comm.*_per_microbatch terms return for a degree of 1


def _ep_per_microbatch(c: Ctx, A, n_moe: int, plan: tuple | None = None):
    """comm.ep_per_microbatch, plus the forward dispatch and combine that selective "moe" recompute
    runs again: Megatron-Core checkpoints the MoE layer's whole custom_forward, token dispatch and
    combine included (megatron/core/transformer/moe/moe_layer.py `MoELayer.forward`,
    tensor_parallel.checkpoint(custom_forward, ...)), so 6 all-to-alls per MoE layer instead of 4,
    as comm.ep_plan counts for full recompute."""
    ep = ep_per_microbatch(c, A, n_moe, plan)
    if c.recompute == "selective" and "moe" in A.recompute_modules and ep[1]:
        return ep[0] * 1.5, ep[1] * 1.5, ep[2] * 1.5, ep[3]   # (4 + 2) / 4
    return ep


def _plans(c: Ctx, A) -> tuple:
    """(compute_plan, tp_plan, cp_plan, ep_plan) of c's layout: the parts of the per-micro-batch
    terms that are the same on every stage, kept in c.memo. They read the layout's tp, cp,
    micro-batch, sp, ep, etp, framework and recompute only, which the layouts the planner times
    share much more often than whole stages."""
    key = ("plans", id(A), c.tp, c.cp, c.b, c.sp, c.ep, c.etp, c.framework, c.recompute)
    hit = c.memo.get(key)
    if hit is not None and hit[0] is A:
        return hit[1]
    return remember(c, A, key, (compute_plan(c, A), tp_plan(c, A) if c.tp > 1 else None,
                                cp_plan(c, A) if c.cp > 1 else None, ep_plan(c, A) if c.ep > 1 else None))


def _overlapped_tail(comm: float, window: float, v: int, p: int) -> float:
    """Exposed part of once-per-step DP traffic `comm` that Megatron overlaps bucket by bucket with
    one micro-batch's backward (gradient reduce-scatter, --overlap-grad-reduce) or forward (parameter
    all-gather, --overlap-param-gather), whose compute on this stage is `window`.

    Plain schedule: the reduction can only start with the last micro-batch's backward, so
    max(0, comm - window) is exposed (--overlap-grad-reduce runs no_sync for the others). Interleaved
    (v model chunks per stage): each chunk's share comm/v is released when that chunk's last backward
    ends, and on the first stage the chunks finish one round of p micro-batch-chunks apart
    (Megatron-Core interleaved schedule: micro-batches go through the chunks in groups of p), so
    chunk j (j = v-1 first ... 0 last) may start j*p chunk-backwards before the end; the reductions
    queue on one NCCL stream. The all-gather mirrors it at the start of the step."""
    if comm <= 0.0:
        return 0.0
    if v <= 1:
        exposed = comm - window
        return exposed if exposed > 0.0 else 0.0     # max(0.0, comm - window), without the call
    # chunk j's share may start (j*p + 1) chunk-times before the end; queued in the order j = v-1..0 it
    # ends at max over j of (j+1)*share - (j*p + 1)*t_chunk, linear in j, so at j = 0 or j = v-1
    t_chunk = window / v
    share = comm / v
    done = share - t_chunk + max(0.0, (v - 1) * (share - p * t_chunk))
    return done if done > 0.0 else 0.0


def stage_times(c: Ctx, A, k: int, dense_params: float, expert_params: float, plans: tuple | None = None):
    """All time terms of stage k; per-micro-batch terms are per micro-batch. `plans` = _plans(c, A),
    when the caller times several stages."""
    n_layers, n_dense, n_moe = c.split[k]   # layers, dense and MoE layers of stage k (context._split)
    last = k == c.pp - 1
    compute_plan, tp_plan_, cp_plan_, ep_plan_ = plans or _plans(c, A)
    kinds = c.hsplit[k] if c.hsplit is not None else None
    comp, flops, attn_t = stage_compute(c, A, n_dense, n_moe, last, compute_plan, kinds)
    # async TP backward collectives hide behind the weight-gradient GEMMs: backward is 2x forward and
    # half of it is wgrad, so ~1/3 of the layer's forward+backward GEMM time. A dimension of degree 1
    # (or a stage without MoE layers) moves nothing: its terms are _NO_COMM without the call.
    tp = tp_per_microbatch(c, A, k, comp / 3.0, tp_plan_) if c.tp > 1 else _NO_COMM
    cp = cp_per_microbatch(c, A, n_layers, attn_t, cp_plan_, kinds) if c.cp > 1 else _NO_COMM
    ep = _ep_per_microbatch(c, A, n_moe, ep_plan_) if c.ep > 1 and n_moe else _NO_COMM
    ep_floor = _ep_unhidden(A, ep[2])
    if A.ep_a2a_overlap and ep[2]:
        # combined 1F1B: each micro-batch's dispatch/combine runs while the other one computes
        hidden = min(ep[2] * A.ep_a2a_overlap_efficiency, comp)
        ep = (ep[0], ep[1], ep[2] - hidden, ep[3])
    pp = pp_per_microbatch(c, A, comp) if c.pp > 1 else _NO_COMM
    # the stage's DP traffic depends on its parameters and the groups, not on the micro-batch, vpp or recompute
    key = ("dp", id(A), c.framework, c.zero, c.tp, c.cp, c.pp, c.ep, c.etp, c.dense_shard, c.edp, dense_params,
           expert_params)
    hit = c.memo.get(key)
    if hit is not None and hit[0] is A:
        ob, og, op, mbb, mbs, dnet = hit[1]
    else:
        trainable = stage_adapter_params(c, n_dense, n_moe) if c.frozen else None
        ob, og, op, mbb, mbs, dnet = remember(c, A, key, dp_terms(c, A, dense_params, expert_params, trainable))
    # per-micro-batch DP traffic (ZeRO-2/3, FSDP) hides behind that micro-batch's compute
    dp_mb_exposed = max(0.0, mbs - comp) if A.overlap_grad_reduce else mbs
    # the last micro-batch's backward, which the gradient reduction overlaps: 2 of 3 forward-equivalents,
    # 3 of 4 with full recompute (the recompute forward runs inside the backward)
    bwd_share = 0.75 if c.recompute == "full" else 2.0 / 3.0
    extra = compute_plan.extra
    if extra is not None and flops > 0.0:
        # selective recompute_modules beyond core_attn (selective_extra): their e recompute FLOPs of
        # the F executed run inside the backward too, (2/3 (F - e) + e) / F; full's e = F/4 gives 3/4
        bwd_share += (n_dense * extra.flops_dense + n_moe * extra.flops_moe) * compute_plan.tokens / (3.0 * flops)
    g_exp = _overlapped_tail(og, comp * bwd_share, c.vpp, c.pp) if A.overlap_grad_reduce else og
    p_exp = _overlapped_tail(op, comp * (1.0 - bwd_share), c.vpp, c.pp) if A.overlap_param_gather else op
    t_mb = comp + tp[2] + cp[2] + ep[2] + pp[2] + dp_mb_exposed + _offload_exposed(c, A, k, n_layers, comp)
    return {
        "comp": comp, "flops": flops, "t_mb": t_mb, "tp": tp, "cp": cp, "ep": ep, "ep_floor": ep_floor, "pp": pp,
        "dp_once": (ob, og + op, g_exp + p_exp, dnet), "dp_mb": (mbb, mbs, dp_mb_exposed),
        "params": (dense_params, expert_params),
    }


def _ep_unhidden(A, exposed: float) -> float:
    """The part of the EP all-to-all that no compute window hides (with ep_a2a_overlap, the share
    beyond its efficiency): what the planner's floors may count whatever the recompute."""
    return exposed * (1.0 - A.ep_a2a_overlap_efficiency) if A.ep_a2a_overlap else exposed


def _offload_exposed(c: Ctx, A, k: int, n_layers: int, comp: float) -> float:
    """Seconds per micro-batch that activation offload (Assumptions.activation_offload_layers) adds:
    the copies to the host run beside the forward (a third of `comp`) and the copies back beside the
    backward (two thirds); only what exceeds each window is exposed."""
    off = offloaded_layers(c, A, n_layers)
    if not off:
        return 0.0
    acts = act_layers_of(c, A, k)
    sec = off * acts / n_layers / (c.host_bw or A.pcie_bandwidth)
    return max(0.0, sec - comp / 3.0) + max(0.0, sec - 2.0 * comp / 3.0)


def optimizer_time(c: Ctx, A, dense: float, expert: float) -> float:
    """Adam step: HBM-bound on the GPU; with offload, CPU Adam plus PCIe (and NVMe) transfers."""
    local = dense / c.dense_shard + expert / c.edp if c.zero >= 1 else dense + expert
    if c.offload == "none":
        return local * A.optimizer_bytes_per_param / (c.hbm * A.hbm_efficiency)
    host_bw = c.host_bw or A.pcie_bandwidth
    t = local / A.cpu_adam_params_per_second + local * 4.0 / host_bw  # grads down, params up
    if c.offload_device == "nvme":
        t += local * 16.0 * 2.0 / A.nvme_bandwidth  # read and write fp32 master + Adam states
    if c.offload == "optimizer+params":
        # param shards fetched forward and backward, from NVMe through the host when they live there
        fetch = min(host_bw, A.nvme_bandwidth) if c.offload_device == "nvme" else host_bw
        t += c.m * 2.0 * 2.0 * local / fetch
    return t


def time_terms(c: Ctx, A, stage_params: dict):
    """Returns a dict with every time output. `stage_params`: stage -> (dense, expert) params."""
    p, v, m = c.pp, c.vpp, c.m
    stages = {}
    slow = S = dp_once_exposed = opt = None
    plans = _plans(c, A)
    for k, (dense, expert) in stage_params.items():
        st = stages[k] = stage_times(c, A, k, dense, expert, plans)
        # the slowest stage sets the pace (the first of equals); DP and optimizer: the longest
        if S is None or st["t_mb"] > S["t_mb"]:
            slow, S = k, st
        dp_exp = st["dp_once"][2]
        if dp_once_exposed is None or dp_exp > dp_once_exposed:
            dp_once_exposed = dp_exp
        if c.frozen:    # Adam steps the adapters only
            _, n_d, n_m = c.split[k]
            o = optimizer_time(c, A, *stage_adapter_params(c, n_d, n_m))
        else:
            o = optimizer_time(c, A, dense, expert)
        if opt is None or o > opt:
            opt = o
    t_mb = S["t_mb"]
    compute_time = m * S["comp"]
    # the fill and drain of the pipeline have no compute to hide the send/recv behind, so the
    # bubble's micro-batch time carries the full p2p time even where the steady state overlaps it
    bubble_time = (p - 1) / v * (t_mb + S["pp"][1] - S["pp"][2])
    per_mb_exposed = t_mb - S["comp"]
    exposed_comm = m * per_mb_exposed + dp_once_exposed
    step = compute_time + bubble_time + exposed_comm + opt
    return {
        "stages": stages, "slow": slow, "compute_time": compute_time, "bubble_time": bubble_time,
        "bubble_fraction": (p - 1) / (v * m), "exposed_comm": exposed_comm, "optimizer_time": opt,
        "step": step, "dp_once_exposed": dp_once_exposed,
    }


def variant_floors(c: Ctx, A, T: dict, variants) -> dict:
    """{(b, v): a lower bound on the step time of the layout that differs from c's only by its
    micro-batch size b >= c.b, its virtual-stage count v, and as much or more recompute}, for the
    (b, v) in `variants`, given T = time_terms of c. The planner tries a variant only when its bound
    can reach the best estimate.

    The step is m * t_mb + bubble + DP tail + optimizer with bubble = (p-1)/v * (>= t_mb), and t_mb
    on the slowest stage is at least the largest, over the stages, of these per-micro-batch terms
    X_k(b), each of which only grows with recompute: compute, the TP collectives that are never
    hidden (forward; under SP also the backward all-gathers; with tp_comm_overlap the non-overlapped
    share of all), the EP all-to-all and the Ulysses all-to-all. (Selective recompute's charge for
    any `recompute_modules` is a part of full recompute's: selective_extra, _ep_per_microbatch.) Hence
        step >= (m_b + (p-1)/v) * max_k X_k(b) + optimizer,    m_b = m * c.b / b.
    Dropped as >= 0 (they shrink with a larger overlap window, so more recompute could lower them):
    ring-CP and PP exposure, the async TP backward, DP traffic. The optimizer step does not depend
    on b, v or recompute, except under parameter offload. tests/test_planner_refine.py checks the
    bound against every variant of many shapes."""
    own = {k: (st["comp"], st["ep_floor"]) for k, st in T["stages"].items()}
    opt = T["optimizer_time"] if c.offload != "optimizer+params" else 0.0
    return _floors(c, A, variants, own, opt)


def shape_floor(c: Ctx, A, variants) -> float:
    """A lower bound on the step time of every layout that differs from c's only by a (b, v) in
    `variants`, its ZeRO stage or offload and as much or more recompute, computed from c alone (no
    time_terms): variant_floors' bound at c's recompute level, over every stage that can be the
    slowest (c.candidates), with the optimizer step dropped as >= 0. The planner uses it for a variant whose sizing showed that it needs more recompute than the
    coarse layout its floor came from; tests/test_planner_refine.py checks it against the variants."""
    return min(_floors(c, A, variants, None, 0.0).values())


def _floors(c: Ctx, A, variants, own: dict | None, opt: float) -> dict:
    """{(b, v): (m * c.b / b + (p-1)/v) * max_k X_k(b) + opt} over the stages k of `own` (stage ->
    c's own (compute, EP) terms, reused at c's micro-batch) or, when None, over c.candidates."""
    per_b = {}
    stages = own if own is not None else c.candidates
    for b, _ in variants:
        if b in per_b:
            continue
        ctx = c
        if b != c.b:
            ctx = _new(Ctx)
            ctx.__dict__ = dict(c.__dict__, b=b)
        worst = 0.0
        compute_plan, tp_plan_, cp_plan_, ep_plan_ = _plans(ctx, A)
        for k in stages:
            _, n_dense, n_moe = c.split[k]
            kinds = c.hsplit[k] if c.hsplit is not None else None
            last = k == c.pp - 1
            # c's own micro-batch: its compute and EP terms are T's (the same function of the same inputs)
            if ctx is c and own is not None:
                comp, ep_floor = own[k]
            else:
                comp = stage_compute(ctx, A, n_dense, n_moe, last, compute_plan, kinds)[0]
                ep = _ep_per_microbatch(ctx, A, n_moe, ep_plan_) if ctx.ep > 1 and n_moe else _NO_COMM
                ep_floor = _ep_unhidden(A, ep[2])
            x = comp
            if ctx.tp > 1:      # tp_unhidden is 0.0 for tp 1
                x += tp_unhidden(ctx, A, k, tp_plan_)
            x += ep_floor
            if ctx.deepspeed:   # Ulysses all-to-all: exposed whatever the window
                x += cp_per_microbatch(ctx, A, n_dense + n_moe, 0.0, cp_plan_, kinds)[2]
            if x > worst:
                worst = x
        per_b[b] = worst
    m_times_b, p = c.m * c.b, c.pp
    return {(b, v): (m_times_b / b + (p - 1) / v) * per_b[b] + opt for b, v in variants}
