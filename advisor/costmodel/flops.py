"""FLOPs per token and per step, and what recompute runs again.

- FLOPs per token: 2 x (matmul parameters a token touches) forward, x3 for forward + backward
  (Kaplan et al. 2020 "6N"; Narayanan et al. 2021 Eq. 3), plus attention scores 2*s*(wq + wo) per
  layer forward (QK^T and AV; Narayanan Eq. 3's s/(6h) term), plus the logits GEMM 2*h*V.
  Model FLOPs (for MFU) count the full s x s score matrix and no recompute, like Narayanan Eq. 3
  without its recompute pass and like PaLM's MFU (Chowdhery et al. 2022, App. B).
- Recompute extra: full = one more forward of every layer (Narayanan Eq. 3's factor 4 instead of 3);
  selective = one more forward of each module in `Assumptions.recompute_modules` (Megatron-Core
  `recompute_modules`, megatron/core/transformer/transformer_config.py): "core_attn" the attention
  core (Korthikanti et al. 2022 §5; the default, the only module before), the others through
  `selective_extra` (their GEMMs at 2 FLOPs per parameter per token, their element-wise kernels
  at one third of `elementwise_traffic`, "moe" also the EP dispatch and combine). Each module's
  charge is a part of what full recompute charges, so none <= selective <= full in compute.
- Executed attention FLOPs with a causal FlashAttention kernel are `flash_causal_fraction` of the
  full matrix; an unfused (non-flash) attention also moves the s x s scores through HBM
  (`softmax_bytes_per_score`), timed at `hbm_efficiency` x HBM bandwidth.
"""

from __future__ import annotations

from typing import NamedTuple

from .adapters import adapter_forward_flops
from .context import Ctx, moe_layers_before

__all__ = ["per_token_forward_flops", "moe_token_weights", "ssd_flops_per_token", "hybrid_forward_flops",
           "model_flops_per_step", "executed_flops_per_step", "recompute_factors", "expert_gemm_calls",
           "SelectiveExtra", "selective_extra"]


def per_token_forward_flops(c: Ctx, n_dense: float, n_moe: float, logits: bool, vocab: float, kinds=None):
    """Forward FLOPs per token for n_dense + n_moe layers: (linear GEMMs, attention scores at full s^2).
    `kinds` = (Mamba, attention, MLP, MoE) layers of a hybrid stack instead (hybrid_forward_flops)."""
    if kinds is not None:
        return hybrid_forward_flops(c, kinds, logits, vocab)
    pc = c.pc
    lin = n_dense * (pc.attention + pc.dense_mlp)
    if n_moe:
        lin += n_moe * (pc.attention + moe_token_weights(c))
    lin *= 2.0
    if logits:
        lin += 2.0 * c.h * vocab
    attn = (n_dense + n_moe) * 2.0 * c.seq_attn * (c.wq + c.wo)
    return lin, attn


def moe_token_weights(c: Ctx) -> float:
    """Weights one token multiplies in an MoE layer's MLP: the router (hidden x experts), its top-k routed
    experts, the shared experts and, with LatentMoE, the down and up projections around the routed
    experts, whose own GEMMs then run on the latent width (advisor.inputs.architecture._moe_mlp;
    Megatron-Bridge training/utils/flop_utils.py moe_layer_flops counts the same: routed on the latent
    size, plus 4 x hidden x latent per token for the two projections forward and backward)."""
    pc = c.pc
    return c.h * c.experts + c.topk * pc.expert + pc.shared_mlp + pc.latent_proj


def ssd_flops_per_token(c: Ctx) -> float:
    """Forward FLOPs per token of one Mamba-2 layer (a Gated DeltaNet layer: gdn_flops_per_token) outside its GEMMs: the chunked SSD scan and the
    depthwise conv1d. Dao & Gu 2024 (arXiv:2405.21060) §6: the sequence is cut into chunks of Q
    tokens; within a chunk the output is the masked "attention-like" product (C B^T) X, Q x Q per
    group of d_state columns then per head of head_dim columns, i.e. 2 Q d_state ngroups + 2 Q d_inner
    FLOPs per token (the causal mask is not skipped, as the Triton kernels compute the whole block);
    across chunks, each chunk's state B^T X (d_state x head_dim per head) and the output C h read
    from the passed states, 2 d_state d_inner each: 4 d_state d_inner per token. The conv1d:
    2 d_conv FLOPs per channel per token. Linear in s, as §6 states (O(T N^2) training FLOPs for
    head_dim = N)."""
    if c.hyb[8] == "G":
        return gdn_flops_per_token(c)
    d_inner, gn, nheads, conv_ch, state, chunk, d_conv = c.hyb[:7]
    return 2.0 * chunk * (gn + d_inner) + 4.0 * state * d_inner + 2.0 * d_conv * conv_ch


