"""Parameter counts: the presets against their published totals, and the formulas by hand."""

from __future__ import annotations

import pytest

import advisor
from advisor.inputs import presets
from advisor.inputs.architecture import count_parameters

WITH_PUBLISHED = [n for n in presets.model_names() if presets.published_params(n)]

# Totals a source states to the parameter (Hugging Face safetensors metadata / model card).
EXACT = {
    "llama-2-7b": 6_738_415_616,
    "llama-2-13b": 13_015_864_320,
    "llama-2-70b": 68_976_648_192,
    "llama-3-8b": 8_030_261_248,
    "llama-3-70b": 70_553_706_496,
    "llama-3.1-8b": 8_030_261_248,
    "llama-3.1-70b": 70_553_706_496,
    "llama-3.1-405b": 405_853_388_800,
    "mixtral-8x7b": 46_702_792_704,
    "mixtral-8x22b": 140_620_634_112,
    "qwen2.5-7b": 7_615_616_512,
    "qwen2.5-72b": 72_706_203_648,
    "bloom-176b": 176_247_271_424,
    "llama-7b": 6_738_415_616,          # LLaMA 1 7B: Llama 2 7B's shape at a 2k context
    "mistral-7b": 7_241_732_096,
    "gemma-7b": 8_537_680_896,
    "starcoder2-15b": 15_957_889_024,
    "smollm3-3b": 3_075_098_624,
    "qwen3-235b-a22b": 235_093_634_560,   # HF safetensors metadata / Keras-Hub qwen3_moe_235b_a22b_en
    "qwen3-30b-a3b": 30_532_122_624,      # Keras-Hub qwen3_moe_30b_a3b_en (the checkpoint's tensors)
}


def counts(name: str, **changes):
    spec = {**presets.model(name), **changes}
    return count_parameters(advisor.Model(**spec))


def test_every_preset_with_a_published_total_is_covered():
    assert len(WITH_PUBLISHED) >= 15
    assert set(EXACT) <= set(WITH_PUBLISHED)


@pytest.mark.parametrize("name", WITH_PUBLISHED)
def test_count_within_half_a_percent_of_published(name):
    published = presets.published_params(name)
    total = counts(name).total
    assert abs(total - published) <= 0.005 * published, (name, total, published)


@pytest.mark.parametrize("name", sorted(EXACT))
def test_count_matches_published_exactly(name):
    assert counts(name).total == EXACT[name]
    assert presets.published_params(name) == EXACT[name]


@pytest.mark.parametrize("name", ["qwen3-235b-a22b", "qwen3-30b-a3b"])
def test_qk_norm_adds_two_head_dim_weights_per_layer(name):
    m = advisor.Model.preset(name)
    assert m.qk_norm
    assert counts(name).total - counts(name, qk_norm=False).total == 2 * m.head_dim * m.layers   # q_norm + k_norm
    assert counts(name, norm="layernorm").total - counts(name, norm="layernorm", qk_norm=False).total \
        == 4 * m.head_dim * m.layers                                                          # + their biases


def test_qwen3_moe_totals_and_active():
    big, small = counts("qwen3-235b-a22b"), counts("qwen3-30b-a3b")
    assert big.total == 235_093_634_560 and small.total == 30_532_122_624
    assert big.moe_layer_count == 94 and big.dense_layer_count == 0        # every layer is MoE
    assert small.moe_layer_count == 48 and small.dense_layer_count == 0
    # Model cards: "235B in total and 22B activated", "Non-Embedding: 234B"; "30.5B in total and
    # 3.3B activated", "Non-Embedding: 29.9B" (3.3B is the 3.35B below, cut to one decimal).
    assert round(big.total / 1e9) == 235 and round(small.total / 1e8) == 305
    assert big.active == 22_190_763_520 and round(big.active / 1e9) == 22
    assert small.active == 3_353_032_704 and small.active == pytest.approx(3.3e9, rel=0.02)
    assert round((big.total - big.embedding - big.output) / 1e9) == 234
    assert round((small.total - small.embedding - small.output) / 1e8) == 299
    # Attention 64 x 128 = 8192 wide on hidden 4096, 4 KV heads; router 4096 x 128, no bias.
    assert big.attention == 2 * 4096 * 8192 + 2 * 4096 * 4 * 128
    assert big.expert == 3 * 4096 * 1536 and big.moe_mlp == 4096 * 128 + 128 * big.expert
    assert big.routed_experts == 94 * 128 * 3 * 4096 * 1536


