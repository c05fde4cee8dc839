"""The time model against measured throughput of published runs (the calibration of
benchmarks/calibrate_throughput.py, a few points of it, with the reference figures copied here so
the test reads no data file). Each reported figure is turned into a step time with the FLOP
convention of its source; the tolerance is about twice the model's mean error on that source."""

from __future__ import annotations

import pytest

from advisor import Cluster, Layout, Model, Training
from advisor.costmodel import Assumptions, estimate

H100_PEAK = 989e12


def _gpt(layers, hidden, heads, vocab, seq):
    return Model(layers=layers, hidden=hidden, heads=heads, ffn_hidden=4 * hidden, vocab=vocab, activation="gelu",
                 norm="layernorm", bias=True, tied_embeddings=True, position_embedding="learned", max_position=seq)


def _eq3_step(layers, h, vocab, gbs, seq, tflops, gpus):
    """Narayanan et al. 2021 Eq. 3 (counts the full-recompute forward): step time from TFLOP/s/GPU."""
    flops = 96.0 * gbs * seq * layers * h * h * (1 + seq / (6 * h) + vocab / (16 * layers * h))
    return flops / (tflops * 1e12 * gpus)


def _megatron_step(layers, h, vocab, gbs, seq, tflops, gpus):
    """Megatron-LM `num_floating_point_operations` (MHA, 4h GeLU MLP): step time from TFLOP/s/GPU."""
    flops = 12.0 * gbs * seq * layers * h * h * ((2 + seq / h) + 4 + vocab / (2 * layers * h))
    return flops / (tflops * 1e12 * gpus)


# Narayanan et al. 2021 (arXiv:2104.04473) Table 1, A100 80GB, seq 2048, vocab 51200, full recompute,
# mbs 1 (assumed), no SP/distributed optimizer: (layers, hidden, heads, tp, pp, gpus, batch, TFLOP/s).
NARAYANAN = {
    "1.7B": (24, 2304, 24, 1, 1, 32, 512, 137),
    "18.4B": (40, 6144, 48, 8, 1, 256, 1024, 135),
    "145.6B": (80, 12288, 96, 8, 8, 1536, 2304, 148),
    "1008B": (128, 25600, 160, 8, 64, 3072, 3072, 163),
}


@pytest.mark.parametrize("name", list(NARAYANAN))
def test_narayanan_2021_table_1_within_12_percent(name):
    L, h, a, tp, pp, gpus, gbs, tf = NARAYANAN[name]
    model = _gpt(L, h, a, 51200, 2048)
    est = estimate(Cluster(gpu="A100-80GB", gpus=gpus), model,
                   Layout(tp=tp, pp=pp, zero_stage=0, recompute="full"),
                   Training(seq_len=2048, global_batch_size=gbs, micro_batch_size=1, flash_attention=False))
    assert est.step_time == pytest.approx(_eq3_step(L, h, 51200, gbs, 2048, tf, gpus), rel=0.12)


# Megatron-LM README "Training Speed and Scalability" (H100, vocab 131072, seq 4096, run with
# --overlap-grad-reduce --overlap-param-gather --tp-comm-overlap), model table:
# (layers, hidden, heads, tp, pp, gpus, batch, TFLOP/s/GPU, MFU). Micro-batch 1 and vpp 1 assumed.
README = {
    "1.7B": (24, 2048, 16, 1, 1, 48, 192, 408.8, 0.41),
    "16B": (32, 6144, 48, 4, 1, 192, 192, 489.1, 0.49),
    "177B": (96, 12288, 96, 8, 6, 2304, 1152, 432.8, 0.44),
}


def _readme_estimate(name):
    L, h, a, tp, pp, gpus, gbs, tf, mfu = README[name]
    return estimate(Cluster(gpu="H100", gpus=gpus), _gpt(L, h, a, 131072, 4096),
                    Layout(tp=tp, pp=pp, sp=tp > 1, zero_stage=1),
                    Training(seq_len=4096, global_batch_size=gbs, micro_batch_size=1),
                    Assumptions(tp_comm_overlap=True))


