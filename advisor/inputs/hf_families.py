"""The architecture families a Hugging Face config.json is read by (advisor.inputs.hf): each
model_type's defaults (activation, norm, biases, position embedding, tied embeddings) and the readers
of the keys only some families have (MoE layouts, hybrid Mamba / linear-attention patterns, attention
windows). `r` is a _Reader (below): the config, its model_type and where it was read from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InputError


@dataclass(frozen=True)
class _Family:
    activation: str
    norm: str
    position_embedding: str
    bias: bool
    qkv_bias: bool
    tied_default: bool          # the transformers config class's tie_word_embeddings default
    ffn_default_4h: bool        # intermediate size may be omitted (4 * hidden)
    moe: str | None = None      # "mixtral" | "deepseek" | "qwen3"
    head_dim_default: int | None = None   # the config class's head_dim when the file omits it
    qk_norm: bool = False       # q_norm / k_norm over each head (the modelling code, not a config key)


_LLAMA = _Family("swiglu", "rmsnorm", "rope", False, False, False, False)


_FAMILIES: dict[str, _Family] = {
    "llama": _LLAMA,
    "mistral": _LLAMA,
    "mixtral": _Family("swiglu", "rmsnorm", "rope", False, False, False, False, moe="mixtral"),
    "qwen2": _Family("swiglu", "rmsnorm", "rope", False, True, False, False),
    # Qwen3Config: Qwen2's block without the q/k/v bias (attention_bias, default False, covers q, k,
    # v and o; there is no mlp_bias), plus QK-norm (Qwen3Attention's q_norm and k_norm, RMSNorm over
    # head_dim); head_dim is explicit (class default 128: Qwen3-32B has 64 heads x 128 on hidden 5120).
    "qwen3": _Family("swiglu", "rmsnorm", "rope", False, False, False, False, head_dim_default=128, qk_norm=True),
    # Qwen3MoeConfig: the same attention; Qwen3MoeSparseMoeBlock is a bias-free router
    # (hidden x num_experts) and num_experts SwiGLU experts of moe_intermediate_size, no shared
    # expert. The class has no head_dim field: the modelling code falls back to hidden / heads.
    "qwen3_moe": _Family("swiglu", "rmsnorm", "rope", False, False, False, False, moe="qwen3", qk_norm=True),
    "deepseek_v3": _Family("swiglu", "rmsnorm", "rope", False, False, False, False, moe="deepseek"),
    "deepseek_v2": _Family("swiglu", "rmsnorm", "rope", False, False, False, False, moe="deepseek"),
    # DeepSeek-V3.2 (deepseek-ai/DeepSeek-V3.2 config.json, architectures DeepseekV32ForCausalLM):
    # DeepSeek-V3's keys plus DeepSeek Sparse Attention's index_n_heads, index_head_dim, index_topk.
    "deepseek_v32": _Family("swiglu", "rmsnorm", "rope", False, False, False, False, moe="deepseek"),
    # Kimi-K2 (moonshotai/Kimi-K2-Instruct config.json: architectures DeepseekV3ForCausalLM, the remote
    # code's DeepseekV3Config): DeepSeek-V3's architecture and keys (384 experts, 64 heads, one dense layer).
    "kimi_k2": _Family("swiglu", "rmsnorm", "rope", False, False, False, False, moe="deepseek"),
    # Glm4MoeConfig (GLM-4.5 / 4.6): Llama-style GQA with q/k/v biases and DeepSeekMoE (_glm4_moe).
    "glm4_moe": _Family("swiglu", "rmsnorm", "rope", False, False, False, False, moe="glm4_moe"),
    "gpt_neox": _Family("gelu", "layernorm", "rope", True, False, False, False),
    "bloom": _Family("gelu", "layernorm", "alibi", True, False, True, True),
    "gpt2": _Family("gelu", "layernorm", "learned", True, False, True, True),
    # GemmaConfig: the MLP is GeGLU (gate_proj, up_proj, down_proj with a gelu_pytorch_tanh gate),
    # three matrices like SwiGLU, so it is modelled with the gated "swiglu" activation, as the
    # gemma-7b preset does. RMSNorm (the (1 + w) form has the same one weight per channel), RoPE,
    # no biases, tie_word_embeddings defaults to True; head_dim (256) is read below.
    "gemma": _Family("swiglu", "rmsnorm", "rope", False, False, True, False),
    # SmolLM3Config: Llama-shaped (NoPE on every 4th layer adds no parameter), tied by default.
    "smollm3": _Family("swiglu", "rmsnorm", "rope", False, False, True, False),
    # Starcoder2Config: ungated c_fc -> gelu_pytorch_tanh -> c_proj MLP, nn.LayerNorm (weight and
    # bias; some config.json files also say norm_type "layer_norm"), biases on every linear layer
    # unless use_bias is false, tie_word_embeddings defaults to True (starcoder2-15b sets false).
    "starcoder2": _Family("gelu", "layernorm", "rope", True, False, True, False),
    # NemotronConfig: ungated up_proj -> relu2 (squared ReLU) -> down_proj MLP, two matrices, so it
    # is modelled as the ungated "gelu" activation, as the nemotron-4-340b preset does. LayerNorm1p
    # (zero-centred gamma) has a weight and a bias like "layernorm"; no biases unless attention_bias
    # / mlp_bias; partial RoPE adds no parameter; tie_word_embeddings defaults to False.
    "nemotron": _Family("gelu", "layernorm", "rope", False, False, False, False),
    # GptOssConfig (openai/gpt-oss-20b, -120b): a gated MLP per expert (SwiGLU with clamp, three
    # matrices), RMSNorm, RoPE (YaRN from 4096), biases on q/k/v/o, the router and the experts
    # (attention_bias; GptOssExperts gate_up_proj_bias / down_proj_bias), untied, head_dim 64, a learned
    # sink per head, and layer_types alternating sliding (128) and full attention.
    "gpt_oss": _Family("swiglu", "rmsnorm", "rope", True, False, False, False, moe="mixtral"),
    # Gemma2Config / Gemma3TextConfig: Gemma's GeGLU block, tied, with sliding-window layers
    # (Gemma 2: every other layer, window 4096; Gemma 3: five of every six, window 1024 in the
    # checkpoints) and, in Gemma 3, QK-norm over each head. Their extra post-attention / post-MLP
    # norms (2 x hidden per layer, under 0.01 % of the weights) are not counted.
    "gemma2": _Family("swiglu", "rmsnorm", "rope", False, False, True, False),
    "gemma3_text": _Family("swiglu", "rmsnorm", "rope", False, False, True, False, qk_norm=True),
    # Phi3Config (Phi-3, Phi-3.5, Phi-4): Llama's block with fused qkv_proj and gate_up_proj (the
    # same matrices), untied; Phi-3-mini-4k declares a 2047-token sliding window.
    "phi3": _LLAMA,
    # Olmo2Config: Llama's block with RMSNorm after attention and MLP (two norms, as Llama) and
    # QK-norm over the whole q and k projections (heads x head_dim and kv_heads x head_dim weights
    # per layer, counted as per-head norms: under 0.1 % of the weights), untied.
    "olmo2": _Family("swiglu", "rmsnorm", "rope", False, False, False, False, qk_norm=True),
    # FalconConfig: GeLU MLP of 4 x hidden (ffn_hidden_size), LayerNorm, RoPE, no biases, tied;
    # new_decoder_architecture (40B, 180B) has GQA with num_kv_heads, the 7B multi-query attention.
    "falcon": _Family("gelu", "layernorm", "rope", False, False, True, True),
    # Llama4TextConfig (Llama 4 Scout / Maverick, text model): MoE layers every
    # interleave_moe_layer_step-th layer with one shared expert of the experts' size, dense layers of
    # intermediate_size_mlp, chunked attention (attention_chunk_size) on the RoPE layers and global
    # attention on every 4th (no_rope_layers, iRoPE), untied. The vision encoder is not part of it.
    "llama4_text": _Family("swiglu", "rmsnorm", "rope", False, False, False, False, moe="llama4"),
    # NemotronHConfig (Nemotron-H 4B/8B/47B/56B, Nemotron Nano v2, Nemotron 3 Nano): a hybrid stack
    # (hybrid_override_pattern, or the newer layers_block_type list) of Mamba-2 mixers, attention-only
    # and MLP-only layers (ungated relu2 MLP: "gelu"), RMSNorm, no biases (attention_bias, mlp_bias,
    # mamba_proj_bias default False), untied; the attention layers use no position embedding
    # (NemotronHAttention applies no rotary embedding; Megatron --position-embedding-type none).
    # huggingface/transformers@13923c63d59f73faebae79b2ee3fafc7e3a35201
    # src/transformers/models/nemotron_h/configuration_nemotron_h.py
    "nemotron_h": _Family("gelu", "rmsnorm", "none", False, False, False, False, moe="nemotron_h"),
    # Qwen3NextConfig (Qwen3-Next-80B-A3B): 48 decoder layers, each a token mixer (Gated DeltaNet, or
    # gated attention on every full_attention_interval-th layer) then an MoE block of num_experts
    # SwiGLU experts plus one shared expert; Qwen3-MoE's attention (QK-norm, head_dim 256, GQA) with
    # an output gate and partial RoPE (no parameter), zero-centred RMSNorm (one weight per channel),
    # untied. Read into Model.hybrid_pattern (mixer and MoE are one character each) and the gdn_* fields.
    # huggingface/transformers@008e574391258935f3ecc3035c882e73bbcac419
    # src/transformers/models/qwen3_next/configuration_qwen3_next.py
    "qwen3_next": _Family("swiglu", "rmsnorm", "rope", False, False, False, False, moe="qwen3_next",
                          head_dim_default=256, qk_norm=True),
    # FalconH1Config (Falcon-H1 0.5B-34B): every decoder layer runs a Mamba-2 mixer and GQA attention
    # in parallel on one input_layernorm output, sums them, then a SwiGLU MLP after pre_ff_layernorm;
    # RMSNorm, RoPE, no biases unless attention_bias / mlp_bias / projectors_bias. Read into
    # Model.hybrid_pattern "M*-" per layer with parallel_mixers. The muP multipliers (embedding,
    # lm_head, key, attention / SSM in and out, MLP) scale activations and add no parameter.
    # huggingface/transformers@020a37d2264e60dc7beb9634c3e87ad870073e2c
    # src/transformers/models/falcon_h1/configuration_falcon_h1.py
    "falcon_h1": _Family("swiglu", "rmsnorm", "rope", False, False, False, False, moe="falcon_h1"),
}


# model_types whose config nests the language model under "text_config" (multimodal checkpoints):
# the text model is read, the vision tower is not (it is not trained by the layouts advisor plans).
_TEXT_CONFIG = {"gemma3": "gemma3_text", "llama4": "llama4_text"}


# Architectures advisor cannot describe yet, refused with what is missing instead of a wrong mapping.
_NOT_YET = {
    "mamba": "Mamba layers are not modelled yet",
    "mamba2": "Mamba-2 layers are not modelled yet",
}


SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(_FAMILIES)


# Families whose config classes carry LlamaConfig's attention_bias / mlp_bias flags.
_ATTENTION_MLP_BIAS = ("llama", "mistral", "mixtral", "smollm3", "nemotron", "gemma", "qwen3", "qwen3_moe",
                       "qwen3_next", "glm4_moe")


# ... of which these have attention_bias only (no mlp_bias key).
_NO_MLP_BIAS = ("gemma", "qwen3", "qwen3_moe", "qwen3_next", "glm4_moe")


# NemotronHConfig.layers_block_type names -> Model.hybrid_pattern characters (the config class's
# _list_to_pattern; "mamba" and "attention" are the legacy names it remaps).
_NEMOTRON_H_KINDS = {"linear_attention": "M", "mamba": "M", "full_attention": "*", "attention": "*",
                     "mlp": "-", "moe": "E"}


def _nemotron_h(r: _Reader, kwargs: dict[str, Any], layers: int) -> None:
    """The hybrid pattern, the Mamba-2 mixer's sizes and, with "E" layers, the MoE (NemotronHConfig)."""
    pattern = r.cfg.get("hybrid_override_pattern")
    listed = r.cfg.get("layers_block_type")
    if pattern is None and isinstance(listed, list):
        unknown = sorted({str(k) for k in listed} - set(_NEMOTRON_H_KINDS))
        if unknown:
            raise InputError("hf_config.layers_block_type", unknown, f"names among {sorted(_NEMOTRON_H_KINDS)}",
                             _where(r.where))
        pattern = "".join(_NEMOTRON_H_KINDS[k] for k in listed)
    if not isinstance(pattern, str):
        r.missing(("hybrid_override_pattern", "layers_block_type"))
    if len(pattern) != layers:
        # NemotronHConfig derives num_hidden_layers from the pattern
        kwargs["layers"] = len(pattern)
    kwargs["hybrid_pattern"] = pattern
    if "M" in pattern:
        kwargs["mamba_heads"] = r.required(("mamba_num_heads",))
        kwargs["mamba_head_dim"] = r.required(("mamba_head_dim",))
        kwargs["mamba_state"] = r.required(("ssm_state_size",))
        kwargs["mamba_groups"] = r.optional(("n_groups", "mamba_n_groups")) or 8
        kwargs["mamba_conv"] = r.optional(("conv_kernel", "mamba_d_conv")) or 4
        kwargs["mamba_chunk"] = r.optional(("chunk_size", "mamba_chunk_size")) or 128
        if r.flag("mamba_proj_bias", False) or not r.flag("use_conv_bias", True):
            raise InputError("hf_config.mamba_proj_bias", True, "false (and use_conv_bias true), as every "
                             "Nemotron-H checkpoint", "other Mamba-2 bias layouts are not counted")
    if r.flag("attention_bias", False) or r.flag("mlp_bias", False):
        raise InputError("hf_config.attention_bias", True, "false, as every Nemotron-H checkpoint",
                         "biased hybrid layers are not counted")
    _nemotron_h_mtp(r, kwargs, pattern)
    if "E" in pattern:
        _moe_sizes(r, kwargs, r.required(("n_routed_experts",)), "moe_shared_expert_intermediate_size")
        # NemotronH MoE routing: sigmoid scores with a correction bias (Megatron-Bridge
        # NemotronHModelProvider: moe_router_score_function "sigmoid", moe_router_enable_expert_bias)
        kwargs["router_score"] = "sigmoid"
        kwargs["router_expert_bias"] = True
        scale = r.cfg.get("routed_scaling_factor")
        if scale is not None and scale != 1:
            kwargs["router_topk_scale"] = _positive(r, "routed_scaling_factor", scale)
        # LatentMoE (Nemotron 3 Super): NemotronHConfig.moe_latent_size, None = experts at hidden width
        kwargs["moe_latent_size"] = r.optional(("moe_latent_size",))


