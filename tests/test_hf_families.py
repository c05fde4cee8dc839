"""Today's model families from their Hugging Face config.json: shapes, parameter counts against the
model cards, attention windows, and refusals that never suggest a wrong mapping.

The dicts below hold the keys of the published config.json files (Hugging Face hub, as of 2025)
that advisor reads; keys it does not read are left out."""

from __future__ import annotations

import pytest

import advisor
from advisor import Cluster, Model
from advisor.errors import InputError


def _gpt_oss(layers: int, experts: int) -> dict:
    # openai/gpt-oss-120b, -20b config.json
    return dict(model_type="gpt_oss", num_hidden_layers=layers, hidden_size=2880, num_attention_heads=64,
                num_key_value_heads=8, head_dim=64, intermediate_size=2880, num_local_experts=experts,
                num_experts_per_tok=4, vocab_size=201088, sliding_window=128,
                layer_types=["sliding_attention", "full_attention"] * (layers // 2), max_position_embeddings=131072,
                rope_scaling={"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096},
                tie_word_embeddings=False, attention_bias=True)


CONFIGS = {
    "gpt-oss-120b": _gpt_oss(36, 128),
    "gpt-oss-20b": _gpt_oss(24, 32),
    # google/gemma-2-9b, gemma-2-27b
    "gemma-2-9b": dict(model_type="gemma2", num_hidden_layers=42, hidden_size=3584, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=256, intermediate_size=14336, vocab_size=256000,
                       sliding_window=4096, max_position_embeddings=8192),
    "gemma-2-27b": dict(model_type="gemma2", num_hidden_layers=46, hidden_size=4608, num_attention_heads=32,
                        num_key_value_heads=16, head_dim=128, intermediate_size=36864, vocab_size=256000,
                        sliding_window=4096, max_position_embeddings=8192),
    # google/gemma-3-27b-pt: the language model under text_config
    "gemma-3-27b": dict(model_type="gemma3", text_config=dict(
        model_type="gemma3_text", num_hidden_layers=62, hidden_size=5376, num_attention_heads=32, num_key_value_heads=16,
        head_dim=128, intermediate_size=21504, vocab_size=262208, sliding_window=1024, sliding_window_pattern=6,
        max_position_embeddings=131072, rope_scaling={"factor": 8.0, "rope_type": "linear"})),
    # microsoft/Phi-3-mini-4k-instruct, microsoft/phi-4
    "phi-3-mini": dict(model_type="phi3", num_hidden_layers=32, hidden_size=3072, num_attention_heads=32,
                       num_key_value_heads=32, intermediate_size=8192, vocab_size=32064, sliding_window=2047,
                       max_position_embeddings=4096, tie_word_embeddings=False),
    "phi-4": dict(model_type="phi3", num_hidden_layers=40, hidden_size=5120, num_attention_heads=40,
                  num_key_value_heads=10, intermediate_size=17920, vocab_size=100352, max_position_embeddings=16384,
                  tie_word_embeddings=False),
    # allenai/OLMo-2-1124-7B
    "olmo-2-7b": dict(model_type="olmo2", num_hidden_layers=32, hidden_size=4096, num_attention_heads=32,
                      num_key_value_heads=32, intermediate_size=11008, vocab_size=100352, max_position_embeddings=4096,
                      tie_word_embeddings=False),
    # mistralai/Mistral-Nemo-Base-2407
    "mistral-nemo": dict(model_type="mistral", num_hidden_layers=40, hidden_size=5120, num_attention_heads=32,
                         num_key_value_heads=8, head_dim=128, intermediate_size=14336, vocab_size=131072,
                         max_position_embeddings=1024000, sliding_window=None, tie_word_embeddings=False),
    # tiiuae/falcon-7b, falcon-40b
    "falcon-7b": dict(model_type="falcon", num_hidden_layers=32, hidden_size=4544, num_attention_heads=71,
                      multi_query=True, vocab_size=65024, max_position_embeddings=2048),
    "falcon-40b": dict(model_type="falcon", num_hidden_layers=60, hidden_size=8192, num_attention_heads=128,
                       num_kv_heads=8, new_decoder_architecture=True, vocab_size=65024, max_position_embeddings=2048),
    # meta-llama/Llama-4-Maverick-17B-128E: the language model under text_config
    "llama-4-maverick": dict(model_type="llama4", text_config=dict(
        model_type="llama4_text", num_hidden_layers=48, hidden_size=5120, num_attention_heads=40, num_key_value_heads=8,
        head_dim=128, intermediate_size=8192, intermediate_size_mlp=16384, num_local_experts=128, num_experts_per_tok=1,
        interleave_moe_layer_step=2, vocab_size=202048, attention_chunk_size=8192,
        no_rope_layers=[1, 1, 1, 0] * 12, max_position_embeddings=1048576,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192})),
}

# Total parameters as the model cards state them (billions) and the rounding they are stated to.
CARDS = {
    "gpt-oss-120b": 116.83,   # OpenAI gpt-oss model card (2025), Table 1: 116.83B total, 5.13B active
    "gpt-oss-20b": 20.91,     # same table: 20.91B total, 3.61B active
    "gemma-2-9b": 9.24,       # Gemma Team 2024, Gemma 2 report, Table 2 (9B: 9.24B; embeddings 917M)
    "gemma-2-27b": 27.2,      # same table (27B: 27.2B)
    "phi-3-mini": 3.8,        # Abdin et al. 2024, Phi-3 technical report §2: 3.8B
    "phi-4": 14.7,            # microsoft/phi-4 model card: 14.7B (the report's "14B")
    "olmo-2-7b": 7.3,         # OLMo 2 report (2024), Table 1: OLMo 2 7B, 7.3B parameters
    "llama-4-maverick": 400,  # Meta Llama 4 model card: 17B active, 400B total
}


def _model(key: str) -> Model:
    return Model.from_hf_config(CONFIGS[key], name=key)


@pytest.mark.parametrize("key", sorted(CARDS))
def test_parameter_counts_match_the_model_cards(key):
    assert _model(key).params / 1e9 == pytest.approx(CARDS[key], rel=0.01)


def test_gpt_oss_is_the_117b_moe_with_windows_and_sinks():
    m = _model("gpt-oss-120b")
    assert (m.experts, m.experts_per_token, m.head_dim, m.bias, m.attention_sinks) == (128, 4, 64, True, True)
    assert (m.sliding_window, m.global_attention_every, m.seq_len) == (128, 2, 4096)
    from advisor.inputs.architecture import count_parameters
    counts = count_parameters(m)
    # the card's 5.13B active parameters leave out the input embedding table (0.58B)
    assert (counts.active - counts.embedding) / 1e9 == pytest.approx(5.13, rel=0.01)


def test_llama4_interleaves_moe_with_dense_layers_and_chunks_attention():
    m = _model("llama-4-maverick")
    assert (m.dense_layers, m.moe_layer_freq, m.shared_experts, m.ffn_hidden, m.moe_ffn_hidden) == (1, 2, 1, 16384, 8192)
    assert (m.attention_chunk, m.global_attention_every, m.seq_len) == (8192, 4, 8192)


def test_windows_follow_each_family():
    assert (_model("gemma-2-9b").sliding_window, _model("gemma-2-9b").global_attention_every) == (4096, 2)
    g3 = _model("gemma-3-27b")
    assert (g3.sliding_window, g3.global_attention_every, g3.qk_norm) == (1024, 6, True)
    assert (_model("phi-3-mini").sliding_window, _model("phi-3-mini").global_attention_every) == (2047, 0)
    assert _model("phi-4").sliding_window is None


def test_falcon_reads_multi_query_and_grouped_attention():
    assert _model("falcon-7b").kv_heads == 1
    assert _model("falcon-40b").kv_heads == 8
    assert _model("falcon-40b").params == Model.preset("falcon-40b").params


def test_a_supported_length_is_not_the_pretraining_context():
    nemo = _model("mistral-nemo")
    assert nemo.max_position == 1_024_000 and nemo.seq_len is None and nemo.head_dim == 128
    rec = advisor.recommend(Cluster(gpu="H100-SXM-80GB", gpus=16), nemo)
    assert rec.training.seq_len == 4096
    notes = [e.message for e in rec.trace.events if e.op == "input"]
    assert any(n.startswith("training.seq_len not given: 4096 tokens") for n in notes), notes


@pytest.mark.parametrize("model_type", ["mamba", "mamba2"])
def test_hybrid_models_are_refused_with_what_is_missing_and_no_remapping(model_type):
    with pytest.raises(InputError) as err:
        Model.from_hf_config({"model_type": model_type, "num_hidden_layers": 4, "hidden_size": 64,
                              "num_attention_heads": 4, "vocab_size": 100, "intermediate_size": 128})
    hint = err.value.hint
    assert "not modelled yet" in hint and "model_type to" not in hint and "llama" not in hint


def test_an_unknown_family_gets_no_renaming_advice():
    with pytest.raises(InputError) as err:
        Model.from_hf_config({"model_type": "mystery", "num_hidden_layers": 4})
    assert "setting model_type" not in err.value.hint and "advisor.Model(" in err.value.hint


def test_windowed_attention_costs_less_at_long_context():
    full = _model("gemma-2-9b").model_copy(update={"sliding_window": None, "global_attention_every": 0})
    t = advisor.Training(seq_len=8192, global_batch_size=64)
    layout = advisor.Layout(tp=1, pp=1, dp=8, micro_batch_size=1, zero_stage=1, recompute="full")
    cluster = Cluster(gpu="H100-SXM-80GB", gpus=8)
    windowed = advisor.estimate(cluster, _model("gemma-2-9b"), layout, t).compute_time
    assert windowed < advisor.estimate(cluster, full, layout, t).compute_time


@pytest.mark.parametrize("key", ["gemma-3-27b", "phi-4", "olmo-2-7b", "mistral-nemo", "llama-4-maverick"])
def test_each_family_gets_an_answer_with_a_clean_audit(key):
    gpus = {"gpt-oss-120b": 64, "llama-4-maverick": 256}.get(key, 16)
    rec = advisor.recommend(Cluster(gpu="H100-SXM-80GB", gpus=gpus), _model(key))
    assert rec.layout is not None
    assert not [f for f in advisor.audit(Cluster(gpu="H100-SXM-80GB", gpus=gpus), _model(key), rec.layout,
                                         rec.training).findings if f.severity == "error"]
