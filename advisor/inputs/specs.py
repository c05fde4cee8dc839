"""The inputs: GPU, Cluster, Model (advisor.inputs.model_spec), Training (pydantic, frozen, unknown fields rejected).

Quantities accept strings with units ("80 GiB", "400 Gbit/s", "989 TFLOP/s", "8k", "70B") or
plain numbers in canonical units (bytes, bytes/s, FLOP/s, tokens, parameters); they are stored
as those plain numbers, so "80 GiB" and 85899345920 build equal objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator, model_serializer, model_validator

from ..errors import InputError
from . import presets
from .finetune import MAX_LORA_RANK, LoraTarget, Task, check_finetune, finetune_defaults
from .batch import base_batch, default_batch
from .bounds import MAX_GPUS
from .optimizers import MasterWeights, Optimizer
from .precision import Precision
from .profile import Profile, load_profile, shipped_or_file
from .stacks import HF_STACKS, check_stack, check_stack_version
from .gpu_file import is_gpu_file_name, read_gpu_file
from .text import Label, SourceText
from .fields import Bytes, ByteRate, DeviceBytes, FlopRate, Tokens, _Frozen
from .model_spec import MLA, Model

__all__ = ["GPU", "Cluster", "MLA", "Model", "Training", "Precision", "resolve_training", "part_defaults"]


# PCIe 4.0 x16, both directions (16 GT/s x 16 lanes, 128b/130b: 31.5 GB/s each way), as the L40S,
# L4 and A10 presets record it: the link of a card whose nvlink_bandwidth is omitted.
PCIE_GEN4_X16 = 64e9
MAX_FP8_SPEEDUP = 3.0
# Dense FP4 runs at 4-6x the dense 16-bit rate (B200 9 / 2.25 PFLOPS, GB300 15 / 2.5); 8x is the
# sparse FP4 figure of a part whose FP4 is 4x, the slip this catches.
MAX_FP4_SPEEDUP = 7.0


class GPU(_Frozen):
    """One accelerator model, with the system defaults of the server it usually ships in."""

    name: Label = "custom"
    memory: DeviceBytes
    """Device memory (HBM), e.g. "80 GiB". The vendor's "80GB" (or "80G") is read as 80 GiB, as the
    vendor means it: HBM stacks are binary (A100 80GB = 5 x 16 GiB; nvidia-smi shows an H100 80GB's
    81559 MiB), and the presets are written so; a plain number is bytes."""
    peak_flops: FlopRate
    """Dense BF16/FP16 tensor-core peak, without sparsity, e.g. "989 TFLOP/s"."""
    peak_flops_fp8: FlopRate | None = None
    """Dense FP8 peak without sparsity; None when the part has no FP8 tensor cores."""
    peak_flops_fp4: FlopRate | None = None
    """Dense FP4 peak without sparsity; None when the part has no FP4 tensor cores. Every part with
    FP4 tensor cores (Blackwell, MI355X) also has the block-scaled MX formats, so this also says
    whether precision "mxfp8" and "nvfp4" can run (advisor.inputs.precision)."""
    nvlink_bandwidth: ByteRate | None = None
    """Total NVLink (or Infinity Fabric) bandwidth per GPU, both directions, as vendors quote it.
    None: a card without NVLink (PCIe only). It then has no NVLink domain (nvlink_domain = 1, so every
    GPU-to-GPU transfer is priced at network_bandwidth, as the L40S preset is) and this holds its PCIe
    x16 figure for the record: 2 x host_bandwidth, else PCIE_GEN4_X16 (PCI-SIG PCIe 4.0: 16 GT/s x 16
    lanes, 128b/130b = 31.5 GB/s per direction, quoted as 64 GB/s both directions)."""
    memory_bandwidth: ByteRate | None = None
    """Device memory (HBM) bandwidth, e.g. "3.35 TB/s". None: peak_flops / 150 bytes/s, the A100's
    FLOP:byte ratio (312e12 / 2.04e12 = 153), for a part whose datasheet you do not have."""
    gpus_per_node: int = Field(8, ge=1, le=1024)
    """GPUs in one server (or compute tray)."""
    nvlink_domain: int | None = Field(None, ge=1, le=MAX_GPUS)
    """GPUs that share one NVLink/NVSwitch fabric; None means gpus_per_node (72 for NVL72 racks)."""
    network_bandwidth: ByteRate = 50e9
    """Inter-node (scale-out) bandwidth per GPU, one direction, e.g. "400 Gbit/s" for one NDR HCA per GPU."""
    host_memory: Bytes = 2 * 2**40
    host_bandwidth: ByteRate | None = None
    """CPU<->GPU bandwidth per GPU, one direction, for activation and optimizer offload (PCIe Gen5
    x16 about 64 GB/s; NVLink-C2C on Grace superchips). None: Assumptions.pcie_bandwidth."""
    """CPU memory per node, for offload decisions."""
    bf16: bool = True
    """The part has BF16 tensor cores. False on Volta (V100: FP16 only, NVIDIA V100 datasheet) and
    Turing: bf16 training is refused there (rule layout.bf16-needs-bf16-tensor-cores)."""
    flash_attention: bool = True
    """FlashAttention runs on the part. False on Volta: FlashAttention 1 and 2 need Turing or Ampere
    (sm75 / sm80) and newer (Dao-AILab/flash-attention README, "Installation and features"); the audit
    notes it (layout.flash-attention-needs-sm80)."""
    source: SourceText = "user-supplied"
    """Where the numbers come from (vendor datasheet and date)."""

    @model_serializer(mode="wrap")
    def _dump(self, handler):
        # the two flags only where they say something (False): dumps of every other part, the golden
        # files among them, stay as they were; a dump read back gets the default, True, again
        data = handler(self)
        for flag in ("bf16", "flash_attention"):
            if data.get(flag) is True:
                del data[flag]
        return data

    @model_validator(mode="after")
    def _check(self) -> "GPU":
        if self.nvlink_bandwidth is None:
            self._no_nvlink()
        if self.memory < 2**30:
            raise InputError("GPU.memory", self.memory, "at least 1 GiB", 'write the unit, e.g. "80 GiB"')
        if self.peak_flops < 1e12:
            raise InputError("GPU.peak_flops", self.peak_flops, "at least 1 TFLOP/s", 'write the unit, e.g. "989 TFLOP/s"')
        # Dense FP8 runs at 2x the dense 16-bit rate on every part with FP8 tensor cores (H100, H200,
        # L40S, B200, MI300X: 2.0-2.02x); 3x leaves room for a new part and catches the common slip,
        # the sparse FP8 figure (4x), which would price every FP8 GEMM at twice what it runs at.
        if self.peak_flops_fp8 is not None and self.peak_flops_fp8 > MAX_FP8_SPEEDUP * self.peak_flops:
            raise InputError("GPU.peak_flops_fp8", self.peak_flops_fp8,
                             f"at most {MAX_FP8_SPEEDUP:g}x peak_flops ({self.peak_flops:.4g} FLOP/s)",
                             "the dense FP8 peak, without sparsity (2x the dense 16-bit peak on current parts)")
        if self.peak_flops_fp4 is not None and self.peak_flops_fp4 > MAX_FP4_SPEEDUP * self.peak_flops:
            raise InputError("GPU.peak_flops_fp4", self.peak_flops_fp4,
                             f"at most {MAX_FP4_SPEEDUP:g}x peak_flops ({self.peak_flops:.4g} FLOP/s)",
                             "the dense FP4 peak, without sparsity (4-6x the dense 16-bit peak on Blackwell)")
        return self

    def _no_nvlink(self) -> None:
        """A PCIe card (nvlink_bandwidth omitted): one GPU per NVLink domain, the PCIe figure recorded."""
        if self.nvlink_domain not in (None, 1):
            raise InputError("GPU.nvlink_bandwidth", None, f"the NVLink bandwidth per GPU, since nvlink_domain is "
                             f"{self.nvlink_domain}", "omit nvlink_domain for a PCIe card without NVLink")
        pcie = 2 * self.host_bandwidth if self.host_bandwidth is not None else PCIE_GEN4_X16
        object.__setattr__(self, "nvlink_bandwidth", pcie)
        object.__setattr__(self, "nvlink_domain", 1)

    @classmethod
    def from_file(cls, path: str | Path) -> "GPU":
        """A GPU from a TOML or JSON file of its fields (schemas/gpu.schema.json), for a part without
        a preset; InputError naming the file and the field when it is not one."""
        return cls(**read_gpu_file(path))


def _gpu_from(value: Any) -> Any:
    if isinstance(value, Path) or isinstance(value, str) and is_gpu_file_name(value):
        return GPU.from_file(value)
    if isinstance(value, str):
        return GPU(**presets.gpu(value, field="Cluster.gpu"))
    return value


def _profile_from(value: Any) -> Any:
    if isinstance(value, str):
        return shipped_or_file(value)
    if isinstance(value, Path):
        return load_profile(value)
    return value


class Cluster(_Frozen):
    """A set of identical GPUs: `Cluster(gpu="H100-SXM-80GB", gpus=64)`.

    Omitted node and network fields come from the GPU preset's server defaults.
    """

    gpu: Annotated[GPU, BeforeValidator(_gpu_from)]
    """A GPU preset name (see `advisor presets`), a `GPU(...)`, or the path of a TOML or JSON file of
    GPU fields (a `Path`, or a name ending in .toml or .json)."""
    gpus: int = Field(ge=1, le=MAX_GPUS)
    """Total number of GPUs (the world size)."""
    gpus_per_node: int | None = Field(None, ge=1, le=1024)
    nvlink_domain: int | None = Field(None, ge=1, le=MAX_GPUS)
    """GPUs sharing one NVLink domain; defaults to the GPU preset's (gpus_per_node, or 72 for NVL72)."""
    intra_node_bandwidth: ByteRate | None = None
    """Per-GPU NVLink bandwidth (total, both directions); defaults to the GPU's."""
    inter_node_bandwidth: ByteRate | None = None
    """Per-GPU scale-out bandwidth, one direction; defaults to the GPU preset's."""
    host_memory_per_node: Bytes | None = None
    """CPU memory per node, for offload; defaults to the GPU preset's reference server."""
    nvme_per_node: Bytes | None = None
    """Local NVMe capacity per node for ZeRO-Infinity offload, e.g. "30.72 TB" for a DGX H100's eight
    3.84 TB data drives (NVIDIA DGX BasePOD reference architecture, core components). None: not
    checked (the trace says so when a layout offloads to NVMe)."""
    profile: Annotated[Profile | None, BeforeValidator(_profile_from)] = None
    """Measured kernel efficiencies of this GPU and host (`advisor measure` writes them): a Profile,
    a profile JSON file's path, or a shipped profile's name. None: the shipped H200 measurement,
    rescaled to the GPU's datasheet when it is another part (the estimate says "derived")."""

    @model_validator(mode="after")
    def _fill_defaults(self) -> "Cluster":
        g = self.gpu
        per_node = self.gpus_per_node or g.gpus_per_node
        domain = self.nvlink_domain or g.nvlink_domain or per_node
        object.__setattr__(self, "gpus_per_node", per_node)
        object.__setattr__(self, "nvlink_domain", domain)
        object.__setattr__(self, "intra_node_bandwidth", self.intra_node_bandwidth or g.nvlink_bandwidth)
        object.__setattr__(self, "inter_node_bandwidth", self.inter_node_bandwidth or g.network_bandwidth)
        object.__setattr__(self, "host_memory_per_node", self.host_memory_per_node or g.host_memory)
        if self.gpus > per_node and self.gpus % per_node:
            raise InputError(
                "Cluster.gpus", self.gpus, f"a multiple of gpus_per_node ({per_node}) when it spans several nodes",
                f"gpus({self.gpus}) % gpus_per_node({per_node}) = {self.gpus % per_node}",
            )
        if domain % per_node and per_node % domain:
            raise InputError(
                "Cluster.nvlink_domain", domain, f"a divisor or a multiple of gpus_per_node ({per_node})",
            )
        return self

    @property
    def nodes(self) -> int:
        return max(1, -(-self.gpus // self.gpus_per_node))

    @property
    def gpus_in_node(self) -> int:
        """GPUs of this job per node: gpus_per_node, or all of them when the job is smaller than a
        node (it then has that node's whole host memory and NVMe)."""
        return min(self.gpus, self.gpus_per_node)


class Training(_Frozen):
    """What one training step looks like. Omitted fields are resolved against the model."""

    seq_len: Tokens | None = Field(None, ge=1, le=1 << 24)
    """Tokens per sequence: 4096, "8k", "128k". None: the model's pretraining context."""
    global_batch_size: int | None = Field(None, ge=1, le=1 << 24)
    """Sequences per optimizer step. None: chosen for the cluster between 4M tokens (Llama 2, §2.2) and
    16M (Llama 3 405B, §3.4.1) so that its data-parallel degrees split it (inputs.batch); fine-tuning 128."""
    micro_batch_size: int | None = Field(None, ge=1, le=1 << 16)
    """Sequences per GPU per forward pass; None lets the planner choose."""
    precision: Precision = "bf16"
    optimizer: Optimizer = "adam"
    """The optimizer and its state per trained parameter (advisor.inputs.optimizers): "adam" / "adamw" two
    moments (torch.optim); "adamw-8bit" / "paged-adamw-8bit" bitsandbytes' 8-bit blockwise states,
    2.03 bytes (paged: in CUDA unified memory); "adafactor" a factored second moment (transformers'
    Adafactor, about 0 bytes); "sgd" none (momentum 0); "lion" one moment."""
    master_weights: MasterWeights = "fp32"
    """"fp32": an fp32 master copy of the trained weights, 4 bytes per parameter, with fp32 moments (Megatron's
    and DeepSpeed's mixed-precision optimizers; autocast training of an fp32 model, whose weights are that
    copy; PEFT's adapters, kept in fp32 by default); "none": 16-bit weights, gradients and moments and no
    copy (the Hugging Face Trainer on a model loaded in bf16; PEFT with autocast_adapter_dtype=False)."""
    flash_attention: bool = True
    """Attention kernels that never materialise the s×s score matrix (FlashAttention)."""
    cuda_graphs: bool = False
    """The step replays captured CUDA graphs (Megatron-Core --cuda-graph-impl / --enable-cuda-graph,
    torch.cuda.graphs): the host launches a graph, not each kernel, so the host-issue floor of the
    estimate (costmodel.kernels.host_layer_seconds) is gone. False: kernels are launched one by one."""
    packed_sample_tokens: int | None = Field(None, ge=1, le=1 << 24)
    """Sequence packing: the mean tokens of one sample packed into each seq_len sequence (SFT data
    packed with per-sample attention: FlashAttention varlen, Transformer Engine's THD format, NeMo /
    Megatron-Bridge packed sequences). A token then attends its own sample only, (n + 1)/2 keys on
    average; None: no packing, or packing with attention across samples (pretraining)."""
    task: Task = "pretrain"
    """"pretrain" or "sft" train every weight; "lora" freezes the 16-bit base and trains rank-r
    adapters; "qlora" also stores the frozen base in 4-bit NF4 (advisor.inputs.finetune)."""
    lora_rank: int | None = Field(None, ge=1, le=MAX_LORA_RANK)
    """Adapter rank r (LoRA and QLoRA only); None: 16."""
    lora_alpha: int | None = Field(None, ge=1, le=1 << 20)
    """Adapter scale numerator (output scaled by alpha / r); None: 2 x rank. No effect on cost."""
    lora_targets: tuple[LoraTarget, ...] | None = None
    """Linears that get an adapter, either as Megatron's fused linears ("qkv", "proj", "fc1", "fc2") or as
    PEFT's target_modules ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", or
    "all-linear" alone); None: every linear of the block (PEFT's seven for the Hugging Face stacks, the
    four fused ones otherwise)."""
    lora_dropout: float | None = Field(None, ge=0, lt=1)
    """PEFT's lora_dropout, the probability of the dropout on each adapter's input (LoRA and QLoRA only);
    above 0 each adapter keeps a 1-byte mask and its own copy of its input for the backward
    (peft tuners/lora/layer.py). None: 0, PEFT's default."""
    memory_headroom: float | None = Field(None, ge=0, lt=1)
    """Share of each GPU's memory a layout must leave free by the estimate (0.1: use at most 90%); the
    planner ranks layouts that leave less after all others and the audit warns (advice.memory-tight).
    None: the memory estimate's measured error, 4.1% (advisor.inputs.uncertainty.MEMORY_ERROR)."""
    framework: str | None = None
    """The training stack the team runs, as teams name it (advisor.inputs.stacks.STACKS): "megatron-core",
    "megatron-bridge", "nemo", "megatron-lm", "megatron-deepspeed", "deepspeed", "hf-trl", "hf-accelerate",
    "torchtitan". rules/stated-framework.toml turns it into the layouts the planner may use. None: the
    advisor chooses the framework freely (and the trace says so)."""
    framework_version: str | None = None
    """The stated stack's release, e.g. "core_v0.16.1", "24.07", "0.16.1" (a fact the rules may read);
    only with `framework`."""

    @field_validator("framework", mode="before")
    @classmethod
    def _check_stack(cls, value: object) -> object:
        return check_stack(value)

    @model_validator(mode="after")
    def _check_finetune(self) -> "Training":
        check_finetune(self.task, self.lora_rank, self.lora_alpha, self.lora_targets, self.lora_dropout)
        if self.master_weights == "none" and self.precision == "fp16":
            raise InputError("Training.master_weights", "none", "'fp32' with precision 'fp16'",
                             "fp16 training keeps an fp32 master copy (its loss-scaled gradients underflow "
                             "16-bit weights); pure 16-bit training is bf16")
        check_stack_version(self.framework_version, self.framework)
        return self

    @property
    def frozen_base(self) -> bool:
        """The base weights get no gradients and no optimizer states (LoRA, QLoRA)."""
        return self.task in ("lora", "qlora")


# Default sequence length for a model that states none: 4096 (Llama 2's pretraining context).
DEFAULT_SEQ_LEN = 4096
# Fine-tuning defaults (task other than "pretrain"): 4096 tokens, the packed length of NeMo 24.07's
# SFT and LoRA performance rows ("Finetuning" in
# NVIDIA/NeMo@8e3d65dcfe3504689bfc5b6e67d502780aacad41 docs/source/performance/performance_summary.md),
# and 128 sequences, the global batch of
# the alignment-handbook recipes (github:huggingface/alignment-handbook@925acdfe4b2b4e38c3dabd1851bc418f0b656351
# recipes/zephyr-7b-beta/sft/config_full.yaml: 8 GPUs x 16) and of Alpaca (tatsu-lab/stanford_alpaca README).
FINETUNE_SEQ_LEN = 4096
FINETUNE_BATCH = 128


def _model_notes(model: Model) -> list[str]:
    """What the cost model approximates for this model's layer kinds, for the trace."""
    notes = []
    if model.parallel_mixers:
        notes.append("model: each parallel Mamba-2 + attention pair (M*) is priced as the two branches summed "
                     "(parameters, FLOPs, each branch's stored tensors) with one pre-norm and one stored input; "
                     "a fused TP all-reduce of the two branches is not assumed")
    if model.hybrid_pattern is not None and "G" in model.hybrid_pattern:
        notes.append("model: Gated DeltaNet layers (G) are priced as linear-attention mixers: the chunked delta "
                     "rule's O(s) FLOPs and per-token activations, Mamba-style TP and all-to-all CP")
    return notes


def resolve_training(model: Model, training: Training | None, cluster: Cluster | None = None
                     ) -> tuple[Training, list[str]]:
    """Fill seq_len and global_batch_size when omitted; returns the notes saying what was assumed. With
    the `cluster`, a pretraining batch is chosen for its GPU count (inputs.batch), otherwise it is 4M
    tokens, and its GPU decides the precision and FlashAttention when omitted (part_defaults)."""
    training = training or Training()
    updates, part_notes = part_defaults(cluster.gpu, training) if cluster is not None else ({}, [])
    notes: list[str] = _model_notes(model) + part_notes
    gpus = cluster.gpus if cluster is not None else None
    tuning = training.task != "pretrain"
    if training.seq_len is None and tuning:
        seq = min(model.seq_len or FINETUNE_SEQ_LEN, FINETUNE_SEQ_LEN)
        updates["seq_len"] = seq
        notes.append(f"training.seq_len not given: {seq} tokens for {training.task} (NeMo 24.07 fine-tuning "
                     "rows pack SQuAD to 4096; at most the model's context)")
    elif training.seq_len is None:
        seq = model.seq_len or DEFAULT_SEQ_LEN
        source = f"the pretraining context of {model.name}" if model.seq_len else "the default (Llama 2's context)"
        updates["seq_len"] = seq
        notes.append(f"training.seq_len not given: {seq} tokens, {source}")
    seq = updates.get("seq_len", training.seq_len)
    ft_updates, ft_notes = finetune_defaults(training.task, training.lora_rank, training.lora_alpha,
                                             training.lora_targets, training.framework in HF_STACKS)
    updates.update(ft_updates)
    notes.extend(ft_notes)
    rank = updates.get("lora_rank", training.lora_rank)
    if rank is not None and rank > model.hidden:
        raise InputError("Training.lora_rank", rank, f"at most the model's hidden size ({model.hidden})",
                         "a rank at the width of the layer is no low-rank adapter")
    if training.global_batch_size is None and tuning:
        updates["global_batch_size"] = FINETUNE_BATCH
        notes.append(f"training.global_batch_size not given: {FINETUNE_BATCH} sequences for {training.task} "
                     "(the alignment-handbook and Alpaca recipes' global batch)")
    elif training.global_batch_size is None:
        updates["global_batch_size"], note = _pretraining_batch(seq, gpus, training.micro_batch_size or 1)
        notes.append(note)
    return (training.model_copy(update=updates) if updates else training), notes


def part_defaults(gpu: GPU, training: Training) -> tuple[dict[str, Any], list[str]]:
    """(the fields to set, the notes) for what the GPU decides when `training` leaves it out: fp16 on a
    part without BF16 tensor cores (GPU.bf16 False: Volta, Turing; the audit refuses bf16 there,
    layout.bf16-needs-bf16-tensor-cores) and the unfused attention where FlashAttention does not run
    (GPU.flash_attention False: Volta; layout.flash-attention-needs-sm80). A stated value stays as
    stated, and the audit judges it."""
    updates: dict[str, Any] = {}
    notes: list[str] = []
    given = training.model_fields_set
    if "precision" not in given and not gpu.bf16:
        updates["precision"] = "fp16"
        notes.append(f"training.precision not given: fp16, as {gpu.name} has no BF16 tensor cores")
    if "flash_attention" not in given and not gpu.flash_attention:
        updates["flash_attention"] = False
        notes.append(f"training.flash_attention not given: off, as FlashAttention does not run on {gpu.name} "
                     "(it needs Turing or Ampere and newer): attention is timed and stored unfused")
    return updates, notes


def _pretraining_batch(seq: int, gpus: int | None, mbs: int = 1) -> tuple[int, str]:
    """(sequences, the trace's note) of the default pretraining batch (inputs.batch); `mbs`: a stated
    micro-batch, which the batch's share per data-parallel rank must be a multiple of."""
    base = base_batch(seq)
    head = "training.global_batch_size not given: "
    if gpus is None:
        return base, f"{head}{base} sequences = 4M tokens / {seq} (Llama 2 pretraining batch, Touvron et al. 2023 §2.2)"
    chosen = default_batch(gpus, seq, mbs)
    splits = (f"every data-parallel degree of {gpus} GPUs divides it" if chosen.divides == gpus else
              f"a multiple of {chosen.divides}, the largest divisor of {gpus} GPUs the range allows")
    if mbs > 1:
        splits += f", times the micro-batch of {mbs}"
    grown = "at least one sequence per GPU; " if chosen.sequences >= gpus > base else ""
    return chosen.sequences, (
        f"{head}{chosen.sequences} sequences of {seq} ({chosen.sequences * seq / 2**20:.3g}M tokens), chosen for "
        f"{gpus} GPUs between 4M tokens (Llama 2, Touvron et al. 2023 §2.2; {base} sequences) and 16M (Llama 3 "
        f"405B, arXiv 2407.21783 §3.4.1): {grown}{splits}")
