"""Measured kernel profiles (advisor.inputs.profile) and the cost model that reads them
(advisor.costmodel.kernels): curves reproduce their nodes, rescale to another GPU by its datasheet,
price each GEMM by its shape, and the host's time to issue a layer bounds the step."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import advisor
from advisor import Assumptions, Cluster, Layout, Model, Training
from advisor.costmodel.context import resolve
from advisor.costmodel.kernels import combine_host, host_layer_seconds, parts
from advisor.errors import InputError
from advisor.inputs.coerce import as_cluster
from advisor.inputs.profile import Grid, Profile, profile_for, shipped_profile

H200 = Cluster(gpu="H200", gpus=8)
SMALL = Model(layers=4, hidden=1024, heads=16, ffn_hidden=2816, vocab=32000)


def _flat(profile: Profile, eff: float) -> Profile:
    """`profile` with every GEMM and attention curve at one efficiency."""
    def flat(g: Grid) -> Grid:
        return Grid(x=g.x, y=g.y, values=tuple(tuple(eff for _ in row) for row in g.values), small="clamp")
    return profile.model_copy(update={
        "gemm": {k: flat(g) for k, g in profile.gemm.items()}, "grouped_gemm": flat(profile.grouped_gemm),
        "attention": {b: {d: flat(g) for d, g in by_d.items()} for b, by_d in profile.attention.items()}})


# ------------------------------------------------------------------------------ curves

def test_a_grid_reproduces_its_nodes_and_interpolates_between_them():
    g = Grid(x=(10.0, 11.0, 12.0), y=(5.0, 6.0), values=((0.2, 0.4, 0.8), (0.1, 0.2, 0.4)))
    assert g.at(2.0 ** 11, 2.0 ** 5) == pytest.approx(0.4)
    assert g.at(2.0 ** 12, 2.0 ** 6) == pytest.approx(0.4)
    mid = g.at(2.0 ** 10.5, 2.0 ** 5)
    assert 0.2 < mid < 0.4 and mid == pytest.approx(math.sqrt(0.2 * 0.4))    # log-linear
    assert g.at(2.0 ** 20, 2.0 ** 9) == pytest.approx(0.4)                    # clamped beyond the table


def test_below_the_table_a_kernel_keeps_its_time():
    """Towards less work a kernel's time stops falling (launch and tail waves): the efficiency falls
    with the work, so half the FLOPs take the same time."""
    g = Grid(x=(20.0, 21.0), y=(0.0,), values=((0.5, 0.6),))
    t = lambda flops: flops / g.at(flops)  # noqa: E731 - seconds x peak
    assert t(2.0 ** 18) == pytest.approx(t(2.0 ** 20))
    clamp = Grid(x=(20.0, 21.0), y=(0.0,), values=((0.5, 0.6),), small="clamp")
    assert clamp.at(2.0 ** 18) == pytest.approx(0.5)


def test_the_shipped_profile_reproduces_the_released_gemm_rows_it_was_built_from():
    p = shipped_profile()
    assert p.derived_from is None and p.label == "h200-2026-12 (measured)"
    # an 8192^3 bf16 GEMM reached 0.64-0.66 of the 989 TFLOP/s peak (both H200 measurements)
    assert 0.6 < p.gemm["bf16"].at(2 * 8192.0 ** 3, 8192) < 0.72
    assert p.gemm["fp8"].at(2 * 8192.0 ** 3, 8192) < p.gemm["bf16"].at(2 * 8192.0 ** 3, 8192) + 0.1
    # small GEMMs are far less efficient than large ones
    assert p.gemm["bf16"].at(2 * 256.0 * 1024 * 1024, 1024) < 0.3


def test_another_gpu_gets_the_measurement_rescaled_and_says_derived():
    a100 = profile_for(Cluster(gpu="A100-80GB", gpus=8).gpu)
    h200 = profile_for(H200.gpu)
    assert h200 is shipped_profile()
    assert a100.derived_from and "derived" in a100.label and a100.gpu == "A100-80GB"
    # time-equivalent work: the A100 (312 TFLOP/s) reaches at 1 GFLOP what the H200 reaches at ~3.2
    assert a100.gemm["bf16"].at(1e9, 4096) == pytest.approx(h200.gemm["bf16"].at(1e9 * 989 / 312, 4096), rel=0.02)
    assert a100.host == h200.host       # the host's costs are the CPU's


def test_the_estimate_names_its_profile_and_the_trace_too():
    est = advisor.estimate(Cluster(gpu="A100-80GB", gpus=8), "llama-2-7b", Layout(zero_stage=1),
                           Training(seq_len=4096, global_batch_size=64))
    assert "derived" in est.profile
    rec = advisor.recommend(Cluster(gpu="H200", gpus=8), "llama-3-8b", Training(seq_len=4096))
    assert rec.trace.input.profile == "h200-2026-12 (measured)"


def test_a_profile_file_is_read_and_a_bad_one_is_refused_by_field(tmp_path):
    good = tmp_path / "p.json"
    slow = _flat(shipped_profile(), 0.2).model_copy(update={"name": "slow"})
    good.write_text(json.dumps(slow.model_dump(mode="json")))
    cl = Cluster(gpu="H200", gpus=8, profile=str(good))
    assert cl.profile.name == "slow"
    lay, tr = Layout(zero_stage=1), Training(seq_len=4096, global_batch_size=64)
    assert advisor.estimate(cl, "llama-3-8b", lay, tr).compute_time > advisor.estimate(H200, "llama-3-8b", lay, tr).compute_time
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**slow.model_dump(mode="json"), "memory_bandwidth": -1}))
    # what callers pass (a dict) is refused with the profile's field and the file named
    with pytest.raises(InputError) as err:
        as_cluster({"gpu": "H200", "gpus": 8, "profile": str(bad)})
    assert err.value.field == "Cluster.profile.memory_bandwidth" and err.value.have == str(bad)
    with pytest.raises(InputError, match="Cluster.profile"):
        as_cluster({"gpu": "H200", "gpus": 8, "profile": str(tmp_path / "missing.json")})


# ------------------------------------------------------------------------------ GEMMs by shape

def _ctx(model=SMALL, stack="megatron", **layout):
    framework = "megatron" if stack == "megatron" else "torchtitan"
    return resolve(H200, model, Layout(framework=framework, **layout), Training(seq_len=2048, global_batch_size=8))


def test_at_one_efficiency_every_pass_costs_its_flops():
    c = _ctx()
    # another profile than the cluster's: a memo of its own (the shared one holds the cluster profile's terms)
    c.__dict__.update(prof=_flat(shipped_profile(), 0.5), memo={})
    p = parts(c)
    want = p.attention.flops / (989e12 * 0.5)
    assert p.attention.fwd == pytest.approx(want) and p.attention.dgrad == pytest.approx(want)
    assert p.attention.wgrad == pytest.approx(want)


def test_separate_projections_cost_at_least_the_fused_ones():
    """Megatron-Core fuses Q, K, V into one GEMM and gate + up into another; plain PyTorch runs
    them separately: the same FLOPs, in smaller GEMMs that the curve prices no cheaper."""
    fused, eager = parts(_ctx(stack="megatron")), parts(_ctx(stack="eager"))
    assert fused.attention.flops == pytest.approx(eager.attention.flops)
    assert fused.mlp.flops == pytest.approx(eager.mlp.flops)
    assert eager.attention.fwd >= fused.attention.fwd and eager.mlp.fwd >= fused.mlp.fwd


def test_fewer_tokens_per_expert_run_grouped_gemms_less_efficiently():
    mixtral = Model.preset("mixtral-8x7b")
    few = parts(resolve(Cluster(gpu="H200", gpus=8), mixtral, Layout(ep=8, etp=1), Training(seq_len=512, global_batch_size=8)))
    many = parts(resolve(Cluster(gpu="H200", gpus=8), mixtral, Layout(ep=8, etp=1), Training(seq_len=8192, global_batch_size=8)))
    assert few.moe.fwd / few.moe.flops > many.moe.fwd / many.moe.flops


# ------------------------------------------------------------------------------ the host-issue floor

@given(st.floats(0, 10), st.floats(0, 10), st.floats(1, 64))
@settings(max_examples=200, deadline=None)
def test_host_and_gpu_combine_between_the_larger_and_the_sum(g, h, p):
    t = combine_host(g, h, p)
    assert max(g, h) - 1e-12 <= t <= g + h + 1e-12
    assert t == pytest.approx(combine_host(h, g, p))


def test_a_small_eager_layer_is_bound_by_the_host():
    """A hidden-1024 layer on one H200: the GPU needs well under a millisecond, the host ~3.5 ms to
    issue its ~96 kernels (the measured H200 rows); CUDA graphs remove the host's share."""
    lay = Layout(framework="torchtitan", micro_batch_size=1)
    tr = Training(seq_len=1024, global_batch_size=1)
    c = resolve(Cluster(gpu="H200", gpus=1), SMALL, lay, tr)
    host = host_layer_seconds(c, False)
    assert host == shipped_profile().host.eager_layer
    est = advisor.estimate(Cluster(gpu="H200", gpus=1), SMALL, lay, tr)
    assert est.compute_time >= SMALL.layers * host
    graphs = advisor.estimate(Cluster(gpu="H200", gpus=1), SMALL, lay, tr.model_copy(update={"cuda_graphs": True}))
    off = advisor.estimate(Cluster(gpu="H200", gpus=1), SMALL, lay, tr, Assumptions(host_floor=False))
    assert graphs.compute_time == pytest.approx(off.compute_time) and graphs.compute_time < 0.5 * est.compute_time


