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


# --- Training: every field the estimate prices is written by the exports, or listed with why not (issue 37) ----

TRAINING_WRITTEN = {
    "seq_len": "Megatron --seq-length, Bridge dataset.seq_length, torchtitan seq_len, TRL max_length",
    "global_batch_size": "Megatron --global-batch-size, DeepSpeed train_batch_size, torchtitan global batch",
    "precision": "Megatron --bf16/--fp16/--fp8-*/--fp4-*, Bridge mixed_precision, DeepSpeed bf16/fp16, TRL bf16/fp16",
    "optimizer": "Megatron --optimizer adam|sgd|lion (audit rule megatron.optimizer-kind for the rest), TRL optim",
    "master_weights": "TRL model_init_kwargs.dtype and PEFT's autocast_adapter_dtype; Megatron always keeps one "
                      "(audit rule megatron.optimizer-kind refuses 'none')",
    "flash_attention": "Megatron --attention-backend flash|unfused, TRL attn_implementation",
    "cuda_graphs": "Megatron --cuda-graph-impl local; elsewhere audit rule layout.cuda-graphs-need-megatron",
    "packed_sample_tokens": "TRL packing (per-sample attention through the padding-free collator)",
    "task": "LoRA: Megatron-Bridge's run_recipe.py --mode lora, PEFT's LoraConfig (+ BitsAndBytesConfig for QLoRA); "
            "refused where no adapter runs (megatron-deepspeed.no-adapters, torchtitan.adapters, "
            "megatron.qlora-no-4bit-base)",
    "lora_rank": "Bridge peft.dim, PEFT r",
    "lora_alpha": "Bridge peft.alpha, PEFT lora_alpha",
    "lora_targets": "Bridge peft.target_modules (linear_*), PEFT target_modules",
    "lora_dropout": "Bridge peft.dropout, PEFT lora_dropout",
}
TRAINING_NOT_WRITTEN = {
    "micro_batch_size": "a bound for the planner: the layout's micro_batch_size is what the exports write",
    "framework": "which stack runs the job: it chooses the layout's framework and so the format, not a setting in it",
    "framework_version": "which release: the rules read it; --framework-version chooses the release a config is "
                         "written for",
    "memory_headroom": "the free memory the planner keeps: it chooses the layout, no framework is told it",
}
# Formats that do not carry a field the estimate prices, and why (the person running it sets it elsewhere)
TRAINING_GAPS = {
    ("packed_sample_tokens", "megatron"): "packed sequences are the data's (Megatron-Bridge packed_sequence_specs, "
                                          "THD batches): pretrain_gpt.py has no flag",
}


def test_every_training_field_is_placed():
    fields = set(Training.model_fields)
    assert set(TRAINING_WRITTEN) | set(TRAINING_NOT_WRITTEN) == fields
    assert not set(TRAINING_WRITTEN) & set(TRAINING_NOT_WRITTEN)
    assert {field for field, _ in TRAINING_GAPS} <= set(TRAINING_WRITTEN)


LORA = TRAIN.model_copy(update={"task": "lora", "lora_rank": 8, "lora_alpha": 16, "lora_targets": ("qkv", "proj"),
                                "lora_dropout": 0.05})
ZERO3 = Layout(framework="deepspeed", tp=1, pp=1, dp=64, zero_stage=3, num_microbatches=8, recompute="full")


def _trl(training, layout=ZERO3):
    import json
    return json.loads(ex.trl_config(layout, LLAMA, training, CLUSTER))["sft_config"]