# NemotronHConfig.mtp_layers_block_type's default and the one block advisor counts for an MTP module of a
# hybrid stack: an attention layer then an MoE layer (Nemotron 3 Super's mtp_hybrid_override_pattern "*E").
_NEMOTRON_H_MTP = "*E"


def _nemotron_h_mtp(r: _Reader, kwargs: dict[str, Any], pattern: str) -> None:
    """NemotronHConfig num_nextn_predict_layers MTP modules, each of mtp_layers_block_type (legacy:
    mtp_hybrid_override_pattern; default ['full_attention', 'moe']) blocks; Model.mtp_layers counts them."""
    n = r.optional(("num_nextn_predict_layers",), allow_zero=True) or 0
    if not n:
        return
    listed = r.cfg.get("mtp_layers_block_type")
    block = r.cfg.get("mtp_hybrid_override_pattern", _NEMOTRON_H_MTP)
    if isinstance(listed, list):
        block = "".join(_NEMOTRON_H_KINDS.get(str(k), "?") for k in listed)
    want = _NEMOTRON_H_MTP if "E" in pattern else "*-"
    if block != want:
        raise InputError("hf_config.mtp_layers_block_type", listed if isinstance(listed, list) else block,
                         f"an attention then an {'MoE' if 'E' in pattern else 'MLP'} layer ({want!r}), the MTP "
                         "module advisor counts", "other MTP blocks of hybrid models are not modelled")
    kwargs["mtp_layers"] = n


