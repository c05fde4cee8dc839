"""Megatron-LM: command-line flags for `pretrain_gpt.py` and a `torchrun` command around them.

Sources: NVIDIA/Megatron-LM megatron/training/arguments.py at commit
000c4ac24f61159c138b0975def722c65245983c (the newest stored copy, 207,307 characters; an older
stored copy, 307dcf37, is 93,035). MEGATRON_FLAGS (megatron_flags.py) records, for every flag written here, the
`_add_*_args` function and the character window of the stored file in which its `add_argument`
call sits.

The flags of the settings the estimate depends on: token dispatcher, router, RoPE,
recompute modules, overlaps, offload, FP8 parameters, optimizer) were read at the two releases the
export targets, MEGATRON_PINS: main and the latest core release. There many flags are generated from
Megatron-Core's config dataclasses (megatron/training/argument_utils.py ArgumentGroupFactory: field
`moe_token_dispatcher_type` -> `--moe-token-dispatcher-type`); their `where` names the field and its
line at each pin. tests/data/frameworks/megatron-*.json are the real parsers' option lists at the
pins (benchmarks/validate_exports.py --snapshot), and tests check every emitted flag against them.

Legality is the audit's (rules/audit-megatron.toml): every refusal below is an assertion of that
contract and names the rule that forbids the layout.
"""

from __future__ import annotations

import shlex

from ..costmodel.assumptions import Assumptions
from ..inputs.pipeline import pipeline_split, stage_layers
from ..inputs.precision import megatron_adam_dtypes, recipe
from ..inputs.layout import Layout
from ..inputs.specs import Cluster, Model, Training
from ..errors import InputError
from .batch import refused, resolved
from .megatron_bridge import MEGATRON_BRIDGE_PIN, megatron_bridge_command, megatron_bridge_overrides
from .megatron_deepspeed import DEEPSPEED_CONFIG_FILE, alibi_note, to_megatron_deepspeed
from .torchrun import launch_notes, torchrun_command
from .megatron_flags import (ASSUMPTIONS_IN_FLAGS, MEGATRON_ARGUMENTS_SOURCE, MEGATRON_FLAGS, MEGATRON_PINS,  # noqa: F401
                             MegatronFlag, _Args)            # (re-exported: the flag table lives in megatron_flags.py)
from .megatron_model import _shape

__all__ = ["MegatronFlag", "MEGATRON_FLAGS", "MEGATRON_ARGUMENTS_SOURCE", "MEGATRON_PINS", "ASSUMPTIONS_IN_FLAGS",
           "megatron_args", "megatron_command", "megatron_notes"]

def megatron_args(layout: Layout, model: Model, training: Training, cluster: Cluster,
                  assumptions: Assumptions | None = None, *, version: str = "main") -> list[str]:
    """Megatron-LM command-line arguments (for `pretrain_gpt.py`) for this layout and model.

    Model shape (RoPE base and scaling, router), parallelism, batch, recompute, precision, optimizer
    and every run setting of `assumptions` the estimate depends on (ASSUMPTIONS_IN_FLAGS); the
    tokenizer, data, learning-rate schedule and checkpoint paths stay the user's. ZeRO maps to
    Megatron as: 1 -> `--use-distributed-optimizer`; 2/3 -> Megatron-FSDP (`--use-megatron-fsdp
    --use-distributed-optimizer --data-parallel-sharding-strategy optim_grads|optim_grads_params
    --ckpt-format fsdp_dtensor`). Under framework "megatron+deepspeed" ZeRO and offload live in the
    DeepSpeed JSON (and --zero-stage), and no Megatron ZeRO or offload flag is written. `version` is a MEGATRON_PINS release
    ("main" or "core_v0.16.1"); flags whose spelling differs follow it. Every flag is in
    `MEGATRON_FLAGS`. A layout `advisor.audit` refuses raises InputError naming the rule. Framework
    "megatron+deepspeed" gets the same flags in Megatron-DeepSpeed's spelling with its DeepSpeed flags
    (megatron_deepspeed.py; a flag it has no equivalent of is refused, naming the audit rule). A LoRA job
    (Training.task) trains adapters pretrain_gpt.py does not have: its arguments are Megatron-Bridge's
    ConfigContainer overrides (megatron_bridge.py); Megatron-DeepSpeed has no adapters.
    """
    if training.frozen_base:
        return _finetune_args(layout, model, training, cluster, assumptions)
    args = megatron_lm_args(layout, model, training, cluster, assumptions, version=version)
    if layout.framework == "megatron+deepspeed":
        return to_megatron_deepspeed(args, layout, model)
    return args


