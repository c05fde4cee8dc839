"""Precision recipes (advisor.inputs.precision): what each runs at, stores, needs and exports."""

from __future__ import annotations

import pytest

import advisor
from advisor import export as ex
from advisor.inputs.layout import Layout
from advisor.costmodel import Assumptions
from advisor.inputs.precision import RECIPES, megatron_adam_dtypes
from advisor.inputs.specs import Cluster, Model, Training

B200 = Cluster(gpu="B200", gpus=8)
H100 = Cluster(gpu="H100-SXM-80GB", gpus=8)
A100 = Cluster(gpu="A100-80GB", gpus=8)
LLAMA8 = Model.preset("llama-3-8b")
DP8 = Layout(tp=1, pp=1, micro_batch_size=1, zero_stage=1)


def _training(precision: str, **kw) -> Training:
    return Training(precision=precision, seq_len=kw.pop("seq_len", 8192), global_batch_size=64, **kw)


def _errors(cluster, precision, framework="megatron") -> set[str]:
    layout = DP8.model_copy(update={"framework": framework, "recompute": "full"})
    found = advisor.audit(cluster, LLAMA8, layout, _training(precision)).findings
    return {f.rule_id for f in found if f.severity == "error"}


def test_lower_precision_gemms_are_faster_on_blackwell():
    steps = {p: advisor.estimate(B200, LLAMA8, DP8, _training(p)).step_time for p in ("bf16", "mxfp8", "nvfp4")}
    assert steps["nvfp4"] < steps["mxfp8"] < steps["bf16"]


def test_every_fp8_recipe_runs_at_the_fp8_peak_and_pays_for_its_scales():
    steps = {p: advisor.estimate(H100, LLAMA8, DP8, _training(p)).step_time
             for p in ("fp8", "fp8-delayed", "fp8-cs", "fp8-blockwise")}
    assert steps["fp8"] == steps["fp8-delayed"] == steps["fp8-cs"]        # tensor-wise scales: no bytes per element
    assert steps["fp8"] < steps["fp8-blockwise"] < steps["fp8"] * 1.01    # 4/128 byte per element of casts
    assert steps["fp8"] < advisor.estimate(H100, LLAMA8, DP8, _training("bf16")).step_time


def test_casts_cost_more_per_flop_in_thin_expert_gemms():
    # a token's cast bytes grow with the GEMM widths, its FLOPs with their products: the scale bytes that
    # blockwise adds over tensor-wise FP8 cost an MoE with narrow experts (Qwen3-30B-A3B: h 2048, experts
    # 768 wide) a larger share of its step than a dense model with a 14336-wide MLP. The fixed cost per
    # expert GEMM call (Assumptions.expert_gemm_overhead) is left out: it dilutes every share of the
    # MoE step alike and is not what this compares.
    A = advisor.Assumptions(expert_gemm_overhead=0.0)

    def scale_cost(model, layout):
        t = {p: advisor.estimate(H100, Model.preset(model), layout, _training(p, seq_len=4096), A).step_time
             for p in ("fp8-cs", "fp8-blockwise")}
        return t["fp8-blockwise"] / t["fp8-cs"] - 1
    moe = Layout(tp=1, pp=1, dp=8, ep=8, micro_batch_size=1, zero_stage=1, recompute="full")
    assert scale_cost("qwen3-30b-a3b", moe) > scale_cost("llama-3-8b", DP8) > 0


def test_scaling_factors_and_element_size_set_activation_and_weight_copy_memory():
    mem = {p: advisor.estimate(B200, LLAMA8, DP8, _training(p)).memory for p in ("fp8", "mxfp8", "nvfp4")}
    act = {p: m.activations for p, m in mem.items()}
    assert act["nvfp4"] < act["fp8"] < act["mxfp8"]
    copies = {p: m.detail["fp8_weight_copies"] for p, m in mem.items()}
    # MX/NV keep a row-wise and a column-wise copy: MXFP8 2 x (1 + 1/32), NVFP4 2 x (0.5 + 1/16) per weight
    assert copies["mxfp8"] == pytest.approx(copies["fp8"] * 2 * (1 + 1 / 32), rel=1e-6)
    assert copies["nvfp4"] == pytest.approx(copies["fp8"] * 2 * (0.5 + 1 / 16), rel=1e-6)


def test_the_output_layer_stays_16_bit():
    # a bigger vocabulary costs the same logits time at every precision: the output layer is not a TE module
    def logits_cost(precision):
        small, big = (Model.preset("llama-3-8b").model_copy(update={"vocab": v}) for v in (32768, 131072))
        t = [advisor.estimate(H100, m, DP8, _training(precision)).compute_time for m in (small, big)]
        return t[1] - t[0]
    assert logits_cost("fp8") == pytest.approx(logits_cost("bf16"), rel=0.02)


