"""advisor.Model: the transformer being trained (dense, MoE, MLA, hybrid Mamba / linear attention),
from a preset, a Hugging Face config.json or field by field; advisor.inputs.specs re-exports it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationError, model_validator

from ..errors import InputError
from . import presets
from .architecture import HYBRID_KINDS, count_parameters
from .bounds import MAX_DIM, MAX_EXPERTS, MAX_LAYERS, MAX_PARAMS
from .hf import model_fields_from_hf_config
from .fields import Count, _Frozen
from .text import Label, SourceText


class MLA(_Frozen):
    """Multi-head latent attention (DeepSeek-V2/V3) dimensions, as in the Hugging Face config."""

    q_lora_rank: int | None = Field(None, ge=1, le=MAX_DIM)
    kv_lora_rank: int = Field(ge=1, le=MAX_DIM)
    qk_nope_head_dim: int = Field(ge=1, le=MAX_DIM)
    qk_rope_head_dim: int = Field(ge=1, le=MAX_DIM)
    v_head_dim: int = Field(ge=1, le=MAX_DIM)


class Model(_Frozen):
    """A decoder-only transformer: dense or mixture-of-experts, MHA / GQA / MLA attention, or a
    hybrid stack of Mamba-2 or Gated DeltaNet, attention, MLP and MoE layers (`hybrid_pattern`,
    Nemotron-H, Qwen3-Next).

    `params` is the total parameter count. When omitted it is computed from the architecture;
    when given it must agree with the architecture within 3 %.
    """

    name: Label = "custom"
    layers: int = Field(ge=1, le=MAX_LAYERS)
    hidden: int = Field(ge=1, le=MAX_DIM)
    heads: int = Field(ge=1, le=MAX_DIM)
    kv_heads: int | None = Field(None, ge=1, le=MAX_DIM)
    """Key/value heads (GQA query groups); None means heads (plain multi-head attention)."""
    head_dim: int | None = Field(None, ge=1, le=MAX_DIM)
    """Per-head size; None means hidden / heads (then heads must divide hidden)."""
    ffn_hidden: int = Field(ge=1, le=MAX_DIM * 8)
    """Dense MLP inner size (per expert for MoE models unless moe_ffn_hidden is set)."""
    vocab: int = Field(ge=1, le=MAX_DIM * 8)
    activation: Literal["swiglu", "gelu"] = "swiglu"
    tied_embeddings: bool = False
    position_embedding: Literal["rope", "learned", "alibi", "none"] = "rope"
    """"learned" adds a max_position × hidden table (GPT-2/3); RoPE and ALiBi add no parameters;
    "none": no position encoding (Nemotron-H, whose Mamba layers carry the order; Megatron
    --position-embedding-type none)."""
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    bias: bool = False
    """Linear layers carry biases (GPT-2/3, BLOOM style)."""
    qkv_bias: bool = False
    """Only the QKV projection has a bias (Qwen2 style)."""
    qk_norm: bool = False
    """A norm over each query and key head before attention (Qwen3's q_norm and k_norm; Megatron-LM
    --qk-layernorm): 2 x head_dim weights per layer (x2 for LayerNorm's bias), replicated over TP."""
    embedding_norm: bool = False
    """A norm right after the token embedding (BLOOM's word_embeddings_layernorm)."""
    experts: int = Field(1, ge=1, le=MAX_EXPERTS)
    """Routed experts per MoE layer; 1 means a dense model."""
    experts_per_token: int = Field(1, ge=1, le=MAX_EXPERTS)
    """Routed experts each token visits (top-k)."""
    shared_experts: int = Field(0, ge=0, le=1024)
    moe_ffn_hidden: int | None = Field(None, ge=1, le=MAX_DIM * 8)
    """Inner size of one expert; None means ffn_hidden."""
    dense_layers: int = Field(0, ge=0, le=MAX_LAYERS)
    """Leading layers that use the dense MLP in an MoE model (DeepSeek-V3: 3)."""
    moe_layer_freq: int = Field(1, ge=1, le=1000)
    """Every n-th layer after the dense ones is MoE (1 = all of them)."""
    router_groups: int = Field(1, ge=1, le=65_536)
    """Equal groups of routed experts for group-limited routing (DeepSeek-V3: 8, one per node of its
    EP 64; HF n_group, Megatron --moe-router-num-groups); 1: no group limit."""
    router_group_topk: int | None = Field(None, ge=1, le=65_536)
    """Groups a token picks its experts from (DeepSeek-V3: 4, so at most 4 nodes; HF topk_group,
    Megatron --moe-router-group-topk); None: every group."""
    sliding_window: int | None = Field(None, ge=1, le=1 << 24)
    """Tokens a windowed attention layer attends (Mistral 7B v0.1, Gemma 2 / 3, GPT-OSS; HF
    `sliding_window`); None: every layer attends the whole context."""
    attention_chunk: int | None = Field(None, ge=1, le=1 << 24)
    """Chunked local attention (Llama 4's RoPE layers; HF `attention_chunk_size`): a layer attends
    the keys of its own chunk of this many tokens only. Exclusive with sliding_window."""
    global_attention_every: int = Field(0, ge=0, le=MAX_LAYERS)
    """With sliding_window or attention_chunk: every n-th layer (layers n-1, 2n-1, ...) attends the
    whole context and the others locally (Gemma 3: 6, GPT-OSS and Gemma 2: 2, Llama 4: 4); 0: every
    layer is local."""
    attention_sinks: bool = False
    """A learned sink logit per head in each layer's softmax (GPT-OSS; HF `sinks`): heads parameters
    per layer, no GEMM."""
    router_score: Literal["softmax", "sigmoid"] = "softmax"
    """How the router scores experts: "softmax" (Mixtral, Qwen3-MoE) or "sigmoid" (DeepSeek-V3, HF
    scoring_func; Megatron --moe-router-score-function)."""
    router_expert_bias: bool = False
    """Aux-loss-free balancing with a learned per-expert bias added to the routing scores (DeepSeek-V3,
    HF topk_method "noaux_tc"; Megatron --moe-router-enable-expert-bias)."""
    router_topk_scale: float | None = Field(None, gt=0, le=1000)
    """Factor applied to the top-k routing weights (DeepSeek-V3: 2.5, HF routed_scaling_factor;
    Megatron --moe-router-topk-scaling-factor); None: 1."""
    rope_theta: float | None = Field(None, gt=0, le=1e12)
    """RoPE base frequency (HF rope_theta; Llama 3: 500000, Mixtral and Qwen2.5: 1000000); None: 10000,
    the RoFormer paper's and the frameworks' default (Megatron-LM --rotary-base). Unused without RoPE."""
    rope_scaling: Literal["none", "llama3", "yarn", "linear", "dynamic", "longrope"] = "none"
    """RoPE frequency scaling of the released model (HF rope_scaling.rope_type): "llama3" is Llama 3.1's
    (Megatron --use-rope-scaling), "yarn" YaRN (DeepSeek-V3, GPT-OSS; Megatron --rope-type yarn for
    MLA), "linear" position interpolation (Gemma 3), "dynamic" NTK and "longrope" (Phi-3 128k): the
    last three have no Megatron-LM flag in the pinned releases (audit rule megatron.rope-scaling-kind)."""
    rope_scaling_factor: float | None = Field(None, gt=0, le=10_000)
    """rope_scaling.factor (Llama 3.1: 8, DeepSeek-V3: 40); set exactly when rope_scaling is not "none"."""
    mla: MLA | None = None
    dsa_indexer_heads: int | None = Field(None, ge=1, le=MAX_DIM)
    """DeepSeek Sparse Attention (DeepSeek-V3.2, arXiv:2512.02556 §2.1): heads of the lightning indexer
    that scores every earlier token for each query (HF index_n_heads, Megatron --dsa-indexer-n-heads;
    DeepSeek-V3.2: 64). Set with dsa_indexer_head_dim and dsa_topk, on an MLA model with q_lora_rank;
    None: dense attention."""
    dsa_indexer_head_dim: int | None = Field(None, ge=1, le=MAX_DIM)
    """Channels per indexer head (HF index_head_dim, Megatron --dsa-indexer-head-dim; DeepSeek-V3.2: 128)."""
    dsa_topk: int | None = Field(None, ge=1, le=1 << 24)
    """Keys each query attends: the indexer's top-k (HF index_topk, Megatron --dsa-indexer-topk;
    DeepSeek-V3.2: 2048)."""
    moe_latent_size: int | None = Field(None, ge=1, le=MAX_DIM)
    """LatentMoE (Nemotron 3 Super): the routed experts work in a latent space of this width; each MoE
    layer projects a token down (hidden -> latent) before dispatch and back up after combine, shared by
    its experts, while the router and the shared experts stay at hidden width (HF moe_latent_size,
    Megatron --moe-latent-size, megatron/core/transformer/moe/moe_layer.py fc1_latent_proj /
    fc2_latent_proj). None: experts at hidden width."""
    hybrid_pattern: str | None = None
    """A hybrid stack, one character per layer as Megatron-Core's --hybrid-override-pattern
    (megatron/core/ssm/mamba_hybrid_layer_allocation.py): "M" a Mamba-2 mixer, "G" a Gated DeltaNet
    mixer (Megatron-LM main's hybrid_layer_allocation.py symbol; the gdn_* fields), "*" self-attention,
    "-" a dense MLP, "E" an MoE MLP, each with its own pre-norm and residual (Nemotron-H 8B:
    "M-M-M-M*-..."; HF `hybrid_override_pattern`; Qwen3-Next's 48 decoder layers are 96 characters,
    "GEGEGE*E" twelve times). Its length is `layers`. One kind of linear mixer per model (M or G).
    None: every layer is attention + MLP."""
    mamba_heads: int | None = Field(None, ge=1, le=MAX_DIM)
    """Mamba-2 heads (HF mamba_num_heads, Megatron --mamba-num-heads); d_inner = mamba_heads x
    mamba_head_dim (= expand x hidden)."""
    mamba_head_dim: int | None = Field(None, ge=1, le=MAX_DIM)
    """Channels per Mamba-2 head (HF mamba_head_dim; Megatron --mamba-head-dim, default 64)."""
    mamba_state: int | None = Field(None, ge=1, le=MAX_DIM)
    """SSM state size d_state (HF ssm_state_size; Megatron --mamba-state-dim, default 128)."""
    mamba_groups: int = Field(8, ge=1, le=MAX_DIM)
    """B/C groups (HF n_groups; Megatron --mamba-num-groups). Default 8, Megatron-Core's
    (NVIDIA/Megatron-LM@55ac7082517c3878ae653c07c09c534b8aed49f6 megatron/core/transformer/
    transformer_config.py L852 mamba_num_groups; L846 mamba_state_dim 128, L849 mamba_head_dim 64)."""
    mamba_conv: int = Field(4, ge=1, le=1024)
    """Causal depthwise conv1d kernel width d_conv (HF conv_kernel). Default 4, Megatron-Core's
    MambaMixer d_conv=4 (@55ac7082 megatron/core/ssm/mamba_mixer.py L149), which Megatron has no flag for."""
    mamba_chunk: int = Field(128, ge=1, le=1 << 16)
    """SSD chunk length Q of the chunked scan (HF chunk_size). Default 128, MambaMixer chunk_size=128
    (@55ac7082 mamba_mixer.py L164)."""
    gdn_key_heads: int | None = Field(None, ge=1, le=MAX_DIM)
    """Query/key heads of a Gated DeltaNet layer ("G" of hybrid_pattern; HF linear_num_key_heads,
    Megatron --linear-num-key-heads; Qwen3-Next: 16)."""
    gdn_value_heads: int | None = Field(None, ge=1, le=MAX_DIM)
    """Value (and output-gate) heads of a Gated DeltaNet layer, a multiple of gdn_key_heads (HF
    linear_num_value_heads; Qwen3-Next: 32)."""
    gdn_key_head_dim: int = Field(128, ge=1, le=MAX_DIM)
    """Channels per query/key head (HF linear_key_head_dim). Default 128, Qwen3NextConfig's and
    Megatron-Core's (NVIDIA/Megatron-LM@55ac7082517c3878ae653c07c09c534b8aed49f6
    megatron/core/transformer/transformer_config.py linear_key_head_dim)."""
    gdn_value_head_dim: int = Field(128, ge=1, le=MAX_DIM)
    """Channels per value head (HF linear_value_head_dim). Default 128, as gdn_key_head_dim."""
    gdn_conv: int = Field(4, ge=1, le=1024)
    """Causal depthwise conv1d kernel width over q, k, v (HF linear_conv_kernel_dim). Default 4,
    as Megatron-Core's linear_conv_kernel_dim."""
    gdn_chunk: int = Field(64, ge=1, le=1 << 16)
    """Chunk length of the chunked gated delta rule (Yang et al. 2024, arXiv:2412.06464 §3.3).
    Default 64, the chunk_size of transformers' torch_chunk_gated_delta_rule (huggingface/transformers@
    043bb8dde14aae1a56b84cd230737cf5d0877912 src/transformers/models/qwen3_next/modular_qwen3_next.py)."""
    parallel_mixers: bool = False
    """Each "M*" pair of hybrid_pattern is one mixer: the Mamba-2 mixer and self-attention read the same
    pre-norm output in parallel and their outputs are summed (Falcon-H1, Zuo et al. 2025,
    arXiv:2507.22448 §2; HF FalconH1DecoderLayer). Priced as the two branches summed (parameters,
    FLOPs, each branch's stored tensors) with one pre-norm, one stored layer input and one norm output
    for the pair. The pattern is then "M*" pairs, each optionally followed by "-" or "E"."""
    attention_output_gate: bool = False
    """Gated attention (Qiu et al. 2025, arXiv:2505.06708; Qwen3-Next): q_proj also emits a sigmoid
    gate of heads x head_dim channels that multiplies the attention output before o_proj, so q_proj is
    twice as wide (Megatron-Core --attention-output-gate)."""
    shared_expert_gate: bool = False
    """A sigmoid gate (hidden -> 1) scales the shared experts' output in every MoE layer (Qwen2-MoE,
    Qwen3-Next: HF shared_expert_gate; Megatron-Core --moe-shared-expert-gate): hidden parameters per
    MoE layer."""
    rotary_percent: float = Field(1.0, gt=0, le=1)
    """Share of each head's channels RoPE rotates (HF partial_rotary_factor; Megatron --rotary-percent):
    Qwen3-Next 0.25. It changes no parameter and no GEMM, so only the exports carry it."""
    mtp_layers: int = Field(0, ge=0, le=16)
    """Multi-token-prediction modules (DeepSeek-V3: 1); counted in params_with_mtp, not params. In a hybrid
    stack each is an attention layer then an MoE (or MLP) layer (Nemotron 3 Super: "*E")."""
    seq_len: int | None = Field(None, ge=1, le=1 << 24)
    """Context length the model was (pre)trained at; the default Training.seq_len."""
    max_position: int | None = Field(None, ge=1, le=1 << 24)
    """Longest position the model supports (max_position_embeddings)."""
    params: Count | None = None
    """Total parameters; computed from the architecture when omitted."""
    source: SourceText = "user-supplied"

    @model_validator(mode="after")
    def _check(self) -> "Model":
        kv = self.kv_heads or self.heads
        object.__setattr__(self, "kv_heads", kv)
        if self.head_dim is None:
            if self.hidden % self.heads:
                raise InputError(
                    "Model.hidden", self.hidden, f"a multiple of heads ({self.heads}) when head_dim is not given",
                    f"hidden({self.hidden}) % heads({self.heads}) = {self.hidden % self.heads} (Megatron M7)",
                )
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        if self.heads % kv:
            raise InputError("Model.kv_heads", kv, f"a divisor of heads ({self.heads})",
                             f"heads({self.heads}) % kv_heads({kv}) = {self.heads % kv}")
        if self.experts_per_token > self.experts:
            raise InputError("Model.experts_per_token", self.experts_per_token, f"at most experts ({self.experts})")
        if self.experts == 1 and (self.shared_experts or self.dense_layers or self.moe_ffn_hidden):
            raise InputError("Model.experts", self.experts, "more than 1 when MoE fields are set",
                             "shared_experts, dense_layers and moe_ffn_hidden describe an MoE model")
        if self.router_groups > 1 and self.experts % self.router_groups:
            raise InputError("Model.router_groups", self.router_groups, f"a divisor of experts ({self.experts})",
                             f"experts({self.experts}) % router_groups({self.router_groups}) = "
                             f"{self.experts % self.router_groups}: groups are equal-sized")
        if self.router_group_topk is not None and self.router_group_topk > self.router_groups:
            raise InputError("Model.router_group_topk", self.router_group_topk,
                             f"at most router_groups ({self.router_groups})")
        if (self.rope_scaling == "none") != (self.rope_scaling_factor is None):
            raise InputError("Model.rope_scaling_factor", self.rope_scaling_factor,
                             "a factor exactly when rope_scaling is not 'none'" if self.rope_scaling == "none"
                             else f"the factor of the {self.rope_scaling!r} scaling")
        if self.dense_layers >= self.layers and self.experts > 1:
            raise InputError("Model.dense_layers", self.dense_layers, f"fewer than layers ({self.layers})")
        if self.position_embedding == "learned" and not (self.max_position or self.seq_len):
            raise InputError("Model.max_position", None, "a length when position_embedding is 'learned'",
                             "the learned position table has max_position rows")
        if self.sliding_window is not None and self.attention_chunk is not None:
            raise InputError("Model.attention_chunk", self.attention_chunk, "None when sliding_window is set",
                             "a layer attends either a sliding window or its chunk")
        if self.global_attention_every and self.sliding_window is None and self.attention_chunk is None:
            raise InputError("Model.global_attention_every", self.global_attention_every,
                             "0 unless sliding_window or attention_chunk is set", "it says which layers are not local")
        if self.moe_ffn_hidden is None and self.experts > 1:
            object.__setattr__(self, "moe_ffn_hidden", self.ffn_hidden)
        if self.moe_latent_size is not None and self.experts == 1:
            raise InputError("Model.moe_latent_size", self.moe_latent_size, "None for a dense model",
                             "the latent projections wrap the routed experts of MoE layers")
        self._check_dsa()
        self._check_hybrid()
        counted = count_parameters(self).total
        if counted > MAX_PARAMS:
            raise InputError("Model", f"{counted:.3g} parameters", f"at most {MAX_PARAMS:.0e} parameters",
                             "layers, hidden, ffn_hidden, vocab or experts are far too large")
        if self.params is None:
            object.__setattr__(self, "params", counted)
        elif abs(self.params - counted) > 0.03 * counted:
            raise InputError(
                "Model.params", self.params, f"within 3% of the {counted:,} parameters the architecture implies",
                "check layers, hidden, ffn_hidden, vocab, kv_heads and experts, or omit params",
            )
        return self

    def _check_hybrid(self) -> None:
        p = self.hybrid_pattern
        mamba = (self.mamba_heads, self.mamba_head_dim, self.mamba_state)
        gdn = (self.gdn_key_heads, self.gdn_value_heads)
        if p is None:
            if any(v is not None for v in mamba + gdn) or self.parallel_mixers:
                raise InputError("Model.hybrid_pattern", None,
                                 "a layer pattern when mamba_*, gdn_* or parallel_mixers are set",
                                 'e.g. "M-M*-" (M Mamba-2, G Gated DeltaNet, * attention, - MLP, E MoE)')
            return
        bad = sorted(set(p) - set(HYBRID_KINDS))
        if bad:
            raise InputError("Model.hybrid_pattern", p, "only the characters M, G, *, - and E",
                             f"unknown {''.join(bad)!r} (Megatron-Core --hybrid-override-pattern)")
        if "M" in p and "G" in p:
            raise InputError("Model.hybrid_pattern", p, "Mamba-2 (M) or Gated DeltaNet (G) layers, not both",
                             "a stack mixing the two linear mixers is not modelled")
        self._check_gdn(p)
        if self.parallel_mixers and p.replace("M*", "") != p.replace("M*", "").replace("M", "").replace("*", ""):
            raise InputError("Model.hybrid_pattern", p, "every M followed by its * with parallel_mixers",
                             "a parallel mixer is a Mamba-2 and an attention branch on one input (Falcon-H1)")
        if len(p) != self.layers:
            raise InputError("Model.hybrid_pattern", f"{len(p)} characters", f"one per layer ({self.layers})",
                             "each character is one layer, as Megatron-Core counts --num-layers")
        if ("E" in p) != (self.experts > 1):
            raise InputError("Model.experts", self.experts,
                             "more than 1 exactly when hybrid_pattern has MoE layers (E)",
                             f"the pattern has {p.count('E')} E layers")
        if self.experts > 1 and (self.dense_layers or self.moe_layer_freq != 1):
            raise InputError("Model.dense_layers", self.dense_layers, "0 (and moe_layer_freq 1) with hybrid_pattern",
                             "the pattern says which layers are MoE")
        if self.mla is not None:
            raise InputError("Model.mla", "set", "unset with hybrid_pattern", "MLA in a hybrid stack is not modelled")
        if self.mtp_layers and "*" not in p:
            raise InputError("Model.mtp_layers", self.mtp_layers, "0 for a hybrid stack without attention layers",
                             "a hybrid MTP module is an attention layer then the stack's MLP or MoE layer (Nemotron 3 "
                             "Super: HF mtp_layers_block_type ['attention', 'moe'])")
        if self.sliding_window is not None or self.attention_chunk is not None:
            raise InputError("Model.sliding_window", self.sliding_window or self.attention_chunk,
                             "None with hybrid_pattern", "windowed attention in a hybrid stack is not modelled")
        if "M" in p:
            for name, v in zip(("mamba_heads", "mamba_head_dim", "mamba_state"), mamba):
                if v is None:
                    raise InputError(f"Model.{name}", None, "a size when hybrid_pattern has Mamba layers (M)")
            if self.mamba_heads % self.mamba_groups:
                raise InputError("Model.mamba_groups", self.mamba_groups, f"a divisor of mamba_heads ({self.mamba_heads})",
                                 f"mamba_heads({self.mamba_heads}) % mamba_groups({self.mamba_groups}) = "
                                 f"{self.mamba_heads % self.mamba_groups}")

    def _check_dsa(self) -> None:
        dsa = (self.dsa_indexer_heads, self.dsa_indexer_head_dim, self.dsa_topk)
        if all(v is None for v in dsa):
            return
        for name, v in zip(("dsa_indexer_heads", "dsa_indexer_head_dim", "dsa_topk"), dsa):
            if v is None:
                raise InputError(f"Model.{name}", None, "a size when any DeepSeek Sparse Attention field is set",
                                 "dsa_indexer_heads, dsa_indexer_head_dim and dsa_topk describe the indexer together")
        if self.mla is None or not self.mla.q_lora_rank:
            raise InputError("Model.dsa_indexer_heads", self.dsa_indexer_heads, "None unless mla has a q_lora_rank",
                             "the indexer's queries are projected from MLA's compressed query (DeepSeek-V3.2 Indexer.wq_b)")

    def _check_gdn(self, p: str) -> None:
        if "G" not in p:
            if any(v is not None for v in (self.gdn_key_heads, self.gdn_value_heads)):
                raise InputError("Model.gdn_value_heads", self.gdn_value_heads,
                                 "None unless hybrid_pattern has Gated DeltaNet layers (G)")
            return
        for name in ("gdn_key_heads", "gdn_value_heads"):
            if getattr(self, name) is None:
                raise InputError(f"Model.{name}", None, "a head count when hybrid_pattern has Gated DeltaNet layers (G)")
        if self.gdn_value_heads % self.gdn_key_heads:
            raise InputError("Model.gdn_value_heads", self.gdn_value_heads,
                             f"a multiple of gdn_key_heads ({self.gdn_key_heads})",
                             "each query/key head serves an equal group of value heads (HF repeat_interleave)")

    @classmethod
    def preset(cls, name: str) -> "Model":
        """A built-in model, e.g. `Model.preset("llama-3-70b")`; `advisor presets` lists them."""
        return cls(**presets.model(name, field="Model.preset"))

    @classmethod
    def from_hf_config(cls, path_or_dict, *, name: str | None = None) -> "Model":
        """A Model from a Hugging Face config.json (path, folder or dict): Llama, Mistral, Mixtral,
        Qwen2, Qwen3 (dense and MoE), DeepSeek-V2/V3/V3.2, Kimi-K2, GLM-4.5, GPT-NeoX, BLOOM, GPT-2, Gemma,
        SmolLM3, StarCoder2, Nemotron, Nemotron-H (Nemotron 3), Qwen3-Next, Falcon-H1, gpt-oss, Llama 4
        (advisor.inputs.hf.SUPPORTED_MODEL_TYPES). A missing key raises InputError
        naming it."""
        read = model_fields_from_hf_config(path_or_dict, name=name)
        try:
            return cls(**read.fields)
        except ValidationError as e:
            raise read.input_error(e) from None

    @property
    def is_moe(self) -> bool:
        return self.experts > 1
