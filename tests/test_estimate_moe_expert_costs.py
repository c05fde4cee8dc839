"""The per-expert GEMM cost (Assumptions.expert_gemm_overhead) and the MoE exchange's NVLink share
(Assumptions.ep_nvlink_efficiency)."""

import pytest

import advisor
from advisor import Cluster, Layout, Model, Training
from advisor.costmodel import Assumptions

QWEN30 = Model.preset("qwen3-30b-a3b")      # 48 MoE layers, 128 experts, top-8
H100x8 = Cluster(gpu="H100-SXM-80GB", gpus=8)
TRAIN = Training(seq_len=4096, global_batch_size=64)


def _layout(ep: int, **kw) -> Layout:
    return Layout(framework="megatron", tp=1, pp=1, dp=8, ep=ep, etp=1, micro_batch_size=1, zero_stage=1, **kw)


def _compute(layout: Layout, **assume) -> float:
    # without the host floor, whose combination with the GPU time is not additive (kernels.combine_host)
    return advisor.estimate(H100x8, QWEN30, layout, TRAIN, Assumptions(host_floor=False, **assume)).compute_time


@pytest.mark.parametrize("recompute,modules,passes", [
    ("none", ("core_attn",), 3),           # forward, data gradient, weight gradient
    ("full", ("core_attn",), 4),           # and the recompute forward
    ("selective", ("moe",), 4),            # the checkpointed MoE layer runs its experts forward again
    ("selective", ("core_attn",), 3),      # no expert GEMM is recomputed
])
def test_each_local_expert_gemm_pays_the_overhead_once_per_pass(recompute, modules, passes):
    layout = _layout(8, recompute=recompute)
    base = _compute(layout, expert_gemm_overhead=0.0, recompute_modules=modules)
    more = _compute(layout, expert_gemm_overhead=1e-5, recompute_modules=modules)
    m = 64 // 8                               # micro-batches per step
    calls = m * QWEN30.layers * 2 * (128 // 8) * passes   # FC1 + FC2 of 16 local experts per MoE layer
    assert more - base == pytest.approx(calls * 1e-5, rel=1e-9)


def test_fewer_local_experts_pay_less():
    # EP 8 holds 16 experts per rank, EP 1 all 128: the same FLOPs, 8x the expert GEMM calls
    def extra(ep):
        lay = _layout(ep)
        return _compute(lay) - _compute(lay, expert_gemm_overhead=0.0)
    assert extra(1) == pytest.approx(8 * extra(8), rel=1e-9)


def test_dense_models_do_not_pay_it():
    model = Model.preset("llama-3-8b")
    layout = Layout(framework="megatron", tp=1, pp=1, dp=8, micro_batch_size=1, zero_stage=1)
    a = advisor.estimate(H100x8, model, layout, TRAIN).step_time
    b = advisor.estimate(H100x8, model, layout, TRAIN, Assumptions(expert_gemm_overhead=1e-3)).step_time
    assert a == b


def test_the_moe_exchange_runs_at_its_own_nvlink_share():
    layout = _layout(8)
    slow = advisor.estimate(H100x8, QWEN30, layout, TRAIN, Assumptions(ep_nvlink_efficiency=0.4))
    fast = advisor.estimate(H100x8, QWEN30, layout, TRAIN, Assumptions(ep_nvlink_efficiency=0.8))
    lat = Assumptions().latency_nvlink * 4 * QWEN30.layers * (64 // 8)   # one call per all-to-all
    assert (slow.comm.ep.seconds - lat) == pytest.approx(2 * (fast.comm.ep.seconds - lat), rel=1e-9)
    assert slow.comm.ep.bytes == fast.comm.ep.bytes
    # the bulk collectives keep nvlink_efficiency
    assert slow.comm.dp.seconds == fast.comm.dp.seconds
