"""Compute time of one micro-batch on one rank of a stage.

- Compute of one micro-batch (`stage_compute`, `ComputePlan`): each GEMM of each layer part by the
  GPU's measured profile (costmodel.kernels, inputs.profile: the GEMM curve of the precision recipe's
  format at the GEMM's FLOPs and reduction width; the output layer's logits GEMMs stay 16-bit); the
  attention core by the profile's attention curve (or the unfused softmax chain with its HBM
  traffic); element-wise kernels as HBM traffic per stored activation byte (`elementwise_traffic` for
  Megatron-Core, the profile's measured `elementwise` for eager PyTorch); the whole combined with the
  host's time to issue the kernels (kernels.host_layer_seconds, kernels.combine_host). Checked against
  the measured H200 layers (benchmarks/measured_h200.py) and published throughput
  (benchmarks/calibrate_2025.py, benchmarks/calibrate_korthikanti.py).
"""

from __future__ import annotations

from typing import NamedTuple

from ..inputs.stacks import HF_STACKS
from .adapters import adapted_linears, adapter_forward_flops, adapter_gemm_calls, dequant_bytes
from .context import Ctx, remember
from .flops import SelectiveExtra, expert_gemm_calls, per_token_forward_flops, recompute_factors, selective_extra, ssd_flops_per_token
from .kernels import attention_core_seconds, combine_host, eager_stored_bytes, host_layer_seconds, parts

__all__ = ["ComputePlan", "Elementwise", "compute_plan", "stage_compute", "PEFT_OUTPUT_BYTES", "PEFT_INPUT_BYTES", "FP32_CORE_SHARE",
           "HF_NORM_EXTRA_BYTES"]

_SOFTMAX_FWD_SHARE = 9.0 / 22.0  # forward part of softmax_bytes_per_score (see Assumptions)


def _elementwise_bytes_per_layer(c: Ctx) -> tuple[float, float]:
    """Activation bytes per token that a dense and an MoE layer store on one rank, the measure of the
    element-wise kernels' (norms, bias/activation, dropout, residual adds, casts) HBM traffic:
    Korthikanti et al. 2022 §4.1's tensors without the attention core and the dropout masks (the
    terms of activations.LayerActivations: replicated 8h, TP-sharded 24h/t for a GPT layer, the
    replicated part sharded too under SP)."""
    div = c.tp if c.sp else 1
    h, t = c.h, c.tp
    rep = 8.0 * h + 2.0 * c.latent
    shd = (2.0 * c.wq + 2.0 * c.wo) / t + 2.0 * (c.wk + c.wv) / c.kv_div
    mlp = ((4.0 if c.gated else 2.0) + 2.0) * c.f / t
    moe = 0.0
    if c.experts > 1:
        moe = ((4.0 if c.gated else 2.0) + 2.0) * c.f_moe * (c.topk + c.shared) / t + 4.0 * h * c.topk / t
    return rep / div + shd + mlp, rep / div + shd + moe


