"""torchtitan: the parallelism, batch and activation-checkpoint settings of a training job, for the
two configuration systems torchtitan has had.

- `main` (TORCHTITAN_PINS): dataclass configs chosen by `--module M --config F` (a config_registry
  function) and overridden on the command line as `--section.key value`; activation checkpointing is a
  tyro subcommand (`activation-checkpoint:full`). Source: pytorch/torchtitan torchtitan/config/configs.py
  and manager.py at b5bcd76c (TORCHTITAN_MAIN_KEYS records the lines). There is no TOML loader.
- `v0.2.2`, the last release that reads a TOML job file (`--job.config_file`): torchtitan/config/
  job_config.py at 73a0e697 (TORCHTITAN_KEYS).

ZeRO maps to what torchtitan runs: FSDP over data_parallel_shard_degree = dp for ZeRO 1, 2 and 3
(reshard_after_forward "never" for 1 and 2: parameters stay gathered between forward and backward,
"default" for 3), plain DDP (data_parallel_replicate_degree = dp) for ZeRO 0 only, which torchtitan
runs without other mesh dimensions (v0.2.2 llama3/infra/parallelize.py: "DDP has not supported > 1D
parallelism"; audit rule torchtitan.ddp-is-one-dimensional). Expert parallelism borrows
dp_shard x cp x tp ranks and the experts have no TP of their own (configs.py ParallelismConfig
.expert_parallel_degree: efsdp = dp_shard * cp * tp / ep).

Legality is the audit's (rules/audit-torchtitan.toml): every refusal below is an assertion of that
contract and names the rule that forbids the layout. tests/data/frameworks/torchtitan-*.json are the
key names at the pins (benchmarks/validate_exports.py --snapshot); tests check the exports against them.
"""

from __future__ import annotations

import shlex

from ..facts import torchtitan_layers_per_stage
from ..inputs.layout import Layout
from ..inputs.specs import Cluster, Model, Training
from ..errors import InputError
from .batch import Batch, no_cuda_graphs, refused, resolved
from .escape import toml_comment, toml_string
from .torchrun import launch_notes, torchrun_command

__all__ = ["TORCHTITAN_KEYS", "TORCHTITAN_MAIN_KEYS", "TORCHTITAN_PINS", "torchtitan_toml", "torchtitan_args",
           "torchtitan_config", "torchtitan_notes"]

TORCHTITAN_PINS: dict[str, str] = {
    "main": "b5bcd76c66d0acb1a08b176d9639425bc55e0b2a",      # 2026-08-21
    "v0.2.2": "73a0e6979dd10b6b1904098eb3c8f62c18ab87ce",    # release v0.2.2, 2026-02-20, TOML era
}

TORCHTITAN_KEYS: dict[str, str] = {       # v0.2.2 torchtitan/config/job_config.py (73a0e697)
    "parallelism.data_parallel_replicate_degree": "job_config.py L313 Parallelism",
    "parallelism.data_parallel_shard_degree": "job_config.py L324 Parallelism",
    "parallelism.fsdp_reshard_after_forward": "job_config.py L336 Parallelism (default|always|never)",
    "parallelism.tensor_parallel_degree": "job_config.py L351 Parallelism",
    "parallelism.pipeline_parallel_degree": "job_config.py L360 Parallelism",
    "parallelism.pipeline_parallel_layers_per_stage": "job_config.py L389 Parallelism",
    "parallelism.pipeline_parallel_schedule": "job_config.py L396 Parallelism (1F1B, Interleaved1F1B, ...)",
    "parallelism.pipeline_parallel_microbatch_size": "job_config.py L412 Parallelism",
    "parallelism.context_parallel_degree": "job_config.py L428 Parallelism",
    "parallelism.expert_parallel_degree": "job_config.py L454 Parallelism",
    "parallelism.expert_tensor_parallel_degree": "job_config.py L464 Parallelism (etp = 1 or tp)",
    "training.local_batch_size": "job_config.py L253 Training",
    "training.global_batch_size": "job_config.py L256 Training",
    "training.seq_len": "job_config.py L261 Training",
    "training.enable_cpu_offload": "job_config.py L270 Training (FSDP CPU offload of params, grads, optimizer)",
    "training.mixed_precision_param": "job_config.py L282 Training (bfloat16|float32)",
    "activation_checkpoint.mode": "job_config.py L652 ActivationCheckpoint (selective|full|memory_budget|none)",
}

