"""`Assumptions`: every tunable number of the cost model, named, with where its default comes from.

Peer tools disagree by up to 8x on activation memory because each silently picks a different set of
terms (research/peers-measured.md §6, §8). Here every such choice is a field of one frozen model,
echoed back in every `Estimate`, so a reader can see exactly what was assumed and change it.

Defaults marked "calibrated" were fitted by `benchmarks/calibrate_korthikanti.py` against measured
Megatron-LM iteration times (Korthikanti et al. 2022, Table 5); the others are read from the named
source, or are stated as an assumption when no public source pins them down.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Assumptions", "GiB"]

GiB = 1 << 30
MiB = 1 << 20


class Assumptions(BaseModel):
    """Knobs of `advisor.estimate`. Frozen; pass a modified copy (`Assumptions(compute_efficiency=0.5)`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    # ---------------------------------------------------------------- compute
    compute_efficiency: float = Field(0.6, gt=0, le=1)
    """Fraction of the dense BF16/FP16 peak that transformer GEMMs achieve. Calibrated: the value that
    puts the four Korthikanti et al. 2022 Table 5 iteration times (22B and 175B on A100, full and
    SP+selective recompute) within about 7 % (benchmarks/calibrate_korthikanti.py). Attention-core
    element-wise work, communication, the bubble and the optimizer step are modelled separately."""

    fp8_efficiency: float = Field(0.45, gt=0, le=1)
    """Fraction of the dense FP8 peak that FP8 linear-layer GEMMs achieve (attention stays BF16).
    Assumption, checked against NeMo 24.07 H100 FP8 rows (reported model TFLOP/s/GPU of 700-800 at
    1979 dense FP8 peak, i.e. overall ~0.37-0.40 of the FP8 peak including everything else)."""

    flash_causal_fraction: float = Field(0.5, gt=0, le=1)
    """Share of the s x s attention-score FLOPs a causal FlashAttention kernel executes (it skips fully
    masked blocks; Dao 2023, FlashAttention-2 §3.1). Model FLOPs for MFU still count the full s^2, as
    Narayanan et al. 2021 Eq. 3 and Megatron-LM's MFU do."""

    hbm_efficiency: float = Field(0.8, gt=0, le=1)
    """Fraction of the HBM bandwidth that memory-bound kernels (non-flash softmax/dropout, Adam step)
    reach. Assumption (STREAM-like kernels reach 80-90 % of datasheet bandwidth on A100/H100)."""

    softmax_bytes_per_score: float = Field(22.0, ge=0)
    """HBM bytes moved per attention-score element, forward + backward, by the unfused (non-flash)
    scale-mask-softmax-dropout chain: forward reads/writes the 2-byte scores and writes a 1-byte mask
    (~9 B), backward re-reads them and writes the gradient (~13 B). Counted from the Korthikanti et al.
    2022 §4.1 list of stored tensors (softmax output 2 B, dropout mask 1 B, dropout output 2 B)."""

    optimizer_bytes_per_param: float = Field(30.0, ge=0)
    """HBM bytes the Adam step moves per locally-owned parameter: read fp32 master, grad, m, v (16 B),
    write master, m, v (12 B) and the 16-bit model copy (2 B)."""

    # ---------------------------------------------------------------- memory: model states
    deepspeed_fp32_grad_partition: bool = True
    """DeepSpeed keeps an fp32 gradient partition for its fp32 master weights, which is why its own
    estimators use 18 B/param (deepspeed/runtime/zero/stage_1_and_2.py
    `estimate_zero2_model_states_mem_needs`: 2P + 18P/N; stage3.py: 18P/N). False gives the ZeRO
    paper's accounting (Rajbhandari et al. 2020 §3.1: 2 + 2 + K=12 = 16 B/param, Fig. 1)."""

    fp8_weight_copy_bytes: float = Field(1.0, ge=0)
    """Extra bytes per linear-layer parameter under FP8: Transformer Engine caches the FP8 cast of
    each weight across micro-batches (`is_first_microbatch`); Hopper GEMMs also need its transpose,
    which would add one more byte. Assumption: 1."""

    megatron_main_grad_bytes: float = Field(4.0, gt=0)
    """Bytes per gradient element in Megatron's bf16/fp8 gradient buffer: 4 because Megatron-LM forces
    fp32 accumulation and reduction for bf16 (arguments.py: `accumulate_allreduce_grads_in_fp32 = True`;
    NeMo 2 recipes set `grad_reduce_in_fp32=True`). NeMo 1.x with megatron_amp_O2 and distributed
    fused Adam keeps bf16 gradients (`optim.grad_sync_dtype=bf16`, NeMo docs mixed_precision.rst): 2."""

    fsdp_state_bytes: tuple[float, float, float] = (4.0, 4.0, 8.0)
    """(params, grads, optimizer) bytes per parameter for framework "torchtitan" (PyTorch FSDP):
    torchtitan keeps fp32 sharded params and reduces grads in fp32 (MixedPrecisionPolicy(
    param_dtype=bf16, reduce_dtype=fp32)) with fp32 Adam moments: 4/4/8. A model loaded in bf16 and
    trained without fp32 master weights (HF Trainer with torch_dtype=bfloat16 + FSDP) is 2/2/4."""

    # ---------------------------------------------------------------- memory: activations
    dropout_masks: bool | Literal["auto"] = "auto"
    """Store 1-byte dropout masks and attention-dropout outputs (Korthikanti et al. 2022 §4.1 counts
    them: 2sbh per layer + as^2b). "auto": stored for GPT-2/3-style models (biases or learned position
    embeddings; GPT-2/3, BLOOM, OPT train with dropout 0.1), not for Llama-style models, which train
    with dropout 0 (Llama papers; NeMo/HF configs), where PyTorch's dropout with p=0 returns its input
    and keeps no mask."""

    fp8_activation_bytes: float = Field(1.0, gt=0)
    """Bytes per saved element of linear-layer inputs (QKV, out-proj, FC1, FC2) when precision is fp8:
    Transformer Engine saves the FP8-cast input for the backward GEMM."""

    logits_bytes_megatron: float = Field(4.0, ge=0)
    """Bytes per logit kept for the loss on the last stage, Megatron-LM (vocab-parallel cross-entropy
    in fp32; megatron/training/theoretical_memory_usage.py: 4*s*b*h*(1+V/h)/t output + loss)."""

    logits_bytes_other: float = Field(6.0, ge=0)
    """Bytes per logit for Hugging Face / torchtitan style losses: 16-bit logits plus their fp32 upcast
    (`logits.float()` before cross-entropy)."""

    moe_load_imbalance: float = Field(1.0, ge=1)
    """Tokens routed to the busiest expert rank relative to the average (1 = perfectly balanced, no
    token dropping, Megatron's default). Raise it for memory headroom on real routing."""

    # ---------------------------------------------------------------- memory: buffers and reserve
    deepspeed_bucket_elements: float = Field(5e8, ge=0)
    """DeepSpeed ZeRO-1/2 contiguous-gradient (IPG) reduce bucket, in elements: `reduce_bucket_size`
    default 5e8 (DeepSpeed docs, config-json "ZeRO optimizations"); capped at the rank's parameters."""

    cuda_context_bytes: int = Field(1 * GiB, ge=0)
    """CUDA context, cuBLAS/cuDNN workspaces and kernels loaded by PyTorch. Assumption: ~1 GiB on
    A100/H100 (the context alone is 300-600 MiB; cuBLAS workspaces and library kernels add the rest)."""

    nccl_bytes_per_group: int = Field(128 * MiB, ge=0)
    """NCCL buffers per communicator the rank belongs to: NCCL_BUFFSIZE default 4 MiB (NCCL
    environment-variable docs) x up to 16 channels x 2 directions. Assumption."""

    fragmentation_fraction: float = Field(0.05, ge=0, le=1)
    """Allocator fragmentation as a fraction of activations and buffers: Megatron-LM applies 5 %
    (megatron/training/theoretical_memory_usage.py, `compute_activation_memory_without_sp` x 1.05)."""

    host_buffer_factor: float = Field(1.5, ge=1)
    """Host-memory head-room factor for offloaded states (DeepSpeed estimators'
    `additional_buffer_factor=1.5`)."""

    # ---------------------------------------------------------------- communication
    nvlink_efficiency: float = Field(0.8, gt=0, le=1)
    """Achieved NCCL bus bandwidth as a fraction of unidirectional NVLink bandwidth (half the vendor's
    bidirectional figure). Assumption: nccl-tests bus bandwidth on DGX A100/H100 is ~75-85 %."""

    network_efficiency: float = Field(0.8, gt=0, le=1)
    """Achieved NCCL bus bandwidth as a fraction of the per-GPU scale-out NIC speed. Assumption."""

    latency_nvlink: float = Field(1e-5, ge=0)
    """Fixed cost per collective call inside the NVLink domain, seconds. Assumption (NCCL small-message
    latency on NVSwitch systems is ~10 us)."""

    latency_network: float = Field(3e-5, ge=0)
    """Fixed cost per collective call crossing the network, seconds. Assumption."""

    overlap_grad_reduce: bool = True
    """DP gradient reduction overlaps the last micro-batch's backward (Megatron --overlap-grad-reduce,
    DeepSpeed overlap_comm). Off by default in both frameworks, but advisor recommends it (the Megatron
    README H100 benchmarks use it), so estimates assume it."""

    overlap_param_gather: bool = True
    """Distributed-optimizer / ZeRO parameter all-gathers overlap the next forward
    (Megatron --overlap-param-gather, needs the distributed optimizer; M19)."""

    tp_comm_overlap: bool = False
    """Megatron --tp-comm-overlap (userbuffers; needs SP, M16). Off by default in Megatron-LM and in the
    Korthikanti 2022 runs used for calibration."""

    tp_overlap_efficiency: float = Field(0.8, ge=0, le=1)
    """Share of TP communication hidden when tp_comm_overlap is on. Assumption."""

    pp_overlap: float = Field(0.0, ge=0, le=1)
    """Share of pipeline send/recv time hidden behind compute. 0: 1F1B sends and receives are
    blocking on the critical path (megatron/core/pipeline_parallel/schedules.py), as in the
    Korthikanti 2022 runs."""

    ep_overlap: float = Field(0.0, ge=0, le=1)
    """Share of MoE all-to-all time hidden behind compute (Megatron's A2A/compute overlap is opt-in)."""

    # ---------------------------------------------------------------- offload
    pcie_bandwidth: float = Field(25e9, gt=0)
    """Host<->GPU bandwidth per GPU, bytes/s (PCIe Gen4 x16 achieves ~25 GB/s of 32)."""

    nvme_bandwidth: float = Field(3e9, gt=0)
    """NVMe read/write bandwidth available to one GPU's offloaded states, bytes/s. Assumption."""

    cpu_adam_params_per_second: float = Field(1e9, gt=0)
    """Parameters per second DeepSpeedCPUAdam updates for one GPU's partition. Assumption of order of
    magnitude (ZeRO-Offload, Ren et al. ATC'21, reports CPU-Adam several x faster than PyTorch's)."""