def hybrid_traffic(c: Ctx) -> tuple:
    """Per-layer HBM bytes per token of a hybrid stack's kinds (Mamba, attention, MLP, MoE), as
    _elementwise_bytes_per_layer and _cast_bytes_per_layer count them for a dense and an MoE layer:
    (element-wise bytes by kind, quantisation bytes by kind). Each kind has its own norm (2h in,
    2h out, replicated unless SP); an attention-only layer's and an MLP-only layer's tensors are the
    two halves of a dense layer's; a Mamba layer's are MambaActivations' TP-sharded tensors
    (without the mask), and its quantised GEMM operands the in_proj input and output gradient and
    the out_proj input and output gradient."""
    div = c.tp if c.sp else 1
    h, t = c.h, c.tp
    norm = 4.0 * h / div
    d_inner, gn, nheads = c.hyb[:3]
    attn = (0.0 if c.parallel else norm) + (2.0 * c.wq + 2.0 * c.wo) / t + 2.0 * (c.wk + c.wv) / c.kv_div
    mlp = norm + ((4.0 if c.gated else 2.0) + 2.0) * c.f / t
    moe = 0.0
    if c.experts > 1:
        moe = norm + ((4.0 if c.gated else 2.0) + 2.0) * c.f_moe * (c.topk + c.shared) / t + 4.0 * h * c.topk / t
    mamba = 0.0
    if d_inner:   # a Gated DeltaNet layer's in_proj output, conv, gate and norm tensors fill the same slots (hyb)
        mamba = norm + (2 * (2 * d_inner + 2 * gn + nheads) + 6 * d_inner) / t
    ew = (mamba, attn, mlp, moe)
    if not c.lowp_bytes:
        return ew, (0.0, 0.0, 0.0, 0.0)
    per_elem = 2.0 * c.lowp_bytes
    hin = c.h / t if c.sp else c.h
    up = 2.0 if c.gated else 1.0
    cast_m = 2.0 * hin + (3 * d_inner + 2 * gn + nheads) / t if d_inner else 0.0
    cast_a = 2.0 * hin + c.wq / t + (c.wq + c.wk + c.wv) / t
    cast_d = 2.0 * hin + c.f / t + up * c.f / t
    cast_e = 0.0
    if c.experts > 1:
        cast_e = (c.topk + c.shared) * (2.0 * c.h + (1.0 + up) * c.f_moe / c.etp) * (c.etp / t)
    return ew, (cast_m * per_elem, cast_a * per_elem, cast_d * per_elem, cast_e * per_elem)


def _cast_bytes_per_layer(c: Ctx) -> tuple[float, float]:
    """HBM bytes per token that the low-precision recipe's quantisation kernels move on one rank in a
    dense and in an MoE layer, forward + backward (0 for 16-bit GEMMs).

    Transformer Engine quantises each linear layer's input in the forward and the gradient of its
    output in the backward (transformer_engine/pytorch/module/linear.py, layernorm_linear.py,
    grouped_linear.py) into two quantised copies, one for the GEMM and one for the transposed
    backward GEMM (the FP8 transpose of `cast_transpose`; the row- and column-wise MX / NV copies),
    each of the recipe's element and scale bytes q. The 16-bit tensor is read by the kernel that
    produces it, fused with the quantisation (LayerNormLinear's norm, the fused activation, the
    dgrad's bias/activation backward), whose traffic `elementwise_traffic` already counts: 2 q bytes
    per element are added. Elements per token: the inputs of QKV and FC1 (h; h/t under SP, which
    quantises before the all-gather), of the output projection and FC2 (wq/t, f/t), and the output
    gradients of the same four GEMMs; an MoE layer's experts per routed copy (h, f_moe, f_moe or
    2 f_moe gated, h; etp-sharded widths), and the shared experts' likewise. Weights are quantised
    once per step (TE caches them across micro-batches), not counted here."""
    if not c.lowp_bytes:
        return 0.0, 0.0
    per_elem = 2.0 * c.lowp_bytes
    t = c.tp
    hin = c.h / t if c.sp else c.h
    up = 2.0 if c.gated else 1.0
    attn = 2.0 * hin + c.wq / t + (c.wq + c.wk + c.wv) / t     # QKV in + dY, proj in + dY (dY of proj: h)
    dense = attn + 2.0 * hin + c.f / t + up * c.f / t          # FC1 in + FC2 dY (h), FC2 in, FC1 dY
    moe = attn
    if c.experts > 1:
        e = c.etp
        expert = 2.0 * c.h + (1.0 + up) * c.f_moe / e          # FC1 in, FC2 dY (h), FC2 in, FC1 dY
        moe += (c.topk + c.shared) * expert * (e / t)
    return dense * per_elem, moe * per_elem


class Elementwise(NamedTuple):
    """Bytes per token the element-wise kernels of a layer move on one rank (the stored activations
    they are counted by), the recompute factor, and the last stage's logits bytes."""

    dense: float
    moe: float
    recompute_factor: float
    logits: float


