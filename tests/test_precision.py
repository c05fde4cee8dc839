"""Precision recipes (advisor.inputs.precision): what each runs at, stores, needs and exports."""

from __future__ import annotations

import pytest

import advisor
from advisor import export as ex
from advisor.inputs.layout import Layout
from advisor.inputs.precision import RECIPES
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


def test_every_fp8_recipe_runs_at_the_fp8_peak():
    steps = {p: advisor.estimate(H100, LLAMA8, DP8, _training(p)).step_time
             for p in ("fp8", "fp8-delayed", "fp8-cs", "fp8-blockwise")}
    assert len(set(steps.values())) == 1
    assert steps["fp8"] < advisor.estimate(H100, LLAMA8, DP8, _training("bf16")).step_time


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
