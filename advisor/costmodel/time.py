"""FLOPs, compute time, pipeline bubble, step time and MFU.

- FLOPs per token: 2 x (matmul parameters a token touches) forward, x3 for forward + backward
  (Kaplan et al. 2020 "6N"; Narayanan et al. 2021 Eq. 3), plus attention scores 2*s*(wq + wo) per
  layer forward (QK^T and AV; Narayanan Eq. 3's s/(6h) term), plus the logits GEMM 2*h*V.
  Model FLOPs (for MFU) count the full s x s score matrix and no recompute, like Narayanan Eq. 3
  without its recompute pass and like PaLM's MFU (Chowdhery et al. 2022, App. B).
- Recompute extra: full = one more forward of every layer (Narayanan Eq. 3's factor 4 instead of 3);
  selective = one more forward of each module in `Assumptions.recompute_modules` (Megatron-Core
  `recompute_modules`, megatron/core/transformer/transformer_config.py): "core_attn" the attention
  core (Korthikanti et al. 2022 §5; the default, the only module before), the others through
  `_selective_extra` (their GEMMs at 2 FLOPs per parameter per token, their element-wise kernels
  at one third of `elementwise_traffic`, "moe" also the EP dispatch and combine). Each module's
  charge is a part of what full recompute charges, so none <= selective <= full in compute.
- Executed attention FLOPs with a causal FlashAttention kernel are `flash_causal_fraction` of the
  full matrix; an unfused (non-flash) attention also moves the s x s scores through HBM
  (`softmax_bytes_per_score`), timed at `hbm_efficiency` x HBM bandwidth.
- Compute of one micro-batch (`_stage_compute`, `ComputePlan`): each GEMM of each layer part by the
  GPU's measured profile (costmodel.kernels, inputs.profile: the GEMM curve of the precision recipe's
  format at the GEMM's FLOPs and reduction width; the output layer's logits GEMMs stay 16-bit); the
  attention core by the profile's attention curve (or the unfused softmax chain with its HBM
  traffic); element-wise kernels as HBM traffic per stored activation byte (`elementwise_traffic` for
  Megatron-Core, the profile's measured `elementwise` for eager PyTorch); the whole combined with the
  host's time to issue the kernels (kernels.host_layer_seconds, kernels.combine_host). Checked against
  the measured H200 layers (benchmarks/measured_h200.py) and published throughput
  (benchmarks/calibrate_2025.py, benchmarks/calibrate_korthikanti.py).
- Pipeline: step = (m + (p-1)/v) x (slowest stage's micro-batch time) (Narayanan et al. 2021 §2.2:
  bubble (p-1)/m, interleaved (p-1)/(v*m)), plus DP communication not hidden by the backward of the
  last micro-batch of each model chunk (`_overlapped_tail`), plus the optimizer step.
"""

from __future__ import annotations

from typing import NamedTuple

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
from ..inputs.stacks import HF_STACKS
from .adapters import adapted_linears, adapter_forward_flops, adapter_gemm_calls, dequant_bytes, stage_adapter_params
from .context import Ctx, moe_layers_before, remember
from .kernels import attention_core_seconds, combine_host, eager_stored_bytes, host_layer_seconds, parts
from .memory import act_layers_of, offloaded_layers

_new = object.__new__

__all__ = ["per_token_forward_flops", "moe_token_weights", "model_flops_per_step", "executed_flops_per_step",
           "stage_times", "time_terms", "variant_floors"]

