"""The inputs: GPU, Cluster, Model, Training (pydantic, frozen, unknown fields rejected).

Quantities accept strings with units ("80 GiB", "400 Gbit/s", "989 TFLOP/s", "8k", "70B") or
plain numbers in canonical units (bytes, bytes/s, FLOP/s, tokens, parameters); they are stored
as those plain numbers, so "80 GiB" and 85899345920 build equal objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import InputError
from . import presets
from .architecture import HYBRID_KINDS, count_parameters
from .finetune import MAX_LORA_RANK, LoraTarget, Task, check_finetune, finetune_defaults
from .bounds import MAX_DIM, MAX_EXPERTS, MAX_GPUS, MAX_LAYERS, MAX_PARAMS
from .hf import model_fields_from_hf_config
from .optimizers import MasterWeights, Optimizer
from .precision import Precision
from .profile import Profile, load_profile, shipped_or_file
from .screen import screen
from .stacks import HF_STACKS, check_stack, check_stack_version
from .gpu_file import is_gpu_file_name, read_gpu_file
from .text import Label, SourceText
from .units import to_bytes, to_bytes_per_second, to_count, to_device_memory, to_flops_per_second, to_tokens

__all__ = ["GPU", "Cluster", "MLA", "Model", "Training", "Precision", "resolve_training"]

def _unit(convert, field: str):
    # The error names the field being validated (GPU.nvlink_bandwidth), `field` when unknown.
    return BeforeValidator(lambda v, info: convert(v, f"{info.config.get('title')}.{info.field_name}"
                                                 if info.field_name else field))


Bytes = Annotated[int, _unit(to_bytes, "memory")]
# A GPU's own memory: the vendor's "80GB" is 80 GiB (units.to_device_memory says why and where from).
DeviceBytes = Annotated[int, _unit(to_device_memory, "memory")]
ByteRate = Annotated[float, _unit(to_bytes_per_second, "bandwidth")]
FlopRate = Annotated[float, _unit(to_flops_per_second, "peak_flops")]
Tokens = Annotated[int, _unit(to_tokens, "seq_len")]
Count = Annotated[int, _unit(to_count, "params")]


# PCIe 4.0 x16, both directions (16 GT/s x 16 lanes, 128b/130b: 31.5 GB/s each way), as the L40S,
# L4 and A10 presets record it: the link of a card whose nvlink_bandwidth is omitted.
PCIE_GEN4_X16 = 64e9
MAX_FP8_SPEEDUP = 3.0
# Dense FP4 runs at 4-6x the dense 16-bit rate (B200 9 / 2.25 PFLOPS, GB300 15 / 2.5); 8x is the
# sparse FP4 figure of a part whose FP4 is 4x, the slip this catches.
MAX_FP4_SPEEDUP = 7.0


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    @model_validator(mode="before")
    @classmethod
    def _screen(cls, data: Any) -> Any:
        return screen(cls, data)


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
    source: SourceText = "user-supplied"
    """Where the numbers come from (vendor datasheet and date)."""

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


class MLA(_Frozen):
    """Multi-head latent attention (DeepSeek-V2/V3) dimensions, as in the Hugging Face config."""

    q_lora_rank: int | None = Field(None, ge=1, le=MAX_DIM)
    kv_lora_rank: int = Field(ge=1, le=MAX_DIM)
    qk_nope_head_dim: int = Field(ge=1, le=MAX_DIM)
    qk_rope_head_dim: int = Field(ge=1, le=MAX_DIM)
    v_head_dim: int = Field(ge=1, le=MAX_DIM)


class Model(_Frozen):
    """A decoder-only transformer: dense or mixture-of-experts, MHA / GQA / MLA attention, or a
    hybrid stack of Mamba-2 or Gated DeltaNet, attention, MLP and MoE layers (`hybrid_pattern`,
    Nemotron-H, Qwen3-Next).

    `params` is the total parameter count. When omitted it is computed from the architecture;
    when given it must agree with the architecture within 3 %.
    """

    name: Label = "custom"
    layers: int = Field(ge=1, le=MAX_LAYERS)
    hidden: int = Field(ge=1, le=MAX_DIM)
    heads: int = Field(ge=1, le=MAX_DIM)
    kv_heads: int | None = Field(None, ge=1, le=MAX_DIM)
    """Key/value heads (GQA query groups); None means heads (plain multi-head attention)."""
    head_dim: int | None = Field(None, ge=1, le=MAX_DIM)
    """Per-head size; None means hidden / heads (then heads must divide hidden)."""
    ffn_hidden: int = Field(ge=1, le=MAX_DIM * 8)
    """Dense MLP inner size (per expert for MoE models unless moe_ffn_hidden is set)."""
    vocab: int = Field(ge=1, le=MAX_DIM * 8)
    activation: Literal["swiglu", "gelu"] = "swiglu"
    tied_embeddings: bool = False
    position_embedding: Literal["rope", "learned", "alibi", "none"] = "rope"
    """"learned" adds a max_position × hidden table (GPT-2/3); RoPE and ALiBi add no parameters;
    "none": no position encoding (Nemotron-H, whose Mamba layers carry the order; Megatron
    --position-embedding-type none)."""
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    bias: bool = False
    """Linear layers carry biases (GPT-2/3, BLOOM style)."""
    qkv_bias: bool = False
    """Only the QKV projection has a bias (Qwen2 style)."""
    qk_norm: bool = False
    """A norm over each query and key head before attention (Qwen3's q_norm and k_norm; Megatron-LM
    --qk-layernorm): 2 x head_dim weights per layer (x2 for LayerNorm's bias), replicated over TP."""
    embedding_norm: bool = False
    """A norm right after the token embedding (BLOOM's word_embeddings_layernorm)."""
    experts: int = Field(1, ge=1, le=MAX_EXPERTS)
    """Routed experts per MoE layer; 1 means a dense model."""
    experts_per_token: int = Field(1, ge=1, le=MAX_EXPERTS)
    """Routed experts each token visits (top-k)."""
    shared_experts: int = Field(0, ge=0, le=1024)
    moe_ffn_hidden: int | None = Field(None, ge=1, le=MAX_DIM * 8)
    """Inner size of one expert; None means ffn_hidden."""
    dense_layers: int = Field(0, ge=0, le=MAX_LAYERS)
    """Leading layers that use the dense MLP in an MoE model (DeepSeek-V3: 3)."""
    moe_layer_freq: int = Field(1, ge=1, le=1000)
    """Every n-th layer after the dense ones is MoE (1 = all of them)."""
    router_groups: int = Field(1, ge=1, le=65_536)
    """Equal groups of routed experts for group-limited routing (DeepSeek-V3: 8, one per node of its
    EP 64; HF n_group, Megatron --moe-router-num-groups); 1: no group limit."""
    router_group_topk: int | None = Field(None, ge=1, le=65_536)
    """Groups a token picks its experts from (DeepSeek-V3: 4, so at most 4 nodes; HF topk_group,
    Megatron --moe-router-group-topk); None: every group."""
    sliding_window: int | None = Field(None, ge=1, le=1 << 24)
    """Tokens a windowed attention layer attends (Mistral 7B v0.1, Gemma 2 / 3, GPT-OSS; HF
    `sliding_window`); None: every layer attends the whole context."""
    attention_chunk: int | None = Field(None, ge=1, le=1 << 24)
    """Chunked local attention (Llama 4's RoPE layers; HF `attention_chunk_size`): a layer attends
    the keys of its own chunk of this many tokens only. Exclusive with sliding_window."""
    global_attention_every: int = Field(0, ge=0, le=MAX_LAYERS)
    """With sliding_window or attention_chunk: every n-th layer (layers n-1, 2n-1, ...) attends the
    whole context and the others locally (Gemma 3: 6, GPT-OSS and Gemma 2: 2, Llama 4: 4); 0: every
    layer is local."""
    attention_sinks: bool = False
    """A learned sink logit per head in each layer's softmax (GPT-OSS; HF `sinks`): heads parameters
    per layer, no GEMM."""
    router_score: Literal["softmax", "sigmoid"] = "softmax"
    """How the router scores experts: "softmax" (Mixtral, Qwen3-MoE) or "sigmoid" (DeepSeek-V3, HF
    scoring_func; Megatron --moe-router-score-function)."""
    router_expert_bias: bool = False
    """Aux-loss-free balancing with a learned per-expert bias added to the routing scores (DeepSeek-V3,
    HF topk_method "noaux_tc"; Megatron --moe-router-enable-expert-bias)."""
    router_topk_scale: float | None = Field(None, gt=0, le=1000)
    """Factor applied to the top-k routing weights (DeepSeek-V3: 2.5, HF routed_scaling_factor;
    Megatron --moe-router-topk-scaling-factor); None: 1."""
    rope_theta: float | None = Field(None, gt=0, le=1e12)
    """RoPE base frequency (HF rope_theta; Llama 3: 500000, Mixtral and Qwen2.5: 1000000); None: 10000,
    the RoFormer paper's and the frameworks' default (Megatron-LM --rotary-base). Unused without RoPE."""
    rope_scaling: Literal["none", "llama3", "yarn", "linear", "dynamic", "longrope"] = "none"
    """RoPE frequency scaling of the released model (HF rope_scaling.rope_type): "llama3" is Llama 3.1's
    (Megatron --use-rope-scaling), "yarn" YaRN (DeepSeek-V3, GPT-OSS; Megatron --rope-type yarn for
    MLA), "linear" position interpolation (Gemma 3), "dynamic" NTK and "longrope" (Phi-3 128k): the
    last three have no Megatron-LM flag in the pinned releases (audit rule megatron.rope-scaling-kind)."""
    rope_scaling_factor: float | None = Field(None, gt=0, le=10_000)
    """rope_scaling.factor (Llama 3.1: 8, DeepSeek-V3: 40); set exactly when rope_scaling is not "none"."""
    mla: MLA | None = None
    dsa_indexer_heads: int | None = Field(None, ge=1, le=MAX_DIM)
    """DeepSeek Sparse Attention (DeepSeek-V3.2, arXiv:2512.02556 §2.1): heads of the lightning indexer
    that scores every earlier token for each query (HF index_n_heads, Megatron --dsa-indexer-n-heads;
    DeepSeek-V3.2: 64). Set with dsa_indexer_head_dim and dsa_topk, on an MLA model with q_lora_rank;
    None: dense attention."""
    dsa_indexer_head_dim: int | None = Field(None, ge=1, le=MAX_DIM)
    """Channels per indexer head (HF index_head_dim, Megatron --dsa-indexer-head-dim; DeepSeek-V3.2: 128)."""
    dsa_topk: int | None = Field(None, ge=1, le=1 << 24)
    """Keys each query attends: the indexer's top-k (HF index_topk, Megatron --dsa-indexer-topk;
    DeepSeek-V3.2: 2048)."""
    moe_latent_size: int | None = Field(None, ge=1, le=MAX_DIM)
    """LatentMoE (Nemotron 3 Super): the routed experts work in a latent space of this width; each MoE
    layer projects a token down (hidden -> latent) before dispatch and back up after combine, shared by
    its experts, while the router and the shared experts stay at hidden width (HF moe_latent_size,
    Megatron --moe-latent-size, megatron/core/transformer/moe/moe_layer.py fc1_latent_proj /
    fc2_latent_proj). None: experts at hidden width."""
    hybrid_pattern: str | None = None
    """A hybrid stack, one character per layer as Megatron-Core's --hybrid-override-pattern
    (megatron/core/ssm/mamba_hybrid_layer_allocation.py): "M" a Mamba-2 mixer, "G" a Gated DeltaNet
    mixer (Megatron-LM main's hybrid_layer_allocation.py symbol; the gdn_* fields), "*" self-attention,
    "-" a dense MLP, "E" an MoE MLP, each with its own pre-norm and residual (Nemotron-H 8B:
    "M-M-M-M*-..."; HF `hybrid_override_pattern`; Qwen3-Next's 48 decoder layers are 96 characters,
    "GEGEGE*E" twelve times). Its length is `layers`. One kind of linear mixer per model (M or G).
    None: every layer is attention + MLP."""
    mamba_heads: int | None = Field(None, ge=1, le=MAX_DIM)
    """Mamba-2 heads (HF mamba_num_heads, Megatron --mamba-num-heads); d_inner = mamba_heads x
    mamba_head_dim (= expand x hidden)."""
    mamba_head_dim: int | None = Field(None, ge=1, le=MAX_DIM)
    """Channels per Mamba-2 head (HF mamba_head_dim; Megatron --mamba-head-dim, default 64)."""
    mamba_state: int | None = Field(None, ge=1, le=MAX_DIM)
    """SSM state size d_state (HF ssm_state_size; Megatron --mamba-state-dim, default 128)."""
    mamba_groups: int = Field(8, ge=1, le=MAX_DIM)
    """B/C groups (HF n_groups; Megatron --mamba-num-groups). Default 8, Megatron-Core's
    (NVIDIA/Megatron-LM@55ac7082517c3878ae653c07c09c534b8aed49f6 megatron/core/transformer/
    transformer_config.py L852 mamba_num_groups; L846 mamba_state_dim 128, L849 mamba_head_dim 64)."""
    mamba_conv: int = Field(4, ge=1, le=1024)
    """Causal depthwise conv1d kernel width d_conv (HF conv_kernel). Default 4, Megatron-Core's
    MambaMixer d_conv=4 (@55ac7082 megatron/core/ssm/mamba_mixer.py L149), which Megatron has no flag for."""
    mamba_chunk: int = Field(128, ge=1, le=1 << 16)
    """SSD chunk length Q of the chunked scan (HF chunk_size). Default 128, MambaMixer chunk_size=128
    (@55ac7082 mamba_mixer.py L164)."""
    gdn_key_heads: int | None = Field(None, ge=1, le=MAX_DIM)
    """Query/key heads of a Gated DeltaNet layer ("G" of hybrid_pattern; HF linear_num_key_heads,
    Megatron --linear-num-key-heads; Qwen3-Next: 16)."""
    gdn_value_heads: int | None = Field(None, ge=1, le=MAX_DIM)
    """Value (and output-gate) heads of a Gated DeltaNet layer, a multiple of gdn_key_heads (HF
    linear_num_value_heads; Qwen3-Next: 32)."""
    gdn_key_head_dim: int = Field(128, ge=1, le=MAX_DIM)
    """Channels per query/key head (HF linear_key_head_dim). Default 128, Qwen3NextConfig's and
    Megatron-Core's (NVIDIA/Megatron-LM@55ac7082517c3878ae653c07c09c534b8aed49f6
    megatron/core/transformer/transformer_config.py linear_key_head_dim)."""
    gdn_value_head_dim: int = Field(128, ge=1, le=MAX_DIM)
    """Channels per value head (HF linear_value_head_dim). Default 128, as gdn_key_head_dim."""
    gdn_conv: int = Field(4, ge=1, le=1024)
    """Causal depthwise conv1d kernel width over q, k, v (HF linear_conv_kernel_dim). Default 4,
    as Megatron-Core's linear_conv_kernel_dim."""
    gdn_chunk: int = Field(64, ge=1, le=1 << 16)
    """Chunk length of the chunked gated delta rule (Yang et al. 2024, arXiv:2412.06464 §3.3).
    Default 64, the chunk_size of transformers' torch_chunk_gated_delta_rule (huggingface/transformers@
    043bb8dde14aae1a56b84cd230737cf5d0877912 src/transformers/models/qwen3_next/modular_qwen3_next.py)."""
    parallel_mixers: bool = False
    """Each "M*" pair of hybrid_pattern is one mixer: the Mamba-2 mixer and self-attention read the same
    pre-norm output in parallel and their outputs are summed (Falcon-H1, Zuo et al. 2025,
    arXiv:2507.22448 §2; HF FalconH1DecoderLayer). Priced as the two branches summed (parameters,
    FLOPs, each branch's stored tensors) with one pre-norm, one stored layer input and one norm output
    for the pair. The pattern is then "M*" pairs, each optionally followed by "-" or "E"."""
    attention_output_gate: bool = False
    """Gated attention (Qiu et al. 2025, arXiv:2505.06708; Qwen3-Next): q_proj also emits a sigmoid
    gate of heads x head_dim channels that multiplies the attention output before o_proj, so q_proj is
    twice as wide (Megatron-Core --attention-output-gate)."""
    shared_expert_gate: bool = False
    """A sigmoid gate (hidden -> 1) scales the shared experts' output in every MoE layer (Qwen2-MoE,
    Qwen3-Next: HF shared_expert_gate; Megatron-Core --moe-shared-expert-gate): hidden parameters per
    MoE layer."""
    rotary_percent: float = Field(1.0, gt=0, le=1)
    """Share of each head's channels RoPE rotates (HF partial_rotary_factor; Megatron --rotary-percent):
    Qwen3-Next 0.25. It changes no parameter and no GEMM, so only the exports carry it."""
    mtp_layers: int = Field(0, ge=0, le=16)
    """Multi-token-prediction modules (DeepSeek-V3: 1); counted in params_with_mtp, not params. In a hybrid
    stack each is an attention layer then an MoE (or MLP) layer (Nemotron 3 Super: "*E")."""
    seq_len: int | None = Field(None, ge=1, le=1 << 24)
    """Context length the model was (pre)trained at; the default Training.seq_len."""
    max_position: int | None = Field(None, ge=1, le=1 << 24)
    """Longest position the model supports (max_position_embeddings)."""
    params: Count | None = None
    """Total parameters; computed from the architecture when omitted."""
    source: SourceText = "user-supplied"

    @model_validator(mode="after")
    def _check(self) -> "Model":
        kv = self.kv_heads or self.heads
        object.__setattr__(self, "kv_heads", kv)
        if self.head_dim is None:
            if self.hidden % self.heads:
                raise InputError(
                    "Model.hidden", self.hidden, f"a multiple of heads ({self.heads}) when head_dim is not given",
                    f"hidden({self.hidden}) % heads({self.heads}) = {self.hidden % self.heads} (Megatron M7)",
                )
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        if self.heads % kv:
            raise InputError("Model.kv_heads", kv, f"a divisor of heads ({self.heads})",
                             f"heads({self.heads}) % kv_heads({kv}) = {self.heads % kv}")
        if self.experts_per_token > self.experts:
            raise InputError("Model.experts_per_token", self.experts_per_token, f"at most experts ({self.experts})")
        if self.experts == 1 and (self.shared_experts or self.dense_layers or self.moe_ffn_hidden):
            raise InputError("Model.experts", self.experts, "more than 1 when MoE fields are set",
                             "shared_experts, dense_layers and moe_ffn_hidden describe an MoE model")
        if self.router_groups > 1 and self.experts % self.router_groups:
            raise InputError("Model.router_groups", self.router_groups, f"a divisor of experts ({self.experts})",
                             f"experts({self.experts}) % router_groups({self.router_groups}) = "
                             f"{self.experts % self.router_groups}: groups are equal-sized")
        if self.router_group_topk is not None and self.router_group_topk > self.router_groups:
            raise InputError("Model.router_group_topk", self.router_group_topk,
                             f"at most router_groups ({self.router_groups})")
        if (self.rope_scaling == "none") != (self.rope_scaling_factor is None):
            raise InputError("Model.rope_scaling_factor", self.rope_scaling_factor,
                             "a factor exactly when rope_scaling is not 'none'" if self.rope_scaling == "none"
                             else f"the factor of the {self.rope_scaling!r} scaling")
        if self.dense_layers >= self.layers and self.experts > 1:
            raise InputError("Model.dense_layers", self.dense_layers, f"fewer than layers ({self.layers})")
        if self.position_embedding == "learned" and not (self.max_position or self.seq_len):
            raise InputError("Model.max_position", None, "a length when position_embedding is 'learned'",
                             "the learned position table has max_position rows")
        if self.sliding_window is not None and self.attention_chunk is not None:
            raise InputError("Model.attention_chunk", self.attention_chunk, "None when sliding_window is set",
                             "a layer attends either a sliding window or its chunk")
        if self.global_attention_every and self.sliding_window is None and self.attention_chunk is None:
            raise InputError("Model.global_attention_every", self.global_attention_every,
                             "0 unless sliding_window or attention_chunk is set", "it says which layers are not local")
        if self.moe_ffn_hidden is None and self.experts > 1:
            object.__setattr__(self, "moe_ffn_hidden", self.ffn_hidden)
        if self.moe_latent_size is not None and self.experts == 1:
            raise InputError("Model.moe_latent_size", self.moe_latent_size, "None for a dense model",
                             "the latent projections wrap the routed experts of MoE layers")
        self._check_dsa()
        self._check_hybrid()
        counted = count_parameters(self).total
        if counted > MAX_PARAMS:
            raise InputError("Model", f"{counted:.3g} parameters", f"at most {MAX_PARAMS:.0e} parameters",
                             "layers, hidden, ffn_hidden, vocab or experts are far too large")
        if self.params is None:
            object.__setattr__(self, "params", counted)
        elif abs(self.params - counted) > 0.03 * counted:
            raise InputError(
                "Model.params", self.params, f"within 3% of the {counted:,} parameters the architecture implies",
                "check layers, hidden, ffn_hidden, vocab, kv_heads and experts, or omit params",
            )
        return self

    def _check_hybrid(self) -> None:
        p = self.hybrid_pattern
        mamba = (self.mamba_heads, self.mamba_head_dim, self.mamba_state)
        gdn = (self.gdn_key_heads, self.gdn_value_heads)
        if p is None:
            if any(v is not None for v in mamba + gdn) or self.parallel_mixers:
                raise InputError("Model.hybrid_pattern", None,
                                 "a layer pattern when mamba_*, gdn_* or parallel_mixers are set",
                                 'e.g. "M-M*-" (M Mamba-2, G Gated DeltaNet, * attention, - MLP, E MoE)')
            return
        bad = sorted(set(p) - set(HYBRID_KINDS))
        if bad:
            raise InputError("Model.hybrid_pattern", p, "only the characters M, G, *, - and E",
                             f"unknown {''.join(bad)!r} (Megatron-Core --hybrid-override-pattern)")
        if "M" in p and "G" in p:
            raise InputError("Model.hybrid_pattern", p, "Mamba-2 (M) or Gated DeltaNet (G) layers, not both",
                             "a stack mixing the two linear mixers is not modelled")
        self._check_gdn(p)
        if self.parallel_mixers and p.replace("M*", "") != p.replace("M*", "").replace("M", "").replace("*", ""):
            raise InputError("Model.hybrid_pattern", p, "every M followed by its * with parallel_mixers",
                             "a parallel mixer is a Mamba-2 and an attention branch on one input (Falcon-H1)")
        if len(p) != self.layers:
            raise InputError("Model.hybrid_pattern", f"{len(p)} characters", f"one per layer ({self.layers})",
                             "each character is one layer, as Megatron-Core counts --num-layers")
        if ("E" in p) != (self.experts > 1):
            raise InputError("Model.experts", self.experts,
                             "more than 1 exactly when hybrid_pattern has MoE layers (E)",
                             f"the pattern has {p.count('E')} E layers")
        if self.experts > 1 and (self.dense_layers or self.moe_layer_freq != 1):
            raise InputError("Model.dense_layers", self.dense_layers, "0 (and moe_layer_freq 1) with hybrid_pattern",
                             "the pattern says which layers are MoE")
        if self.mla is not None:
            raise InputError("Model.mla", "set", "unset with hybrid_pattern", "MLA in a hybrid stack is not modelled")
        if self.mtp_layers and "*" not in p:
            raise InputError("Model.mtp_layers", self.mtp_layers, "0 for a hybrid stack without attention layers",
                             "a hybrid MTP module is an attention layer then the stack's MLP or MoE layer (Nemotron 3 "
                             "Super: HF mtp_layers_block_type ['attention', 'moe'])")
        if self.sliding_window is not None or self.attention_chunk is not None:
            raise InputError("Model.sliding_window", self.sliding_window or self.attention_chunk,
                             "None with hybrid_pattern", "windowed attention in a hybrid stack is not modelled")
        if "M" in p:
            for name, v in zip(("mamba_heads", "mamba_head_dim", "mamba_state"), mamba):
                if v is None:
                    raise InputError(f"Model.{name}", None, "a size when hybrid_pattern has Mamba layers (M)")
            if self.mamba_heads % self.mamba_groups:
                raise InputError("Model.mamba_groups", self.mamba_groups, f"a divisor of mamba_heads ({self.mamba_heads})",
                                 f"mamba_heads({self.mamba_heads}) % mamba_groups({self.mamba_groups}) = "
                                 f"{self.mamba_heads % self.mamba_groups}")

    def _check_dsa(self) -> None:
        dsa = (self.dsa_indexer_heads, self.dsa_indexer_head_dim, self.dsa_topk)
        if all(v is None for v in dsa):
            return
        for name, v in zip(("dsa_indexer_heads", "dsa_indexer_head_dim", "dsa_topk"), dsa):
            if v is None:
                raise InputError(f"Model.{name}", None, "a size when any DeepSeek Sparse Attention field is set",
                                 "dsa_indexer_heads, dsa_indexer_head_dim and dsa_topk describe the indexer together")
        if self.mla is None or not self.mla.q_lora_rank:
            raise InputError("Model.dsa_indexer_heads", self.dsa_indexer_heads, "None unless mla has a q_lora_rank",
                             "the indexer's queries are projected from MLA's compressed query (DeepSeek-V3.2 Indexer.wq_b)")

    def _check_gdn(self, p: str) -> None:
        if "G" not in p:
            if any(v is not None for v in (self.gdn_key_heads, self.gdn_value_heads)):
                raise InputError("Model.gdn_value_heads", self.gdn_value_heads,
                                 "None unless hybrid_pattern has Gated DeltaNet layers (G)")
            return
        for name in ("gdn_key_heads", "gdn_value_heads"):
            if getattr(self, name) is None:
                raise InputError(f"Model.{name}", None, "a head count when hybrid_pattern has Gated DeltaNet layers (G)")
        if self.gdn_value_heads % self.gdn_key_heads:
            raise InputError("Model.gdn_value_heads", self.gdn_value_heads,
                             f"a multiple of gdn_key_heads ({self.gdn_key_heads})",
                             "each query/key head serves an equal group of value heads (HF repeat_interleave)")

    @property
    def is_hybrid(self) -> bool:
        return self.hybrid_pattern is not None

    @classmethod
    def preset(cls, name: str) -> "Model":
        """A built-in model, e.g. `Model.preset("llama-3-70b")`; `advisor presets` lists them."""
        return cls(**presets.model(name, field="Model.preset"))

    @classmethod
    def from_hf_config(cls, path_or_dict, *, name: str | None = None) -> "Model":
        """A Model from a Hugging Face config.json (path, folder or dict): Llama, Mistral, Mixtral,
        Qwen2, Qwen3 (dense and MoE), DeepSeek-V2/V3/V3.2, Kimi-K2, GLM-4.5, GPT-NeoX, BLOOM, GPT-2, Gemma,
        SmolLM3, StarCoder2, Nemotron, Nemotron-H (Nemotron 3), Qwen3-Next, Falcon-H1, gpt-oss, Llama 4
        (advisor.hf.SUPPORTED_MODEL_TYPES). A missing key raises InputError
        naming it."""
        read = model_fields_from_hf_config(path_or_dict, name=name)
        try:
            return cls(**read.fields)
        except ValidationError as e:
            raise read.input_error(e) from None

    @property
    def is_moe(self) -> bool:
        return self.experts > 1


class Training(_Frozen):
    """What one training step looks like. Omitted fields are resolved against the model."""

    seq_len: Tokens | None = Field(None, ge=1, le=1 << 24)
    """Tokens per sequence: 4096, "8k", "128k". None: the model's pretraining context."""
    global_batch_size: int | None = Field(None, ge=1, le=1 << 24)
    """Sequences per optimizer step. None: about 4M tokens per step (Llama 2 paper, §2.2)."""
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


# Default tokens per global batch when the caller gives none: 4M tokens, as Llama 2 pretraining
# (Touvron et al. 2023, §2.2 "global batch-size of 4M tokens") and close to GPT-3 175B's 3.2M.
DEFAULT_BATCH_TOKENS = 4 * 2**20
# Default sequence length for a model that states none: 4096 (Llama 2's pretraining context).
DEFAULT_SEQ_LEN = 4096
# Fine-tuning defaults (task other than "pretrain"): 4096 tokens, the packed length of NeMo 24.07's
# SFT and LoRA performance rows (github:NVIDIA/NeMo@8e3d65dcfe3504689bfc5b6e67d502780aacad41
# docs/source/performance/performance_summary.md, "Finetuning"), and 128 sequences, the global batch of
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


def resolve_training(model: Model, training: Training | None) -> tuple[Training, list[str]]:
    """Fill seq_len and global_batch_size when omitted; returns the notes saying what was assumed."""
    training = training or Training()
    notes: list[str] = _model_notes(model)
    updates: dict[str, Any] = {}
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
        gbs = max(1, round(DEFAULT_BATCH_TOKENS / seq))
        updates["global_batch_size"] = gbs
        notes.append(
            f"training.global_batch_size not given: {gbs} sequences = 4M tokens / {seq} "
            "(Llama 2 pretraining batch, Touvron et al. 2023 §2.2)"
        )
    return (training.model_copy(update=updates) if updates else training), notes
