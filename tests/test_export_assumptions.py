"""Every Megatron export runs what was estimated (issue 20): for each `Assumptions` field that is a
setting of a Megatron run, changing it changes the flags the way Megatron-LM reads them; every other
field is listed here with why no flag carries it. A new Assumptions field fails
test_every_assumption_is_classified until it is placed on one side."""

from __future__ import annotations

import pytest

import advisor
from advisor import Assumptions, Cluster, Layout, Model, Training
from advisor import export as ex
from advisor.export.megatron import ASSUMPTIONS_IN_FLAGS

NOT_RUN_SETTINGS = {
    # kernels, hardware and the fabric: what a run achieves, not what it is told
    "scan_efficiency": "achieved share of the peak by a linear mixer's scan kernels",
    "sustained_formats": "which GEMM formats run at the power-limited rate",
    "host_floor": "whether the host's kernel launches are priced (CUDA graphs are Training.cuda_graphs)",
    "host_overlap_exponent": "how the launch queue hides host and GPU time",
    "expert_gemm_overhead": "per-expert GEMM cost of the grouped expert GEMMs",
    "elementwise_traffic": "bytes the element-wise kernels move",
    "flash_causal_fraction": "share of the scores a causal kernel computes",
    "hbm_efficiency": "achieved HBM bandwidth",
    "softmax_bytes_per_score": "bytes the unfused softmax moves",
    "optimizer_bytes_per_param": "bytes the Adam step moves",
    "nvlink_efficiency": "achieved NVLink bandwidth",
    "ep_nvlink_efficiency": "achieved NVLink bandwidth of the MoE dispatch and combine",
    "network_efficiency": "achieved network bandwidth",
    "latency_nvlink": "collective latency",
    "latency_network": "collective latency",
    "ring_hop_latency": "collective latency",
    "tp_overlap_efficiency": "how much of the TP traffic --tp-comm-overlap hides",
    "pp_overlap": "how much of the 1F1B send/recv is hidden (the interleaved overlap is Layout.overlap_p2p_comm)",
    "pp_overlap_efficiency": "how much of the interleaved send/recv is hidden",
    "ep_a2a_overlap_efficiency": "how much of the all-to-all --overlap-moe-expert-parallel-comm hides",
    "pcie_bandwidth": "host link speed",
    "nvme_bandwidth": "disk speed",
    "cpu_adam_params_per_second": "host CPU speed",
    "cuda_context_bytes": "CUDA context and library workspaces",
    "nccl_bytes_per_group": "NCCL buffers (NCCL_BUFFSIZE is the launcher's environment)",
    "fragmentation_fraction": "allocator fragmentation",
    "host_buffer_factor": "DeepSpeed's host buffers",
    # memory accounting of what the flags already say (precision recipe, ZeRO, recompute)
    "fp8_weight_copy_bytes": "Transformer Engine's cached FP8 weight cast under the --fp8-* recipe",
    "fp8_activation_bytes": "bytes TE saves per FP8 input under the --fp8-* recipe",
    "logits_bytes_megatron": "Megatron's fp32 vocab-parallel loss",
    "moe_load_imbalance": "how the data routes (Megatron's default drops no token)",
    # other frameworks' settings (their exporters write them)
    "deepspeed_fp32_grad_partition": "DeepSpeed's optimizer accounting",
    "deepspeed_bucket_elements": "DeepSpeed's reduce_bucket_size (the DeepSpeed JSON writes it)",
    "fsdp_state_bytes": "torchtitan's FSDP mixed-precision policy",
    "logits_bytes_other": "Hugging Face / torchtitan losses",
    "hf_autocast": "how a Hugging Face training loop runs (bf16=True)",
    "hf_logits_held": "how a Hugging Face training loop holds the model output",
    "hf_loss": "a Hugging Face stack's loss (TRL chunked_nll, Liger)",
}

CLUSTER = Cluster(gpu="H100", gpus=64)
LLAMA = Model.preset("llama-3-70b")
MIXTRAL = Model.preset("mixtral-8x7b")
TRAIN = Training(seq_len=8192, global_batch_size=512)
TP8 = Layout(tp=8, pp=1, dp=8, sp=True, zero_stage=1, num_microbatches=64)


def _args(layout=TP8, model=LLAMA, training=TRAIN, **assume):
    return " ".join(ex.megatron_args(layout, model, training, CLUSTER, Assumptions(**assume) if assume else None))


MIX = Layout(tp=1, pp=1, ep=8, dp=64, zero_stage=1, num_microbatches=8)
SELECTIVE = TP8.model_copy(update={"recompute": "selective"})
FP8 = TRAIN.model_copy(update={"precision": "fp8"})

