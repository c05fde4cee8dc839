"""DeepSpeed: the JSON config (as a dict) for a layout.

Sources: the deepspeed 0.19.8 wheel (PyPI): deepspeed/runtime/config.py, deepspeed/runtime/constants.py,
deepspeed/runtime/zero/config.py, deepspeed/runtime/zero/offload_config.py,
deepspeed/runtime/pipe/engine.py (line numbers of 0.19.8, recorded in DEEPSPEED_KEYS).

Legality is the audit's (rules/audit-deepspeed.toml): every refusal below is an assertion of that
contract and names the rule that forbids the layout.
"""

from __future__ import annotations

from typing import Any

from ..costmodel.assumptions import Assumptions
from ..inputs.layout import Layout
from ..inputs.precision import recipe
from ..inputs.specs import Cluster, Model, Training
from .batch import no_cuda_graphs, refused, resolved

__all__ = ["DEEPSPEED_KEYS", "NVME_PATH_PLACEHOLDER", "deepspeed_config", "deepspeed_notes"]

DEEPSPEED_KEYS: dict[str, str] = {
    "train_batch_size": "deepspeed/runtime/constants.py L19 (TRAIN_BATCH_SIZE)",
    "train_micro_batch_size_per_gpu": "deepspeed/runtime/constants.py L59",
    "gradient_accumulation_steps": "deepspeed/runtime/constants.py L71",
    "gradient_clipping": "deepspeed/runtime/constants.py L202",
    "bf16.enabled": "deepspeed/runtime/constants.py L94-97; precision_config.py DeepSpeedBF16Config L41-46",
    "fp16.enabled": "deepspeed/runtime/constants.py L136-138; precision_config.py DeepSpeedFP16Config L100-105",
    "zero_optimization.stage": "deepspeed/runtime/zero/config.py DeepSpeedZeroConfig.stage L95",
    "zero_optimization.offload_optimizer": "deepspeed/runtime/zero/config.py L171; valid with stage 1, 2, 3",
    "zero_optimization.offload_param": "deepspeed/runtime/zero/config.py L164; valid only with stage 3",
    "offload_*.device": "deepspeed/runtime/zero/offload_config.py OffloadDeviceEnum L14-18 (none|cpu|nvme)",
    "offload_*.nvme_path": "deepspeed/runtime/zero/offload_config.py L30, L64",
    "offload_*.pin_memory": "deepspeed/runtime/zero/offload_config.py L45, L75",
    "batch identity": "deepspeed/runtime/config.py DeepSpeedConfig._batch_assertion L590-605",
    "sequence_parallel_size": "deepspeed/runtime/config.py DeepSpeedConfig.__init__ L468-469: without an mpu the "
                              "DP world is world_size / sequence_parallel_size (DeepSpeed-Ulysses)",
    "data_parallel_size": "deepspeed/__init__.py initialize: with sequence_parallel_size it builds the "
                          "(data_parallel, sequence_parallel) mesh (dist.initialize_mesh_device)",
    "optimizer.type": "deepspeed/runtime/engine.py _configure_basic_optimizer L2476 (Adam, AdamW: "
                      "DeepSpeedCPUAdam under ZeRO-Offload); without it a client optimizer meets "
                      "zero_force_ds_cpu_optimizer's ZeRORuntimeException (engine.py L2344)",
    "zero_optimization.overlap_comm": "deepspeed/runtime/zero/config.py DeepSpeedZeroConfig.overlap_comm L138",
    "zero_optimization.reduce_bucket_size": "deepspeed/runtime/zero/config.py DeepSpeedZeroConfig.reduce_bucket_size L113",
    "pipeline ZeRO limit": "deepspeed/runtime/pipe/engine.py PipelineEngine.__init__ L76-77",
}

NVME_PATH_PLACEHOLDER = "/REPLACE_ME/local_nvme_mount"
"""Written as `nvme_path` when offloading to NVMe: replace it with a node-local NVMe mount."""