def _qwen3_next(r: _Reader, kwargs: dict[str, Any], layers: int) -> None:
    """Qwen3NextConfig: layer_types (else "full_attention" on every full_attention_interval-th layer,
    default 4) picks each layer's mixer, Gated DeltaNet ("G") or gated attention ("*"); the MLP is
    Qwen3-MoE's choice (mlp_only_layers, decoder_sparse_step): an MoE block ("E") of num_experts experts
    plus a shared expert of shared_expert_intermediate_size, else a dense MLP ("-") of intermediate_size
    (huggingface/transformers@043bb8dde14aae1a56b84cd230737cf5d0877912 modular_qwen3_next.py
    Qwen3NextDecoderLayer; Qwen3NextSparseMoeBlock.shared_expert_gate, hidden -> 1, scales the shared
    expert)."""
    types = r.cfg.get("layer_types")
    if types is None:
        every = r.optional(("full_attention_interval",)) or 4
        types = ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(layers)]
    if not isinstance(types, list) or len(types) != layers or not all(
            t in ("linear_attention", "full_attention") for t in types):
        raise InputError("hf_config.layer_types", types, f"{layers} entries of 'linear_attention' or "
                         f"'full_attention' (model_type '{r.model_type}')", _where(r.where))
    mlp_only = r.cfg.get("mlp_only_layers") or []
    if not isinstance(mlp_only, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in mlp_only):
        raise InputError("hf_config.mlp_only_layers", mlp_only,
                         f"a list of layer indices (model_type '{r.model_type}')", _where(r.where))
    experts = r.required(("num_experts",), allow_zero=True)
    step = r.optional(("decoder_sparse_step",)) or 1
    dense_only = set(mlp_only)             # a set: `in` on the list made this O(layers x entries)
    moe = [experts > 0 and i not in dense_only and (i + 1) % step == 0 for i in range(layers)]
    mixers = ["G" if t == "linear_attention" else "*" for t in types]
    kwargs["hybrid_pattern"] = "".join(mx + ("E" if sparse else "-") for mx, sparse in zip(mixers, moe))
    kwargs["layers"] = 2 * layers          # one character per mixer and per MLP block
    kwargs["attention_output_gate"] = True  # Qwen3NextAttention: q_proj emits query and gate
    if "G" in mixers:
        kwargs["gdn_key_heads"] = r.required(("linear_num_key_heads",))
        kwargs["gdn_value_heads"] = r.required(("linear_num_value_heads",))
        kwargs["gdn_key_head_dim"] = r.optional(("linear_key_head_dim",)) or 128
        kwargs["gdn_value_head_dim"] = r.optional(("linear_value_head_dim",)) or 128
        kwargs["gdn_conv"] = r.optional(("linear_conv_kernel_dim",)) or 4
    if any(moe):
        shared = _moe_sizes(r, kwargs, experts, "shared_expert_intermediate_size")
        kwargs["shared_expert_gate"] = shared > 0


