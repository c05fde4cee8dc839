"""Turn one `Layout` into configs the frameworks run: Megatron-LM flags, a DeepSpeed JSON config,
a torchtitan TOML fragment and a `torchrun` launch line.

Every exporter takes `(layout, model, training, cluster)` with `layout.dp` and
`layout.num_microbatches` set and `training.seq_len` / `training.global_batch_size` resolved to
ints; anything the target framework cannot express raises `advisor.InputError` naming the field.
They are pure functions: no I/O, no imports of the frameworks.

Vocabulary is translated here and only here (research/aesthetics-anchors.md B7): tp, pp, dp, cp,
ep, etp, vpp become Megatron's `*-model-parallel-size`, DeepSpeed's batch triple and torchtitan's
`*_parallel_degree`.

Sources (every flag and key below was read in these files; the tables record where):
- Megatron-LM: NVIDIA/Megatron-LM megatron/training/arguments.py at commit
  000c4ac24f61159c138b0975def722c65245983c (the newest stored copy, 207,307 characters; an older
  stored copy, 307dcf37, is 93,035). Locations are the `_add_*_args` function and the character
  window of the stored file in which the `add_argument` call sits.
- DeepSpeed: the deepspeed 0.19.8 wheel (PyPI), deepspeed/runtime/config.py,
  deepspeed/runtime/constants.py, deepspeed/runtime/zero/config.py,
  deepspeed/runtime/zero/offload_config.py, deepspeed/runtime/pipe/engine.py (line numbers of 0.19.8).
- torchtitan: pytorch/torchtitan torchtitan/config/job_config.py (commit 000204a4, the TOML-era
  `JobConfig`), torchtitan/config/configs.py (commit 0014ac2c, same key names as dataclass fields),
  torchtitan/distributed/pipeline_parallel.py (commit 02ef790c), torchtitan/config/manager.py
  (commit 02e5389e).
- torchrun: torch 2.13.0 torch/distributed/run.py (argument names at lines 426-629).
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .errors import InputError
from .inputs.layout import Layout
from .inputs.pipeline import megatron_split, virtual_stage_layers
from .inputs.specs import Cluster, Model, Training

__all__ = [
    "MegatronFlag",
    "MEGATRON_FLAGS",
    "MEGATRON_ARGUMENTS_SOURCE",
    "DEEPSPEED_KEYS",
    "TORCHTITAN_KEYS",
    "NVME_PATH_PLACEHOLDER",
    "megatron_args",
    "megatron_command",
    "deepspeed_config",
    "torchtitan_toml",
    "torchrun_command",
]

# ---------------------------------------------------------------------------------------------
# Megatron-LM flag table
# ---------------------------------------------------------------------------------------------

MEGATRON_ARGUMENTS_SOURCE = (
    "NVIDIA/Megatron-LM megatron/training/arguments.py @ 000c4ac24f61159c138b0975def722c65245983c"
)

FlagKind = Literal["int", "float", "str", "store_true", "store_false", "choice", "moe_freq"]


@dataclass(frozen=True)
class MegatronFlag:
    """One Megatron-LM command-line flag as `add_argument` declares it.

    `kind` mirrors the declaration: "int"/"float"/"str" (`type=`), "store_true"/"store_false"
    (`action=`), "choice" (`choices=`), "moe_freq" (`type=moe_freq_type`: an int or a Python list
    expression such as "([0]*3+[1]*58)"). `where` is the `_add_*_args` function and the 16,000-
    character window of MEGATRON_ARGUMENTS_SOURCE (as the search tool's read_file pages it) that
    holds the call; M-numbers refer to research/anchors-selection.md §2.
    """

    flag: str
    kind: FlagKind
    where: str
    choices: tuple[str, ...] = ()
    dest: str | None = None
    emitted: bool = True
    note: str = ""


def _f(flag: str, kind: FlagKind, where: str, **kw: Any) -> tuple[str, MegatronFlag]:
    return flag, MegatronFlag(flag, kind, where, **kw)


_NET = "_add_network_size_args"
_TRAIN = "_add_training_args"
_DIST = "_add_distributed_args"
_MOE = "_add_moe_args"
_MLA = "_add_mla_args"


def _W(k: int) -> str:
    """The 16,000-character read window (starting at k thousand) of the stored arguments.py."""
    return f"chars {k * 1000}-{min(k * 1000 + 16000, 207307)}"


MEGATRON_FLAGS: dict[str, MegatronFlag] = dict([
    # _add_network_size_args (model shape)
    _f("--num-layers", "int", f"{_NET}, {_W(64)}"),
    _f("--hidden-size", "int", f"{_NET}, {_W(64)}"),
    _f("--ffn-hidden-size", "int", f"{_NET}, {_W(64)}"),
    _f("--num-attention-heads", "int", f"{_NET}, {_W(64)}"),
    _f("--attention-backend", "choice", f"{_NET}, {_W(64)}",
       choices=("flash", "fused", "unfused", "local", "auto"),
       note="type=AttnBackend[name]; members from megatron/core/transformer/enums.py AttnBackend"),
    _f("--kv-channels", "int", f"{_NET}, {_W(64)}", note="head_dim when it is not hidden/heads"),
    _f("--group-query-attention", "store_true", f"{_NET}, {_W(64)}"),
    _f("--num-query-groups", "int", f"{_NET}, {_W(64)}"),
    _f("--max-position-embeddings", "int", f"{_NET}, {_W(80)}",
       note="validate_args asserts it is >= --seq-length (M21)"),
    _f("--position-embedding-type", "choice", f"{_NET}, {_W(80)}",
       choices=("learned_absolute", "rope", "mrope", "relative", "none"), note="no ALiBi choice"),
    _f("--normalization", "choice", f"{_NET}, {_W(80)}", choices=("LayerNorm", "RMSNorm")),
    _f("--swiglu", "store_true", f"{_NET}, {_W(80)}"),
    _f("--untie-embeddings-and-output-weights", "store_true", f"{_NET}, {_W(80)}"),
    _f("--multi-latent-attention", "store_true", f"{_NET}, {_W(80)}"),
    _f("--qk-layernorm", "store_true", f"_add_vision_args, {_W(176)}",
       note="declared among the vision arguments (char 183492), read by every Megatron-Core model "
            "(TransformerConfig.qk_layernorm): a norm over each query and key head"),
    _f("--mtp-num-layers", "int", f"{_NET}, {_W(80)}"),
    # _add_data_args
    _f("--seq-length", "int", f"_add_data_args, {_W(160)}"),
    # _add_training_args: batch, recompute, biases, sequence parallelism, offload
    _f("--micro-batch-size", "int", f"{_TRAIN}, {_W(96)}"),
    _f("--global-batch-size", "int", f"{_TRAIN}, {_W(96)}",
       note="a multiple of micro-batch-size x data-parallel-size (M11)"),
    _f("--recompute-granularity", "choice", f"{_TRAIN}, {_W(96)}", choices=("full", "selective")),
    _f("--recompute-method", "choice", f"{_TRAIN}, {_W(112)}", choices=("uniform", "block"),
       note="selective granularity takes no method (validate_args, M17)"),
    _f("--recompute-num-layers", "int", f"{_TRAIN}, {_W(112)}"),
    _f("--use-flash-attn", "store_true", f"{_TRAIN}, {_W(112)}", emitted=False,
       note="still declared, but Megatron-Core models pick kernels with --attention-backend"),
    _f("--disable-bias-linear", "store_false", f"{_TRAIN}, {_W(112)}", dest="add_bias_linear"),
    _f("--add-qkv-bias", "store_true", f"{_TRAIN}, {_W(112)}"),
    _f("--optimizer-cpu-offload", "store_true", f"{_TRAIN}, {_W(112)}",
       note="validate_args asserts --use-precision-aware-optimizer with it"),
    _f("--sequence-parallel", "store_true", f"{_TRAIN}, {_W(112)}",
       note="validate_args silently disables it when TP == 1 (M12)"),
    # _add_checkpointing_args
    _f("--ckpt-format", "choice", f"_add_checkpointing_args, {_W(128)}",
       choices=("torch", "torch_dist", "zarr", "torch_dcp", "fsdp_dtensor"),
       note="validate_args asserts fsdp_dtensor with --use-megatron-fsdp"),
    # _add_mixed_precision_args / _add_transformer_engine_args / _add_experimental_args
    _f("--fp16", "store_true", f"_add_mixed_precision_args, {_W(144)}"),
    _f("--bf16", "store_true", f"_add_mixed_precision_args, {_W(144)}"),
    _f("--fp8-format", "choice", f"_add_transformer_engine_args, {_W(48)}",
       choices=("e4m3", "hybrid"), dest="fp8"),
    _f("--use-precision-aware-optimizer", "store_true", f"_add_experimental_args, {_W(192)}"),
    # _add_distributed_args
    _f("--tensor-model-parallel-size", "int", f"{_DIST}, {_W(144)}"),
    _f("--pipeline-model-parallel-size", "int", f"{_DIST}, {_W(144)}"),
    _f("--decoder-first-pipeline-num-layers", "int", f"{_DIST}, {_W(144)}",
       note="with --decoder-last-pipeline-num-layers: an uneven split, the middle stages even (M8)"),
    _f("--decoder-last-pipeline-num-layers", "int", f"{_DIST}, {_W(144)}"),
    _f("--pipeline-model-parallel-layout", "str", f"{_DIST}, {_W(144)}",
       note="layers per (virtual) stage, stages split by '|': E embedding, t decoder layer, m MTP, L loss; "
       "an interleaved split the two flags above cannot say (M8)"),
    _f("--num-layers-per-virtual-pipeline-stage", "int", f"{_DIST}, {_W(144)}",
       note="at most one of it, --num-virtual-stages-per-pipeline-rank, --pipeline-model-parallel-layout (M8)"),
    _f("--num-virtual-stages-per-pipeline-rank", "int", f"{_DIST}, {_W(144)}", emitted=False),
    _f("--no-overlap-p2p-communication", "store_false", f"{_DIST}, {_W(144)}", dest="overlap_p2p_comm",
       emitted=False, note="P2P overlap is on by default, so the interleaved schedule may use pp = 2 (M9); "
       "there is no --overlap-p2p-comm flag"),
    _f("--use-distributed-optimizer", "store_true", f"{_DIST}, {_W(144)}"),
    _f("--overlap-grad-reduce", "store_true", f"{_DIST}, {_W(144)}",
       note="bucketed DP gradient reduction overlapped with backward; the cost model assumes it"),
    _f("--overlap-param-gather", "store_true", f"{_DIST}, {_W(144)}",
       note="needs the distributed optimizer and --overlap-grad-reduce (M19); the cost model assumes it"),
    _f("--use-megatron-fsdp", "store_true", f"{_DIST}, {_W(144)}"),
    _f("--data-parallel-sharding-strategy", "choice", f"{_DIST}, {_W(144)} (choices continue at 160000)",
       choices=("no_shard", "optim", "optim_grads", "optim_grads_params")),
    _f("--context-parallel-size", "int", f"{_DIST}, {_W(160)}",
       note="validate_args asserts seq-length % (2 x context-parallel-size) == 0 (M15)"),
    # _add_moe_args
    _f("--expert-model-parallel-size", "int", f"{_MOE}, {_W(176)}"),
    _f("--expert-tensor-parallel-size", "int", f"{_MOE}, {_W(176)}",
       note="None means --tensor-model-parallel-size"),
    _f("--num-experts", "int", f"{_MOE}, {_W(176)}"),
    _f("--moe-layer-freq", "moe_freq", f"{_MOE}, {_W(176)}"),
    _f("--moe-ffn-hidden-size", "int", f"{_MOE}, {_W(176)}"),
    _f("--moe-shared-expert-intermediate-size", "int", f"{_MOE}, {_W(176)}",
       note="num_shared_experts x size of one shared expert"),
    _f("--moe-router-topk", "int", f"{_MOE}, {_W(176)}"),
    _f("--moe-router-num-groups", "int", f"{_MOE}, {_W(176)}",
       note="group-limited routing; node-limited when the groups are the EP group's nodes (DeepSeek-V3)"),
    _f("--moe-router-group-topk", "int", f"{_MOE}, {_W(176)}"),
    # _add_mla_args
    _f("--q-lora-rank", "int", f"{_MLA}, {_W(192)}"),
    _f("--kv-lora-rank", "int", f"{_MLA}, {_W(192)}"),
    _f("--qk-head-dim", "int", f"{_MLA}, {_W(192)}", note="the no-RoPE part of the q/k head"),
    _f("--qk-pos-emb-head-dim", "int", f"{_MLA}, {_W(192)}"),
    _f("--v-head-dim", "int", f"{_MLA}, {_W(192)}"),
])

# ---------------------------------------------------------------------------------------------
# DeepSpeed and torchtitan key tables
# ---------------------------------------------------------------------------------------------

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
    "pipeline ZeRO limit": "deepspeed/runtime/pipe/engine.py PipelineEngine.__init__ L76-77",
}

TORCHTITAN_KEYS: dict[str, str] = {
    "parallelism.data_parallel_replicate_degree": "job_config.py Parallelism; configs.py ParallelismConfig",
    "parallelism.data_parallel_shard_degree": "job_config.py Parallelism; configs.py ParallelismConfig",
    "parallelism.fsdp_reshard_after_forward": "job_config.py Parallelism (default|always|never)",
    "parallelism.tensor_parallel_degree": "job_config.py Parallelism; configs.py ParallelismConfig",
    "parallelism.pipeline_parallel_degree": "job_config.py Parallelism; configs.py ParallelismConfig",
    "parallelism.pipeline_parallel_schedule": "job_config.py Parallelism (1F1B, Interleaved1F1B, ...)",
    "parallelism.pipeline_parallel_layers_per_stage": "job_config.py Parallelism; pipeline_parallel.py pipeline_llm",
    "parallelism.pipeline_parallel_microbatch_size": "job_config.py Parallelism",
    "parallelism.context_parallel_degree": "job_config.py Parallelism; configs.py ParallelismConfig",
    "parallelism.expert_parallel_degree": "job_config.py Parallelism; configs.py ParallelismConfig",
    "parallelism.expert_tensor_parallel_degree": "later job_config.py Parallelism (etp = 1 or tp); gone from configs.py",
    "training.local_batch_size": "job_config.py Training; configs.py TrainingConfig",
    "training.global_batch_size": "job_config.py Training; configs.py TrainingConfig",
    "training.seq_len": "job_config.py Training; configs.py TrainingConfig",
    "training.mixed_precision_param": "job_config.py Training (bfloat16|float32)",
    "training.enable_cpu_offload": "job_config.py Training (FSDP CPU offload of params, grads, optimizer)",
    "activation_checkpoint.mode": "configs.py ActivationCheckpointConfig (selective|full|memory_budget|none)",
}

NVME_PATH_PLACEHOLDER = "/REPLACE_ME/local_nvme_mount"
"""Written as `nvme_path` when offloading to NVMe: replace it with a node-local NVMe mount."""


# ---------------------------------------------------------------------------------------------
# shared checks
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Batch:
    dp: int
    mbs: int
    m: int
    gbs: int
    seq: int


def _resolved(layout: Layout, training: Training, cluster: Cluster) -> _Batch:
    if layout.dp is None:
        raise InputError("Layout.dp", None, "the data-parallel degree",
                         f"use layout.for_world({cluster.gpus}) first")
    if layout.num_microbatches is None:
        raise InputError("Layout.num_microbatches", None, "an int (micro-batches per step per pipeline)",
                         "derive it as global_batch_size // (micro_batch_size * dp)")
    if training.seq_len is None:
        raise InputError("Training.seq_len", None, "an int", "resolve Training against the model first")
    if training.global_batch_size is None:
        raise InputError("Training.global_batch_size", None, "an int", "resolve Training against the model first")
    world = layout.world()
    if world != cluster.gpus:
        raise InputError(
            "Layout.dp", layout.dp, f"a layout covering all {cluster.gpus} GPUs of the cluster",
            f"tp({layout.tp}) * cp({layout.cp}) * pp({layout.pp}) * dp({layout.dp}) = {world}",
        )
    b = _Batch(layout.dp, layout.micro_batch_size, layout.num_microbatches,
               training.global_batch_size, training.seq_len)
    product = b.mbs * b.m * b.dp
    if product != b.gbs:
        raise InputError(
            "Training.global_batch_size", b.gbs,
            f"micro_batch_size({b.mbs}) * num_microbatches({b.m}) * dp({b.dp}) = {product}",
            "the batch identity train_batch = micro x accumulation x dp (Megatron, DeepSpeed and "
            "torchtitan all check it)",
        )
    return b


def _layers_per_virtual_stage(layout: Layout, model: Model) -> int | None:
    """--num-layers-per-virtual-pipeline-stage, when every chunk has the same layers; else None
    (no virtual stages, or a split only _pipeline_layout can say)."""
    if layout.vpp == 1:
        return None
    if layout.pp == 1:
        raise InputError("Layout.vpp", layout.vpp, "1 when pp is 1", "virtual stages interleave pipeline ranks")
    chunks = layout.pp * layout.vpp
    return None if model.layers % chunks else model.layers // chunks


def _pipeline_layout(layout: Layout, model: Model) -> str | None:
    """--pipeline-model-parallel-layout for an interleaved split with unequal chunks: the split the
    cost model estimated (context.virtual_stage_layers), one '|'-separated stage per virtual stage
    in model order, the embedding first, the MTP layers and the loss last, each layer written out."""
    if layout.vpp == 1 or layout.pp == 1 or _layers_per_virtual_stage(layout, model) is not None:
        return None
    sizes = virtual_stage_layers(model.layers, layout.pp, layout.vpp)
    if sizes is None:
        split = megatron_split(model.layers, layout.pp)
        raise InputError(
            "Layout.vpp", layout.vpp, "at most the layers of the lightest pipeline stage (one per chunk)",
            f"layers({model.layers}) over pp({layout.pp}): "
            + (f"the lightest stage holds {min(split)}" if split else "no split Megatron can run"))
    stages = ["t" * n for n in sizes]
    stages[0] = "E" + stages[0]
    stages[-1] += "m" * (model.mtp_layers or 0) + "L"
    return "|".join(stages)


# ---------------------------------------------------------------------------------------------
# Megatron-LM
# ---------------------------------------------------------------------------------------------

def _uneven_split(layout: Layout, model: Model) -> tuple[int, int] | None:
    """(first, last) stage layers when layers % pp != 0: the split advisor's cost model estimated
    (estimate.context.megatron_split), which Megatron takes as --decoder-first/last-pipeline-num-layers."""
    if layout.pp == 1 or model.layers % layout.pp == 0 or layout.framework == "megatron+deepspeed":
        return None    # (Megatron-DeepSpeed's PipelineModule partitions any layer count by itself)
    split = megatron_split(model.layers, layout.pp)
    if split is None:
        raise InputError("Layout.pp", layout.pp, f"a pipeline degree Megatron can split {model.layers} layers over",
                         f"layers({model.layers}) % pp({layout.pp}) = {model.layers % layout.pp}: with even middle "
                         f"stages of {-(-model.layers // layout.pp)} the first and last would get "
                         f"{model.layers - -(-model.layers // layout.pp) * (layout.pp - 2)} layers between them; "
                         "such a split needs --pipeline-model-parallel-layout")
    return split[0], split[-1]


def megatron_args(layout: Layout, model: Model, training: Training, cluster: Cluster) -> list[str]:
    """Megatron-LM command-line arguments (for `pretrain_gpt.py`) for this layout and model.

    Model shape, parallelism, batch, recompute and precision flags; the tokenizer, data, optimizer
    hyper-parameters and checkpoint paths stay the user's. ZeRO maps to Megatron as: 1 ->
    `--use-distributed-optimizer`; 2/3 -> Megatron-FSDP (`--use-megatron-fsdp
    --data-parallel-sharding-strategy optim_grads|optim_grads_params --ckpt-format fsdp_dtensor`).
    Under framework "megatron+deepspeed" ZeRO lives in the DeepSpeed JSON and no ZeRO flag is
    written. Every flag is in `MEGATRON_FLAGS`, checked against MEGATRON_ARGUMENTS_SOURCE.
    """
    b = _resolved(layout, training, cluster)
    out: list[str] = []

    def add(flag: str, value: object = None) -> None:
        MEGATRON_FLAGS[flag]  # a KeyError here means an unverified flag: check it, then add it to the table
        out.append(flag)
        if value is not None:
            out.append(str(value))

    # -- model shape
    add("--num-layers", model.layers)
    add("--hidden-size", model.hidden)
    add("--ffn-hidden-size", model.ffn_hidden)
    add("--num-attention-heads", model.heads)
    if model.mla is None:
        if model.head_dim != model.hidden // model.heads or model.hidden % model.heads:
            add("--kv-channels", model.head_dim)
        if model.kv_heads != model.heads:
            add("--group-query-attention")
            add("--num-query-groups", model.kv_heads)
    add("--seq-length", b.seq)
    if model.position_embedding == "alibi":
        raise InputError("Model.position_embedding", "alibi", "'rope' or 'learned' for Megatron-LM",
                         "--position-embedding-type has no ALiBi choice (arguments.py _add_network_size_args)")
    if model.position_embedding == "learned":
        table = model.max_position or model.seq_len or b.seq
        if b.seq > table:
            raise InputError("Training.seq_len", b.seq, f"at most the learned position table ({table})",
                             "Megatron asserts max_position_embeddings >= seq_length")
        add("--max-position-embeddings", table)
        add("--position-embedding-type", "learned_absolute")
    else:
        add("--max-position-embeddings", max(model.max_position or 0, b.seq))
        add("--position-embedding-type", "rope")
    add("--normalization", "RMSNorm" if model.norm == "rmsnorm" else "LayerNorm")
    if model.activation == "swiglu":
        add("--swiglu")
    if not model.tied_embeddings:
        add("--untie-embeddings-and-output-weights")
    if not model.bias:
        add("--disable-bias-linear")
        if model.qkv_bias:
            add("--add-qkv-bias")
    if model.qk_norm:
        add("--qk-layernorm")
    if model.mla is not None:
        a = model.mla
        add("--multi-latent-attention")
        if a.q_lora_rank:
            add("--q-lora-rank", a.q_lora_rank)
        add("--kv-lora-rank", a.kv_lora_rank)
        add("--qk-head-dim", a.qk_nope_head_dim)
        add("--qk-pos-emb-head-dim", a.qk_rope_head_dim)
        add("--v-head-dim", a.v_head_dim)
    if model.is_moe:
        add("--num-experts", model.experts)
        add("--moe-router-topk", model.experts_per_token)
        if model.router_groups > 1:
            add("--moe-router-num-groups", model.router_groups)
            if model.router_group_topk is not None:
                add("--moe-router-group-topk", model.router_group_topk)
        add("--moe-ffn-hidden-size", model.moe_ffn_hidden)
        if model.shared_experts:
            add("--moe-shared-expert-intermediate-size", model.shared_experts * model.moe_ffn_hidden)
        if model.dense_layers or model.moe_layer_freq > 1:
            add("--moe-layer-freq", _moe_layer_pattern(model))
    if model.mtp_layers:
        add("--mtp-num-layers", model.mtp_layers)

    # -- parallelism
    add("--tensor-model-parallel-size", layout.tp)
    add("--pipeline-model-parallel-size", layout.pp)
    pipeline_layout = _pipeline_layout(layout, model)
    uneven = _uneven_split(layout, model)
    if pipeline_layout is not None:
        add("--pipeline-model-parallel-layout", pipeline_layout)   # (it says the first/last split too)
    elif uneven is not None:
        add("--decoder-first-pipeline-num-layers", uneven[0])
        add("--decoder-last-pipeline-num-layers", uneven[1])
    per_vstage = _layers_per_virtual_stage(layout, model)
    if per_vstage is not None:
        add("--num-layers-per-virtual-pipeline-stage", per_vstage)
    if layout.sp and layout.tp > 1:
        add("--sequence-parallel")
    add("--context-parallel-size", layout.cp)
    if model.is_moe:
        add("--expert-model-parallel-size", layout.ep)
        add("--expert-tensor-parallel-size", layout.etp or layout.tp)
    elif layout.ep > 1:
        raise InputError("Layout.ep", layout.ep, "1 for a dense model", f"{model.name} has no experts")
    if layout.framework != "megatron+deepspeed":
        if layout.dp * layout.cp > 1:
            # advisor's step-time estimate assumes DP traffic overlaps compute (Assumptions.overlap_grad_reduce,
            # overlap_param_gather): ask Megatron for it, or the estimate is optimistic.
            add("--overlap-grad-reduce")
        if layout.zero_stage == 1:
            add("--use-distributed-optimizer")
            if layout.dp * layout.cp > 1:
                add("--overlap-param-gather")               # M19: needs the distributed optimizer + grad overlap
        elif layout.zero_stage >= 2:
            add("--use-megatron-fsdp")
            add("--data-parallel-sharding-strategy", "optim_grads" if layout.zero_stage == 2 else "optim_grads_params")
            add("--ckpt-format", "fsdp_dtensor")

    # -- batch
    add("--micro-batch-size", b.mbs)
    add("--global-batch-size", b.gbs)

    # -- recompute
    if layout.recompute == "selective":
        add("--recompute-granularity", "selective")
    elif layout.recompute == "full":
        add("--recompute-granularity", "full")
        add("--recompute-method", "uniform")
        add("--recompute-num-layers", 1)

    # -- precision and kernels
    if training.precision == "fp16":
        add("--fp16")
    else:
        add("--bf16")
        if training.precision == "fp8":
            add("--fp8-format", "hybrid")
    add("--attention-backend", "flash" if training.flash_attention else "unfused")

    # -- offload (Megatron offloads optimizer state to the CPU only)
    if layout.offload != "none":
        if layout.offload != "optimizer" or layout.offload_device != "cpu":
            raise InputError("Layout.offload", f"{layout.offload} to {layout.offload_device}",
                             "'optimizer' to 'cpu' under Megatron-LM",
                             "Megatron-LM has --optimizer-cpu-offload only; parameter and NVMe offload are DeepSpeed's")
        add("--optimizer-cpu-offload")
        add("--use-precision-aware-optimizer")
    return out


def _moe_layer_pattern(model: Model) -> str:
    """--moe-layer-freq as a Python list expression: 0 = dense layer, 1 = MoE layer."""
    if model.moe_layer_freq == 1:
        return f"([0]*{model.dense_layers}+[1]*{model.layers - model.dense_layers})"
    flags = [0 if i < model.dense_layers or (i - model.dense_layers) % model.moe_layer_freq else 1
             for i in range(model.layers)]
    return "[" + ",".join(map(str, flags)) + "]"


def _needs_single_connection(layout: Layout) -> bool:
    # validate_args asserts CUDA_DEVICE_MAX_CONNECTIONS == "1" when TP or CP > 1 on pre-Blackwell
    # GPUs, unless Megatron-FSDP / torch FSDP2 is used (arguments.py validate_args, chars 32000-48000).
    fsdp = layout.framework != "megatron+deepspeed" and layout.zero_stage >= 2
    return (layout.tp > 1 or layout.cp > 1) and not fsdp


def megatron_command(layout: Layout, model: Model, training: Training, cluster: Cluster, *,
                     script: str = "pretrain_gpt.py") -> str:
    """A shell command: `torchrun ... pretrain_gpt.py` with one Megatron flag (and its value) per
    line, shell-quoted, continued with backslashes. Add your tokenizer, data and checkpoint flags."""
    args = megatron_args(layout, model, training, cluster)
    lines: list[str] = []
    i = 0
    while i < len(args):
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            lines.append(f"{shlex.quote(args[i])} {shlex.quote(args[i + 1])}")
            i += 2
        else:
            lines.append(shlex.quote(args[i]))
            i += 1
    head = torchrun_command(cluster, script=script)
    if _needs_single_connection(layout):
        head = "CUDA_DEVICE_MAX_CONNECTIONS=1 " + head
    return " \\\n    ".join([head, *lines])


# ---------------------------------------------------------------------------------------------
# DeepSpeed
# ---------------------------------------------------------------------------------------------

def deepspeed_config(layout: Layout, model: Model, training: Training, cluster: Cluster, *,
                     gradient_clipping: float = 1.0) -> dict[str, Any]:
    """A DeepSpeed JSON config (as a dict) for this layout.

    The batch triple satisfies DeepSpeed's identity `train_batch_size == micro * accumulation *
    dp` (runtime/config.py `_batch_assertion`); the DP world is `layout.dp` (DeepSpeed takes it from
    the model-parallel unit when tp/pp/cp > 1). FP8 compute is configured in the model code
    (Transformer Engine), not in this file, so fp8 writes the bf16 section. Offload to NVMe writes
    `nvme_path` = NVME_PATH_PLACEHOLDER, which must be replaced.
    """
    b = _resolved(layout, training, cluster)
    stage = layout.zero_stage
    if layout.pp > 1 and stage >= 2:
        raise InputError(
            "Layout.zero_stage", stage, "0 or 1 when pp > 1 under DeepSpeed",
            "DeepSpeed's pipeline engine asserts 'ZeRO-2 and ZeRO-3 are incompatible with pipeline "
            "parallelism' (deepspeed/runtime/pipe/engine.py, PipelineEngine.__init__)",
        )
    zero: dict[str, Any] = {"stage": stage}
    if layout.offload != "none":
        dev = layout.offload_device
        if stage == 0:
            raise InputError("Layout.offload", layout.offload, "'none' with ZeRO stage 0",
                             "offload_optimizer is valid with ZeRO stage 1, 2, 3 (zero/offload_config.py)")
        if layout.offload == "optimizer+params" and stage != 3:
            raise InputError("Layout.offload", layout.offload, "'optimizer' unless zero_stage is 3",
                             "offload_param is valid only with ZeRO stage 3 (zero/offload_config.py)")
        if dev == "nvme" and stage != 3:
            raise InputError("Layout.offload_device", dev, "'cpu' unless zero_stage is 3",
                             "NVMe offload needs ZeRO-3 (ZeRO-Infinity; docs/_pages/config-json.md)")
        zero["offload_optimizer"] = _offload_section(dev)
        if layout.offload == "optimizer+params":
            zero["offload_param"] = _offload_section(dev)
    cfg: dict[str, Any] = {
        "train_batch_size": b.gbs,
        "train_micro_batch_size_per_gpu": b.mbs,
        "gradient_accumulation_steps": b.m,
        "gradient_clipping": gradient_clipping,
        "zero_optimization": zero,
    }
    if training.precision == "fp16":
        cfg["fp16"] = {"enabled": True}
    else:
        cfg["bf16"] = {"enabled": True}
    return cfg


def _offload_section(device: str) -> dict[str, Any]:
    sec: dict[str, Any] = {"device": device, "pin_memory": True}
    if device == "nvme":
        sec["nvme_path"] = NVME_PATH_PLACEHOLDER
    return sec


# ---------------------------------------------------------------------------------------------
# torchtitan
# ---------------------------------------------------------------------------------------------

def torchtitan_toml(layout: Layout, model: Model, training: Training, cluster: Cluster) -> str:
    """The `[parallelism]`, `[training]` and `[activation_checkpoint]` sections of a torchtitan job
    config (TOML, as read with `--job.config_file` by job_config.py-era torchtitan).

    ZeRO maps onto torchtitan's data-parallel axes: zero_stage >= 2 -> FSDP
    (data_parallel_shard_degree = dp; ZeRO-2 keeps gathered parameters between forward and backward,
    fsdp_reshard_after_forward = "never"), else plain replication (data_parallel_replicate_degree = dp).
    The emitted TOML says which one in a comment. Merge the sections into your job config.
    """
    b = _resolved(layout, training, cluster)
    if training.precision == "fp16":
        raise InputError("Training.precision", "fp16", "'bf16' or 'fp8' under torchtitan",
                         "torchtitan's mixed_precision_param is bfloat16 or float32")
    shard = layout.zero_stage >= 2
    lines = [
        f"# torchtitan config fragment written by advisor for layout {layout.id} ({model.name}, "
        f"{cluster.gpus} GPUs, {cluster.nodes} node(s)).",
        "# Key names: pytorch/torchtitan torchtitan/config/job_config.py. Newer torchtitan takes a",
        "# config_registry function and `--section.key` overrides with the same names.",
        "",
        "[parallelism]",
    ]
    if shard:
        reshard = "never" if layout.zero_stage == 2 else "default"
        lines += [
            f"# ZeRO-{layout.zero_stage} -> FSDP: dp={b.dp} shards parameters, gradients and optimizer "
            "state (data_parallel_shard_degree).",
            "data_parallel_replicate_degree = 1",
            f"data_parallel_shard_degree = {b.dp}",
            f'fsdp_reshard_after_forward = "{reshard}"',
        ]
    else:
        lines += [
            f"# ZeRO-{layout.zero_stage} -> replicated data parallelism (DDP): torchtitan has no ZeRO-1; "
            f"dp={b.dp} is data_parallel_replicate_degree.",
            f"data_parallel_replicate_degree = {b.dp}",
            "data_parallel_shard_degree = 1",
        ]
        if layout.cp > 1:
            lines.append("# torchtitan still applies FSDP over the cp axis (its FSDP mesh is dp_shard x cp)")
    lines += [
        f"tensor_parallel_degree = {layout.tp}",
        f"pipeline_parallel_degree = {layout.pp}",
        f"context_parallel_degree = {layout.cp}",
        f"expert_parallel_degree = {layout.ep}",
    ]
    if layout.tp > 1 and not layout.sp:
        lines.append("# note: torchtitan applies sequence parallelism with TP by default")
    if model.is_moe and layout.ep > 1:
        etp = layout.etp or layout.tp
        if etp not in (1, layout.tp):
            raise InputError("Layout.etp", etp, f"1 or tp ({layout.tp}) under torchtitan",
                             "torchtitan supports etp = tp or etp = 1 (job_config.py Parallelism)")
        lines.append(f"expert_tensor_parallel_degree = {etp}")
    elif layout.ep > 1:
        raise InputError("Layout.ep", layout.ep, "1 for a dense model", f"{model.name} has no experts")
    if layout.pp > 1:
        lines += _torchtitan_pipeline(layout, model, b)

    local = b.mbs * b.m if layout.pp > 1 else b.mbs
    lines += [
        "",
        "[training]",
        f"# local_batch_size x dp x gradient accumulation = global_batch_size ({b.gbs});",
        ("# with PP the micro-batches come from local_batch_size / pipeline_parallel_microbatch_size."
         if layout.pp > 1 else f"# torchtitan accumulates {b.m} micro-batches per step."),
        f"local_batch_size = {local}",
        f"global_batch_size = {b.gbs}",
        f"seq_len = {b.seq}",
        'mixed_precision_param = "bfloat16"',
    ]
    if training.precision == "fp8":
        lines.append('# fp8: enable the float8 converter (job_config.py [model] converters = ["float8"])')
    if layout.offload != "none":
        if not shard or layout.offload_device != "cpu":
            raise InputError("Layout.offload", f"{layout.offload} to {layout.offload_device}",
                             "CPU offload with zero_stage >= 2 under torchtitan",
                             "torchtitan offloads through FSDP (training.enable_cpu_offload), to the CPU only")
        lines.append("enable_cpu_offload = true  # FSDP CPU offload of parameters, gradients and optimizer state")
    lines += ["", "[activation_checkpoint]", f'mode = "{layout.recompute}"', ""]
    return "\n".join(lines)


def _torchtitan_pipeline(layout: Layout, model: Model, b: _Batch) -> list[str]:
    if layout.vpp == 1:
        out = ['pipeline_parallel_schedule = "1F1B"']
    else:
        out = ['pipeline_parallel_schedule = "Interleaved1F1B"']
        # pipeline_parallel.py: stages = ceil((layers + first_less + last_less) / layers_per_stage),
        # first_less = last_less = 1 by default; stages must equal pp * vpp.
        stages = layout.pp * layout.vpp
        weight = model.layers + 2
        fits = [k for k in range(1, weight + 1) if math.ceil(weight / k) == stages]
        if fits:
            out.append(f"pipeline_parallel_layers_per_stage = {fits[-1]}")
        elif layout.vpp != 2:   # torchtitan's default for looped schedules is 2 stages per rank
            raise InputError(
                "Layout.vpp", layout.vpp, f"a value torchtitan can split {model.layers} layers into",
                f"no pipeline_parallel_layers_per_stage gives ceil(({model.layers} + 2) / k) = pp*vpp = {stages}",
            )
    out.append(f"pipeline_parallel_microbatch_size = {b.mbs}")
    return out


# ---------------------------------------------------------------------------------------------
# torchrun
# ---------------------------------------------------------------------------------------------

def torchrun_command(cluster: Cluster, *, script: str | None = None, script_args: Sequence[str] = (),
                     rdzv_endpoint: str = "$MASTER_ADDR:$MASTER_PORT", rdzv_id: str = "$JOB_ID") -> str:
    """A `torchrun` launch line for the cluster: one process per GPU.

    Several nodes use the c10d rendezvous; `$MASTER_ADDR`, `$MASTER_PORT` and `$JOB_ID` are
    placeholders for the launcher (Slurm, Kubernetes, ...) to fill, left double-quoted so the
    shell expands them. One node uses `--standalone`.
    """
    per_node = cluster.gpus_in_node
    parts = ["torchrun", f"--nnodes={cluster.nodes}", f"--nproc-per-node={per_node}"]
    if cluster.nodes == 1:
        parts.append("--standalone")
    else:
        parts += [f'--rdzv-id="{rdzv_id}"', "--rdzv-backend=c10d", f'--rdzv-endpoint="{rdzv_endpoint}"']
    if script is not None:
        parts.append(shlex.quote(script))
        parts += [shlex.quote(a) for a in script_args]
    return " ".join(parts)