_SOFTMAX_FWD_SHARE = 9.0 / 22.0  # forward part of softmax_bytes_per_score (see Assumptions)
_NO_COMM = (0.0, 0.0, 0.0, False)   # what the comm.*_per_microbatch terms return for a degree of 1


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
    lin_mul, attn_mul = _recompute_factors(c, A, causal=False)
    extra = _selective_extra(c, A)
    if c.frozen:   # no weight-gradient GEMMs for the frozen linears; the adapters run fwd + bwd (+ recompute)
        adapters = adapter_forward_flops(c, c.L - n_moe, n_moe) * lin_mul
        rec = 0.0 if extra is None else (c.L - n_moe) * extra[0] + n_moe * extra[1]
        return (lin * (lin_mul - 1.0) + adapters + rec + attn * attn_mul + 2.0 * 2.0 * c.h * c.vpad) * c.gbs * c.seq
    if extra is None:
        return (lin * lin_mul + attn * attn_mul + 3.0 * 2.0 * c.h * c.vpad) * c.gbs * c.seq
    # selective recompute_modules beyond core_attn: their GEMMs run forward once more
    rec = n_dense * extra[0] + n_moe * extra[1]
    return (lin * lin_mul + rec + attn * attn_mul + 3.0 * 2.0 * c.h * c.vpad) * c.gbs * c.seq


def _recompute_factors(c: Ctx, A, causal: bool = True):
    """(linear multiplier, attention multiplier) of executed over forward FLOPs for the layers;
    `causal` applies the causal-flash skip (time), off for the HFU count (Korthikanti §5 convention)."""
    cf = A.flash_causal_fraction if (c.flash and causal) else 1.0
    if c.recompute == "full":
        return 4.0, 4.0 * cf
    if c.recompute == "selective" and "core_attn" in A.recompute_modules:
        return 3.0, 4.0 * cf
    # selective without "core_attn" keeps the attention core (its other modules: _selective_extra)
    return 3.0, 3.0 * cf


def _gemm_calls(c: Ctx, n_dense: int, n_moe: int, kinds=None) -> float:
    """Linear-layer GEMM calls of one forward pass over n_dense + n_moe layers on one rank: QKV and
    output projection (MLA: + the q/kv down and up projections), FC1 (gate and up fused) and FC2;
    an MoE layer runs FC1/FC2 once per local expert (experts / ep) plus once for the shared experts.
    A hybrid stack (`kinds` = Mamba, attention, MLP, MoE layers): in_proj and out_proj per Mamba
    layer, the attention's and the MLP's calls per attention-only and MLP-only layer."""
    if kinds is not None:
        n_m, n_a, n_d, n_e = kinds
        calls = 2.0 * (n_m + n_a + n_d)
        if n_e:
            calls += n_e * (2.0 * (c.experts / c.ep) + (2.0 if c.shared else 0.0))
        return calls
    attn = 2.0 + (3.0 if c.latent else 0.0)
    calls = n_dense * (attn + 2.0)
    if n_moe:
        calls += n_moe * (attn + 2.0 * (c.experts / c.ep) + (2.0 if c.shared else 0.0))
    return calls


def _expert_gemm_calls(c: Ctx, A, n_moe: int, lin_mul: float) -> float:
    """Local-expert GEMM calls of one micro-batch over n_moe MoE layers on one rank, the count
    `Assumptions.expert_gemm_overhead` is charged on: FC1 and FC2 of each of the experts / ep local
    experts, in every pass that runs them (lin_mul: forward, data and weight gradient, 3; 4 with
    full recompute; 2 for frozen LoRA bases), plus one forward more under selective "moe"
    recompute (as _selective_extra's calls). The shared experts are one dense MLP, not counted."""
    passes = lin_mul
    if c.recompute == "selective" and "moe" in A.recompute_modules:
        passes += 1.0
    return n_moe * 2.0 * (c.experts / c.ep) * passes


def _elementwise_bytes_per_layer(c: Ctx) -> tuple[float, float]:
    """Activation bytes per token that a dense and an MoE layer store on one rank, the measure of the
    element-wise kernels' (norms, bias/activation, dropout, residual adds, casts) HBM traffic:
    Korthikanti et al. 2022 §4.1's tensors without the attention core and the dropout masks (the
    terms of memory.per_layer_activations: replicated 8h, TP-sharded 24h/t for a GPT layer, the
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


def _hybrid_traffic(c: Ctx) -> tuple:
    """Per-layer HBM bytes per token of a hybrid stack's kinds (Mamba, attention, MLP, MoE), as
    _elementwise_bytes_per_layer and _cast_bytes_per_layer count them for a dense and an MoE layer:
    (element-wise bytes by kind, quantisation bytes by kind). Each kind has its own norm (2h in,
    2h out, replicated unless SP); an attention-only layer's and an MLP-only layer's tensors are the
    two halves of a dense layer's; a Mamba layer's are mamba_activations' TP-sharded tensors
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


