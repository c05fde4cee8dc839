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
from .hf_families import (
    _ATTENTION_MLP_BIAS, _FAMILIES, _NO_MLP_BIAS, _NOT_YET, _TEXT_CONFIG, SUPPORTED_MODEL_TYPES, _attention_window,
    _deepseek, _falcon_h1, _falcon_kv_heads, _glm4_moe, _llama4, _nemotron_h, _positive, _qwen3_moe, _qwen3_next,
    _Reader, _where,
)

__all__ = ["model_fields_from_hf_config", "HFModelFields", "SUPPORTED_MODEL_TYPES"]


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
    cfg, model_type = _language_model(cfg, where)
    fam = _FAMILIES[model_type]
    r = _Reader(cfg, model_type, where)
    kwargs = _common_fields(r, fam, name)
    if fam.position_embedding == "rope":
        kwargs.update(_rope(r))
    head_dim = r.optional(("head_dim",))
    if head_dim is None:
        head_dim = fam.head_dim_default
    if head_dim is not None and fam.moe != "deepseek":
        kwargs["head_dim"] = head_dim
    _bias_fields(r, kwargs)
    _attention_window(r, kwargs, kwargs["layers"])
    if model_type == "gpt_oss":
        kwargs["attention_sinks"] = True
        kwargs["bias"] = r.flag("attention_bias", True)
    _family_fields(r, kwargs, fam.moe)
    return HFModelFields(kwargs, model_type, where, frozenset(k for k in cfg if isinstance(k, str)))


def _language_model(cfg: Mapping[str, Any], where: str | None) -> tuple[Mapping[str, Any], str]:
    """The config of the language model (a multimodal checkpoint's text_config) and its model_type,
    one advisor reads; an InputError for a missing, unsupported or not-yet-modelled type."""
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
    return cfg, model_type


def _common_fields(r: _Reader, fam, name: str | None) -> dict[str, Any]:
    """The fields every family has: the shape, the family's defaults, the context and the source."""
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
    if r.model_type == "falcon":
        kv_heads = _falcon_kv_heads(r, heads)
    max_position = r.optional(_MAX_POS)
    return dict(
        name=name or str(r.cfg.get("_name_or_path") or _name_from_path(r.where) or r.model_type),
        layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, ffn_hidden=ffn, vocab=vocab,
        activation=fam.activation, norm=fam.norm, position_embedding=fam.position_embedding,
        bias=fam.bias, qkv_bias=fam.qkv_bias, qk_norm=fam.qk_norm,
        tied_embeddings=r.flag("tie_word_embeddings", fam.tied_default),
        max_position=max_position, seq_len=_pretraining_context(r.cfg, max_position, r),
        source=_source(r.cfg, r.where),
    )


def _bias_fields(r: _Reader, kwargs: dict[str, Any]) -> None:
    """The biases a family's config states in keys of its own."""
    if r.model_type in _ATTENTION_MLP_BIAS:
        # LlamaConfig (and SmolLM3Config, NemotronConfig, GemmaConfig, Qwen3Config, Qwen3MoeConfig):
        # attention_bias covers q, k, v and o; mlp_bias the MLP (Gemma and Qwen3 have no mlp_bias).
        # advisor.Model knows "all linear layers" or "q/k/v only"; o_proj's bias (hidden per layer)
        # is dropped in the second case.
        attention_bias = r.flag("attention_bias", False)
        mlp_bias = r.flag("mlp_bias", False) if r.model_type not in _NO_MLP_BIAS else False
        if attention_bias and mlp_bias:
            kwargs["bias"] = True
        elif attention_bias:
            kwargs["qkv_bias"] = True
    elif r.model_type == "starcoder2":
        # Starcoder2Config.use_bias (default True): biases on q, k, v, o, c_fc and c_proj.
        kwargs["bias"] = r.flag("use_bias", True)


def _family_fields(r: _Reader, kwargs: dict[str, Any], moe: str | None) -> None:
    """The experts and layer patterns of the families that have them (advisor.inputs.hf_families)."""
    layers = kwargs["layers"]
    if moe == "mixtral":
        kwargs["experts"] = r.required(("num_local_experts",))
        kwargs["experts_per_token"] = r.required(("num_experts_per_tok",))
    elif moe in ("deepseek", "glm4_moe"):
        (_deepseek if moe == "deepseek" else _glm4_moe)(r, kwargs)
    elif moe in _LAYERED_FAMILIES:
        _LAYERED_FAMILIES[moe](r, kwargs, layers)


# Families whose reader also takes the layer count (it lists or rewrites the layers).
_LAYERED_FAMILIES = {"llama4": _llama4, "qwen3": _qwen3_moe, "nemotron_h": _nemotron_h, "qwen3_next": _qwen3_next,
                     "falcon_h1": _falcon_h1}


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


# --- Qwen3-Next ------------------------------------------------------------------------------------


# --- Falcon-H1 -------------------------------------------------------------------------------------


# --- attention windows, Falcon, Llama 4 ------------------------------------------------------------


# --- DeepSeek-V2/V3 ------------------------------------------------------------------------------


# --- Qwen3-MoE -------------------------------------------------------------------------------------


# --- helpers ---------------------------------------------------------------------------------------

_ROPE_SCALING = {k: k for k in ("llama3", "yarn", "linear", "dynamic", "longrope")}
"""HF rope_scaling.rope_type (older configs: "type") -> Model.rope_scaling (transformers
modeling_rope_utils.ROPE_INIT_FUNCTIONS names them); which framework can express each is the audit's
(megatron.rope-scaling-kind), not the reader's."""


def _rope(r: _Reader) -> dict[str, Any]:
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


def _pretraining_context(cfg: Mapping[str, Any], max_position: int | None, r: _Reader) -> int | None:
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


def _name_from_path(where: str | None) -> str | None:
    if not where:
        return None
    path = Path(where)
    return path.parent.name if path.name == "config.json" and path.parent.name else path.stem


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