TORCHTITAN_MAIN_KEYS: dict[str, str] = {  # main torchtitan/config/configs.py (b5bcd76c)
    "parallelism.data_parallel_replicate_degree": "configs.py L122 ParallelismConfig",
    "parallelism.data_parallel_shard_degree": "configs.py L133 ParallelismConfig",
    "parallelism.fsdp_reshard_after_forward": "configs.py L145 ParallelismConfig",
    "parallelism.tensor_parallel_degree": "configs.py L166 ParallelismConfig",
    "parallelism.pipeline_parallel_degree": "configs.py L180 ParallelismConfig",
    "parallelism.pipeline_parallel_layers_per_stage": "configs.py L209 ParallelismConfig",
    "parallelism.pipeline_parallel_schedule": "configs.py L216 ParallelismConfig",
    "parallelism.num_pp_microbatches": "configs.py L232 ParallelismConfig (per DP rank and accumulation step)",
    "parallelism.context_parallel_degree": "configs.py L239 ParallelismConfig",
    "parallelism.expert_parallel_degree": "configs.py L282 ParallelismConfig (efsdp = dp_shard * cp * tp / ep)",
    "training.num_tokens_per_microbatch_per_dp_rank": "configs.py L37 TrainingConfig (before CP/TP sharding)",
    "training.num_tokens_per_train_step": "configs.py L43 TrainingConfig (trainer.py L409-428: accumulation "
                                          "= it / (tokens per microbatch x num_pp_microbatches x dp))",
    "training.max_context_length": "configs.py L51 TrainingConfig",
    "training.enable_cpu_offload": "configs.py L70 TrainingConfig",
    "training.disable_cuda_graphs": "configs.py L75 TrainingConfig (CUDA graphs refuse PP and most EP dispatchers)",
    "training.mixed_precision_param": "configs.py L94 TrainingConfig",
    "activation-checkpoint": "tyro subcommand of the trainer config: activation-checkpoint:{selective,full,"
                             "memory-budget,none} (distributed/activation_checkpoint.py FullAC, SelectiveAC)",
}

TORCHTITAN_VERSIONS = tuple(TORCHTITAN_PINS)

# advisor preset -> (module, config_registry function) of torchtitan main (torchtitan/models/*/config_registry.py
# @ b5bcd76c: llama3_8b, llama3_70b, llama3_405b, deepseek_v3_671b, qwen3_30b_a3b, gpt_oss_20b, gpt_oss_120b).
TORCHTITAN_MAIN_CONFIGS: dict[str, tuple[str, str]] = {
    "llama-3-8b": ("llama3", "llama3_8b"), "llama-3.1-8b": ("llama3", "llama3_8b"),
    "llama-3-70b": ("llama3", "llama3_70b"), "llama-3.1-70b": ("llama3", "llama3_70b"),
    "llama-3.1-405b": ("llama3", "llama3_405b"), "deepseek-v3": ("deepseek_v3", "deepseek_v3_671b"),
    "qwen3-30b-a3b": ("qwen3", "qwen3_30b_a3b"),
    "gpt-oss-20b": ("gpt_oss", "gpt_oss_20b"), "gpt-oss-120b": ("gpt_oss", "gpt_oss_120b"),
}


def torchtitan_config(layout: Layout, model: Model, training: Training, cluster: Cluster, assumptions=None, *,
                      version: str = "main") -> str:
    """The launch config for `version`: a `torchrun ... -m torchtitan.train` command with `--section.key`
    overrides (main) or a TOML fragment (v0.2.2)."""
    if version == "v0.2.2":
        return torchtitan_toml(layout, model, training, cluster, assumptions)
    if version != "main":
        raise InputError("--framework-version", version, f"one of {list(TORCHTITAN_PINS)} for torchtitan")
    args = torchtitan_args(layout, model, training, cluster, assumptions)
    head = torchrun_command(cluster) + ' -m torchtitan.train --module "$TORCHTITAN_MODULE" --config "$TORCHTITAN_CONFIG"'
    lines, i = [], 0
    while i < len(args):
        j = i + 1
        while j < len(args) and not args[j].startswith("--") and ":" not in args[j]:
            j += 1
        lines.append(" ".join(shlex.quote(a) for a in args[i:j]))
        i = j
    return " \\\n    ".join([head, *lines])