@pytest.mark.parametrize(("field", "check"), [
    ("seq_len", lambda: "--seq-length 4096" in _args(training=TRAIN.model_copy(update={"seq_len": 4096}))
     and _trl(TRAIN)["max_length"] == 8192),
    ("global_batch_size", lambda: "--global-batch-size 512" in _args()
     and ex.deepspeed_config(ZERO3, LLAMA, TRAIN, CLUSTER)["train_batch_size"] == 512),
    ("precision", lambda: "--fp8-format hybrid" in _args(training=FP8)
     and _trl(TRAIN.model_copy(update={"precision": "fp16"}))["fp16"] is True),
    ("optimizer", lambda: "--optimizer sgd --sgd-momentum 0.0" in _args(training=TRAIN.model_copy(update={"optimizer": "sgd"}))
     and _trl(TRAIN.model_copy(update={"optimizer": "adamw-8bit"}))["optim"] == "adamw_bnb_8bit"),
    ("master_weights", lambda: _trl(TRAIN)["model_init_kwargs"]["dtype"] == "float32"
     and _trl(TRAIN.model_copy(update={"master_weights": "none"}))["model_init_kwargs"]["dtype"] == "bfloat16"),
    ("flash_attention", lambda: "--attention-backend unfused" in _args(training=TRAIN.model_copy(
        update={"flash_attention": False})) and _trl(TRAIN)["model_init_kwargs"]["attn_implementation"]
     == "flash_attention_2"),
    ("cuda_graphs", lambda: "--cuda-graph-impl local" in _args(training=TRAIN.model_copy(update={"cuda_graphs": True}))
     and "--cuda-graph-impl" not in _args()),
    ("packed_sample_tokens", lambda: _trl(TRAIN.model_copy(update={"packed_sample_tokens": 1000}))["packing"] is True
     and _trl(TRAIN)["packing"] is False),
    ("task", lambda: "--mode lora" in ex.megatron_command(TP8, LLAMA, LORA, CLUSTER)),
    ("lora_rank", lambda: "peft.dim=8" in _args(training=LORA)),
    ("lora_alpha", lambda: "peft.alpha=16" in _args(training=LORA)),
    ("lora_targets", lambda: "peft.target_modules=[linear_qkv,linear_proj]" in _args(training=LORA)),
    ("lora_dropout", lambda: "peft.dropout=0.05" in _args(training=LORA)),
])
def test_the_exports_write_the_training_setting(field, check):
    assert field in TRAINING_WRITTEN
    assert check(), field


def test_zero3_recompute_is_carried_by_the_trainer_and_named_by_the_json_notes():
    """The issue's case: deepspeed/tp1-dp64-pp1-zero3-mbs2-nmb4-rc:full for 70B on 64 H100 dropped the recompute
    (388.6 GiB per GPU without it)."""
    rec = advisor.recommend(CLUSTER, "llama-3-70b", TRAIN.model_copy(update={"framework": "deepspeed"}))
    assert rec.layout.framework == "deepspeed" and rec.layout.recompute == "full"
    import json
    sft = json.loads(ex.trl_config(rec.layout, rec.model, rec.training, rec.cluster))["sft_config"]
    assert sft["gradient_checkpointing"] is True and sft["deepspeed"] == "ds_config.json"
    notes = " ".join(ex.deepspeed_notes(rec.layout, rec.model, rec.training, rec.cluster))
    assert "gradient_checkpointing=True" in notes


def test_the_lora_export_carries_the_adapter_not_a_full_weight_job():
    """The issue's case: recommend --model llama-3-70b --gpu H100 --gpus 8 --task lora --format megatron printed a
    plain pretrain_gpt.py line (220.9 GiB per GPU as a full-weight job)."""
    rec = advisor.recommend(Cluster(gpu="H100", gpus=8), "llama-3-70b", {"task": "lora"})
    assert rec.layout.framework == "megatron"
    cmd = ex.megatron_command(rec.layout, rec.model, rec.training, rec.cluster, rec.estimates.assumptions)
    assert "pretrain_gpt.py" not in cmd and "run_recipe.py" in cmd and "--mode lora" in cmd
    assert "peft.dim=16" in cmd and "peft.alpha=32" in cmd
    assert "peft.target_modules=[linear_qkv,linear_proj,linear_fc1,linear_fc2]" in cmd
    assert f"model.tensor_model_parallel_size={rec.layout.tp}" in cmd


def test_qlora_is_never_a_16_bit_megatron_job():
    """QLoRA on 16 A100-40GB was exported as a Megatron job with no 4-bit base and no adapter."""
    rec = advisor.recommend(Cluster(gpu="A100-40GB", gpus=16), "llama-3-70b", {"task": "qlora"})
    assert rec.status == "recommended" and rec.layout.framework == "deepspeed"
    import json
    assert json.loads(ex.peft_config(rec.model, rec.training))["bnb_config"]["bnb_4bit_quant_type"] == "nf4"
    forced = advisor.audit(rec.cluster, rec.model, Layout(tp=8, pp=1, sp=True, zero_stage=1), rec.training)
    assert "megatron.qlora-no-4bit-base" in {f.rule_id for f in forced.errors}
    with pytest.raises(advisor.InputError, match="forbidden by audit rule megatron.qlora-no-4bit-base"):
        ex.megatron_args(forced.layout, forced.model, forced.training, forced.cluster)


