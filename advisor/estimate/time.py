"""FLOPs, compute time, pipeline bubble, step time and MFU.

- FLOPs per token: 2 x (matmul parameters a token touches) forward, x3 for forward + backward
  (Kaplan et al. 2020 "6N"; Narayanan et al. 2021 Eq. 3), plus attention scores 2*s*(wq + wo) per
  layer forward (QK^T and AV; Narayanan Eq. 3's s/(6h) term), plus the logits GEMM 2*h*V.
  Model FLOPs (for MFU) count the full s x s score matrix and no recompute, like Narayanan Eq. 3
  without its recompute pass and like PaLM's MFU (Chowdhery et al. 2022, App. B).
- Recompute extra: full = one more forward of every layer (Narayanan Eq. 3's factor 4 instead of 3);
  selective = one more forward of the attention core (Korthikanti et al. 2022 §5).
- Executed attention FLOPs with a causal FlashAttention kernel are `flash_causal_fraction` of the
  full matrix; an unfused (non-flash) attention also moves the s x s scores through HBM
  (`softmax_bytes_per_score`), timed at `hbm_efficiency` x HBM bandwidth.
- Pipeline: step = (m + (p-1)/v) x (slowest stage's micro-batch time) (Narayanan et al. 2021 §2.2:
  bubble (p-1)/m, interleaved (p-1)/(v*m)), plus DP communication not hidden by the last backward,
  plus the optimizer step.
"""

from __future__ import annotations

from .comm import cp_per_microbatch, dp_terms, ep_per_microbatch, pp_per_microbatch, tp_per_microbatch
from .context import Ctx, moe_layers_before

__all__ = ["per_token_forward_flops", "model_flops_per_step", "executed_flops_per_step", "stage_times", "time_terms"]

_SOFTMAX_FWD_SHARE = 9.0 / 22.0  # forward part of softmax_bytes_per_score (see Assumptions)


def per_token_forward_flops(c: Ctx, n_dense: float, n_moe: float, logits: bool, vocab: float):
    """Forward FLOPs per token for n_dense + n_moe layers: (linear GEMMs, attention scores at full s^2)."""
    pc = c.pc
    lin = n_dense * (pc.attention + pc.dense_mlp)
    if n_moe:
        lin += n_moe * (pc.attention + c.h * c.experts + (c.topk + c.shared) * pc.expert)
    lin *= 2.0
    if logits:
        lin += 2.0 * c.h * vocab
    attn = (n_dense + n_moe) * 2.0 * c.seq * (c.wq + c.wo)
    return lin, attn


def model_flops_per_step(c: Ctx) -> float:
    """Model FLOPs of one optimizer step over the whole cluster (no recompute, full s^2, unpadded V)."""
    n_moe = moe_layers_before(c, c.L)
    lin, attn = per_token_forward_flops(c, c.L - n_moe, n_moe, True, c.vocab)
    return 3.0 * (lin + attn) * c.gbs * c.seq


def executed_flops_per_step(c: Ctx, A) -> float:
    """Hardware FLOPs per step over the cluster (HFU numerator, Korthikanti et al. 2022 §5): model
    FLOPs plus the recompute passes, logits over the padded vocabulary, full s^2 attention."""
    n_moe = moe_layers_before(c, c.L)
    lin, attn = per_token_forward_flops(c, c.L - n_moe, n_moe, False, 0.0)
    lin_mul, attn_mul = _recompute_factors(c, A, causal=False)
    return (lin * lin_mul + attn * attn_mul + 3.0 * 2.0 * c.h * c.vpad) * c.gbs * c.seq


def _recompute_factors(c: Ctx, A, causal: bool = True):
    """(linear multiplier, attention multiplier) of executed over forward FLOPs for the layers;
    `causal` applies the causal-flash skip (time), off for the HFU count (Korthikanti §5 convention)."""
    cf = A.flash_causal_fraction if (c.flash and causal) else 1.0
    if c.recompute == "full":
        return 4.0, 4.0 * cf
    if c.recompute == "selective":
        return 3.0, 4.0 * cf
    return 3.0, 3.0 * cf


def _stage_compute(c: Ctx, A, n_dense: int, n_moe: int, last: bool):
    """Seconds of compute for one micro-batch on one rank of a stage, its executed FLOPs, and the
    attention-core part of the time (the window CP ring traffic hides behind)."""
    tokens = c.s_loc * c.b / c.tp
    lin, attn = per_token_forward_flops(c, n_dense, n_moe, False, 0.0)
    lin_mul, attn_mul = _recompute_factors(c, A)
    lin_f = lin * lin_mul * tokens
    if last:
        lin_f += 3.0 * 2.0 * c.h * c.vpad * tokens
    attn_f = attn * attn_mul * tokens
    if c.precision == "fp8":
        lin_t = lin_f / (c.peak_fp8 * A.fp8_efficiency)
    else:
        lin_t = lin_f / (c.peak * A.compute_efficiency)
    attn_t = attn_f / (c.peak * A.compute_efficiency)
    if not c.flash:
        scores = (n_dense + n_moe) * c.a / c.tp * c.s_loc * c.seq * c.b
        share = 1.0 + (_SOFTMAX_FWD_SHARE if c.recompute != "none" else 0.0)
        attn_t += scores * A.softmax_bytes_per_score * share / (c.hbm * A.hbm_efficiency)
    return lin_t + attn_t, lin_f + attn_f, attn_t