def _moe_sizes(r: _Reader, kwargs: dict[str, Any], experts: int, shared_key: str) -> int:
    """The MoE sizes hybrid configs share (moe_intermediate_size per expert, num_experts_per_tok, the
    shared experts' width under `shared_key`, a multiple of one expert); returns that width."""
    expert = r.required(("moe_intermediate_size",))
    kwargs["experts"] = experts
    kwargs["experts_per_token"] = r.required(("num_experts_per_tok",))
    kwargs["moe_ffn_hidden"] = expert
    shared = r.optional((shared_key,), allow_zero=True) or 0
    if shared % expert:
        raise InputError(f"hf_config.{shared_key}", shared, f"a multiple of moe_intermediate_size ({expert})",
                         "advisor.Model counts shared experts in units of one expert")
    kwargs["shared_experts"] = shared // expert
    return shared


def _falcon_h1(r: _Reader, kwargs: dict[str, Any], layers: int) -> None:
    """FalconH1Config: the parallel mixer's Mamba-2 sizes (mamba_d_ssm, else mamba_expand x hidden, =
    mamba_n_heads x mamba_d_head; mamba_n_groups, mamba_d_state, mamba_d_conv, mamba_chunk_size) and
    the flags whose tensors advisor counts the Nemotron-H way (conv1d bias, no in_proj / out_proj bias;
    huggingface/transformers modular_falcon_h1.py FalconH1Mixer, a BambaMixer with mamba_d_ssm channels).
    The mixer's gated RMSNorm (mamba_rms_norm; d_inner weights, 0.01 % of Falcon-H1-3B) is counted
    whether the checkpoint has it or not."""
    hidden = kwargs["hidden"]
    heads = r.required(("mamba_n_heads",))
    d_ssm = r.optional(("mamba_d_ssm",)) or (r.optional(("mamba_expand",)) or 2) * hidden
    head_dim = r.cfg.get("mamba_d_head", "auto")
    head_dim = d_ssm // heads if head_dim in ("auto", None) else r.value("mamba_d_head", head_dim)
    if head_dim * heads != d_ssm:
        raise InputError("hf_config.mamba_d_head", head_dim, f"mamba_d_ssm / mamba_n_heads ({d_ssm} / {heads})",
                         "FalconH1Config.validate_architecture: the heads tile the SSM channels")
    for key, default in (("mamba_proj_bias", False), ("projectors_bias", False), ("attention_bias", False),
                         ("mlp_bias", False)):
        if r.flag(key, default):
            raise InputError(f"hf_config.{key}", True, "false, as every Falcon-H1 checkpoint",
                             "biased Falcon-H1 projections are not counted")
    if not r.flag("mamba_conv_bias", True):
        raise InputError("hf_config.mamba_conv_bias", False, "true, as every Falcon-H1 checkpoint",
                         "a Mamba-2 conv1d without bias is not counted")
    kwargs["hybrid_pattern"] = "M*-" * layers
    kwargs["layers"] = 3 * layers            # one character per branch pair's two mixers and the MLP
    kwargs["parallel_mixers"] = True
    kwargs["mamba_heads"] = heads
    kwargs["mamba_head_dim"] = head_dim
    kwargs["mamba_state"] = r.optional(("mamba_d_state",)) or 256
    kwargs["mamba_groups"] = r.optional(("mamba_n_groups",)) or 1
    kwargs["mamba_conv"] = r.optional(("mamba_d_conv",)) or 4
    kwargs["mamba_chunk"] = r.optional(("mamba_chunk_size",)) or 256