def test_fp8_needs_fp8_tensor_cores():
    assert "layout.fp8-needs-fp8-tensor-cores" in _errors(A100, "fp8-cs")
    assert not _errors(H100, "fp8-cs")


def test_mx_and_nv_formats_need_blackwell():
    for precision in ("mxfp8", "nvfp4"):
        assert "layout.block-scaled-precision-needs-blackwell" in _errors(H100, precision)
        assert not _errors(B200, precision)


def test_torchtitan_runs_its_converters_only():
    assert "torchtitan.fp8-recipes" in _errors(H100, "fp8-blockwise", "torchtitan")
    assert "torchtitan.fp8-recipes" in _errors(B200, "nvfp4", "torchtitan")
    assert not _errors(B200, "mxfp8", "torchtitan")


@pytest.mark.parametrize("precision,flags", [
    ("fp8", ["--fp8-format", "hybrid", "--fp8-recipe", "delayed"]),
    ("fp8-cs", ["--fp8-format", "hybrid", "--fp8-recipe", "tensorwise"]),
    ("fp8-blockwise", ["--fp8-format", "e4m3", "--fp8-recipe", "blockwise"]),
    ("mxfp8", ["--fp8-format", "e4m3", "--fp8-recipe", "mxfp8"]),
    ("nvfp4", ["--fp4-format", "e2m1", "--fp4-recipe", "nvfp4"]),
])
def test_megatron_export_names_the_recipe(precision, flags):
    args = ex.megatron_args(DP8.model_copy(update={"dp": 8, "num_microbatches": 8}), LLAMA8, _training(precision), B200)
    at = args.index(flags[0])
    assert args[at:at + len(flags)] == flags and "--bf16" in args


def test_every_recipe_is_named_the_same_in_the_input_and_the_table():
    assert set(Training.model_fields["precision"].annotation.__args__) == set(RECIPES)


# --- recipe settings that change memory: FP8 weights, FSDP casts, activation offload ---------------

LLAMA70 = Model.preset("llama-3-70b")
GB200_64 = Cluster(gpu="GB200", gpus=64)
FSDP64 = Layout(tp=1, pp=1, dp=64, micro_batch_size=2, zero_stage=3)
T70 = Training(precision="fp8-cs", seq_len=8192, global_batch_size=128)


def _mem(layout=FSDP64, training=T70, cluster=GB200_64, model=LLAMA70, **knobs):
    return advisor.estimate(cluster, model, layout, training, advisor.Assumptions(**knobs)).memory


def test_sharded_weights_keep_no_persistent_fp8_copy():
    # under FSDP the cast exists for the gathered layers only, not for the whole model
    assert _mem().detail["fp8_weight_copies"] == 0
    replicated = _mem(layout=Layout(tp=1, pp=1, dp=8, micro_batch_size=1, zero_stage=1), cluster=B200, model=LLAMA8)
    assert replicated.detail["fp8_weight_copies"] > 0


def test_fp8_param_gather_replaces_the_16_bit_weights():
    dp8 = Layout(tp=1, pp=1, dp=8, micro_batch_size=1, zero_stage=1)
    plain = _mem(layout=dp8, cluster=B200, model=LLAMA8, training=_training("fp8-cs"))
    fp8 = _mem(layout=dp8, cluster=B200, model=LLAMA8, training=_training("fp8-cs"), fp8_param_gather=True)
    assert fp8.weights < plain.weights
    bf16 = dict(layout=dp8, cluster=B200, model=LLAMA8, training=_training("bf16"))
    assert _mem(**bf16, fp8_param_gather=True).weights == _mem(**bf16).weights   # no low-precision GEMMs


def test_activation_offload_moves_activations_to_the_host():
    plain, off = _mem(), _mem(activation_offload_layers=40)
    assert off.activations < plain.activations
    assert off.offloaded_to_host > plain.offloaded_to_host
    # Megatron-Core offloads only without recompute and without pipeline parallelism
    for layout in (FSDP64.model_copy(update={"recompute": "full"}),
                   Layout(tp=1, pp=2, dp=32, micro_batch_size=2, zero_stage=1)):
        assert _mem(layout=layout, activation_offload_layers=40).activations == _mem(layout=layout).activations


