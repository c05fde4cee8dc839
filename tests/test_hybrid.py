"""Hybrid Mamba-2 / attention stacks (Model.hybrid_pattern): shapes, parameter counts against the
model cards and the released checkpoints, the HF reader, and refusals."""

from __future__ import annotations

import pytest

import advisor
from advisor import Model
from advisor.errors import InputError
from advisor.inputs.architecture import count_parameters

P8 = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"

# nvidia/Nemotron-H-8B-Base-8K config.json: the keys advisor reads (NemotronHConfig names)
NEMOTRON_H_8B = dict(model_type="nemotron_h", num_hidden_layers=52, hidden_size=4096, num_attention_heads=32,
                     num_key_value_heads=8, head_dim=128, intermediate_size=21504, vocab_size=131072,
                     hybrid_override_pattern=P8, mamba_num_heads=128, mamba_head_dim=64, ssm_state_size=128,
                     n_groups=8, conv_kernel=4, expand=2, chunk_size=128, use_conv_bias=True,
                     mamba_proj_bias=False, tie_word_embeddings=False, max_position_embeddings=8192,
                     mlp_hidden_act="relu2", attention_bias=False, mlp_bias=False)


def _mamba_by_hand(h, heads, head_dim, state, groups, conv):
    d_inner, gn = heads * head_dim, groups * state
    in_proj = h * (2 * d_inner + 2 * gn + heads)      # z, x, B, C, dt
    conv1d = (d_inner + 2 * gn) * (conv + 1)          # depthwise weight + bias over x, B, C
    return in_proj + conv1d + 3 * heads + d_inner + d_inner * h   # dt_bias, A_log, D; norm; out_proj


def test_counts_by_kind_and_by_hand():
    m = Model.preset("nemotron-h-8b")
    pc = count_parameters(m)
    assert (pc.mamba_layer_count, pc.attention_layer_count, pc.dense_layer_count, pc.moe_layer_count) == (24, 4, 24, 0)
    assert pc.mamba == _mamba_by_hand(4096, 128, 64, 128, 8, 4)
    # in_proj is 18,560 x 4,096 as in the checkpoint (backbone.layers.0.mixer.in_proj.weight)
    assert 2 * 8192 + 2 * 8 * 128 + 128 == 18560
    attention = 2 * 4096 * 4096 + 2 * 4096 * 1024
    mlp = 2 * 4096 * 21504
    by_hand = 24 * (pc.mamba + 4096) + 4 * (attention + 4096) + 24 * (mlp + 4096) + 2 * 131072 * 4096 + 4096
    assert pc.total == by_hand == m.params


def test_nemotron_h_8b_matches_its_checkpoint_and_card():
    # 8,100,852,736 is the sum of the released checkpoint's tensors; the card says "8B" (+1.3 %)
    total = Model.preset("nemotron-h-8b").params
    assert total == 8_100_852_736
    assert abs(total - 8e9) / 8e9 < 0.013


def test_nemotron_h_56b_within_one_percent_of_its_card():
    m = Model.preset("nemotron-h-56b")
    pc = count_parameters(m)
    assert (pc.mamba_layer_count, pc.attention_layer_count, pc.dense_layer_count) == (54, 10, 54)   # card
    assert abs(m.params - 56e9) / 56e9 < 0.01


def test_hf_config_reads_nemotron_h():
    m = Model.from_hf_config(NEMOTRON_H_8B)
    preset = Model.preset("nemotron-h-8b")
    assert m.params == preset.params and m.hybrid_pattern == P8 and m.activation == "gelu"
    listed = {k: v for k, v in NEMOTRON_H_8B.items() if k != "hybrid_override_pattern"}
    names = {"M": "mamba", "*": "attention", "-": "mlp"}
    listed["layers_block_type"] = [names[ch] for ch in P8]
    assert Model.from_hf_config(listed).params == preset.params


