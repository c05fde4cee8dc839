"""The result types of `advisor.estimate`: frozen, JSON-serialisable pydantic models.

All byte counts are per GPU, on the most-loaded rank; times are seconds per global batch (one
optimizer step) unless a field says otherwise.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from .assumptions import Assumptions

__all__ = ["MemoryEstimate", "CommDimension", "CommEstimate", "Estimate"]

Link = Literal["nvlink", "network", "none"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class MemoryEstimate(_Frozen):
    """Per-GPU memory of the most-loaded rank, every term separate (bytes)."""

    weights: int
    """16-bit (or fp32 for FSDP) parameters resident on the GPU, incl. FP8 weight copies."""
    gradients: int
    """Gradient buffers (fp32 main grads for Megatron bf16; fp16 + fp32 partition for DeepSpeed)."""
    optimizer: int
    """fp32 master weights and Adam moments left on the GPU (0 when offloaded)."""
    activations: int
    """Stored activations at the pipeline peak: in-flight micro-batches x layers, embedding and
    logits terms, and the working layer of full recompute."""
    buffers: int
    """Communication and gather buffers: ZeRO-3 live parameters, FSDP gather buffers, DeepSpeed
    reduce bucket, pipeline send/recv buffers, TP-overlap buffers."""
    reserve: int
    """CUDA context, NCCL buffers per communicator, and allocator fragmentation."""
    total: int
    capacity: int
    """GPU memory (HBM) of the cluster's GPU."""
    headroom: int
    """capacity - total (negative when it does not fit)."""
    fits: bool
    stage: int
    """Pipeline stage (0-based) of the most-loaded rank."""
    offloaded_to_host: int
    """Bytes of this GPU's states held in CPU memory (optimizer/param offload to cpu)."""
    offloaded_to_nvme: int
    host_fits: bool
    """Offloaded states fit where they go: this GPU's share of host memory (x host_buffer_factor), and
    of the node's NVMe when Cluster.nvme_per_node is given."""
    detail: dict[str, int]
    """Named sub-terms (e.g. 'act_layers', 'act_logits', 'zero3_live_params', 'nccl')."""


class CommDimension(_Frozen):
    """Communication of one parallel dimension, per GPU per step."""

    bytes: int
    """Bytes this GPU sends per step for this dimension (bus bytes: ring factors applied)."""
    seconds: float
    """Time those transfers take on the link, before any overlap."""
    exposed_seconds: float
    """Part of `seconds` left on the critical path after overlap, summed over the step (the slowest
    stage's m micro-batches plus once-per-step traffic); the pipeline bubble is not included."""
    link: Link
    """The slowest link the group crosses: NVLink inside the domain, the network outside."""
    overlappable: float
    """Fraction of `seconds` that can hide behind compute (0..1)."""
    group_size: int


class CommEstimate(_Frozen):
    tp: CommDimension
    pp: CommDimension
    dp: CommDimension
    """Data-parallel gradient reduction and ZeRO/distributed-optimizer gathers (dense and expert)."""
    cp: CommDimension
    ep: CommDimension


class Estimate(_Frozen):
    """Memory, communication and time for one layout."""

    memory: MemoryEstimate
    comm: CommEstimate
    compute_time: float
    """Pure compute per step on the slowest stage: m micro-batches of forward + backward (+ recompute)."""
    bubble_fraction: float
    """Pipeline bubble relative to ideal time, (p-1)/(v*m) (Narayanan et al. 2021 §2.2)."""
    bubble_time: float
    exposed_comm_time: float
    optimizer_time: float
    """Optimizer step (HBM-bound Adam, or CPU Adam + PCIe/NVMe transfers when offloaded)."""
    step_time: float
    """Seconds per global batch."""
    tokens_per_second: float
    """Whole cluster."""
    model_flops: float
    """Model FLOPs per step (6*N_active*tokens + attention + logits; no recompute), whole cluster."""
    mfu: float
    """model_flops / (step_time * gpus * dense 16-bit peak)."""
    hfu: float
    """Hardware FLOPs (model FLOPs + recompute, padded vocabulary) / (step_time * gpus * dense 16-bit
    peak), Korthikanti et al. 2022 §5."""
    comm_ratio: float
    """Total communication time (all dimensions, before overlap) / compute_time: the seed checklist's
    'comm ratio' to watch."""
    exposed_comm_ratio: float
    """Exposed communication / step_time."""
    dp: int
    num_microbatches: int
    profile: str
    """The kernel profile the times come from: its name, "measured" or "derived" (inputs.profile)."""
    assumptions: Assumptions