def _selective_extra(c: Ctx, A) -> tuple | None:
    """What Layout.recompute == "selective" runs once more in the backward for the modules of
    `A.recompute_modules` other than "core_attn" (that one is _recompute_factors' attention
    multiplier 4 and the softmax's forward share): per dense and per MoE layer, (forward FLOPs per
    token, like per_token_forward_flops over the whole layer; GEMM calls, like _gemm_calls; bytes
    per token on one rank, like _elementwise_bytes_per_layer). None, so that nothing is added and
    every estimate stays bit for bit, unless the layout is selective with such a module.

    Megatron-Core (megatron/core/transformer/transformer_config.py `recompute_modules`; "core_attn",
    "mlp", "moe", "shared_experts" checkpoint normally, "layernorm", "moe_act", "mla_up_proj"
    discard their output and recompute it):
      mlp             dense layers only (transformer_layer.py: `recompute_mlp` is not set for a
                      MoELayer): FC1 + FC2 again (tensor_parallel.checkpoint(self.mlp, ...)), 2 x
                      pc.dense_mlp FLOPs, 2 calls, and its element-wise tensors: the fused norm's
                      output (the FC1 input, 2h, replicated) and the FC1/activation outputs.
      moe             MoE layers (moe/moe_layer.py: `moe_layer_recompute` checkpoints the whole
                      custom_forward: router, shared experts, dispatch, routed experts, combine):
                      the router and the routed + shared expert GEMMs, 2 x (h*E + (k + shared) x
                      expert) FLOPs, the expert calls, the expert activations and permuted copies.
                      The all-to-all dispatch and combine run again too: `_ep_per_microbatch`.
      shared_experts  MoE layers (moe_layer.py `shared_experts_recompute`): 2 x shared x expert
                      FLOPs, 2 calls, the shared experts' activations. Inside "moe" already.
      mla_up_proj     MLA (multi_latent_attention.py `recompute_up_proj`: CheckpointWithoutOutput
                      over `qkv_up_proj_and_rope_apply`, which runs linear_q_up_proj, or
                      linear_q_proj without q_lora_rank, linear_kv_up_proj and RoPE): the
                      attention's parameters but the down projections (h x latent) and the output
                      projection (wo x h), so including the q/kv latent norms' weights (q_lora +
                      kv_lora, 2,048 of DeepSeek-V3's 54.5M up-projection weights), which
                      per_token_forward_flops counts at 2 FLOPs too; 2 calls; the Q, K, V tensors.
      layernorm       element-wise only (a norm's GEMM-free forward; norms are not FLOPs here):
                      the output of a separate norm module, 2h replicated, where Megatron-Core's TE
                      layer spec has one (gpt_layer_specs.py: MLA's input_layernorm and a MoE
                      layer's pre_mlp_layernorm are TENorm; the others are fused into the next
                      linear, TELayerNormColumnParallelLinear, IdentityOp is not recomputed).
      moe_act         element-wise only: the routed experts' activation output (FC2 input, 2 f_moe
                      per routed copy). Inside "moe" already.
    GEMM FLOPs: an (m x k)(k x n) GEMM is 2mkn FLOPs, i.e. 2 per parameter per token forward
    (Narayanan et al. 2021 Eq. 3, Korthikanti et al. 2022 §5-6, this module's convention), and a
    recomputed module runs its forward once more (Korthikanti §5). Element-wise: `elementwise_traffic`
    is forward + backward per stored byte; one more forward is a third of it, the convention of
    _compute_plan's 4/3 for full recompute. "moe" with "shared_experts" or "moe_act" nests the
    checkpoints in Megatron-Core (the inner module's forward runs once more inside the recomputed
    MoE backward); that third pass is not charged, so that each module's charge is a disjoint part
    of the layer and selective never costs more than full (time.variant_floors, the planner's
    recompute bisection). The TP collectives inside a recomputed module (the MLP's all-gather /
    reduce-scatter under SP) are comm.tp_plan's, the CP ring a recomputed core_attn repeats
    comm.cp_plan's."""
    if c.recompute != "selective":
        return None
    mods = A.recompute_modules
    if all(m == "core_attn" for m in mods):
        return None
    pc = c.pc
    h, t = c.h, c.tp
    # Bytes per token below are the terms of _elementwise_bytes_per_layer (Korthikanti et al. 2022
    # §4.1's stored tensors, 16-bit) that belong to the module; SP shards the replicated ones.
    div = t if c.sp else 1
    act = (4.0 if c.gated else 2.0) + 2.0   # FC1 output (2f, 4f with SwiGLU's gate and up) + FC2 input 2f
    f_dense = f_moe = 0.0
    calls_dense = calls_moe = 0.0
    ew_dense = ew_moe = 0.0
    if "mla_up_proj" in mods and c.latent:
        # 2 FLOPs per up-projection parameter (all attention parameters but the down projections,
        # h x (q_lora + kv_lora + rope) = h x latent, and the output projection wo x h; architecture._attention)
        up = 2.0 * (pc.attention - h * c.latent - c.wo * h)
        qkv = 2.0 * c.wq / t + 2.0 * (c.wk + c.wv) / c.kv_div   # the up-projected Q, K, V (16-bit)
        f_dense += up
        f_moe += up
        calls_dense += 2.0                  # linear_q_up_proj (or linear_q_proj), linear_kv_up_proj
        calls_moe += 2.0
        ew_dense += qkv
        ew_moe += qkv
    if "layernorm" in mods:
        if c.latent:                        # MLA input_layernorm (TENorm): its 16-bit output, 2h
            ew_dense += 2.0 * h / div
            ew_moe += 2.0 * h / div
        if c.experts > 1:                   # MoE pre_mlp_layernorm (TENorm): its 16-bit output, 2h
            ew_moe += 2.0 * h / div
    if "mlp" in mods:
        f_dense += 2.0 * pc.dense_mlp       # 2 FLOPs per MLP parameter per token (FC1 + FC2)
        calls_dense += 2.0                  # FC1 (gate and up fused), FC2: as _gemm_calls
        ew_dense += 2.0 * h / div + act * c.f / t   # fused norm output (FC1 input, 2h) + FC1/FC2 tensors
    if c.experts > 1:
        if "moe" in mods:
            # router h x E and the k routed + shared experts a token passes through (per_token_forward_flops)
            f_moe += 2.0 * moe_token_weights(c)
            calls_moe += 2.0 * (c.experts / c.ep) + (2.0 if c.shared else 0.0)   # as _gemm_calls
            # the whole MoE term of _elementwise_bytes_per_layer: expert tensors of the k + shared
            # copies, and each routed copy's permuted input and expert output (2h + 2h)
            ew_moe += act * c.f_moe * (c.topk + c.shared) / t + 4.0 * h * c.topk / t
        else:
            if "shared_experts" in mods and c.shared:
                f_moe += 2.0 * c.shared * pc.expert   # 2 FLOPs per shared-expert parameter per token
                calls_moe += 2.0                      # the shared experts' FC1 and FC2
                ew_moe += act * c.f_moe * c.shared / t
            if "moe_act" in mods:
                ew_moe += 2.0 * c.f_moe * c.topk / t  # activation output (FC2 input), 2 f_moe per routed copy
    return f_dense, f_moe, calls_dense, calls_moe, ew_dense, ew_moe


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
    elementwise: tuple | None   # (dense, MoE bytes per token, recompute factor, logits bytes), or None
    ew_rate: float         # HBM bytes/s equivalent the element-wise bytes are timed at
    extra: tuple | None    # _selective_extra
    cast_dense: float
    cast_moe: float
    hbm: float             # bytes/s of the unfused softmax chain, QLoRA dequantisation and casts
    host_layer: float      # host seconds to issue one layer (0 with CUDA graphs)


