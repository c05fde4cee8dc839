"""Per-GPU memory: model states, activations, buffers, reserve; every term explicit.

Sources, by term:
- Model states (bytes per parameter, what is sharded over which group):
  * ZeRO paper (Rajbhandari et al. SC'20, arXiv:1910.02054) §3.1, §5.1 and Fig. 1: mixed-precision
    Adam = 2 (16-bit params) + 2 (16-bit grads) + K=12 (fp32 params, momentum, variance) bytes;
    stage 1 shards the K part, stage 2 also the grads, stage 3 also the params.
  * DeepSpeed's own estimators (deepspeed/runtime/zero/stage_1_and_2.py
    `estimate_zero2_model_states_mem_needs`: 2P + 18P/N, offload -> 2P; stage3.py
    `estimate_zero3_model_states_mem_needs`: 4*largest_layer + 18P/N, optimizer offload -> + 2P/N,
    params+optimizer offload -> 4*largest_layer; research/peers-measured.md §2): 18 = 2 fp16 grads
    + 4 fp32 grads + 4 fp32 params + 8 Adam for ZeRO-2; for ZeRO-3, 2 fp16 params + 16.
  * Megatron-LM distributed optimizer (docs/user-guide/features/dist_optimizer.md): bf16 params with
    fp32 main grads 18 B/param plain, 6 + 12/d distributed; fp16/fp16 20 plain, 4 + 16/d
    (research/anchors-selection.md §2). d is the data-parallel-with-context-parallel group.
  * NeMo 1.x Apex distributed Adam (nemo/core/optim/distributed_adam.py; megatron_base_model.py
    `setup_optimization`): no separate fp32 master when the optimizer dtype equals the bf16 model's,
    param remainders otherwise: Assumptions.megatron_optimizer_bytes (4 or 10 instead of 12).
  * Megatron theoretical_memory_usage.py `compute_weight_and_optimizer_memory`: most-loaded shard is
    the first pipeline stage with the embedding; TP-sharded block weights + replicated norms; experts
    over etp*ep with optimizer over expert-DP = world/(etp*ep*pp) (anchors-selection.md §2.1).
- Activations: Korthikanti et al. 2022 (arXiv:2205.05198) §4.1 per-tensor list (attention
  11sbh + 5as^2b, MLP 19sbh, LayerNorms 4sbh) generalised to GQA/MLA widths, SwiGLU, FlashAttention
  and FP8 inputs; Table 2 for TP/SP/selective/full (selective generalised to Megatron-Core's
  `recompute_modules`, transformer_config.py: core_attn, layernorm, mla_up_proj, mlp, moe, moe_act,
  shared_experts; Assumptions.recompute_modules); §4.2.3 pipeline in-flight factor (first stage
  holds p micro-batches of L/p layers) and the interleaved factor 1 + (p-1)/(p*v); Megatron
  theoretical_memory_usage.py `compute_activation_memory` for the embedding (8sbp + sbhp) and the
  output-layer/loss term (4sbh(1 + V/h)/t).
- Approximations, stated: MLA (DeepSeek-V2/V3) attention stores the compressed q/kv latents
  (q_lora + kv_lora + rope widths, 16-bit, replicated over TP like the LayerNorm outputs) and the
  up-projected per-head Q, K (nope + rope dims) and V (v_head_dim), TP-sharded by heads; MoE
  expert activations follow `moe_mlp_activations`; CP divides every stored token by cp while the
  non-flash score matrix spans the full sequence; a layer with TP degree above the KV-head count
  replicates KV heads (Megatron M6), so K/V are divided by min(t, kv_heads).
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from ..inputs.optimizers import MASTER_BYTES, moment_bytes
from ..inputs.pipeline import pipeline_split
from .adapters import FROZEN_WEIGHT_BYTES, NF4_BYTES_PER_PARAM, adapter_activation_bytes, stage_adapter_params
from .context import Ctx, remember
from .hf import applies as hf_applies, hf_peak

__all__ = [
    "detail_dict",
    "model_state_bytes_per_param",
    "per_layer_activations",
    "moe_mlp_activations",
    "stage_memory",
    "memory_terms",
    "MemoryTerms",
    "StateArgs",
    "state_args",
]


# --------------------------------------------------------------------------- model states

class StateArgs(NamedTuple):
    """The model_state_bytes_per_param arguments that the optimizer and the master-weight policy set."""

    fp32_grad_partition: bool
    main_grad_bytes: float
    fsdp_bytes: tuple
    optimizer_bytes: float
    deepspeed_optimizer_bytes: float


def state_args(optimizer: str, master: str, hidden: int, A) -> StateArgs:
    """What model_state_bytes_per_param takes for Training.optimizer and .master_weights
    (advisor.inputs.optimizers). Adam / AdamW with an fp32 master is what every framework row below
    describes, so the Assumptions' values stand unchanged. Another optimizer replaces the moments
    (Megatron and DeepSpeed: the 4-byte master plus its moments; FSDP: the moments beside its fp32
    parameters). Without a master copy every state is 16-bit: parameters 2, gradients 2 (no fp32 main
    gradient or DeepSpeed fp32 partition), moments at 2 bytes each."""
    if master == "none":
        m = moment_bytes(optimizer, "none", hidden)
        return StateArgs(False, 2.0, (2.0, 2.0, m), m, m)
    if optimizer in ("adam", "adamw"):
        return StateArgs(A.deepspeed_fp32_grad_partition, A.megatron_main_grad_bytes, A.fsdp_state_bytes,
                         A.megatron_optimizer_bytes, ADAM_MIXED_BYTES)
    m = moment_bytes(optimizer, "fp32", hidden)
    return StateArgs(A.deepspeed_fp32_grad_partition, A.megatron_main_grad_bytes,
                     (A.fsdp_state_bytes[0], A.fsdp_state_bytes[1], m), MASTER_BYTES + m, MASTER_BYTES + m)


# Mixed-precision Adam's optimizer states: fp32 master + m + v (ZeRO paper §3.1, K = 12).
ADAM_MIXED_BYTES = 12.0


def model_state_bytes_per_param(framework: str, precision: str, zero: int, fp32_grad_partition: bool = True,
                                main_grad_bytes: float = 4.0, fsdp_bytes=(4.0, 4.0, 8.0),
                                optimizer_bytes: float = 12.0, deepspeed_optimizer_bytes: float = ADAM_MIXED_BYTES):
    """Bytes per parameter as ((w_rep, w_shard), (g_rep, g_shard), (o_rep, o_shard)): the replicated
    part stays whole on every rank, the sharded part is divided by the data-parallel group size.

    megatron (zero 1 = distributed optimizer; 2/3 = Megatron-FSDP optim_grads / optim_grads_params):
        bf16/fp8: params 2, fp32 main grads 4 (`main_grad_bytes`), optimizer 12 (fp32 master + Adam
                  m, v) -> 18 or 6 + 12/d; `optimizer_bytes` replaces the 12 for optimizers that keep
                  less (Assumptions.megatron_optimizer_bytes: NeMo 1.x Apex distributed Adam, 10 or 4)
        fp16:     params 2, fp16 grads 2, optimizer 16 (+ fp32 grad copy) -> 20 or 4 + 16/d
    deepspeed / megatron+deepspeed (ZeRO paper §5.1; DeepSpeed estimators):
        params 2, fp16 grads 2, fp32 grad partition 4 (when `fp32_grad_partition`), optimizer 12;
        ZeRO-3 keeps no separate full fp16 gradient (estimator: 18P/N); `deepspeed_optimizer_bytes`
        replaces the 12 for another optimizer or no master copy (state_args).
    torchtitan (PyTorch FSDP): `fsdp_bytes` = (params, grads, optimizer), default fp32 4/4/8 sharded
        (FSDP2 MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)); zero 0 = replicated (DDP).
    """
    if framework == "megatron":
        g = 2 if precision == "fp16" else main_grad_bytes
        o = 16 if precision == "fp16" else optimizer_bytes
        w_s = 2 if zero >= 3 else 0
        g_s = g if zero >= 2 else 0
        o_s = o if zero >= 1 else 0
        return (2 - w_s, w_s), (g - g_s, g_s), (o - o_s, o_s)
    if framework == "torchtitan":
        pw, pg, po = fsdp_bytes
        if zero == 0:
            return (pw, 0), (pg, 0), (po, 0)
        return (0, pw), (0, pg), (0, po)
    f32 = 4 if fp32_grad_partition else 0
    o = deepspeed_optimizer_bytes
    if zero == 0:
        return (2, 0), (2 + f32, 0), (o, 0)
    if zero == 1:
        return (2, 0), (2, f32), (0, o)
    if zero == 2:
        return (2, 0), (0, 2 + f32), (0, o)
    return (0, 2), (0, f32 or 2), (0, o)


# --------------------------------------------------------------------------- activations

def per_layer_activations(s, b, h, a, *, t=1, sp=False, recompute="none", flash=False, f=None, gated=False,
                          wq=None, wk=None, wv=None, wo=None, kv_div=None, latent=0, dropout_masks=True,
                          lin_bytes=2.0, s_attn=None, mlp=True, modules=("core_attn",), attention=True):
    """Bytes one transformer layer stores for one micro-batch on one TP rank (Korthikanti §4.1, Table 2).

    Per token, in bytes (h hidden, f FFN, widths wq/wk/wv/wo of Q, K, V and the attention output;
    'rep' terms are replicated over TP unless sequence parallelism shards them):
        attention: LN1 input 2h (rep) + QKV input lin*h (rep) + Q 2wq/t + K, V 2(wk+wv)/kv_div
                   + core: softmax 2 + dropout mask 1 + dropout out 2 per score (5*a*s/t; without
                   dropout 2*a*s/t; with FlashAttention only the fp32 log-sum-exp, 4a/t)
                   + out-proj input lin*wo/t + dropout mask h (rep)
        MLP:       LN2 input 2h (rep) + FC1 input lin*h (rep) + FC1 output 2f/t (4f/t for SwiGLU's gate
                   and up) + FC2 input lin*f/t + dropout mask h (rep)
    With MHA, f = 4h, GeLU, no flash, lin = 2 this is Table 2: rep 10h, sharded 24h/t, core 5as/t.
    recompute "full" keeps only the layer input 2h (/t under SP). recompute "selective" recomputes the
    Megatron-Core `recompute_modules` named in `modules` (megatron/core/transformer/transformer_config.py
    `recompute_modules`, default ["core_attn"], which is Korthikanti's selective recompute):
        core_attn    drops the core term (the Q, K, V it reads stay stored, as the checkpoint's inputs)
        layernorm    drops the LayerNorm output another module stores as its input (lin*h): only where
                     the norm is a separate module. In Megatron-Core's Transformer Engine layer spec
                     (megatron/core/models/gpt/gpt_layer_specs.py) that is the MLA input norm
                     (input_layernorm=TENorm) and the MoE pre-MLP norm; the standard attention's and a
                     dense MLP's norms are fused into the next linear (TELayerNormColumnParallelLinear),
                     so there is no separate output to discard.
        mla_up_proj  drops the up-projected per-head Q, K, V of MLA (latent > 0); the latents stay
        mlp          a dense MLP keeps only its input (2h, the residual its fused norm reads)
    ("layernorm" and "mla_up_proj" use output-discarding checkpointing, the others normal
    checkpointing; the one module being recomputed during the backward is not counted.)
    `s_attn` is the key length the scores span (s x CP under context parallelism). `attention`
    False leaves the attention half out (an MLP-only layer of a hybrid stack, "-"), as `mlp` False
    leaves the MLP half out (an attention-only layer, "*").
    """
    div = t if sp else 1
    if recompute == "full":
        return 2.0 * s * b * h / div
    f = 4 * h if f is None else f
    wq = h if wq is None else wq
    wk = wq if wk is None else wk
    wv = wk if wv is None else wv
    wo = wq if wo is None else wo
    kv_div = t if kv_div is None else kv_div
    s_attn = s if s_attn is None else s_attn
    sel = frozenset(modules) if recompute == "selective" else frozenset()
    mask = 1.0 if dropout_masks else 0.0
    if attention:
        ln_out = 0.0 if ("layernorm" in sel and latent) else lin_bytes * h
        rep = 2 * h + ln_out + 2 * latent + mask * h
        qkv = 0.0 if ("mla_up_proj" in sel and latent) else 2 * wq / t + 2 * (wk + wv) / kv_div
        shd = qkv + lin_bytes * wo / t
        if "core_attn" not in sel:
            if flash:
                shd += 4.0 * a / t
            else:
                shd += (2 + 3 * mask) * a * s_attn / t
    else:
        rep = shd = 0.0
    if mlp:
        if "mlp" in sel:
            rep += 2 * h + mask * h
        else:
            rep += 2 * h + lin_bytes * h + mask * h
            shd += (4 if gated else 2) * f / t + lin_bytes * f / t
    return s * b * (rep / div + shd)


def moe_mlp_activations(s, b, h, *, t, etp, sp, k, experts, f_moe, shared, gated, dropout_masks=True,
                        lin_bytes=2.0, imbalance=1.0, modules=()):
    """Bytes the MoE block (replacing the dense MLP) stores per layer per micro-batch on one rank.

    Approximation (Megatron-Core alltoall dispatcher, documented here because Megatron's estimator
    does not model MoE activations, NVIDIA/Megatron-LM#1784): LN2 input and router input as the dense
    MLP (replicated unless SP); fp32 router logits and probabilities 8E per token; every token is sent
    to k experts: permuted input and expert output (2h each) per copy, h-wide on s*b*k*etp/t tokens
    per rank, and the expert FC1/FC2 activations at width f_moe/etp on the same copies, i.e.
    k*(4|2 + lin)*f_moe/t per token; shared experts like a dense MLP of shared*f_moe; `imbalance`
    scales the routed part for the busiest expert rank.
    `modules` are the Megatron-Core selective `recompute_modules` in force (transformer_config.py):
        moe             the MoE layer keeps only its input: the pre-MLP norm's input 2h and output
                        lin*h (and the dropout mask outside the layer)
        layernorm       drops the pre-MLP norm's output (lin*h; a separate TENorm in MoE layers)
        moe_act         drops the routed experts' activation-function output, the FC2 input (lin*f_moe
                        per routed copy)
        shared_experts  drops the shared experts' activations
    """
    div = t if sp else 1
    mask = 1.0 if dropout_masks else 0.0
    sel = frozenset(modules)
    ln_out = 0.0 if "layernorm" in sel else lin_bytes * h
    if "moe" in sel:
        return s * b * (2 * h + ln_out + mask * h) / div
    rep = 2 * h + ln_out + 8.0 * experts + mask * h
    fc2_in = 0.0 if "moe_act" in sel else lin_bytes
    routed = k * imbalance * ((lin_bytes + 2) * h * etp / t + ((4 if gated else 2) + fc2_in) * f_moe / t)
    f_sh = 0 if "shared_experts" in sel else shared * f_moe
    shd = routed + ((4 if gated else 2) + lin_bytes) * f_sh / t
    return s * b * (rep / div + shd)


def mamba_activations(s, b, h, d_inner, gn, nheads, *, t=1, sp=False, recompute="none", dropout_masks=True,
                      lin_bytes=2.0):
    """Bytes one Mamba-2 layer ("M" of a hybrid stack) stores for one micro-batch on one TP rank.

    What the backward keeps, per token, on Megatron-Core's training path (NVIDIA/Megatron-LM@
    55ac7082517c3878ae653c07c09c534b8aed49f6 megatron/core/ssm/mamba_mixer.py: in_proj =
    TELayerNormColumnParallelLinear, then `_ssm_training` L659 calls mamba_ssm's fused
    mamba_split_conv1d_scan_combined, the memory-efficient path that use_mamba_mem_eff_path=True
    selects by default, transformer_config.py L859; then the RMSNorm and out_proj =
    TERowParallelLinear), 16-bit unless said:
      replicated (sharded by SP): the layer input 2h (the fused norm's input, as the attention's),
      the in_proj input lin*h (the norm's output), the dropout mask h;
      TP-sharded (Megatron shards d_inner, heads and groups over TP): the in_proj output
      zxBCdt 2(2 d_inner + 2 ngroups d_state + nheads) and the scan's pre-gate output out_x 2 d_inner,
      the two activations MambaSplitConv1dScanCombinedFn saves (state-spaces/mamba
      mamba_ssm/ops/triton/ssd_combined.py: save_for_backward(zxbcdt, conv1d_weight, conv1d_bias,
      out_x, A, D, dt_bias, ...); the conv output, dt and the chunk states are recomputed in its
      backward); the norm's input 2 d_inner; the out_proj input lin*d_inner.
    No term grows with the context beyond the per-token ones: the layer stores O(s), never O(s^2).
    recompute "full" keeps the layer input 2h (/t under SP), as any layer."""
    if recompute == "full":
        return _mixer_layer_input(s, b, h, t, sp)
    shd = (2 * (2 * d_inner + 2 * gn + nheads) + 2 * d_inner + 2 * d_inner + lin_bytes * d_inner) / t
    return s * b * (_mixer_replicated(h, dropout_masks, lin_bytes) / (t if sp else 1) + shd)


def _mixer_layer_input(s, b, h, t, sp) -> float:
    """What a fully recomputed linear-mixer layer keeps: its 16-bit input, split by SP."""
    return 2.0 * s * b * h / (t if sp else 1)


def _mixer_replicated(h, dropout_masks, lin_bytes) -> float:
    """Per-token bytes of a linear mixer's tensors TP leaves replicated: the layer input 2h, the in_proj
    input lin*h (the fused norm's output) and the dropout mask h."""
    return 2 * h + lin_bytes * h + (h if dropout_masks else 0.0)


def gdn_activations(s, b, h, v_dim, k_dim, v_heads, dk, chunk, *, t=1, sp=False, recompute="none",
                    dropout_masks=True, lin_bytes=2.0):
    """Bytes one Gated DeltaNet layer ("G" of a hybrid stack) stores for one micro-batch on one TP rank.

    Per token, 16-bit unless said, as transformers' Qwen3NextGatedDeltaNet runs it with the fla and
    causal-conv1d kernels (huggingface/transformers@043bb8dde14aae1a56b84cd230737cf5d0877912
    src/transformers/models/qwen3_next/modular_qwen3_next.py; Megatron-Core's GatedDeltaNet,
    megatron/core/ssm/gated_delta_net.py, runs the same kernels on the same tensors):
      replicated (sharded by SP): the layer input 2h, the in_proj input lin*h, the dropout mask h;
      TP-sharded (Megatron shards the key and value heads over TP): the in_proj outputs q, k, v, z, b, a
      2(2 kdim + 2 vdim + 2 vheads) (the conv1d's input and the gate z); the conv1d output 2(2 kdim + vdim);
      what fla's ChunkGatedDeltaRuleFunction saves (fla-org/flash-linear-attention
      fla/ops/gated_delta_rule/chunk.py: save_for_backward(q, k, v, g, beta, A)): the l2-normed q and k
      repeated to the value heads 2(2 vheads dk), v (the conv output above), g and beta in fp32 4 * 2 vheads, and A, the chunk's C x C
      solve, C per value head per token 2 C vheads; the core output (the gated norm's input) 2 vdim and
      the out_proj input lin*vdim. The chunk states are recomputed in the backward, so nothing grows with
      the context beyond the per-token terms: O(s), never O(s^2).
    recompute "full" keeps the layer input 2h (/t under SP), as any layer."""
    if recompute == "full":
        return _mixer_layer_input(s, b, h, t, sp)
    proj = 2 * (2 * k_dim + 2 * v_dim + 2 * v_heads)
    conv = 2 * (2 * k_dim + v_dim)
    kernel = 2 * (2 * v_heads * dk) + 4 * (2 * v_heads) + 2 * chunk * v_heads
    shd = (proj + conv + kernel + 2 * v_dim + lin_bytes * v_dim) / t
    return s * b * (_mixer_replicated(h, dropout_masks, lin_bytes) / (t if sp else 1) + shd)


def fp8_params(c: Ctx, A) -> bool:
    """Weights kept in the low-precision format (Assumptions.fp8_param_gather, Megatron only)."""
    return A.fp8_param_gather and c.megatron and c.lowp_bytes > 0.0


def gathers_per_layer(c: Ctx) -> bool:
    """Parameters are sharded and gathered layer by layer, so no persistent full copy of the weights
    exists on the rank: ZeRO-3; Megatron-FSDP from zero_stage 2; torchtitan's FSDP from zero_stage 1
    (its export runs ZeRO 1-3 as FSDP over dp_shard, and comm.dp_terms prices them so)."""
    if c.deepspeed:
        return c.zero >= 3
    return c.zero >= 2 or (c.framework == "torchtitan" and c.zero >= 1)


def offloaded_layers(c: Ctx, A, n_layers: int) -> int:
    """Layers of a stage whose activations Megatron-Core offloads (Assumptions.activation_offload_layers):
    only on a Megatron layout with pp 1 and no recompute, which its offload supports."""
    n = A.activation_offload_layers
    if not n or c.pp > 1 or c.recompute != "none" or not c.megatron:
        return 0
    return n if n < n_layers else n_layers


def dropout_masks(c: Ctx, A) -> bool:
    return c.gpt_style if A.dropout_masks == "auto" else bool(A.dropout_masks)


def _layer_acts(c: Ctx, A, recompute: str, moe: bool) -> float:
    lin = A.fp8_activation_bytes * c.lowp_bytes if c.lowp_bytes else 2.0
    masks = dropout_masks(c, A)
    modules = A.recompute_modules if recompute == "selective" else ()
    base = per_layer_activations(
        c.s_loc, c.b, c.h, c.a, t=c.tp, sp=c.sp, recompute=recompute, flash=c.flash, f=c.f, gated=c.gated,
        wq=c.wq, wk=c.wk, wv=c.wv, wo=c.wo, kv_div=c.kv_div, latent=c.latent, dropout_masks=masks,
        lin_bytes=lin, s_attn=c.seq, mlp=not moe or recompute == "full", modules=modules,
    )
    if moe and recompute != "full":
        base += moe_mlp_activations(c.s_loc, c.b, c.h, t=c.tp, etp=c.etp, sp=c.sp, k=c.topk, experts=c.experts,
                                    f_moe=c.f_moe, shared=c.shared, gated=c.gated, dropout_masks=masks,
                                    lin_bytes=lin, imbalance=A.moe_load_imbalance, modules=modules)
    if c.frozen and recompute != "full":   # the adapters' own stored tensors (costmodel.adapters)
        base += c.s_loc * c.b * adapter_activation_bytes(c)
    return base


def _hybrid_layer_acts(c: Ctx, A, recompute: str) -> tuple:
    """Per-layer activation bytes of a hybrid stack's kinds (Mamba, attention, MLP, MoE) for one
    micro-batch on one rank: attention-only and MLP-only layers are the two halves of
    per_layer_activations, an MoE layer moe_mlp_activations alone, a Mamba layer mamba_activations;
    full recompute keeps each layer's input."""
    lin = A.fp8_activation_bytes * c.lowp_bytes if c.lowp_bytes else 2.0
    masks = dropout_masks(c, A)
    modules = A.recompute_modules if recompute == "selective" else ()
    common = dict(t=c.tp, sp=c.sp, recompute=recompute, dropout_masks=masks, lin_bytes=lin)
    d_inner, gn, nheads = c.hyb[:3]
    if c.hyb[8] == "G":
        mamba = gdn_activations(c.s_loc, c.b, c.h, d_inner, gn, c.hyb[9], c.hyb[10], c.hyb[5], **common)
    else:
        mamba = mamba_activations(c.s_loc, c.b, c.h, d_inner, gn, nheads, **common) if d_inner else 0.0
    shape = dict(flash=c.flash, f=c.f, gated=c.gated, wq=c.wq, wk=c.wk, wv=c.wv, wo=c.wo, kv_div=c.kv_div,
                 latent=c.latent, s_attn=c.seq, modules=modules)
    attn = per_layer_activations(c.s_loc, c.b, c.h, c.a, mlp=False, **shape, **common)
    if c.parallel:   # Falcon-H1: the attention branch reads the Mamba branch's stored input and norm output
        attn -= (2.0 * c.s_loc * c.b * c.h / (c.tp if c.sp else 1) if recompute == "full" else
                 c.s_loc * c.b * (2.0 * c.h + lin * c.h) / (c.tp if c.sp else 1))
    mlp = per_layer_activations(c.s_loc, c.b, c.h, c.a, attention=False, **shape, **common)
    moe = 0.0
    if c.experts > 1:
        moe = (2.0 * c.s_loc * c.b * c.h / (c.tp if c.sp else 1) if recompute == "full" else
               moe_mlp_activations(c.s_loc, c.b, c.h, t=c.tp, etp=c.etp, sp=c.sp, k=c.topk, experts=c.experts,
                                   f_moe=c.f_moe, shared=c.shared, gated=c.gated, dropout_masks=masks,
                                   lin_bytes=lin, imbalance=A.moe_load_imbalance, modules=modules))
    return mamba, attn, mlp, moe


def _hybrid_acts(c: Ctx, A) -> tuple:
    """(per-kind bytes at the layout's recompute, the full-recompute working layer), kept in c.memo."""
    key = ("hacts", id(A), c.cp, c.b, c.tp, c.sp, c.etp, c.recompute)
    hit = c.memo.get(key)
    if hit is not None and hit[0] is A:
        return hit[1]
    per = _hybrid_layer_acts(c, A, c.recompute)
    work = max(_hybrid_layer_acts(c, A, "none")) if c.recompute == "full" else 0.0
    return remember(c, A, key, (per, work))


def _hybrid_stage_acts(c: Ctx, A, k: int) -> tuple[float, float]:
    """(activation bytes of stage k's layers for one micro-batch, the working layer of full recompute)."""
    per, work = _hybrid_acts(c, A)
    return sum(n * x for n, x in zip(c.hsplit[k], per)), work


def act_layers_of(c: Ctx, A, k: int) -> float:
    """Activation bytes of stage k's layers for one micro-batch (pp 1: the whole stack), before offload."""
    if c.hsplit is not None:
        return _hybrid_stage_acts(c, A, k)[0]
    per_dense, per_moe = _act_invariants(c, A)[:2]
    _, n_dense, n_moe = c.split[k]
    return n_dense * per_dense + n_moe * per_moe


def chunks_in_flight(c: Ctx, k: int) -> int:
    """Model chunks (of L/(p*v) layers) whose activations stage k holds at its peak.

    1F1B: stage k runs p-k warm-up forwards (Narayanan et al. 2021 §2.2; Korthikanti §4.2.3), capped
    by m. Interleaved: Megatron's warm-up count (p-k-1)*2 + (v-1)*p plus the steady-state forward
    (schedules.py `forward_backward_pipelining_with_interleaving`), which for stage 0 gives
    L*(1 + (p-1)/(p*v)) layers, Korthikanti's interleaved factor.
    """
    p, v, m = c.pp, c.vpp, c.m
    if v == 1:
        return min(m, p - k)
    return min(m * v, 2 * (p - k - 1) + (v - 1) * p + 1)


_split_of = lru_cache(maxsize=256)(pipeline_split)


def chunk_share(c: Ctx, k: int, inflight: int) -> float | None:
    """Stage k's layers whose activations its rank holds at its peak, as a multiple of all its layers;
    None when its vpp chunks are even (then inflight / v). Otherwise each in-flight forward holds its
    own chunk's layers (inputs.pipeline.pipeline_split), and the interleaved schedule runs the forwards
    chunk by chunk in groups of p micro-batches (Megatron-Core pipeline_parallel/schedules.py
    get_schedule_table, main L989 @ d98e8a64: forward i runs chunk (i // p) % v), so at its
    peak the last rank holds vpp - 1 full groups and one micro-batch of its last chunk, the loss's
    chunk that holds one decoder layer less, or none (Llama 3.1 405B on 16 x 8: 112 layers in flight,
    not 113 x 7/8 = 98.9); the first rank, the most groups of its embedding's smaller first chunk."""
    return _chunk_share(c.L, c.pp, c.vpp, k, inflight) if c.vpp > 1 else None


@lru_cache(maxsize=4096)
def _chunk_share(layers: int, p: int, v: int, k: int, inflight: int) -> float | None:
    """chunk_share of rank k of `layers` over p x v chunks (a pure function of its arguments, kept:
    the planner asks it for every candidate stage of every layout it sizes)."""
    split = _split_of(layers, p, v)
    if split is None or split.form == "even":
        return None
    sizes = split.chunks[k::p]          # chunk j of rank k is virtual stage j * p + k
    rounds, rest = divmod(inflight, p * v)
    held = sum(n * (rounds * p + min(max(rest - j * p, 0), p)) for j, n in enumerate(sizes))
    return held / sum(sizes)


# --------------------------------------------------------------------------- one stage

# stage_memory splits in two parts, each holding the exact expressions it always used (the results do
# not change by a bit): the model states and parameter buffers (_stage_states), which depend on the
# layout's tp, pp, ep, etp, ZeRO stage and offload only, and the activations, which also depend on the
# micro-batch, cp, sp, vpp and recompute. The planner sizes each shape at several of those, so the
# first part is kept per (cluster, model, training) in c.memo (_states).

def _state_invariants(c: Ctx, A) -> tuple:
    """The parts of the model states that are the same on every stage of one layout."""
    pc = c.pc
    tp = c.tp
    # ---- one layer's parameters on this rank (TP-sharded weights, replicated norms; experts over etp*ep)
    kv_extra = c.kv_params * (1.0 / c.kv_div - 1.0 / tp) if c.kv_div < tp else 0.0
    attn = pc.attention / tp + kv_extra
    dense_layer = attn + pc.dense_mlp / tp + pc.norms
    routed = c.experts * pc.expert if c.experts > 1 else 0
    moe_other = attn + (pc.moe_mlp - routed - c.h * c.experts) / tp + c.h * c.experts + pc.norms
    # LatentMoE's projections are replicated over TP (Megatron-Core moe_layer.py: parallel_mode "duplicated")
    moe_other += pc.latent_proj - pc.latent_proj / tp
    word = c.vpad * c.h / tp
    # ---- bytes per parameter: replicated + sharded over the dense (dp*cp) or expert-DP group
    sa = state_args(c.optimizer, c.master, c.h, A)
    (w_r, w_s), (g_r, g_s), (o_r, o_s) = model_state_bytes_per_param(
        c.framework, c.precision, c.zero, sa.fp32_grad_partition, sa.main_grad_bytes, sa.fsdp_bytes,
        sa.optimizer_bytes, sa.deepspeed_optimizer_bytes)
    nd, ne = c.dense_shard, c.edp
    per_param = (w_r + w_s / nd, w_r + w_s / ne, g_r + g_s / nd, g_r + g_s / ne, o_r + o_s / nd, o_r + o_s / ne,
                 w_s, g_s, nd, ne)
    zero3_live = 0.0
    if c.zero >= 3 and c.deepspeed:
        # DeepSpeed estimator: 4 * largest layer (gathered 16-bit params + grads of the biggest
        # module). "Layer" is a leaf module (stage3.py counts m.parameters(recurse=False)).
        largest = max(c.vpad * c.h, pc.output, c.h * max(c.wq, c.f), c.h * c.f_moe if c.experts > 1 else 0)
        if c.hyb is not None:   # a Mamba-2 in_proj, h x (2 d_inner + 2 ngroups d_state + nheads)
            largest = max(largest, c.h * (2 * c.hyb[0] + 2 * c.hyb[1] + c.hyb[2]))
        zero3_live = 4.0 * largest / tp
    return dense_layer, routed, moe_other, word, per_param, zero3_live


def _act_invariants(c: Ctx, A) -> tuple:
    """The activation terms (and the activation-sized buffers) that are the same on every stage of
    one layout, shared by the candidate stages (memory_terms) and kept in c.memo: many layouts
    share the few fields they read."""
    key = ("act_inv", id(A), c.tp, c.sp, c.cp, c.b, c.recompute, c.etp, c.framework, c.pp > 1)
    hit = c.memo.get(key)
    if hit is not None and hit[0] is A:
        return hit[1]
    return remember(c, A, key, _act_terms(c, A))


def _act_terms(c: Ctx, A) -> tuple:
    """_act_invariants, computed."""
    tp = c.tp
    # ---- activations of one layer (per micro-batch), and the stage-independent activation terms
    rec = c.recompute
    per_dense = _acts(c, A, rec, False)
    per_moe = _acts(c, A, rec, True) if c.experts > 1 else 0.0
    div = tp if c.sp else 1
    s_b = c.s_loc * c.b
    mask = 1.0 if dropout_masks(c, A) else 0.0
    # final-norm input + output-layer input + logits kept for the loss, one micro-batch (last stage)
    lb = A.logits_bytes_megatron if c.megatron else A.logits_bytes_other
    act_out = 4.0 * s_b * c.h / div + lb * s_b * c.vpad / tp
    act_work_dense = act_work_moe = 0.0
    if rec == "full":  # the layer being recomputed holds its full activations during its backward
        act_work_dense = _acts(c, A, "none", False)
        act_work_moe = _acts(c, A, "none", True) if c.experts > 1 else 0.0
    # ---- stage-independent buffers
    pp_buf = tpo = 0.0
    if c.pp > 1:  # send/recv buffers for activations and their gradients
        pp_buf = 2 * 2.0 * 2.0 * s_b * c.h / (tp if tp > 1 else 1)
    if A.tp_comm_overlap and c.sp:
        tpo = 2 * 2.0 * s_b * c.h  # userbuffers hold the full-sequence AG/RS tensors
    return per_dense, per_moe, div, s_b, mask, act_out, act_work_dense, act_work_moe, pp_buf, tpo


def _acts(c: Ctx, A, recompute: str, moe: bool) -> float:
    """_layer_acts(c, A, recompute, moe), kept across calls in c.memo: within one recommendation the
    planner's layouts share a few (cp, micro-batch, tp, sp, etp, recompute) combinations, which are
    all that _layer_acts reads from the layout."""
    key = ("acts", id(A), c.cp, c.b, c.tp, c.sp, c.etp, recompute, moe)
    hit = c.memo.get(key)
    if hit is not None and hit[0] is A:
        return hit[1]
    return remember(c, A, key, _layer_acts(c, A, recompute, moe))


def _states(c: Ctx, A) -> tuple:
    """_stage_states of each of c.candidates, kept in c.memo: the key holds every layout field they
    read (kv_div, vpad, the stages and the candidates follow from tp, pp and the framework)."""
    key = ("states", id(A), c.tp, c.pp, c.ep, c.etp, c.zero, c.framework, c.offload, c.offload_device,
           c.dense_shard, c.edp)
    hit = c.memo.get(key)       # memoised(), inline: once per layout sized
    if hit is not None and hit[0] is A:
        return hit[1]
    return remember(c, A, key, _all_stage_states(c, A))


def _all_stage_states(c: Ctx, A) -> tuple:
    inv = _state_invariants(c, A)
    return tuple(_stage_states(c, A, k, inv) for k in c.candidates)


def _stage_states(c: Ctx, A, k: int, inv: tuple) -> tuple:
    """Model states of pipeline stage k's rank and the buffers that scale with its parameters:
    (weights, grads, optimizer, offloaded_host, offloaded_nvme, w_dense, w_exp, fp8_copy, zero3_live,
    fsdp, bucket, dense params, expert params). `inv` = _state_invariants(c, A)."""
    dense_layer, routed, moe_other, word, per_param, zero3_live = inv
    pc = c.pc
    p = c.pp
    n_layers, n_dense, n_moe = c.split[k]   # layers, dense and MoE layers of stage k (context._split)
    first, last = k == 0, k == p - 1

    # ---- parameters on this rank (TP-sharded weights, replicated norms; experts over etp*ep)
    if not n_moe:
        moe_other = 0.0
    if c.hsplit is None:
        dense = n_dense * dense_layer + n_moe * moe_other
        expert = n_moe * routed / (c.ep * c.etp)
        linear = n_dense * (dense_layer - pc.norms) + n_moe * (moe_other - pc.norms - c.h * c.experts) + expert
    else:
        dense, expert, linear = _hybrid_stage_params(c, c.hsplit[k], inv)
    if first:
        dense += word + c.pos_params
    if last:
        if not c.tied:
            dense += word
        elif p > 1:
            dense += word  # tied embeddings: the last stage keeps its own copy (Megatron embedding group)
        dense += pc.final_norm

    w_d, w_e, g_d, g_e, o_d, o_e, w_s, g_s, nd, ne = per_param   # bytes/param of dense and expert params
    tr_dense, tr_expert = dense, expert     # trainable parameters: all, or the adapters (LoRA / QLoRA)
    if c.frozen:
        w_dense, w_exp, tr_dense, tr_expert = _frozen_base(c, per_param, n_dense, n_moe, dense, expert, linear)
        dense += tr_dense
        expert += tr_expert
    else:
        w_dense = dense * w_d
        w_exp = expert * w_e
    g_bytes = tr_dense * g_d + tr_expert * g_e
    o_bytes = tr_dense * o_d + tr_expert * o_e
    # Transformer Engine's cached quantised weights: per copy, the element and its scales (inputs.precision)
    fp8_copy = 0.0
    if c.lowp_bytes:
        quantised = A.fp8_weight_copy_bytes * c.lowp_bytes * c.weight_copies   # bytes per linear parameter
        if fp8_params(c, A):
            # the weight is the quantised tensor: its 16-bit bytes are replaced, shard by shard
            w_lin = (linear - expert) * w_d + expert * w_e
            w_dense -= (linear - expert) * w_d
            w_exp -= expert * w_e
            fp8_copy = w_lin * quantised / 2.0
        elif not gathers_per_layer(c):
            fp8_copy = linear * quantised   # TE caches the cast of each (replicated) weight
        # sharded weights are cast as each layer is gathered: transient, in the gather buffer below
    weights = w_dense + w_exp + fp8_copy

    host = 0.0
    if c.offload != "none":
        moved = o_bytes
        if c.deepspeed or c.framework == "torchtitan":
            # ZeRO-Offload moves the gradient partitions with the optimizer (DeepSpeed estimator:
            # ZeRO-2 offload keeps only 2P on the GPU; ZeRO-3 optimizer offload keeps 2P/N).
            g_shard = tr_dense * g_s / nd + tr_expert * g_s / ne
            moved += g_shard
            g_bytes -= g_shard
        o_bytes = 0.0
        if c.offload == "optimizer+params":
            w_shard = dense * w_s / nd + expert * w_s / ne
            moved += w_shard
            weights -= w_shard
        host = moved
    host_b, nvme_b = (host, 0.0) if c.offload_device == "cpu" else (0.0, host)

    # ---- buffers that scale with the parameters
    fsdp = bucket = 0.0
    if gathers_per_layer(c) and not c.deepspeed:
        # FSDP (Megatron-FSDP, torchtitan): all-gathered 16-bit params of the current and prefetched
        # layer plus one layer's unsharded fp32 gradient before reduce-scatter.
        per_layer = max(dense_layer if n_dense else 0.0, moe_other + routed / (c.ep * c.etp) if n_moe else 0.0)
        if c.hsplit is not None:
            per_layer = max(_hybrid_layer_params(c, inv)[:3] + (per_layer,))
        grad = A.fsdp_state_bytes[1] if c.framework == "torchtitan" else A.megatron_main_grad_bytes
        if c.frozen:   # only the adapters' gradient is unsharded before its reduce-scatter
            grad *= (tr_dense + tr_expert) / max(1.0, dense + expert)
        gathered = 2.0          # bytes per gathered parameter: 16-bit, or the quantised weight
        if c.lowp_bytes:
            quantised = A.fp8_weight_copy_bytes * c.lowp_bytes * c.weight_copies
            # gathered in the quantised format (fp8_param_gather), or gathered 16-bit and cast
            gathered = quantised if fp8_params(c, A) else 2.0 + quantised
        fsdp = (2 * gathered + grad) * per_layer
        if c.zero == 2 and c.framework == "torchtitan":  # reshard_after_forward=False keeps params gathered
            fsdp += 2 * (dense + expert)
    if c.deepspeed and c.zero in (1, 2):
        bucket = 2.0 * min(A.deepspeed_bucket_elements, tr_dense + tr_expert)
    return (weights, g_bytes, o_bytes, host_b, nvme_b, w_dense, w_exp, fp8_copy, zero3_live, fsdp, bucket,
            dense, expert)


def _hybrid_layer_params(c: Ctx, inv: tuple) -> tuple:
    """Parameters one rank holds of one layer of each hybrid kind: (Mamba, attention, MLP, MoE without
    its routed experts). Megatron-Core shards the whole Mamba-2 mixer over TP (mamba_mixer.py:
    in_proj column-parallel over z, x, B, C, dt; conv1d, dt_bias, A_log, D and the gated norm by
    heads / channels of the rank; out_proj row-parallel); each layer's pre-norm is replicated.
    Attention-only and MLP-only layers are the two halves of a dense layer (_state_invariants),
    each with one norm (pc.norms of a hybrid model is one norm)."""
    pc = c.pc
    tp = c.tp
    norm = pc.norms
    kv_extra = c.kv_params * (1.0 / c.kv_div - 1.0 / tp) if c.kv_div < tp else 0.0
    mamba = pc.mamba / tp + norm
    attn = pc.attention / tp + kv_extra + (0 if c.parallel else norm)   # parallel_mixers: one norm per pair
    mlp = pc.dense_mlp / tp + norm
    moe_other = inv[2] if c.experts > 1 else 0.0
    if c.experts > 1:   # _state_invariants' MoE layer carries the attention of a dense-stack layer
        moe_other = moe_other - (pc.attention / tp + kv_extra)
    return mamba, attn, mlp, moe_other


def _hybrid_stage_params(c: Ctx, counts: tuple, inv: tuple) -> tuple:
    """(dense params, expert params, linear-layer params) on one rank of a hybrid stage with
    counts = (Mamba, attention, MLP, MoE) layers. Linear: the Mamba in_proj and out_proj, the
    attention projections, the MLP and expert matrices (what Transformer Engine casts)."""
    n_m, n_a, n_d, n_e = counts
    mamba, attn, mlp, moe_other = _hybrid_layer_params(c, inv)
    routed = inv[1]
    expert = n_e * routed / (c.ep * c.etp)
    dense = n_m * mamba + n_a * attn + n_d * mlp + n_e * moe_other
    norm = c.pc.norms
    d_inner, gn, nheads = c.hyb[:3]
    mamba_linear = (c.h * (2 * d_inner + 2 * gn + nheads) + d_inner * c.h) / c.tp
    linear = (n_m * mamba_linear + n_a * (attn - (0 if c.parallel else norm)) + n_d * (mlp - norm)
              + n_e * (moe_other - norm - c.h * c.experts) + expert)
    return dense, expert, linear


def _frozen_base(c: Ctx, per_param: tuple, n_dense: int, n_moe: int, dense: float, expert: float,
                 linear: float) -> tuple:
    """LoRA / QLoRA model states of a stage's rank (costmodel.adapters): (dense weight bytes, expert
    weight bytes, dense adapter params, expert adapter params). The frozen base keeps its 16-bit
    weights only, sharded wherever the layout shards weights (ZeRO-3, FSDP); under QLoRA its linear
    layers take NF4's 4.127 bits instead. The adapters keep the framework's full model states (their
    bytes per parameter are the layout's, applied by the caller)."""
    w_d, w_e, g_d, g_e, o_d, o_e, w_s, g_s, nd, ne = per_param
    fd = FROZEN_WEIGHT_BYTES / nd if w_s else FROZEN_WEIGHT_BYTES
    fe = FROZEN_WEIGHT_BYTES / ne if w_s else FROZEN_WEIGHT_BYTES
    w_dense = dense * fd
    w_exp = expert * fe
    if c.qlora:
        scale = NF4_BYTES_PER_PARAM / FROZEN_WEIGHT_BYTES
        w_dense -= (linear - expert) * fd * (1.0 - scale)
        w_exp -= expert * fe * (1.0 - scale)
    ad_dense, ad_expert = stage_adapter_params(c, n_dense, n_moe)
    return w_dense + ad_dense * w_d, w_exp + ad_expert * w_e, ad_dense, ad_expert


def stage_memory(c: Ctx, A, k: int, states: tuple | None = None, acts: tuple | None = None):
    """Memory terms (bytes) of pipeline stage k's rank: returns (weights, grads, optimizer,
    activations, buffers, offloaded_host, offloaded_nvme, detail values (detail_dict names them)).
    `states` = _stage_states of stage k and `acts` = _act_invariants(c, A), when the caller
    evaluates several stages (memory_terms)."""
    (weights, g_bytes, o_bytes, host_b, nvme_b, w_dense, w_exp, fp8_copy, zero3_live, fsdp, bucket, dense,
     expert) = states or _stage_states(c, A, k, _state_invariants(c, A))
    (per_dense, per_moe, div, s_b, mask, act_out, act_work_dense, act_work_moe, pp_buf,
     tpo) = acts or _act_invariants(c, A)
    n_layers, n_dense, n_moe = c.split[k]
    first, last = k == 0, k == c.pp - 1

    # ---- activations
    if not n_dense:
        per_dense = act_work_dense = 0.0
    if not n_moe:
        per_moe = act_work_moe = 0.0
    inflight = chunks_in_flight(c, k)
    v = c.vpp
    if c.hsplit is None:
        share = chunk_share(c, k, inflight)
        act_layers = (n_dense * per_dense + n_moe * per_moe) * share if share is not None else \
            (n_dense * per_dense + n_moe * per_moe) / v * inflight
    else:   # a hybrid stack: the sum over its layer kinds
        per_stage, act_work_dense = _hybrid_stage_acts(c, A, k)
        act_layers = per_stage / v * inflight
        act_work_moe = 0.0
    off = offloaded_layers(c, A, n_layers)
    if off:
        # pp 1: one micro-batch in flight; `off` layers leave the GPU but for one layer's double buffer
        per_layer = act_layers / n_layers
        act_layers -= (off - 1) * per_layer
        host_b += off * per_layer
    act_emb = 0.0
    if first:  # token/position ids (8sb) + embedding dropout mask (sbh), per in-flight micro-batch
        act_emb = (8.0 * s_b + mask * s_b * c.h / div) * max(1, inflight // v)
    if not last:
        act_out = 0.0  # the logits term (see _act_invariants) is the last stage's
    # the working layer of full recompute (0 otherwise): the larger of a dense and an MoE layer here
    act_work = act_work_moe if act_work_moe > act_work_dense else act_work_dense   # max(), without the call
    activations = act_layers + act_emb + act_out + act_work

    buffers = zero3_live + fsdp + bucket + pp_buf + tpo

    detail = (w_dense, w_exp, fp8_copy, act_layers, act_emb, act_out, act_work, zero3_live, fsdp, bucket, pp_buf,
              tpo, dense, expert, n_layers, inflight)   # named in detail_dict
    return weights, g_bytes, o_bytes, activations, buffers, host_b, nvme_b, detail


def detail_dict(detail: tuple, cuda_context: int, nccl: float, frag: float) -> dict[str, int]:
    """MemoryEstimate.detail: stage_memory's detail values in whole bytes (or counts), then the
    reserve's terms. Built only for the reported stage."""
    (w_dense, w_exp, fp8_copy, act_layers, act_emb, act_out, act_work, zero3_live, fsdp, bucket, pp_buf, tpo,
     dense, expert, n_layers, inflight) = detail[:16]
    named = detail[16] if len(detail) > 16 else {}      # the Hugging Face stacks' terms (costmodel.hf)
    return {
        "weights_dense": int(w_dense), "weights_expert": int(w_exp), "fp8_weight_copies": int(fp8_copy),
        "act_layers": int(act_layers), "act_embedding": int(act_emb), "act_logits": int(act_out),
        "act_recompute_working": int(act_work), "zero3_live_params": int(zero3_live), "fsdp_gather": int(fsdp),
        "deepspeed_reduce_bucket": int(bucket), "pp_buffers": int(pp_buf), "tp_overlap_buffers": int(tpo),
        "params_dense": int(dense), "params_expert": int(expert), "layers": n_layers,
        "chunks_in_flight": inflight, "cuda_context": cuda_context, "nccl": int(nccl), "fragmentation": int(frag),
    } | named


def stage_params(detail: tuple) -> tuple[int, int]:
    """(dense, expert) parameters on one rank of the stage, from stage_memory's detail values."""
    return int(detail[12]), int(detail[13])


def nccl_groups(c: Ctx) -> int:
    """Communicators this rank uses: TP, CP, dense DP(xCP), PP, EP, expert-DP when each is > 1."""
    n = (c.tp > 1) + (c.cp > 1) + (c.dense_shard > 1) + (c.pp > 1)
    if c.experts > 1:
        n += (c.ep > 1) + (c.edp > 1 and c.edp != c.dense_shard)
    return n


def candidate_stages(c: Ctx) -> list[int]:
    """First, last and the heaviest middle stage: the only candidates for the most-loaded rank
    (computed once per pipeline degree in context._split, where the rule is written out)."""
    return list(c.candidates)


class MemoryTerms(NamedTuple):
    """Bytes per GPU of one pipeline stage's rank, term by term (floats, as computed)."""

    stage: int
    weights: float
    gradients: float
    optimizer: float
    activations: float
    buffers: float
    reserve: float
    """CUDA context + NCCL buffers + fragmentation."""
    total: float
    host: float
    """Offloaded states kept in host memory (before DeepSpeed's buffer factor)."""
    nvme: float
    """Offloaded states kept on NVMe."""
    detail: tuple
    """The activation and buffer parts that detail_dict names."""
    nccl: float
    fragmentation: float


_terms = tuple.__new__          # (a NamedTuple's own constructor is several times slower on this hot path)


def memory_terms(c: Ctx, A) -> tuple[MemoryTerms, dict]:
    """The most-loaded rank's MemoryTerms, and {stage: detail values} of every candidate stage."""
    best = None
    details = {}
    nccl = A.nccl_bytes_per_group * nccl_groups(c)
    acts = _act_invariants(c, A)
    for k, states in zip(c.candidates, _states(c, A)):
        w, g, o, act, buf, host, nvme, det = stage_memory(c, A, k, states, acts)
        if c.stated_stack is not None and hf_applies(c):     # the Hugging Face stacks' own terms (costmodel.hf)
            peak = hf_peak(c, A, g, det[12] + det[13])
            g, act = peak.gradients, peak.activations
            det = det[:3] + (act - peak.loss - peak.working, 0.0, peak.loss, peak.working) + det[7:] + (peak.detail,)
        details[k] = det
        frag = A.fragmentation_fraction * (act + buf)
        reserve = A.cuda_context_bytes + nccl + frag
        total = w + g + o + act + buf + reserve
        if best is None or total > best.total:
            best = _terms(MemoryTerms, (k, w, g, o, act, buf, reserve, total, host, nvme, det, nccl, frag))
    return best, details