def _attention_window(r: _Reader, kwargs: dict[str, Any], layers: int) -> None:
    """Model.sliding_window / attention_chunk / global_attention_every from the config: `layer_types`
    (transformers >= 4.53: "sliding_attention" / "full_attention" per layer; GPT-OSS, Gemma 2/3),
    else Gemma 3's `sliding_window_pattern`, Gemma 2's alternation, or one window on every layer
    (Mistral 7B v0.1, Phi-3-mini: `sliding_window` set and no pattern). Qwen2-style configs carry a
    `sliding_window` that is off unless `use_sliding_window` is true. Llama 4: chunked attention of
    attention_chunk_size on the RoPE layers, global on every 4th (no_rope_layers / iRoPE)."""
    cfg = r.cfg
    if r.model_type == "llama4_text":
        _llama4_attention(r, kwargs, layers)
        return
    if cfg.get("use_sliding_window") is False:
        return
    window = r.optional(("sliding_window",))
    if window is None:
        return
    kwargs["sliding_window"] = window
    types = cfg.get("layer_types")
    if types is not None:
        kwargs["global_attention_every"] = _every_from_types(r, types, layers)
    elif r.cfg.get("sliding_window_pattern") is not None:
        kwargs["global_attention_every"] = r.value("sliding_window_pattern", cfg["sliding_window_pattern"])
    elif r.model_type == "gemma2":
        kwargs["global_attention_every"] = 2      # Gemma2DecoderLayer: sliding when (layer_idx + 1) % 2
    else:
        kwargs["global_attention_every"] = 0


