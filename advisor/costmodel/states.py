"""Model states per GPU: weights, gradients and optimizer states by framework, ZeRO stage and
offload, stage by stage.

Sources:
- Model states (bytes per parameter, what is sharded over which group):
  * ZeRO paper (Rajbhandari et al. SC'20, arXiv:1910.02054) §3.1, §5.1 and Fig. 1: mixed-precision
    Adam = 2 (16-bit params) + 2 (16-bit grads) + K=12 (fp32 params, momentum, variance) bytes;
    stage 1 shards the K part, stage 2 also the grads, stage 3 also the params.
  * DeepSpeed's own estimators (deepspeed/runtime/zero/stage_1_and_2.py
    `estimate_zero2_model_states_mem_needs`: 2P + 18P/N, offload -> 2P; stage3.py
    `estimate_zero3_model_states_mem_needs`: 4*largest_layer + 18P/N, optimizer offload -> + 2P/N,
    params+optimizer offload -> 4*largest_layer): 18 = 2 fp16 grads
    + 4 fp32 grads + 4 fp32 params + 8 Adam for ZeRO-2; for ZeRO-3, 2 fp16 params + 16.
  * Megatron-LM distributed optimizer (NVIDIA/Megatron-LM docs/user-guide/features/dist_optimizer.md):
    bf16 params with fp32 main grads 18 B/param plain, 6 + 12/d distributed; fp16/fp16 20 plain, 4 + 16/d;
    d is the data-parallel-with-context-parallel group.
  * NeMo 1.x Apex distributed Adam (nemo/core/optim/distributed_adam.py; megatron_base_model.py
    `setup_optimization`): no separate fp32 master when the optimizer dtype equals the bf16 model's,
    param remainders otherwise: Assumptions.megatron_optimizer_bytes (4 or 10 instead of 12).
  * Megatron theoretical_memory_usage.py `compute_weight_and_optimizer_memory`: most-loaded shard is
    the first pipeline stage with the embedding; TP-sharded block weights + replicated norms; experts
    over etp*ep with optimizer over expert-DP = world/(etp*ep*pp).
"""

from __future__ import annotations

from typing import NamedTuple

from ..inputs.optimizers import MASTER_BYTES, moment_bytes
from .adapters import FROZEN_WEIGHT_BYTES, NF4_BYTES_PER_PARAM, stage_adapter_params
from .context import Ctx, remember

__all__ = ["StateArgs", "state_args", "model_state_bytes_per_param", "candidate_states", "stage_states",
           "state_invariants", "fp8_params", "gathers_per_layer"]


# --------------------------------------------------------------------------- bytes per parameter

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


# --------------------------------------------------------------------------- one stage's states

def state_invariants(c: Ctx, A) -> tuple:
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


def candidate_states(c: Ctx, A) -> tuple:
    """stage_states of each of c.candidates, kept in c.memo: the key holds every layout field they
    read (kv_div, vpad, the stages and the candidates follow from tp, pp and the framework)."""
    key = ("states", id(A), c.tp, c.pp, c.ep, c.etp, c.zero, c.framework, c.offload, c.offload_device,
           c.dense_shard, c.edp)
    hit = c.memo.get(key)       # memoised(), inline: once per layout sized
    if hit is not None and hit[0] is A:
        return hit[1]
    return remember(c, A, key, _all_stage_states(c, A))


def _all_stage_states(c: Ctx, A) -> tuple:
    inv = state_invariants(c, A)
    return tuple(stage_states(c, A, k, inv) for k in c.candidates)


def stage_states(c: Ctx, A, k: int, inv: tuple) -> tuple:
    """Model states of pipeline stage k's rank and the buffers that scale with its parameters:
    (weights, grads, optimizer, offloaded_host, offloaded_nvme, w_dense, w_exp, fp8_copy, zero3_live,
    fsdp, bucket, dense params, expert params). `inv` = state_invariants(c, A)."""
    per_param, zero3_live = inv[4:]
    _, n_dense, n_moe = c.split[k]   # dense and MoE layers of stage k (context._split)
    dense, expert, linear = _stage_params(c, k, inv)

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
    # the weight bytes ZeRO-3 shards, which parameter offload moves: all but the trained weights' replicated
    # part (w_d - w_s/nd); under LoRA / QLoRA the frozen base as stored (NF4 under QLoRA) and the adapters
    sharded = (w_dense + w_exp - tr_dense * (w_d - w_s / nd) - tr_expert * (w_e - w_s / ne)
               if c.offload == "optimizer+params" else 0.0)
    quantised = _quantised_weights(c, A, linear, expert, per_param)
    w_dense -= quantised.dense_replaced
    w_exp -= quantised.expert_replaced
    fp8_copy = quantised.copies
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
            moved += sharded
            weights -= sharded
        host = moved
    host_b, nvme_b = (host, 0.0) if c.offload_device == "cpu" else (0.0, host)

    # ---- buffers that scale with the parameters
    fsdp = bucket = 0.0
    if gathers_per_layer(c) and not c.deepspeed:
        fsdp = _fsdp_bytes(c, A, inv, k, (tr_dense, tr_expert, dense, expert))
    if c.deepspeed and c.zero in (1, 2):
        bucket = 2.0 * min(A.deepspeed_bucket_elements, tr_dense + tr_expert)
    return (weights, g_bytes, o_bytes, host_b, nvme_b, w_dense, w_exp, fp8_copy, zero3_live, fsdp, bucket,
            dense, expert)


