"""Memory side of the cost model: ZeRO paper Fig. 1, DeepSpeed's estimators, Korthikanti Table 2,
the measured Megatron-LM numbers (Korthikanti et al. 2022 Fig. 1 and 7), and every layout option."""

from __future__ import annotations

from pathlib import Path

import pytest
from korthikanti_cases import case_objects, load_cases

from advisor import Cluster, InputError, Layout, Model, Training
from advisor.costmodel import Assumptions, LayerActivations, estimate, memory_only, model_state_bytes_per_param

GiB = 2**30
DATA = Path(__file__).parent / "data" / "korthikanti2022-measured.json"
KORTHIKANTI = load_cases(DATA)


def states(mem):
    return mem.weights + mem.gradients + mem.optimizer


# --------------------------------------------------------------------------- ZeRO paper Fig. 1

@pytest.mark.parametrize("stage, paper_gb", [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_paper_figure_1(stage, paper_gb):
    """Rajbhandari et al. 2020 Fig. 1: psi = 7.5B, N_d = 64, K = 12 -> 120 / 31.4 / 16.6 / 1.9 GB."""
    psi, nd = 7.5e9, 64
    (wr, ws), (gr, gs), (orr, os_) = model_state_bytes_per_param("deepspeed", "fp16", stage, fp32_grad_partition=False)
    per_gpu = psi * (wr + gr + orr) + psi * (ws + gs + os_) / nd
    assert round(per_gpu / 1e9, 1) == pytest.approx(paper_gb, abs=0.051)


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_zero_paper_figure_1_through_estimate(stage):
    """The same accounting from `estimate` for a real 7.5B-class model on 64 GPUs (model states only)."""
    model = Model(layers=36, hidden=4096, heads=32, ffn_hidden=16384, vocab=51200, activation="gelu")
    P = model.params
    layout = Layout(framework="deepspeed", zero_stage=stage, dp=64)
    mem = memory_only(Cluster(gpu="A100-80GB", gpus=64), model, layout, Training(seq_len=2048, global_batch_size=64),
                      Assumptions(deepspeed_fp32_grad_partition=False))
    formula = {0: 16 * P, 1: 4 * P + 12 * P / 64, 2: 2 * P + 14 * P / 64, 3: 16 * P / 64}[stage]
    assert states(mem) == pytest.approx(formula, rel=1e-6)


# --------------------------------------------------------------------------- DeepSpeed estimators

# research/peers-measured.md §2: deepspeed 0.19.8 `*_all_cold`, Llama-2-7B, GiB per GPU.
DS_TABLE = {
    # (stage, offload, nodes): GiB
    (2, "none", 1): 26.67, (2, "none", 4): 16.08,
    (2, "optimizer", 1): 12.55, (2, "optimizer", 4): 12.55,
    (3, "none", 1): 14.61, (3, "none", 4): 4.02,
    (3, "optimizer", 1): 2.06, (3, "optimizer", 4): 0.88,
    (3, "optimizer+params", 1): 0.49, (3, "optimizer+params", 4): 0.49,
}


@pytest.mark.parametrize("key", sorted(DS_TABLE))
def test_deepspeed_estimators(key):
    """ZeRO-2: 2P + 18P/N (offload: 2P); ZeRO-3: 4*LL + 18P/N (offload opt: 4LL + 2P/N; all: 4LL)."""
    stage, offload, nodes = key
    model = Model.preset("llama-2-7b")
    assert model.params == 6_738_415_616
    n = 8 * nodes
    layout = Layout(framework="deepspeed", zero_stage=stage, dp=n, offload=offload)
    mem = memory_only(Cluster(gpu="A100-80GB", gpus=n), model, layout, Training(seq_len=4096, global_batch_size=n))
    got = states(mem) + mem.detail["zero3_live_params"]
    assert got / GiB == pytest.approx(DS_TABLE[key], abs=0.006)
    if offload != "none":
        assert mem.offloaded_to_host > 0 and mem.optimizer == 0


def test_deepspeed_zero3_largest_layer_is_a_leaf_module():
    """stage3.py counts m.parameters(recurse=False): Llama-2-7B's largest is the embedding V*h."""
    model = Model.preset("llama-2-7b")
    mem = memory_only(Cluster(gpu="A100-80GB", gpus=8), model, Layout(framework="deepspeed", zero_stage=3),
                      Training(seq_len=4096, global_batch_size=8))
    assert mem.detail["zero3_live_params"] == 4 * 32000 * 4096


# --------------------------------------------------------------------------- Megatron distributed optimizer

@pytest.mark.parametrize("precision, plain, rep, shard", [("bf16", 18, 6, 12), ("fp16", 20, 4, 16)])
def test_megatron_distributed_optimizer_bytes(precision, plain, rep, shard):
    """docs/user-guide/features/dist_optimizer.md: bf16/fp32 18 -> 6 + 12/d; fp16/fp16 20 -> 4 + 16/d."""
    w, g, o = model_state_bytes_per_param("megatron", precision, 0)
    assert sum(x for pair in (w, g, o) for x in pair) == plain
    w, g, o = model_state_bytes_per_param("megatron", precision, 1)
    assert w[0] + g[0] + o[0] == rep and w[1] + g[1] + o[1] == shard


def test_megatron_dp_cp_group_shards_the_optimizer():
    model = Model.preset("llama-2-7b")
    tr = Training(seq_len=8192, global_batch_size=16)
    base = memory_only(Cluster(gpu="H100", gpus=16), model, Layout(zero_stage=1, dp=16), tr)
    cp = memory_only(Cluster(gpu="H100", gpus=16), model, Layout(zero_stage=1, dp=8, cp=2), tr)
    assert base.optimizer == pytest.approx(cp.optimizer, rel=1e-9)   # dp*cp = 16 both times
    assert base.optimizer == pytest.approx(12 * model.params / 16, rel=1e-9)


# --------------------------------------------------------------------------- Korthikanti Table 2

CASES = [(2048, 1, 12288, 96, 8), (2048, 4, 6144, 64, 8), (4096, 2, 4096, 32, 4), (1024, 8, 2048, 16, 2)]


@pytest.mark.parametrize("s, b, h, a, t", CASES)
def test_korthikanti_table_2(s, b, h, a, t):
    """Table 2, activation bytes per layer (16-bit activations, 1-byte dropout masks):
        no parallelism            sbh (34 + 5as/h)
        tensor parallel           sbh (10 + 24/t + 5as/(ht))
        TP + sequence parallel    sbh (34/t + 5as/(ht))
        TP + selective recompute  sbh (10 + 24/t)
        TP + SP + selective       sbh (34/t)
        full recompute            sbh (2)
    """
    sbh = s * b * h
    table = {
        ("none", 1, False, "none"): sbh * (34 + 5 * a * s / h),
        ("tp", t, False, "none"): sbh * (10 + 24 / t + 5 * a * s / (h * t)),
        ("tp+sp", t, True, "none"): sbh * (34 / t + 5 * a * s / (h * t)),
        ("tp+sel", t, False, "selective"): sbh * (10 + 24 / t),
        ("tp+sp+sel", t, True, "selective"): sbh * 34 / t,
        ("full", t, False, "full"): sbh * 2,
    }
    for (_, tt, sp, rc), want in table.items():
        got = LayerActivations(s, b, h, a, t=tt, sp=sp, recompute=rc, flash=False, f=4 * h, dropout_masks=True).bytes()
        assert got == pytest.approx(want, rel=1e-12)


def test_flash_gqa_swiglu_fp8_terms():
    s, b, h, a, t, f = 4096, 1, 8192, 64, 8, 28672
    mha = LayerActivations(s, b, h, a, t=t, sp=True, flash=True, f=f, gated=True, dropout_masks=False).bytes()
    # stored per token: rep (2h LN1 + 2h QKV in + 2h LN2 + 2h FC1 in)/t + Q,K,V 6h/t + out-proj 2h/t
    # + softmax stats 4a/t + SwiGLU FC1 out 4f/t + FC2 in 2f/t
    want = s * b * (8 * h / t + 6 * h / t + 2 * h / t + 4 * a / t + 6 * f / t)
    assert mha == pytest.approx(want, rel=1e-12)
    gqa = LayerActivations(s, b, h, a, t=t, sp=True, flash=True, f=f, gated=True, dropout_masks=False,
                                wq=h, wk=h // 8, wv=h // 8, wo=h, kv_div=8).bytes()
    assert mha - gqa == pytest.approx(s * b * 4 * (h - h // 8) / t, rel=1e-12)
    fp8 = LayerActivations(s, b, h, a, t=t, sp=True, flash=True, f=f, gated=True, dropout_masks=False,
                                lin_bytes=1.0).bytes()
    assert mha - fp8 == pytest.approx(s * b * (2 * h / t + h / t + f / t), rel=1e-12)


# --------------------------------------------------------------------------- measured Megatron-LM runs

def _korthikanti(case, mode):
    cluster, model, training, layouts = case_objects(case)
    return estimate(cluster, model, layouts[mode], training)


@pytest.mark.parametrize("case", KORTHIKANTI["cases"], ids=lambda c: c["name"])
@pytest.mark.parametrize("mode", ["none", "seqsel"])
def test_korthikanti_figure_1_memory_within_10_percent(case, mode):
    measured = case["fig1_gib"][mode]
    mem = _korthikanti(case, mode).memory
    assert states(mem) / GiB == pytest.approx(measured["params_and_optimizer"], rel=0.10)
    assert mem.activations / GiB == pytest.approx(measured["activations"], rel=0.10)


@pytest.mark.parametrize("case", KORTHIKANTI["cases"], ids=lambda c: c["name"])
def test_korthikanti_figure_7_relative_activations_within_5_points(case):
    base = _korthikanti(case, "none").memory.activations
    for mode, pct in case["fig7_activation_percent"].items():
        got = 100 * _korthikanti(case, mode).memory.activations / base
        assert got == pytest.approx(pct, abs=5.0), mode


def test_korthikanti_175b_interleaved_factor():
    """Fig. 1's 175B activations = 96 layers x per-layer x (1 + (p-1)/(p*v)) with p=8, v=3."""
    case = next(c for c in KORTHIKANTI["cases"] if c["pp"] > 1)
    mem = _korthikanti(case, "none").memory
    assert mem.detail["chunks_in_flight"] == 3 * 8 + 8 - 1
    assert mem.detail["act_layers"] / GiB == pytest.approx(case["fig1_gib"]["none"]["activations"], rel=1e-6)


# --------------------------------------------------------------------------- layout options

def _llama(**kw):
    return Model.preset("llama-3-70b") if not kw else Model(**{**Model.preset("llama-3-70b").model_dump(
        exclude={"params", "name", "source"}), **kw})


def _mem(layout, model=None, gpus=64, gpu="H100", seq=8192, gbs=64, **tr):
    return memory_only(Cluster(gpu=gpu, gpus=gpus), model or _llama(), layout, Training(seq_len=seq,
                       global_batch_size=gbs, **tr))


def test_recompute_and_sp_reduce_activations():
    kw = dict(tp=8, pp=4, vpp=5)
    none = _mem(Layout(**kw)).activations
    sp = _mem(Layout(sp=True, **kw)).activations
    sel = _mem(Layout(sp=True, recompute="selective", **kw)).activations
    full = _mem(Layout(sp=True, recompute="full", **kw)).activations
    assert none > sp >= sel > full > 0


def test_context_parallel_divides_sequence():
    a = _mem(Layout(tp=8, pp=2, sp=True, zero_stage=1), gpus=64).detail["act_layers"]
    b = _mem(Layout(tp=8, pp=2, cp=2, sp=True, zero_stage=1), gpus=64).detail["act_layers"]
    assert b == pytest.approx(a / 2, rel=1e-9)


def test_pipeline_in_flight_and_interleave():
    one = _mem(Layout(tp=8, pp=4, sp=True), gbs=64)
    assert one.detail["chunks_in_flight"] == 4 and one.stage == 0
    few = _mem(Layout(tp=8, pp=4, sp=True), gbs=4)     # m = 2 < p: only 2 in flight
    assert few.detail["chunks_in_flight"] == 2
    inter = _mem(Layout(tp=8, pp=4, vpp=5, sp=True), gbs=64)
    ratio = inter.detail["act_layers"] / one.detail["act_layers"]
    assert ratio == pytest.approx(1 + 3 / (4 * 5), rel=1e-9)


def test_vocab_padding_and_embedding_on_first_stage():
    model = _llama(vocab=128000)
    mem = _mem(Layout(tp=8, pp=4, sp=True), model=model)
    padded = -(-128000 // (128 * 8)) * 128 * 8
    layers_20 = 20 * (model.params - 2 * 128000 * 8192 - 8192) / 80   # 20 layers per stage
    want = (layers_20 - 20 * 2 * 8192) / 8 + 20 * 2 * 8192 + padded * 8192 / 8   # norms replicated
    assert mem.detail["params_dense"] == pytest.approx(want, rel=1e-9)


def test_moe_experts_sharded_over_ep_and_optimizer_over_expert_dp():
    mixtral = Model(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=32000, experts=8,
                    experts_per_token=2)
    lay = Layout(tp=1, pp=4, ep=8, zero_stage=1, sp=False)
    mem = _mem(lay, model=mixtral, gpus=64, seq=4096, gbs=256)
    expert = 3 * 4096 * 14336
    assert mem.detail["params_expert"] == 8 * 8 * expert / 8
    edp = 64 // (1 * 8 * 4)
    dense = mem.detail["params_dense"]
    assert mem.optimizer == pytest.approx(12 * dense / 16 + 12 * mem.detail["params_expert"] / edp, rel=1e-9)
    top1 = Model(**{**mixtral.model_dump(exclude={"params"}), "experts_per_token": 1})
    assert _mem(lay, model=top1, gpus=64, seq=4096, gbs=256).activations < mem.activations


def test_mla_model_estimates():
    from advisor.inputs.specs import MLA
    ds = Model(layers=61, hidden=7168, heads=128, ffn_hidden=18432, moe_ffn_hidden=2048, vocab=129280, experts=256,
               experts_per_token=8, shared_experts=1, dense_layers=3,
               mla=MLA(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128))
    mem = _mem(Layout(tp=2, pp=16, ep=64, etp=1, sp=True, zero_stage=1, recompute="full"), model=ds, gpus=1024,
               seq=4096, gbs=8192)
    assert 0 < mem.total < 80 * GiB and mem.fits


def test_offload_and_zero_stages_are_monotone():
    m = Model.preset("llama-2-7b")
    tot = [_mem(Layout(framework="deepspeed", zero_stage=z, recompute="full"), model=m, gpus=8, seq=4096, gbs=8).total
           for z in (0, 1, 2, 3)]
    assert tot == sorted(tot, reverse=True)
    off = _mem(Layout(framework="deepspeed", zero_stage=3, offload="optimizer+params", offload_device="nvme",
                      recompute="full"),
               model=m, gpus=8, seq=4096, gbs=8)
    assert off.offloaded_to_nvme > 0 and off.offloaded_to_host == 0 and off.total < tot[3]


def test_fp8_adds_weight_copies_and_shrinks_activations():
    bf = _mem(Layout(tp=8, pp=4, sp=True))
    f8 = _mem(Layout(tp=8, pp=4, sp=True), precision="fp8")
    assert f8.weights > bf.weights and f8.activations < bf.activations


def test_flash_attention_removes_the_s2_term():
    no = _mem(Layout(tp=8, pp=4, sp=True), flash_attention=False)
    fl = _mem(Layout(tp=8, pp=4, sp=True), flash_attention=True)
    assert no.activations > 3 * fl.activations


def test_capacity_headroom_and_reserve():
    mem = _mem(Layout(tp=8, pp=4, sp=True, zero_stage=1))
    assert mem.capacity == 80 * GiB and mem.headroom == mem.capacity - mem.total
    assert mem.total == (mem.weights + mem.gradients + mem.optimizer + mem.activations + mem.buffers + mem.reserve)
    assert mem.reserve >= Assumptions().cuda_context_bytes and mem.fits


# --------------------------------------------------------------------------- input resolution

def test_missing_training_fields_raise():
    with pytest.raises(InputError, match="Training.seq_len"):
        estimate(Cluster(gpu="H100", gpus=8), _llama(), Layout(), Training(global_batch_size=8))
    with pytest.raises(InputError, match="Training.global_batch_size"):
        estimate(Cluster(gpu="H100", gpus=8), _llama(), Layout(), Training(seq_len=4096))


def test_batch_must_divide():
    with pytest.raises(InputError) as err:
        estimate(Cluster(gpu="H100", gpus=24), _llama(), Layout(tp=8), Training(seq_len=4096, global_batch_size=512))
    assert "global_batch_size(512) % (micro_batch_size(1) * dp(3)) = 2" in str(err.value)


def test_world_size_mismatch_raises():
    with pytest.raises(InputError, match=r"tp\(8\) \* cp\(1\) \* pp\(1\) \* dp\(4\) = 32 != world\(64\)"):
        estimate(Cluster(gpu="H100", gpus=64), _llama(), Layout(tp=8, dp=4), Training(seq_len=4096, global_batch_size=64))
    with pytest.raises(InputError, match=r"Layout.dp[\s\S]*world\(64\) % \(tp\(3\) \* cp\(1\) \* pp\(1\)\) = 1"):
        estimate(Cluster(gpu="H100", gpus=64), _llama(), Layout(tp=3), Training(seq_len=4096, global_batch_size=64))