class ComputePlan(NamedTuple):
    """What every stage of one layout shares in its compute (one micro-batch, one rank, seconds),
    per layer part: the linear layers' GEMMs by the profile's curves (kernels.parts), the attention
    core, the element-wise kernels, and the host's time to issue a layer."""

    tokens: float          # tokens per rank the per-token FLOPs count (T / tp)
    lin_mul: float         # executed / forward FLOPs of the linear layers (3; 4 full recompute; -1 frozen)
    attn_mul: float        # the same for the attention scores (causal share included)
    attention: float       # an attention block's GEMMs, every pass
    mlp: float             # a dense MLP's GEMMs
    moe: float             # an MoE MLP's GEMMs (router, routed and shared experts)
    mamba: float           # a Mamba-2 / Gated DeltaNet mixer's in and out projections
    core: float            # the attention core of one attention layer (fused kernel, or unfused chain)
    scan_rate: float       # FLOP/s of a linear mixer's scan (ssd_flops_per_token)
    fwd_rate: float        # FLOP/s of the layer's forward GEMMs: selective recompute's extra forward
    logits: float          # the output layer's GEMMs (last stage)
    logits_flops: float
    elementwise: Elementwise | None   # None without an element-wise term
    ew_rate: float         # HBM bytes/s equivalent the element-wise bytes are timed at
    extra: SelectiveExtra | None
    cast_dense: float
    cast_moe: float
    hbm: float             # bytes/s of the unfused softmax chain, QLoRA dequantisation and casts
    host_layer: float      # host seconds to issue one layer (0 with CUDA graphs)


def compute_plan(c: Ctx, A) -> ComputePlan:
    """The parts of stage_compute that are the same on every stage of one layout."""
    T = c.s_loc * c.b
    tokens = T / c.tp
    lin_mul, attn_mul = recompute_factors(c, A)
    full = c.recompute == "full"
    fwd_passes = 2.0 if full else 1.0
    wgrad = not c.frozen
    if c.frozen:   # frozen linears and output layer: no weight-gradient GEMM (costmodel.adapters)
        lin_mul -= 1.0
    # the GEMM passes depend on the shape of the rank's work only, not on recompute or ZeRO: shared
    # by every recompute level and framework variant the planner sizes (c.memo)
    key = ("parts", id(A), c.tp, c.cp, c.b, c.ep, c.etp, c.stack)
    hit = c.memo.get(key)
    p = hit[1] if hit is not None and hit[0] is A else remember(c, A, key, parts(c, A.sustained_formats))
    hbm = c.hbm * A.hbm_efficiency
    # the unfused softmax runs forward again when the attention core is recomputed
    core_rc = full or (c.recompute == "selective" and "core_attn" in A.recompute_modules)
    elementwise = None
    if c.stack == "eager" and c.hyb is None:
        per_dense, per_moe = eager_stored_bytes(c)
        logits = A.logits_bytes_other * c.vpad / c.tp
        elementwise = Elementwise(per_dense, per_moe, 4.0 / 3.0 if full else 1.0, logits)
        ew_rate = c.hbm / c.prof.elementwise
    else:
        if A.elementwise_traffic:
            per_dense, per_moe = _elementwise_bytes_per_layer(c)
            logits = (A.logits_bytes_megatron if c.megatron else A.logits_bytes_other) * c.vpad / c.tp
            elementwise = Elementwise(per_dense, per_moe, 4.0 / 3.0 if full else 1.0, logits)
        ew_rate = hbm / A.elementwise_traffic if A.elementwise_traffic else hbm
    cast_dense, cast_moe = _cast_bytes_per_layer(c)
    fwd_flops = p.attention.flops + p.mlp.flops
    fwd_time = p.attention.fwd + p.mlp.fwd
    return ComputePlan(
        tokens=tokens, lin_mul=lin_mul, attn_mul=attn_mul,
        attention=p.attention.seconds(fwd_passes, wgrad), mlp=p.mlp.seconds(fwd_passes, wgrad),
        moe=p.moe.seconds(fwd_passes, wgrad), mamba=p.mamba.seconds(fwd_passes, wgrad),
        core=_core_seconds(c, A, core_rc, hbm), scan_rate=c.peak * A.scan_efficiency,
        fwd_rate=fwd_flops / fwd_time if fwd_time > 0.0 else c.peak,
        logits=p.logits.seconds(1.0, wgrad), logits_flops=(3.0 if wgrad else 2.0) * p.logits.flops,
        elementwise=elementwise, ew_rate=ew_rate, extra=selective_extra(c, A), cast_dense=cast_dense,
        cast_moe=cast_moe, hbm=hbm, host_layer=host_layer_seconds(c, full) if A.host_floor else 0.0)


