"""Megatron-LM: command-line flags for `pretrain_gpt.py` and a `torchrun` command around them.

Sources: NVIDIA/Megatron-LM megatron/training/arguments.py at commit
000c4ac24f61159c138b0975def722c65245983c (the newest stored copy, 207,307 characters; an older
stored copy, 307dcf37, is 93,035). MEGATRON_FLAGS records, for every flag written here, the
`_add_*_args` function and the character window of the stored file in which its `add_argument`
call sits.

Legality is the audit's (rules/audit-megatron.toml): every refusal below is an assertion of that
contract and names the rule that forbids the layout.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, Literal

from ..inputs.pipeline import megatron_split, stage_layers, virtual_stage_layers
from ..inputs.precision import recipe
from ..inputs.layout import Layout
from ..inputs.specs import Cluster, Model, Training
from .batch import Batch, refused, resolved
from .torchrun import torchrun_command

__all__ = ["MegatronFlag", "MEGATRON_FLAGS", "MEGATRON_ARGUMENTS_SOURCE", "megatron_args", "megatron_command"]

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
       choices=("learned_absolute", "rope", "mrope", "relative", "none"),
       note="no ALiBi choice in Megatron-LM; BigScience's Megatron-DeepSpeed takes alibi (megatron/enums.py "
            "@ 754cf21a487eb2a63eaaa7f9def52d725262b639), written for framework megatron+deepspeed"),
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
    _f("--fp8-recipe", "choice", f"_add_transformer_engine_args, {_W(48)}",
       choices=("tensorwise", "delayed", "mxfp8", "blockwise", "custom"), note="default delayed"),
    _f("--fp4-format", "choice", f"_add_transformer_engine_args, {_W(64)}", choices=("e2m1",), dest="fp4"),
    _f("--fp4-recipe", "choice", f"_add_transformer_engine_args, {_W(64)}", choices=("nvfp4",)),
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


class _Args(list):
    """The argument list under construction; `add` accepts only flags of MEGATRON_FLAGS."""

    def add(self, flag: str, value: object = None) -> None:
        MEGATRON_FLAGS[flag]  # a KeyError here means an unverified flag: check it, then add it to the table
        self.append(flag)
        if value is not None:
            self.append(str(value))


def megatron_args(layout: Layout, model: Model, training: Training, cluster: Cluster) -> list[str]:
    """Megatron-LM command-line arguments (for `pretrain_gpt.py`) for this layout and model.

    Model shape, parallelism, batch, recompute and precision flags; the tokenizer, data, optimizer
    hyper-parameters and checkpoint paths stay the user's. ZeRO maps to Megatron as: 1 ->
    `--use-distributed-optimizer`; 2/3 -> Megatron-FSDP (`--use-megatron-fsdp
    --data-parallel-sharding-strategy optim_grads|optim_grads_params --ckpt-format fsdp_dtensor`).
    Under framework "megatron+deepspeed" ZeRO and offload live in the DeepSpeed JSON and no ZeRO or
    offload flag is written. Every flag is in `MEGATRON_FLAGS`, checked against
    MEGATRON_ARGUMENTS_SOURCE. A layout `advisor.audit` refuses raises InputError naming the rule.
    """
    b = resolved(layout, training, cluster)
    out = _Args()
    _shape(out, layout, model, b)
    _parallelism(out, layout, model)
    if layout.framework != "megatron+deepspeed":
        _zero(out, layout)
    out.add("--micro-batch-size", b.mbs)
    out.add("--global-batch-size", b.gbs)
    _recompute_and_precision(out, layout, training)
    if layout.framework != "megatron+deepspeed":
        _offload(out, layout)
    return list(out)


def _shape(out: _Args, layout: Layout, model: Model, b: Batch) -> None:
    out.add("--num-layers", model.layers)
    out.add("--hidden-size", model.hidden)
    out.add("--ffn-hidden-size", model.ffn_hidden)
    out.add("--num-attention-heads", model.heads)
    if model.mla is None:
        if model.head_dim != model.hidden // model.heads or model.hidden % model.heads:
            out.add("--kv-channels", model.head_dim)
        if model.kv_heads != model.heads:
            out.add("--group-query-attention")
            out.add("--num-query-groups", model.kv_heads)
    out.add("--seq-length", b.seq)
    _positions(out, layout, model, b)
    out.add("--normalization", "RMSNorm" if model.norm == "rmsnorm" else "LayerNorm")
    if model.activation == "swiglu":
        out.add("--swiglu")
    if not model.tied_embeddings:
        out.add("--untie-embeddings-and-output-weights")
    if not model.bias:
        out.add("--disable-bias-linear")
        if model.qkv_bias:
            out.add("--add-qkv-bias")
    if model.qk_norm:
        out.add("--qk-layernorm")
    if model.mla is not None:
        a = model.mla
        out.add("--multi-latent-attention")
        if a.q_lora_rank:
            out.add("--q-lora-rank", a.q_lora_rank)
        out.add("--kv-lora-rank", a.kv_lora_rank)
        out.add("--qk-head-dim", a.qk_nope_head_dim)
        out.add("--qk-pos-emb-head-dim", a.qk_rope_head_dim)
        out.add("--v-head-dim", a.v_head_dim)
    _moe(out, layout, model)
    if model.mtp_layers:
        out.add("--mtp-num-layers", model.mtp_layers)


def _positions(out: _Args, layout: Layout, model: Model, b: Batch) -> None:
    """Learned tables keep their size (the audit refuses a longer sequence); RoPE gets a table as
    long as the sequence, so context extension runs (megatron.rope-context-extension notes it);
    ALiBi only under Megatron-DeepSpeed, whose BigScience fork implements it."""
    if model.position_embedding == "alibi" and layout.framework == "megatron+deepspeed":
        out.add("--max-position-embeddings", max(model.max_position or 0, b.seq))
        out.add("--position-embedding-type", "alibi")
        return
    if model.position_embedding == "alibi":
        raise refused("Model.position_embedding", "alibi", "'rope' or 'learned' for Megatron-LM", "megatron.no-alibi",
                      "--position-embedding-type has no ALiBi choice (arguments.py _add_network_size_args)")
    if model.position_embedding == "learned":
        table = model.max_position or model.seq_len or b.seq
        if b.seq > table:
            raise refused("Training.seq_len", b.seq, f"at most the learned position table ({table})",
                          "megatron.max-position-covers-sequence",
                          "Megatron asserts max_position_embeddings >= seq_length")
        out.add("--max-position-embeddings", table)
        out.add("--position-embedding-type", "learned_absolute")
    else:
        out.add("--max-position-embeddings", max(model.max_position or 0, b.seq))
        out.add("--position-embedding-type", "rope")


def _moe(out: _Args, layout: Layout, model: Model) -> None:
    if not model.is_moe:
        if layout.ep > 1:
            raise refused("Layout.ep", layout.ep, "1 for a dense model", "megatron.experts-divisible-by-ep",
                          f"{model.name} has no experts")
        return
    out.add("--num-experts", model.experts)
    out.add("--moe-router-topk", model.experts_per_token)
    if model.router_groups > 1:
        out.add("--moe-router-num-groups", model.router_groups)
        if model.router_group_topk is not None:
            out.add("--moe-router-group-topk", model.router_group_topk)
    out.add("--moe-ffn-hidden-size", model.moe_ffn_hidden)
    if model.shared_experts:
        out.add("--moe-shared-expert-intermediate-size", model.shared_experts * model.moe_ffn_hidden)
    if model.dense_layers or model.moe_layer_freq > 1:
        out.add("--moe-layer-freq", _moe_layer_pattern(model))


def _moe_layer_pattern(model: Model) -> str:
    """--moe-layer-freq as a Python list expression: 0 = dense layer, 1 = MoE layer."""
    if model.moe_layer_freq == 1:
        return f"([0]*{model.dense_layers}+[1]*{model.layers - model.dense_layers})"
    flags = [0 if i < model.dense_layers or (i - model.dense_layers) % model.moe_layer_freq else 1
             for i in range(model.layers)]
    return "[" + ",".join(map(str, flags)) + "]"


def _parallelism(out: _Args, layout: Layout, model: Model) -> None:
    out.add("--tensor-model-parallel-size", layout.tp)
    out.add("--pipeline-model-parallel-size", layout.pp)
    _pipeline_split(out, layout, model)
    if layout.sp and layout.tp > 1:
        out.add("--sequence-parallel")
    out.add("--context-parallel-size", layout.cp)
    if model.is_moe:
        out.add("--expert-model-parallel-size", layout.ep)
        out.add("--expert-tensor-parallel-size", layout.etp or layout.tp)


def _pipeline_split(out: _Args, layout: Layout, model: Model) -> None:
    """How the layers split over the pipeline: nothing for an even split (or under Megatron-DeepSpeed,
    whose PipelineModule partitions any layer count itself), --num-layers-per-virtual-pipeline-stage
    for even chunks, the first/last-stage flags for Megatron's uneven split (estimate.context.megatron_split),
    else --pipeline-model-parallel-layout with the split the cost model estimated."""
    if layout.vpp > 1:
        if layout.pp == 1:
            raise refused("Layout.vpp", layout.vpp, "1 when pp is 1", "megatron.vpp-needs-pp",
                          "virtual stages interleave pipeline ranks")
        chunks = layout.pp * layout.vpp
        if model.layers % chunks == 0:
            out.add("--num-layers-per-virtual-pipeline-stage", model.layers // chunks)
            return
        sizes = virtual_stage_layers(model.layers, layout.pp, layout.vpp)
        if sizes is None:
            split = stage_layers(model.layers, layout.pp)
            raise refused("Layout.vpp", layout.vpp, "at most the layers of the lightest pipeline stage (one per chunk)",
                          "megatron.virtual-stage-needs-a-layer",
                          f"layers({model.layers}) over pp({layout.pp}): the lightest stage holds {min(split)}")
        out.add("--pipeline-model-parallel-layout", _layout_string(sizes, model))
        return
    if layout.pp == 1 or model.layers % layout.pp == 0 or layout.framework == "megatron+deepspeed":
        return
    split = megatron_split(model.layers, layout.pp)
    if split is not None:
        out.add("--decoder-first-pipeline-num-layers", split[0])
        out.add("--decoder-last-pipeline-num-layers", split[-1])
    else:   # even middle stages would leave the first and last empty: say the estimated split outright
        out.add("--pipeline-model-parallel-layout", _layout_string(stage_layers(model.layers, layout.pp), model))


def _layout_string(sizes: list[int], model: Model) -> str:
    """--pipeline-model-parallel-layout: one '|'-separated stage per (virtual) stage in model order,
    the embedding first, the MTP layers and the loss last, each layer written out."""
    stages = ["t" * n for n in sizes]
    stages[0] = "E" + stages[0]
    stages[-1] += "m" * (model.mtp_layers or 0) + "L"
    return "|".join(stages)


def _zero(out: _Args, layout: Layout) -> None:
    if layout.dp * layout.cp > 1:
        # advisor's step-time estimate assumes DP traffic overlaps compute (Assumptions.overlap_grad_reduce,
        # overlap_param_gather): ask Megatron for it, or the estimate is optimistic.
        out.add("--overlap-grad-reduce")
    if layout.zero_stage == 1:
        out.add("--use-distributed-optimizer")
        if layout.dp * layout.cp > 1:
            out.add("--overlap-param-gather")               # M19: needs the distributed optimizer + grad overlap
    elif layout.zero_stage >= 2:
        out.add("--use-megatron-fsdp")
        out.add("--data-parallel-sharding-strategy", "optim_grads" if layout.zero_stage == 2 else "optim_grads_params")
        out.add("--ckpt-format", "fsdp_dtensor")


def _recompute_and_precision(out: _Args, layout: Layout, training: Training) -> None:
    if layout.recompute == "selective":
        out.add("--recompute-granularity", "selective")
    elif layout.recompute == "full":
        out.add("--recompute-granularity", "full")
        out.add("--recompute-method", "uniform")
        out.add("--recompute-num-layers", 1)
    if training.precision == "fp16":
        out.add("--fp16")
    else:
        out.add("--bf16")
        flags = recipe(training.precision).megatron_flags   # (flag, value) pairs
        for flag, value in zip(flags[::2], flags[1::2]):
            out.add(flag, value)
    out.add("--attention-backend", "flash" if training.flash_attention else "unfused")


def _offload(out: _Args, layout: Layout) -> None:
    """Megatron offloads optimizer state to the CPU only."""
    if layout.offload == "none":
        return
    if layout.offload != "optimizer" or layout.offload_device != "cpu":
        raise refused("Layout.offload", f"{layout.offload} to {layout.offload_device}",
                      "'optimizer' to 'cpu' under Megatron-LM", "megatron.offload-optimizer-to-cpu-only",
                      "Megatron-LM has --optimizer-cpu-offload only; parameter and NVMe offload are DeepSpeed's")
    out.add("--optimizer-cpu-offload")
    out.add("--use-precision-aware-optimizer")


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