class Quantised(NamedTuple):
    """Transformer Engine's quantised weights on a rank (bytes): the 16-bit dense and expert weight bytes
    they replace (FP8 parameters) and the quantised copies kept beside or instead of them."""
    dense_replaced: float
    expert_replaced: float
    copies: float


def _quantised_weights(c: Ctx, A, linear: float, expert: float, per_param: tuple) -> Quantised:
    """Per copy, the element and its scales (inputs.precision), for the rank's `linear` parameters, of
    which `expert` are experts'."""
    if not c.lowp_bytes:
        return Quantised(0.0, 0.0, 0.0)
    w_d, w_e = per_param[:2]
    quantised = A.fp8_weight_copy_bytes * c.lowp_bytes * c.weight_copies   # bytes per linear parameter
    if fp8_params(c, A):
        # the weight is the quantised tensor: its 16-bit bytes are replaced, shard by shard
        dense_b, expert_b = (linear - expert) * w_d, expert * w_e
        return Quantised(dense_b, expert_b, (dense_b + expert_b) * quantised / 2.0)
    if not gathers_per_layer(c):
        return Quantised(0.0, 0.0, linear * quantised)   # TE caches the cast of each (replicated) weight
    # sharded weights are cast as each layer is gathered: transient, in the gather buffer (_fsdp_bytes)
    return Quantised(0.0, 0.0, 0.0)


def _stage_params(c: Ctx, k: int, inv: tuple) -> tuple[float, float, float]:
    """(dense, expert, linear-layer) parameters on stage k's rank: TP-sharded weights, replicated
    norms, experts over etp*ep; the embedding on the first stage, the output layer and final norm on
    the last."""
    dense_layer, routed, moe_other, word = inv[:4]
    pc = c.pc
    p = c.pp
    _, n_dense, n_moe = c.split[k]
    if not n_moe:
        moe_other = 0.0
    if c.hsplit is None:
        dense = n_dense * dense_layer + n_moe * moe_other
        expert = n_moe * routed / (c.ep * c.etp)
        linear = n_dense * (dense_layer - pc.norms) + n_moe * (moe_other - pc.norms - c.h * c.experts) + expert
    else:
        dense, expert, linear = _hybrid_stage_params(c, c.hsplit[k], inv)
    if k == 0:
        dense += word + c.pos_params
    if k == p - 1:
        if not c.tied:
            dense += word
        elif p > 1:
            dense += word  # tied embeddings: the last stage keeps its own copy (Megatron embedding group)
        dense += pc.final_norm
    return dense, expert, linear


def _fsdp_bytes(c: Ctx, A, inv: tuple, k: int, trained: tuple) -> float:
    """FSDP's buffers (Megatron-FSDP, torchtitan) on stage k's rank: the all-gathered params of the
    current and the prefetched layer plus one layer's unsharded gradient before its reduce-scatter.
    `trained` = (trainable dense, trainable expert, dense, expert) parameters of the stage."""
    dense_layer, routed, moe_other = inv[:3]
    _, n_dense, n_moe = c.split[k]
    tr_dense, tr_expert, dense, expert = trained
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
    return fsdp


def _hybrid_layer_params(c: Ctx, inv: tuple) -> tuple:
    """Parameters one rank holds of one layer of each hybrid kind: (Mamba, attention, MLP, MoE without
    its routed experts). Megatron-Core shards the whole Mamba-2 mixer over TP (mamba_mixer.py:
    in_proj column-parallel over z, x, B, C, dt; conv1d, dt_bias, A_log, D and the gated norm by
    heads / channels of the rank; out_proj row-parallel); each layer's pre-norm is replicated.
    Attention-only and MLP-only layers are the two halves of a dense layer (state_invariants),
    each with one norm (pc.norms of a hybrid model is one norm)."""
    pc = c.pc
    tp = c.tp
    norm = pc.norms
    kv_extra = c.kv_params * (1.0 / c.kv_div - 1.0 / tp) if c.kv_div < tp else 0.0
    mamba = pc.mamba / tp + norm
    attn = pc.attention / tp + kv_extra + (0 if c.parallel else norm)   # parallel_mixers: one norm per pair
    mlp = pc.dense_mlp / tp + norm
    moe_other = inv[2] if c.experts > 1 else 0.0
    if c.experts > 1:   # state_invariants' MoE layer carries the attention of a dense-stack layer
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