@pytest.mark.parametrize("fmt", ["megatron", "torchtitan", "accelerate", "deepspeed"])
def test_multi_node_exports_name_what_each_node_needs(fmt):
    if fmt == "megatron":
        notes = ex.megatron_notes(TP8, LLAMA, TRAIN, CLUSTER)
    elif fmt == "torchtitan":
        titan = Layout(framework="torchtitan", tp=8, dp=8, zero_stage=3, sp=True, num_microbatches=64)
        notes = ex.torchtitan_notes(titan, LLAMA, TRAIN, CLUSTER)
    elif fmt == "accelerate":
        yaml = ex.accelerate_config(ZERO3, LLAMA, TRAIN, CLUSTER)
        assert "main_process_ip:" in yaml and "main_process_port: 29500" in yaml
        notes = ex.accelerate_notes(CLUSTER)
    else:
        notes = ex.deepspeed_notes(ZERO3, LLAMA, TRAIN, CLUSTER)
    text = " ".join(notes)
    assert "8 nodes" in text or "each of the 8 nodes" in text
    names = {"megatron": ("MASTER_ADDR", "MASTER_PORT", "JOB_ID", "srun"), "torchtitan": ("MASTER_ADDR", "JOB_ID"),
             "accelerate": ("--machine_rank", "main_process_ip", "srun"), "deepspeed": ("--hostfile", "MASTER_ADDR")}
    for name in names[fmt]:
        assert name in text, (fmt, name)
    one_node = TP8.model_copy(update={"dp": 1, "num_microbatches": 512})
    assert "MASTER_ADDR" not in " ".join(ex.megatron_notes(one_node, LLAMA, TRAIN, Cluster(gpu="H100", gpus=8)))


def test_moe_exports_balance_the_experts_the_estimate_assumes_balanced():
    mix = " ".join(ex.megatron_args(MIX, MIXTRAL, TRAIN, CLUSTER))
    assert "--moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 0.01" in mix
    assert "--moe-router-dtype fp32" in mix
    ds = Model.preset("deepseek-v3")     # aux-loss-free: the expert bias balances
    layout = Layout(tp=4, pp=4, vpp=4, ep=128, dp=128, sp=True, zero_stage=1, num_microbatches=8)
    args = " ".join(ex.megatron_args(layout, ds, Training(seq_len=4096, global_batch_size=1024),
                                     Cluster(gpu="H100", gpus=2048)))
    assert "--moe-aux-loss-coeff" not in args and "--moe-router-enable-expert-bias" in args


def test_every_megatron_flag_has_a_bridge_key_or_comes_from_the_recipe():
    from advisor.export.megatron_bridge import BRIDGE_KEYS, FROM_RECIPE, NAMED_RECIPE
    emitted = {flag for flag, spec in ex.MEGATRON_FLAGS.items() if spec.emitted}
    placed = set(BRIDGE_KEYS) | FROM_RECIPE | NAMED_RECIPE
    assert emitted <= placed, sorted(emitted - placed)
    assert not set(BRIDGE_KEYS) & FROM_RECIPE


def test_hybrid_stacks_use_mains_entry_point_and_pattern_flag():
    nh = Model.preset("nemotron-h-8b")
    layout = Layout(tp=2, pp=1, dp=4, sp=True, zero_stage=1, num_microbatches=16)
    training, cluster = Training(seq_len=4096, global_batch_size=64), Cluster(gpu="H100", gpus=8)
    main = ex.megatron_command(layout, nh, training, cluster)
    assert "pretrain_hybrid.py" in main and "--hybrid-layer-pattern" in main and "--hybrid-override-pattern" not in main
    old = ex.megatron_command(layout, nh, training, cluster, version="core_v0.16.1")
    assert "pretrain_mamba.py" in old and "--hybrid-override-pattern" in old


def test_windowed_attention_and_sinks_are_the_models():
    """gpt-oss: a 128-token window on every other layer and a learned sink per head, priced by the estimate, in
    Megatron-Bridge's gpt-oss bridge's spelling; chunked attention (Llama 4) has no flag and the notes say so."""
    oss = Model.preset("gpt-oss-20b")
    layout = Layout(tp=1, pp=1, ep=8, etp=1, dp=8, zero_stage=1, num_microbatches=64)
    cluster, training = Cluster(gpu="H100", gpus=8), Training(seq_len=4096, global_batch_size=512)
    args = " ".join(ex.megatron_args(layout, oss, training, cluster))
    assert f"--window-size {oss.sliding_window - 1},0 --window-attn-skip-freq 2" in args
    assert "--softmax-type learnable" in args
    assert "--window-size" not in _args() and "--softmax-type" not in _args()
    mds = advisor.audit(Cluster(gpu="H100", gpus=16), oss, Layout(framework="megatron+deepspeed", tp=2, zero_stage=1),
                        training)
    assert "megatron-deepspeed.model-code" in {f.rule_id for f in mds.errors}
