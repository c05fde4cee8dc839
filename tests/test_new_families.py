"""Issue 29 item 4: the families NVIDIA trains today, each a preset with its source, read from its Hugging
Face config.json (tests/data/hf/, sources in tests/data/hf/README.md), counted as the released tensors,
priced by the cost model (LatentMoE's projections, DeepSeek Sparse Attention's indexer and top-k
attention) and recommended on a realistic cluster with no audit error."""

from __future__ import annotations

from pathlib import Path

import pytest

import advisor
from advisor import Cluster, Layout, Model, Training
from advisor import export as ex
from advisor.costmodel.context import resolve
from advisor.costmodel.time import moe_token_weights
from advisor.inputs.architecture import count_parameters

HF = Path(__file__).parent / "data" / "hf"
FAMILIES = ["nemotron-3-nano-30b-a3b", "nemotron-3-super-120b-a12b", "kimi-k2", "glm-4.5", "deepseek-v3.2"]


def _hub(name: str) -> Model:
    return Model.from_hf_config(HF / f"{name}.json")


@pytest.mark.parametrize("name", FAMILIES)
def test_config_json_is_the_preset(name):
    hub, preset = _hub(name), Model.preset(name)
    assert hub.model_dump(exclude={"name", "source"}) == preset.model_dump(exclude={"name", "source"})


# --- parameter counts: the released tensors ----------------------------------------------------------

def test_glm_4_5_is_its_safetensors_total_exactly():
    """The Hugging Face API's safetensors total of zai-org/GLM-4.5, 358,337,791,296: the model, its MTP
    layer with the embedding and head it stores again, and the F32 expert-score correction bias of each of
    the 89 + 1 MoE layers (160 experts), which advisor does not count as a parameter."""
    c = count_parameters(Model.preset("glm-4.5"))
    assert c.checkpoint_total + 90 * 160 == 358_337_791_296
    assert (c.moe_layer_count, c.dense_layer_count) == (89, 3)
    assert int((c.active - c.embedding) / 1e9) == 32                    # the card: 32B active ("A32B")


def test_kimi_k2_is_its_safetensors_total():
    """moonshotai/Kimi-K2-Instruct's safetensors total (the preset's published_params) less its 60 x 384
    router correction biases leaves 3,416 of the 1.03 trillion that the architecture does not account for."""
    m = Model.preset("kimi-k2")
    c = count_parameters(m)
    assert c.total + 60 * 384 + 3_416 == advisor.inputs.presets.published_params("kimi-k2") == 1_026_408_235_864
    assert c.mtp == 0 and round(c.total / 1e12, 2) == 1.03
    assert round((c.active - c.embedding) / 1e9) == 32                  # "32B activated"


def test_deepseek_v3_2_adds_one_indexer_per_layer():
    """DeepSeek-V3 plus the lightning indexer in each of the 61 layers and the MTP layer: wq_b 1536 -> 64 x 128,
    wk 7168 -> 128, k_norm (LayerNorm, 2 x 128), weights_proj 7168 -> 64; the hub's 685B."""
    v3, v32 = count_parameters(Model.preset("deepseek-v3")), count_parameters(Model.preset("deepseek-v3.2"))
    indexer = 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64
    assert indexer == 13_959_424
    assert v32.total - v3.total == 61 * indexer
    assert v32.checkpoint_total - v3.checkpoint_total == 62 * indexer
    assert round(v32.checkpoint_total / 1e9) == 685


def test_nemotron_3_counts():
    """Nano: the card's 31.6B total, 3.6B active with the embeddings; Super: "120B total, 12B active"
    (research.nvidia.com), its MTP module ("*E") counted apart, as DeepSeek-V3's."""
    nano, sup = count_parameters(Model.preset("nemotron-3-nano-30b-a3b")), count_parameters(
        Model.preset("nemotron-3-super-120b-a12b"))
    assert round(nano.total / 1e8) == 316 and round(nano.active / 1e8) == 36
    assert int(sup.total / 1e9) == 120 and int((sup.active - sup.embedding) / 1e9) == 12
    assert (sup.mamba_layer_count, sup.moe_layer_count, sup.attention_layer_count) == (40, 40, 8)
    assert sup.mtp == 2 * 4096 + 2 * 4096 * 4096 + sup.attention + sup.moe_mlp + 2 * 4096 + 4096


