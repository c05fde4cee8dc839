"""LoRA / QLoRA in the cost model: adapter parameters, frozen-base bytes, adapter compute, NF4 dequantisation.

Only `Training.task` "lora" and "qlora" reach this module (Ctx.frozen); "pretrain" and "sft" are
priced as before, bit for bit.

Sources:
- LoRA (Hu et al. 2021, arXiv:2106.09685 §4.1): a frozen W (d_out x d_in) plus B·A with A r x d_in,
  B d_out x r, so r * (d_in + d_out) trainable parameters per adapted linear; only A and B get
  gradients and optimizer states.
- Tensor parallelism: Megatron-Bridge's ParallelLinearAdapter
  (github:NVIDIA-NeMo/Megatron-Bridge@29836cce7e8bffc0a586e96c8bc244cc7a6ae67a src/megatron/bridge/peft/utils.py):
  for a column-parallel base (qkv, fc1) linear_in is a ColumnParallelLinear(d_in, r, gather_output=True)
  and linear_out a ColumnParallelLinear(r, d_out); for a row-parallel base (proj, fc2) linear_in is a
  RowParallelLinear(d_in, r) and linear_out a ColumnParallelLinear(r, d_out). Each of the two matrices
  is split over TP, so a rank holds r * (d_in + d_out) / tp. Under sequence parallelism the adapter of
  a column-parallel base gathers the sequence itself before linear_in (`gather_from_sequence_parallel_region`),
  which keeps a full-sequence copy of the input (2 h bytes per token) for linear_in's weight gradient.
- QLoRA (Dettmers et al. 2023, arXiv:2305.14314 §3): the frozen linears are stored as 4-bit NormalFloat
  in blocks of 64 with one absmax constant per block, the constants themselves quantised to 8 bits in
  blocks of 256 with one fp32 constant each ("Double Quantization"): 4 + 8/64 + 32/(64*256) = 4.127
  bits per parameter. bitsandbytes' Params4bit defaults to blocksize 64 with compress_statistics=True
  (github:bitsandbytes-foundation/bitsandbytes@20e1677dfdc4495038fd780807c8cbc253adf921 bitsandbytes/nn/modules.py).
  Embeddings, norms and the output layer stay 16-bit (transformers' bitsandbytes integration keeps
  the output head unquantised). Every GEMM of a 4-bit weight dequantises it to 16-bit first, in the
  forward and again in the backward (bitsandbytes autograd MatMul4Bit: `dequantize_4bit` in both),
  an HBM-bound kernel that reads the packed weight and writes the 16-bit one.
- Compute: a frozen linear's backward computes only the input gradient (dX = dY W), not the weight
  gradient, so it costs 1x its forward instead of 2x; the attention core has no weights and keeps
  its 2x; each adapter runs 2 GEMMs forward and 4 backward (dA, dB and the two input gradients).
  This is also how NeMo counts the model FLOPs of a LoRA run: its 24.07 table's Llama 2 7B LoRA row
  reports 663 TFLOP/s at 24,824 tokens/s, 26.7 GFLOP per token, 0.67x its SFT row's 39.8 (673 TFLOP/s
  at 16,891), the ratio of (2 linear + 3 attention) to 3 x (linear + attention)
  (github:NVIDIA/NeMo@8e3d65dcfe3504689bfc5b6e67d502780aacad41 docs/source/performance/performance_summary.md).
"""

from __future__ import annotations

from typing import NamedTuple

from ..inputs.finetune import ALL_LINEAR, PEFT_TARGETS, priced_targets
from .context import Ctx

__all__ = ["NF4_BITS_PER_PARAM", "NF4_BYTES_PER_PARAM", "FROZEN_WEIGHT_BYTES", "AdaptedLinear", "layer_linears",
           "adapted_linears",
           "layer_adapter_params",
           "stage_adapter_params", "adapter_forward_flops", "adapter_gemm_calls", "adapter_activation_bytes",
           "base_linear_params", "dequant_bytes", "model_adapter_params", "finetune_state_bytes"]

NF4_BITS_PER_PARAM = 4.0 + 8.0 / 64.0 + 32.0 / (64.0 * 256.0)
"""QLoRA §3: 4-bit NF4 value + 8-bit block absmax per 64 values + fp32 second-level constant per 256 blocks."""
NF4_BYTES_PER_PARAM = NF4_BITS_PER_PARAM / 8.0
FROZEN_WEIGHT_BYTES = 2.0
"""Bytes of a frozen base parameter: the 16-bit checkpoint dtype (NeMo/Megatron-Bridge PEFT keep the
bf16 model; PEFT on Transformers loads with torch_dtype=bfloat16); no fp32 master copy is kept for a
parameter the optimizer never steps."""


