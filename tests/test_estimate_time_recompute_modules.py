"""The time model charges what selective recompute's `Assumptions.recompute_modules` re-run
(costmodel/flops.py `selective_extra`, costmodel/time.py `_ep_per_microbatch`), each expectation worked out by hand:

- GEMM FLOPs: 2 per parameter per token forward, one more forward per recomputed module
  (Korthikanti et al. 2022 §5; the module's convention, Narayanan et al. 2021 Eq. 3);
- element-wise kernels: a third of `elementwise_traffic` x the module's stored bytes per token;
- "moe": Megatron-Core's MoE checkpoint re-runs dispatch and combine (moe_layer.py), 6 all-to-alls
  per MoE layer instead of 4;
- the default ("core_attn",) is the old path (tests/test_estimate_speed_identity.py pins it in
  golden files; re-checked here for its selective cases), and none <= selective <= full.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import advisor
from advisor import Cluster, Layout, Model, Training
from advisor.costmodel import Assumptions
from advisor.costmodel.context import resolve
from advisor.costmodel.kernels import parts
from advisor.costmodel.sizing import size, step_and_floors
from advisor.costmodel.compute import stage_compute
from advisor.costmodel.flops import executed_flops_per_step, selective_extra
from advisor.inputs.architecture import count_parameters

MODULES = ("core_attn", "layernorm", "mla_up_proj", "mlp", "moe", "moe_act", "shared_experts")
H100 = "H100-SXM-80GB"

# one expert / dense MLP of a SwiGLU model: gate, up and down projections (no biases)
LLAMA3_8B_MLP = 3 * 4096 * 14336           # 176,160,768
MIXTRAL_EXPERT = 3 * 4096 * 14336           # Mixtral-8x7B: the same shape per expert
DSV3_EXPERT = 3 * 7168 * 2048               # DeepSeek-V3 routed / shared expert: 44,040,192
# DeepSeek-V3 MLA up projections: q_lora x heads x (nope + rope) + kv_lora x heads x (nope + v), plus
# the q/kv latent norms' weights (q_lora + kv_lora), which the model counts with the attention
DSV3_UP_PROJ = 1536 * 128 * (128 + 64) + 512 * 128 * (128 + 128) + 1536 + 512   # 54,528,000


def _A(*mods, **kw) -> Assumptions:
    return Assumptions(recompute_modules=mods, **kw)


def _llama():
    return (Cluster(gpu=H100, gpus=8), Model.preset("llama-3-8b"),
            Layout(tp=2, sp=True, zero_stage=1, recompute="selective"), Training(seq_len=8192, global_batch_size=64))


def _mixtral():
    return (Cluster(gpu=H100, gpus=16), Model.preset("mixtral-8x7b"),
            Layout(tp=2, ep=4, etp=1, sp=True, zero_stage=1, recompute="selective"),
            Training(seq_len=4096, global_batch_size=64))


def _deepseek():
    return (Cluster(gpu=H100, gpus=64), Model.preset("deepseek-v3"),
            Layout(tp=2, pp=8, ep=8, etp=1, sp=True, zero_stage=1, recompute="selective"),
            Training(seq_len=4096, global_batch_size=64))


def _executed(setup, A, recompute=None) -> float:
    cluster, model, layout, training = setup
    if recompute is not None:
        layout = layout.model_copy(update={"recompute": recompute})
    return executed_flops_per_step(resolve(cluster, model, layout, training), A)


def _est(setup, A, recompute=None):
    cluster, model, layout, training = setup
    if recompute is not None:
        layout = layout.model_copy(update={"recompute": recompute})
    return advisor.estimate(cluster, model, layout, training, A)


# ------------------------------------------------------------------------------ the default path

def test_the_parameter_counts_used_below():
    assert count_parameters(Model.preset("llama-3-8b")).dense_mlp == LLAMA3_8B_MLP
    assert count_parameters(Model.preset("mixtral-8x7b")).expert == MIXTRAL_EXPERT
    pc = count_parameters(Model.preset("deepseek-v3"))
    assert pc.expert == DSV3_EXPERT
    # attention = q down (h x q_lora) + kv down (h x (kv_lora + rope)) + up projections + out (heads x v x h)
    assert pc.attention == 7168 * (1536 + 512 + 64) + DSV3_UP_PROJ + 128 * 128 * 7168


def test_default_modules_add_nothing():
    for setup in (_llama(), _mixtral(), _deepseek()):
        cluster, model, layout, training = setup
        c = resolve(cluster, model, layout, training)
        assert selective_extra(c, Assumptions()) is None
        assert selective_extra(c, _A("core_attn")) is None
        with pytest.raises(ValueError, match="each module once"):      # a module named twice is refused (issue 38)
            _A("core_attn", "core_attn")
        # other recompute levels never take the selective branch, whatever the modules
        for r in ("none", "full"):
            assert selective_extra(resolve(cluster, model, layout.model_copy(update={"recompute": r}), training),
                                    _A(*MODULES)) is None


def test_selective_cases_of_the_golden_files_are_unchanged():
    """The default path evaluates the expressions it always did: the golden files of
    tests/test_estimate_speed_identity.py, for its selective-recompute cases."""
    from golden_files import check, estimate_data
    from test_estimate_speed_identity import CASES, case_objects, golden_name

    checked = 0
    for case in CASES:
        cluster, model, layout, training, A = case_objects(case)
        if layout.recompute != "selective":
            continue
        check(golden_name(case), estimate_data(advisor.estimate(cluster, model, layout, training, A)))
        checked += 1
    assert checked >= 3


def test_executed_flops_of_the_default_selective_path_by_hand():
    """HFU numerator for llama-3-8b, selective ("core_attn"): 3 x the linear layers, 4 x the
    attention scores (recomputed once), the logits over the padded vocabulary, per token."""
    setup = _llama()
    c = resolve(*setup)
    pc = count_parameters(Model.preset("llama-3-8b"))
    h, s, gbs = 4096, 8192, 64
    lin = 32 * 2.0 * (pc.attention + pc.dense_mlp)
    attn = 32 * 2.0 * s * (4096 + 4096)     # QK^T and AV over the full s x s: 2 s (wq + wo) per layer
    want = (3 * lin + 4 * attn + 6.0 * h * c.vpad) * gbs * s
    assert _executed(setup, Assumptions()) == pytest.approx(want, rel=1e-12)


# ------------------------------------------------------------------------------ "mlp"

def test_mlp_adds_the_dense_mlp_forward_exactly():
    setup = _llama()
    cluster, model, layout, training = setup
    # without the host floor, whose combination with the GPU time is not additive (kernels.combine_host)
    base, mlp = Assumptions(host_floor=False), _A("core_attn", "mlp", host_floor=False)
    # cluster-wide executed FLOPs: + 2 x MLP parameters per token per layer
    extra = _executed(setup, mlp) - _executed(setup, base)
    assert extra == pytest.approx(2.0 * LLAMA3_8B_MLP * 32 * 64 * 8192, rel=1e-9)

    # one rank, one micro-batch (s x b / t tokens on the rank): the FLOPs and their time, by hand
    c = resolve(cluster, model, layout, training)
    t0, f0, a0 = stage_compute(c, base, 32, 0, True)
    t1, f1, a1 = stage_compute(c, mlp, 32, 0, True)
    tokens = 8192 * 1 / 2
    d_flops = 2.0 * LLAMA3_8B_MLP * 32 * tokens
    assert f1 - f0 == pytest.approx(d_flops, rel=1e-9)
    assert a1 == a0     # the attention core is untouched
    h, f, t = 4096, 14336, 2
    ew = 32 * (2.0 * h / t + (4.0 + 2.0) * f / t) / 3.0     # norm output (SP-sharded) + FC1 out + FC2 in
    # the recomputed GEMMs at the layer's forward GEMM rate by the profile's curves (kernels.parts)
    p = parts(c)
    fwd_rate = (p.attention.flops + p.mlp.flops) / (p.attention.fwd + p.mlp.fwd)
    d_time = d_flops / fwd_rate + base.elementwise_traffic * ew * 8192 / (c.hbm * base.hbm_efficiency)
    assert t1 - t0 == pytest.approx(d_time, rel=1e-9)

    # through the public API: m micro-batches of the one stage, and HFU's numerator
    e0, e1 = _est(setup, base), _est(setup, mlp)
    assert e1.compute_time - e0.compute_time == pytest.approx(e0.num_microbatches * d_time, rel=1e-9)
    for e, A in ((e0, base), (e1, mlp)):
        assert e.hfu * e.step_time * c.world * c.peak == pytest.approx(_executed(setup, A), rel=1e-12)
    assert e1.mfu < e0.mfu and e1.model_flops == e0.model_flops


def test_mlp_without_core_attn_keeps_the_attention_core():
    """("mlp",) alone: Megatron recomputes the MLP but not the attention core, so the attention
    FLOPs are 3 x forward as without recompute."""
    setup = _llama()
    none = _executed(setup, Assumptions(), recompute="none")
    assert _executed(setup, _A("mlp")) - none == pytest.approx(2.0 * LLAMA3_8B_MLP * 32 * 64 * 8192, rel=1e-9)
    # an empty module list recomputes nothing: the same step as no recompute
    assert _est(setup, _A()).step_time == _est(setup, Assumptions(), recompute="none").step_time
    assert _executed(setup, _A()) == none


def test_mlp_recompute_in_moe_layers_is_nothing():
    """Megatron-Core sets recompute_mlp only for a dense MLP (transformer_layer.py), so "mlp" costs
    an all-MoE model like Mixtral nothing."""
    setup = _mixtral()
    e0, e1 = _est(setup, Assumptions()), _est(setup, _A("core_attn", "mlp"))
    assert (e1.step_time, e1.compute_time, e1.hfu) == (e0.step_time, e0.compute_time, e0.hfu)


# ------------------------------------------------------------------------------ "moe", "shared_experts"

def test_moe_adds_router_and_experts_and_the_dispatch_again():
    setup = _mixtral()
    base, moe = Assumptions(), _A("core_attn", "moe")
    h, E, k = 4096, 8, 2
    extra = _executed(setup, moe) - _executed(setup, base)
    assert extra == pytest.approx(2.0 * (h * E + k * MIXTRAL_EXPERT) * 32 * 64 * 4096, rel=1e-9)
    e0, e1 = _est(setup, base), _est(setup, moe)
    assert e1.compute_time > e0.compute_time
    # 6 all-to-alls per MoE layer instead of 4, like full recompute's
    assert e1.comm.ep.seconds == pytest.approx(1.5 * e0.comm.ep.seconds, rel=1e-12)
    assert e1.comm.ep.bytes == pytest.approx(1.5 * e0.comm.ep.bytes, rel=1e-9)
    full = _est(setup, base, recompute="full")
    assert e1.comm.ep.seconds == pytest.approx(full.comm.ep.seconds, rel=1e-12)


def test_shared_experts_and_moe_on_deepseek_v3():
    setup = _deepseek()
    base = Assumptions()
    n_moe, tokens = 61 - 3, 64 * 4096
    shared = _executed(setup, _A("core_attn", "shared_experts")) - _executed(setup, base)
    assert shared == pytest.approx(2.0 * 1 * DSV3_EXPERT * n_moe * tokens, rel=1e-9)
    moe = _executed(setup, _A("core_attn", "moe")) - _executed(setup, base)
    assert moe == pytest.approx(2.0 * (7168 * 256 + (8 + 1) * DSV3_EXPERT) * n_moe * tokens, rel=1e-9)
    # "moe" already re-runs the shared experts; adding "shared_experts" or "moe_act" charges nothing more
    e_moe = _est(setup, _A("core_attn", "moe"))
    for mods in (("core_attn", "moe", "shared_experts"), ("core_attn", "moe", "moe_act", "shared_experts")):
        e = _est(setup, _A(*mods))
        assert (e.compute_time, e.hfu, e.comm.ep.seconds) == (e_moe.compute_time, e_moe.hfu, e_moe.comm.ep.seconds)
    # shared experts alone do not re-run the dispatch
    assert _est(setup, _A("core_attn", "shared_experts")).comm.ep.seconds == _est(setup, base).comm.ep.seconds


def test_mla_up_proj_on_deepseek_v3():
    setup = _deepseek()
    extra = _executed(setup, _A("core_attn", "mla_up_proj")) - _executed(setup, Assumptions())
    assert extra == pytest.approx(2.0 * DSV3_UP_PROJ * 61 * 64 * 4096, rel=1e-9)
    # NeMo 2's DeepSeek-V3 recipe, recompute_modules = ["mla_up_proj", "layernorm"]: no core_attn, so
    # over no recompute only the up projections' FLOPs; "layernorm" re-runs two TENorms of an MoE layer
    # (MLA input norm, pre-MLP norm) and one of a dense layer, element-wise only
    recipe = _A("mla_up_proj", "layernorm")
    extra = _executed(setup, recipe) - _executed(setup, Assumptions(), recompute="none")
    assert extra == pytest.approx(2.0 * DSV3_UP_PROJ * 61 * 64 * 4096, rel=1e-9)
    c = resolve(*setup)
    _, n_dense, n_moe = c.split[0]          # first stage: the 3 dense layers and some MoE layers
    assert n_dense == 3 and n_moe > 0
    # without the host floor, whose combination with the GPU time is not additive (kernels.combine_host)
    up = _A("mla_up_proj", host_floor=False)
    t_up = stage_compute(c, up, n_dense, n_moe, False)[0]
    t_recipe = stage_compute(c, _A("mla_up_proj", "layernorm", host_floor=False), n_dense, n_moe, False)[0]
    rate = up.elementwise_traffic * 4096 / (c.hbm * up.hbm_efficiency)
    assert t_recipe - t_up == pytest.approx((n_dense * 1 + n_moe * 2) * 2.0 * 7168 / 2 / 3.0 * rate, rel=1e-9)
    # not an MLA model: nothing to recompute (Megatron-Core rejects the option there)
    e0, e1 = _est(_llama(), Assumptions()), _est(_llama(), _A("core_attn", "mla_up_proj"))
    assert (e1.step_time, e1.hfu) == (e0.step_time, e0.hfu)


# ------------------------------------------------------------------------------ element-wise only

def test_layernorm_and_moe_act_cost_element_wise_time_only():
    setup = _mixtral()
    cluster, model, layout, training = setup
    c = resolve(cluster, model, layout, training)
    base = Assumptions(host_floor=False)    # (kernels.combine_host is not additive)
    t0, f0, _ = stage_compute(c, base, 0, 32, True)
    h, t, f_moe, k = 4096, 2, 14336, 2
    T = 4096 * 1
    rate = base.elementwise_traffic * T / (c.hbm * base.hbm_efficiency)
    per_layer = {
        "layernorm": 2.0 * h / t,          # the MoE layer's pre-MLP TENorm output, SP-sharded
        "moe_act": 2.0 * f_moe * k / t,    # the routed experts' activation output (FC2 input)
    }
    for mod, nbytes in per_layer.items():
        A = _A("core_attn", mod, host_floor=False)
        t1, f1, _ = stage_compute(c, A, 0, 32, True)
        assert f1 == f0, mod                                          # no FLOPs
        assert t1 - t0 == pytest.approx(32 * nbytes / 3.0 * rate, rel=1e-9), mod
        assert _executed(setup, A) == _executed(setup, base)
        # with the element-wise term off they cost nothing at all
        off = dict(elementwise_traffic=0.0, host_floor=False)
        assert (stage_compute(c, _A("core_attn", mod, **off), 0, 32, True)
                == stage_compute(c, Assumptions(**off), 0, 32, True))
    # a Llama layer's norms are fused into the next linear (TELayerNormColumnParallelLinear): nothing
    e0, e1 = _est(_llama(), base), _est(_llama(), _A("core_attn", "layernorm", host_floor=False))
    assert (e1.step_time, e1.compute_time, e1.hfu, e1.memory.total) == (
        e0.step_time, e0.compute_time, e0.hfu, e0.memory.total)


# ------------------------------------------------------------------------------ none <= selective <= full

def _setups():
    yield _llama()
    yield (Cluster(gpu=H100, gpus=16), Model.preset("llama-3-8b"), Layout(tp=8, pp=2, recompute="selective"),
           Training(seq_len=4096, global_batch_size=32, flash_attention=False))
    yield _mixtral()
    yield (Cluster(gpu=H100, gpus=16), Model.preset("mixtral-8x7b"), Layout(tp=1, ep=8, recompute="selective"),
           Training(seq_len=4096, global_batch_size=64, precision="fp8"))
    yield _deepseek()
    yield (Cluster(gpu="A100-80GB", gpus=64), Model.preset("gpt-3-175b"),
           Layout(tp=8, pp=8, sp=True, zero_stage=1, recompute="selective"),
           Training(seq_len=2048, global_batch_size=64, flash_attention=False))


SETUPS = list(_setups())
PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(st.sampled_from(range(len(SETUPS))), st.sets(st.sampled_from(MODULES)), st.booleans())
def test_selective_lies_between_none_and_full(i, mods, elementwise):
    cluster, model, layout, training = SETUPS[i]
    A = _A(*sorted(mods)) if elementwise else _A(*sorted(mods), elementwise_traffic=0.0)
    ests = {r: advisor.estimate(cluster, model, layout.model_copy(update={"recompute": r}), training, A)
            for r in ("none", "selective", "full")}
    for key in ("compute_time", "step_time"):   # the planner's bisection takes more recompute as never faster
        lo, mid, hi = (getattr(ests[r], key) for r in ("none", "selective", "full"))
        assert lo <= mid <= hi, (key, mods)
    lo, mid, hi = (ests[r].hfu * ests[r].step_time for r in ("none", "selective", "full"))
    assert lo <= mid * (1 + 1e-12) and mid <= hi * (1 + 1e-12), mods
    lo, mid, hi = (ests[r].comm.ep.seconds for r in ("none", "selective", "full"))
    assert lo <= mid <= hi
    # every stage, one micro-batch: time and executed FLOPs
    for r_lo, r_hi in (("none", "selective"), ("selective", "full")):
        c_lo = resolve(cluster, model, layout.model_copy(update={"recompute": r_lo}), training)
        c_hi = resolve(cluster, model, layout.model_copy(update={"recompute": r_hi}), training)
        for k, (_, n_dense, n_moe) in enumerate(c_lo.split):
            last = k == c_lo.pp - 1
            a, b = stage_compute(c_lo, A, n_dense, n_moe, last), stage_compute(c_hi, A, n_dense, n_moe, last)
            assert a[0] <= b[0] and a[1] <= b[1], (r_lo, r_hi, k, mods)


@pytest.mark.parametrize("i", range(len(SETUPS)))
def test_selective_lies_between_none_and_full_for_every_module_set(i):
    """All 128 subsets of the modules, with and without the element-wise term: compute time and
    step time never fall with more recompute (the planner's bisection over the levels relies on it)."""
    cluster, model, layout, training = SETUPS[i]
    levels = ("none", "selective", "full")
    for ew in (True, False):
        for r in range(len(MODULES) + 1):
            for mods in itertools.combinations(MODULES, r):
                A = _A(*mods) if ew else _A(*mods, elementwise_traffic=0.0)
                ests = [advisor.estimate(cluster, model, layout.model_copy(update={"recompute": lv}), training, A)
                        for lv in levels]
                for key in ("compute_time", "step_time"):
                    lo, mid, hi = (getattr(e, key) for e in ests)
                    assert lo <= mid <= hi, (key, ew, mods, lo, mid, hi)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(SETUPS))), st.sets(st.sampled_from(MODULES), min_size=1),
       st.sampled_from(["none", "selective"]))