def _compute_plan(c: Ctx, A) -> ComputePlan:
    """The parts of _stage_compute that are the same on every stage of one layout."""
    T = c.s_loc * c.b
    tokens = T / c.tp
    lin_mul, attn_mul = _recompute_factors(c, A)
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
        elementwise = per_dense, per_moe, (4.0 / 3.0 if full else 1.0), logits
        ew_rate = c.hbm / c.prof.elementwise
    else:
        if A.elementwise_traffic:
            per_dense, per_moe = _elementwise_bytes_per_layer(c)
            logits = (A.logits_bytes_megatron if c.megatron else A.logits_bytes_other) * c.vpad / c.tp
            elementwise = per_dense, per_moe, (4.0 / 3.0 if full else 1.0), logits
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
        elementwise=elementwise, ew_rate=ew_rate, extra=_selective_extra(c, A), cast_dense=cast_dense,
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


def _stage_compute(c: Ctx, A, n_dense: int, n_moe: int, last: bool, plan: ComputePlan | None = None, kinds=None):
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
    P = plan or _compute_plan(c, A)
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
    if P.extra is not None:   # selective recompute_modules beyond core_attn (_selective_extra)
        extra_f = (n_dense * P.extra[0] + n_moe * P.extra[1]) * tokens
        lin_f += extra_f
        lin_t += extra_f / P.fwd_rate
    if A.expert_gemm_overhead and c.experts > 1:
        lin_t += _expert_gemm_calls(c, A, n_moe if kinds is None else kinds[3], P.lin_mul) * A.expert_gemm_overhead
    if last:
        lin_f += P.logits_flops
        lin_t += P.logits
    ew_t = 0.0
    if P.elementwise is not None:
        per_dense, per_moe, recompute_factor, logits = P.elementwise
        if kinds is None:
            ew = n_dense * per_dense
            if n_moe:
                ew += n_moe * per_moe
        else:
            traffic, _ = _hybrid_traffic(c)
            ew = sum(n * x for n, x in zip(kinds, traffic))
        ew = ew * recompute_factor
        if P.extra is not None:   # one more forward of the recomputed modules' kernels: 1/3 of fwd + bwd
            ew += (n_dense * P.extra[4] + n_moe * P.extra[5]) / 3.0
        if last:
            ew += logits
        ew_t = ew * c.s_loc * c.b / P.ew_rate
    if P.cast_dense:   # the recipe's quantisation; full recompute casts the forward inputs (half) again
        if kinds is None:
            cast = n_dense * P.cast_dense + n_moe * P.cast_moe
        else:
            cast = sum(n * x for n, x in zip(kinds, _hybrid_traffic(c)[1]))
        ew_t += cast * (1.5 if c.recompute == "full" else 1.0) * c.s_loc * c.b / P.hbm
    if c.frozen:
        ad_t, ad_f = _adapter_compute(c, A, n_dense, n_moe, tokens, P.hbm)
        lin_t += ad_t
        lin_f += ad_f
    if c.stated_stack in HF_STACKS and c.stack == "eager" and kinds is None:
        ew_t += _hf_norm_seconds(c, n_dense + n_moe, c.s_loc * c.b)
    gpu = lin_t + attn_t + ew_t
    layers = (n_dense + n_moe) if kinds is None else sum(kinds)
    return combine_host(gpu, layers * P.host_layer, A.host_overlap_exponent), lin_f + attn_f, attn_t


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
# out): 20. Under autocast the adapters run in bf16 and the term is 16-bit: 2 + 4 + 6 forward, 4 + 4
# backward.
PEFT_OUTPUT_BYTES = {False: (28.0, 20.0), True: (12.0, 8.0)}

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
    """Seconds PEFT's adapter output path adds to one micro-batch of `layers` layers on one rank: every
    element of each adapted linear's output passes through these element-wise kernels at the width of
    the base linear's output, timed by the profile's streaming-bandwidth curve (forward again under
    full recompute)."""
    fwd, bwd = PEFT_OUTPUT_BYTES[bool(A.hf_autocast)]
    per_token = (fwd * (2.0 if c.recompute == "full" else 1.0) + bwd) * sum(lin.d_out for lin in adapted_linears(c))
    size = 4.0 * tokens * max((lin.d_out for lin in adapted_linears(c)), default=0)
    if not per_token or not size:
        return 0.0
    return layers * per_token * tokens / (c.prof.memory_bandwidth * c.prof.memory_bound.at(size))