def test_activation_offload_costs_time_only_beyond_the_compute_it_hides_behind():
    base = advisor.estimate(GB200_64, LLAMA70, FSDP64, T70).step_time
    fast = advisor.estimate(GB200_64, LLAMA70, FSDP64, T70, advisor.Assumptions(activation_offload_layers=40)).step_time
    slow_link = Cluster(gpu=GB200_64.gpu.model_copy(update={"host_bandwidth": 5e9}), gpus=64)
    slow = advisor.estimate(slow_link, LLAMA70, FSDP64, T70, advisor.Assumptions(activation_offload_layers=40)).step_time
    assert base == pytest.approx(fast, rel=1e-9) and slow > base


def test_ep_a2a_overlap_hides_at_most_its_share():
    model, cluster = Model.preset("mixtral-8x7b"), Cluster(gpu="H100-SXM-80GB", gpus=64)
    layout = Layout(tp=1, pp=1, dp=64, ep=8, micro_batch_size=1, zero_stage=1, recompute="full")
    t = Training(precision="bf16", seq_len=4096, global_batch_size=256)
    plain = advisor.estimate(cluster, model, layout, t)
    over = advisor.estimate(cluster, model, layout, t, advisor.Assumptions(ep_a2a_overlap=True))
    assert over.comm.ep.exposed_seconds < plain.comm.ep.exposed_seconds
    assert over.comm.ep.exposed_seconds >= 0.1 * plain.comm.ep.exposed_seconds * (1 - 1e-9)


def test_deepspeed_says_the_model_code_runs_the_low_precision_recipe():
    layout = advisor.Layout(framework="deepspeed", tp=1, pp=1, dp=8, zero_stage=3, micro_batch_size=1,
                            num_microbatches=8)
    notes = ex.deepspeed_notes(layout, LLAMA8, _training("fp8-cs"), H100)
    assert any("Float8CurrentScaling" in n for n in notes)
    assert not any("Transformer Engine" in n for n in ex.deepspeed_notes(layout, LLAMA8, _training("bf16"), H100))


def test_torchtitan_zero1_is_fsdp_in_memory_as_in_its_export():
    # torchtitan runs ZeRO 1-3 as FSDP over dp_shard: no persistent full FP8 cast, a per-layer gather buffer
    def mem(zero):
        layout = Layout(framework="torchtitan", tp=1, pp=1, dp=8, zero_stage=zero, micro_batch_size=1)
        return advisor.estimate(H100, LLAMA8, layout, _training("fp8-cs")).memory.detail
    one, three = mem(1), mem(3)
    assert one["fp8_weight_copies"] == three["fp8_weight_copies"] == 0
    assert one["fsdp_gather"] == three["fsdp_gather"] > 0


@pytest.mark.parametrize("precision, state_bytes, moments", [
    ("bf16", 12.0, ()), ("bf16", 10.0, ("fp32", "fp32")), ("bf16", 6.0, ("bf16", "bf16")),
    ("mxfp8", 8.0, ("bf16", "bf16")), ("fp8-cs", 10.0, ("bf16", "fp32")), ("fp8-delayed", 6.0, ("bf16", "bf16")),
    ("mxfp8", 6.0, None), ("bf16", 4.0, None)])
def test_megatron_adam_dtypes_add_up_to_the_state_bytes(precision, state_bytes, moments):
    # master: TE's 16-bit remainder with bf16 GEMMs or delayed FP8, Megatron-Core's fp32 main params otherwise
    assert megatron_adam_dtypes(state_bytes, precision) == moments


def _megatron(precision, state_bytes, zero_stage=1):
    layout = DP8.model_copy(update={"framework": "megatron", "dp": 8, "num_microbatches": 8, "zero_stage": zero_stage})
    training = _training(precision)
    A = Assumptions(megatron_optimizer_bytes=state_bytes)
    found = advisor.audit(B200, LLAMA8, layout, training, assumptions=A).findings
    errors = {f.rule_id for f in found if f.severity == "error"}
    return errors, (None if errors else ex.megatron_args(layout, LLAMA8, training, B200, A))


def test_bf16_adam_moments_export_as_the_precision_aware_optimizer():
    errors, args = _megatron("mxfp8", 8.0)
    assert not errors
    assert "--use-precision-aware-optimizer" in args
    assert args[args.index("--exp-avg-dtype") + 1] == "bf16" and args[args.index("--exp-avg-sq-dtype") + 1] == "bf16"
    assert "--use-precision-aware-optimizer" not in _megatron("mxfp8", 12.0)[1]


def test_optimizer_bytes_megatron_cannot_hold_are_audit_errors():
    assert "megatron.optimizer-state-bytes" in _megatron("mxfp8", 6.0)[0]
    assert _megatron("mxfp8", 8.0, zero_stage=0)[0] == {"megatron.precision-aware-optimizer-needs-distributed-optimizer"}
