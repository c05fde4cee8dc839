"""torchtitan: the `[parallelism]`, `[training]` and `[activation_checkpoint]` sections of a job config.

Sources: pytorch/torchtitan torchtitan/config/job_config.py (commit 000204a4, the TOML-era
`JobConfig`), torchtitan/config/configs.py (commit 0014ac2c, same key names as dataclass fields),
torchtitan/distributed/pipeline_parallel.py (commit 02ef790c), torchtitan/config/manager.py
(commit 02e5389e); TORCHTITAN_KEYS records where each key was read.

Legality is the audit's (rules/audit-torchtitan.toml): every refusal below is an assertion of that
contract and names the rule that forbids the layout.
"""

from __future__ import annotations

from ..facts import torchtitan_layers_per_stage
from ..inputs.layout import Layout
from ..inputs.specs import Cluster, Model, Training
from .batch import Batch, refused, resolved

__all__ = ["TORCHTITAN_KEYS", "torchtitan_toml"]

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


def torchtitan_toml(layout: Layout, model: Model, training: Training, cluster: Cluster, assumptions=None) -> str:
    """The `[parallelism]`, `[training]` and `[activation_checkpoint]` sections of a torchtitan job
    config (TOML, as read with `--job.config_file` by job_config.py-era torchtitan).

    ZeRO maps onto torchtitan's data-parallel axes: zero_stage >= 2 -> FSDP
    (data_parallel_shard_degree = dp; ZeRO-2 keeps gathered parameters between forward and backward,
    fsdp_reshard_after_forward = "never"), else plain replication (data_parallel_replicate_degree = dp).
    The emitted TOML says which one in a comment. Merge the sections into your job config.
    """
    b = resolved(layout, training, cluster)
    if training.precision == "fp16":
        raise refused("Training.precision", "fp16", "'bf16' or 'fp8' under torchtitan", "torchtitan.no-fp16",
                      "torchtitan's mixed_precision_param is bfloat16 or float32")
    lines = [
        f"# torchtitan config fragment written by advisor for layout {layout.id} ({model.name}, "
        f"{cluster.gpus} GPUs, {cluster.nodes} node(s)).",
        "# Key names: pytorch/torchtitan torchtitan/config/job_config.py. Newer torchtitan takes a",
        "# config_registry function and `--section.key` overrides with the same names.",
        "",
        "[parallelism]",
        *_data_parallel(layout, b),
        f"tensor_parallel_degree = {layout.tp}",
        f"pipeline_parallel_degree = {layout.pp}",
        f"context_parallel_degree = {layout.cp}",
        f"expert_parallel_degree = {layout.ep}",
    ]
    if layout.tp > 1 and not layout.sp:
        lines.append("# note: torchtitan applies sequence parallelism with TP by default")
    lines += _experts(layout, model)
    if layout.pp > 1:
        lines += _pipeline(layout, model, b)
    lines += _training(layout, training, b)
    lines += ["", "[activation_checkpoint]", f'mode = "{layout.recompute}"', ""]
    return "\n".join(lines)


def _data_parallel(layout: Layout, b: Batch) -> list[str]:
    if layout.zero_stage >= 2:
        reshard = "never" if layout.zero_stage == 2 else "default"
        return [
            f"# ZeRO-{layout.zero_stage} -> FSDP: dp={b.dp} shards parameters, gradients and optimizer "
            "state (data_parallel_shard_degree).",
            "data_parallel_replicate_degree = 1",
            f"data_parallel_shard_degree = {b.dp}",
            f'fsdp_reshard_after_forward = "{reshard}"',
        ]
    lines = [
        f"# ZeRO-{layout.zero_stage} -> replicated data parallelism (DDP): torchtitan has no ZeRO-1; "
        f"dp={b.dp} is data_parallel_replicate_degree.",
        f"data_parallel_replicate_degree = {b.dp}",
        "data_parallel_shard_degree = 1",
    ]
    if layout.cp > 1:
        lines.append("# torchtitan still applies FSDP over the cp axis (its FSDP mesh is dp_shard x cp)")
    return lines


def _experts(layout: Layout, model: Model) -> list[str]:
    """expert_tensor_parallel_degree; the EP grid itself (ParallelDims._validate) is the audit's."""
    if layout.ep == 1:
        return []
    if not model.is_moe:
        raise refused("Layout.ep", layout.ep, "1 for a dense model", "torchtitan.experts-divisible-by-ep",
                      f"{model.name} has no experts")
    etp = layout.etp or layout.tp
    if etp not in (1, layout.tp):
        raise refused("Layout.etp", etp, f"1 or tp ({layout.tp}) under torchtitan", "torchtitan.etp-is-1-or-tp",
                      "torchtitan supports etp = tp or etp = 1 (ParallelDims._validate)")
    return [f"expert_tensor_parallel_degree = {etp}"]


def _pipeline(layout: Layout, model: Model, b: Batch) -> list[str]:
    if layout.vpp == 1:
        out = ['pipeline_parallel_schedule = "1F1B"']
    else:
        out = ['pipeline_parallel_schedule = "Interleaved1F1B"']
        per_stage = torchtitan_layers_per_stage(model.layers, layout.pp, layout.vpp)
        if per_stage is not None:
            out.append(f"pipeline_parallel_layers_per_stage = {per_stage}")
        elif layout.vpp != 2:   # torchtitan's default for looped schedules is 2 stages per rank
            raise refused(
                "Layout.vpp", layout.vpp, f"a value torchtitan can split {model.layers} layers into",
                "torchtitan.virtual-stages-split",
                f"no pipeline_parallel_layers_per_stage gives ceil(({model.layers} + 2) / k) = pp*vpp = "
                f"{layout.pp * layout.vpp}",
            )
    out.append(f"pipeline_parallel_microbatch_size = {b.mbs}")
    return out


def _training(layout: Layout, training: Training, b: Batch) -> list[str]:
    local = b.mbs * b.m if layout.pp > 1 else b.mbs
    lines = [
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
    if training.precision in ("fp8", "fp8-cs"):
        lines.append('# fp8: enable the float8 converter (job_config.py [model] converters = ["float8"])')
    elif training.precision == "mxfp8":
        lines.append('# mxfp8: enable the MX converter (job_config.py [model] converters = ["mx"]; Blackwell)')
    if layout.offload != "none":
        if layout.zero_stage < 2 or layout.offload_device != "cpu":
            raise refused("Layout.offload", f"{layout.offload} to {layout.offload_device}",
                          "CPU offload with zero_stage >= 2 under torchtitan", "torchtitan.offload-needs-fsdp-on-cpu",
                          "torchtitan offloads through FSDP (training.enable_cpu_offload), to the CPU only")
        lines.append("enable_cpu_offload = true  # FSDP CPU offload of parameters, gradients and optimizer state")
    return lines