def _every_from_types(r: _Reader, types: Any, layers: int) -> int:
    if not isinstance(types, list) or len(types) != layers or not all(
            t in ("sliding_attention", "full_attention") for t in types):
        raise InputError("hf_config.layer_types", types, f"{layers} entries of 'sliding_attention' or "
                         f"'full_attention' (model_type '{r.model_type}')", _where(r.where))
    return _every_from_flags(r, [t == "full_attention" for t in types], layers, "layer_types", global_value=True)


def _every_from_flags(r: _Reader, flags: Any, layers: int, key: str, global_value: Any, default: int = 0) -> int:
    """n such that exactly layers n-1, 2n-1, ... are global (flags[i] == global_value); 0: none is."""
    if flags is None:
        return default
    if not isinstance(flags, list) or len(flags) != layers:
        raise InputError(f"hf_config.{key}", flags, f"a list of {layers} per-layer entries (model_type "
                         f"'{r.model_type}')", _where(r.where))
    glob = [i for i, f in enumerate(flags) if f == global_value]
    if not glob:
        return 0
    every = glob[0] + 1
    if glob != list(range(every - 1, layers, every)):
        raise InputError(f"hf_config.{key}", flags, "global attention on every n-th layer, which advisor.Model "
                         f"describes (global_attention_every; model_type '{r.model_type}')", _where(r.where))
    return every


def _falcon_kv_heads(r: _Reader, heads: int) -> int:
    """FalconConfig: num_kv_heads with new_decoder_architecture, one shared key/value head with
    multi_query (Falcon-7B), else multi-head attention."""
    if r.flag("new_decoder_architecture", False):
        return r.optional(("num_kv_heads",)) or heads
    return 1 if r.flag("multi_query", True) else heads


# Llama4TextConfig's defaults (huggingface/transformers@008e574391258935f3ecc3035c882e73bbcac419
# src/transformers/models/llama4/configuration_llama4.py): attention_chunk_size 8192 when the key is
# absent (an explicit null turns chunking off), no_rope_layer_interval 4.
_LLAMA4_CHUNK, _LLAMA4_NOPE_EVERY = 8192, 4


def _llama4_attention(r: _Reader, kwargs: dict[str, Any], layers: int) -> None:
    """Llama 4's chunked attention on its RoPE layers, global on the NoPE ones (iRoPE), as
    Llama4TextConfig.__post_init__ reads them: `no_rope_layers` (1: RoPE and chunked, 0: NoPE and
    global) when the list is non-empty, else every no_rope_layer_interval-th layer is NoPE; an empty
    list is the default interleave (Llama-4-Scout-17B-16E ships "no_rope_layers": [])."""
    chunk = r.cfg.get("attention_chunk_size", _LLAMA4_CHUNK)
    if chunk is None:
        return
    kwargs["attention_chunk"] = r.value("attention_chunk_size", chunk)
    flags = r.cfg.get("no_rope_layers")
    if not flags:     # None or [] (Python truthiness, as the config class tests it)
        every = r.optional(("no_rope_layer_interval",)) or _LLAMA4_NOPE_EVERY
        flags = [int((i + 1) % every != 0) for i in range(layers)]
    kwargs["global_attention_every"] = _every_from_flags(r, flags, layers, "no_rope_layers", global_value=0)


def _llama4(r: _Reader, kwargs: dict[str, Any], layers: int) -> None:
    """Llama4TextConfig: experts of intermediate_size with one shared expert of the same size, on the
    layers `moe_layers` lists, by default interleave_moe_layer_step - 1, 2 * step - 1, ...
    (configuration_llama4.py __post_init__); the other layers' MLP is intermediate_size_mlp wide."""
    experts = r.required(("num_local_experts",))
    step = r.optional(("interleave_moe_layer_step",)) or 1
    kwargs["experts"] = experts
    kwargs["experts_per_token"] = r.required(("num_experts_per_tok",))
    kwargs["moe_ffn_hidden"] = r.required(("intermediate_size",))
    kwargs["ffn_hidden"] = r.optional(("intermediate_size_mlp",)) or kwargs["moe_ffn_hidden"]
    kwargs["shared_experts"] = 1
    listed = r.cfg.get("moe_layers")
    moe = list(range(step - 1, layers, step)) if listed is None else listed
    first, freq = _every_nth(r, "moe_layers", moe, layers)
    kwargs["dense_layers"] = first
    kwargs["moe_layer_freq"] = freq