def _finetune_args(layout: Layout, model: Model, training: Training, cluster: Cluster,
                   assumptions: Assumptions | None) -> list[str]:
    if layout.framework == "megatron+deepspeed":
        raise refused("Training.task", training.task, "'pretrain' or 'sft' under Megatron-DeepSpeed",
                      "megatron-deepspeed.no-adapters", "it has no LoRA: the job would train every weight")
    lm = megatron_lm_args(layout, model, training, cluster, assumptions)     # the same checks and refusals
    return megatron_bridge_overrides(layout, training, lm)


def megatron_lm_args(layout: Layout, model: Model, training: Training, cluster: Cluster,
                     assumptions: Assumptions | None = None, *, version: str = "main") -> list[str]:
    """megatron_args in Megatron-LM's own spelling, whatever the layout's framework."""
    if version not in MEGATRON_PINS:
        raise InputError("--framework-version", version, f"one of {list(MEGATRON_PINS)} for Megatron-LM")
    A = assumptions or Assumptions()
    b = resolved(layout, training, cluster)
    out = _Args(version)
    _shape(out, layout, model, b, A)
    _parallelism(out, layout, model)
    if layout.framework != "megatron+deepspeed":
        _zero(out, layout, A)
    out.add("--micro-batch-size", b.mbs)
    out.add("--global-batch-size", b.gbs)
    _recompute_and_precision(out, layout, model, training, A)
    _overlaps(out, layout, model, A)
    _activation_offload(out, layout, model, A)
    if layout.framework != "megatron+deepspeed":
        _offload(out, layout)
    return list(out)


def megatron_notes(layout: Layout, model: Model, training: Training, cluster: Cluster,
                   assumptions: Assumptions | None = None) -> list[str]:
    """What the user must still add or know, for stderr (the command itself goes to stdout)."""
    if training.frozen_base:
        return _finetune_notes(model, training) + launch_notes(cluster)
    notes = ["add your tokenizer, data, learning-rate and checkpoint flags (e.g. --tokenizer-type, "
             "--data-path, --lr, --train-iters, --save/--load)"]
    if layout.framework == "megatron+deepspeed":
        notes.append(f"Megatron-DeepSpeed: save the DeepSpeed JSON (--format deepspeed) as {DEEPSPEED_CONFIG_FILE} "
                     "beside the command (--deepspeed_config); ZeRO and offload are set there")
        notes += alibi_note(megatron_args(layout, model, training, cluster, assumptions))
    if model.attention_chunk is not None:
        notes.append(f"chunked local attention ({model.attention_chunk} tokens; Llama 4) has no Megatron-LM flag: these "
                     "flags attend the whole context in every layer, which the estimate did not price")
    if model.rope_scaling == "llama3":
        notes.append("--use-rope-scaling applies Llama 3.1's frequency bands (low_freq_factor 1, high_freq_factor 4, "
                     "original context 8192; rotary_pos_embedding.py _apply_scaling): a config.json with other bands "
                     "(Llama 4 Scout: 1 and 1) is not reproduced exactly")
    if model.rope_scaling == "yarn" and model.mla is None:
        notes.append("YaRN: --yarn-beta-fast / --yarn-beta-slow / --mscale default to 32, 1, 1 and the correction "
                     "range is rounded to integers; set them to your config.json's rope_scaling (gpt-oss: "
                     "truncate false, i.e. --no-yarn-correction-range-round-to-int, as Megatron-Bridge's gpt-oss "
                     "provider sets it)")
    return notes + launch_notes(cluster)