def test_the_host_floor_leaves_a_large_layer_alone():
    lay, tr = Layout(tp=8, sp=True, zero_stage=1), Training(seq_len=8192, global_batch_size=64)
    on = advisor.estimate(Cluster(gpu="H100", gpus=64), "llama-3-70b", lay, tr)
    off = advisor.estimate(Cluster(gpu="H100", gpus=64), "llama-3-70b", lay, tr, Assumptions(host_floor=False))
    assert off.compute_time <= on.compute_time < 1.01 * off.compute_time


# ------------------------------------------------------------------------------ measured collectives

def test_measured_collectives_replace_the_assumed_nvlink_share():
    """A profile measured under torchrun on one node carries the bus bandwidth of its collectives:
    bulk ones time TP and DP traffic inside the NVLink domain, all-to-all the MoE exchange, instead
    of Assumptions' shares of the link."""
    from advisor.inputs.profile import Collective
    slow = shipped_profile().model_copy(update={"name": "node", "collectives": (
        Collective(op="all_reduce", ranks=8, bytes=(1e6, 2.7e8), bus_bandwidth=(5e10, 1.8e11)),
        Collective(op="all_to_all", ranks=8, bytes=(1e6, 2.7e8), bus_bandwidth=(4e10, 9e10)))})
    lay, tr = Layout(tp=8, sp=True, zero_stage=1), Training(seq_len=8192, global_batch_size=64)
    base = advisor.estimate(Cluster(gpu="H100", gpus=8), "llama-3-8b", lay, tr)
    node = advisor.estimate(Cluster(gpu="H100", gpus=8, profile=slow), "llama-3-8b", lay, tr)
    assumed = 450e9 * Assumptions().nvlink_efficiency          # H100: 900 GB/s both ways
    assert node.comm.tp.bytes == base.comm.tp.bytes
    lat = base.comm.tp.seconds - base.comm.tp.bytes / assumed    # the calls' latency, the same in both
    assert node.comm.tp.seconds - lat == pytest.approx(base.comm.tp.bytes / 1.8e11, rel=1e-6)
    moe = Layout(ep=8, etp=1, zero_stage=1)
    a = advisor.estimate(Cluster(gpu="H100", gpus=8), "mixtral-8x7b", moe, tr)
    b = advisor.estimate(Cluster(gpu="H100", gpus=8, profile=slow), "mixtral-8x7b", moe, tr)
    assert b.comm.ep.seconds > a.comm.ep.seconds       # 90 GB/s measured < 0.55 x 450 GB/s assumed


def test_a_head_dim_between_the_measured_ones_interpolates():
    p = shipped_profile()
    lo = p.attention_efficiency("cudnn", 64, 1e11, 4096)
    hi = p.attention_efficiency("cudnn", 128, 1e11, 4096)
    mid = p.attention_efficiency("cudnn", 96, 1e11, 4096)
    assert min(lo, hi) < mid < max(lo, hi)
    assert p.attention_efficiency("cudnn", 256, 1e11, 4096) == hi      # beyond the table: the nearest
