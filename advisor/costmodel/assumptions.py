"""`Assumptions`: every tunable number of the cost model, named, with where its default comes from.

Peer tools disagree by up to 8x on activation memory because each silently picks a different set of
terms (research/peers-measured.md §6, §8). Here every such choice is a field of one frozen model,
echoed back in every `Estimate`, so a reader can see exactly what was assumed and change it.

Defaults marked "calibrated" were fitted against measured step times: `benchmarks/calibrate_throughput.py`
(39 published configurations with reported throughput: Narayanan et al. 2021 and Korthikanti et al.
2022 on A100, the Megatron-LM README H100 weak-scaling table, NeMo 24.07 H100 FP8 rows, BLOOM) and
`benchmarks/calibrate_korthikanti.py` (Korthikanti et al. 2022 Table 5, which must stay within 15 %);
the others are read from the named source, or are stated as an assumption when no public source pins
them down.
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
    """GEMM formats priced at the profile's sustained rate (`Profile.sustained`: back-to-back GEMMs at
    the power limit), the others at its burst curves. Measured on an H200 (benchmarks/measured/
    h200-2026-12-04): 8 s of back-to-back 8192^3 GEMMs on random data reach 0.835 (bf16, SM clock 1455
    MHz) and 0.831 (fp8, 1305 MHz: more power per clock) of a burst, at 683-685 W of the 700 W limit.
    The dev data's FP8 steps (NeMo 24.07 H100 FP8; Megatron-Bridge 2025 FP8 on Hopper and Blackwell)
    agree with the sustained FP8 rate and its bf16 steps with the burst rate (benchmarks/calibrate_2025.py
    with ("bf16", "fp8", "fp4"): older file mean |log| 0.122), as if real bf16 operands stayed under the
    power limit where random ones do not (random bf16 matrices run at 788 TFLOP/s, zeros at 894: the
    device notes); an assumption until a training step's clock is measured."""

    host_floor: bool = True
    """Price the host's time to issue each micro-batch's kernels (costmodel.kernels.host_layer_seconds
    from the profile's measured host costs): a step cannot run faster than its kernels are launched.
    False prices GPU time alone."""

    host_overlap_exponent: float = Field(4.0, strict=True, ge=1, le=64)
    """How completely the launch queue hides the shorter of GPU time g and host time h: a micro-batch
    takes (g^p + h^p)^(1/p), max(g, h) as p grows, g + h at p = 1. Measured on the H200 layer stacks
    (benchmarks/measured_h200.py scans it)."""

    expert_gemm_overhead: float = Field(2e-5, strict=True, ge=0, le=MAX_CALL_SECONDS)
    """Seconds added, on top of the GEMM curve's time, to every GEMM call of a local routed expert (FC1
    and FC2 of each of the experts / ep local experts, forward, data and weight gradient:
    time._expert_gemm_calls). Transformer Engine's GroupedLinear, which Megatron-Core's
    TEGroupedMLP (--moe-grouped-gemm) runs, does per-expert work that a dense layer's one GEMM does
    not: on Blackwell it issues one cuBLAS GEMM per expert, round-robin over 4 streams
    (NVIDIA/TransformerEngine@70f536662ae10a62a54f4ed1ba92e3314c5cfd69, tag v2.9,
    transformer_engine/common/gemm/cublaslt_gemm.cu `multi_stream_cublas_gemm`; the CUTLASS grouped
    GEMM of `nvte_multi_tensor_gemm` is Hopper-only and behind NVTE_USE_CUTLASS_GROUPED_GEMM), each
    with its own launch and tail wave; it quantises each expert's slice separately except under
    delayed scaling (pytorch/csrc/extensions/cast.cpp `multi_tensor_quantize_impl`: "only have fused
    kernel for FP8 delayed scaling"; a current-scaling quantize is an amax, a scale and a cast kernel,
    pytorch/csrc/quantizer.cpp), and loops over the experts in Python for the weight workspaces and
    main-grad hooks (pytorch/module/grouped_linear.py). No microbenchmark of that overhead was found;
    the value is the scan over every dev row (`python benchmarks/calibrate_2025.py --scan
    expert_gemm_overhead=0,5e-6,1e-5,1.5e-5,2e-5,2.5e-5,3e-5,4e-5,5e-5`, with ep_nvlink_efficiency
    0.55): 2025 mean |log| 0.176, 0.163, 0.151, 0.144, 0.140, 0.136, 0.135, 0.134, 0.138; within 15%
    61% -> 74-79% from 1e-5; MoE within 20% 47% -> 74% at 2e-5 to 3e-5, 79% at 4e-5 to 5e-5; the
    older file (dense) unchanged at 0.050. |log| is flat within 0.006 from 2e-5 to 5e-5 and the
    lowest of the near-equals is kept: the larger values over-price the smallest experts (Qwen3-30B-A3B,
    hidden 2048, expert FFN 768, on 8 B200 with CUDA graphs, which the cost model does not represent:
    estimate/measured 0.85 at 2e-5, 0.73 at 3e-5). It is what makes few tokens per expert and many
    local experts cost more than their FLOPs (EP 8 against EP 32-64 on the same model); a fixed cost
    per call, not one that grows with the expert's size, is an assumption the 19 MoE rows cannot
    test further."""

    elementwise_traffic: float = Field(9.25, strict=True, ge=0, le=MAX_TRAFFIC_PER_BYTE)
    """Megatron-Core with Transformer Engine: HBM bytes the element-wise kernels of a layer move
    (forward + backward) per byte of the activations the layer stores (Korthikanti et al. 2022 §4.1's
    tensors without the attention core and the dropout masks), timed at `hbm_efficiency` of HBM
    bandwidth; the last stage adds the loss's fp32 logits at the same rate. Counting the kernels gives
    3-4; the rest is what grows with tokens x hidden rather than FLOPs (kernel gaps, casts, small-kernel
    bandwidth): the eager PyTorch stack's measured equivalent is the profile's `elementwise`.
    Calibrated: the scan over both dev files with the measured curves (docs/calibration.md)."""

    flash_causal_fraction: float = Field(0.5, strict=True, ge=0.5, le=1)
    """Share of the s x s attention-score FLOPs a causal FlashAttention kernel executes (it skips fully
    masked blocks; Dao 2023, FlashAttention-2 §3.1). Model FLOPs for MFU still count the full s^2, as
    Narayanan et al. 2021 Eq. 3 and Megatron-LM's MFU do. At least 0.5: a causal kernel computes the
    whole lower triangle, (s + 1) / 2s of the scores; less would price attention below its FLOPs."""

    hbm_efficiency: float = Field(0.8, strict=True, ge=MIN_EFFICIENCY, le=1)
    """Fraction of the HBM bandwidth that memory-bound kernels (non-flash softmax/dropout, Adam step)
    reach. Assumption (STREAM-like kernels reach 80-90 % of datasheet bandwidth on A100/H100)."""

    softmax_bytes_per_score: float = Field(22.0, strict=True, ge=0, le=MAX_TRAFFIC_PER_BYTE * 2)
    """HBM bytes moved per attention-score element, forward + backward, by the unfused (non-flash)
    scale-mask-softmax-dropout chain: forward reads/writes the 2-byte scores and writes a 1-byte mask
    (~9 B), backward re-reads them and writes the gradient (~13 B). Counted from the Korthikanti et al.
    2022 §4.1 list of stored tensors (softmax output 2 B, dropout mask 1 B, dropout output 2 B)."""

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
    """Bytes per parameter of Megatron's optimizer states in bf16/fp8 training, sharded over the
    data-parallel group by the distributed optimizer (fp16 keeps its own 16). 12 = fp32 master
    weights + fp32 Adam m and v: Megatron-Core's DistributedOptimizer (Megatron-LM docs
    dist_optimizer.md), also under NeMo 1.x `optim.name: mcore_distributed_optim`, which ignores
    `optim.dtype` (nemo/core/classes/modelPT.py `setup_megatron_optimization` builds its
    OptimizerConfig without it). NeMo 1.x `optim.name: distributed_fused_adam` (Apex
    DistributedFusedAdam, nemo/core/optim/distributed_adam.py) keeps less for a bf16 megatron_amp_O2
    model (nemo/collections/nlp/models/language_modeling/megatron_base_model.py `setup_optimization`):
    with `optim.dtype: bf16` the optimizer dtype equals the model's, so `store_params=False` and only
    bf16 m and v remain, 4 (NeMo-Framework-Launcher conf/peft/llama/sft.yaml, the SFT default); with
    the default fp32 optimizer dtype `store_param_remainders=True` keeps the 16 low bits of each fp32
    master weight (the bf16 weight is its high half) plus fp32 m and v, 10."""

    fsdp_state_bytes: tuple[StateBytes, StateBytes, StateBytes] = (4.0, 4.0, 8.0)
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

    recompute_modules: tuple[RecomputeModule, ...] = ("core_attn",)
    """What Layout.recompute == "selective" recomputes, as Megatron-Core's `recompute_modules`
    (megatron/core/transformer/transformer_config.py; default ["core_attn"], the attention core of
    Korthikanti et al. 2022's selective recompute). "layernorm" discards the output of a separate
    LayerNorm module (MLA's input norm, a MoE layer's pre-MLP norm; Transformer Engine fuses the others
    into the next linear, gpt_layer_specs.py), "mla_up_proj" the up-projected MLA queries/keys/values,
    "moe_act" the routed experts' activation output, "mlp" / "moe" / "shared_experts" keep only the
    module's input (memory.per_layer_activations, moe_mlp_activations). Megatron-LM:
    --recompute-granularity selective --recompute-modules ...; NeMo 2: model.config.recompute_modules.
    The time model charges one more forward of each module in the backward (time._selective_extra):
    "core_attn" the attention core (its FLOPs 4x forward instead of 3x, and the unfused softmax's
    forward traffic again); "mlp" a dense layer's FC1 and FC2, 2 x MLP parameters FLOPs per token,
    plus its element-wise kernels (Megatron-Core does not apply it to MoE layers); "moe" the whole
    MoE layer, router and routed + shared expert GEMMs, and its token dispatch and combine
    all-to-alls again (moe_layer.py checkpoints them: 6 per layer instead of 4, as full recompute);
    "shared_experts" the shared experts' GEMMs; "mla_up_proj" the MLA q/kv up-projection GEMMs;
    "layernorm" and "moe_act" only element-wise time (the norm output, the experts' activation),
    no FLOPs. Element-wise work is a third of `elementwise_traffic` per byte the module stores (one
    forward of forward + backward). The TP collectives inside "mlp", "moe" and "shared_experts" run
    again too (comm.tp_plan), and so does the CP ring's forward exchange for "core_attn"
    (comm.cp_plan). Not charged: the second re-run Megatron-Core's nested checkpoints give
    "shared_experts" / "moe_act" when "moe" is also set, which keeps every set of modules at or below
    full recompute's cost."""

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
    TE `fp8_model_init`; Megatron-Bridge's FP8-CS and MXFP8 recipes set it): the weight is the
    quantised tensor, so there is no 16-bit copy of it and no separate cached cast, and ZeRO / FSDP
    gather it in that format (half the bytes of a 16-bit gather for FP8). The fp32 master weights
    stay in the optimizer. Only with a low-precision `Training.precision` under Megatron."""

    activation_offload_layers: int = Field(0, strict=True, ge=0, le=1 << 20)
    """Layers per rank whose activations go to host memory after their forward and come back for
    their backward (Megatron-Core `cpu_offloading_num_layers`, megatron/core/model_parallel_config.py;
    Megatron-Bridge sets it for Llama 3 70B / 405B with Megatron-FSDP on GB200 / GB300). Megatron-Core
    refuses it with pipeline parallelism and with recompute, so it applies to Megatron layouts with
    pp 1 and no recompute only; other layouts are priced without it. Memory: those layers keep one
    layer's activations in flight (the double buffer of the offload handler); time: the copies run
    on their own stream at GPU.host_bandwidth (Assumptions.pcie_bandwidth when the GPU states none)
    and only what exceeds the forward (copies out) or the backward (copies in) is exposed."""

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
    """The caching allocator's reserve (MemoryEstimate.detail "fragmentation"), as a fraction of the
    activations and buffers, the memory a step allocates and frees: PyTorch's allocator rounds every
    request up to 512 bytes, packs requests up to 1 MiB into 2 MiB segments, serves 1-10 MiB ones from
    20 MiB segments and rounds larger ones to 2 MiB, and keeps freed blocks cached by size, so reserved
    memory exceeds the allocated by rounding and by free blocks too small or on the wrong stream for the
    next request (github:pytorch/pytorch@eb42ad6eca0ce61e7c581212b4bf32f991425571
    c10/cuda/CUDACachingAllocator.cpp: kMinBlockSize, kSmallBuffer, kLargeBuffer, kMinLargeAlloc,
    kRoundLarge). 5 % is Megatron-LM's allowance (megatron/training/theoretical_memory_usage.py,
    `compute_activation_memory_without_sp` x 1.05). Separate from the planner's headroom, which ranks
    layouts above 85 % / 95 % of GPU memory after the others (planner/ranking.py)."""

    host_buffer_factor: float = Field(1.5, strict=True, ge=1, le=MAX_HOST_BUFFER_FACTOR)
    """Host-memory head-room factor for offloaded states (DeepSpeed estimators'
    `additional_buffer_factor=1.5`)."""

    # ---------------------------------------------------------------- memory: the Hugging Face stack
    hf_autocast: bool = True
    """Training.framework "hf-trl" / "hf-accelerate": the forward runs under torch.autocast(bf16), as the
    Trainer, TRL and Accelerate do with bf16=True / mixed_precision "bf16" (accelerate wraps the model's
    forward). False: a loop on a 16-bit model without autocast, where PEFT's fp32 adapters run in fp32 on
    an fp32 copy of each input (4 bytes kept per input element instead of autocast's 2-byte cast). fp32
    weights train in 16-bit only under autocast and are priced so either way (costmodel.hf)."""

    hf_logits_held: bool | Literal["auto"] = "auto"
    """The training loop holds the model output, and with it the 16-bit logits (2 bytes per token x
    vocabulary), through the backward: a loop written `out = model(**batch); out.loss.backward()`, as
    Accelerate's examples are. The Trainer and TRL's SFTTrainer drop it when compute_loss returns, before
    the backward (transformers trainer.py training_step). "auto": held for "hf-accelerate", not for
    "hf-trl"."""

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
    """Achieved NCCL bus bandwidth as a fraction of the per-GPU scale-out NIC speed, for the large
    messages of gradient buckets and parameter gathers. Multi-node all-reduce rings on DGX H100 with
    eight 400 Gb/s NICs are expected to reach 400-450 GB/s bus bandwidth, i.e. the NICs' line rate
    (third-party nccl-tests validation guides, e.g. Saturn Cloud "Validating Multi-Node GPU Clusters
    with NCCL Tests"); calibrate_throughput.py's scan prefers 0.9 to 0.8 (was 0.8, an assumption)."""

    ep_nvlink_efficiency: float = Field(0.55, strict=True, ge=MIN_EFFICIENCY, le=1)
    """Share of the unidirectional NVLink bandwidth that the MoE token dispatch and combine reach
    (EP all-to-all inside the NVLink domain, both dispatchers; `nvlink_efficiency` stays the bulk
    collectives'). Measured, kernel microbenchmarks of NVIDIA's HybridEP and DeepEP at DeepSeek-V3's
    shape (4096 tokens per rank, hidden 7168, top-8, BF16; deepseek-ai/DeepEP@41cad94449628adfb1cd1cadd82aeda83d4fbf0f
    docs/README_Hybrid-EP.md, "Torch API" figures, received bytes per rank / time, the rank's own
    share included): B200, 8 ranks, dispatch 536 (HybridEP) and 619-646 GB/s (DeepEP, 32-48 SMs),
    combine 531 and 524-586 GB/s; GB200 NVL72, HybridEP with 32 SMs on 8 to 36 ranks, dispatch
    545 -> 479 GB/s, combine 569 -> 448 GB/s. Counting only the bytes that leave the rank
    ((n-1)/n of them, the convention of comm.alltoall) against 900 GB/s, that is 0.49-0.60 of NVLink,
    0.55 the middle; the same kernels' "kernel only" times give 0.66-0.71, i.e. launch, layout and
    synchronisation cost the rest. On Hopper DeepEP's own table (H800, EP 8 intranode: dispatch 153,
    combine 158 GB/s, FP8 dispatch; its README, now docs/legacy.md, calls ~160 GB/s the NVLink
    maximum) is about 0.67 of the H800's 200 GB/s unidirectional NVLink by the same count. No NCCL all-to-all figure on Blackwell was found; Megatron's all-to-all dispatcher is
    assumed no faster than the kernels written to replace it, and `python benchmarks/calibrate_2025.py
    --scan ep_nvlink_efficiency=0.8,0.7,0.6,0.55,0.5` improves monotonically from 0.8 to 0.5 over all
    rows (2025 MoE mean |log| 0.308 -> 0.264 at 0.55, 0.251 at 0.5; the two setting pairs, which
    isolate ep_a2a_overlap, 0.392 -> 0.407), so the measured 0.55 is kept rather than the scan's
    edge. Was nvlink_efficiency (0.8)."""

    latency_nvlink: float = Field(1e-5, strict=True, ge=0, le=MAX_CALL_SECONDS)
    """Fixed cost per collective call inside the NVLink domain, seconds. Assumption (NCCL small-message
    latency on NVSwitch systems is ~10 us)."""

    latency_network: float = Field(3e-5, strict=True, ge=0, le=MAX_CALL_SECONDS)
    """Fixed cost per collective call crossing the network, seconds. Measured: an 8-byte all_reduce over
    HDR InfiniBand between two A100 nodes, one GPU each, takes 19-20 us (NVIDIA/nccl-tests issue #150).
    NCCL's own cost model (NVIDIA/nccl src/graph/tuning.cc, tree/LL) prices a small all-reduce at 6.8 us
    + 2 x ((GPUs per node - 1) x 0.6 us NVLink + log2(nodes) x 5 us network): 25 us on 2 nodes of 8 GPUs,
    35 us on 4. Assumption: 30 us; `ring_hop_latency` adds the length of long rings."""

    ring_hop_latency: float = Field(5e-6, strict=True, ge=0, le=MAX_CALL_SECONDS)
    """Seconds per network step of a ring collective (a ring over N nodes takes N-1 of them per
    reduce-scatter or all-gather; the NVLink steps are negligible), paid once per call, i.e. per
    gradient bucket or per FSDP layer. Assumption: InfiniBand/RoCE switch hop and NIC latency are
    1-2 us, NCCL's per-step protocol handling a few us more; it makes large data-parallel rings
    (hundreds of nodes) pay for their length, as NCCL's ring reduce-scatter / all-gather do."""

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
    under SP). Assumption, checked on the measured runs that used it (the Megatron-LM README H100
    weak-scaling table, benchmarks/calibrate_throughput.py's scan): 0.8 to 0.95 fit them equally
    (mean |log error| over all calibrated runs 0.055 / 0.054), 0.6 worse (0.062); the lowest of the
    equals is kept."""

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
    --overlap-moe-expert-parallel-comm). Measured: on Qwen3-235B over 256 H100 with EP 32 across
    nodes the Megatron MoE Model Zoo's 1F1B A2A overlap cut the step from 19.7 s to 17.6 s
    (best_practice/qwen3/readme.md; benchmarks/calibrate_moe.py), about a third of the all-to-all
    time this model charges there, not all of it."""

    ep_a2a_overlap: bool = False
    """Megatron-Core's EP all-to-all overlap (--overlap-moe-expert-parallel-comm; Megatron-Bridge
    `comm_overlap.overlap_moe_expert_parallel_comm`): the steady-state 1F1B step runs one
    micro-batch's forward together with another's backward, so each one's dispatch and combine run
    while the other computes (megatron/core/pipeline_parallel/combined_1f1b.py). Hidden: up to
    `ep_a2a_overlap_efficiency` of the all-to-all time, and never more than the micro-batch's compute."""

    ep_a2a_overlap_efficiency: float = Field(0.45, strict=True, ge=0, le=1)
    """Share of the EP all-to-all time that `ep_a2a_overlap` can hide (the transfers share SMs and
    HBM with the compute they hide behind, and only the steady state pairs a forward with a
    backward). Calibrated on the one dev pair that isolates the setting: Qwen3-235B-A22B on 256
    H100, the same layout (tp2 pp8 vpp4 ep32), batch and FP8 recipe in Megatron-Bridge's 25.09 table
    without it (178 TFLOP/s/GPU) and its 25.11 table with it (233): 1.31x measured, which 0.45
    reproduces (0.9 would give 1.63x; `python benchmarks/calibrate_2025.py --scan
    ep_a2a_overlap_efficiency=...`, "pairs |log|"). The Qwen3-30B-A3B pair (241 -> 121 TFLOP/s with
    the overlap on) is a slowdown no hiding share can produce, so it does not inform the value."""

    moe_token_dispatcher: Literal["alltoall", "deepep"] = "alltoall"
    """How MoE tokens reach their experts' ranks. "alltoall": Megatron-Core's all-to-all dispatcher
    (--moe-token-dispatcher-type alltoall, NCCL), which sends every routed copy of a token to its
    expert's rank. "deepep": the flex dispatcher with DeepEP (--moe-token-dispatcher-type flex
    --moe-enable-deepep; deepseek-ai/DeepEP README), whose internode kernels send a token to each
    remote node once and forward it to that node's experts over NVLink, so the network carries a
    token's distinct remote nodes, not its remote copies (comm.node_dedup: 0.45 of the copies for
    Qwen3-235B's top-8 of 128 experts on EP 32 over 4 nodes). Checked against the Model Zoo's
    measured EP 32 run (benchmarks/calibrate_moe.py). Over NVLink DeepEP sends a token to each
    destination rank once (comm._deepep: 0.67 of the copies for 128 experts, top-8, on EP 8), the
    all-to-all dispatcher every routed copy."""

    # ---------------------------------------------------------------- offload
    pcie_bandwidth: float = Field(25e9, strict=True, ge=MIN_BANDWIDTH, le=MAX_BANDWIDTH)
    """Host<->GPU bandwidth per GPU, bytes/s (PCIe Gen4 x16 achieves ~25 GB/s of 32)."""

    nvme_bandwidth: float = Field(3e9, strict=True, ge=MIN_BANDWIDTH, le=MAX_BANDWIDTH)
    """NVMe read/write bandwidth available to one GPU's offloaded states, bytes/s. Measured with DeepSpeed's
    DeepNVMe (read/write GB/s): one PCIe Gen4 SSD 3.7/3.2 (deepspeedai/DeepSpeed docs/_tutorials/deepnvme.md);
    4 Gen4 SSDs on an Azure NC96ads_A100_v4 10/5 (blogs/deepspeed-gds/README.md); 4 / 8 Gen5 SSDs on an
    ND-H200-v5 27/11 / 48/26 (blogs/deepnvme/03-2025/README.md); Azure's VM pages give those 4 A100s and
    8 H200s. Read and write are charged at this one rate, so per GPU that is
    2RW/(R+W) = 1.7 to 4.2 GB/s; 3e9 assumes about one fast SSD per GPU (assumption)."""

    cpu_adam_params_per_second: float = Field(1e9, strict=True, ge=MIN_ADAM_RATE, le=MAX_ADAM_RATE)
    """Parameters per second DeepSpeedCPUAdam updates for one GPU's partition. Measured: 11.6B parameters
    in 8.2 s on one host (CPU not stated), 1.4e9/s (deepspeedai/DeepSpeed PR #735; torch Adam 56 s); on
    2 A100s with 64 EPYC 7742 cores each, offloading Qwen2.5-1.5B (0.77e9 parameters per GPU) adds 1.1 s
    per step, Adam and PCIe copies together, about 0.7e9/s (DeepSpeed blogs/zenflow-corebinding/README.md:
    ZeRO-2 240 ms, ZeRO-Offload with --bind_cores_to_rank 1365 ms). Assumption: 1e9, between the two."""

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