# The 1.7B row is a small dense model: the cost-model issue's target for those is 20% (benchmarks/
# calibrate_2025.py, "small dense models"). With the measured GEMM curves its GEMMs run at 0.73-0.76
# of the peak (the former fitted compute_efficiency priced them at 0.66), and the estimate is 15.4%
# short of the README's step; the larger rows keep 15%.
README_TOLERANCE = {"1.7B": 0.20}


@pytest.mark.parametrize("name", list(README))
def test_megatron_readme_h100_within_15_percent(name):
    L, h, a, tp, pp, gpus, gbs, tf, mfu = README[name]
    est = _readme_estimate(name)
    assert est.step_time == pytest.approx(_megatron_step(L, h, 131072, gbs, 4096, tf, gpus),
                                          rel=README_TOLERANCE.get(name, 0.15))
    assert tf * 1e12 / H100_PEAK == pytest.approx(mfu, abs=0.005)  # the table's MFU is over 989 TFLOP/s


def test_megatron_readme_superlinear_weak_scaling():
    """README: "MFU increases from 41% for the smallest model considered to 47-48% for the largest";
    before the element-wise term, the model had the 1.7B model at 0.67 MFU, above every larger one."""
    assert _readme_estimate("1.7B").mfu < _readme_estimate("16B").mfu
    assert _readme_estimate("1.7B").mfu < 0.5


# NeMo 24.07 performance summary (docs/source/performance/performance_summary.md, DGX-H100, FP8,
# "Pretraining"): tokens/s/GPU. NeMo 1.x keeps bf16 gradients (distributed fused Adam).
NEMO_A = Assumptions(megatron_main_grad_bytes=2.0)


def test_nemo_2407_llama2_7b_fp8_tokens_per_second():
    est = estimate(Cluster(gpu="H100", gpus=8), Model.preset("llama-2-7b"), Layout(zero_stage=1),
                   Training(seq_len=4096, global_batch_size=128, micro_batch_size=1, precision="fp8"), NEMO_A)
    assert est.tokens_per_second / 8 == pytest.approx(16934, rel=0.10)


def test_nemo_2407_llama2_70b_fp8_tokens_per_second():
    est = estimate(Cluster(gpu="H100", gpus=64), Model.preset("llama-2-70b"),
                   Layout(tp=4, pp=4, vpp=20, sp=True, zero_stage=1),
                   Training(seq_len=4096, global_batch_size=128, micro_batch_size=1, precision="fp8"), NEMO_A)
    assert est.tokens_per_second / 64 == pytest.approx(1728, rel=0.10)


def test_nemo_2407_gpt3_5b_fp8_tokens_per_second():
    # a small dense model (the 20% target): FP8 GEMMs at the measured sustained rate
    # (Assumptions.sustained_formats) leave the estimate 10.2% below NeMo's figure
    est = estimate(Cluster(gpu="H100", gpus=64), _gpt(24, 4096, 32, 50257, 2048), Layout(zero_stage=1),
                   Training(seq_len=2048, global_batch_size=2048, micro_batch_size=4, precision="fp8"), NEMO_A)
    assert est.tokens_per_second / 64 == pytest.approx(23406, rel=0.15)


def test_korthikanti_530b_table_5():
    """Korthikanti et al. 2022 Table 5: 530B (TP8 PP35, 280 A100s, interleaved v=3, SP + selective
    recompute) 37.83 s per iteration at batch 280."""
    est = estimate(Cluster(gpu="A100-80GB", gpus=280), _gpt(105, 20480, 128, 51200, 2048),
                   Layout(tp=8, pp=35, vpp=3, sp=True, zero_stage=0, recompute="selective"),
                   Training(seq_len=2048, global_batch_size=280, micro_batch_size=1, flash_attention=False))
    assert est.step_time == pytest.approx(37.83, rel=0.15)
