"""Falcon-H1 (Mamba-2 and attention in parallel on one input in every layer, then an MLP) from its
Hugging Face config.json: the parameter count, the "M*-" pattern with parallel_mixers, what each
framework can run, and what the parallel pair saves against the same branches one after the other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import advisor
from advisor import Cluster, Layout, Model, Training
from advisor.errors import InputError
from advisor.inputs.architecture import count_parameters

CONFIG = Path(__file__).parent / "data" / "hf" / "falcon-h1-34b-instruct.json"
H100 = "H100-SXM-80GB"


def _cfg() -> dict:
    return json.loads(CONFIG.read_text())


def _model() -> Model:
    return Model.from_hf_config(CONFIG)


def test_falcon_h1_34b_counts_the_tensors_transformers_builds():
    m = _model()
    h, v, layers = 5120, 261120, 72
    attention = h * 20 * 128 + 2 * h * 4 * 128 + 20 * 128 * h
    d_inner, gn, nheads = 32 * 128, 2 * 256, 32
    mamba = (h * (2 * d_inner + 2 * gn + nheads) + (d_inner + 2 * gn) * 5 + 3 * nheads + d_inner
             + d_inner * h)                       # in_proj, conv1d + bias, dt_bias / A_log / D, gated norm, out_proj
    mlp = 3 * h * 21504
    per_layer = attention + mamba + mlp + 2 * h    # input_layernorm (shared by both branches), pre_ff_layernorm
    assert m.params == 2 * v * h + layers * per_layer + h
    # the card's name, "34B", is the count rounded (33.64B; no exact total is published)
    assert round(m.params / 1e9) == 34


def test_the_pattern_is_a_parallel_pair_then_an_mlp_per_layer():
    m = _model()
    assert m.layers == 216 and m.hybrid_pattern == "M*-" * 72 and m.parallel_mixers
    assert (m.mamba_heads, m.mamba_head_dim, m.mamba_state, m.mamba_groups) == (32, 128, 256, 2)
    assert m == Model.preset("falcon-h1-34b").model_copy(update={"name": m.name, "source": m.source, "seq_len": None})


def test_mamba_d_head_auto_is_the_ssm_channels_over_the_heads():
    cfg = {**_cfg(), "mamba_d_head": "auto"}
    assert Model.from_hf_config(cfg).mamba_head_dim == 128
    with pytest.raises(InputError) as err:
        Model.from_hf_config({**_cfg(), "mamba_d_head": 96})
    assert err.value.field == "hf_config.mamba_d_head"


@pytest.mark.parametrize("key", ["projectors_bias", "mamba_proj_bias", "attention_bias"])
def test_uncounted_biases_are_refused_by_name(key):
    with pytest.raises(InputError) as err:
        Model.from_hf_config({**_cfg(), key: True})
    assert err.value.field == f"hf_config.{key}"


@pytest.mark.parametrize("update", [dict(hybrid_pattern="*M-" * 72), dict(hybrid_pattern="M-*" * 72)])
def test_parallel_mixers_need_each_m_followed_by_its_attention(update):
    fields = {**_model().model_dump(exclude={"params"}), **update}
    with pytest.raises(Exception) as err:
        Model(**fields)
    assert "Model.hybrid_pattern" in str(err.value)


def test_recommend_answers_on_16_h100_with_a_clean_audit_and_megatron_is_refused():
    cluster = Cluster(gpu=H100, gpus=16)
    rec = advisor.recommend(cluster, _model(), Training(seq_len=4096))
    assert rec.layout is not None and rec.layout.framework == "deepspeed"
    findings = advisor.audit(cluster, _model(), rec.layout, rec.training).findings
    assert not [f for f in findings if f.severity == "error"]
    megatron = Layout(framework="megatron", tp=2, pp=1, dp=8, micro_batch_size=1, zero_stage=1)
    ids = {f.rule_id for f in advisor.audit(cluster, _model(), megatron, rec.training).findings}
    assert "megatron.no-parallel-mixers" in ids


def test_the_parallel_pair_stores_one_input_and_counts_one_norm():
    par = _model()
    seq = par.model_copy(update={"parallel_mixers": False, "params": None})
    seq = Model(**seq.model_dump(exclude={"params"}))
    assert seq.params - par.params == 72 * 5120          # the attention branch's own pre-norm
    cluster = Cluster(gpu=H100, gpus=16)
    t = Training(seq_len=8192, global_batch_size=64)
    lay = Layout(framework="deepspeed", tp=1, pp=1, dp=16, micro_batch_size=1, zero_stage=3)
    a_par = advisor.estimate(cluster, par, lay, t).memory.activations
    a_seq = advisor.estimate(cluster, seq, lay, t).memory.activations
    # per layer the shared input (2h bytes) and norm output (2h) are stored once, not twice
    assert a_seq - a_par == pytest.approx(72 * 8192 * 4 * 5120, rel=1e-9)
    # the FLOPs are the two branches summed either way; the pair runs one norm fewer
    e_par, e_seq = advisor.estimate(cluster, par, lay, t), advisor.estimate(cluster, seq, lay, t)
    assert e_par.model_flops == pytest.approx(e_seq.model_flops, rel=1e-6)
    assert e_par.compute_time < e_seq.compute_time
    assert count_parameters(par).attention == count_parameters(seq).attention