def _core_seconds(c: Ctx, A, recomputed: bool, hbm: float) -> float:
    """One attention layer's core on one rank, one micro-batch, every pass: the fused kernel by the
    profile's attention curve (kernels.attention_core_seconds; a recomputed core runs its forward
    once more, 1 of the curve's 3.5 forward-equivalents), or the unfused chain: QK^T and PV as
    batched GEMMs by the GEMM curve (forward and two backward GEMMs each) and the softmax chain's
    HBM traffic (softmax_bytes_per_score)."""
    fwd_share = 1.0 / 3.5
    if c.flash:
        t = attention_core_seconds(c, A.flash_causal_fraction)
        return t * (1.0 + fwd_share) if recomputed else t
    heads, d = c.a / c.tp, c.wq / c.a
    scores = heads * c.s_loc * c.seq * c.b
    qk = 2.0 * scores * d
    pv = 2.0 * scores * c.wo / c.a
    prof = c.prof
    gemms = 3.0 * (prof.gemm_seconds("bf16", qk, d) + prof.gemm_seconds("bf16", pv, c.seq))
    chain = scores * A.softmax_bytes_per_score / hbm
    if recomputed:
        gemms *= 4.0 / 3.0
        chain *= 1.0 + _SOFTMAX_FWD_SHARE
    return gemms + chain


def stage_compute(c: Ctx, A, n_dense: int, n_moe: int, last: bool, plan: ComputePlan | None = None, kinds=None):
    """Seconds of compute for one micro-batch on one rank of a stage, its executed FLOPs, and the
    attention-core part of the time (the window CP ring traffic hides behind).

    Each part is timed against what bounds it (ComputePlan): the linear layers' GEMMs by the
    profile's GEMM curves, shape by shape; the attention core by its curve (or the unfused chain);
    the element-wise kernels as HBM traffic per stored activation byte; the fp32 logits of the loss
    on the last stage. The host must issue every kernel too: the stage's GPU time and the host's
    time for its layers combine by kernels.combine_host (Assumptions.host_overlap_exponent).
    `kinds`: the stage's (Mamba, attention, MLP, MoE) layers of a hybrid stack (c.hsplit[k]); n_dense
    and n_moe are then its MLP and MoE layers.
    """
    P = plan or compute_plan(c, A)
    lin, attn = per_token_forward_flops(c, n_dense, n_moe, False, 0.0, kinds)
    tokens = P.tokens
    lin_f = lin * P.lin_mul * tokens
    attn_f = attn * P.attn_mul * tokens
    if kinds is None:
        n_attn = n_dense + n_moe
        lin_t = n_attn * P.attention + n_dense * P.mlp + n_moe * P.moe
        attn_t = n_attn * P.core
    else:
        n_m, n_a, n_d, n_e = kinds
        n_attn = n_a
        lin_t = n_m * P.mamba + n_a * P.attention + n_d * P.mlp + n_e * P.moe
        attn_t = n_a * P.core
        if n_m:     # the linear mixers' scans (ssd_flops_per_token), forward + backward (+ recompute)
            attn_t += n_m * ssd_flops_per_token(c) * P.attn_mul * tokens / P.scan_rate
    if P.extra is not None:   # selective recompute_modules beyond core_attn (selective_extra)
        extra_f = (n_dense * P.extra.flops_dense + n_moe * P.extra.flops_moe) * tokens
        lin_f += extra_f
        lin_t += extra_f / P.fwd_rate
    if A.expert_gemm_overhead and c.experts > 1:
        lin_t += expert_gemm_calls(c, A, n_moe if kinds is None else kinds[3], P.lin_mul) * A.expert_gemm_overhead
    if last:
        lin_f += P.logits_flops
        lin_t += P.logits
    ew_t = _elementwise_seconds(c, P, n_dense, n_moe, last, kinds)
    if c.frozen:
        ad_t, ad_f = _adapter_compute(c, A, n_dense, n_moe, tokens, P.hbm)
        lin_t += ad_t
        lin_f += ad_f
    if c.stated_stack in HF_STACKS and c.stack == "eager" and kinds is None:
        ew_t += _hf_norm_seconds(c, n_dense + n_moe, c.s_loc * c.b)
    gpu = lin_t + attn_t + ew_t
    layers = (n_dense + n_moe) if kinds is None else sum(kinds)
    return combine_host(gpu, layers * P.host_layer, A.host_overlap_exponent), lin_f + attn_f, attn_t


