"""Activations per GPU: what one layer stores for its backward (the formulas), and what a stage's
rank holds at its peak (in-flight micro-batches, chunks, offload).

Sources:
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
  expert activations follow `MoEActivations`; CP divides every stored token by cp while the
  non-flash score matrix spans the full sequence; a layer with TP degree above the KV-head count
  replicates KV heads (Megatron M6), so K/V are divided by min(t, kv_heads).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from functools import lru_cache

from ..inputs.pipeline import pipeline_split
from .adapters import adapter_activation_bytes
from .context import Ctx, remember

__all__ = ["LayerActivations", "MoEActivations", "MambaActivations", "GdnActivations", "act_invariants",
           "act_layers_of", "chunk_share", "chunks_in_flight", "hybrid_stage_acts", "offloaded_layers"]


def _values(formula) -> tuple:
    """A formula record's field values in declaration order (a dataclass's __dict__ keeps it)."""
    return tuple(vars(formula).values())


# --------------------------------------------------------------------------- one layer's formulas

@dataclass(frozen=True)
class LayerActivations:
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

    s: float
    b: float
    h: float
    a: float
    _: KW_ONLY
    t: int = 1
    sp: bool = False
    recompute: str = 'none'
    flash: bool = False
    f: float | None = None
    gated: bool = False
    wq: float | None = None
    wk: float | None = None
    wv: float | None = None
    wo: float | None = None
    kv_div: float | None = None
    latent: float = 0
    dropout_masks: bool = True
    lin_bytes: float = 2.0
    s_attn: float | None = None
    mlp: bool = True
    modules: tuple = ('core_attn',)
    attention: bool = True

    def bytes(self) -> float:
        """The layer's stored bytes (the formula above)."""
        (s, b, h, a, t, sp, recompute, flash, f, gated, wq, wk, wv, wo, kv_div, latent, dropout_masks,
         lin_bytes, s_attn, mlp, modules, attention) = _values(self)
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


@dataclass(frozen=True)
class MoEActivations:
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

    s: float
    b: float
    h: float
    _: KW_ONLY
    t: int
    etp: int
    sp: bool
    k: int
    experts: int
    f_moe: float
    shared: float
    gated: bool
    dropout_masks: bool = True
    lin_bytes: float = 2.0
    imbalance: float = 1.0
    modules: tuple = ()

    def bytes(self) -> float:
        """The layer's stored bytes (the formula above)."""
        s, b, h, t, etp, sp, k, experts, f_moe, shared, gated, dropout_masks, lin_bytes, imbalance, modules = _values(self)
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


@dataclass(frozen=True)
class MambaActivations:
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

    s: float
    b: float
    h: float
    d_inner: float
    gn: float
    nheads: float
    _: KW_ONLY
    t: int = 1
    sp: bool = False
    recompute: str = 'none'
    dropout_masks: bool = True
    lin_bytes: float = 2.0

    def bytes(self) -> float:
        """The layer's stored bytes (the formula above)."""
        s, b, h, d_inner, gn, nheads, t, sp, recompute, dropout_masks, lin_bytes = _values(self)
        if recompute == "full":
            return _mixer_layer_input(s, b, h, t, sp)
        shd = (2 * (2 * d_inner + 2 * gn + nheads) + 2 * d_inner + 2 * d_inner + lin_bytes * d_inner) / t
        return s * b * (_mixer_replicated(h, dropout_masks, lin_bytes) / (t if sp else 1) + shd)


@dataclass(frozen=True)
class GdnActivations:
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

    s: float
    b: float
    h: float
    v_dim: float
    k_dim: float
    v_heads: float
    dk: float
    chunk: float
    _: KW_ONLY
    t: int = 1
    sp: bool = False
    recompute: str = 'none'
    dropout_masks: bool = True
    lin_bytes: float = 2.0

    def bytes(self) -> float:
        """The layer's stored bytes (the formula above)."""
        s, b, h, v_dim, k_dim, v_heads, dk, chunk, t, sp, recompute, dropout_masks, lin_bytes = _values(self)
        if recompute == "full":
            return _mixer_layer_input(s, b, h, t, sp)
        proj = 2 * (2 * k_dim + 2 * v_dim + 2 * v_heads)
        conv = 2 * (2 * k_dim + v_dim)
        kernel = 2 * (2 * v_heads * dk) + 4 * (2 * v_heads) + 2 * chunk * v_heads
        shd = (proj + conv + kernel + 2 * v_dim + lin_bytes * v_dim) / t
        return s * b * (_mixer_replicated(h, dropout_masks, lin_bytes) / (t if sp else 1) + shd)


# --------------------------------------------------------------------------- one layout's activation terms

def _mixer_layer_input(s, b, h, t, sp) -> float:
    """What a fully recomputed linear-mixer layer keeps: its 16-bit input, split by SP."""
    return 2.0 * s * b * h / (t if sp else 1)


def _mixer_replicated(h, dropout_masks, lin_bytes) -> float:
    """Per-token bytes of a linear mixer's tensors TP leaves replicated: the layer input 2h, the in_proj
    input lin*h (the fused norm's output) and the dropout mask h."""
    return 2 * h + lin_bytes * h + (h if dropout_masks else 0.0)


def dropout_masks(c: Ctx, A) -> bool:
    return c.gpt_style if A.dropout_masks == "auto" else bool(A.dropout_masks)


def offloaded_layers(c: Ctx, A, n_layers: int) -> int:
    """Layers of a stage whose activations Megatron-Core offloads (Assumptions.activation_offload_layers):
    only on a Megatron layout with pp 1 and no recompute, which its offload supports."""
    n = A.activation_offload_layers
    if not n or c.pp > 1 or c.recompute != "none" or not c.megatron:
        return 0
    return n if n < n_layers else n_layers