def gdn_flops_per_token(c: Ctx) -> float:
    """Forward FLOPs per token of one Gated DeltaNet layer outside its GEMMs: the chunked gated delta
    rule and the conv1d. Yang, Kautz & Hatamizadeh 2024 (arXiv:2412.06464) §3.3, as transformers'
    torch_chunk_gated_delta_rule computes it (huggingface/transformers@043bb8dde14aae1a56b84cd230737cf5d0877912
    src/transformers/models/qwen3_next/modular_qwen3_next.py), per value head (q and k are repeated to
    the value heads) with chunk C, key head dim dk and value head dim dv: within a chunk k_beta k^T,
    q k^T, attn (k_beta g) (2 C dk each), attn v_beta and attn v_new (2 C dv each) and the triangular
    solve of the C x C matrix (C^3 / 3 multiply-adds per chunk: 2 C^2 / 3 per token); across chunks
    k_cumdecay S, q S and the state update k^T v_new (2 dk dv each). The conv1d: 2 d_conv FLOPs per
    channel per token. No term grows with s: the layer is linear in the context."""
    conv_ch, chunk, d_conv = c.hyb[3], c.hyb[5], c.hyb[6]
    v_heads, dk, dv = c.hyb[9:12]
    per_head = 2.0 * chunk * (3 * dk + 2 * dv) + 2.0 * chunk * chunk / 3.0 + 6.0 * dk * dv
    return v_heads * per_head + 2.0 * d_conv * conv_ch


def hybrid_forward_flops(c: Ctx, kinds: tuple, logits: bool, vocab: float):
    """per_token_forward_flops of a hybrid stack: (linear GEMMs, sequence-mixing FLOPs). A Mamba layer's
    GEMMs are in_proj and out_proj at 2 FLOPs per weight per token (its conv1d, dt_bias, A_log, D and
    norm weights are not GEMM operands), its scan ssd_flops_per_token goes with the attention scores
    (the kernels timed as the attention core); attention-only layers as a dense layer's attention,
    MLP-only and MoE-only layers as their MLPs."""
    pc = c.pc
    n_m, n_a, n_d, n_e = kinds
    d_inner, gn, nheads = c.hyb[:3]
    mamba_gemm = c.h * (2 * d_inner + 2 * gn + nheads) + d_inner * c.h
    lin = n_m * mamba_gemm + n_a * pc.attention + n_d * pc.dense_mlp
    if n_e:
        lin += n_e * moe_token_weights(c)
    lin *= 2.0
    if logits:
        lin += 2.0 * c.h * vocab
    attn = n_a * 2.0 * c.seq_attn * (c.wq + c.wo)
    if n_m:
        attn += n_m * ssd_flops_per_token(c)
    return lin, attn


def model_flops_per_step(c: Ctx) -> float:
    """Model FLOPs of one optimizer step over the whole cluster (no recompute, full s^2, unpadded V)."""
    n_moe = moe_layers_before(c, c.L)
    lin, attn = per_token_forward_flops(c, c.L - n_moe, n_moe, True, c.vocab, c.hcounts)
    if c.frozen:
        # LoRA / QLoRA as NeMo counts them (costmodel.adapters): frozen linears forward + input
        # gradient (2x), attention and the adapters forward + backward (3x)
        return (2.0 * lin + 3.0 * attn + 3.0 * adapter_forward_flops(c, c.L - n_moe, n_moe)) * c.gbs * c.seq
    return 3.0 * (lin + attn) * c.gbs * c.seq