def _elementwise_seconds(c: Ctx, P: ComputePlan, n_dense: int, n_moe: int, last: bool, kinds) -> float:
    """Seconds of one micro-batch's element-wise kernels on one rank of a stage (HBM traffic per
    stored activation byte, the recomputed modules' forward again, the last stage's logits) and of
    the precision recipe's quantisation kernels."""
    ew_t = 0.0
    if P.elementwise is not None:
        per_dense, per_moe, recompute_factor, logits = P.elementwise
        if kinds is None:
            ew = n_dense * per_dense
            if n_moe:
                ew += n_moe * per_moe
        else:
            traffic, _ = hybrid_traffic(c)
            ew = sum(n * x for n, x in zip(kinds, traffic))
        ew = ew * recompute_factor
        if P.extra is not None:   # one more forward of the recomputed modules' kernels: 1/3 of fwd + bwd
            ew += (n_dense * P.extra.bytes_dense + n_moe * P.extra.bytes_moe) / 3.0
        if last:
            ew += logits
        ew_t = ew * c.s_loc * c.b / P.ew_rate
    if P.cast_dense:   # the recipe's quantisation; full recompute casts the forward inputs (half) again
        if kinds is None:
            cast = n_dense * P.cast_dense + n_moe * P.cast_moe
        else:
            cast = sum(n * x for n, x in zip(kinds, hybrid_traffic(c)[1]))
        ew_t += cast * (1.5 if c.recompute == "full" else 1.0) * c.s_loc * c.b / P.hbm
    return ew_t


def _adapter_compute(c: Ctx, A, n_dense: int, n_moe: int, tokens: float, hbm: float) -> tuple[float, float]:
    """(seconds, FLOPs) the LoRA adapters and QLoRA's dequantisation add to one micro-batch on one rank
    (costmodel.adapters): the adapter GEMMs forward (2 per targeted linear) and backward (4: both
    weight gradients and both input gradients), i.e. 3x their forward FLOPs (4x with full recompute),
    each call timed by the 16-bit GEMM curve at its mean size and the rank-r reduction width (they
    are thin, so launch-bound); QLoRA dequantises each 4-bit weight to 16-bit before its forward and
    its backward GEMM, HBM-bound."""
    passes = 4.0 if c.recompute == "full" else 3.0
    flops = adapter_forward_flops(c, n_dense, n_moe) * passes * tokens
    calls = adapter_gemm_calls(c, n_dense, n_moe) * passes   # 2 fwd + 4 bwd (+ 2 recompute) per target
    # PEFT's fp32 adapters on fp32 inputs (no autocast) run on the CUDA cores: a GEMM FP32_CORE_SHARE
    # as fast, timed as the 16-bit GEMM that takes as long (time-equivalent work, as profiles rescale)
    fp32 = c.stated_stack in HF_STACKS and not A.hf_autocast
    work = flops / calls / (FP32_CORE_SHARE if fp32 else 1.0) if calls else 0.0
    t = calls * c.prof.gemm_seconds("bf16", work, c.lora_rank) if calls else 0.0
    if c.qlora:
        t += dequant_bytes(c, n_dense, n_moe) / hbm
    if c.stated_stack in HF_STACKS and c.hyb is None:
        t += _peft_output_seconds(c, A, n_dense + n_moe, tokens * c.tp)
    return t, flops