def deepspeed_config(layout: Layout, model: Model, training: Training, cluster: Cluster,
                     assumptions: Assumptions | None = None, *, gradient_clipping: float = 1.0) -> dict[str, Any]:
    """A DeepSpeed JSON config (as a dict) for this layout.

    The batch triple satisfies DeepSpeed's identity `train_batch_size == micro * accumulation *
    dp` (runtime/config.py `_batch_assertion`); the DP world is `layout.dp` (DeepSpeed takes it from
    the model-parallel unit when tp/pp/cp > 1). FP8 compute is configured in the model code
    (Transformer Engine), not in this file, so fp8 writes the bf16 section. Offload to NVMe writes
    `nvme_path` = NVME_PATH_PLACEHOLDER, which must be replaced. Context parallelism under framework
    "deepspeed" is DeepSpeed-Ulysses: `sequence_parallel_size` = cp, so that DeepSpeed's DP world is
    world / cp. Offload writes an `optimizer` block (DeepSpeed then builds DeepSpeedCPUAdam). The
    estimate's DP overlap and reduce bucket (Assumptions.overlap_grad_reduce,
    deepspeed_bucket_elements) are written as overlap_comm and reduce_bucket_size.
    """
    A = assumptions or Assumptions()
    b = resolved(layout, training, cluster)
    no_cuda_graphs(layout, training)
    stage = layout.zero_stage
    if layout.pp > 1 and stage >= 2:
        raise refused(
            "Layout.zero_stage", stage, "0 or 1 when pp > 1 under DeepSpeed", "deepspeed.zero-2-3-with-pipeline",
            "DeepSpeed's pipeline engine asserts 'ZeRO-2 and ZeRO-3 are incompatible with pipeline "
            "parallelism' (deepspeed/runtime/pipe/engine.py, PipelineEngine.__init__)",
        )
    if layout.framework == "megatron+deepspeed" and training.frozen_base:
        raise refused("Training.task", training.task, "'pretrain' or 'sft' under Megatron-DeepSpeed",
                      "megatron-deepspeed.no-adapters", "it has no LoRA: the job would train every weight")
    cfg: dict[str, Any] = {
        "train_batch_size": b.gbs,
        "train_micro_batch_size_per_gpu": b.mbs,
        "gradient_accumulation_steps": b.m,
        "gradient_clipping": gradient_clipping,
        "zero_optimization": _zero_section(layout, A),
    }
    if layout.framework == "deepspeed" and layout.cp > 1:
        if model.heads % layout.cp:
            raise refused("Layout.cp", layout.cp, f"a divisor of the {model.heads} attention heads under DeepSpeed",
                          "deepspeed.ulysses-heads-divisible-by-cp",
                          "DeepSpeed-Ulysses gives each rank heads / sequence_parallel_size heads")
        cfg["sequence_parallel_size"] = layout.cp
        # with both keys deepspeed.initialize builds the (data_parallel, sequence_parallel) mesh itself
        cfg["data_parallel_size"] = b.dp
    if layout.offload != "none":
        # DeepSpeed's own optimizer: a client torch optimizer is refused under ZeRO-Offload
        cfg["optimizer"] = {"type": "AdamW" if training.optimizer == "adamw" else "Adam", "params": {}}
    if training.precision == "fp16":
        cfg["fp16"] = {"enabled": True}
    else:
        cfg["bf16"] = {"enabled": True}
    return cfg


def _zero_section(layout: Layout, A: Assumptions) -> dict[str, Any]:
    stage = layout.zero_stage
    zero: dict[str, Any] = {"stage": stage}
    if stage >= 1:
        zero["overlap_comm"] = A.overlap_grad_reduce
        zero["reduce_bucket_size"] = int(A.deepspeed_bucket_elements)
    if layout.offload == "none":
        return zero
    dev = layout.offload_device
    if layout.offload == "optimizer+params" and stage != 3:
        raise refused("Layout.offload", layout.offload, "'optimizer' unless zero_stage is 3",
                      "deepspeed.param-offload-needs-zero3",
                      "offload_param is valid only with ZeRO stage 3 (zero/offload_config.py)")
    if stage == 0:
        raise refused("Layout.offload", layout.offload, "'none' with ZeRO stage 0", "deepspeed.optimizer-offload-needs-zero",
                      "offload_optimizer is valid with ZeRO stage 1, 2, 3 (zero/offload_config.py)")
    if dev == "nvme" and stage != 3:
        raise refused("Layout.offload_device", dev, "'cpu' unless zero_stage is 3", "deepspeed.nvme-offload-needs-zero3",
                      "NVMe offload needs ZeRO-3 (ZeRO-Infinity; deepspeedai/DeepSpeed docs/_pages/config-json.md)")
    zero["offload_optimizer"] = _offload_section(dev)
    if layout.offload == "optimizer+params":
        zero["offload_param"] = _offload_section(dev)
    return zero


def _offload_section(device: str) -> dict[str, Any]:
    sec: dict[str, Any] = {"device": device, "pin_memory": True}
    if device == "nvme":
        sec["nvme_path"] = NVME_PATH_PLACEHOLDER
    return sec