def test_model_params_defaults_to_the_count():
    m = advisor.Model.preset("llama-3-70b")
    assert m.params == 70_553_706_496


def test_mixtral_active_parameters():
    c = counts("mixtral-8x7b")
    assert c.active == pytest.approx(12.9e9, rel=0.005)       # "12.9B active" (Mixtral paper / card)
    assert c.active == 12_879_925_248
    assert counts("mixtral-8x22b").active == pytest.approx(39e9, rel=0.005)   # "39B active"


def test_deepseek_v3_totals():
    c = counts("deepseek-v3")
    assert c.total == pytest.approx(671e9, rel=0.005)
    assert c.total == 671_026_404_352
    # README_WEIGHTS.md: MTP module 11.5B unique parameters; main model 36.6B activated
    # excluding the input embedding (the 0.9B output head is included).
    assert c.mtp == pytest.approx(11.5e9, rel=0.01)
    assert c.active - c.embedding == pytest.approx(36.6e9, rel=0.001)
    assert c.total + c.mtp == pytest.approx(685e9, rel=0.005)
    # The hub's 685B: BF16 3,918,786,560 + F8_E4M3 680,571,043,840 weights (the other 41,555,600
    # are F32 FP8 scales and router biases), i.e. MTP stores the embedding and head once more.
    assert c.checkpoint_total == 3_918_786_560 + 680_571_043_840
    assert c.checkpoint_total == pytest.approx(685e9, rel=0.001)
    assert c.moe_layer_count == 58 and c.dense_layer_count == 3


@pytest.mark.parametrize(("name", "hub_total"), [("falcon-40b", 41_835_970_560), ("falcon-180b", 179_522_565_120)])
def test_falcon_hub_files_store_the_tied_head_twice(name, hub_total):
    m = advisor.Model.preset(name)
    c = count_parameters(m)
    assert m.tied_embeddings and c.output == 0
    assert c.total + m.vocab * m.hidden == hub_total


def test_tied_embeddings_save_vocab_times_hidden():
    for name in ("llama-3-8b", "gpt-3-175b", "qwen2.5-7b"):
        m = advisor.Model.preset(name)
        tied, untied = counts(name, tied_embeddings=True), counts(name, tied_embeddings=False)
        assert untied.total - tied.total == m.vocab * m.hidden
        assert tied.output == 0 and untied.output == m.vocab * m.hidden


def test_gqa_has_fewer_attention_parameters_than_mha():
    m = advisor.Model.preset("llama-2-70b")              # 64 query heads, 8 KV heads, head_dim 128
    gqa, mha = counts("llama-2-70b"), counts("llama-2-70b", kv_heads=64)
    # K and V projections shrink from heads*head_dim to kv_heads*head_dim outputs each.
    assert mha.attention - gqa.attention == 2 * m.hidden * (64 - 8) * 128
    assert gqa.attention == 2 * 8192 * 8192 + 2 * 8192 * 8 * 128
    assert mha.total - gqa.total == m.layers * (mha.attention - gqa.attention)


def test_tiny_swiglu_gqa_model_by_hand():
    m = advisor.Model(layers=2, hidden=8, heads=2, kv_heads=1, ffn_hidden=16, vocab=10)
    c = count_parameters(m)
    # head_dim 4. Attention: q 8x8 + k 8x4 + v 8x4 + o 8x8 = 192. MLP: gate, up, down 3x8x16 = 384.
    # Norms: 2 RMSNorm x 8 = 16. Layer 592, two layers 1184; embedding 80, head 80, final norm 8.
    assert (c.attention, c.dense_mlp, c.norms, c.final_norm) == (192, 384, 16, 8)
    assert c.total == 1184 + 80 + 80 + 8 == 1352
    assert m.params == 1352