def _finetune_notes(model: Model, training: Training) -> list[str]:
    repo, commit = MEGATRON_BRIDGE_PIN
    return [f"{training.task}: Megatron-LM's pretrain_gpt.py has no adapters; this is Megatron-Bridge's PEFT job "
            f"({repo}@{commit[:7]} scripts/training/run_recipe.py), run from its checkout",
            f"set MBRIDGE_MODEL to the recipe stem of {model.name} (e.g. llama3_70b) and add "
            "checkpoint.pretrained_checkpoint=<the base converted to Megatron format> and your dataset "
            "(--dataset, dataset.*)"]


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
    """How the layers split over the pipeline (inputs.pipeline.pipeline_split, the split the cost model
    estimated), in its form's flags: nothing for an even split (or under Megatron-DeepSpeed, whose
    PipelineModule partitions any layer count itself), --num-layers-per-virtual-pipeline-stage for even
    chunks, the first/last-stage flags for Megatron's uneven split, the embedding and loss accounting
    flags where counting them as layers makes every chunk even (TransformerConfig
    account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split, at both pins; audit rules
    megatron.embedding-and-loss-in-pipeline-split, megatron.loss-in-pipeline-split), else
    --pipeline-model-parallel-layout."""
    if layout.vpp > 1 and layout.pp == 1:
        raise refused("Layout.vpp", layout.vpp, "1 when pp is 1", "megatron.vpp-needs-pp",
                      "virtual stages interleave pipeline ranks")
    if layout.pp == 1 or (layout.vpp == 1 and layout.framework == "megatron+deepspeed"):
        return
    split = pipeline_split(model.layers, layout.pp, layout.vpp)
    if split is None:
        raise refused("Layout.vpp", layout.vpp, "at most the layers of the lightest pipeline stage per rank, + 1 "
                      "on the first and last (the embedding's and the loss's chunk)",
                      "megatron.virtual-stage-needs-a-layer",
                      f"layers({model.layers}) over pp({layout.pp}): the lightest stage holds "
                      f"{min(stage_layers(model.layers, layout.pp))}")
    if split.form in ("account-embedding-loss", "account-loss"):
        if split.form == "account-embedding-loss":
            out.add("--account-for-embedding-in-pipeline-split")
        out.add("--account-for-loss-in-pipeline-split")
    if split.form == "first-last":
        out.add("--decoder-first-pipeline-num-layers", split.ranks[0])
        out.add("--decoder-last-pipeline-num-layers", split.ranks[-1])
    elif split.form == "layout":
        out.add("--pipeline-model-parallel-layout", _layout_string(list(split.chunks), model))
    elif layout.vpp > 1:     # even chunks, counting the embedding and the loss in the account forms
        out.add("--num-layers-per-virtual-pipeline-stage", split.per_chunk)


def _layout_string(sizes: list[int], model: Model) -> str:
    """--pipeline-model-parallel-layout: one '|'-separated stage per (virtual) stage in model order,
    the embedding first, the MTP layers and the loss last, each layer written out."""
    stages = ["t" * n for n in sizes]
    stages[0] = "E" + stages[0]
    stages[-1] += "m" * (model.mtp_layers or 0) + "L"
    return "|".join(stages)


def _zero(out: _Args, layout: Layout, A: Assumptions) -> None:
    if layout.dp * layout.cp > 1 and A.overlap_grad_reduce:
        # advisor's step-time estimate assumes DP traffic overlaps compute (Assumptions.overlap_grad_reduce,
        # overlap_param_gather): ask Megatron for it, or the estimate is optimistic.
        out.add("--overlap-grad-reduce")
    if layout.zero_stage == 1:
        out.add("--use-distributed-optimizer")
        if layout.dp * layout.cp > 1 and A.overlap_grad_reduce and A.overlap_param_gather:
            out.add("--overlap-param-gather")               # M19: needs the distributed optimizer + grad overlap
    elif layout.zero_stage >= 2:
        out.add("--use-megatron-fsdp")
        # Megatron-FSDP v1 runs the distributed optimizer only; validate_args adds it with a warning
        out.add("--use-distributed-optimizer")
        out.add("--data-parallel-sharding-strategy", "optim_grads" if layout.zero_stage == 2 else "optim_grads_params")
        out.add("--ckpt-format", "fsdp_dtensor")