def _run_notes(layout: Layout, training: Training, cluster: Cluster) -> list[str]:
    """What the engine needs besides the JSON: the recompute and adapters the estimate assumed (DeepSpeed's config
    turns neither on), and the launch on several nodes."""
    notes = []
    if layout.recompute == "full" and layout.framework == "deepspeed":
        # runtime/activation_checkpointing/config.py configures deepspeed.checkpointing.checkpoint, which only a
        # model that calls it runs: the JSON cannot switch recompute on
        notes.append("recompute full: the JSON cannot turn activation checkpointing on; the Hugging Face Trainer / TRL "
                     "does with gradient_checkpointing=True (--format trl writes it), a DeepSpeed PipelineModule with "
                     "activation_checkpoint_interval=1, other model code by wrapping each layer in "
                     "deepspeed.checkpointing.checkpoint")
    if layout.ep > 1 and layout.framework == "deepspeed":
        # deepspeed/moe/layer.py MoE(ep_size=...): expert groups are built by the model's MoE layers, not the config
        notes.append(f"expert parallelism ep {layout.ep}: DeepSpeed's JSON has no key for it; the model's expert layers "
                     f"must be deepspeed.moe.layer.MoE(..., ep_size={layout.ep}) (or an integration that builds them), "
                     "whose expert-data-parallel groups DeepSpeed creates at initialize")
    if training.frozen_base and layout.framework == "deepspeed":
        notes.append(f"{training.task}: DeepSpeed trains what requires grad; the adapters and the frozen base are "
                     "PEFT's (--format peft: LoraConfig and, for QLoRA, BitsAndBytesConfig)")
    if cluster.nodes > 1:
        notes.append(f"{cluster.nodes} nodes: launch on each with torchrun / accelerate launch (--format accelerate), "
                     f"or once with the deepspeed launcher: deepspeed --hostfile hostfile --num_nodes {cluster.nodes} "
                     f"--num_gpus {cluster.gpus_in_node} --master_addr $MASTER_ADDR --master_port $MASTER_PORT "
                     "train.py ... (hostfile: one 'host slots=N' line per node, passwordless ssh between them)")
    return notes


def deepspeed_notes(layout: Layout, model: Model, training: Training, cluster: Cluster,
                    assumptions: Assumptions | None = None) -> list[str]:
    """What the JSON cannot say (it has no comments), for stderr: the DP size a Megatron-DeepSpeed
    launch supplies, Ulysses' model-code requirement, the optimizer's hyper-parameters, NVMe paths."""
    b = resolved(layout, training, cluster)
    notes = []
    if layout.framework != "deepspeed" or layout.tp > 1 or layout.pp > 1:
        notes.append(
            f"data-parallel size {b.dp}: train_batch_size {b.gbs} = micro {b.mbs} x accumulation {b.m} x dp {b.dp}; "
            f"the launcher's model-parallel unit (Megatron-DeepSpeed's mpu, tp {layout.tp} x pp {layout.pp} x cp "
            f"{layout.cp}) must report dp {b.dp}: DeepSpeed without one counts all {cluster.gpus} GPUs as data-parallel "
            f"and refuses the batch ({b.gbs} != {b.mbs} * {b.m} * {cluster.gpus})")
    if "sequence_parallel_size" in deepspeed_config(layout, model, training, cluster, assumptions):
        notes.append(f"sequence_parallel_size {layout.cp}: DeepSpeed-Ulysses; the model's attention must run through "
                     "deepspeed.sequence.layer.DistributedAttention (or an integration that wraps it). Pass the file "
                     "to deepspeed.initialize (which loads it and builds the data x sequence mesh), or the loaded "
                     "dict to DeepSpeedConfig: given a path, DeepSpeedConfig looks for sequence_parallel_size in the "
                     "path string and counts every GPU as data-parallel")
    rec = recipe(training.precision)
    if rec.low_precision and layout.framework == "deepspeed":
        # DeepSpeed's config has bf16 / fp16 sections only (runtime/precision_config.py); the estimate's
        # FP8 / FP4 GEMMs come from the model code
        notes.append(f"precision {training.precision}: the JSON trains in bf16; the estimate assumes the model's "
                     f"linear layers run in Transformer Engine's autocast with recipe {rec.te_recipe}, which "
                     "DeepSpeed's config cannot set")
    notes += _run_notes(layout, training, cluster)
    if layout.offload != "none":
        notes.append("optimizer: DeepSpeed builds DeepSpeedCPUAdam for ZeRO-Offload; set optimizer.params "
                     "(lr, betas, weight_decay) and pass no client optimizer to deepspeed.initialize")
        if layout.offload_device == "nvme":
            notes.append(f"replace nvme_path {NVME_PATH_PLACEHOLDER} with a node-local NVMe mount")
    return notes