def torchtitan_notes(layout: Layout, model: Model, training: Training, cluster: Cluster, assumptions=None, *,
                     version: str = "main") -> list[str]:
    notes = []
    if version == "main":
        known = TORCHTITAN_MAIN_CONFIGS.get(model.name)
        which = (f"{known[0]} and {known[1]}" if known else "those of the torchtitan model with its architecture "
                 "(torchtitan/models/*/config_registry.py), with its sizes set there")
        notes.append("set TORCHTITAN_MODULE and TORCHTITAN_CONFIG to the config_registry module and function of "
                     f"{model.name}: {which}; the overrides follow them")
        notes.append("add your own overrides before activation-checkpoint:..., the tyro subcommand that ends the "
                     "line: tyro reads what follows it as the subcommand's arguments")
        if layout.pp > 1 or layout.ep > 1:
            notes.append("--training.disable_cuda_graphs: torchtitan's CUDA graphs refuse pipeline parallelism "
                         "and the all-to-all EP dispatcher (configs.py TrainingConfig.disable_cuda_graphs)")
    else:
        notes.append("merge the sections into your job TOML (with [model] name and flavor) and pass it with "
                     "--job.config_file; torchtitan after v0.2.2 reads no TOML (use --framework-version main)")
        if layout.pp > 1 and model.qk_norm:
            notes.append(f"pipeline_parallel_degree {layout.pp}: v0.2.2's qwen3 model has no pipelining (its TrainSpec's "
                         "pipelining_fn is None; train.py raises); state the stack (--framework torchtitan "
                         "--framework-version v0.2.2) and the planner keeps pp 1 (audit rule "
                         "torchtitan.qwen3-pipelining-release), or run main")
    if training.precision in ("fp8", "fp8-cs"):
        notes.append("fp8: enable torchtitan's float8 model converter (v0.2.2 [model] converters = [\"float8\"]; main: "
                     "a config_registry function with the float8 converter, as llama3_debugmodel_float8)")
    elif training.precision == "mxfp8":
        notes.append("mxfp8: enable torchtitan's MX model converter (v0.2.2 [model] converters = [\"mx\"]; Blackwell)")
    return notes + launch_notes(cluster)


def _checked(layout: Layout, model: Model, training: Training, cluster: Cluster) -> Batch:
    """The refusals both configuration systems share; the resolved batch."""
    b = resolved(layout, training, cluster)
    no_cuda_graphs(layout, training)
    if training.frozen_base:
        raise refused("Training.task", training.task, "'pretrain' or 'sft' under torchtitan", "torchtitan.adapters",
                      "no torchtitan override trains adapters on a frozen base (main's LoRA is a model converter "
                      "set in the config function; no 4-bit base)")
    if training.precision == "fp16":
        raise refused("Training.precision", "fp16", "'bf16' or 'fp8' under torchtitan", "torchtitan.no-fp16",
                      "torchtitan's mixed_precision_param is bfloat16 or float32")
    if layout.zero_stage == 0 and b.dp > 1 and layout.cp == 1 and max(layout.tp, layout.pp, layout.ep) > 1:
        raise refused("Layout.zero_stage", 0, "1, 2 or 3 (FSDP) when tp, pp or ep > 1 under torchtitan",
                      "torchtitan.ddp-is-one-dimensional",
                      "torchtitan's replicated DP (DDP) refuses other mesh dimensions: 'DDP has not supported > 1D "
                      "parallelism' (v0.2.2 llama3/infra/parallelize.py)")
    if layout.ep > 1:
        if not model.is_moe:
            raise refused("Layout.ep", layout.ep, "1 for a dense model", "torchtitan.experts-divisible-by-ep",
                          f"{model.name} has no experts")
        etp = layout.etp or layout.tp
        if etp != 1:
            raise refused("Layout.etp", etp, "1 under torchtitan", "torchtitan.experts-have-no-tp",
                          "torchtitan's expert mesh is efsdp x ep over dp_shard x cp x tp: experts are not "
                          "tensor-parallel (main configs.py ParallelismConfig.expert_parallel_degree)")
    if layout.offload != "none" and (layout.zero_stage < 2 or layout.offload_device != "cpu"):
        raise refused("Layout.offload", f"{layout.offload} to {layout.offload_device}",
                      "CPU offload with zero_stage >= 2 under torchtitan", "torchtitan.offload-needs-fsdp-on-cpu",
                      "torchtitan offloads through FSDP (training.enable_cpu_offload), to the CPU only")
    return b


def _dp_axes(layout: Layout, b: Batch) -> dict[str, object]:
    if layout.zero_stage == 0:
        return {"data_parallel_replicate_degree": b.dp, "data_parallel_shard_degree": 1}
    return {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": b.dp,
            "fsdp_reshard_after_forward": "default" if layout.zero_stage == 3 else "never"}