def test_tiny_gpt_style_model_by_hand():
    m = advisor.Model(layers=1, hidden=4, heads=2, ffn_hidden=16, vocab=10, activation="gelu",
                      tied_embeddings=True, position_embedding="learned", norm="layernorm",
                      bias=True, max_position=6)
    c = count_parameters(m)
    # Attention: 4 weight matrices 4x4 = 64 plus biases q, k, v, o 4 each = 16 -> 80.
    # MLP: 4x16 + 16x4 = 128 plus biases 16 + 4 -> 148. Two LayerNorms (weight + bias) 16.
    # Embedding 10x4 tokens + 6x4 positions = 64; head tied (0); final LayerNorm 8.
    assert (c.attention, c.dense_mlp, c.norms) == (80, 148, 16)
    assert c.embedding == 64 and c.output == 0
    assert c.total == 80 + 148 + 16 + 64 + 8 == 316
    # BLOOM's extra LayerNorm on the word embeddings adds one weight + bias pair.
    assert count_parameters(m.model_copy(update={"embedding_norm": True})).total == 316 + 8


def test_tiny_moe_model_by_hand():
    m = advisor.Model(layers=2, hidden=4, heads=1, ffn_hidden=8, vocab=5, experts=4, experts_per_token=2)
    c = count_parameters(m)
    # Attention 4 x (4x4) = 64; one expert 3x4x8 = 96; MoE MLP = router 4x4 + 4 experts = 400.
    assert (c.attention, c.expert, c.moe_mlp) == (64, 96, 400)
    assert c.total == 2 * (64 + 400 + 8) + 20 + 20 + 4 == 988
    assert c.active == 988 - 2 * (4 - 2) * 96 == 604
    assert c.routed_experts == 2 * 4 * 96


def test_only_learned_positions_add_a_table():
    rope = counts("llama-2-7b")                                # max_position 4096, RoPE
    assert rope.embedding == 32000 * 4096
    gpt3 = counts("gpt-3-175b")
    assert gpt3.embedding == (50257 + 2048) * 12288


def test_gemma_attention_is_wider_than_the_residual_stream():
    m = advisor.Model.preset("gemma-7b")
    c = counts("gemma-7b")
    assert m.heads * m.head_dim == 4096 != m.hidden              # head_dim 256 x 16 heads
    assert c.attention == 4 * 3072 * 4096                         # q, k, v, o, no GQA, no bias
    assert c.dense_mlp == 3 * 3072 * 24576                        # GeGLU: gate, up, down
    assert c.output == 0 and c.embedding == 256000 * 3072         # tied, 0.79B embedding


def test_starcoder2_biases_and_layernorms():
    c = counts("starcoder2-15b")
    h, kv_out = 6144, 4 * 128
    assert c.attention == 2 * h * h + 2 * h * kv_out + (h + 2 * kv_out + h)   # + q, k, v, o biases
    assert c.dense_mlp == 2 * h * 24576 + 24576 + h                          # c_fc, c_proj + biases
    assert c.norms == 2 * 2 * h and c.output == 49152 * h                    # untied head


def test_nemotron_4_340b_embedding_split():
    # Nemotron-4 340B report: 9.4 billion embedding and 331.6 billion non-embedding parameters.
    c = counts("nemotron-4-340b")
    embedding = c.embedding + c.output
    assert round(embedding / 1e8) == 94
    assert round((c.total - embedding) / 1e8) == 3316


@pytest.mark.parametrize(("name", "nominal", "total"), [
    ("gpt-3-5b", 5e9, 5_047_365_632), ("gpt-3-20b", 20e9, 20_256_221_184)])
def test_nemo_gpt3_presets_near_their_nominal_size(name, nominal, total):
    # NeMo's GPT3-5B / GPT3-20B are named by a nominal size only (no exact published total).
    assert presets.published_params(name) is None
    assert counts(name).total == total
    assert abs(total - nominal) <= 0.015 * nominal
