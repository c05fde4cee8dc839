"""The kernels of one layer on one rank for one micro-batch, timed by the measured profile.

One named term per cost, per layer part (`Part`): the linear layers' GEMMs in each pass (`Passes`:
forward, data gradient, weight gradient), the attention core, and the host's time to issue them.
The parts combine into the layer kinds of a stack: a dense layer is attention + MLP, an MoE layer
attention + MoE MLP, a hybrid stack's Mamba / attention-only / MLP-only / MoE-only layers one part each.

Which GEMMs a part runs depends on the model code (`Ctx.stack`):
- "megatron": Megatron-Core with Transformer Engine (megatron/core/models/gpt/gpt_layer_specs.py):
  one fused QKV projection (TELayerNormColumnParallelLinear), the output projection, FC1 with gate
  and up fused, FC2; MLA's down projections are duplicated on every TP rank
  (multi_latent_attention.py: linear_q_down_proj / linear_kv_down_proj, parallel_mode "duplicated").
- "eager": plain PyTorch model code (torchtitan's and Hugging Face transformers' Llama: separate
  wq / wk / wv / wo and w1 / w3 / w2 linears, torch SDPA).
A GEMM of weight (n x k) over M tokens costs 2Mnk FLOPs in each pass; its reduction width is k
forward, n for the data gradient and M for the weight gradient. Each is timed by the profile's GEMM
curve (`Profile.gemm_seconds`), so small GEMMs pay their launch and tail waves as measured.
"""

from __future__ import annotations

from typing import NamedTuple

from ..inputs.stacks import HF_STACKS
from .adapters import adapted_linears
from .context import Ctx, remember

__all__ = ["Linear", "Passes", "Part", "gemm_passes", "grouped_passes", "parts", "attention_core_seconds",
           "eager_stored_bytes", "host_layer_seconds", "combine_host", "KERNELS_MEGATRON_LAYER"]


class Linear(NamedTuple):
    """One linear layer's weight on this rank: n outputs, k inputs, `fmt` its GEMM format."""

    n: float
    k: float
    fmt: str


class Passes(NamedTuple):
    """Seconds of a part's GEMMs in each pass, and its forward FLOPs (one micro-batch, one rank)."""

    fwd: float
    dgrad: float
    wgrad: float
    flops: float

    def __add__(self, other: "Passes") -> "Passes":       # parts add pass by pass
        return Passes(self.fwd + other.fwd, self.dgrad + other.dgrad, self.wgrad + other.wgrad,
                      self.flops + other.flops)

    def seconds(self, fwd_passes: float, wgrad: bool) -> float:
        """The GEMM time of `fwd_passes` forwards (2 with full recompute), one data-gradient pass
        and, unless the weights are frozen, one weight-gradient pass."""
        return self.fwd * fwd_passes + self.dgrad + (self.wgrad if wgrad else 0.0)


NO_PASSES = Passes(0.0, 0.0, 0.0, 0.0)


class Part(NamedTuple):
    """The GEMM passes of each part of a layer (NO_PASSES where the model has none)."""

    attention: Passes
    mlp: Passes
    moe: Passes
    mamba: Passes
    logits: Passes


def gemm_passes(c: Ctx, tokens: float, linears: tuple, sustained: tuple = ()) -> Passes:
    """Passes of plain GEMMs over `tokens` rows; formats in `sustained` at the profile's sustained
    rate (Assumptions.sustained_formats)."""
    key = ("gemm_passes", tokens, linears, sustained)      # the same GEMMs recur across layouts
    hit = c.memo.get(key)
    if hit is not None:
        return hit[1]
    prof = c.prof
    fwd = dgrad = wgrad = flops = 0.0
    for n, k, fmt in linears:
        f = 2.0 * tokens * n * k
        flops += f
        peak, table = prof.gemm_table(fmt)     # (Profile.gemm_seconds, unrolled: the planner's hot path)
        work = f / peak * (1.0 / prof.sustained.get(fmt, 1.0) if fmt in sustained else 1.0)
        fwd += work / table.at(f, k)
        dgrad += work / table.at(f, n)
        wgrad += work / table.at(f, tokens)
    return remember(c, None, key, Passes(fwd, dgrad, wgrad, flops))   # (depends on no Assumptions field)


def grouped_passes(c: Ctx, per_expert: float, experts: float, linears: tuple, sustained: tuple = ()) -> Passes:
    """Passes of grouped expert GEMMs: `experts` local experts of `per_expert` tokens each, timed by
    the profile's grouped-GEMM curve (16-bit). Another format keeps the grouped share of its own peak,
    scaled by how that format's dense GEMMs compare with 16-bit ones at the same shape."""
    key = ("grouped_passes", per_expert, experts, linears, sustained)   # as gemm_passes
    hit = c.memo.get(key)
    if hit is not None:
        return hit[1]
    prof = c.prof
    grouped = prof.grouped_gemm.__pydantic_private__["_table"]
    peak16, table16 = prof.gemm_table("bf16")
    times = [0.0, 0.0, 0.0]
    flops = 0.0
    for n, k, fmt in linears:
        f = 2.0 * per_expert * experts * n * k
        flops += f
        peak, table = prof.gemm_table(fmt)
        tokens16 = per_expert * peak / peak16          # the 16-bit grouped GEMM of the same time
        work = f / peak * (1.0 / prof.sustained.get(fmt, 1.0) if fmt in sustained else 1.0)
        for p, width in enumerate((k, n, per_expert)):
            eff = grouped.at(tokens16, width)
            if fmt != "bf16":
                eff *= table.at(f, width) / table16.at(f * peak16 / peak, width)
            times[p] += work / min(eff, 1.0)
    return remember(c, None, key, Passes(times[0], times[1], times[2], flops))