def _schedule(layout: Layout, model: Model) -> dict[str, object]:
    if layout.pp == 1:
        return {}
    if layout.vpp == 1:
        return {"pipeline_parallel_schedule": "1F1B"}
    out: dict[str, object] = {"pipeline_parallel_schedule": "Interleaved1F1B"}
    per_stage = torchtitan_layers_per_stage(model.layers, layout.pp, layout.vpp)
    if per_stage is not None:
        out["pipeline_parallel_layers_per_stage"] = per_stage
    elif layout.vpp != 2:   # torchtitan's default for looped schedules is 2 stages per rank
        raise refused(
            "Layout.vpp", layout.vpp, f"a value torchtitan can split {model.layers} layers into",
            "torchtitan.virtual-stages-split",
            f"no pipeline_parallel_layers_per_stage gives ceil(({model.layers} + 2) / k) = pp*vpp = "
            f"{layout.pp * layout.vpp}",
        )
    return out


def torchtitan_args(layout: Layout, model: Model, training: Training, cluster: Cluster,
                    assumptions=None) -> list[str]:
    """`--section.key value` overrides for torchtitan main (TORCHTITAN_MAIN_KEYS), the activation
    checkpoint subcommand last. Batch: num_tokens_per_microbatch_per_dp_rank = micro-batch x sequence,
    num_tokens_per_train_step = global batch x sequence, num_pp_microbatches = the layout's micro-batches
    under PP (so gradient accumulation is 1), else torchtitan accumulates them."""
    b = _checked(layout, model, training, cluster)
    par = {**_dp_axes(layout, b), "tensor_parallel_degree": layout.tp, "pipeline_parallel_degree": layout.pp,
           "context_parallel_degree": layout.cp, "expert_parallel_degree": layout.ep, **_schedule(layout, model)}
    if layout.pp > 1:
        par["num_pp_microbatches"] = b.m
    out: list[str] = []
    for key, value in par.items():
        out += [f"--parallelism.{key}", str(value)]
    out += ["--training.num_tokens_per_microbatch_per_dp_rank", str(b.mbs * b.seq),
            "--training.num_tokens_per_train_step", str(b.gbs * b.seq),
            "--training.max_context_length", str(b.seq),
            "--training.mixed_precision_param", "bfloat16"]
    if layout.offload != "none":
        out.append("--training.enable_cpu_offload")
    if layout.pp > 1 or layout.ep > 1:
        out.append("--training.disable_cuda_graphs")
    out.append(f"activation-checkpoint:{layout.recompute}")
    return out


def torchtitan_toml(layout: Layout, model: Model, training: Training, cluster: Cluster, assumptions=None) -> str:
    """The `[parallelism]`, `[training]` and `[activation_checkpoint]` sections of a torchtitan v0.2.2
    job config (TOML, read with `--job.config_file`; TORCHTITAN_KEYS). Merge them into your job config."""
    b = _checked(layout, model, training, cluster)
    axes = _dp_axes(layout, b)
    lines = [
        toml_comment(f"# torchtitan v0.2.2 config fragment written by advisor for layout {layout.id} ({model.name}, "
                     f"{cluster.gpus} GPUs, {cluster.nodes} node(s))."),
        "# Key names: pytorch/torchtitan torchtitan/config/job_config.py @ v0.2.2. torchtitan main reads no",
        "# TOML: write its command line with --framework-version main.",
        "",
        "[parallelism]",
        ("# ZeRO-0 -> replicated data parallelism (DDP)" if layout.zero_stage == 0 else
         f"# ZeRO-{layout.zero_stage} -> FSDP: dp={b.dp} shards parameters, gradients and optimizer state"),
        *(f"{k} = {_toml(v)}" for k, v in axes.items()),
        f"tensor_parallel_degree = {layout.tp}",
        f"pipeline_parallel_degree = {layout.pp}",
        f"context_parallel_degree = {layout.cp}",
        f"expert_parallel_degree = {layout.ep}",
    ]
    if layout.ep > 1:
        lines.append("expert_tensor_parallel_degree = 1")
    if layout.tp > 1 and not layout.sp:
        lines.append("# note: torchtitan applies sequence parallelism with TP by default")
    if layout.pp > 1:
        lines += [f"{k} = {_toml(v)}" for k, v in _schedule(layout, model).items()]
        lines.append(f"pipeline_parallel_microbatch_size = {b.mbs}")
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
    if layout.offload != "none":
        lines.append("enable_cpu_offload = true  # FSDP CPU offload of parameters, gradients and optimizer state")
    lines += ["", "[activation_checkpoint]", f'mode = "{layout.recompute}"', ""]
    return "\n".join(lines)


def _toml(value: object) -> str:
    return toml_string(value) if isinstance(value, str) else str(value)