def executed_flops_per_step(c: Ctx, A) -> float:
    """Hardware FLOPs per step over the cluster (HFU numerator, Korthikanti et al. 2022 §5): model
    FLOPs plus the recompute passes, logits over the padded vocabulary, full s^2 attention."""
    n_moe = moe_layers_before(c, c.L)
    n_dense = c.L - n_moe
    if c.hcounts is not None:      # a hybrid stack: its MLP and MoE layers carry the selective extras
        n_dense, n_moe = c.hcounts[2], c.hcounts[3]
    lin, attn = per_token_forward_flops(c, c.L - n_moe, n_moe, False, 0.0, c.hcounts)
    lin_mul, attn_mul = recompute_factors(c, A, causal=False)
    extra = selective_extra(c, A)
    if c.frozen:   # no weight-gradient GEMMs for the frozen linears; the adapters run fwd + bwd (+ recompute)
        adapters = adapter_forward_flops(c, c.L - n_moe, n_moe) * lin_mul
        rec = 0.0 if extra is None else (c.L - n_moe) * extra.flops_dense + n_moe * extra.flops_moe
        return (lin * (lin_mul - 1.0) + adapters + rec + attn * attn_mul + 2.0 * 2.0 * c.h * c.vpad) * c.gbs * c.seq
    if extra is None:
        return (lin * lin_mul + attn * attn_mul + 3.0 * 2.0 * c.h * c.vpad) * c.gbs * c.seq
    # selective recompute_modules beyond core_attn: their GEMMs run forward once more
    rec = n_dense * extra.flops_dense + n_moe * extra.flops_moe
    return (lin * lin_mul + rec + attn * attn_mul + 3.0 * 2.0 * c.h * c.vpad) * c.gbs * c.seq


def recompute_factors(c: Ctx, A, causal: bool = True):
    """(linear multiplier, attention multiplier) of executed over forward FLOPs for the layers;
    `causal` applies the causal-flash skip (time), off for the HFU count (Korthikanti §5 convention)."""
    cf = A.flash_causal_fraction if (c.flash and causal) else 1.0
    if c.recompute == "full":
        return 4.0, 4.0 * cf
    if c.recompute == "selective" and "core_attn" in A.recompute_modules:
        return 3.0, 4.0 * cf
    # selective without "core_attn" keeps the attention core (its other modules: selective_extra)
    return 3.0, 3.0 * cf


def expert_gemm_calls(c: Ctx, A, n_moe: int, lin_mul: float) -> float:
    """Local-expert GEMM calls of one micro-batch over n_moe MoE layers on one rank, the count
    `Assumptions.expert_gemm_overhead` is charged on: FC1 and FC2 of each of the experts / ep local
    experts, in every pass that runs them (lin_mul: forward, data and weight gradient, 3; 4 with
    full recompute; 2 for frozen LoRA bases), plus one forward more under selective "moe"
    recompute (selective_extra's "moe" step). The shared experts are one dense MLP, not counted."""
    passes = lin_mul
    if c.recompute == "selective" and "moe" in A.recompute_modules:
        passes += 1.0
    return n_moe * 2.0 * (c.experts / c.ep) * passes


class SelectiveExtra(NamedTuple):
    """What selective recompute's modules beyond core_attn run once more, per dense and per MoE layer:
    forward FLOPs per token and element-wise bytes per token on one rank."""

    flops_dense: float = 0.0
    flops_moe: float = 0.0
    bytes_dense: float = 0.0
    bytes_moe: float = 0.0

    def plus(self, flops_dense: float = 0.0, flops_moe: float = 0.0, bytes_dense: float = 0.0,
             bytes_moe: float = 0.0) -> "SelectiveExtra":
        """This record with one module's charge added, term by term."""
        return SelectiveExtra(self.flops_dense + flops_dense, self.flops_moe + flops_moe,
                              self.bytes_dense + bytes_dense, self.bytes_moe + bytes_moe)


def selective_extra(c: Ctx, A) -> SelectiveExtra | None:
    """What Layout.recompute == "selective" runs once more in the backward for the modules of
    `A.recompute_modules` other than "core_attn" (that one is recompute_factors' attention
    multiplier 4 and the softmax's forward share): per dense and per MoE layer, forward FLOPs per
    token (like per_token_forward_flops over the whole layer) and bytes per token on one rank (like
    compute's element-wise bytes). None, so that nothing is added and every estimate stays bit for
    bit, unless the layout is selective with such a module. Each module's step below says what
    Megatron-Core (megatron/core/transformer/transformer_config.py `recompute_modules`) runs again.

    GEMM FLOPs: 2 per parameter per token forward (Narayanan et al. 2021 Eq. 3), and a recomputed
    module runs its forward once more (Korthikanti et al. 2022 §5). Element-wise: `elementwise_traffic`
    is forward + backward per stored byte; one more forward is a third of it, the convention of the
    4/3 for full recompute. "moe" with "shared_experts" or "moe_act" nests the checkpoints in
    Megatron-Core; that third pass is not charged, so that each module's charge is a disjoint part
    of the layer and selective never costs more than full (time.variant_floors, the planner's
    recompute bisection)."""
    if c.recompute != "selective":
        return None
    mods = A.recompute_modules
    if all(m == "core_attn" for m in mods):
        return None
    x = SelectiveExtra()
    for step in (_mla_up_proj_extra, _layernorm_extra, _mlp_extra, _moe_extra):
        x = step(c, mods, x)
    return x