# --- LatentMoE (Model.moe_latent_size) --------------------------------------------------------------

def test_latent_moe_parameters_and_pricing():
    """Routed experts on the 1024-wide latent, the two projections (4096 x 1024 each, replicated over TP),
    the router and the shared experts (2 x 2688 = 5376 channels) on the 4096-wide hidden; a token's MoE
    GEMM weights, and its dispatched bytes, follow."""
    m = Model.preset("nemotron-3-super-120b-a12b")
    c = count_parameters(m)
    assert c.expert == 2 * 1024 * 2688 and c.latent_proj == 2 * 4096 * 1024
    assert c.shared_mlp == 2 * 4096 * 5376 and c.moe_width == 1024
    assert c.moe_mlp == 4096 * 512 + 512 * c.expert + c.shared_mlp + c.latent_proj
    training = Training(seq_len=8192, global_batch_size=512)
    layout = Layout(tp=1, ep=8, pp=1, dp=64, zero_stage=1, micro_batch_size=1)
    ctx = resolve(Cluster(gpu="B200", gpus=64), m, layout, training)
    assert moe_token_weights(ctx) == 4096 * 512 + 22 * c.expert + c.shared_mlp + c.latent_proj
    # the same model with its latent as wide as hidden dispatches 4x the bytes
    wide = Model(**{**m.model_dump(exclude={"params"}), "moe_latent_size": 4096})
    cluster = Cluster(gpu="B200", gpus=64)
    ep = [advisor.estimate(cluster, x, layout, training).comm.ep.bytes for x in (m, wide)]
    assert ep[1] == pytest.approx(4 * ep[0], rel=1e-9)


def test_latent_moe_is_refused_where_the_framework_has_none():
    layout = dict(ep=8, etp=1, zero_stage=3)
    sup, t = "nemotron-3-super-120b-a12b", Training(seq_len=8192, global_batch_size=512)
    titan = advisor.audit(Cluster(gpu="B200", gpus=64), sup, Layout(framework="torchtitan", **layout), t)
    assert "layout.latent-moe-frameworks" in {f.rule_id for f in titan.errors}


# --- DeepSeek Sparse Attention (Model.dsa_topk) -----------------------------------------------------