# HBM bytes per element of a PEFT adapter's output, forward and backward, by the adapter's dtype
# (huggingface/peft@b28a09c44695163806dc2d560ec2faa1ce2949c5 src/peft/tuners/lora/layer.py
# Linear.forward: `result = result + lora_B(lora_A(dropout(x))) * scaling; result.to(torch_result_dtype)`).
# fp32 adapters on a 16-bit model (no autocast): lora_B writes fp32 (4), `* scaling` reads and writes
# it (8), the add reads the 16-bit base output and the fp32 term and writes fp32 (type promotion,
# 10), the cast back reads it and writes 16-bit (6): 28 forward; backward, the cast's gradient (2 in,
# 4 out), the fp32 gradient cast to the base output's 16-bit (4 in, 2 out) and the scaling's (4 in, 4
# out): 20. Under autocast the adapters run in bf16 and the term is 16-bit: 2 + 4 + 6 forward, the
# scaling's gradient (2 in, 2 out) backward. Counted op by op by benchmarks/peft_traffic.py (PEFT
# 0.21.0, torch 2.13; it prints the forward without lora_B's own write).
PEFT_OUTPUT_BYTES = {False: (28.0, 20.0), True: (12.0, 4.0)}

# HBM bytes per element of a PEFT adapter's input, forward and backward, by autocast (same source:
# `x = self._cast_input_dtype(x, lora_A.weight.dtype)` copies the 16-bit input to the fp32 adapter's
# dtype). No autocast: the copy reads 2 and writes 4 (6) forward; backward, lora_A's fp32 input
# gradient is cast back to 16-bit (4 in, 2 out) and added to the base linear's input gradient (2 + 2
# in, 2 out): 12. Under autocast the fp32 copy is cast again to bf16 for lora_A (12 forward), and
# the backward casts its bf16 gradient to fp32 and back before the add (18). Counted op by op by
# benchmarks/peft_traffic.py (PEFT 0.21.0, torch 2.13).
PEFT_INPUT_BYTES = {False: (6.0, 12.0), True: (12.0, 18.0)}


# FP32 (CUDA-core) peak over the dense 16-bit tensor peak: an fp32 GEMM runs there, PyTorch's default
# (torch.backends.cuda.matmul.allow_tf32 False) keeping it off the tensor cores. H100 / H200 SXM
# datasheets: FP32 67 TFLOPS, BF16 989 dense (A100 19.5 / 312 = 0.062).
FP32_CORE_SHARE = 67.0 / 989.0


# Extra HBM bytes per hidden element of one transformers RMSNorm over a fused one, forward and backward
# (huggingface/transformers models/llama/modeling_llama.py LlamaRMSNorm.forward: to(float32), pow(2),
# mean, rsqrt, multiply, to(input dtype), multiply by the weight, each its own kernel on a 16-bit input:
# 36 bytes per element forward against a fused norm's 4; their autograd backward ~66 against ~10).
HF_NORM_EXTRA_BYTES = (32.0, 56.0)


def _hf_norm_seconds(c: Ctx, layers: int, tokens: float) -> float:
    """Seconds the transformers RMSNorm's unfused fp32 kernels add over a fused norm to one micro-batch
    of `layers` layers (two norms each) on one rank, at the profile's streaming bandwidth (the forward
    again under full recompute)."""
    fwd, bwd = HF_NORM_EXTRA_BYTES
    per_token = 2.0 * c.h * (fwd * (2.0 if c.recompute == "full" else 1.0) + bwd)
    size = 4.0 * tokens * c.h
    return layers * per_token * tokens / (c.prof.memory_bandwidth * c.prof.memory_bound.at(size))


def _peft_output_seconds(c: Ctx, A, layers: int, tokens: float) -> float:
    """Seconds PEFT's adapter paths add to one micro-batch of `layers` layers on one rank: every
    element of each adapted linear's output and input passes through these element-wise kernels
    (PEFT_OUTPUT_BYTES at the base linear's output width, PEFT_INPUT_BYTES at its input width),
    timed by the profile's streaming-bandwidth curve (forward again under full recompute)."""
    autocast = bool(A.hf_autocast)
    again = 2.0 if c.recompute == "full" else 1.0
    (out_f, out_b), (in_f, in_b) = PEFT_OUTPUT_BYTES[autocast], PEFT_INPUT_BYTES[autocast]
    lins = adapted_linears(c)
    per_token = sum((out_f * again + out_b) * lin.d_out + (in_f * again + in_b) * lin.d_in for lin in lins)
    size = 4.0 * tokens * max((max(lin.d_out, lin.d_in) for lin in lins), default=0)
    if not per_token or not size:
        return 0.0
    return layers * per_token * tokens / (c.prof.memory_bandwidth * c.prof.memory_bound.at(size))