def _fmt(c: Ctx) -> str:
    """The profile's name of c's linear-layer GEMM format (inputs.precision: "16-bit", "fp8", "fp4")."""
    return "bf16" if c.gemm == "16-bit" else c.gemm


def _attention_linears(c: Ctx) -> tuple:
    t, h, fmt = c.tp, c.h, _fmt(c)
    if c.mla_dims is not None:
        q_lora, kv_lora, rope, nope, v = c.mla_dims
        out = []
        if q_lora:
            out += [Linear(q_lora, h, fmt), Linear(c.a * (nope + rope) / t, q_lora, fmt)]
        else:
            out.append(Linear(c.a * (nope + rope) / t, h, fmt))
        out += [Linear(kv_lora + rope, h, fmt), Linear(c.a * (nope + v) / t, kv_lora, fmt), Linear(h, c.wo / t, fmt)]
        return tuple(out)
    q = (c.pc.attention - c.wo * h - 2 * h * c.wk) / h       # Q (and Qwen3-Next's output gate) widths
    k = c.wk / c.kv_div
    if c.stack == "megatron":
        return (Linear(q / t + 2 * k, h, fmt), Linear(h, c.wo / t, fmt))
    return (Linear(q / t, h, fmt), Linear(k, h, fmt), Linear(k, h, fmt), Linear(h, c.wo / t, fmt))


def _mlp_linears(c: Ctx, width: float, split: float, model_width: float | None = None) -> tuple:
    """FC1 (gate and up) and FC2 of an MLP `width` wide on tokens `model_width` wide (the hidden
    size; LatentMoE's latent size for its routed experts), split over `split` ranks."""
    h, fmt, w = model_width or c.h, _fmt(c), width / split
    if not c.gated:
        return (Linear(w, h, fmt), Linear(h, w, fmt))
    if c.stack == "megatron":
        return (Linear(2 * w, h, fmt), Linear(h, w, fmt))
    return (Linear(w, h, fmt), Linear(w, h, fmt), Linear(h, w, fmt))


def parts(c: Ctx, sustained: tuple = ()) -> Part:
    """The GEMM passes of each layer part of c's layout, one micro-batch on one rank; formats in
    `sustained` at the profile's sustained rate (Assumptions.sustained_formats)."""
    T = c.s_loc * c.b
    attention = gemm_passes(c, T, _attention_linears(c), sustained)
    mlp = gemm_passes(c, T, _mlp_linears(c, c.f, c.tp), sustained)
    moe = NO_PASSES
    if c.experts > 1:
        # tokens a local expert receives: the rank's T/tp tokens x topk routed copies, spread over the
        # experts / ep local experts of each of the ep x etp ranks that share them
        per_expert = T * c.topk * c.ep * c.etp / (c.tp * c.experts)
        pc = c.pc
        width = pc.moe_width or c.h           # LatentMoE: the routed experts run on the latent width
        moe = grouped_passes(c, per_expert, c.experts / c.ep, _mlp_linears(c, c.f_moe, c.etp, width), sustained)
        moe += gemm_passes(c, T, (Linear(c.experts, c.h, "bf16"),), sustained)     # the router
        if pc.latent_proj:                    # LatentMoE's down and up projections, on every token
            moe += gemm_passes(c, T, (Linear(width, c.h, _fmt(c)), Linear(c.h, width, _fmt(c))), sustained)
        if pc.shared_mlp:                     # the shared experts, one dense MLP at the hidden width
            shared_width = pc.shared_mlp / ((3 if c.gated else 2) * c.h)
            moe += gemm_passes(c, T, _mlp_linears(c, shared_width, c.tp), sustained)
    mamba = NO_PASSES
    if c.hyb is not None and c.hyb[0]:
        d_inner, gn, nheads = c.hyb[:3]
        mamba = gemm_passes(c, T, (Linear((2 * d_inner + 2 * gn + nheads) / c.tp, c.h, _fmt(c)),
                                   Linear(c.h, d_inner / c.tp, _fmt(c))), sustained)
    # the output layer stays 16-bit under FP8 / FP4 (inputs.precision)
    logits = gemm_passes(c, T, (Linear(c.vpad / c.tp, c.h, "bf16"),), sustained)
    return Part(attention, mlp, moe, mamba, logits)


