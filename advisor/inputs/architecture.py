"""Parameter counts from a transformer's shape: GQA, MLA, SwiGLU/GeLU, MoE, tied embeddings.

Formulas are the plain sum of weight-matrix sizes as the Hugging Face / Megatron-LM
implementations lay them out (cf. megatron/training/theoretical_memory_usage.py,
`compute_weight_and_optimizer_memory`), so they reproduce published totals: e.g. Llama-3-70B
70.55B, Llama-3.1-405B 405.85B, Mixtral 8x7B 46.70B, DeepSeek-V3 671B (+11.6B MTP weights;
685B as its checkpoint stores them, see `checkpoint_total`), BLOOM 176,247,271,424 exactly.

Works on any object with the `advisor.Model` fields (duck-typed, to keep imports one-way).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["HYBRID_KINDS", "ParameterCount", "count_parameters", "gdn_dims", "gdn_shape_ok", "hybrid_counts",
           "mamba_dims", "mamba_shape_ok", "windowed_layers"]

# The layer kinds of Megatron-Core's hybrid stack (megatron/core/ssm/mamba_hybrid_layer_allocation.py
# Symbols: MAMBA "M", ATTENTION "*", MLP "-", MOE "E"; NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
# megatron/core/models/hybrid/hybrid_layer_allocation.py L18 adds GDN "G", a Gated DeltaNet mixer);
# each is one layer with its own pre-norm.
HYBRID_KINDS = ("M", "*", "-", "E", "G")


@dataclass(frozen=True)
class ParameterCount:
    """Parameters by part. `total` excludes multi-token-prediction modules (`mtp`), as model cards do."""

    total: int
    embedding: int          # input token (+ learned position) table
    output: int             # LM head; 0 when tied to the embedding
    attention: int          # one layer's attention block (projections, biases)
    dense_mlp: int          # one dense layer's MLP
    expert: int             # one routed expert's MLP (0 for dense models)
    moe_mlp: int            # one MoE layer's MLP: router + routed + shared experts
    norms: int              # one layer's norms
    final_norm: int
    dense_layer_count: int
    moe_layer_count: int
    active: int             # parameters one token touches (top-k experts only)
    mtp: int                # multi-token-prediction modules' own weights, not in total

    @property
    def checkpoint_total(self) -> int:
        """What a released checkpoint holds: total + MTP modules + the embedding/head copies each
        MTP module stores although training shares them (DeepSeek-V3: 671B + 11.5B + 1.9B = 685B)."""
        return self.total + self.mtp + self.mtp_shared

    @property
    def dense_layer(self) -> int:
        if self.hybrid:
            return self.dense_mlp + self.final_norm
        return self.attention + self.dense_mlp + self.norms

    @property
    def moe_layer(self) -> int:
        if self.hybrid:
            return self.moe_mlp + self.final_norm
        return self.attention + self.moe_mlp + self.norms

    @property
    def attention_layer(self) -> int:
        """One attention-only layer of a hybrid stack ("*"): attention + its pre-norm."""
        return self.attention + self.final_norm

    @property
    def mamba_layer(self) -> int:
        """One Mamba-2 ("M") or Gated DeltaNet ("G") layer of a hybrid stack: the mixer + its pre-norm."""
        return self.mamba + self.final_norm

    @property
    def routed_experts(self) -> int:
        """All routed-expert parameters of the model (what expert parallelism shards)."""
        return self.expert * self._experts * self.moe_layer_count

    @property
    def largest_layer(self) -> int:
        """The biggest single module DeepSpeed ZeRO-3 gathers at once (its estimator's 'largest layer')."""
        return max(self.embedding, self.output, self.dense_layer if self.dense_layer_count else 0,
                   self.moe_layer if self.moe_layer_count else 0,
                   self.attention_layer if self.attention_layer_count else 0,
                   self.mamba_layer if self.mamba_layer_count else 0)

    _experts: int = 1
    mtp_shared: int = 0     # embedding + output head each MTP module re-stores in the checkpoint
    shared_mlp: int = 0     # one MoE layer's shared experts (in moe_mlp)
    latent_proj: int = 0    # one MoE layer's LatentMoE down + up projections (in moe_mlp); 0 without them
    moe_width: int = 0      # width of a token the MoE dispatches: Model.moe_latent_size, else hidden
    # hybrid stacks (Model.hybrid_pattern): one Mamba-2 (or Gated DeltaNet) mixer's parameters and the layer counts by
    # kind; there a "dense layer" is an MLP-only layer ("-") and an "MoE layer" an MoE-only one ("E")
    mamba: int = 0
    mamba_layer_count: int = 0
    attention_layer_count: int = 0
    hybrid: bool = False


def _attention(m) -> int:
    h = m.hidden
    if m.mla is not None:
        a = m.mla
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        if a.q_lora_rank:
            q = h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * m.heads * qk   # down, norm, up
        else:
            q = h * m.heads * qk
        kv = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank \
            + a.kv_lora_rank * m.heads * (a.qk_nope_head_dim + a.v_head_dim)
        return q + kv + m.heads * a.v_head_dim * h + _dsa_indexer(m)
    q_out, kv_out = m.heads * m.head_dim, m.kv_heads * m.head_dim
    weights = h * q_out + 2 * h * kv_out + q_out * h
    if getattr(m, "attention_output_gate", False):   # Qwen3-Next: q_proj also emits a per-channel gate
        weights += h * q_out
    if getattr(m, "attention_sinks", False):        # GPT-OSS: one learned sink logit per head
        weights += m.heads
    biases = 0
    if m.bias:
        biases = q_out + 2 * kv_out + h
    elif m.qkv_bias:
        biases = q_out + 2 * kv_out
    return weights + biases


def _dsa_indexer(m) -> int:
    """DeepSeek Sparse Attention's lightning indexer in one layer (deepseek-ai DeepSeek-V3.2 inference/model.py
    Indexer: wq_b q_lora_rank -> heads x head_dim, wk hidden -> head_dim, k_norm a LayerNorm of head_dim
    (weight and bias), weights_proj hidden -> heads; Megatron-Core experimental_attention_variant/dsa.py
    DSAIndexer linear_wq_b, linear_wk, k_norm, linear_weights_proj, the same tensors); 0 without DSA."""
    heads = getattr(m, "dsa_indexer_heads", None)
    if not heads:
        return 0
    d = m.dsa_indexer_head_dim
    return m.mla.q_lora_rank * heads * d + m.hidden * d + 2 * d + m.hidden * heads


def _mlp(m, inner: int, width: int | None = None) -> int:
    """An MLP of `inner` channels on `width`-wide tokens (hidden unless given: LatentMoE's routed experts)."""
    h = width or m.hidden
    if m.activation == "swiglu":                      # gate, up, down
        return 3 * h * inner + ((2 * inner + h) if m.bias else 0)
    return 2 * h * inner + ((inner + h) if m.bias else 0)   # up, down


class _MoeMlp(NamedTuple):
    expert: int          # one routed expert
    shared: int          # the shared experts of one layer
    latent_proj: int     # LatentMoE's down and up projections of one layer
    width: int           # the width of a dispatched token


def _moe_mlp(m) -> _MoeMlp:
    """The MoE MLP's parts. LatentMoE (Model.moe_latent_size; NVIDIA Nemotron 3 Super): the routed experts
    are latent -> moe_ffn -> latent, one hidden -> latent and one latent -> hidden projection per layer
    (with a bias each where the linear layers have one), while the router and the shared experts stay at
    hidden width (huggingface/transformers@13923c63d59f73faebae79b2ee3fafc7e3a35201 NemotronHConfig
    moe_latent_size and NemotronHMoE fc1_latent_proj / fc2_latent_proj / shared_experts; Megatron-Core
    moe_layer.py). Without it the shared experts are `shared_experts` experts' width."""
    latent = getattr(m, "moe_latent_size", None)
    if latent is None:
        expert = _mlp(m, m.moe_ffn_hidden)
        return _MoeMlp(expert, m.shared_experts * expert, 0, m.hidden)
    proj = 2 * m.hidden * latent + ((latent + m.hidden) if m.bias else 0)
    return _MoeMlp(_mlp(m, m.moe_ffn_hidden, latent), m.shared_experts * _mlp(m, m.moe_ffn_hidden), proj, latent)


def mamba_dims(m) -> tuple[int, int, int, int]:
    """(d_inner, ngroups * d_state, nheads, conv channels) of a Mamba-2 mixer: d_inner = heads x
    head_dim; x, B, C pass the conv1d, so it has d_inner + 2 ngroups d_state channels (Dao & Gu 2024,
    arXiv:2405.21060 §7 Mamba-2 block; Megatron-Core megatron/core/ssm/mamba_mixer.py)."""
    d_inner = m.mamba_heads * m.mamba_head_dim
    gn = m.mamba_groups * m.mamba_state
    return d_inner, gn, m.mamba_heads, d_inner + 2 * gn


def _mamba(m) -> int:
    """One Mamba-2 mixer: in_proj h -> (z, x, B, C, dt) = 2 d_inner + 2 ngroups d_state + nheads, the
    depthwise conv1d (kernel d_conv, with bias: HF use_conv_bias, Megatron conv_bias=True), dt_bias,
    A_log and D (nheads each), the gated RMSNorm over d_inner, out_proj d_inner -> h, no linear biases
    (HF mamba_proj_bias False; Megatron-Core mamba_mixer.py `in_proj`, `conv1d`, `dt_bias`, `A_log`,
    `D`, `norm`, `out_proj`; HF transformers models/nemotron_h/modeling_nemotron_h.py NemotronHMamba2Mixer)."""
    d_inner, gn, nheads, conv_ch = mamba_dims(m)
    h = m.hidden
    in_proj = h * (2 * d_inner + 2 * gn + nheads)
    conv = conv_ch * m.mamba_conv + conv_ch
    return in_proj + conv + 3 * nheads + d_inner + d_inner * h


def gdn_dims(m) -> tuple[int, int, int, int]:
    """(value dim, key dim, value heads, conv channels) of a Gated DeltaNet mixer (Yang, Kautz &
    Hatamizadeh 2024, arXiv:2412.06464): q and k have gdn_key_heads heads of gdn_key_head_dim, v and
    the output gate z gdn_value_heads of gdn_value_head_dim; q, k and v pass the conv1d."""
    v_dim = m.gdn_value_heads * m.gdn_value_head_dim
    k_dim = m.gdn_key_heads * m.gdn_key_head_dim
    return v_dim, k_dim, m.gdn_value_heads, 2 * k_dim + v_dim


def _gdn(m) -> int:
    """One Gated DeltaNet mixer as Qwen3-Next lays it out (huggingface/transformers@
    043bb8dde14aae1a56b84cd230737cf5d0877912 src/transformers/models/qwen3_next/modular_qwen3_next.py
    Qwen3NextGatedDeltaNet; Megatron-Core megatron/core/ssm/gated_delta_net.py the same tensors):
    in_proj_qkvz h -> 2 key dim + 2 value dim and in_proj_ba h -> 2 value heads (beta and the decay
    input), the depthwise conv1d over q, k, v without bias, dt_bias and A_log per value head, the
    gated RMSNorm of one value head's width (shared by the heads), out_proj value dim -> h; no biases."""
    v_dim, k_dim, v_heads, conv_ch = gdn_dims(m)
    h = m.hidden
    in_proj = h * (2 * k_dim + 2 * v_dim + 2 * v_heads)
    return in_proj + conv_ch * m.gdn_conv + 2 * v_heads + m.gdn_value_head_dim + v_dim * h


def gdn_shape_ok(value_heads: int, key_heads: int, tp: int, cp: int) -> bool:
    """Megatron-Core's Gated DeltaNet shards key and value heads over TP (NVIDIA/Megatron-LM@
    55ac7082517c3878ae653c07c09c534b8aed49f6 megatron/core/transformer/transformer_config.py L975-980:
    linear_num_key_heads and linear_num_value_heads multiples of the TP size) and its all-to-all CP
    splits each TP rank's heads again (@d98e8a64ddf34856e74b24714e3bedb2f5a39553
    megatron/core/ssm/gated_delta_net/common.py L408-421: qk_dim_local_tp // key_head_dim // cp_size)."""
    if key_heads % tp or value_heads % tp:
        return False
    return not ((key_heads // tp) % cp or (value_heads // tp) % cp)


def mamba_shape_ok(heads: int, groups: int, tp: int, cp: int) -> bool:
    """Megatron-Core's Mamba-2 mixer shards heads and B/C groups over TP (megatron/core/ssm/mamba_mixer.py:
    nheads % tp == 0, ngroups % tp == 0) and its all-to-all CP shards each TP rank's heads again
    (megatron/core/ssm/mamba_context_parallel.py MambaContextParallel: (nheads / tp) % cp == 0, and
    ngroups / tp a multiple of cp or a divisor of it)."""
    if heads % tp or groups % tp:
        return False
    g_tp = groups // tp
    return not ((heads // tp) % cp or (g_tp % cp and cp % g_tp))


def hybrid_counts(pattern: str) -> tuple[int, int, int, int]:
    """(linear-mixer, attention, MLP, MoE) layers of a hybrid pattern (Model.hybrid_pattern). The
    linear mixers are its Mamba-2 ("M") or its Gated DeltaNet ("G") layers: a Model has one kind
    of them (Model._check_hybrid), whose sizes the cost model reads (costmodel.context `hyb`)."""
    return pattern.count("M") + pattern.count("G"), pattern.count("*"), pattern.count("-"), pattern.count("E")


def windowed_layers(m) -> int:
    """Layers that attend locally: a sliding window or their chunk (Model.sliding_window,
    attention_chunk, global_attention_every)."""
    if getattr(m, "sliding_window", None) is None and getattr(m, "attention_chunk", None) is None:
        return 0
    every = m.global_attention_every
    return m.layers - (m.layers // every if every else 0)


def count_parameters(m) -> ParameterCount:
    h = m.hidden
    norm = h if m.norm == "rmsnorm" else 2 * h
    attention = _attention(m)
    dense_mlp = _mlp(m, m.ffn_hidden)
    moe = _MoeMlp(0, 0, 0, h)
    if m.experts > 1:
        moe = _moe_mlp(m)
        expert = moe.expert
        moe_mlp = h * m.experts + m.experts * expert + moe.shared + moe.latent_proj
        if getattr(m, "shared_expert_gate", False) and m.shared_experts:
            moe_mlp += h                              # the shared experts' sigmoid gate, hidden -> 1
        moe_layers = (m.layers - m.dense_layers + m.moe_layer_freq - 1) // m.moe_layer_freq
        dense_layers = m.layers - moe_layers
    else:
        expert = moe_mlp = moe_layers = 0
        dense_layers = m.layers
    positions = (m.max_position or m.seq_len or 0) if m.position_embedding == "learned" else 0
    embedding = m.vocab * h + positions * h
    if getattr(m, "embedding_norm", False):          # BLOOM: LayerNorm on the word embeddings
        embedding += norm
    output = 0 if m.tied_embeddings else m.vocab * h
    layer_norms = 2 * norm
    if getattr(m, "qk_norm", False):                 # Qwen3: q_norm and k_norm over one head each
        layer_norms += 2 * m.head_dim * (1 if m.norm == "rmsnorm" else 2)
    body = dense_layers * (attention + dense_mlp + layer_norms) + moe_layers * (attention + moe_mlp + layer_norms)
    block_norms = layer_norms                         # an attention + MLP block's (an MTP module's layer)
    pattern = getattr(m, "hybrid_pattern", None)
    mamba = n_mamba = n_attn = 0
    if pattern is not None:
        # each character is a layer of one block and one pre-norm (Megatron-Core MambaLayer,
        # TransformerLayer with IdentityOp MLP or attention: megatron/core/models/mamba/mamba_layer_specs.py)
        n_mamba, n_attn, dense_layers, moe_layers = hybrid_counts(pattern)
        mamba = (_gdn(m) if "G" in pattern else _mamba(m)) if n_mamba else 0
        qk = layer_norms - 2 * norm               # qk_norm weights belong to the attention layers
        layer_norms = norm
        attn_norm = 0 if getattr(m, "parallel_mixers", False) else norm   # Falcon-H1: one pre-norm per pair
        body = (n_mamba * (mamba + norm) + n_attn * (attention + attn_norm + qk) + dense_layers * (dense_mlp + norm)
                + moe_layers * (moe_mlp + norm))
    total = embedding + output + body + norm
    inactive = moe_layers * (m.experts - m.experts_per_token) * expert
    # One DeepSeek-V3 MTP module: two norms, a 2h->h projection, one (MoE) layer, a final norm.
    # (in a hybrid stack the same: an attention layer and an MoE / MLP layer, one pre-norm each)
    mtp_layer = (attention + (moe_mlp if moe_layers else dense_mlp) + block_norms)
    mtp = m.mtp_layers * (2 * norm + 2 * h * h + mtp_layer + norm)
    # The released checkpoint stores each MTP module's embedding and output head again
    # (DeepSeek-V3 README_WEIGHTS.md: "11.5B unique parameters, excluding the shared 0.9B
    # Embedding and 0.9B output Head"); in training they are the main model's tensors.
    mtp_shared = m.mtp_layers * (m.vocab * h + (0 if m.tied_embeddings else m.vocab * h))
    return ParameterCount(
        total=total, embedding=embedding, output=output, attention=attention, dense_mlp=dense_mlp,
        expert=expert, moe_mlp=moe_mlp, norms=layer_norms, final_norm=norm,
        dense_layer_count=dense_layers, moe_layer_count=moe_layers, active=total - inactive, mtp=mtp,
        _experts=m.experts, mtp_shared=mtp_shared, mamba=mamba, mamba_layer_count=n_mamba,
        attention_layer_count=n_attn, hybrid=pattern is not None, shared_mlp=moe.shared, latent_proj=moe.latent_proj,
        moe_width=moe.width,
    )