def _recompute_and_precision(out: _Args, layout: Layout, model: Model, training: Training, A: Assumptions) -> None:
    if layout.recompute == "selective":
        out.add("--recompute-granularity", "selective")
        out.add("--recompute-modules", *A.recompute_modules)
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
        if A.megatron_main_grad_bytes not in (2, 4):
            raise refused("Assumptions.megatron_main_grad_bytes", A.megatron_main_grad_bytes, "2 or 4 under Megatron-LM",
                          "megatron.main-grad-bytes", "the gradient buffer is fp32, or bf16 with --grad-reduce-in-bf16")
        if A.megatron_main_grad_bytes == 2:
            out.add("--grad-reduce-in-bf16")
        if layout.framework == "megatron":
            _adam_state(out, layout, training, A)
        if A.fp8_param_gather and recipe(training.precision).low_precision:
            if layout.framework == "megatron" and layout.zero_stage == 0:
                raise refused("Assumptions.fp8_param_gather", True, "zero_stage >= 1 under Megatron-LM",
                              "megatron.fp8-param-gather-needs-sharded-optimizer",
                              "validate_args: --fp8-param-gather only with the distributed optimizer or FSDP")
            if layout.framework == "megatron" and layout.offload != "none" and training.precision not in (
                    "fp8", "fp8-delayed"):
                raise refused("Assumptions.fp8_param_gather", True, "precision fp8-delayed with optimizer offload",
                              "megatron.fp8-param-gather-offload-delayed",
                              "validate_args: with --fp8-param-gather the optimizer CPU offload needs --fp8-recipe delayed")
            out.add("--fp4-param-gather" if recipe(training.precision).gemm == "fp4" else "--fp8-param-gather")
    out.add("--attention-backend", "flash" if training.flash_attention else "unfused")
    if training.cuda_graphs:
        out.add("--cuda-graph-impl", "local")
    _optimizer(out, layout, training)


def _optimizer(out: _Args, layout: Layout, training: Training) -> None:
    """Training.optimizer as Megatron runs it: its adam is AdamW (decoupled weight decay), the estimate's Adam;
    SGD without momentum (the estimate's sgd keeps no state; Megatron's default momentum is 0.9); Lion on main.
    The rest have no Megatron optimizer (audit rule megatron.optimizer-kind)."""
    if training.optimizer in ("adam", "adamw"):
        out.add("--optimizer", "adam")
    elif training.optimizer == "sgd":
        out.add("--optimizer", "sgd")
        out.add("--sgd-momentum", 0.0)
    elif training.optimizer == "lion" and out.version == "main" and layout.framework == "megatron":
        out.add("--optimizer", "lion")
    elif training.optimizer == "lion" and layout.framework == "megatron":
        raise InputError("Training.optimizer", "lion", f"adam or sgd for Megatron-LM {out.version}",
                         "export for --framework-version main, whose --optimizer takes lion (audit rule "
                         "megatron.optimizer-kind)")
    else:
        raise refused("Training.optimizer", training.optimizer, "adam, adamw, sgd or lion under Megatron-LM",
                      "megatron.optimizer-kind", "--optimizer takes adam, sgd (and lion on main)")
    if training.master_weights == "none":
        raise refused("Training.master_weights", "none", "'fp32' under Megatron-LM", "megatron.optimizer-kind",
                      "Megatron's mixed-precision optimizer always keeps a master copy of the weights")


def _adam_state(out: _Args, layout: Layout, training: Training, A: Assumptions) -> None:
    """Assumptions.megatron_optimizer_bytes as Megatron-Core's Adam keeps it (precision.megatron_adam_dtypes)."""
    moments = megatron_adam_dtypes(A.megatron_optimizer_bytes, training.precision)
    if moments is None:
        raise refused("Assumptions.megatron_optimizer_bytes", A.megatron_optimizer_bytes,
                      f"12, or a sum Megatron-Core's precision-aware optimizer keeps at {training.precision}",
                      "megatron.optimizer-state-bytes", "master 2 or 4 bytes plus m and v at 4 (fp32) or 2 (bf16)")
    if not moments:
        return
    if layout.zero_stage == 0:
        raise refused("Layout.zero_stage", 0, "1 or more with the precision-aware optimizer",
                      "megatron.precision-aware-optimizer-needs-distributed-optimizer",
                      "OptimizerConfig asserts the distributed optimizer with --use-precision-aware-optimizer")
    out.add("--use-precision-aware-optimizer")
    exp_avg, exp_avg_sq = moments
    if exp_avg != "fp32":
        out.add("--exp-avg-dtype", exp_avg)
    if exp_avg_sq != "fp32":
        out.add("--exp-avg-sq-dtype", exp_avg_sq)


def _overlaps(out: _Args, layout: Layout, model: Model, A: Assumptions) -> None:
    """P2P, TP and EP communication overlap, as the estimate assumed it."""
    if layout.pp > 1 and not layout.overlap_p2p_comm:
        out.add("--no-overlap-p2p-communication")
    if A.tp_comm_overlap and layout.sp and layout.tp > 1:
        out.add("--tp-comm-overlap")
    if (A.ep_a2a_overlap or A.ep_overlap > 0) and model.is_moe and layout.ep > 1:
        why = _a2a_overlap_blocker(layout, model)
        if why:
            raise refused("Assumptions.ep_a2a_overlap", True, "a layout Megatron-Core overlaps the EP all-to-all in",
                          "megatron.ep-a2a-overlap-needs", why)
        out.add("--overlap-moe-expert-parallel-comm")