def _every_nth(r: _Reader, key: str, indices: Any, layers: int) -> tuple[int, int]:
    """(first, n) of a layer list that is `first`, then every n-th layer to the end: the MoE layers
    advisor.Model describes (dense_layers, moe_layer_freq)."""
    if not isinstance(indices, list) or not indices or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers for i in indices):
        raise InputError(f"hf_config.{key}", indices, f"a non-empty list of layer indices below {layers} "
                         f"(model_type '{r.model_type}')", _where(r.where))
    first = indices[0]
    freq = indices[1] - first if len(indices) > 1 else layers - first
    if freq <= 0 or indices != list(range(first, layers, freq)):
        raise InputError(f"hf_config.{key}", indices, "MoE layers advisor can describe: from the first MoE layer "
                         f"on, every n-th one (model_type '{r.model_type}')", _where(r.where))
    return first, freq


def _deepseek(r: _Reader, kwargs: dict[str, Any]) -> None:
    """MLA and DeepSeekMoE keys (deepseek-ai/DeepSeek-V3 config.json; DeepseekV3Config), and DeepSeek
    Sparse Attention's indexer (DeepSeek-V3.2's index_n_heads, index_head_dim, index_topk)."""
    kwargs["mla"] = dict(      # pydantic builds the MLA
        q_lora_rank=r.optional(("q_lora_rank",)),          # null in DeepSeek-V2-Lite: q is not compressed
        kv_lora_rank=r.required(("kv_lora_rank",)),
        qk_nope_head_dim=r.required(("qk_nope_head_dim",)),
        qk_rope_head_dim=r.required(("qk_rope_head_dim",)),
        v_head_dim=r.required(("v_head_dim",)),
    )
    if r.model_type == "deepseek_v32":
        kwargs["dsa_indexer_heads"] = r.required(("index_n_heads",))
        kwargs["dsa_indexer_head_dim"] = r.required(("index_head_dim",))
        kwargs["dsa_topk"] = r.required(("index_topk",))
    _deepseek_moe(r, kwargs)


def _glm4_moe(r: _Reader, kwargs: dict[str, Any]) -> None:
    """Glm4MoeConfig (zai-org/GLM-4.5, GLM-4.6): GQA attention with a bias on q, k and v only
    (attention_bias; Glm4MoeAttention's o_proj has none), QK-norm when use_qk_norm, RoPE on
    partial_rotary_factor of each head, then DeepSeekMoE's keys: n_routed_experts of
    moe_intermediate_size, n_shared_experts, first_k_dense_replace dense layers, a sigmoid router with
    an expert-score correction bias (Glm4MoeTopkRouter), routed_scaling_factor, one MTP layer
    (num_nextn_predict_layers) (huggingface/transformers@c7ec229ad64cdcf0176f669969c66c9a652e7f38
    src/transformers/models/glm4_moe/configuration_glm4_moe.py: use_qk_norm default False)."""
    kwargs["qk_norm"] = r.flag("use_qk_norm", False)
    _deepseek_moe(r, kwargs, router=("sigmoid", True))


def _deepseek_moe(r: _Reader, kwargs: dict[str, Any], router: tuple[str, bool] | None = None) -> None:
    """DeepSeekMoE's keys (DeepseekV3Config, shared by Glm4MoeConfig and Kimi-K2's config): routed and
    shared experts, the leading dense layers, MTP modules, the router. `router`: (score function, expert
    bias) when the family fixes them instead of scoring_func / topk_method (GLM-4.5)."""
    experts = r.optional(("n_routed_experts",))
    if experts is None or experts <= 1:
        return                                               # a dense DeepSeek configuration
    kwargs["experts"] = experts
    kwargs["experts_per_token"] = r.required(("num_experts_per_tok",))
    kwargs["moe_ffn_hidden"] = r.required(("moe_intermediate_size",))
    kwargs["shared_experts"] = r.required(("n_shared_experts",), allow_zero=True)
    # Layer i is MoE when i >= first_k_dense_replace and i % moe_layer_freq == 0 (modeling_deepseek.py);
    # advisor counts every moe_layer_freq-th layer after the dense ones, the same set when the
    # frequency is 1 (DeepSeek-V2 and V3).
    kwargs["dense_layers"] = r.required(("first_k_dense_replace",), allow_zero=True)
    kwargs["moe_layer_freq"] = r.optional(("moe_layer_freq",)) or 1
    kwargs["mtp_layers"] = r.optional(("num_nextn_predict_layers",), allow_zero=True) or 0
    # Router (DeepseekV3Config scoring_func, topk_method, routed_scaling_factor): V3 scores with a
    # sigmoid and balances with a learned expert bias ("noaux_tc"); V2 uses softmax ("greedy").
    score = r.cfg.get("scoring_func", "softmax") if router is None else router[0]
    if score not in ("softmax", "sigmoid"):
        raise InputError("hf_config.scoring_func", score, f"'softmax' or 'sigmoid' (model_type '{r.model_type}')",
                         _where(r.where))
    kwargs["router_score"] = score
    kwargs["router_expert_bias"] = r.cfg.get("topk_method") == "noaux_tc" if router is None else router[1]
    scale = r.cfg.get("routed_scaling_factor")
    if scale is not None and scale != 1:
        kwargs["router_topk_scale"] = _positive(r, "routed_scaling_factor", scale)
    # Group-limited routing (DeepseekV3Config n_group / topk_group; DeepSeek-V2: device-limited)
    groups = r.optional(("n_group",))
    if groups and groups > 1:
        kwargs["router_groups"] = groups
        kwargs["router_group_topk"] = r.optional(("topk_group",))