def _layer_acts(c: Ctx, A, recompute: str, moe: bool) -> float:
    lin = A.fp8_activation_bytes * c.lowp_bytes if c.lowp_bytes else 2.0
    masks = dropout_masks(c, A)
    modules = A.recompute_modules if recompute == "selective" else ()
    base = LayerActivations(
        c.s_loc, c.b, c.h, c.a, t=c.tp, sp=c.sp, recompute=recompute, flash=c.flash, f=c.f, gated=c.gated,
        wq=c.wq, wk=c.wk, wv=c.wv, wo=c.wo, kv_div=c.kv_div, latent=c.latent, dropout_masks=masks,
        lin_bytes=lin, s_attn=c.seq, mlp=not moe or recompute == "full", modules=modules,
    ).bytes()
    if moe and recompute != "full":
        base += MoEActivations(c.s_loc, c.b, c.h, t=c.tp, etp=c.etp, sp=c.sp, k=c.topk, experts=c.experts,
                                    f_moe=c.f_moe, shared=c.shared, gated=c.gated, dropout_masks=masks,
                                    lin_bytes=lin, imbalance=A.moe_load_imbalance, modules=modules).bytes()
    if c.frozen and recompute != "full":   # the adapters' own stored tensors (costmodel.adapters)
        base += c.s_loc * c.b * adapter_activation_bytes(c)
    return base


def _hybrid_layer_acts(c: Ctx, A, recompute: str) -> tuple:
    """Per-layer activation bytes of a hybrid stack's kinds (Mamba, attention, MLP, MoE) for one
    micro-batch on one rank: attention-only and MLP-only layers are the two halves of
    LayerActivations, an MoE layer MoEActivations alone, a Mamba layer MambaActivations;
    full recompute keeps each layer's input."""
    lin = A.fp8_activation_bytes * c.lowp_bytes if c.lowp_bytes else 2.0
    masks = dropout_masks(c, A)
    modules = A.recompute_modules if recompute == "selective" else ()
    common = dict(t=c.tp, sp=c.sp, recompute=recompute, dropout_masks=masks, lin_bytes=lin)
    d_inner, gn, nheads = c.hyb[:3]
    if c.hyb[8] == "G":
        mamba = GdnActivations(c.s_loc, c.b, c.h, d_inner, gn, c.hyb[9], c.hyb[10], c.hyb[5], **common).bytes()
    else:
        mamba = MambaActivations(c.s_loc, c.b, c.h, d_inner, gn, nheads, **common).bytes() if d_inner else 0.0
    shape = dict(flash=c.flash, f=c.f, gated=c.gated, wq=c.wq, wk=c.wk, wv=c.wv, wo=c.wo, kv_div=c.kv_div,
                 latent=c.latent, s_attn=c.seq, modules=modules)
    attn = LayerActivations(c.s_loc, c.b, c.h, c.a, mlp=False, **shape, **common).bytes()
    if c.parallel:   # Falcon-H1: the attention branch reads the Mamba branch's stored input and norm output
        attn -= (2.0 * c.s_loc * c.b * c.h / (c.tp if c.sp else 1) if recompute == "full" else
                 c.s_loc * c.b * (2.0 * c.h + lin * c.h) / (c.tp if c.sp else 1))
    mlp = LayerActivations(c.s_loc, c.b, c.h, c.a, attention=False, **shape, **common).bytes()
    moe = 0.0
    if c.experts > 1:
        moe = (2.0 * c.s_loc * c.b * c.h / (c.tp if c.sp else 1) if recompute == "full" else
               MoEActivations(c.s_loc, c.b, c.h, t=c.tp, etp=c.etp, sp=c.sp, k=c.topk, experts=c.experts,
                                   f_moe=c.f_moe, shared=c.shared, gated=c.gated, dropout_masks=masks,
                                   lin_bytes=lin, imbalance=A.moe_load_imbalance, modules=modules).bytes())
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


def hybrid_stage_acts(c: Ctx, A, k: int) -> tuple[float, float]:
    """(activation bytes of stage k's layers for one micro-batch, the working layer of full recompute)."""
    per, work = _hybrid_acts(c, A)
    return sum(n * x for n, x in zip(c.hsplit[k], per)), work


def act_layers_of(c: Ctx, A, k: int) -> float:
    """Activation bytes of stage k's layers for one micro-batch (pp 1: the whole stack), before offload."""
    if c.hsplit is not None:
        return hybrid_stage_acts(c, A, k)[0]
    per_dense, per_moe = act_invariants(c, A)[:2]
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
# not change by a bit): the model states and parameter buffers (stage_states), which depend on the
# layout's tp, pp, ep, etp, ZeRO stage and offload only, and the activations, which also depend on the
# micro-batch, cp, sp, vpp and recompute. The planner sizes each shape at several of those, so the
# first part is kept per (cluster, model, training) in c.memo (candidate_states).


def act_invariants(c: Ctx, A) -> tuple:
    """The activation terms (and the activation-sized buffers) that are the same on every stage of
    one layout, shared by the candidate stages (memory_terms) and kept in c.memo: many layouts
    share the few fields they read."""
    key = ("act_inv", id(A), c.tp, c.sp, c.cp, c.b, c.recompute, c.etp, c.framework, c.pp > 1)
    hit = c.memo.get(key)
    if hit is not None and hit[0] is A:
        return hit[1]
    return remember(c, A, key, _act_terms(c, A))


def _act_terms(c: Ctx, A) -> tuple:
    """act_invariants, computed."""
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