def attention_core_seconds(c: Ctx, causal_fraction: float) -> float:
    """Seconds of one layer's fused attention core, forward + backward (no recompute), on one rank
    for one micro-batch: its executed forward FLOPs (the causal share of the score matrix) at the
    profile's attention efficiency for this head dim, call size and sequence chunk, the backward
    counted as 2.5 x the forward (the convention the curve was measured in)."""
    head_dim = c.wq / c.a
    fwd = 2.0 * c.seq_attn * (c.wq + c.wo) / c.tp * c.s_loc * c.b * causal_fraction
    if fwd <= 0.0:
        return 0.0
    eff = c.prof.attention_efficiency("cudnn", head_dim, fwd, c.s_loc)
    return 3.5 * fwd / (c.peak * eff)


def eager_stored_bytes(c: Ctx) -> tuple[float, float]:
    """Bytes per token a plain-PyTorch Llama-style layer keeps for its backward on one rank, (dense,
    MoE), counted from the model code (autograd saves each op's inputs it needs): both norms' input
    and output (4h, 16-bit), the rotated Q and the K, V SDPA reads (repeated to the query heads when
    the code expands GQA), SDPA's output and its contiguous copy that the output projection reads,
    and the MLP's FC1 outputs, activation output and FC2 input (4 x f for SwiGLU: w1, silu, w3, the
    product; 2 x f for GeLU). Under SP the norms' tensors are sharded. Checked against the H200
    layer stacks' stored bytes (benchmarks/measured_h200.py)."""
    div = c.tp if c.sp else 1
    q = c.wq / c.tp
    attn = 2.0 * (2.0 * c.h / div + 3.0 * q + 2.0 * q)
    mlp_width = (4.0 if c.gated else 2.0)
    mlp = 2.0 * (2.0 * c.h / div + mlp_width * c.f / c.tp)
    moe = 0.0
    if c.experts > 1:
        moe = 2.0 * (2.0 * c.h / div + (mlp_width * c.f_moe * (c.topk + c.shared) + 2.0 * c.h * c.topk) / c.tp)
    return attn + mlp, attn + moe


# Kernels of one Megatron-Core decoder layer, forward + backward, with Transformer Engine (bf16,
# fused attention, no SP), counted from the layer's modules (megatron/core/transformer/
# transformer_layer.py with gpt_layer_specs.get_gpt_layer_with_transformer_engine_spec):
#   forward 16: LayerNorm + QKV GEMM (TELayerNormColumnParallelLinear, 2), fused RoPE on Q and K (2),
#     Q/K/V made contiguous for the fused attention (3), fused attention (1), output projection (1),
#     bias-dropout-add (2), LayerNorm + FC1 (2), fused SwiGLU (1), FC2 (1), bias-dropout-add (1);
#   backward 24: a data- and a weight-gradient GEMM per linear (8), the two norms' backward with
#     their weight-gradient reductions (4), RoPE (2), attention (3: the kernel and its dQ/dK/dV
#     layouts), SwiGLU (1), bias-dropout-add (2), the residual branches' gradient adds (4).
KERNELS_MEGATRON_LAYER = 40.0


# Kernels one PEFT LoRA adapter adds to its linear, forward + backward (huggingface/peft@b28a09c44695163806dc2d560ec2faa1ce2949c5
# src/peft/tuners/lora/layer.py Linear.forward: the input cast to the adapter's dtype, lora_A, lora_B,
# `* scaling`, the add to the base output and the cast back; backward: the casts' and the scaling's
# gradients, a data- and a weight-gradient GEMM for each of lora_A and lora_B, and the add of its
# input gradient to the base linear's).
KERNELS_PEFT_LORA = 15.0


def host_layer_seconds(c: Ctx, recompute: bool) -> float:
    """Seconds the host takes to issue one decoder layer forward + backward on c's stack, from the
    profile's measured host costs: the eager layer as measured (its recompute variant with full
    recompute), a layer of Megatron-Core's fused kernels at the measured cost per kernel. 0 when the
    step replays CUDA graphs (Training.cuda_graphs: the host launches one graph per micro-batch)."""
    if c.cuda_graphs:
        return 0.0
    host = c.prof.host
    if c.stack == "eager":
        layer = host.eager_layer_recompute if recompute else host.eager_layer
        if c.frozen and c.stated_stack in HF_STACKS:     # each PEFT adapter's own kernels (6 of them forward)
            layer += (KERNELS_PEFT_LORA + (6.0 if recompute else 0.0)) * len(adapted_linears(c)) * host.per_kernel
        return layer
    kernels = KERNELS_MEGATRON_LAYER * (4.0 / 3.0 if recompute else 1.0)
    return kernels * host.per_kernel


def combine_host(gpu: float, host: float, exponent: float) -> float:
    """The time of work the GPU needs `gpu` seconds for and the host `host` seconds to issue: the
    larger of the two when the launch queue hides the other completely, more when it does not (a
    kernel the GPU waits for cannot be hidden): the `exponent`-norm of the two (max as exponent -> oo)."""
    if host <= 0.0:
        return gpu
    if gpu <= 0.0:
        return host
    hi, lo = (gpu, host) if gpu >= host else (host, gpu)
    return hi * (1.0 + (lo / hi) ** exponent) ** (1.0 / exponent)
