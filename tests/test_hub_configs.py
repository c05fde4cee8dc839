"""Issue 29: config.json files as the Hugging Face hub ships them are read as transformers reads them,
and no framework's own limit empties the search when the framework is not stated.

Fixtures (tests/data/hf/, sources in their `_source` keys and tests/data/hf/README.md): openai/gpt-oss-120b
(YaRN, MXFP4 quantization_config) and meta-llama/Llama-4-Scout-17B-16E (a multimodal wrapper whose
text_config says "no_rope_layers": [])."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import advisor
from advisor import Cluster, Layout, Model, Training
from advisor import export as ex
from advisor.errors import InputError

HF = Path(__file__).parent / "data" / "hf"
H100_64 = Cluster(gpu="H100-SXM-80GB", gpus=64)
# fixture -> the preset it must agree with
HUB = {"gpt-oss-120b": "gpt-oss-120b", "llama-4-scout-17b-16e": "llama-4-scout"}


def _hub(name: str) -> Model:
    return Model.from_hf_config(HF / f"{name}.json")


def _raw(name: str) -> dict:
    return json.loads((HF / f"{name}.json").read_text())


@pytest.mark.parametrize("name", sorted(HUB))
def test_hub_config_is_the_preset(name):
    hub, preset = _hub(name), Model.preset(HUB[name])
    fields = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab", "experts", "experts_per_token",
              "shared_experts", "moe_ffn_hidden", "dense_layers", "moe_layer_freq", "sliding_window", "attention_chunk",
              "global_attention_every", "rope_theta", "rope_scaling", "rope_scaling_factor", "seq_len", "bias")
    assert {f: getattr(hub, f) for f in fields} == {f: getattr(preset, f) for f in fields}
    assert hub.params == preset.params


@pytest.mark.parametrize("name", sorted(HUB))
def test_hub_config_and_preset_get_the_same_clean_answer(name):
    """The issue's case: gpt-oss-120b's config.json on 64 H100 came back infeasible (YaRN refused
    outright), while the preset got an answer."""
    by_file, by_preset = advisor.recommend(H100_64, _hub(name)), advisor.recommend(H100_64, HUB[name])
    assert by_file.status == by_preset.status == "recommended"
    assert by_file.layout == by_preset.layout and by_file.framework == by_preset.framework
    for rec in (by_file, by_preset):
        assert not [f for f in rec.findings if f.severity == "error"]


def test_llama4_empty_no_rope_layers_is_the_default_interleave():
    """Llama4TextConfig.__post_init__: `no_rope_layers if no_rope_layers else` every 4th layer NoPE
    (no_rope_layer_interval 4); attention_chunk_size defaults to 8192, an explicit null turns it off."""
    text = _raw("llama-4-scout-17b-16e")["text_config"]
    listed = dict(text, no_rope_layers=[1, 1, 1, 0] * 12)
    absent = {k: v for k, v in text.items() if k != "no_rope_layers"}
    models = [Model.from_hf_config(dict(t, model_type="llama4_text")) for t in (text, listed, absent)]
    assert {(m.attention_chunk, m.global_attention_every) for m in models} == {(8192, 4)}
    every_third = Model.from_hf_config(dict(text, no_rope_layers=[], no_rope_layer_interval=3, num_hidden_layers=48))
    assert every_third.global_attention_every == 3
    unchunked = Model.from_hf_config({k: v for k, v in text.items() if k != "attention_chunk_size"})
    assert unchunked.attention_chunk == 8192
    assert Model.from_hf_config(dict(text, attention_chunk_size=None)).attention_chunk is None
    with pytest.raises(InputError, match="no_rope_layers"):
        Model.from_hf_config(dict(text, no_rope_layers=[1, 0, 1]))


def test_llama4_moe_layers_list_is_read():
    """Llama4TextConfig.moe_layers: the MoE layers, by default every interleave_moe_layer_step-th."""
    text = _raw("llama-4-scout-17b-16e")["text_config"]
    maverick = Model.from_hf_config(dict(text, moe_layers=list(range(1, 48, 2)), num_local_experts=128))
    assert (maverick.dense_layers, maverick.moe_layer_freq) == (1, 2)
    with pytest.raises(InputError, match="moe_layers"):
        Model.from_hf_config(dict(text, moe_layers=[0, 1, 5]))


def test_transformers_5_rope_parameters_read_like_rope_scaling():
    """transformers 5 saves rope_theta and the scaling in one `rope_parameters` dict."""
    cfg = _raw("gpt-oss-120b")
    v5 = {k: v for k, v in cfg.items() if k not in ("rope_scaling", "rope_theta")}
    v5["rope_parameters"] = dict(cfg["rope_scaling"], rope_theta=cfg["rope_theta"])
    old, new = Model.from_hf_config(cfg), Model.from_hf_config(v5)
    assert (new.rope_theta, new.rope_scaling, new.rope_scaling_factor, new.seq_len) == (150000.0, "yarn", 32.0, 4096)
    assert new.model_copy(update={"source": old.source}) == old


# --- YaRN per Megatron release (rules/audit-model-support.toml) --------------------------------------

def _gpt_oss_audit(**training):
    layout = Layout(tp=1, ep=8, pp=4, zero_stage=1)
    return advisor.audit(H100_64, "gpt-oss-120b", layout, Training(seq_len=4096, global_batch_size=512, **training))


@pytest.mark.parametrize(("stack", "error"), [
    ({}, False), ({"framework": "megatron-bridge"}, False), ({"framework": "megatron-core", "framework_version": "0.19.0"}, False),
    ({"framework": "megatron-core", "framework_version": "main"}, False),
    ({"framework": "megatron-core", "framework_version": "core_v0.16.1"}, True),
    ({"framework": "megatron-core", "framework_version": "0.18.0"}, True), ({"framework": "megatron-lm", "framework_version": "2022"}, True)])
def test_yarn_on_a_gpt_model_is_refused_only_by_releases_without_it(stack, error):
    """GPTModel has the 'yarn' position embedding from Megatron-Core 0.15 (Megatron-Bridge's gpt-oss
    provider); Megatron-LM's command line sets its fields from core_v0.19.0."""
    rules = {f.rule_id: f.severity for f in _gpt_oss_audit(**stack).findings}
    if error:
        assert rules.get("megatron.rope-scaling-kind") == "error" and "megatron.yarn-gpt-release" not in rules
    else:
        assert "megatron.rope-scaling-kind" not in rules and rules.get("megatron.yarn-gpt-release") == "info"