class AdaptedLinear(NamedTuple):
    """One linear of a layer that gets an adapter: its name, input and output widths, whether it is in
    the MLP (an expert's linear in an MoE layer) and whether its base is column-parallel under TP."""

    name: str
    d_in: int
    d_out: int
    mlp: bool
    column: bool


def layer_linears(targets: tuple, h: int, wq: int, wk: int, wv: int, wo: int, f: int, gated: bool) -> tuple:
    """The AdaptedLinears of `targets` (Training.lora_targets, either naming) in one dense layer of MLP
    width f, in a fixed order: qkv h -> wq + wk + wv, proj wo -> h, fc1 h -> f (2f gated: gate and up
    fused), fc2 f -> h; PEFT's q_proj, k_proj, v_proj h -> wq / wk / wv, o_proj wo -> h, gate_proj and
    up_proj h -> f (gate_proj only in a gated MLP), down_proj f -> h."""
    up = 2 if gated else 1
    modules = PEFT_TARGETS if ALL_LINEAR in targets else targets
    catalogue = (
        ("qkv", h, wq + wk + wv, False, True), ("proj", wo, h, False, False),
        ("fc1", h, up * f, True, True), ("fc2", f, h, True, False),
        ("q_proj", h, wq, False, True), ("k_proj", h, wk, False, True), ("v_proj", h, wv, False, True),
        ("o_proj", wo, h, False, False), ("gate_proj", h, f if gated else 0, True, True),
        ("up_proj", h, f, True, True), ("down_proj", f, h, True, False),
    )
    return tuple(AdaptedLinear(*row) for row in catalogue if row[0] in modules and row[2])


def _linears(c: Ctx, f: int | None = None) -> tuple:
    return layer_linears(c.lora_targets, c.h, c.wq, c.wk, c.wv, c.wo, c.f if f is None else f, c.gated)


def adapted_linears(c: Ctx) -> tuple:
    """The AdaptedLinears of one dense layer of c's model (Training.lora_targets)."""
    return _linears(c)


def _moe_mlp_shapes(c: Ctx) -> tuple[float, float]:
    """(r-multiplier of the routed experts, of the shared experts) for the MLP targets in an MoE layer:
    one adapter per expert linear, d_in + d_out summed over its adapted linears."""
    per_expert = 0.0
    for lin in _linears(c, c.f_moe):
        if lin.mlp:
            per_expert += lin.d_in + lin.d_out
    return c.experts * per_expert, c.shared * per_expert


def layer_adapter_params(c: Ctx) -> tuple[float, float, float]:
    """Adapter parameters: (per dense layer on one TP rank, per MoE layer outside the routed experts on
    one TP rank, per MoE layer in all routed experts, before the ep x etp split)."""
    r, t = c.lora_rank, c.tp
    lins = _linears(c)
    attn = sum(r * (lin.d_in + lin.d_out) for lin in lins if not lin.mlp)
    mlp = sum(r * (lin.d_in + lin.d_out) for lin in lins if lin.mlp)
    dense = (attn + mlp) / t
    if c.experts <= 1:
        return dense, 0.0, 0.0
    routed, shared = _moe_mlp_shapes(c)
    return dense, (attn + r * shared) / t, r * routed


def stage_adapter_params(c: Ctx, n_dense: int, n_moe: int) -> tuple[float, float]:
    """(dense, expert) adapter parameters of a stage's rank: routed-expert adapters over ep x etp."""
    d, m_other, m_routed = layer_adapter_params(c)
    return n_dense * d + n_moe * m_other, n_moe * m_routed / (c.ep * c.etp)


def adapter_forward_flops(c: Ctx, n_dense: float, n_moe: float) -> float:
    """Forward FLOPs per token of the adapters of n_dense + n_moe whole layers (time.py's convention,
    per_token_forward_flops: a rank runs them on tokens / tp): 2 per adapter parameter a token passes
    (routed experts: the k it visits)."""
    d, m_other, m_routed = layer_adapter_params(c)
    per_moe = m_other * c.tp + (m_routed * c.topk / c.experts if c.experts > 1 else 0.0)
    return 2.0 * (n_dense * d * c.tp + n_moe * per_moe)