def test_hf_nemotron_h_refuses_what_it_does_not_count():
    with pytest.raises(InputError) as err:
        Model.from_hf_config({**NEMOTRON_H_8B, "mamba_proj_bias": True})
    assert err.value.field == "hf_config.mamba_proj_bias"
    with pytest.raises(InputError) as err:
        Model.from_hf_config({**NEMOTRON_H_8B, "hybrid_override_pattern": None})
    assert "hybrid_override_pattern" in str(err.value)


def _hybrid(**kw):
    base = dict(layers=4, hidden=256, heads=4, ffn_hidden=512, vocab=1000, hybrid_pattern="M*-M",
                mamba_heads=8, mamba_head_dim=64, mamba_state=16, mamba_groups=2)
    base.update(kw)
    return Model(**base)


@pytest.mark.parametrize("kw, field", [
    (dict(hybrid_pattern="M*-X"), "Model.hybrid_pattern"),
    (dict(hybrid_pattern="M*-"), "Model.hybrid_pattern"),
    (dict(hybrid_pattern="M*-E"), "Model.experts"),
    (dict(mamba_state=None), "Model.mamba_state"),
    (dict(mamba_groups=3), "Model.mamba_groups"),
    (dict(hybrid_pattern=None), "Model.hybrid_pattern"),
    (dict(sliding_window=128), "Model.sliding_window"),
])
def test_invalid_hybrid_shapes_name_the_field(kw, field):
    with pytest.raises(Exception) as err:
        _hybrid(**kw)
    assert field in str(err.value)


def test_a_stack_without_mamba_needs_no_mamba_sizes():
    m = _hybrid(hybrid_pattern="*-*-", mamba_heads=None, mamba_head_dim=None, mamba_state=None)
    plain = Model(layers=2, hidden=256, heads=4, ffn_hidden=512, vocab=1000, activation="swiglu")
    # "*-" pairs are attention + MLP layers with one norm each: the same weights as a plain layer
    assert m.params == plain.params


# ------------------------------------------------------------------------------------------- cost model

from hypothesis import given, settings, strategies as st  # noqa: E402

from advisor import Cluster, Layout, Training  # noqa: E402
from advisor.costmodel.activations import LayerActivations, MambaActivations  # noqa: E402

H100x8 = Cluster(gpu="H100-SXM-80GB", gpus=8)


def _acts(model, training, layout):
    return advisor.estimate(H100x8, model, layout, training).memory.detail["act_layers"]