# Bytes per token below are the terms of compute's element-wise bytes (Korthikanti et al. 2022 §4.1's
# stored tensors, 16-bit) that belong to each module; SP shards the replicated ones.
def _act_bytes(c: Ctx) -> float:
    """FC1 output (2f, 4f with SwiGLU's gate and up) + FC2 input 2f, per unit of FFN width."""
    return (4.0 if c.gated else 2.0) + 2.0


def _mla_up_proj_extra(c: Ctx, mods, x: SelectiveExtra) -> SelectiveExtra:
    """mla_up_proj (multi_latent_attention.py `recompute_up_proj`: CheckpointWithoutOutput over
    linear_q_up_proj, or linear_q_proj without q_lora_rank, linear_kv_up_proj and RoPE): 2 FLOPs per
    attention parameter but the down projections (h x latent) and the output projection (wo x h),
    the q/kv latent norms' weights included as per_token_forward_flops counts them; the up-projected
    Q, K, V tensors."""
    if "mla_up_proj" not in mods or not c.latent:
        return x
    up = 2.0 * (c.pc.attention - c.h * c.latent - c.wo * c.h)
    qkv = 2.0 * c.wq / c.tp + 2.0 * (c.wk + c.wv) / c.kv_div
    return x.plus(up, up, qkv, qkv)


def _layernorm_extra(c: Ctx, mods, x: SelectiveExtra) -> SelectiveExtra:
    """layernorm: element-wise only, the 16-bit output (2h) of a separate norm module where the TE
    layer spec has one (gpt_layer_specs.py: MLA's input_layernorm and an MoE layer's
    pre_mlp_layernorm are TENorm; the others are fused into the next linear)."""
    if "layernorm" not in mods:
        return x
    norm = 2.0 * c.h / (c.tp if c.sp else 1)
    if c.latent:
        x = x.plus(bytes_dense=norm, bytes_moe=norm)
    if c.experts > 1:
        x = x.plus(bytes_moe=norm)
    return x


def _mlp_extra(c: Ctx, mods, x: SelectiveExtra) -> SelectiveExtra:
    """mlp, dense layers only (transformer_layer.py: `recompute_mlp` is not set for a MoELayer): FC1 +
    FC2 again, 2 FLOPs per MLP parameter, and the fused norm's output (the FC1 input, 2h, replicated)
    and the FC1 / activation outputs."""
    if "mlp" not in mods:
        return x
    return x.plus(flops_dense=2.0 * c.pc.dense_mlp,
                  bytes_dense=2.0 * c.h / (c.tp if c.sp else 1) + _act_bytes(c) * c.f / c.tp)


def _moe_extra(c: Ctx, mods, x: SelectiveExtra) -> SelectiveExtra:
    """moe (moe_layer.py `moe_layer_recompute` checkpoints the whole custom_forward): the router and the
    k routed + shared experts a token passes through, the expert tensors of the k + shared copies and
    each routed copy's permuted input and expert output (2h + 2h); the all-to-alls run again too
    (time._ep_per_microbatch). Without it, shared_experts (`shared_experts_recompute`): 2 FLOPs per
    shared-expert parameter and their activations; moe_act: the routed experts' activation output
    (the FC2 input, 2 f_moe per routed copy)."""
    if c.experts <= 1:
        return x
    t = c.tp
    if "moe" in mods:
        return x.plus(flops_moe=2.0 * moe_token_weights(c),
                      bytes_moe=_act_bytes(c) * c.f_moe * (c.topk + c.shared) / t + 4.0 * c.h * c.topk / t)
    if "shared_experts" in mods and c.shared:
        x = x.plus(flops_moe=2.0 * c.shared * c.pc.expert, bytes_moe=_act_bytes(c) * c.f_moe * c.shared / t)
    if "moe_act" in mods:
        x = x.plus(bytes_moe=2.0 * c.f_moe * c.topk / t)
    return x