# field -> (changed value, export kwargs, text in the default export, text in the changed export)
CASES = {
    "recompute_modules": (("core_attn", "mlp"), {"layout": SELECTIVE}, "--recompute-modules core_attn --",
                          "--recompute-modules core_attn mlp"),
    "overlap_grad_reduce": (False, {}, "--overlap-grad-reduce", None),
    "overlap_param_gather": (False, {}, "--overlap-param-gather", None),
    "tp_comm_overlap": (True, {}, None, "--tp-comm-overlap"),
    "ep_a2a_overlap": (True, {"layout": MIX, "model": MIXTRAL}, None, "--overlap-moe-expert-parallel-comm"),
    "ep_overlap": (0.3, {"layout": MIX, "model": MIXTRAL}, None, "--overlap-moe-expert-parallel-comm"),
    "moe_token_dispatcher": ("deepep", {"layout": MIX, "model": MIXTRAL}, "--moe-token-dispatcher-type alltoall",
                             "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep"),
    "activation_offload_layers": (4, {}, None, "--cpu-offloading-num-layers 4"),
    "fp8_param_gather": (True, {"training": FP8}, None, "--fp8-param-gather"),
    "megatron_main_grad_bytes": (2.0, {}, None, "--grad-reduce-in-bf16"),
    "megatron_optimizer_bytes": (12.0, {}, "--optimizer adam", "--optimizer adam"),
    "dropout_masks": (True, {}, "--attention-dropout 0.0 --hidden-dropout 0.0",
                      "--attention-dropout 0.1 --hidden-dropout 0.1"),
}


def test_every_assumption_is_classified():
    fields = set(Assumptions.model_fields)
    assert set(ASSUMPTIONS_IN_FLAGS) | set(NOT_RUN_SETTINGS) == fields
    assert not set(ASSUMPTIONS_IN_FLAGS) & set(NOT_RUN_SETTINGS)
    assert set(CASES) == set(ASSUMPTIONS_IN_FLAGS)


@pytest.mark.parametrize("field", sorted(CASES))
def test_the_export_reflects_the_assumption(field):
    value, kw, default_text, changed_text = CASES[field]
    default, changed = _args(**kw), _args(**kw, **{field: value})
    for text, have in ((default_text, default), (changed_text, changed)):
        if text is not None:
            assert text in have + " --", (field, text)
    flag = (changed_text or default_text).split()[0]
    if default_text is None:
        assert flag not in default, field
    if changed_text is None:
        assert flag not in changed, field


@pytest.mark.parametrize(("assume", "kw", "rule"), [
    ({"megatron_optimizer_bytes": 4.0}, {}, "megatron.optimizer-state-bytes"),
    ({"megatron_main_grad_bytes": 1.0}, {}, "megatron.main-grad-bytes"),
    ({"activation_offload_layers": 80}, {}, "megatron.activation-offload-layers"),
    ({"fp8_param_gather": True}, {"layout": TP8.model_copy(update={"zero_stage": 0}), "training": FP8},
     "megatron.fp8-param-gather-needs-sharded-optimizer"),
    ({"ep_a2a_overlap": True}, {"layout": MIX.model_copy(update={"recompute": "full"}), "model": MIXTRAL},
     "megatron.ep-a2a-overlap-needs"),
])
def test_an_assumption_megatron_cannot_run_is_an_audit_error_and_a_refusal(assume, kw, rule):
    layout, model, training = kw.get("layout", TP8), kw.get("model", LLAMA), kw.get("training", TRAIN)
    report = advisor.audit(CLUSTER, model, layout, training, assumptions=assume)
    assert rule in [f.rule_id for f in report.findings if f.severity == "error"]
    with pytest.raises(advisor.InputError, match=f"forbidden by audit rule {rule}"):
        _args(**kw, **assume)


def test_dispatcher_router_and_rope_of_the_estimated_model():
    ds = Model.preset("deepseek-v3")
    layout = Layout(tp=4, pp=4, vpp=4, ep=128, dp=128, sp=True, zero_stage=1, num_microbatches=8)
    args = " ".join(ex.megatron_args(layout, ds, Training(seq_len=4096, global_batch_size=1024),
                                     Cluster(gpu="H100", gpus=2048)))
    for text in ("--moe-router-score-function sigmoid", "--moe-router-enable-expert-bias",
                 "--moe-router-topk-scaling-factor 2.5", "--moe-token-dispatcher-type alltoall",
                 "--rotary-base 10000", "--rope-type yarn", "--rotary-scaling-factor 40.0"):
        assert text in args, text
    llama31 = _args(model=Model.preset("llama-3.1-70b"))
    assert "--rotary-base 500000 --use-rope-scaling --rope-scaling-factor 8.0" in llama31
    assert "--moe-" not in _args() and "--use-rope-scaling" not in _args()


@pytest.mark.parametrize("version", ["main", "core_v0.16.1"])
def test_moe_exports_run_the_grouped_expert_path_the_estimate_prices(version):
    # Megatron-Core's default is SequentialMLP, a loop over the local experts; the estimate prices TE's
    # grouped GEMMs (Assumptions.expert_gemm_overhead)
    assert "--moe-grouped-gemm" in " ".join(ex.megatron_args(MIX, MIXTRAL, TRAIN, CLUSTER, version=version))
    assert "--moe-grouped-gemm" not in _args()


def test_megatron_fsdp_writes_the_distributed_optimizer():
    assert "--use-megatron-fsdp --use-distributed-optimizer" in _args(layout=TP8.model_copy(update={"zero_stage": 3}))


def test_fp4_parameters_under_nvfp4():
    fp4 = TRAIN.model_copy(update={"precision": "nvfp4"})
    b200 = Cluster(gpu="B200", gpus=64)
    a = Assumptions(fp8_param_gather=True)
    for version in ex.MEGATRON_PINS:
        args = ex.megatron_args(TP8, LLAMA, fp4, b200, a, version=version)
        assert "--fp4-param-gather" in args and "--fp8-param-gather" not in args
