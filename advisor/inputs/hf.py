"""Read a Hugging Face `config.json` into the fields of an `advisor.Model` (`Model.from_hf_config`
builds the model; this module imports nothing from `specs`, so the two stay one-way).

`model_from_hf_config(path_or_dict)` accepts a path to a `config.json` (or to a checkpoint folder
that holds one) or the already-parsed dict. `model_type` picks the architecture family, which
fixes what the config file leaves implicit (activation, norm, biases, position embedding, whether
the embeddings are tied when the file does not say). Supported `model_type`s:

| model_type               | family defaults                                                      |
|--------------------------|----------------------------------------------------------------------|
| llama, mistral, mixtral  | SwiGLU, RMSNorm, RoPE, no biases, untied                             |
| qwen2                    | as llama, plus a bias on the q/k/v projections                       |
| qwen3                    | as llama, head_dim 128 by default, QK-norm                           |
| qwen3_moe                | as qwen3, plus routed experts (no shared expert)                     |
| deepseek_v3, deepseek_v2 | as llama, plus MLA attention and DeepSeekMoE (shared experts)        |
| deepseek_v32             | as deepseek_v3, plus DeepSeek Sparse Attention's indexer (index_*)   |
| kimi_k2                  | as deepseek_v3 (Kimi-K2's config is DeepseekV3Config's)              |
| glm4_moe                 | GQA with q/k/v biases, QK-norm, partial RoPE, then DeepSeekMoE       |
| gpt_neox                 | GeLU, LayerNorm, RoPE, biases, untied                                |
| bloom                    | GeLU, LayerNorm, ALiBi, biases, tied                                 |
| gpt2                     | GeLU, LayerNorm, learned positions, biases, tied                     |
| gemma                    | GeGLU (gated: "swiglu"), RMSNorm, RoPE, no biases, tied              |
| smollm3                  | as llama, but tied                                                   |
| starcoder2               | GeLU, LayerNorm, RoPE, biases (use_bias), tied                       |
| nemotron                 | squared ReLU (ungated: "gelu"), LayerNorm1p, RoPE, no biases, untied |
| gpt_oss                  | MoE of gated experts, biases, sinks, alternating 128-token windows   |
| gemma2, gemma3(_text)    | as gemma, with sliding-window layers (Gemma 3: and QK-norm)          |
| phi3 (Phi-3, Phi-4)      | as llama (fused qkv / gate_up are the same matrices)                 |
| olmo2                    | as llama, plus QK-norm                                               |
| falcon                   | GeLU 4h MLP, LayerNorm, RoPE, no biases, tied; MQA or GQA            |
| llama4(_text)            | MoE interleaved with dense layers, shared expert, chunked attention  |
| nemotron_h               | hybrid Mamba-2 / attention / relu2-MLP (/ MoE, LatentMoE, MTP)       |
| qwen3_next               | Gated DeltaNet / gated attention mixers, each then MoE (by pattern)  |
| falcon_h1                | Mamba-2 and attention in parallel, then a SwiGLU MLP, in every layer |

`gemma3` and `llama4` (multimodal checkpoints) are read from their `text_config`. Empty or absent
fields take the config class's defaults, as transformers reads them (Llama 4's `"no_rope_layers": []`
is the default interleave, an absent attention_chunk_size is 8192), and transformers 5's
`rope_parameters` stands for `rope_theta` / `rope_scaling`. `nemotron_h`
is read into `Model.hybrid_pattern` and the `mamba_*` fields, `qwen3_next` into the pattern (its
48 layers as 96 characters, mixer then MoE) and the `gdn_*` fields, `falcon_h1` into "M*-" per layer
with `parallel_mixers`. The state-space models `mamba` and `mamba2` are refused with what is not modelled, never
mapped to another family. A `max_position_embeddings` beyond 65,536 with no RoPE-scaling original
length is a supported length, not the pretraining context (Mistral-Nemo: 1,024,000), so the model
states no `seq_len` and the training's default applies (its trace says so).

Key names and class defaults are those of the Hugging Face `transformers` configuration classes
(huggingface/transformers, src/transformers/models/<type>/configuration_<type>.py: LlamaConfig,
MistralConfig, MixtralConfig, Qwen2Config, Qwen3Config, Qwen3MoeConfig, DeepseekV3Config,
GPTNeoXConfig, BloomConfig, GPT2Config, GemmaConfig, SmolLM3Config, Starcoder2Config,
NemotronConfig) and of the published checkpoints' config.json files. The activation only matters
through the MLP's shape: a gated MLP (three matrices) is modelled as "swiglu", an ungated one (two
matrices) as "gelu", whatever the function (Gemma's GeGLU and Nemotron's squared ReLU change no
parameter count). Old aliases are
accepted: `n_layer`/`n_head`/`n_embd`/`n_embed`/`n_inner`/`n_positions` (GPT-2, BLOOM; BloomConfig
still accepts `n_embed` for `hidden_size`).

Qwen3 and Qwen3-MoE normalise each query and key head (q_norm, k_norm: an RMSNorm weight of
head_dim each per layer; `Model.qk_norm`), which the config file does not say: the family does.
In qwen3_moe, layer i is MoE when it is not in `mlp_only_layers` and (i + 1) % decoder_sparse_step
== 0 (modeling_qwen3_moe.py); the other layers use the dense intermediate_size MLP. That set is
read as `dense_layers` / `moe_layer_freq` (first MoE layer, then every moe_layer_freq-th one),
which covers every decoder_sparse_step; an `mlp_only_layers` list that breaks that pattern is
refused with an InputError.

A key the family needs that is missing raises `advisor.InputError` naming the key and the
model_type; so do a path that does not exist and a file that is not a JSON object.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import InputError
from .bounds import MAX_LAYERS

__all__ = ["model_fields_from_hf_config", "HFModelFields", "SUPPORTED_MODEL_TYPES"]


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

# Accepted spellings, first one is the name used in messages.
_LAYERS = ("num_hidden_layers", "n_layer", "num_layers")
_HIDDEN = ("hidden_size", "n_embd", "n_embed", "d_model")
_HEADS = ("num_attention_heads", "n_head")
_FFN = ("intermediate_size", "n_inner", "ffn_hidden_size")
_VOCAB = ("vocab_size",)
_MAX_POS = ("max_position_embeddings", "n_positions", "max_sequence_length")


@dataclass(frozen=True)
class HFModelFields:
    """The `advisor.Model` fields read from one config.json, and where they came from (for messages)."""

    fields: dict[str, Any]
    model_type: str
    where: str | None
    keys: frozenset[str] = frozenset()
    """The keys the config has: an error names one of them, or the Model field a derived value went to."""

    def input_error(self, e: ValidationError) -> InputError:
        """A shape advisor.Model refuses (e.g. hidden % heads), named by the Hugging Face key it was
        read from, or (a value derived from several keys, or a family default) by the Model field."""
        err = e.errors()[0]
        inner = (err.get("ctx") or {}).get("error")
        fieldname = str(err["loc"][0]) if err["loc"] else ""
        if isinstance(inner, InputError):
            if not fieldname:                      # the model's own check, across fields
                return inner
            err = {**err, "msg": inner.want + (f"; {inner.hint}" if inner.hint else "")}
        derived = _DERIVED.get((self.model_type, fieldname))
        names = _HF_KEY_BY_TYPE.get(self.model_type, {}).get(fieldname) or _HF_KEY.get(fieldname, fieldname)
        key = None if derived else next((k for k in ((names,) if isinstance(names, str) else names)
                                         if k in self.keys), None)
        if key is None:
            how = derived or _DERIVED.get(("*", fieldname), "a default of the family, not a key of the file")
            return InputError(f"Model.{fieldname}", err.get("input"),
                              f"{err['msg']} (model_type '{self.model_type}': {how})", _where(self.where))
        return InputError(f"hf_config.{key}", err.get("input"),
                          f"{err['msg']} (model_type '{self.model_type}')", _where(self.where))


def model_fields_from_hf_config(path_or_dict: str | os.PathLike[str] | Mapping[str, Any], *,
                                name: str | None = None) -> HFModelFields:
    """The `advisor.Model` fields of a Hugging Face config.json (a path, a folder holding one, or a dict).

    `name` overrides the model's name (default: the config's `_name_or_path`, else the checkpoint
    folder's name for a `config.json`, else the file's stem, else the model_type). The parameter
    count is computed from the architecture, never read from the file.
    """
    cfg, where = _load(path_or_dict)
    model_type = cfg.get("model_type")
    if model_type is None:
        raise InputError("hf_config.model_type", None, list(SUPPORTED_MODEL_TYPES),
                         f"the key is missing; {_where(where)}")
    if isinstance(model_type, str) and model_type in _TEXT_CONFIG:
        text = cfg.get("text_config")
        if not isinstance(text, Mapping):
            raise InputError("hf_config.text_config", text, f"the language model's config (model_type '{model_type}')",
                             _where(where))
        cfg = {**text, "model_type": _TEXT_CONFIG[model_type],
               "_name_or_path": cfg.get("_name_or_path") or text.get("_name_or_path")}
        model_type = cfg["model_type"]
    if isinstance(model_type, str) and model_type in _NOT_YET:
        raise InputError("hf_config.model_type", model_type, list(SUPPORTED_MODEL_TYPES),
                         f"{_NOT_YET[model_type]}; no other model_type describes it, so none is suggested")
    if not isinstance(model_type, str) or model_type not in _FAMILIES:
        raise InputError("hf_config.model_type", model_type, list(SUPPORTED_MODEL_TYPES),
                         "for another architecture, give its shape to advisor.Model(layers=..., hidden=..., "
                         "heads=..., kv_heads=..., ffn_hidden=..., vocab=..., experts=...) field by field; "
                         "renaming model_type would read the file with another family's rules")
    fam = _FAMILIES[model_type]
    r = _Reader(cfg, model_type, where)

    layers = r.required(_LAYERS, most=MAX_LAYERS)      # before _qwen3_moe lists the layers
    hidden = r.required(_HIDDEN)
    heads = r.required(_HEADS)
    vocab = r.required(_VOCAB)
    ffn = r.optional(_FFN)
    if ffn is None:
        if not fam.ffn_default_4h:
            r.missing(_FFN)
        ffn = 4 * hidden
    kv_heads = r.optional(("num_key_value_heads",)) or heads   # Llama 1 configs omit it (MHA)
    if model_type == "falcon":
        kv_heads = _falcon_kv_heads(r, heads)
    max_position = r.optional(_MAX_POS)

    kwargs: dict[str, Any] = dict(
        name=name or str(cfg.get("_name_or_path") or _name_from_path(where) or model_type),
        layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, ffn_hidden=ffn, vocab=vocab,
        activation=fam.activation, norm=fam.norm, position_embedding=fam.position_embedding,
        bias=fam.bias, qkv_bias=fam.qkv_bias, qk_norm=fam.qk_norm,
        tied_embeddings=r.flag("tie_word_embeddings", fam.tied_default),
        max_position=max_position, seq_len=_pretraining_context(cfg, max_position, r),
        source=_source(cfg, where),
    )
    if fam.position_embedding == "rope":
        kwargs.update(_rope(r))
    head_dim = r.optional(("head_dim",))
    if head_dim is None:
        head_dim = fam.head_dim_default
    if head_dim is not None and fam.moe != "deepseek":
        kwargs["head_dim"] = head_dim

    if model_type in _ATTENTION_MLP_BIAS:
        # LlamaConfig (and SmolLM3Config, NemotronConfig, GemmaConfig, Qwen3Config, Qwen3MoeConfig):
        # attention_bias covers q, k, v and o; mlp_bias the MLP (Gemma and Qwen3 have no mlp_bias).
        # advisor.Model knows "all linear layers" or "q/k/v only"; o_proj's bias (hidden per layer)
        # is dropped in the second case.
        attention_bias = r.flag("attention_bias", False)
        mlp_bias = r.flag("mlp_bias", False) if model_type not in _NO_MLP_BIAS else False
        if attention_bias and mlp_bias:
            kwargs["bias"] = True
        elif attention_bias:
            kwargs["qkv_bias"] = True
    elif model_type == "starcoder2":
        # Starcoder2Config.use_bias (default True): biases on q, k, v, o, c_fc and c_proj.
        kwargs["bias"] = r.flag("use_bias", True)

    _attention_window(r, kwargs, layers)
    if model_type == "gpt_oss":
        kwargs["attention_sinks"] = True
        kwargs["bias"] = r.flag("attention_bias", True)
    if fam.moe == "mixtral":
        kwargs["experts"] = r.required(("num_local_experts",))
        kwargs["experts_per_token"] = r.required(("num_experts_per_tok",))
    elif fam.moe == "llama4":
        _llama4(r, kwargs, layers)
    elif fam.moe == "deepseek":
        _deepseek(r, kwargs)
    elif fam.moe == "glm4_moe":
        _glm4_moe(r, kwargs)
    elif fam.moe == "qwen3":
        _qwen3_moe(r, kwargs, layers)
    elif fam.moe == "nemotron_h":
        _nemotron_h(r, kwargs, layers)
    elif fam.moe == "qwen3_next":
        _qwen3_next(r, kwargs, layers)
    elif fam.moe == "falcon_h1":
        _falcon_h1(r, kwargs, layers)

    return HFModelFields(kwargs, model_type, where, frozenset(k for k in cfg if isinstance(k, str)))


# Families whose config classes carry LlamaConfig's attention_bias / mlp_bias flags.
_ATTENTION_MLP_BIAS = ("llama", "mistral", "mixtral", "smollm3", "nemotron", "gemma", "qwen3", "qwen3_moe",
                       "qwen3_next", "glm4_moe")
# ... of which these have attention_bias only (no mlp_bias key).
_NO_MLP_BIAS = ("gemma", "qwen3", "qwen3_moe", "qwen3_next", "glm4_moe")

# advisor.Model field -> the Hugging Face key it came from, for messages.
_HF_KEY = {"layers": _LAYERS[0], "hidden": _HIDDEN[0], "heads": _HEADS[0], "kv_heads": "num_key_value_heads",
           "ffn_hidden": _FFN[0], "vocab": _VOCAB[0], "max_position": _MAX_POS[0], "experts": "n_routed_experts",
           "experts_per_token": "num_experts_per_tok", "moe_ffn_hidden": "moe_intermediate_size",
           "dense_layers": "first_k_dense_replace", "mtp_layers": "num_nextn_predict_layers",
           "hybrid_pattern": "hybrid_override_pattern", "mamba_heads": "mamba_num_heads",
           "mamba_state": "ssm_state_size", "mamba_groups": "n_groups", "mamba_conv": "conv_kernel",
           "gdn_key_heads": "linear_num_key_heads", "gdn_value_heads": "linear_num_value_heads",
           "name": "_name_or_path", "source": "_source", "seq_len": _MAX_POS, "rope_theta": "rope_theta",
           "mamba_head_dim": "mamba_head_dim", "mamba_chunk": ("chunk_size", "mamba_chunk_size"),
           "gdn_key_head_dim": "linear_key_head_dim", "gdn_value_head_dim": "linear_value_head_dim",
           "gdn_conv": "linear_conv_kernel_dim", "sliding_window": "sliding_window",
           "attention_chunk": "attention_chunk_size"}
# ... where a family spells the key otherwise (Falcon-H1's mamba_* keys, the MoE families' expert counts).
_HF_KEY_BY_TYPE: dict[str, dict[str, str | tuple[str, ...]]] = {
    "falcon_h1": {"mamba_heads": "mamba_n_heads", "mamba_head_dim": "mamba_d_head", "mamba_state": "mamba_d_state",
                  "mamba_groups": "mamba_n_groups", "mamba_conv": "mamba_d_conv", "mamba_chunk": "mamba_chunk_size"},
    "nemotron_h": {"mamba_groups": ("n_groups", "mamba_n_groups"), "mamba_conv": ("conv_kernel", "mamba_d_conv")},
    "qwen3_next": {"experts": "num_experts"},
    "qwen3_moe": {"experts": "num_experts"},
    "mixtral": {"experts": "num_local_experts"},
    "gpt_oss": {"experts": "num_local_experts"},
    "llama4_text": {"experts": "num_local_experts", "moe_ffn_hidden": "intermediate_size",
                    "ffn_hidden": ("intermediate_size_mlp", "intermediate_size")},
}
# Model fields a family computes from several keys: named as the field, with how it was derived.
_DERIVED: dict[tuple[str, str], str] = {
    ("falcon_h1", "layers"): "3 x num_hidden_layers, one per Mamba-2, attention and MLP block",
    ("falcon_h1", "hybrid_pattern"): "'M*-' per decoder layer",
    ("qwen3_next", "layers"): "2 x num_hidden_layers, one per mixer and MLP block",
    ("qwen3_next", "hybrid_pattern"): "from layer_types and mlp_only_layers",
    ("qwen3_next", "shared_experts"): "shared_expert_intermediate_size / moe_intermediate_size",
    ("nemotron_h", "shared_experts"): "moe_shared_expert_intermediate_size / moe_intermediate_size",
    ("qwen3_moe", "dense_layers"): "the first MoE layer by mlp_only_layers and decoder_sparse_step",
    ("qwen3_moe", "moe_layer_freq"): "the MoE layers' spacing by mlp_only_layers and decoder_sparse_step",
    ("llama4_text", "dense_layers"): "interleave_moe_layer_step - 1",
    ("llama4_text", "moe_layer_freq"): "interleave_moe_layer_step",
    ("*", "name"): "the checkpoint folder's or the file's name",
    ("*", "source"): "the path the file was read from",
}


# NemotronHConfig.layers_block_type names -> Model.hybrid_pattern characters (the config class's
# _list_to_pattern; "mamba" and "attention" are the legacy names it remaps).
_NEMOTRON_H_KINDS = {"linear_attention": "M", "mamba": "M", "full_attention": "*", "attention": "*",
                     "mlp": "-", "moe": "E"}


def _nemotron_h(r: "_Reader", kwargs: dict[str, Any], layers: int) -> None:
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


def _nemotron_h_mtp(r: "_Reader", kwargs: dict[str, Any], pattern: str) -> None:
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


# --- Qwen3-Next ------------------------------------------------------------------------------------

def _qwen3_next(r: "_Reader", kwargs: dict[str, Any], layers: int) -> None:
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


def _moe_sizes(r: "_Reader", kwargs: dict[str, Any], experts: int, shared_key: str) -> int:
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


# --- Falcon-H1 -------------------------------------------------------------------------------------

def _falcon_h1(r: "_Reader", kwargs: dict[str, Any], layers: int) -> None:
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


# --- attention windows, Falcon, Llama 4 ------------------------------------------------------------

def _attention_window(r: "_Reader", kwargs: dict[str, Any], layers: int) -> None:
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


def _every_from_types(r: "_Reader", types: Any, layers: int) -> int:
    if not isinstance(types, list) or len(types) != layers or not all(
            t in ("sliding_attention", "full_attention") for t in types):
        raise InputError("hf_config.layer_types", types, f"{layers} entries of 'sliding_attention' or "
                         f"'full_attention' (model_type '{r.model_type}')", _where(r.where))
    return _every_from_flags(r, [t == "full_attention" for t in types], layers, "layer_types", global_value=True)


def _every_from_flags(r: "_Reader", flags: Any, layers: int, key: str, global_value: Any, default: int = 0) -> int:
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


def _falcon_kv_heads(r: "_Reader", heads: int) -> int:
    """FalconConfig: num_kv_heads with new_decoder_architecture, one shared key/value head with
    multi_query (Falcon-7B), else multi-head attention."""
    if r.flag("new_decoder_architecture", False):
        return r.optional(("num_kv_heads",)) or heads
    return 1 if r.flag("multi_query", True) else heads


# Llama4TextConfig's defaults (huggingface/transformers@008e574391258935f3ecc3035c882e73bbcac419
# src/transformers/models/llama4/configuration_llama4.py): attention_chunk_size 8192 when the key is
# absent (an explicit null turns chunking off), no_rope_layer_interval 4.
_LLAMA4_CHUNK, _LLAMA4_NOPE_EVERY = 8192, 4


def _llama4_attention(r: "_Reader", kwargs: dict[str, Any], layers: int) -> None:
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


def _llama4(r: "_Reader", kwargs: dict[str, Any], layers: int) -> None:
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


def _every_nth(r: "_Reader", key: str, indices: Any, layers: int) -> tuple[int, int]:
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


# --- DeepSeek-V2/V3 ------------------------------------------------------------------------------

def _deepseek(r: "_Reader", kwargs: dict[str, Any]) -> None:
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


def _glm4_moe(r: "_Reader", kwargs: dict[str, Any]) -> None:
    """Glm4MoeConfig (zai-org/GLM-4.5, GLM-4.6): GQA attention with a bias on q, k and v only
    (attention_bias; Glm4MoeAttention's o_proj has none), QK-norm when use_qk_norm, RoPE on
    partial_rotary_factor of each head, then DeepSeekMoE's keys: n_routed_experts of
    moe_intermediate_size, n_shared_experts, first_k_dense_replace dense layers, a sigmoid router with
    an expert-score correction bias (Glm4MoeTopkRouter), routed_scaling_factor, one MTP layer
    (num_nextn_predict_layers) (huggingface/transformers@c7ec229ad64cdcf0176f669969c66c9a652e7f38
    src/transformers/models/glm4_moe/configuration_glm4_moe.py: use_qk_norm default False)."""
    kwargs["qk_norm"] = r.flag("use_qk_norm", False)
    _deepseek_moe(r, kwargs, router=("sigmoid", True))


def _deepseek_moe(r: "_Reader", kwargs: dict[str, Any], router: tuple[str, bool] | None = None) -> None:
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


# --- Qwen3-MoE -------------------------------------------------------------------------------------

def _qwen3_moe(r: "_Reader", kwargs: dict[str, Any], layers: int) -> None:
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


# --- helpers ---------------------------------------------------------------------------------------

_ROPE_SCALING = {k: k for k in ("llama3", "yarn", "linear", "dynamic", "longrope")}
"""HF rope_scaling.rope_type (older configs: "type") -> Model.rope_scaling (transformers
modeling_rope_utils.ROPE_INIT_FUNCTIONS names them); which framework can express each is the audit's
(megatron.rope-scaling-kind), not the reader's."""


def _positive(r: "_Reader", key: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or v != v:
        raise InputError(f"hf_config.{key}", v, f"a positive number (model_type '{r.model_type}')", _where(r.where))
    return float(v)


def _rope(r: "_Reader") -> dict[str, Any]:
    """rope_theta, partial_rotary_factor and rope_scaling: the RoPE base, the share of each head it
    rotates (Qwen3-Next 0.25, Phi-4-mini 0.75) and the frequency scaling the launch configs write."""
    out: dict[str, Any] = {}
    params = _rope_parameters(r.cfg)
    theta = r.cfg.get("rope_theta", params.get("rope_theta"))
    if theta is not None:
        out["rope_theta"] = _positive(r, "rope_theta", theta)
    rotary = r.cfg.get("partial_rotary_factor", params.get("partial_rotary_factor"))
    if rotary is not None:
        if isinstance(rotary, bool) or not isinstance(rotary, (int, float)) or not 0 < rotary <= 1:
            raise InputError("hf_config.partial_rotary_factor", rotary,
                             f"a number in (0, 1] (model_type '{r.model_type}')", _where(r.where))
        if rotary != 1:
            out["rotary_percent"] = float(rotary)
    scaling = _rope_scaling(r.cfg)
    if scaling is None:
        return out
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind in (None, "default"):
        return out
    if kind not in _ROPE_SCALING:
        raise InputError("hf_config.rope_scaling.rope_type", kind, sorted(_ROPE_SCALING),
                         f"or no rope_scaling at all; {_where(r.where)}")
    out["rope_scaling"] = _ROPE_SCALING[kind]
    out["rope_scaling_factor"] = _positive(r, "rope_scaling.factor", scaling.get("factor"))
    return out


def _rope_parameters(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """transformers 5's `rope_parameters` (rope_type, rope_theta, factor, ... in one dict, which configs
    it saves carry instead of rope_theta / rope_scaling: e.g. Llama4TextConfig.rope_parameters at
    huggingface/transformers@008e574391258935f3ecc3035c882e73bbcac419), the full-attention layers'
    entry when it is kept per layer type (Gemma 3), or an empty dict."""
    params = cfg.get("rope_parameters")
    if not isinstance(params, Mapping):
        return {}
    if "rope_type" not in params and isinstance(params.get("full_attention"), Mapping):
        return params["full_attention"]
    return params


def _rope_scaling(cfg: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The RoPE scaling dict: `rope_scaling`, else transformers 5's `rope_parameters`; None without one."""
    scaling = cfg.get("rope_scaling")
    if isinstance(scaling, Mapping):
        return scaling
    return _rope_parameters(cfg) or None


def _pretraining_context(cfg: Mapping[str, Any], max_position: int | None, r: "_Reader") -> int | None:
    """The context the model was pretrained at: RoPE scaling's original length when the config
    extends it (Llama 3.1: 8192 of 131072; DeepSeek-V3: 4096 of 163840), else max_position."""
    scaling = _rope_scaling(cfg)
    if scaling is not None and scaling.get("original_max_position_embeddings") is not None:
        return r.value("rope_scaling.original_max_position_embeddings",
                       scaling["original_max_position_embeddings"])
    if max_position is not None and max_position > LONGEST_STATED_CONTEXT:
        # a supported length, not a training context (Mistral-Nemo: 1,024,000): Training.seq_len
        # then falls back to its default, and the trace says so
        return None
    return max_position


# The longest max_position_embeddings taken as the pretraining context when the config gives no
# RoPE-scaling original: 65,536 (Qwen3 states 40,960, Qwen2.5 and Mistral 7B 32,768; the configs
# beyond it state extension limits: Gemma 3 131,072 through linear RoPE scaling, Mistral-Nemo
# 1,024,000).
LONGEST_STATED_CONTEXT = 65_536


def _source(cfg: Mapping[str, Any], where: str | None) -> str:
    parts = ["Hugging Face config.json"]
    if cfg.get("_source"):
        parts.append(str(cfg["_source"]))
    if where:
        parts.append(where)
    return "; ".join(parts)


def _where(where: str | None) -> str | None:
    return f"read from {where}" if where else None


def _name_from_path(where: str | None) -> str | None:
    if not where:
        return None
    path = Path(where)
    return path.parent.name if path.name == "config.json" and path.parent.name else path.stem


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


# A Hugging Face config.json is a few KiB; anything far larger is not one.
_MAX_CONFIG_BYTES = 4 * 2**20


def _load(path_or_dict: str | os.PathLike[str] | Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
    if isinstance(path_or_dict, Mapping):
        return path_or_dict, None
    if not isinstance(path_or_dict, (str, os.PathLike)):
        raise InputError("hf_config", type(path_or_dict).__name__, "a path to config.json or a dict")
    try:
        path = Path(path_or_dict)
        if path.is_dir():
            path = path / "config.json"
        is_file = path.is_file()
        size = path.stat().st_size if is_file else 0
    except (OSError, ValueError) as e:       # name too long, NUL byte, permission denied, ...
        raise InputError("hf_config", str(path_or_dict)[:200], "a path to config.json or its folder", str(e)) from None
    if not is_file:
        raise InputError("hf_config", str(path), "an existing config.json file (or a folder holding one)")
    if size > _MAX_CONFIG_BYTES:
        raise InputError("hf_config", str(path), f"a config.json of at most {_MAX_CONFIG_BYTES} bytes", f"{size} bytes")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError("hf_config", str(path), "a readable UTF-8 JSON file", str(e)) from None
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError("hf_config", str(path), "a JSON object",
                         f"not JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    except (ValueError, RecursionError) as e:   # an integer of over 4300 digits; arrays nested ~1000 deep
        raise InputError("hf_config", str(path), "a JSON object", f"not readable: {e}"[:200]) from None
    if not isinstance(cfg, dict):
        raise InputError("hf_config", str(path), "a JSON object", f"the file holds a {type(cfg).__name__}")
    return cfg, str(path)