def _qwen3_moe(r: _Reader, kwargs: dict[str, Any], layers: int) -> None:
    """Qwen3MoeConfig keys (Qwen/Qwen3-235B-A22B, Qwen/Qwen3-30B-A3B config.json)."""
    experts = r.required(("num_experts",), allow_zero=True)
    step = r.optional(("decoder_sparse_step",)) or 1
    mlp_only = r.cfg.get("mlp_only_layers")
    if mlp_only is None:
        mlp_only = []
    if not isinstance(mlp_only, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in mlp_only):
        raise InputError("hf_config.mlp_only_layers", mlp_only,
                         f"a list of layer indices (model_type '{r.model_type}')", _where(r.where))
    # Qwen3MoeDecoderLayer: a sparse block when the layer is not in mlp_only_layers, num_experts > 0
    # and (layer_idx + 1) % decoder_sparse_step == 0; otherwise a dense MLP of intermediate_size.
    dense_only = set(mlp_only)
    moe = [i for i in range(layers) if i not in dense_only and (i + 1) % step == 0] if experts else []
    if not moe:
        return                                               # no sparse layer: a dense model
    first = moe[0]
    freq = moe[1] - moe[0] if len(moe) > 1 else layers - first
    if moe != list(range(first, layers, freq)):
        raise InputError("hf_config.mlp_only_layers", mlp_only,
                         "MoE layers advisor can describe: from the first MoE layer on, every n-th one "
                         f"(model_type '{r.model_type}', decoder_sparse_step {step})",
                         "; ".join(filter(None, ["advisor.Model has dense_layers and moe_layer_freq only; "
                                                 "edit mlp_only_layers in a copy to the nearest such pattern",
                                                 _where(r.where)])))
    kwargs["experts"] = experts
    kwargs["experts_per_token"] = r.required(("num_experts_per_tok",))
    kwargs["moe_ffn_hidden"] = r.required(("moe_intermediate_size",))
    kwargs["dense_layers"] = first
    kwargs["moe_layer_freq"] = freq


def _positive(r: _Reader, key: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or v != v:
        raise InputError(f"hf_config.{key}", v, f"a positive number (model_type '{r.model_type}')", _where(r.where))
    return float(v)


def _where(where: str | None) -> str | None:
    return f"read from {where}" if where else None


class _Reader:
    """Typed look-ups in the config dict that fail with the key's name and the model_type."""

    def __init__(self, cfg: Mapping[str, Any], model_type: str, where: str | None):
        self.cfg, self.model_type, self.where = cfg, model_type, where

    def missing(self, keys: tuple[str, ...]) -> None:
        notes = [f"also accepted: {', '.join(keys[1:])}"] if len(keys) > 1 else []
        if self.where:
            notes.append(f"read from {self.where}")
        hint = "; ".join(notes) or None
        raise InputError(f"hf_config.{keys[0]}", None,
                         f"a positive integer (the key is missing for model_type '{self.model_type}')", hint)

    def value(self, key: str, v: Any, allow_zero: bool = False, most: int | None = None) -> int:
        """`v` as an int; `most`: its upper bound, checked here when work before advisor.Model's own
        bound check grows with the value (a loop over the layers)."""
        ok = isinstance(v, int) and not isinstance(v, bool) and (v > 0 or (allow_zero and v == 0))
        if not ok:
            want = "a non-negative integer" if allow_zero else "a positive integer"
            raise InputError(f"hf_config.{key}", v, f"{want} (model_type '{self.model_type}')", _where(self.where))
        if most is not None and v > most:
            raise InputError(f"hf_config.{key}", v, f"at most {most:,} (model_type '{self.model_type}')",
                             _where(self.where))
        return v

    def optional(self, keys: tuple[str, ...], allow_zero: bool = False, most: int | None = None) -> int | None:
        for k in keys:
            if self.cfg.get(k) is not None:
                return self.value(k, self.cfg[k], allow_zero, most)
        return None

    def required(self, keys: tuple[str, ...], allow_zero: bool = False, most: int | None = None) -> int:
        v = self.optional(keys, allow_zero, most)
        if v is None:
            self.missing(keys)
        return v  # type: ignore[return-value]

    def flag(self, key: str, default: bool) -> bool:
        v = self.cfg.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise InputError(f"hf_config.{key}", v, f"true or false (model_type '{self.model_type}')", _where(self.where))
        return v