def _a2a_overlap_blocker(layout: Layout, model: Model) -> str:
    """TransformerConfig.__post_init__'s conditions for overlap_moe_expert_parallel_comm (core_v0.16.1)."""
    if layout.recompute == "full":
        return "disable full recomputation when enabling overlap_moe_expert_parallel_comm"
    if layout.pp > 1 and layout.vpp == 1:
        return "virtual_pipeline_model_parallel_size must be specified when pipeline_model_parallel_size > 1"
    if model.mtp_layers > 1:
        return "MTP layernum only supports 1 when enabling overlap_moe_expert_parallel_comm"
    return ""


def _activation_offload(out: _Args, layout: Layout, model: Model, A: Assumptions) -> None:
    """Activation offload where the estimate applies it (costmodel.activations.offloaded_layers: pp 1, no recompute)."""
    if A.activation_offload_layers and layout.pp == 1 and layout.recompute == "none":
        if A.activation_offload_layers >= model.layers:
            raise refused("Assumptions.activation_offload_layers", A.activation_offload_layers,
                          f"fewer than the model's {model.layers} layers", "megatron.activation-offload-layers",
                          "TransformerConfig: 'CPU offloading can be done only for layers less than num_layers'")
        out.add("--cpu-offloading-num-layers", A.activation_offload_layers)


def _offload(out: _Args, layout: Layout) -> None:
    """Megatron offloads optimizer state to the CPU only."""
    if layout.offload == "none":
        return
    if layout.offload != "optimizer" or layout.offload_device != "cpu":
        raise refused("Layout.offload", f"{layout.offload} to {layout.offload_device}",
                      "'optimizer' to 'cpu' under Megatron-LM", "megatron.offload-optimizer-to-cpu-only",
                      "Megatron-LM has --optimizer-cpu-offload only; parameter and NVMe offload are DeepSpeed's")
    out.add("--optimizer-cpu-offload")
    if "--use-precision-aware-optimizer" not in out:         # _adam_state may have written it
        out.add("--use-precision-aware-optimizer")


def _needs_single_connection(layout: Layout) -> bool:
    # validate_args asserts CUDA_DEVICE_MAX_CONNECTIONS == "1" when TP or CP > 1 on pre-Blackwell
    # GPUs, unless Megatron-FSDP / torch FSDP2 is used (arguments.py validate_args, chars 32000-48000).
    fsdp = layout.framework != "megatron+deepspeed" and layout.zero_stage >= 2
    return (layout.tp > 1 or layout.cp > 1) and not fsdp


def megatron_command(layout: Layout, model: Model, training: Training, cluster: Cluster,
                     assumptions: Assumptions | None = None, *, script: str | None = None,
                     version: str = "main") -> str:
    """A shell command: `torchrun ... pretrain_gpt.py` (`pretrain_mamba.py` for a hybrid model,
    Megatron-LM's entry point for MambaModel at both pins) with one Megatron flag (and its values)
    per line, shell-quoted, continued with backslashes. Add your tokenizer, data and checkpoint flags."""
    if training.frozen_base:
        _finetune_args(layout, model, training, cluster, assumptions)     # Megatron-DeepSpeed refuses
        return megatron_bridge_command(layout, training, cluster,
                                       megatron_lm_args(layout, model, training, cluster, assumptions))
    if script is None:      # main deprecates pretrain_mamba.py for pretrain_hybrid.py (its module docstring)
        hybrid = "pretrain_hybrid.py" if version == "main" else "pretrain_mamba.py"
        script = hybrid if model.hybrid_pattern is not None else "pretrain_gpt.py"
    args = megatron_args(layout, model, training, cluster, assumptions, version=version)
    lines: list[str] = []
    i = 0
    while i < len(args):
        j = i + 1
        while j < len(args) and not args[j].startswith("--"):
            j += 1
        lines.append(" ".join(shlex.quote(a) for a in args[i:j]))
        i = j
    head = torchrun_command(cluster, script=script)
    if _needs_single_connection(layout):
        head = "CUDA_DEVICE_MAX_CONNECTIONS=1 " + head
    return " \\\n    ".join([head, *lines])