def adapter_gemm_calls(c: Ctx, n_dense: float, n_moe: float) -> float:
    """Adapter GEMM calls of one forward over n_dense + n_moe layers: 2 per targeted linear (A, B);
    an MoE layer's MLP adapters once per local expert and once for the shared experts."""
    lins = _linears(c)
    attn = 2.0 * sum(not lin.mlp for lin in lins)
    mlp = 2.0 * sum(lin.mlp for lin in lins)
    calls = n_dense * (attn + mlp)
    if n_moe:
        calls += n_moe * (attn + mlp * (c.experts / c.ep + (1.0 if c.shared else 0.0)))
    return calls


def adapter_activation_bytes(c: Ctx) -> float:
    """Bytes per token one layer's adapters add to the stored activations on one rank: the r-wide
    16-bit output of A (the input of B) per target, gathered over TP (2r), and under sequence
    parallelism the full-sequence copy of the input that a column-parallel target's adapter gathers
    itself (2h each for a column-parallel target: qkv, fc1, q/k/v_proj, gate/up_proj). The input of a
    target without SP is the tensor the base linear already keeps. (The Hugging Face stacks' PEFT
    adapters keep more: costmodel.hf.)"""
    lins = _linears(c)
    b = 2.0 * c.lora_rank * len(lins)
    if c.sp and c.tp > 1:
        b += 2.0 * c.h * sum(lin.column for lin in lins)
    return b


def base_linear_params(c: Ctx, n_dense: float, n_moe: float) -> float:
    """Frozen linear-layer parameters of n_dense + n_moe layers on one rank (what QLoRA stores in NF4
    and dequantises per GEMM): attention and MLP over TP, the local routed experts over ep x etp."""
    pc = c.pc
    lin = n_dense * (pc.attention + pc.dense_mlp) / c.tp
    if n_moe:
        lin += n_moe * (pc.attention / c.tp + c.shared * pc.expert / c.tp
                        + c.experts * pc.expert / (c.ep * c.etp))
    return lin


def dequant_bytes(c: Ctx, n_dense: float, n_moe: float) -> float:
    """HBM bytes QLoRA's dequantisation moves per micro-batch on one rank: each pass over a 4-bit
    weight reads it (NF4 bytes) and writes its 16-bit copy (2 B); forward and backward dequantise
    once each, full recompute once more."""
    passes = 3.0 if c.recompute == "full" else 2.0
    return passes * base_linear_params(c, n_dense, n_moe) * (NF4_BYTES_PER_PARAM + 2.0)


def model_adapter_params(model, rank: int, targets: tuple) -> int:
    """All adapter parameters of `model` (an inputs.specs.Model) for rank r on `targets`: r * (d_in + d_out)
    per targeted linear, per layer; MoE layers adapt each routed and shared expert's MLP linears."""
    h, f = model.hidden, model.ffn_hidden
    hd = model.head_dim or h // model.heads
    if model.mla is not None:
        m = model.mla
        wq = wk = model.heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        wv = wo = model.heads * m.v_head_dim
    else:
        wq = wo = model.heads * hd
        wk = wv = (model.kv_heads or model.heads) * hd
    gated = model.activation == "swiglu"

    def widths(lins: tuple, mlp: bool) -> int:
        return sum(lin.d_in + lin.d_out for lin in lins if lin.mlp == mlp)

    dense_lins = layer_linears(targets, h, wq, wk, wv, wo, f, gated)
    attn = widths(dense_lins, False)

    def mlp(width: int) -> int:
        return widths(layer_linears(targets, h, wq, wk, wv, wo, width, gated), True)

    if model.experts <= 1:
        return rank * model.layers * (attn + mlp(f))
    f_moe = model.moe_ffn_hidden or f
    n_moe = sum(1 for i in range(model.layers)
                if i >= model.dense_layers and (i - model.dense_layers) % model.moe_layer_freq == 0)
    n_dense = model.layers - n_moe
    per_moe = attn + (model.experts + model.shared_experts) * mlp(f_moe)
    return rank * (n_dense * (attn + mlp(f)) + n_moe * per_moe)


def finetune_state_bytes(model, counts, training, full_bytes_per_param: float) -> float:
    """Unsharded model states of a LoRA / QLoRA job: the frozen base at 16 bits (QLoRA: its linear
    layers at NF4's 4.127 bits) plus the adapters at the full-training bytes per parameter."""
    rank = training.lora_rank or 16
    targets = priced_targets(training.lora_targets, training.framework)
    base = model.params * FROZEN_WEIGHT_BYTES
    if training.task == "qlora":
        layers = counts.dense_layer_count + counts.moe_layer_count
        linear = model.params - counts.embedding - counts.output - counts.final_norm - layers * counts.norms
        base -= linear * (FROZEN_WEIGHT_BYTES - NF4_BYTES_PER_PARAM)
    return base + model_adapter_params(model, rank, targets) * full_bytes_per_param
