"""`Assumptions`: every tunable number of the cost model, named, with where its default comes from.

Peer tools disagree by up to 8x on activation memory because each silently picks a different set of
terms. Here every such choice is a field of one frozen model,
echoed back in every `Estimate`, so a reader can see exactly what was assumed and change it.

Defaults marked "calibrated" were fitted against measured step times: `benchmarks/calibrate_throughput.py`
(39 published configurations with reported throughput: Narayanan et al. 2021 and Korthikanti et al.
2022 on A100, the Megatron-LM README H100 weak-scaling table, NeMo 24.07 H100 FP8 rows, BLOOM) and
`benchmarks/calibrate_korthikanti.py` (Korthikanti et al. 2022 Table 5, which must stay within 15 %);
the others are read from the named source, or are stated as an assumption when no public source pins
them down. Each field says what the knob means, its unit, its default and its source; the scans and
measurements behind the defaults are in docs/evidence/assumptions.md.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..errors import InputError
from ..inputs.bounds import MAX_EXPERTS, MAX_PARAMS
from ..inputs.coerce import coerce
from ..inputs.screen import screen

__all__ = ["Assumptions", "GiB", "RecomputeModule", "as_assumptions"]

GiB = 1 << 30
MiB = 1 << 20

# Bounds of the Assumptions fields: each keeps a knob inside what the hardware or the framework
# physically allows, so that no accepted value can make an estimate infinite, NaN or negative.
MIN_EFFICIENCY = 0.01
"""Lowest accepted share of a peak (compute, HBM, NVLink, network): at 1 % an H100 computes ~10
TFLOP/s, what a CPU socket does; below it the number describes a broken run, and 1e-300 would make
every step time overflow."""
MAX_CALL_SECONDS = 1e-2
"""Longest fixed cost of one GEMM or collective call: 10 ms is 1000x a kernel launch or an NCCL
small-message latency (~10 us); more is a stalled host or fabric, not a per-call overhead."""
MAX_TRAFFIC_PER_BYTE = 128.0
"""Most HBM bytes moved per stored activation byte (elementwise_traffic; x2 per softmax score, x8 per
optimizer parameter): the counted kernels move 3-4 (calibrated 10), the softmax chain 22 B per score
and Adam 30 B per parameter; 128 would be dozens of full passes more than any kernel chain makes."""
MAX_ELEMENT_BYTES = 8.0
"""Most bytes per element of one stored tensor: 8, an fp64 element (none of these buffers is wider);
logits take twice that (a copy plus its upcast)."""
MAX_STATE_BYTES = 64.0
"""Most optimizer-state bytes per parameter: 16 fp32 values (Adam keeps 3, master + m + v = 12 B)."""
StateBytes = Annotated[float, Field(strict=True, ge=0, le=MAX_STATE_BYTES)]
# moe_load_imbalance's ceiling: every token on one expert rank is `experts` times the average, and
# Model.experts is at most MAX_EXPERTS. DeepSpeed's bucket, in elements, is at most Model's parameter
# bound MAX_PARAMS (it is capped at the rank's own parameters anyway).
MAX_RESERVED_BYTES = 1 << 40
"""Most bytes of a fixed per-GPU reserve (CUDA context, NCCL buffers): 1 TiB, more than any GPU's memory."""
MAX_HOST_BUFFER_FACTOR = 100.0
"""Host memory per offloaded byte: DeepSpeed reserves 1.5x; 100x is no buffer policy, only a typo."""
MIN_BANDWIDTH, MAX_BANDWIDTH = 1e7, 1e13
"""Host<->GPU and NVMe bytes/s: 10 MB/s is below a spinning disk, 10 TB/s ten times NVLink-C2C's 900 GB/s."""
MIN_ADAM_RATE, MAX_ADAM_RATE = 1e6, 1e13
"""CPU Adam parameters/s: measured ~1e9 (see the field); 1e6 is a single slow core, 1e13 is beyond HBM speed."""

RecomputeModule = Literal["core_attn", "layernorm", "mla_up_proj", "mlp", "moe", "moe_act", "shared_experts"]
"""Megatron-Core `recompute_modules` names (megatron/core/transformer/transformer_config.py)."""


