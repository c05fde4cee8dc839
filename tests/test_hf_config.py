"""Hugging Face config.json -> advisor.Model: families, aliases, parameter totals, errors."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

import advisor
from advisor import Model
from advisor.errors import UnknownPresetError
from advisor.inputs import presets
from advisor.inputs.architecture import count_parameters
from advisor.inputs.hf import SUPPORTED_MODEL_TYPES

model_from_hf_config = Model.from_hf_config

HF = Path(__file__).parent / "data" / "hf"

# Totals the checkpoints publish (Hugging Face safetensors metadata / model cards). DeepSeek-V3 is
# stated as 671B (main model; its one MTP module, 11.5B unique parameters per the DeepSeek-V3
# README_WEIGHTS.md, is counted apart), BLOOM-560m includes its embedding LayerNorm (2 x hidden),
# which advisor.Model does not represent.
PUBLISHED = {
    "llama-2-7b": 6_738_415_616,
    "llama-3-70b": 70_553_706_496,
    "llama-3.1-405b": 405_853_388_800,
    "mixtral-8x7b": 46_702_792_704,
    "qwen2.5-7b": 7_615_616_512,
    "gpt2": 124_439_808,
    "gpt-neox-20b": 20_554_567_680,
    "bloom-560m": 559_214_592,
    "gemma-7b": 8_537_680_896,
    "starcoder2-15b": 15_957_889_024,
    "smollm3-3b": 3_075_098_624,
}
# Qwen3 totals (HF safetensors metadata / Keras-Hub presets), QK-norm included (Model.qk_norm).
PUBLISHED_QWEN3 = {
    "qwen3-235b-a22b": 235_093_634_560,
    "qwen3-30b-a3b": 30_532_122_624,
    "qwen3-8b": 8_190_735_360,
}
FIXTURES = sorted(p.stem for p in HF.glob("*.json"))
# Fixtures of models the presets table carries (issue 6: "configs for the model presets round-trip").
PRESET_FIXTURES = ["llama-2-7b", "llama-3-70b", "llama-3.1-405b", "mixtral-8x7b", "qwen2.5-7b", "deepseek-v3",
                   "gemma-7b", "starcoder2-15b", "smollm3-3b", "nemotron-4-340b", "qwen3-235b-a22b",
                   "qwen3-30b-a3b"]


def _preset(name: str) -> advisor.Model | None:
    try:
        return advisor.Model.preset(name)
    except UnknownPresetError:
        return None


def test_every_fixture_names_its_source():
    assert set(FIXTURES) >= set(PRESET_FIXTURES)
    for name in FIXTURES:
        cfg = json.loads((HF / f"{name}.json").read_text())
        assert cfg["_source"].startswith("huggingface.co/"), name


@pytest.mark.parametrize("name", [n for n in FIXTURES if n in PUBLISHED and n != "bloom-560m"])
def test_parameter_total_matches_published(name):
    assert model_from_hf_config(HF / f"{name}.json").params == PUBLISHED[name]


@pytest.mark.parametrize("name", PRESET_FIXTURES)
def test_round_trips_to_the_preset(name):
    """config.json and the preset describe the same model: the same parameter count."""
    preset = _preset(name)
    if preset is None:
        pytest.skip(f"no preset named {name!r} (yet); the published total is checked instead")
    model = model_from_hf_config(HF / f"{name}.json")
    assert model.params == preset.params
    assert (model.layers, model.hidden, model.heads, model.kv_heads, model.vocab) == (
        preset.layers, preset.hidden, preset.heads, preset.kv_heads, preset.vocab)


def test_preset_published_totals_agree_with_fixtures():
    for name in FIXTURES:
        published = presets.published_params(name) if _preset(name) else None
        if published and name in PUBLISHED:
            assert published == PUBLISHED[name], name
        if published and name in PUBLISHED_QWEN3:
            assert published == PUBLISHED_QWEN3[name], name


@pytest.mark.parametrize("name", sorted(PUBLISHED_QWEN3))
def test_qwen3_total_matches_published(name):
    m = model_from_hf_config(HF / f"{name}.json")
    assert m.qk_norm
    assert m.params == PUBLISHED_QWEN3[name]


@pytest.mark.parametrize("name", ["qwen3-235b-a22b", "qwen3-30b-a3b"])
def test_qwen3_moe_config_is_the_preset(name):
    """Every architecture field of the config.json model equals the preset's. Only seq_len differs:
    config.json has no rope_scaling, so its context is max_position_embeddings (40960), while the
    preset states the 4,096-token pretraining stages; name and source say where each came from."""
    preset = advisor.Model.preset(name)
    m = model_from_hf_config(HF / f"{name}.json")
    assert m.name == name                                              # the fixture's file name
    assert (m.seq_len, m.max_position) == (40960, 40960)
    assert m.model_copy(update={"name": preset.name, "source": preset.source, "seq_len": preset.seq_len}) == preset


def test_qwen3_moe_family_defaults():
    m = model_from_hf_config(HF / "qwen3-235b-a22b.json")
    assert (m.activation, m.norm, m.position_embedding, m.bias, m.qkv_bias) == ("swiglu", "rmsnorm", "rope", False, False)
    assert (m.experts, m.experts_per_token, m.moe_ffn_hidden, m.ffn_hidden, m.shared_experts) == (128, 8, 1536, 12288, 0)
    assert (m.dense_layers, m.moe_layer_freq, m.head_dim, m.kv_heads) == (0, 1, 128, 4)
    assert not m.tied_embeddings and m.mla is None
    assert "Qwen/Qwen3-235B-A22B" in m.source
    cfg = json.loads((HF / "qwen3-235b-a22b.json").read_text())
    # Qwen3MoeConfig has no head_dim field: the modelling code falls back to hidden / heads.
    no_head_dim = {k: v for k, v in cfg.items() if k != "head_dim"}
    assert model_from_hf_config(no_head_dim).head_dim == 4096 // 64
    # attention_bias puts a bias on q, k, v and o (o's is dropped: advisor knows q/k/v only);
    # Qwen3 has no mlp_bias key, so one in the file is ignored.
    assert model_from_hf_config(dict(cfg, attention_bias=True)).qkv_bias
    assert not model_from_hf_config(dict(cfg, mlp_bias=True)).bias
    assert model_from_hf_config(dict(cfg, mlp_only_layers=None)).params == m.params
    # num_experts 0: every layer is the dense intermediate_size MLP.
    dense = model_from_hf_config(dict(cfg, num_experts=0))
    assert not dense.is_moe and dense.ffn_hidden == 12288


def test_qwen3_moe_sparse_step_and_mlp_only_layers():
    """modeling_qwen3_moe.py: layer i is MoE when i is not in mlp_only_layers and
    (i + 1) % decoder_sparse_step == 0; the others use the dense intermediate_size MLP."""
    cfg = json.loads((HF / "qwen3-30b-a3b.json").read_text())
    base = model_from_hf_config(cfg)
    c = count_parameters(base)
    every_other = model_from_hf_config(dict(cfg, decoder_sparse_step=2))          # layers 1, 3, ..., 47
    assert (every_other.dense_layers, every_other.moe_layer_freq) == (1, 2)
    e = count_parameters(every_other)
    assert (e.moe_layer_count, e.dense_layer_count) == (24, 24)
    assert e.total == c.total - 24 * (c.moe_mlp - c.dense_mlp)
    assert e.dense_mlp == 3 * 2048 * 6144
    leading = model_from_hf_config(dict(cfg, mlp_only_layers=[0, 1, 2]))
    assert (leading.dense_layers, leading.moe_layer_freq) == (3, 1)
    assert count_parameters(leading).moe_layer_count == 45
    last_only = model_from_hf_config(dict(cfg, mlp_only_layers=list(range(47))))
    assert count_parameters(last_only).moe_layer_count == 1 and last_only.dense_layers == 47
    with pytest.raises(advisor.InputError, match=r"hf_config\.mlp_only_layers") as e:
        model_from_hf_config(dict(cfg, mlp_only_layers=[10]))                     # a hole in the middle
    assert "model_type 'qwen3_moe'" in str(e.value)
    with pytest.raises(advisor.InputError, match=r"hf_config\.mlp_only_layers"):
        model_from_hf_config(dict(cfg, mlp_only_layers="0,1"))
    with pytest.raises(advisor.InputError, match=r"hf_config\.decoder_sparse_step"):
        model_from_hf_config(dict(cfg, decoder_sparse_step=0))


def test_qwen3_dense():
    """Qwen/Qwen3-8B: Llama-shaped, no QKV bias (unlike qwen2), explicit head_dim, untied."""
    m = model_from_hf_config(HF / "qwen3-8b.json")
    assert (m.activation, m.norm, m.bias, m.qkv_bias, m.tied_embeddings) == ("swiglu", "rmsnorm", False, False, False)
    assert (m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn_hidden) == (36, 4096, 32, 8, 128, 12288)
    assert not m.is_moe and (m.vocab, m.max_position) == (151936, 40960)
    cfg = json.loads((HF / "qwen3-8b.json").read_text())
    # Qwen3Config's head_dim defaults to 128 (Qwen3-32B: 64 heads x 128 on hidden 5120).
    qwen3_32b = {k: v for k, v in cfg.items() if k != "head_dim"}
    qwen3_32b.update(hidden_size=5120, num_attention_heads=64, intermediate_size=25600, num_hidden_layers=64)
    big = model_from_hf_config(qwen3_32b)
    assert big.head_dim == 128 and big.heads * big.head_dim == 8192 != big.hidden
    assert big.params == 32_762_123_264                                      # Keras-Hub qwen3_32b_en
    assert model_from_hf_config(dict(cfg, attention_bias=True)).qkv_bias


@pytest.mark.parametrize("key", ["num_experts", "num_experts_per_tok", "moe_intermediate_size", "intermediate_size",
                                 "num_key_value_heads"])
def test_qwen3_moe_missing_keys(key):
    cfg = json.loads((HF / "qwen3-235b-a22b.json").read_text())
    del cfg[key]
    if key == "num_key_value_heads":                           # MHA when omitted, as for every family
        assert model_from_hf_config(cfg).kv_heads == 64
        return
    with pytest.raises(advisor.InputError, match=rf"hf_config\.{key}") as e:
        model_from_hf_config(cfg)
    assert "missing for model_type 'qwen3_moe'" in str(e.value)


def test_deepseek_v3():
    m = model_from_hf_config(HF / "deepseek-v3.json")
    assert round(m.params / 1e9) == 671                      # "671B total parameters"
    assert (m.experts, m.experts_per_token, m.shared_experts) == (256, 8, 1)
    assert (m.moe_ffn_hidden, m.ffn_hidden, m.dense_layers, m.moe_layer_freq) == (2048, 18432, 3, 1)
    assert m.mla is not None and (m.mla.q_lora_rank, m.mla.kv_lora_rank) == (1536, 512)
    assert (m.mla.qk_nope_head_dim, m.mla.qk_rope_head_dim, m.mla.v_head_dim) == (128, 64, 128)
    assert m.mtp_layers == 1
    assert (m.seq_len, m.max_position) == (4096, 163840)     # YaRN extends a 4K pretraining context
    assert not m.tied_embeddings


def test_mixtral_and_qwen_family_defaults():
    mix = model_from_hf_config(HF / "mixtral-8x7b.json")
    assert (mix.experts, mix.experts_per_token, mix.moe_ffn_hidden) == (8, 2, 14336)
    qwen = model_from_hf_config(HF / "qwen2.5-7b.json")
    assert qwen.qkv_bias and not qwen.bias and qwen.activation == "swiglu" and qwen.norm == "rmsnorm"


def test_llama_3_1_context_is_the_original_one():
    m = model_from_hf_config(HF / "llama-3.1-405b.json")
    assert (m.seq_len, m.max_position) == (8192, 131072)


def test_gpt2_bloom_neox_style_keys():
    gpt2 = model_from_hf_config(HF / "gpt2.json")
    assert (gpt2.layers, gpt2.hidden, gpt2.heads, gpt2.ffn_hidden) == (12, 768, 12, 3072)   # n_inner null -> 4h
    assert gpt2.position_embedding == "learned" and gpt2.tied_embeddings and gpt2.bias
    assert gpt2.max_position == 1024
    bloom = model_from_hf_config(HF / "bloom-560m.json")
    assert (bloom.layers, bloom.heads, bloom.position_embedding, bloom.norm) == (24, 16, "alibi", "layernorm")
    assert bloom.tied_embeddings                              # BloomConfig ties by default
    assert PUBLISHED["bloom-560m"] - bloom.params == 2 * bloom.hidden   # the embedding LayerNorm
    neox = model_from_hf_config(HF / "gpt-neox-20b.json")
    assert (neox.activation, neox.norm, neox.bias, neox.tied_embeddings) == ("gelu", "layernorm", True, False)


def test_gemma_geglu_head_dim_and_tied_default():
    """google/gemma-7b: GeGLU is a gated MLP (three matrices), modelled as "swiglu" like the preset."""
    m = model_from_hf_config(HF / "gemma-7b.json")
    assert (m.activation, m.norm, m.position_embedding, m.bias, m.qkv_bias) == ("swiglu", "rmsnorm", "rope", False, False)
    assert m.head_dim == 256 and m.heads * m.head_dim == 4096 != m.hidden     # attention wider than hidden
    assert m.tied_embeddings                                  # the file has no tie_word_embeddings: GemmaConfig ties
    preset = advisor.Model.preset("gemma-7b")
    assert (m.head_dim, m.ffn_hidden, m.activation, m.tied_embeddings, m.max_position) == (
        preset.head_dim, preset.ffn_hidden, preset.activation, preset.tied_embeddings, preset.max_position)
    cfg = json.loads((HF / "gemma-7b.json").read_text())
    untied = model_from_hf_config(dict(cfg, tie_word_embeddings=False))
    assert untied.params - m.params == m.vocab * m.hidden
    assert model_from_hf_config(dict(cfg, attention_bias=True)).qkv_bias


def test_starcoder2_biases_layernorm_and_untied_file():
    """bigcode/starcoder2-15b: ungated GeLU MLP, LayerNorm, use_bias, and the file unties the head."""
    m = model_from_hf_config(HF / "starcoder2-15b.json")
    assert (m.activation, m.norm, m.position_embedding, m.bias) == ("gelu", "layernorm", "rope", True)
    assert (m.kv_heads, m.ffn_hidden, m.max_position) == (4, 24576, 16384)
    assert not m.tied_embeddings                              # tie_word_embeddings: false in the file
    cfg = json.loads((HF / "starcoder2-15b.json").read_text())
    del cfg["tie_word_embeddings"]
    assert model_from_hf_config(cfg).tied_embeddings          # Starcoder2Config's default is True
    no_bias = model_from_hf_config(dict(cfg, use_bias=False))
    assert not no_bias.bias and no_bias.params < model_from_hf_config(cfg).params


def test_smollm3_is_tied_llama():
    """HuggingFaceTB/SmolLM3-3B: Llama-shaped, GQA 16/4, tied; NoPE layers add no parameter."""
    m = model_from_hf_config(HF / "smollm3-3b.json")
    assert (m.activation, m.norm, m.bias, m.qkv_bias, m.tied_embeddings) == ("swiglu", "rmsnorm", False, False, True)
    assert (m.layers, m.heads, m.kv_heads, m.head_dim, m.max_position) == (36, 16, 4, 128, 65536)
    cfg = json.loads((HF / "smollm3-3b.json").read_text())
    assert model_from_hf_config(dict(cfg, attention_bias=True, mlp_bias=True)).bias


def test_nemotron_squared_relu_layernorm1p():
    """Nemotron-4 340B (NemotronConfig): squared ReLU is ungated (two matrices), modelled as "gelu"
    like the preset; LayerNorm1p has weight and bias; no linear biases; untied."""
    m = model_from_hf_config(HF / "nemotron-4-340b.json")
    assert (m.activation, m.norm, m.position_embedding, m.bias, m.qkv_bias) == ("gelu", "layernorm", "rope", False, False)
    assert (m.heads, m.kv_heads, m.head_dim, m.ffn_hidden) == (96, 8, 192, 73728)
    assert not m.tied_embeddings and m.seq_len == m.max_position == 4096
    assert round(m.params / 1e9, 1) == 341.0                  # "9.4B embedding + 331.6B non-embedding"
    cfg = json.loads((HF / "nemotron-4-340b.json").read_text())
    del cfg["num_key_value_heads"]
    assert model_from_hf_config(cfg).kv_heads == 96           # NemotronConfig: None means MHA
    assert model_from_hf_config(dict(cfg, attention_bias=True, mlp_bias=True)).bias
    assert model_from_hf_config(dict(cfg, head_dim=128)).head_dim == 128    # Minitron-style head_dim


def test_bloom_old_n_embed_alias():
    cfg = json.loads((HF / "bloom-560m.json").read_text())
    cfg["n_embed"] = cfg.pop("hidden_size")
    assert model_from_hf_config(cfg).params == model_from_hf_config(HF / "bloom-560m.json").params


def test_llama_1_without_kv_heads_is_mha():
    cfg = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32,
           "num_hidden_layers": 32, "vocab_size": 32000, "max_position_embeddings": 2048}
    m = model_from_hf_config(cfg, name="llama-7b")
    assert m.kv_heads == 32 and m.name == "llama-7b"
    assert m.params == PUBLISHED["llama-2-7b"]                # LLaMA 1 7B has Llama 2 7B's shape


def test_mistral_7b_and_llama_1_configs_match_their_presets():
    # mistralai/Mistral-7B-v0.1 and huggyllama/llama-7b config.json (the keys advisor reads).
    mistral = {"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
               "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 32000,
               "max_position_embeddings": 32768, "sliding_window": 4096, "tie_word_embeddings": False}
    llama = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32,
             "num_hidden_layers": 32, "vocab_size": 32000, "max_position_embeddings": 2048,
             "tie_word_embeddings": False}
    for cfg, name in ((mistral, "mistral-7b"), (llama, "llama-7b")):
        model, preset = model_from_hf_config(cfg), advisor.Model.preset(name)
        assert model.params == preset.params == presets.published_params(name)
        assert (model.layers, model.hidden, model.heads, model.kv_heads, model.vocab, model.max_position) == (
            preset.layers, preset.hidden, preset.heads, preset.kv_heads, preset.vocab, preset.max_position)


def test_mistral_head_dim_and_attention_bias():
    cfg = {"model_type": "mistral", "hidden_size": 5120, "intermediate_size": 14336, "num_attention_heads": 32,
           "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 40, "vocab_size": 131072}
    m = model_from_hf_config(cfg)                             # Mistral-Nemo: head_dim * heads != hidden
    assert m.head_dim == 128
    llama = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
             "num_hidden_layers": 2, "vocab_size": 100, "attention_bias": True}
    assert model_from_hf_config(llama).qkv_bias
    assert model_from_hf_config(dict(llama, mlp_bias=True)).bias


def test_directory_holding_config_json(tmp_path):
    folder = tmp_path / "Llama-2-7b-hf"
    folder.mkdir()
    (folder / "config.json").write_text((HF / "llama-2-7b.json").read_text())
    m = model_from_hf_config(folder)
    assert m.params == PUBLISHED["llama-2-7b"] and m.name == "Llama-2-7b-hf"
    assert str(folder) in model_from_hf_config(str(folder)).source
    assert "meta-llama/Llama-2-7b-hf" in m.source                # the fixture's _source travels along
    assert model_from_hf_config(HF / "gpt2.json").name == "gpt2"
    assert model_from_hf_config({"_name_or_path": "org/x", **json.loads((HF / "gpt2.json").read_text())}).name == "org/x"


def test_deepseek_without_q_compression():
    cfg = json.loads((HF / "deepseek-v3.json").read_text())
    cfg.update(model_type="deepseek_v2", q_lora_rank=None)     # DeepSeek-V2-Lite style
    m = model_from_hf_config(cfg)
    assert m.mla is not None and m.mla.q_lora_rank is None
    assert m.params > model_from_hf_config(HF / "deepseek-v3.json").params   # a full-rank q projection


# --- errors -----------------------------------------------------------------------------------

def test_missing_key_names_key_and_model_type():
    cfg = json.loads((HF / "llama-3-70b.json").read_text())
    del cfg["num_attention_heads"]
    with pytest.raises(advisor.InputError, match=r"hf_config\.num_attention_heads") as e:
        model_from_hf_config(cfg)
    assert "missing for model_type 'llama'" in str(e.value)
    assert e.value.field == "hf_config.num_attention_heads"
    assert pickle.loads(pickle.dumps(e.value)).field == e.value.field


@pytest.mark.parametrize("key", ["n_routed_experts", "kv_lora_rank", "moe_intermediate_size", "first_k_dense_replace"])
def test_deepseek_missing_keys(key):
    cfg = json.loads((HF / "deepseek-v3.json").read_text())
    del cfg[key]
    if key == "n_routed_experts":                              # no routed experts: a dense DeepSeek
        assert not model_from_hf_config(cfg).is_moe
        return
    with pytest.raises(advisor.InputError, match=rf"hf_config\.{key}: .*\n.*\n.*missing for model_type 'deepseek_v3'"):
        model_from_hf_config(cfg)


@pytest.mark.parametrize("fixture,model_type,key", [
    ("gemma-7b", "gemma", "intermediate_size"),
    ("gemma-7b", "gemma", "num_hidden_layers"),
    ("starcoder2-15b", "starcoder2", "intermediate_size"),
    ("starcoder2-15b", "starcoder2", "vocab_size"),
    ("smollm3-3b", "smollm3", "num_attention_heads"),
    ("smollm3-3b", "smollm3", "hidden_size"),
    ("nemotron-4-340b", "nemotron", "intermediate_size"),
    ("nemotron-4-340b", "nemotron", "num_hidden_layers"),
])
def test_new_families_missing_keys(fixture, model_type, key):
    cfg = json.loads((HF / f"{fixture}.json").read_text())
    del cfg[key]
    with pytest.raises(advisor.InputError, match=rf"hf_config\.{key}") as e:
        model_from_hf_config(cfg)
    assert e.value.field == f"hf_config.{key}"
    assert f"missing for model_type '{model_type}'" in str(e.value)


def test_new_families_reject_non_boolean_flags():
    cfg = json.loads((HF / "starcoder2-15b.json").read_text())
    with pytest.raises(advisor.InputError, match=r"hf_config\.use_bias"):
        model_from_hf_config(dict(cfg, use_bias="yes"))


def test_mixtral_missing_experts():
    cfg = json.loads((HF / "mixtral-8x7b.json").read_text())
    del cfg["num_local_experts"]
    with pytest.raises(advisor.InputError, match=r"hf_config\.num_local_experts"):
        model_from_hf_config(cfg)


def test_gpt2_missing_width_names_all_aliases():
    cfg = json.loads((HF / "gpt2.json").read_text())
    del cfg["n_embd"]
    with pytest.raises(advisor.InputError, match=r"hf_config\.hidden_size") as e:
        model_from_hf_config(cfg)
    assert "n_embd" in str(e.value) and "model_type 'gpt2'" in str(e.value)


def test_unknown_and_missing_model_type():
    with pytest.raises(advisor.InputError, match=r"hf_config\.model_type") as e:
        model_from_hf_config({"model_type": "t5", "d_model": 512})
    assert "llama" in str(e.value)
    with pytest.raises(advisor.InputError, match=r"hf_config\.model_type"):
        model_from_hf_config({"hidden_size": 64})
    with pytest.raises(advisor.InputError, match=r"hf_config\.model_type"):
        model_from_hf_config({"model_type": ["llama"]})
    assert set(SUPPORTED_MODEL_TYPES) >= {"llama", "mistral", "mixtral", "qwen2", "deepseek_v3", "gpt_neox",
                                          "bloom", "gpt2", "gemma", "starcoder2", "smollm3", "nemotron",
                                          "qwen3", "qwen3_moe"}


@pytest.mark.parametrize("bad", ["64", 64.0, True, -1, 0])
def test_non_integer_values_are_rejected(bad):
    cfg = {"model_type": "llama", "hidden_size": bad, "intermediate_size": 128, "num_attention_heads": 4,
           "num_hidden_layers": 2, "vocab_size": 100}
    with pytest.raises(advisor.InputError, match=r"hf_config\.hidden_size"):
        model_from_hf_config(cfg)


def test_tie_word_embeddings_must_be_boolean():
    cfg = json.loads((HF / "llama-2-7b.json").read_text())
    cfg["tie_word_embeddings"] = "no"
    with pytest.raises(advisor.InputError, match=r"hf_config\.tie_word_embeddings"):
        model_from_hf_config(cfg)


def test_missing_path(tmp_path):
    with pytest.raises(advisor.InputError, match=r"hf_config: .*\n.*nope\.json"):
        model_from_hf_config(tmp_path / "nope.json")
    with pytest.raises(advisor.InputError, match="existing config.json"):
        model_from_hf_config(tmp_path)                         # a folder without config.json


def test_not_json_and_not_an_object(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{'model_type': 'llama',}")
    with pytest.raises(advisor.InputError, match="not JSON: .* line 1"):
        model_from_hf_config(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(advisor.InputError, match="holds a list"):
        model_from_hf_config(bad)
    bad.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(advisor.InputError, match="UTF-8"):
        model_from_hf_config(bad)


def test_shapes_advisor_refuses_are_input_errors():
    base = {"model_type": "llama", "hidden_size": 65, "intermediate_size": 128, "num_attention_heads": 2,
            "num_hidden_layers": 2, "vocab_size": 100}
    with pytest.raises(advisor.InputError, match=r"Model\.hidden"):
        model_from_hf_config(base)                             # hidden % heads != 0 (Megatron M7)
    with pytest.raises(advisor.InputError, match=r"hf_config\.num_hidden_layers[\s\S]*model_type 'llama'"):
        model_from_hf_config(dict(base, hidden_size=64, num_hidden_layers=10**6))


def test_wrong_argument_type():
    with pytest.raises(advisor.InputError, match="a path to config.json or a dict"):
        model_from_hf_config(42)  # type: ignore[arg-type]