def test_yarn_export_at_main_and_refusal_at_core_v0_16_1():
    report = _gpt_oss_audit()
    args = " ".join(ex.megatron_args(report.layout, report.model, report.training, report.cluster))
    assert "--position-embedding-type yarn --rotary-base 150000 --rotary-scaling-factor 32.0" in args
    assert "--yarn-original-max-position-embeddings 4096" in args
    with pytest.raises(InputError, match="no YaRN on a GPT model for Megatron-LM core_v0.16.1"):
        ex.megatron_args(report.layout, report.model, report.training, report.cluster, version="core_v0.16.1")
    notes = " ".join(ex.megatron_notes(report.layout, report.model, report.training, report.cluster))
    assert "--no-yarn-correction-range-round-to-int" in notes
    mla = advisor.audit(H100_64, "deepseek-v3", Layout(tp=1, ep=8, pp=8, zero_stage=1), Training(seq_len=4096))
    assert "--rope-type yarn" in " ".join(ex.megatron_args(mla.layout, mla.model, mla.training, mla.cluster,
                                                            version="core_v0.16.1"))


def test_a_stated_release_without_yarn_stays_infeasible():
    rec = advisor.recommend(H100_64, "gpt-oss-120b", {"framework": "megatron-core", "framework_version": "0.16.1"})
    assert rec.status == "infeasible"
    assert [e for e in rec.trace.events if e.op == "reject"][-1].rule_id == "megatron.rope-scaling-kind"


# --- one framework's limit narrows the framework (planner/families.py narrow_framework) --------------

GEMMA3 = {"model_type": "gemma3", "text_config": {
    # google/gemma-3-27b-pt config.json text_config (tests/test_hf_families.py CONFIGS): linear RoPE scaling
    "model_type": "gemma3_text", "num_hidden_layers": 62, "hidden_size": 5376, "num_attention_heads": 32,
    "num_key_value_heads": 16, "head_dim": 128, "intermediate_size": 21504, "vocab_size": 262208,
    "sliding_window": 1024, "sliding_window_pattern": 6, "max_position_embeddings": 131072,
    "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}}


def test_a_megatron_limit_narrows_the_framework_when_none_is_stated():
    """Gemma 3's linear RoPE scaling has no Megatron-LM flag; on 64 H100 the rules chose Megatron's
    family, and every fitting layout was refused: the answer was "infeasible"."""
    model = Model.from_hf_config(GEMMA3, name="gemma-3-27b")
    rec = advisor.recommend(H100_64, model)
    assert rec.status == "recommended" and rec.framework not in ("megatron", "megatron+deepspeed")
    assert not [f for f in rec.findings if f.severity == "error"]
    notes = [e for e in rec.trace.events if e.op == "note" and "narrows" in e.message]
    assert len(notes) == 1 and notes[0].rule_id == "megatron.rope-scaling-kind"
    assert "training.framework is not stated" in notes[0].message
    stated = advisor.recommend(H100_64, model, {"framework": "megatron-core"})
    assert stated.status == "infeasible"
    assert not [e for e in stated.trace.events if e.op == "note" and "narrows" in e.message]