class Assumptions(BaseModel):
    """Knobs of `advisor.estimate`. Frozen; pass a modified copy (`Assumptions(hbm_efficiency=0.7)`).
    The kernels' efficiencies are the GPU's measured profile (`Cluster.profile`), not knobs here."""

    # strict numbers: True is not 1.0 and "0.5" is not 0.5 (the CLI's --assume reads JSON numbers)
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)

    # ---------------------------------------------------------------- compute
    scan_efficiency: float = Field(0.45, strict=True, ge=MIN_EFFICIENCY, le=1)
    """Share of the dense 16-bit peak that a linear mixer's scan kernels (Mamba-2 SSD, Gated DeltaNet's
    chunked delta rule) reach on their FLOPs. Assumption: no such kernel is measured; the value the
    cost model gave FlashAttention before measured attention curves replaced it."""

    sustained_formats: tuple[Literal["bf16", "fp8", "fp4"], ...] = ("fp8", "fp4")
    """GEMM formats priced at the profile's sustained rate (`Profile.sustained`, back-to-back GEMMs at
    the power limit); the others at its burst curves. Default ("fp8", "fp4"): measured on an H200
    (benchmarks/measured/h200-2026-12-04), checked with benchmarks/calibrate_2025.py. Evidence: docs/evidence/assumptions.md."""

    host_floor: bool = True
    """Price the host's time to issue each micro-batch's kernels (costmodel.kernels.host_layer_seconds
    from the profile's measured host costs): a step cannot run faster than its kernels are launched.
    False prices GPU time alone."""

    host_overlap_exponent: float = Field(4.0, strict=True, ge=1, le=64)
    """How completely the launch queue hides the shorter of GPU time g and host time h: a micro-batch
    takes (g^p + h^p)^(1/p), max(g, h) as p grows, g + h at p = 1. Measured on the H200 layer stacks
    (benchmarks/measured_h200.py scans it)."""

    expert_gemm_overhead: float = Field(2e-5, strict=True, ge=0, le=MAX_CALL_SECONDS)
    """Seconds added to every GEMM call of a local routed expert (FC1 and FC2, forward and both
    backward GEMMs), for the per-expert work of Transformer Engine's GroupedLinear that a dense GEMM
    does not do. Unit: seconds per call. Default 2e-5: calibrated, benchmarks/calibrate_2025.py --scan
    expert_gemm_overhead. Evidence: docs/evidence/assumptions.md."""

    elementwise_traffic: float = Field(9.25, strict=True, ge=0, le=MAX_TRAFFIC_PER_BYTE)
    """HBM bytes the element-wise kernels of a layer move (forward + backward) per byte of the
    activations it stores, timed at `hbm_efficiency` (Megatron-Core with Transformer Engine). Unit:
    bytes per stored byte. Default 9.25: calibrated over both dev files (docs/calibration.md). Evidence: docs/evidence/assumptions.md."""

    flash_causal_fraction: float = Field(0.5, strict=True, ge=0.5, le=1)
    """Share of the s x s attention-score FLOPs a causal FlashAttention kernel executes; MFU
    still counts all s^2. Unit: fraction, at least 0.5. Default 0.5: Dao 2023, FlashAttention-2 §3.1
    (fully masked blocks skipped). Evidence: docs/evidence/assumptions.md."""

    hbm_efficiency: float = Field(0.8, strict=True, ge=MIN_EFFICIENCY, le=1)
    """Fraction of the HBM bandwidth that memory-bound kernels (non-flash softmax/dropout, Adam step)
    reach. Assumption (STREAM-like kernels reach 80-90 % of datasheet bandwidth on A100/H100)."""

    softmax_bytes_per_score: float = Field(22.0, strict=True, ge=0, le=MAX_TRAFFIC_PER_BYTE * 2)
    """HBM bytes moved per attention-score element, forward + backward, by the unfused
    scale-mask-softmax-dropout chain. Unit: bytes per score. Default 22: counted from Korthikanti
    et al. 2022 §4.1's stored tensors (~9 B forward, ~13 B backward). Evidence: docs/evidence/assumptions.md."""

    optimizer_bytes_per_param: float = Field(30.0, strict=True, ge=0, le=MAX_TRAFFIC_PER_BYTE * 8)
    """HBM bytes the Adam step moves per locally-owned parameter: read fp32 master, grad, m, v (16 B),
    write master, m, v (12 B) and the 16-bit model copy (2 B)."""

    # ---------------------------------------------------------------- memory: model states
    deepspeed_fp32_grad_partition: bool = True
    """DeepSpeed keeps an fp32 gradient partition for its fp32 master weights, which is why its own
    estimators use 18 B/param (deepspeed/runtime/zero/stage_1_and_2.py
    `estimate_zero2_model_states_mem_needs`: 2P + 18P/N; stage3.py: 18P/N). False gives the ZeRO
    paper's accounting (Rajbhandari et al. 2020 §3.1: 2 + 2 + K=12 = 16 B/param, Fig. 1)."""

    fp8_weight_copy_bytes: float = Field(1.0, strict=True, ge=0, le=MAX_ELEMENT_BYTES)
    """Extra bytes per linear-layer parameter under FP8: Transformer Engine caches the FP8 cast of
    each weight across micro-batches (`is_first_microbatch`); Hopper GEMMs also need its transpose,
    which would add one more byte. Assumption: 1. MX and NV recipes keep two quantised copies (row-
    and column-wise scales), each of the recipe's element and scale bytes (inputs.precision)."""

    megatron_main_grad_bytes: float = Field(4.0, strict=True, gt=0, le=MAX_ELEMENT_BYTES)
    """Bytes per gradient element in Megatron's bf16/fp8 gradient buffer: 4 because Megatron-LM forces
    fp32 accumulation and reduction for bf16 (arguments.py: `accumulate_allreduce_grads_in_fp32 = True`;
    NeMo 2 recipes set `grad_reduce_in_fp32=True`). NeMo 1.x with megatron_amp_O2 and distributed
    fused Adam keeps bf16 gradients (`optim.grad_sync_dtype=bf16`, NeMo docs mixed_precision.rst): 2."""

    megatron_optimizer_bytes: float = Field(12.0, strict=True, gt=0, le=MAX_STATE_BYTES)
    """Bytes per parameter of Megatron's optimizer states in bf16/fp8 training, sharded by the
    distributed optimizer (fp16 keeps its own 16). Unit: bytes per parameter. Default 12 (fp32 master,
    Adam m and v): Megatron-Core's DistributedOptimizer (Megatron-LM docs dist_optimizer.md); NeMo's
    Apex optimizer keeps 4 or 10. Evidence: docs/evidence/assumptions.md."""

    fsdp_state_bytes: tuple[StateBytes, StateBytes, StateBytes] = (4.0, 4.0, 8.0)
    """(params, grads, optimizer) bytes per parameter for framework "torchtitan" (PyTorch FSDP):
    torchtitan keeps fp32 sharded params and reduces grads in fp32 (MixedPrecisionPolicy(
    param_dtype=bf16, reduce_dtype=fp32)) with fp32 Adam moments: 4/4/8. A model loaded in bf16 and
    trained without fp32 master weights (HF Trainer with torch_dtype=bfloat16 + FSDP) is 2/2/4."""

    # ---------------------------------------------------------------- memory: activations
    dropout_masks: bool | Literal["auto"] = "auto"
    """Whether the 1-byte dropout masks and attention-dropout outputs are stored (2sbh per layer +
    as^2b, Korthikanti et al. 2022 §4.1). Default "auto": stored for GPT-2/3-style models (biases or
    learned positions; dropout 0.1), not for Llama-style ones (dropout 0). Evidence: docs/evidence/assumptions.md."""

    recompute_modules: tuple[RecomputeModule, ...] = ("core_attn",)
    """What Layout.recompute == "selective" recomputes, as Megatron-Core's `recompute_modules`
    (--recompute-modules; megatron/core/transformer/transformer_config.py). Default ("core_attn",):
    Megatron-Core's default, Korthikanti et al. 2022's selective recompute. Each module's memory
    kept and the forward it runs again are listed in the evidence page. Evidence: docs/evidence/assumptions.md."""

    fp8_activation_bytes: float = Field(1.0, strict=True, gt=0, le=MAX_ELEMENT_BYTES)
    """Bytes per saved element of linear-layer inputs (QKV, out-proj, FC1, FC2) when precision is fp8:
    Transformer Engine saves the FP8-cast input for the backward GEMM. Other recipes scale it by
    their element and scale bytes (inputs.precision: MXFP8 1 + 1/32, blockwise 1 + 4/128, NVFP4
    0.5 + 1/16)."""

    logits_bytes_megatron: float = Field(4.0, strict=True, ge=0, le=2 * MAX_ELEMENT_BYTES)
    """Bytes per logit kept for the loss on the last stage, Megatron-LM (vocab-parallel cross-entropy
    in fp32; megatron/training/theoretical_memory_usage.py: 4*s*b*h*(1+V/h)/t output + loss)."""

    logits_bytes_other: float = Field(6.0, strict=True, ge=0, le=2 * MAX_ELEMENT_BYTES)
    """Bytes per logit for Hugging Face / torchtitan style losses: 16-bit logits plus their fp32 upcast
    (`logits.float()` before cross-entropy)."""

    moe_load_imbalance: float = Field(1.0, strict=True, ge=1, le=MAX_EXPERTS)
    """Tokens routed to the busiest expert rank relative to the average (1 = perfectly balanced, no
    token dropping, Megatron's default). Raise it for memory headroom on real routing."""

    fp8_param_gather: bool = False
    """Keep the linear layers' weights in the low-precision format (Megatron --fp8-param-gather,
    TE `fp8_model_init`): no 16-bit copy, and ZeRO / FSDP gather them in that format. Only with a
    low-precision Training.precision under Megatron. Default False: Megatron-LM's default; Megatron-Bridge's
    FP8-CS and MXFP8 recipes set it. Evidence: docs/evidence/assumptions.md."""

    activation_offload_layers: int = Field(0, strict=True, ge=0, le=1 << 20)
    """Layers per rank whose activations go to host memory after their forward and return for the
    backward (Megatron-Core `cpu_offloading_num_layers`); Megatron layouts with pp 1 and no recompute
    only. Unit: layers. Default 0: Megatron-Core's default (megatron/core/model_parallel_config.py). Evidence: docs/evidence/assumptions.md."""

    # ---------------------------------------------------------------- memory: buffers and reserve
    deepspeed_bucket_elements: float = Field(5e8, strict=True, ge=1, le=MAX_PARAMS)
    """DeepSpeed ZeRO-1/2 contiguous-gradient (IPG) reduce bucket, in elements: `reduce_bucket_size`
    default 5e8 (DeepSpeed docs, config-json "ZeRO optimizations"); capped at the rank's parameters. At
    least 1: the reduction runs one call per bucket, so an empty bucket would mean infinitely many."""

    cuda_context_bytes: int = Field(1 * GiB, strict=True, ge=0, le=MAX_RESERVED_BYTES)
    """CUDA context, cuBLAS/cuDNN workspaces and kernels loaded by PyTorch. Assumption: ~1 GiB on
    A100/H100 (the context alone is 300-600 MiB; cuBLAS workspaces and library kernels add the rest)."""

    nccl_bytes_per_group: int = Field(128 * MiB, strict=True, ge=0, le=MAX_RESERVED_BYTES)
    """NCCL buffers per communicator the rank belongs to: NCCL_BUFFSIZE default 4 MiB (NCCL
    environment-variable docs) x up to 16 channels x 2 directions. Assumption."""

    fragmentation_fraction: float = Field(0.05, strict=True, ge=0, le=1)
    """The caching allocator's reserve as a fraction of the activations and buffers a step allocates
    and frees (MemoryEstimate.detail "fragmentation"). Unit: fraction. Default 0.05: Megatron-LM's
    allowance (megatron/training/theoretical_memory_usage.py, x 1.05). Evidence: docs/evidence/assumptions.md."""

    host_buffer_factor: float = Field(1.5, strict=True, ge=1, le=MAX_HOST_BUFFER_FACTOR)
    """Host-memory head-room factor for offloaded states (DeepSpeed estimators'
    `additional_buffer_factor=1.5`)."""

    # ---------------------------------------------------------------- memory: the Hugging Face stack
    hf_autocast: bool = True
    """Training.framework "hf-trl" / "hf-accelerate": the forward runs under torch.autocast(bf16), as
    the Trainer, TRL and Accelerate do with bf16 on. False: a 16-bit model without autocast, where
    PEFT's fp32 adapters run in fp32. Default True: those libraries' bf16 setting (costmodel.hf). Evidence: docs/evidence/assumptions.md."""

    hf_logits_held: bool | Literal["auto"] = "auto"
    """Whether the training loop holds the model output, and its 16-bit logits (2 bytes per token x
    vocabulary), through the backward. Default "auto": held for "hf-accelerate" (its examples call
    out.loss.backward()), not for "hf-trl" (transformers trainer.py training_step drops it). Evidence: docs/evidence/assumptions.md."""

    hf_loss: Literal["full-logits", "chunked"] = "full-logits"
    """How the Hugging Face stacks compute the loss: "full-logits", transformers' ForCausalLMLoss (fp32
    logits, log-softmax and its gradient for every token: 10-12 bytes per token x vocabulary at the loss);
    "chunked", TRL's loss_type="chunked_nll" (256-token checkpointed chunks) or Liger's fused linear
    cross-entropy (TRL use_liger_kernel): a copy of the final hidden states and one chunk's logits."""

    # ---------------------------------------------------------------- communication
    nvlink_efficiency: float = Field(0.8, strict=True, ge=MIN_EFFICIENCY, le=1)
    """Achieved NCCL bus bandwidth as a fraction of unidirectional NVLink bandwidth (half the vendor's
    bidirectional figure). Assumption: nccl-tests bus bandwidth on DGX A100/H100 is ~75-85 %."""

    network_efficiency: float = Field(0.9, strict=True, ge=MIN_EFFICIENCY, le=1)
    """Achieved NCCL bus bandwidth as a fraction of the per-GPU scale-out NIC speed, for large
    messages. Unit: fraction. Default 0.9: NCCL tests on DGX H100 reach the NICs' line rate;
    benchmarks/calibrate_throughput.py's scan prefers 0.9 to 0.8. Evidence: docs/evidence/assumptions.md."""

    ep_nvlink_efficiency: float = Field(0.55, strict=True, ge=MIN_EFFICIENCY, le=1)
    """Share of the unidirectional NVLink bandwidth the MoE token dispatch and combine reach (EP
    all-to-all inside the NVLink domain). Unit: fraction. Default 0.55: measured, HybridEP and DeepEP
    kernel benchmarks on B200 and GB200 (deepseek-ai/DeepEP@41cad94 docs/README_Hybrid-EP.md). Evidence: docs/evidence/assumptions.md."""

    latency_nvlink: float = Field(1e-5, strict=True, ge=0, le=MAX_CALL_SECONDS)
    """Fixed cost per collective call inside the NVLink domain, seconds. Assumption (NCCL small-message
    latency on NVSwitch systems is ~10 us)."""

    latency_network: float = Field(3e-5, strict=True, ge=0, le=MAX_CALL_SECONDS)
    """Fixed cost per collective call crossing the network. Unit: seconds. Default 3e-5: an assumption
    between a measured 8-byte all_reduce over HDR InfiniBand (19-20 us, NVIDIA/nccl-tests issue 150)
    and NCCL's own cost model (src/graph/tuning.cc, 25-35 us). Evidence: docs/evidence/assumptions.md."""

    ring_hop_latency: float = Field(5e-6, strict=True, ge=0, le=MAX_CALL_SECONDS)
    """Seconds per network step of a ring collective (N-1 steps over N nodes per reduce-scatter or
    all-gather), paid once per call. Unit: seconds. Default 5e-6: assumption (switch hop and NIC
    latency 1-2 us plus NCCL's per-step protocol). Evidence: docs/evidence/assumptions.md."""

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

    tp_overlap_efficiency: float = Field(0.8, strict=True, ge=0, le=1)
    """Share of TP communication hidden when tp_comm_overlap is on (Transformer Engine userbuffers
    under SP). Unit: fraction. Default 0.8: assumption, the lowest of the values that fit the
    Megatron-LM README H100 runs equally (benchmarks/calibrate_throughput.py). Evidence: docs/evidence/assumptions.md."""

    pp_overlap: float = Field(0.0, strict=True, ge=0, le=1)
    """Share of pipeline send/recv time hidden behind compute. 0: 1F1B sends and receives are
    blocking on the critical path (megatron/core/pipeline_parallel/schedules.py), as in the
    Korthikanti 2022 runs."""

    pp_overlap_efficiency: float = Field(0.9, strict=True, ge=0, le=1)
    """Share of pipeline send/recv hidden behind the micro-batch's compute under Megatron-Core's
    interleaved schedule with p2p overlap (Layout.overlap_p2p_comm, on by default): sends and receives
    are posted asynchronously and waited for only before the chunk that needs them
    (megatron/core/pipeline_parallel/schedules.py, `overlap_p2p_comm`). Assumption: 0.9 (the transfers
    share SMs and HBM with the compute they hide behind)."""

    ep_overlap: float = Field(0.0, strict=True, ge=0, le=1)
    """Share of MoE all-to-all time hidden behind compute (Megatron's A2A/compute overlap is opt-in:
    --overlap-moe-expert-parallel-comm). Unit: fraction. Default 0: the overlap is off; the Megatron MoE
    Model Zoo's Qwen3-235B run with it on hides about a third (benchmarks/calibrate_moe.py). Evidence: docs/evidence/assumptions.md."""

    ep_a2a_overlap: bool = False
    """Megatron-Core's EP all-to-all overlap (--overlap-moe-expert-parallel-comm; Megatron-Bridge
    `comm_overlap.overlap_moe_expert_parallel_comm`): the steady-state 1F1B step runs one
    micro-batch's forward together with another's backward, so each one's dispatch and combine run
    while the other computes (megatron/core/pipeline_parallel/combined_1f1b.py). Hidden: up to
    `ep_a2a_overlap_efficiency` of the all-to-all time, and never more than the micro-batch's compute."""

    ep_a2a_overlap_efficiency: float = Field(0.45, strict=True, ge=0, le=1)
    """Share of the EP all-to-all time that `ep_a2a_overlap` can hide. Unit: fraction. Default
    0.45: calibrated on the one dev pair that isolates the setting, Qwen3-235B-A22B on 256 H100 in
    Megatron-Bridge's 25.09 and 25.11 tables (benchmarks/calibrate_2025.py --scan). Evidence: docs/evidence/assumptions.md."""

    moe_token_dispatcher: Literal["alltoall", "deepep"] = "alltoall"
    """How MoE tokens reach their experts' ranks: "alltoall", Megatron-Core's NCCL all-to-all
    dispatcher (every routed copy is sent); "deepep", the flex dispatcher with DeepEP (a token crosses
    the network once per remote node). Default "alltoall": checked against the Megatron MoE Model Zoo's
    measured EP 32 run (benchmarks/calibrate_moe.py). Evidence: docs/evidence/assumptions.md."""

    # ---------------------------------------------------------------- offload
    pcie_bandwidth: float = Field(25e9, strict=True, ge=MIN_BANDWIDTH, le=MAX_BANDWIDTH)
    """Host<->GPU bandwidth per GPU, bytes/s (PCIe Gen4 x16 achieves ~25 GB/s of 32)."""

    nvme_bandwidth: float = Field(3e9, strict=True, ge=MIN_BANDWIDTH, le=MAX_BANDWIDTH)
    """NVMe read/write bandwidth available to one GPU's offloaded states. Unit: bytes/s. Default 3e9:
    assumption, about one fast SSD per GPU, inside DeepSpeed's DeepNVMe measurements (1.7-4.2 GB/s
    per GPU; deepspeedai/DeepSpeed docs/_tutorials/deepnvme.md). Evidence: docs/evidence/assumptions.md."""

    cpu_adam_params_per_second: float = Field(1e9, strict=True, ge=MIN_ADAM_RATE, le=MAX_ADAM_RATE)
    """Parameters per second DeepSpeedCPUAdam updates for one GPU's partition. Unit: parameters/s.
    Default 1e9: assumption between two measurements, 1.4e9/s (deepspeedai/DeepSpeed PR 735) and
    about 0.7e9/s (DeepSpeed blogs/zenflow-corebinding). Evidence: docs/evidence/assumptions.md."""

    @model_validator(mode="before")
    @classmethod
    def _screen(cls, data: Any) -> Any:
        # flags are bools ("yes" is no flag), numbers are not text (inputs.screen)
        return screen(cls, data)

    @field_validator("recompute_modules")
    @classmethod
    def _each_module_once(cls, value: tuple) -> tuple:
        if len(set(value)) != len(value):
            raise InputError("Assumptions.recompute_modules", value, "each module once",
                             "a module listed twice is recomputed once (Megatron-Core reads a set)")
        return value

    def changed(self) -> dict:
        """The fields that differ from their defaults (the trace names them)."""
        return {k: v for k, v in self.model_dump().items() if v != type(self).model_fields[k].default}


def as_assumptions(value: Any) -> Assumptions | None:
    if value is None:
        return None
    return coerce(value, Assumptions, "assumptions", "an advisor.Assumptions, a dict of its fields, or None")
