"""Qwen3-Next (Gated DeltaNet + gated attention, each followed by an MoE block) from its Hugging Face
config.json: the parameter count against the model card, the layer pattern, what each framework
can run, and the linear mixer's cost against softmax attention."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import advisor
from advisor import Cluster, Model, Training
from advisor.errors import InputError
from advisor.inputs.architecture import count_parameters

CONFIG = Path(__file__).parent / "data" / "hf" / "qwen3-next-80b-a3b-instruct.json"
H100 = "H100-SXM-80GB"


def _model() -> Model:
    return Model.from_hf_config(CONFIG)


def test_qwen3_next_80b_is_80b_total_and_3b_active_as_its_card_states():
    m = _model()
    assert m.params / 1e9 == pytest.approx(80, rel=0.01)          # model card: 80B total
    pc = count_parameters(m)
    # model card: 3B activated; the count includes the 0.62B embedding and output head
    assert (pc.active - pc.embedding - pc.output) / 1e9 == pytest.approx(3.2, rel=0.05)


def test_the_pattern_is_twelve_times_three_deltanet_then_one_attention_each_before_moe():
    m = _model()
    assert m.layers == 96 and m.hybrid_pattern == "GEGEGE*E" * 12
    assert (m.gdn_key_heads, m.gdn_value_heads, m.gdn_key_head_dim, m.gdn_value_head_dim) == (16, 32, 128, 128)
    assert (m.heads, m.kv_heads, m.head_dim, m.attention_output_gate) == (16, 2, 256, True)
    assert (m.experts, m.experts_per_token, m.shared_experts, m.moe_ffn_hidden) == (512, 10, 1, 512)
    assert m == Model.preset("qwen3-next-80b-a3b").model_copy(update={"name": m.name, "source": m.source,
                                                                      "seq_len": None})


def test_one_gated_deltanet_mixer_has_the_tensors_transformers_builds():
    pc = count_parameters(_model())
    h, k_dim, v_dim, v_heads = 2048, 16 * 128, 32 * 128, 32
    # in_proj_qkvz, in_proj_ba, conv1d (no bias), dt_bias, A_log, the gated norm (one head wide), out_proj
    assert pc.mamba == h * (2 * k_dim + 2 * v_dim) + h * 2 * v_heads + (2 * k_dim + v_dim) * 4 + 2 * v_heads + 128 \
        + v_dim * h
    # gated attention: q_proj twice as wide (query and gate)
    assert pc.attention == h * 16 * 256 * 2 + 2 * h * 2 * 256 + 16 * 256 * h


def test_layer_types_take_precedence_and_a_bad_entry_names_the_key():
    cfg = {**_model_config(), "layer_types": ["linear_attention"] * 47 + ["full_attention"]}
    assert Model.from_hf_config(cfg).hybrid_pattern.count("*") == 1
    with pytest.raises(InputError) as err:
        Model.from_hf_config({**_model_config(), "layer_types": ["sliding_attention"] * 48})
    assert err.value.field == "hf_config.layer_types"


def _model_config() -> dict:
    import json
    return json.loads(CONFIG.read_text())


@pytest.mark.parametrize("update, field", [
    (dict(gdn_value_heads=24), "Model.gdn_value_heads"),              # not a multiple of the 16 key heads
    (dict(gdn_key_heads=None), "Model.gdn_key_heads"),                # G layers without their sizes
    (dict(hybrid_pattern="ME" * 48, mamba_heads=64, mamba_head_dim=64, mamba_state=128), "Model.gdn_value_heads"),
    (dict(hybrid_pattern="MEGE" * 24, mamba_heads=64, mamba_head_dim=64, mamba_state=128), "Model.hybrid_pattern"),
])
def test_invalid_gdn_shapes_name_the_field(update, field):
    fields = {**_model().model_dump(exclude={"params"}), **update}
    with pytest.raises(Exception) as err:
        Model(**fields)
    assert field in str(err.value)


def test_recommend_answers_on_64_h100_with_a_clean_audit():
    cluster = Cluster(gpu=H100, gpus=64)
    rec = advisor.recommend(cluster, _model(), Training(seq_len=4096))
    assert rec.layout is not None
    findings = advisor.audit(cluster, _model(), rec.layout, rec.training).findings
    assert not [f for f in findings if f.severity == "error"]


def test_megatron_tp_must_divide_the_deltanet_heads_and_deepspeed_runs_zero_only():
    cluster = Cluster(gpu=H100, gpus=64)
    t = Training(seq_len=4096, global_batch_size=256)
    ids = lambda lay: {f.rule_id for f in advisor.audit(cluster, _model(), lay, t).findings  # noqa: E731
                       if f.severity == "error"}
    ds = advisor.Layout(framework="deepspeed", tp=2, pp=1, dp=32, micro_batch_size=1, zero_stage=3)
    assert "deepspeed.gdn-layers-zero-dp-only" in ids(ds)
    zero = advisor.Layout(framework="deepspeed", tp=1, pp=1, dp=64, micro_batch_size=1, zero_stage=3)
    assert "deepspeed.gdn-layers-zero-dp-only" not in ids(zero)


@settings(max_examples=8, deadline=None)
@given(st.integers(min_value=1, max_value=11))
def test_more_deltanet_layers_in_place_of_attention_cost_less_at_long_context(n_attention):
    """A Gated DeltaNet layer in place of a softmax attention layer: less compute at a 64k context
    (its chunked delta rule is O(s), attention's scores O(s^2)), and less activation memory when the
    attention kernel materialises its s x s scores (no FlashAttention). With FlashAttention both store
    O(s) per layer, and the estimate keeps GDN's larger per-token tensors (GdnActivations)."""
    base = _model()
    fewer = "GEGEGE*E" * n_attention + "GEGEGEGE" * (12 - n_attention)
    more = "GEGEGE*E" * (n_attention + 1) + "GEGEGEGE" * (11 - n_attention)
    cluster = Cluster(gpu=H100, gpus=64)
    lay = advisor.Layout(tp=4, pp=1, dp=16, ep=16, micro_batch_size=1, zero_stage=1, recompute="none")

    def run(pattern, flash):
        t = Training(seq_len=65536, global_batch_size=64, flash_attention=flash)
        return advisor.estimate(cluster, base.model_copy(update={"hybrid_pattern": pattern}), lay, t)
    assert run(fewer, True).compute_time < run(more, True).compute_time
    assert run(fewer, False).memory.activations < run(more, False).memory.activations


def test_the_megatron_export_writes_the_deltanet_stack_for_main_and_refuses_older_releases():
    from advisor import export as ex
    model = Model.preset("qwen3-next-80b-a3b")
    cluster = Cluster(gpu="H100", gpus=64)
    rec = advisor.recommend(cluster, model, Training(seq_len=4096, global_batch_size=1024))
    assert rec.layout.vpp == 1                      # megatron.hybrid-no-vpp v2: no virtual stage without '|' segments
    args = ex.megatron_args(rec.layout, rec.model, rec.training, cluster, version="main")
    for flag, value in (("--linear-num-key-heads", "16"), ("--linear-num-value-heads", "32"),
                        ("--linear-key-head-dim", "128"), ("--rotary-percent", "0.25")):
        assert args[args.index(flag) + 1] == value
    assert {"--attention-output-gate", "--moe-shared-expert-gate"} <= set(args)
    assert "G" in args[args.index("--hybrid-layer-pattern") + 1]       # main's spelling
    with pytest.raises(InputError, match="no Gated DeltaNet layers"):
        ex.megatron_args(rec.layout, rec.model, rec.training, cluster, version="core_v0.16.1")
    vpp = rec.layout.model_copy(update={"pp": 4, "vpp": 2})
    assert "megatron.hybrid-no-vpp" in {f.rule_id for f in advisor.audit(cluster, model, vpp, rec.training).errors}


def test_the_hf_config_counts_the_shared_expert_gates_and_reads_the_rotary_share():
    m = Model.from_hf_config(Path(__file__).parent / "data" / "hf" / "qwen3-next-80b-a3b-instruct.json")
    assert m.shared_expert_gate and m.rotary_percent == 0.25
    assert m.params == 79_674_391_296                   # the released safetensors' tensor shapes summed
    ungated = count_parameters(m.model_copy(update={"shared_expert_gate": False})).total
    assert m.params - ungated == 48 * 2048