def test_sparse_attention_costs_less_than_dense_at_long_context():
    """Top-2048 attention plus the indexer's 64 x 128 scores: at 4k about dense attention's cost, at 32k far
    below it; the projections and MoE are DeepSeek-V3's."""
    cluster, layout = Cluster(gpu="H100", gpus=512), Layout(ep=8, pp=16, vpp=2, zero_stage=1, recompute="full")
    times = {}
    for seq in (4096, 32768):
        t = Training(seq_len=seq, global_batch_size=2048 * 4096 // seq)
        times[seq] = [advisor.estimate(cluster, name, layout, t).compute_time for name in ("deepseek-v3", "deepseek-v3.2")]
    assert times[4096][1] == pytest.approx(times[4096][0], rel=0.02)
    assert times[32768][1] < 0.75 * times[32768][0]


def test_sparse_attention_span():
    """costmodel.context._dsa_span: a 2048-key window (2k - k(k-1)/s) plus s x 64 x 128 / (128 x 320)."""
    ctx = resolve(Cluster(gpu="H100", gpus=512), Model.preset("deepseek-v3.2"),
                  Layout(ep=8, pp=16, dp=32, zero_stage=1, micro_batch_size=1), Training(seq_len=32768, global_batch_size=64))
    s, k = 32768, 2048
    assert ctx.seq_attn == pytest.approx(2 * k - k * (k - 1) / s + s * 64 * 128 / (128 * 320))


@pytest.mark.parametrize(("framework", "layout", "rule"), [
    ("megatron", dict(ep=8, pp=8, cp=2, zero_stage=1), "megatron.dsa-context-parallel"),
    ("torchtitan", dict(tp=2, ep=8, etp=1, zero_stage=3), "torchtitan.dsa-fsdp-ep-only"),
    ("megatron+deepspeed", dict(pp=8, zero_stage=1), "megatron.dsa-release")])
def test_sparse_attention_rules(framework, layout, rule):
    report = advisor.audit(Cluster(gpu="H100", gpus=512), "deepseek-v3.2", Layout(framework=framework, **layout),
                           Training(seq_len=4096, global_batch_size=2048))
    assert rule in {f.rule_id for f in report.errors}


def test_sparse_attention_release():
    layout, t = Layout(ep=8, pp=16, vpp=2, zero_stage=1, recompute="full"), dict(seq_len=4096, global_batch_size=2048)
    cluster = Cluster(gpu="H100", gpus=512)
    old = advisor.audit(cluster, "deepseek-v3.2", layout, Training(**t, framework="megatron-core", framework_version="0.16.1"))
    assert "megatron.dsa-release" in {f.rule_id for f in old.errors}
    new = advisor.audit(cluster, "deepseek-v3.2", layout, Training(**t))
    assert new.ok and "megatron.dsa-needs-core-0.19" in {f.rule_id for f in new.findings}
    args = " ".join(ex.megatron_args(new.layout, new.model, new.training, new.cluster))
    assert ("--experimental-attention-variant dsa --dsa-indexer-n-heads 64 --dsa-indexer-head-dim 128 "
            "--dsa-indexer-topk 2048 --dsa-indexer-loss-coeff 0.001") in args
    with pytest.raises(advisor.InputError, match="no sparse DSA path for Megatron-LM core_v0.16.1"):
        ex.megatron_args(new.layout, new.model, new.training, new.cluster, version="core_v0.16.1")


# --- a recommendation on a realistic cluster, audit clean, and its launch config -----------------------

CLUSTERS = {
    # (GPU, count, training): Megatron-Bridge's own benchmark scales where it has one
    "nemotron-3-nano-30b-a3b": ("H100", 16, dict(seq_len=8192, global_batch_size=512)),
    "nemotron-3-super-120b-a12b": ("B200", 64, dict(seq_len=8192, global_batch_size=512)),   # perf_recipes: 64 x B200
    "kimi-k2": ("H100", 512, dict(seq_len=4096, global_batch_size=4096)),
    "glm-4.5": ("H100", 256, dict(seq_len=4096, global_batch_size=1024)),
    "deepseek-v3.2": ("H100", 512, dict(seq_len=4096, global_batch_size=2048)),
}


@pytest.mark.parametrize("name", FAMILIES)
def test_each_family_gets_a_clean_recommendation_that_exports(name):
    gpu, gpus, training = CLUSTERS[name]
    cluster = Cluster(gpu=gpu, gpus=gpus)
    rec = advisor.recommend(cluster, name, training)
    assert rec.status == "recommended", rec.explain()
    assert not [f for f in rec.findings if f.severity == "error"]
    by_file = advisor.recommend(cluster, _hub(name), training)
    assert by_file.layout == rec.layout
    if rec.framework == "megatron":
        args = ex.megatron_args(rec.layout, rec.model, rec.training, rec.cluster, rec.estimates.assumptions)
        text = " ".join(args)
        if rec.model.moe_latent_size:
            assert "--moe-latent-size 1024" in text
        if rec.model.mtp_layers and rec.model.hybrid_pattern:
            assert "--mtp-num-layers 1 --mtp-hybrid-override-pattern *E" in text