def stage_times(c: Ctx, A, k: int, dense_params: float, expert_params: float):
    """All time terms of stage k; per-micro-batch terms are per micro-batch."""
    n_layers = c.stages[k]
    lo = sum(c.stages[:k])
    n_moe = moe_layers_before(c, lo + n_layers) - moe_layers_before(c, lo)
    n_dense = n_layers - n_moe
    first, last = k == 0, k == c.pp - 1
    comp, flops, attn_t = _stage_compute(c, A, n_dense, n_moe, last)
    # async TP backward collectives hide behind the weight-gradient GEMMs: backward is 2x forward and
    # half of it is wgrad, so ~1/3 of the layer's forward+backward GEMM time
    tp = tp_per_microbatch(c, A, n_dense, n_moe, first, last, comp / 3.0)
    cp = cp_per_microbatch(c, A, n_layers, attn_t)
    ep = ep_per_microbatch(c, A, n_moe)
    pp = pp_per_microbatch(c, A)
    ob, og, op, mbb, mbs, dnet = dp_terms(c, A, dense_params, expert_params)
    # per-micro-batch DP traffic (ZeRO-2/3, FSDP) hides behind that micro-batch's compute
    dp_mb_exposed = max(0.0, mbs - comp) if A.overlap_grad_reduce else mbs
    # the last micro-batch's backward, which the gradient reduction overlaps: 2 of 3 forward-equivalents,
    # 3 of 4 with full recompute (the recompute forward runs inside the backward)
    bwd_share = 0.75 if c.recompute == "full" else 2.0 / 3.0
    g_exp = max(0.0, og - comp * bwd_share) if A.overlap_grad_reduce else og
    p_exp = max(0.0, op - comp * (1.0 - bwd_share)) if A.overlap_param_gather else op
    t_mb = comp + tp[2] + cp[2] + ep[2] + pp[2] + dp_mb_exposed
    return {
        "comp": comp, "flops": flops, "t_mb": t_mb, "tp": tp, "cp": cp, "ep": ep, "pp": pp,
        "dp_once": (ob, og + op, g_exp + p_exp, dnet), "dp_mb": (mbb, mbs, dp_mb_exposed),
        "params": (dense_params, expert_params),
    }


def optimizer_time(c: Ctx, A, dense: float, expert: float) -> float:
    """Adam step: HBM-bound on the GPU; with offload, CPU Adam plus PCIe (and NVMe) transfers."""
    local = dense / c.dense_shard + expert / c.edp if c.zero >= 1 else dense + expert
    if c.offload == "none":
        return local * A.optimizer_bytes_per_param / (c.hbm * A.hbm_efficiency)
    t = local / A.cpu_adam_params_per_second + local * 4.0 / A.pcie_bandwidth  # grads down, params up
    if c.offload_device == "nvme":
        t += local * 16.0 * 2.0 / A.nvme_bandwidth  # read and write fp32 master + Adam states
    if c.offload == "optimizer+params":
        t += c.m * 2.0 * 2.0 * local / A.pcie_bandwidth  # param shards fetched forward and backward
    return t


def time_terms(c: Ctx, A, stage_params: dict):
    """Returns a dict with every time output. `stage_params`: stage -> (dense, expert) params."""
    p, v, m = c.pp, c.vpp, c.m
    stages = {k: stage_times(c, A, k, *stage_params[k]) for k in stage_params}
    slow = max(stages, key=lambda k: stages[k]["t_mb"])
    S = stages[slow]
    t_mb = S["t_mb"]
    dp_once_exposed = max(st["dp_once"][2] for st in stages.values())
    opt = max(optimizer_time(c, A, *st["params"]) for st in stages.values())
    compute_time = m * S["comp"]
    bubble_time = (p - 1) / v * t_mb
    per_mb_exposed = t_mb - S["comp"]
    exposed_comm = m * per_mb_exposed + dp_once_exposed
    step = compute_time + bubble_time + exposed_comm + opt
    return {
        "stages": stages, "slow": slow, "compute_time": compute_time, "bubble_time": bubble_time,
        "bubble_fraction": (p - 1) / (v * m), "exposed_comm": exposed_comm, "optimizer_time": opt,
        "step": step,
    }