def _plans(c: Ctx, A) -> tuple:
    """(_compute_plan, tp_plan, cp_plan, ep_plan) of c's layout: the parts of the per-micro-batch
    terms that are the same on every stage, kept in c.memo. They read the layout's tp, cp,
    micro-batch, sp, ep, etp, framework and recompute only, which the layouts the planner times
    share much more often than whole stages."""
    key = ("plans", id(A), c.tp, c.cp, c.b, c.sp, c.ep, c.etp, c.framework, c.recompute)
    hit = c.memo.get(key)
    if hit is not None and hit[0] is A:
        return hit[1]
    return remember(c, A, key, (_compute_plan(c, A), tp_plan(c, A) if c.tp > 1 else None,
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
    first, last = k == 0, k == c.pp - 1
    compute_plan, tp_plan_, cp_plan_, ep_plan_ = plans or _plans(c, A)
    kinds = c.hsplit[k] if c.hsplit is not None else None
    comp, flops, attn_t = _stage_compute(c, A, n_dense, n_moe, last, compute_plan, kinds)
    # async TP backward collectives hide behind the weight-gradient GEMMs: backward is 2x forward and
    # half of it is wgrad, so ~1/3 of the layer's forward+backward GEMM time. A dimension of degree 1
    # (or a stage without MoE layers) moves nothing: its terms are _NO_COMM without the call.
    tp = tp_per_microbatch(c, A, n_dense, n_moe, first, last, comp / 3.0, tp_plan_, kinds) if c.tp > 1 else _NO_COMM
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
        # selective recompute_modules beyond core_attn (_selective_extra): their e recompute FLOPs of
        # the F executed run inside the backward too, (2/3 (F - e) + e) / F; full's e = F/4 gives 3/4
        bwd_share += (n_dense * extra[0] + n_moe * extra[1]) * compute_plan.tokens / (3.0 * flops)
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
    any `recompute_modules` is a part of full recompute's: _selective_extra, _ep_per_microbatch.) Hence
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
            first, last = k == 0, k == c.pp - 1
            # c's own micro-batch: its compute and EP terms are T's (the same function of the same inputs)
            if ctx is c and own is not None:
                comp, ep_floor = own[k]
            else:
                comp = _stage_compute(ctx, A, n_dense, n_moe, last, compute_plan, kinds)[0]
                ep = _ep_per_microbatch(ctx, A, n_moe, ep_plan_) if ctx.ep > 1 and n_moe else _NO_COMM
                ep_floor = _ep_unhidden(A, ep[2])
            x = comp
            if ctx.tp > 1:      # tp_unhidden is 0.0 for tp 1
                x += tp_unhidden(ctx, A, n_dense, n_moe, first, last, tp_plan_, kinds)
            x += ep_floor
            if ctx.deepspeed:   # Ulysses all-to-all: exposed whatever the window
                x += cp_per_microbatch(ctx, A, n_dense + n_moe, 0.0, cp_plan_, kinds)[2]
            if x > worst:
                worst = x
        per_b[b] = worst
    m_times_b, p = c.m * c.b, c.pp
    return {(b, v): (m_times_b / b + (p - 1) / v) * per_b[b] + opt for b, v in variants}