def _pattern_with(n_attn: int, layers: int = 24) -> str:
    """layers/2 mixer layers (the first n_attn attention, the rest Mamba), each followed by an MLP."""
    mixers = "*" * n_attn + "M" * (layers // 2 - n_attn)
    return "".join(m + "-" for m in mixers)


def _small(pattern: str) -> Model:
    return Model(layers=len(pattern), hidden=1024, heads=8, kv_heads=8, ffn_hidden=4096, vocab=32000,
                 activation="gelu", hybrid_pattern=pattern, mamba_heads=32, mamba_head_dim=64, mamba_state=128)


@settings(max_examples=25, deadline=None)
@given(n_attn=st.integers(0, 11), tp=st.sampled_from([1, 2, 4, 8]))
def test_mamba_in_place_of_attention_stores_less_at_long_context(n_attn, tp):
    # at 32k without FlashAttention the attention scores (5 a s per token) dominate; a Mamba-2 layer
    # stores O(s) only, so each attention layer replaced by a Mamba layer lowers the activations
    training = Training(seq_len="32k", global_batch_size=8, flash_attention=False)
    layout = Layout(tp=tp, pp=1, dp=8 // tp, micro_batch_size=1, zero_stage=1, sp=tp > 1)
    more_attention = _acts(_small(_pattern_with(n_attn + 1)), training, layout)
    fewer = _acts(_small(_pattern_with(n_attn)), training, layout)
    assert fewer < more_attention


def test_with_flash_attention_both_kinds_are_linear_in_the_sequence():
    # with FlashAttention neither kind stores an s x s term: doubling s doubles both (a Mamba-2 mixer
    # of expand 2 then stores more per token than a GQA attention block, which the estimate says)
    kw = dict(b=1, h=4096, t=1, lin_bytes=2.0, dropout_masks=False)
    m32, m64 = (MambaActivations(s, d_inner=8192, gn=1024, nheads=128, **kw).bytes() for s in (32768, 65536))
    a32, a64 = (LayerActivations(s, a=32, flash=True, wq=4096, wk=1024, wv=1024, wo=4096, mlp=False, **kw).bytes()
                for s in (32768, 65536))
    assert m64 == 2 * m32 and a64 == 2 * a32 and m32 > a32


def test_hybrid_stage_sums_cover_the_whole_model():
    m = Model.preset("nemotron-h-8b")
    training = Training(seq_len=8192, global_batch_size=64)
    one = advisor.estimate(H100x8, m, Layout(tp=1, pp=1, dp=8, micro_batch_size=1, zero_stage=0), training)
    assert one.memory.detail["params_dense"] == m.params
    two = advisor.estimate(H100x8, m, Layout(tp=1, pp=2, dp=4, micro_batch_size=1, zero_stage=0), training)
    assert two.memory.detail["params_dense"] < m.params


def test_tp_must_divide_the_mamba_groups():
    m = _small("M-M-")
    m3 = m.model_copy(update={"mamba_groups": 4})
    report = advisor.audit(Cluster(gpu="H100-SXM-80GB", gpus=8), m3,
                           Layout(tp=8, pp=1, dp=1, micro_batch_size=1, zero_stage=1, sp=True),
                           Training(seq_len=4096, global_batch_size=8))
    assert "megatron.mamba-heads-groups" in {f.rule_id for f in report.findings}, report.findings


def test_recommend_nemotron_h_8b_on_8_h100_has_a_clean_audit():
    rec = advisor.recommend(H100x8, "nemotron-h-8b")
    assert rec.memory.fits
    report = advisor.audit(H100x8, "nemotron-h-8b", rec.layout, rec.training)
    assert not [f for f in report.findings if f.severity == "error"], report.findings
    assert rec.layout.framework in ("megatron", "deepspeed")


def test_frameworks_without_mamba_layers_are_refused():
    t = Training(seq_len=8192, global_batch_size=64)
    titan = advisor.audit(H100x8, "nemotron-h-8b", Layout(framework="torchtitan", tp=1, pp=1, dp=8,
                                                         micro_batch_size=1, zero_stage=3), t)
    assert "torchtitan.no-mamba-layers" in {f.rule_id for f in titan.findings}
    ds = advisor.audit(H100x8, "nemotron-h-8b", Layout(framework="deepspeed", tp=1, pp=1, dp=4, cp=2,
                                                      micro_batch_size=1, zero_stage=3), t)
    assert "deepspeed.mamba-layers-zero-dp-only" in {f.rule_id for f in ds.findings}
    mg = advisor.audit(H100x8, "nemotron-h-8b", Layout(framework="megatron", tp=2, pp=1, dp=2, cp=2,
                                                      micro_batch_size=1, zero_stage=1, sp=True), t)
    assert not [f for f in mg.findings if f.severity == "error"], mg.findings


def test_lora_on_a_hybrid_model_is_refused():
    with pytest.raises(InputError) as err:
        advisor.estimate(H100x8, "nemotron-h-8b", Layout(tp=1, pp=1, dp=8, micro_batch_size=1, zero_stage=1),
                         Training(seq_len=4096, global_batch_size=8, task="lora"))
    assert err.value.field == "Training.task"


def test_megatron_hybrid_refuses_virtual_stages_and_exports_the_mamba_stack():
    c16 = Cluster(gpu="H100-SXM-80GB", gpus=16)
    t = Training(seq_len=8192, global_batch_size=64)
    vpp = advisor.audit(c16, "nemotron-h-8b", Layout(framework="megatron", tp=2, pp=2, vpp=2, micro_batch_size=1,
                                                     zero_stage=1, sp=True), t)
    assert "megatron.hybrid-no-vpp" in {f.rule_id for f in vpp.findings}
    from advisor import export
    rec = advisor.recommend(Cluster(gpu="H100-SXM-80GB", gpus=64), "nemotron-h-56b")
    assert rec.layout.framework == "megatron" and rec.layout.vpp == 1
    cmd = export.megatron_command(rec.layout, rec.model, rec.training, rec.cluster)
    assert "pretrain_hybrid.py" in cmd and "--position-embedding-type none" in cmd    # main's entry point
    assert "pretrain_mamba.py" in export.megatron_command(rec.layout, rec.model, rec.training, rec.cluster,
                                                          version="core_v0.16.1")
    assert "--mamba-num-heads 256" in cmd and "mamba_stack_spec" in cmd
    assert rec.model.hybrid_pattern in cmd


def test_hybrid_pipeline_splits_megatron_cannot_say_are_refused():
    c16 = Cluster(gpu="H100-SXM-80GB", gpus=16)
    t = Training(seq_len=8192, global_batch_size=64)
    # 52 layers over pp 16: no even middle split exists, only --pipeline-model-parallel-layout could say it
    bad = advisor.audit(c16, "nemotron-h-8b", Layout(framework="megatron", tp=1, pp=16, dp=1,
                                                     micro_batch_size=1, zero_stage=1), t)
    assert "megatron.hybrid-no-pipeline-layout" in {f.rule_id for f in bad.findings}
    ok = advisor.audit(c16, "nemotron-h-8b", Layout(framework="megatron", tp=1, pp=8, dp=2,
                                                    micro_batch_size=1, zero_stage=1), t)
    assert "megatron.hybrid-no-pipeline-layout" not in {f.rule_id for f in ok.findings}


def test_hybrid_stages_get_their_own_kinds():
    # pp 2 of Nemotron-H 8B: the pattern's first and second halves, 26 layers each
    from advisor.costmodel.context import resolve
    m = Model.preset("nemotron-h-8b")
    c = resolve(H100x8, m, Layout(tp=1, pp=2, dp=4, micro_batch_size=1, zero_stage=1),
                Training(seq_len=8192, global_batch_size=64))
    assert c.hsplit == ((12, 2, 12, 0), (12, 2, 12, 0))
    assert [sum(k) for k in c.hsplit] == list(c.stages) == [26, 26]


# Nemotron 3 Nano 30B-A3B, a hybrid with MoE layers ("E"): the shape of Megatron-Bridge
# Nemotron3NanoProvider (nemotron_h_provider.py @ 160ccccbb49d8eb37d05197a9fd4c4390eb9f88e), in
# NemotronHConfig keys. Card: 31.6B total, 3.6B active including embeddings; 23 Mamba-2, 23 MoE, 6 GQA layers.
NEMOTRON_3_NANO = dict(model_type="nemotron_h", num_hidden_layers=52, hidden_size=2688, num_attention_heads=32,
                       num_key_value_heads=2, head_dim=128, intermediate_size=1856, vocab_size=131072,
                       hybrid_override_pattern="MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
                       mamba_num_heads=64, mamba_head_dim=64, ssm_state_size=128, n_groups=8, conv_kernel=4,
                       n_routed_experts=128, num_experts_per_tok=6, moe_intermediate_size=1856,
                       moe_shared_expert_intermediate_size=3712, tie_word_embeddings=False,
                       max_position_embeddings=262144)


def test_nemotron_3_nano_moe_hybrid_counts_and_estimate():
    m = Model.from_hf_config(NEMOTRON_3_NANO)
    pc = count_parameters(m)
    assert (pc.mamba_layer_count, pc.moe_layer_count, pc.attention_layer_count, pc.dense_layer_count) == (23, 23, 6, 0)
    assert abs(m.params - 31.6e9) / 31.6e9 < 0.01
    assert abs(pc.active - 3.6e9) / 3.6e9 < 0.01
    layout = Layout(tp=1, pp=1, dp=8, ep=8, micro_batch_size=1, zero_stage=1)
    est = advisor.estimate(H100x8, m, layout, Training(seq_len=8192, global_batch_size=64))
    d = est.memory.detail
    # every weight is on the rank once, the routed experts an eighth of them
    assert d["params_dense"] + 8 * d["params_expert"] == m.params
    assert est.comm.ep.bytes > 0