def test_the_planner_floor_stays_below_every_variant(i, mods, recompute):
    """time.variant_floors bounds the variants with as much or more recompute, for any modules."""
    cluster, model, layout, training = SETUPS[i]
    A = _A(*sorted(mods))
    layout = layout.model_copy(update={"recompute": recompute})
    variants = [(1, 1), (2, 1)]
    step, floors = step_and_floors(size(cluster, model, layout, training, A), variants)
    assert floors[1, 1] <= step * (1 + 1e-12)
    more = ("none", "selective", "full")[("none", "selective", "full").index(recompute):]
    for (b, v) in variants:
        for r in more:
            variant = layout.model_copy(update={"micro_batch_size": b, "recompute": r})
            try:
                got = advisor.estimate(cluster, model, variant, training, A).step_time
            except advisor.errors.InputError:
                continue
            assert floors[b, v] <= got * (1 + 1e-12), (mods, b, r)


def _tp_bytes(cluster, model, layout, training, A=None) -> int:
    return advisor.estimate(cluster, model, layout, training, A).comm.tp.bytes


def test_selective_mlp_repeats_half_of_the_forward_tp_collectives_full_recompute_repeats():
    """Recomputing the MLP re-runs its linear layers' all-gather and reduce-scatter (SP): one of the
    layer's two forward pairs, where full recompute re-runs both (comm.tp_plan)."""
    cluster, model, layout, training = _llama()
    base = _tp_bytes(cluster, model, layout, training)
    mlp = _tp_bytes(cluster, model, layout, training, _A("core_attn", "mlp"))
    full = _tp_bytes(cluster, model, layout.model_copy(update={"recompute": "full"}), training)
    assert mlp > base
    assert mlp - base == pytest.approx((full - base) / 2, rel=1e-9)


def test_shared_experts_carry_the_mlp_half_of_tp_traffic_whatever_the_expert_tp():
    """Shared experts are an MLP on the TP group (Megatron-Core SharedExpertMLP), so with etp 1 an
    MoE layer with them moves what one without them moves with expert TP over the whole TP group."""
    cluster, model, layout, training = _deepseek()
    no_shared = model.model_copy(update={"shared_experts": 0})
    with_shared = _tp_bytes(cluster, model, layout, training)
    assert with_shared > _tp_bytes(cluster, no_shared, layout, training)
    # (etp 2 needs ep 4 here: etp * ep * pp must divide the 64 GPUs; TP traffic does not read ep)
    assert with_shared == _tp_bytes(cluster, no_shared, layout.model_copy(update={"etp": 2, "ep": 4}), training)


def test_selective_moe_and_shared_experts_repeat_the_moe_layers_expert_tp_collectives():
    cluster, model, layout, training = _deepseek()
    base = _tp_bytes(cluster, model, layout, training)
    shared = _tp_bytes(cluster, model, layout, training, _A("core_attn", "shared_experts"))
    moe = _tp_bytes(cluster, model, layout, training, _A("core_attn", "moe"))
    both = _tp_bytes(cluster, model, layout, training, _A("core_attn", "moe", "shared_experts"))
    assert base < shared == moe == both       # etp 1: the shared experts' half is all "moe" adds on TP


def test_recomputed_core_attention_repeats_the_cp_rings_forward_exchange():
    """Ring attention passes K,V cp-1 hops forward and 2(cp-1) backward; a recomputed attention core
    (full, or selective with core_attn) runs the forward hops again: 4(cp-1) in all."""
    cluster, model, layout, training = _llama()
    layout = layout.model_copy(update={"tp": 2, "cp": 2})
    cluster = Cluster(gpu=H100, gpus=16)

    def cp_bytes(recompute, A=None):
        return advisor.estimate(cluster, model, layout.model_copy(update={"recompute": recompute}), training,
                                A).comm.cp.bytes

    none = cp_bytes("none")
    assert cp_bytes("selective") == cp_bytes("full") == pytest.approx(none * 4 / 3, rel=1e-12)
    assert cp_bytes("selective", _A("mlp")) == none
