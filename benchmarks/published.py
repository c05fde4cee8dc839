"""Load `published-layouts-dev.jsonl` into advisor objects (shared by the benchmark scripts).

    from benchmarks.published import load_records
    for rec in load_records():                 # default: ../shared/data/published-layouts-dev.jsonl
        rec.raw, rec.cluster, rec.model, rec.training, rec.layout, rec.assumed

Each record's null fields are filled with the defaults of the framework (and era) that ran it, and
every filled value is listed in `rec.assumed`, so a reader sees what the source did not state.
Records whose model shape cannot be completed (no layers/hidden/heads and no matching preset) are
skipped with the reason:
`load_records(include_skipped=True)` yields them too, with `rec.skip_reason` set and the advisor
objects None.

Mapping rules (each one cited where it is a fact, stated where it is a choice):
- GPU strings: "V100" + 16/32 GB -> V100-16GB / V100-32GB; "A100" + 40/80 -> A100-40GB / A100-80GB;
  "H100" -> H100-SXM-80GB (also H800, H200, B200, B300, GB200, GB300, MI300X by name). No GPU named:
  H100-SXM-80GB (assumed; recipes and the MoE model zoo target Hopper or newer). GB200/GB300 keep the
  preset's 72-GPU NVLink domain when a record gives 4 GPUs per node (the NVL72 compute tray).
- Megatron-Bridge runs (published-perf-2025-dev.jsonl): the FSDP column means Megatron-FSDP, fully
  sharded (framework "megatron", zero_stage 3); MoE runs use expert TP 1 (the performance workloads'
  base configs); the 25.09 table's unstated precision is FP8 (its footnote); see
  `_FRAMEWORK_DEFAULTS` and `_FP8_UNSTATED_SOURCES`. GPT-OSS is its own family (not GPT-2-style).
  The settings each row's performance config ran (recompute, offload, dispatcher, overlaps, SP,
  FP8 recipe) come from benchmarks/mbridge_recipes.py, read from Megatron-Bridge's source.
- Model family (from the record's model name) gives what a shape table leaves out: activation,
  norm, biases, tied embeddings, position embedding, vocabulary, MoE/MLA details. ffn_hidden null ->
  4*hidden for GPT-style GeLU models (GPT-2/3, BLOOM, OPT, GPT-NeoX, BloombergGPT papers).
- Layout/training nulls -> the framework's defaults for that kind of run: see `_FRAMEWORK_DEFAULTS`.
- Fine-tuning rows: task "finetune" -> Training.task "sft"; LoRA rows -> "lora" with the NeMo 1.x
  PEFT defaults for NeMo 24.07 rows (`_NEMO1_LORA`: rank 32 on the fused QKV).
- Options a record states beyond the Layout fields become `rec.assumptions`: selective recompute
  modules ("selective: mla_up_proj, layernorm" -> Assumptions.recompute_modules). Framework defaults
  of the run's kind too: NeMo 24.07 bf16 gradient buffers; its Llama SFT config's bf16 optimizer
  states (Assumptions.megatron_optimizer_bytes = 4). Uneven first/last pipeline stages are not
  reproduced (the stage split is the cost model's, advisor/estimate/context.py `stage_layers`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, NamedTuple

from advisor import Cluster, Layout, Model, Training
from advisor.errors import AdvisorError, UnknownPresetError
from advisor.inputs.specs import MLA

from benchmarks.mbridge_recipes import recipe_overrides

__all__ = ["PublishedRecord", "load_records", "default_path", "layout_label"]

REPO = Path(__file__).resolve().parents[1]


def default_path() -> Path:
    return REPO.parent / "shared" / "data" / "published-layouts-dev.jsonl"


@dataclass
class PublishedRecord:
    id: str
    raw: dict[str, Any]
    cluster: Cluster | None = None
    model: Model | None = None
    training: Training | None = None
    layout: Layout | None = None
    assumed: list[str] = field(default_factory=list)
    assumptions: dict[str, Any] = field(default_factory=dict)
    """Overrides of `advisor.Assumptions` that describe how this framework ran the job."""
    skip_reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.skip_reason is None

    @property
    def measured(self) -> bool:
        """False for layouts the source says were not run as a measured job (recipe defaults)."""
        return "not a measured" not in (self.raw.get("notes") or "")


# ----------------------------------------------------------------------------- GPUs

def gpu_preset(name: str | None, memory_gb: float | None) -> tuple[str, str | None]:
    """(preset name, note when assumed)."""
    s = (name or "").upper()
    if "V100" in s:
        return ("V100-16GB" if memory_gb == 16 else "V100-32GB"), (None if memory_gb else "V100 memory not stated: 32GB")
    if "A100" in s:
        return ("A100-40GB" if memory_gb == 40 else "A100-80GB"), (None if memory_gb else "A100 memory not stated: 80GB")
    # GB300 / B300 before GB200 / B200 and H100: "NVIDIA GB300" contains none of the older names and
    # would fall through to the H100 default (records of published-perf-2025-dev.jsonl).
    for key, preset in (("H800", "H800"), ("H200", "H200"), ("GB300", "GB300"), ("GB200", "GB200"), ("B300", "B300"),
                        ("B200", "B200"), ("MI300X", "MI300X"), ("H100", "H100-SXM-80GB")):
        if key in s:
            return preset, None
    return "H100-SXM-80GB", f"GPU not stated ({name!r}, {memory_gb} GB): H100-SXM-80GB"


# ----------------------------------------------------------------------------- model families

# What each family implies beyond the shape columns. Sources: the models' papers / HF config.json.
_GPT = dict(activation="gelu", norm="layernorm", bias=True, tied_embeddings=True, position_embedding="learned",
            vocab=50257)  # GPT-2/GPT-3 BPE vocabulary (Radford et al. 2019; Brown et al. 2020 §2.1)
_FAMILIES: list[tuple[str, dict[str, Any]]] = [
    # DeepSeek-V3 tech report (arXiv:2412.19437) §4.2 and HF deepseek-ai/DeepSeek-V3 config.json
    ("deepseek-v3", dict(activation="swiglu", norm="rmsnorm", tied_embeddings=False, vocab=129280, shared_experts=1,
                         dense_layers=3, dense_ffn=18432, router_groups=8, router_group_topk=4,   # n_group, topk_group
                         mla=dict(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                                  v_head_dim=128))),
    # DeepSeek-V2 (arXiv:2405.04434) §3.1 and HF deepseek-ai/DeepSeek-V2 config.json
    ("deepseek-v2", dict(activation="swiglu", norm="rmsnorm", tied_embeddings=False, vocab=102400, shared_experts=2,
                         dense_layers=1, dense_ffn=12288,
                         mla=dict(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                                  v_head_dim=128))),
    # HF Qwen/Qwen3-Next-80B-A3B-Instruct config.json: head_dim 256, 1 shared expert of 512; its
    # Gated-DeltaNet layers (3 of 4) are approximated as standard GQA attention.
    ("qwen3-next", dict(activation="swiglu", norm="rmsnorm", tied_embeddings=False, vocab=151936, head_dim=256,
                        shared_experts=1)),
    # HF Qwen/Qwen3-235B-A22B and Qwen3-30B-A3B config.json: head_dim 128, no shared experts
    ("qwen3", dict(activation="swiglu", norm="rmsnorm", tied_embeddings=False, vocab=151936, head_dim=128)),
    ("mixtral-8x22b", dict(activation="swiglu", norm="rmsnorm", tied_embeddings=False, vocab=32768)),  # HF config
    ("mixtral", dict(activation="swiglu", norm="rmsnorm", tied_embeddings=False, vocab=32000)),  # HF config
    ("llama-3", dict(activation="swiglu", norm="rmsnorm", tied_embeddings=False, vocab=128256)),  # Llama 3 paper
    ("llama3", dict(activation="swiglu", norm="rmsnorm", tied_embeddings=False, vocab=128256)),
    ("llama", dict(activation="swiglu", norm="rmsnorm", tied_embeddings=False, vocab=32000)),  # Llama 1/2 papers
    # Nemotron-4 (arXiv:2402.16819, 2406.11704): squared-ReLU (a non-gated 2-matrix MLP, modelled as
    # "gelu"), LayerNorm, no biases, untied, RoPE, 256k vocabulary; NeMo nemotron.py configs
    ("nemotron", dict(activation="gelu", norm="layernorm", bias=False, tied_embeddings=False, vocab=256000)),
    # BLOOM (arXiv:2211.05100) §3.2: ALiBi, LayerNorm, biases, tied, vocab padded to 250,880
    ("bloom", dict(activation="gelu", norm="layernorm", bias=True, tied_embeddings=True,
                   position_embedding="alibi", vocab=250880)),
    ("bigscience", dict(activation="gelu", norm="layernorm", bias=True, tied_embeddings=True,
                        position_embedding="alibi", vocab=250880)),
    # BloombergGPT (arXiv:2303.17564) §2.3: BLOOM-style ALiBi model, 131,072-token vocabulary
    ("bloomberggpt", dict(activation="gelu", norm="layernorm", bias=True, tied_embeddings=True,
                          position_embedding="alibi", vocab=131072)),
    # GPT-NeoX-20B (arXiv:2204.06745) and HF EleutherAI/gpt-neox-20b config: rotary, untied, 50432 vocab
    ("gpt-neox", dict(activation="gelu", norm="layernorm", bias=True, tied_embeddings=False, vocab=50432)),
    # OPT (arXiv:2205.01068) Table 1 and HF facebook/opt config: ReLU 2-matrix MLP, learned positions,
    # tied, vocab 50272
    ("opt", dict(_GPT, vocab=50272)),
    # GPT-OSS (HF openai/gpt-oss-120b config.json; Megatron-Bridge v0.2.0
    # src/megatron/bridge/models/gpt_oss/gpt_oss_provider.py): gated MLP (quick-GeLU GLU with clamp,
    # three matrices: modelled as "swiglu"), RMSNorm, biases, untied, RoPE, head_dim 64, 201,088
    # vocabulary; a 128-token sliding window on every other layer (layer_types: sliding on even,
    # full on odd layers) and a learned sink per head. Must precede "gpt", which would make it a
    # GPT-2-style model.
    ("gpt-oss", dict(activation="swiglu", norm="rmsnorm", bias=True, tied_embeddings=False, vocab=201088,
                     head_dim=64, sliding_window=128, global_attention_every=2, attention_sinks=True)),
    ("gpt-2", dict(_GPT, seq_len=1024)),  # GPT-2 context 1024 (DeepSpeed's Megatron GPT-2 tutorial too)
    ("gpt", _GPT),
]


def _family(name: str) -> tuple[str, dict[str, Any]] | tuple[None, None]:
    low = name.lower()
    for key, fam in _FAMILIES:
        if key in low:
            return key, fam
    return None, None


# Fine-tunes named after their recipe, mapped to the base model they fine-tune (the shape is the base's).
_BASE_OF = {
    # HF model card HuggingFaceH4/zephyr-7b-beta: "a fine-tuned version of mistralai/Mistral-7B-v0.1"
    "zephyr-7b": "mistral-7b",
}


def _preset_candidates(name: str) -> list[str]:
    base = re.sub(r"\(.*?\)", "", name).strip().lower().replace(" ", "-")
    out = [base]
    out.append(re.sub(r"([a-z])(\d)", r"\1-\2", base, count=1))  # llama2-7b -> llama-2-7b
    out.append(re.sub(r"-v\d+(\.\d+)?$", "", base))             # mistral-7b-v0.1 -> mistral-7b
    first = name.strip().split()[0].lower() if name.strip() else ""   # "Zephyr-7B SFT -> DPO" -> zephyr-7b
    out.append(_BASE_OF.get(first, first))
    return list(dict.fromkeys(c for c in out if c))


def _preset(name: str) -> Model | None:
    for cand in _preset_candidates(name):
        try:
            return Model.preset(cand)
        except UnknownPresetError:
            continue
    return None


def _build_model(r: dict, assumed: list[str]) -> Model:
    m = r["model"]
    name = m.get("name") or r["id"]
    key, fam = _family(name)
    shape_missing = [k for k in ("layers", "hidden", "heads") if m.get(k) is None]
    if shape_missing:
        preset = _preset(name)
        if preset is None:
            raise _Skip(f"model shape incomplete ({', '.join(shape_missing)} null) and no preset named like {name!r}")
        assumed.append(f"model shape from preset {preset.name!r}")
        return preset
    if fam is None:
        raise _Skip(f"unknown model family for {name!r}: activation/vocabulary cannot be inferred")
    fam = dict(fam)
    kw: dict[str, Any] = {"name": name, "layers": m["layers"], "hidden": m["hidden"], "heads": m["heads"]}
    for k in ("activation", "norm", "bias", "tied_embeddings", "position_embedding", "head_dim",
              "sliding_window", "global_attention_every", "attention_sinks"):
        if k in fam:
            kw[k] = fam[k]
    if fam.get("mla"):
        kw["mla"] = MLA(**fam["mla"])
    elif m.get("kv_heads") is not None:
        kw["kv_heads"] = m["kv_heads"]
    vocab = m.get("vocab")
    if vocab is None:
        vocab = fam["vocab"]
        assumed.append(f"vocab {vocab} ({key} family)")
    kw["vocab"] = vocab
    experts = m.get("moe_experts") or 1
    ffn = m.get("ffn_hidden")
    if ffn is None:
        if kw.get("activation", "swiglu") != "gelu":
            raise _Skip(f"ffn_hidden null for a gated ({kw.get('activation', 'swiglu')}) model")
        ffn = 4 * m["hidden"]
        assumed.append("ffn_hidden = 4*hidden (GPT-style)")
    if experts > 1:
        kw.update(experts=experts, experts_per_token=m.get("moe_topk") or 1, moe_ffn_hidden=ffn,
                  ffn_hidden=fam.get("dense_ffn", ffn), shared_experts=fam.get("shared_experts", 0),
                  dense_layers=fam.get("dense_layers", 0), router_groups=fam.get("router_groups", 1),
                  router_group_topk=fam.get("router_group_topk"))
    else:
        kw["ffn_hidden"] = ffn
    seq = m.get("seq_len") or fam.get("seq_len")
    if kw.get("position_embedding") == "learned":
        kw["max_position"] = seq or 2048
    if key == "qwen3-next":
        assumed.append("Qwen3-Next linear-attention layers modelled as GQA attention")
    return Model(**kw)


# ----------------------------------------------------------------------------- frameworks

# Defaults for null layout/training fields by the framework (and era) that ran the job.
# megatron-core: Megatron-Core / NeMo / MoE model zoo / Megatron-LM README (2023+): SP with TP (the
#   parallelism guide: "always enable SP with TP"), distributed optimizer (NeMo default, required by
#   the README's --overlap-param-gather, M19), no recompute (MCore's default
#   recompute_granularity=None), Transformer Engine fused/flash attention.
# megatron-legacy: Megatron-LM 2019-2021 (Shoeybi 2019, Narayanan 2021, the GPT-3 example script): no
#   SP or distributed optimizer yet (both 2022), full activation checkpointing (--checkpoint-activations
#   in every example script; Narayanan Eq. 3 counts the recompute pass), unfused softmax attention.
# megatron-deepspeed: BigScience / GPT-NeoX / DeepSpeed Megatron examples: no SP, no flash attention.
# hf-deepspeed / hf-fsdp: Hugging Face Trainer/TRL: gradient checkpointing off unless set, SDPA
#   (flash-style) attention for TRL-era (2024) recipes, eager attention for 2023 Alpaca.
_FRAMEWORK_DEFAULTS = {
    "megatron-core": dict(framework="megatron", sp=True, zero_stage=1, recompute="none", flash=True),
    "megatron-legacy": dict(framework="megatron", sp=False, zero_stage=0, recompute="full", flash=False),
    # megatron-fsdp: Megatron-Bridge runs with the FSDP column set (published-perf-2025-dev.jsonl):
    #   Megatron-Core's Megatron-FSDP, which the performance scripts run fully sharded
    #   (github:NVIDIA-NeMo/Megatron-Bridge@7af9601c9da746d21481194356295bfe23df3737 (v0.2.0)
    #   scripts/performance/utils/helpers.py: ddp.data_parallel_sharding_strategy =
    #   "optim_grads_params"), i.e. advisor's framework "megatron" with zero_stage 3; else as megatron-core.
    "megatron-fsdp": dict(framework="megatron", sp=True, zero_stage=3, recompute="none", flash=True),
    "megatron-deepspeed": dict(framework="megatron+deepspeed", sp=False, zero_stage=0, recompute="none", flash=False),
    "hf-deepspeed": dict(framework="deepspeed", sp=False, zero_stage=0, recompute="none", flash=True),
    "hf-legacy": dict(framework="torchtitan", sp=False, zero_stage=3, recompute="none", flash=False),
    "fsdp": dict(framework="torchtitan", sp=False, zero_stage=3, recompute="none", flash=False),
    "sagemaker": dict(framework="deepspeed", sp=False, zero_stage=3, recompute="none", flash=False),
}


# The training stack a record's framework string states, as advisor.Training.framework names it (advisor/
# inputs/stacks.py), with the release the string states (its version or, for the papers' Megatron-LM, the
# year in parentheses), first match wins. A string that names none of these stacks (metaseq, SageMaker
# SMP) states no framework the advisor knows: None, and the advisor chooses as for an unstated one.
_STATED_STACKS = (
    (r"megatron-bridge", "megatron-bridge"),
    (r"\bnemo\b", "nemo"),
    (r"megatron-deepspeed|gpt-neox|deepspeed.*megatron-lm", "megatron-deepspeed"),
    (r"\btrl\b", "hf-trl"),
    (r"hugging face trainer|accelerate", "hf-accelerate"),
    (r"megatron-core", "megatron-core"),
    (r"^megatron-lm\b", "megatron-lm"),
    (r"^deepspeed\b", "deepspeed"),
    (r"^torchtitan\b", "torchtitan"),
)
_STATED_VERSION = re.compile(r"(?:nemo|megatron-core|container)[ /]*(r?\d+\.\d+(?:\.\d+)?)|\((\d{4})\)|nemo (\d+\.\d+) container",
                             re.I)


def stated_framework(r: dict) -> tuple[str | None, str | None]:
    """(Training.framework, Training.framework_version) as the record's training.framework states them;
    (None, None) where it states none the advisor knows."""
    text = (r["training"].get("framework") or "").strip()
    low = text.lower()
    stack = next((name for pattern, name in _STATED_STACKS if re.search(pattern, low)), None)
    if stack is None:
        return None, None
    m = _STATED_VERSION.search(text)
    version = next((g for g in m.groups() if g), None) if m else None
    return stack, version


def _framework_kind(r: dict) -> str:
    fw = (r["training"].get("framework") or "").lower()
    fsdp = r["layout"].get("fsdp")
    if "sagemaker" in fw:
        return "sagemaker"
    if "megatron-bridge" in fw:
        return "megatron-fsdp" if fsdp else "megatron-core"
    if fsdp or "fsdp" in fw:
        return "hf-legacy" if "hugging face trainer" in fw else "fsdp"
    if "deepspeed" in fw and ("megatron" in fw or "neox" in fw):
        return "megatron-deepspeed"
    if "deepspeed" in fw:
        return "hf-deepspeed"
    if "2019" in fw or "2021" in fw or r["id"].startswith(("narayanan2021", "shoeybi2019", "korthikanti2022")) \
            or fw.strip() == "megatron-lm":
        return "megatron-legacy"
    return "megatron-core"


def _recompute(v) -> str | None:
    if v is None:
        return None
    if v is False:
        return "none"
    if v is True:
        return "full"
    s = str(v).lower()
    if s.startswith("full"):
        return "full"
    if s.startswith("selective"):
        return "selective"
    return "none"


# Megatron-Core `recompute_modules` (megatron/core/transformer/transformer_config.py).
_RECOMPUTE_MODULES = ("core_attn", "layernorm", "mla_up_proj", "mlp", "moe", "moe_act", "shared_experts")


def _recompute_modules(v) -> tuple[str, ...] | None:
    """The Megatron-Core recompute_modules a record names for its selective recompute
    ("selective: mla_up_proj, layernorm"), or None when it names none (plain "selective" is
    Megatron-Core's default, ["core_attn"])."""
    if not isinstance(v, str) or not v.lower().startswith("selective"):
        return None
    names = tuple(w for w in re.findall(r"[a-z_]+", v.lower()[len("selective"):]) if w in _RECOMPUTE_MODULES)
    return tuple(dict.fromkeys(names)) or None


def _offload(v) -> str | None:
    if v is None:
        return None
    if v is False:
        return "none"
    s = str(v).lower()
    if "param" in s:
        return "optimizer+params"
    if "optim" in s or "cpu_offload" in s:
        return "optimizer"
    return "none"


# GPU presets whose NVLink domain (72) is wider than a node (a 4-GPU compute tray).
_NVL72_PRESETS = ("GB200", "GB300")

# Megatron-Bridge's 25.09 performance table has no precision column (the records' precision is null),
# but its footnote describes the runs as quantized: "The numbers in parentheses indicate the use of
# different quantization granularities: In case of GB200 and B200 systems, 32x32 for both weights and
# activations. For H100 system, 128x128 for weights and 1x128 activations" (github:NVIDIA-NeMo/
# Megatron-Bridge@4ab94dfad36641cabdeb96452b21bf676aac4772:docs/performance-summary-archive.md,
# "25.09 NeMo Container"): the main figures are FP8 runs, recipe (scaling) not stated.
_FP8_UNSTATED_SOURCES = ("mb-perf-25.09-",)


def _precision(v, gpu_preset_name: str) -> tuple[str, bool]:
    s = (v or "").lower()
    if "fp8-mx" in s or "mxfp8" in s:
        return "mxfp8", False
    if "fp8-cs" in s or "current scaling" in s:
        return "fp8-cs", False
    if "fp8" in s:
        return "fp8", False
    if "bf16" in s:
        return "bf16", False
    if "fp16" in s:
        return "fp16", False
    return ("fp16" if gpu_preset_name.startswith("V100") else "bf16"), True


class _Skip(Exception):
    pass


# Sources that state, for every run they report, an option the records' fields cannot carry.
# Megatron-LM README "Training Speed and Scalability" (the H100 weak-scaling table, records
# mcore-h100-weak-* and megatron-lm-readme-h100-*): "We perform fine-grained overlapping of
# data-parallel (--overlap-grad-reduce --overlap-param-gather), tensor-parallel (--tp-comm-overlap)
# and pipeline-parallel communication (enabled by default) with computation".
_TP_COMM_OVERLAP_SOURCES = ("mcore-h100-weak-", "megatron-lm-readme-h100-")

# The Megatron MoE Model Zoo's default runs name their token dispatcher in runtime.conf's DISPATCHER
# column (github:yanring/Megatron-MoE-ModelZoo@30631ea5a4aa6a5328be4e81466ac0d7e9fc438f:
# runtime_configs/benchmarking/runtime.conf; the records' own commit is not stored, their layouts
# match this one): "flex" (DeepEP's kernels) for DeepSeek-V3 and Qwen3-235B-A22B, "alltoall" for the
# others.
_FLEX_DISPATCHER_RECORDS = ("moe-zoo-default-deepseek-v3-", "moe-zoo-default-qwen3-235b-")

# alignment-handbook recipes whose TRL config sets use_liger_kernel: true, i.e. Liger's fused linear
# cross-entropy instead of full fp32 logits (Assumptions.hf_loss "chunked"): the SmolLM3 ones only
# (github:huggingface/alignment-handbook@925acdfe4b2b4e38c3dabd1851bc418f0b656351 recipes/smollm3/sft/sft.yaml
# line 225, sft/mid.yaml, dpo/apo.yaml; no other recipe of that commit sets it).
_LIGER_LOSS_RECORDS = ("hf-ah-smollm3-",)


def _build(r: dict) -> PublishedRecord:
    rec = PublishedRecord(id=r["id"], raw=r)
    A = rec.assumed
    ft = _finetune_fields(r, A)
    c = r["cluster"]
    if not c.get("gpus"):
        raise _Skip("cluster size not stated")
    preset, note = gpu_preset(c.get("gpu"), c.get("gpu_memory_gb"))
    if note:
        A.append(note)
    ckw: dict[str, Any] = {"gpu": preset, "gpus": c["gpus"]}
    if c.get("gpus_per_node"):
        ckw["gpus_per_node"] = c["gpus_per_node"]
        if preset in _NVL72_PRESETS:
            # GB200 / GB300 NVL72: the 4 GPUs per node are a compute tray; the NVLink domain is the
            # 72-GPU rack (the preset's nvlink_domain, advisor/inputs/presets/gpus.toml)
            A.append(f"NVLink domain = the {preset} preset's NVL72 rack, not gpus_per_node={c['gpus_per_node']}")
        else:
            ckw["nvlink_domain"] = c["gpus_per_node"]
    cluster = Cluster(**ckw)

    model = _build_model(r, A)
    kind = _framework_kind(r)
    D = _FRAMEWORK_DEFAULTS[kind]
    L = r["layout"]
    t = r["training"]

    def pick(key, default, label=None):
        v = L.get(key)
        if v is None:
            if label is not False:
                A.append(f"{label or key}={default} ({kind} default)")
            return default
        return v

    if L.get("tp") is None and "tensor parallel" in (r.get("notes") or "").lower():
        # The source used tensor parallelism but did not say its degree: a default of 1 would invent
        # a layout nobody ran (OPT-175B on 992 A100: "FSDP with Megatron-LM Tensor Parallelism").
        raise _Skip("tensor parallelism used but its degree not stated")
    tp = pick("tp", 1)
    pp = pick("pp", 1)
    cp = pick("cp", 1, False)
    ep = pick("ep", 1, False)
    example = _nemo2407_finetune_example(r, tp, pp)
    if example is not None and L.get("vpp") is None and example.vpp:
        vpp = example.vpp
        A.append(f"vpp={vpp} ({example.source})")
    else:
        vpp = pick("vpp", 1, False)
    # Megatron-Bridge's own performance config for this row (mbridge_recipes.py): its settings stand in for
    # the framework defaults where the record states nothing
    recipe = recipe_overrides(r["id"], pp)
    if recipe is not None:
        rec.assumptions.update(recipe.assumptions)
        A.extend(recipe.notes)
    if recipe is not None and recipe.sp is not None and tp > 1 and L.get("sp") is None:
        sp = recipe.sp
    elif example is not None and tp > 1 and L.get("sp") is None:
        sp = example.sp
        A.append(f"sp={sp} ({example.source})")
    else:
        sp_default = D["sp"] and tp > 1
        sp = bool(pick("sp", sp_default)) and tp > 1
    zero = L.get("zero_stage")
    if zero is None:
        zero = D["zero_stage"]
        A.append(f"zero_stage={zero} ({kind} default)")
    rc = _recompute(L.get("recompute"))
    if rc is None and recipe is not None and recipe.recompute is not None:
        rc = recipe.recompute
    elif rc is None:
        rc = D["recompute"]
        A.append(f"recompute={rc} ({kind} default)")
    modules = _recompute_modules(L.get("recompute"))
    if modules:  # stated by the record, e.g. a NeMo 2 recipe's model.config.recompute_modules
        rec.assumptions["recompute_modules"] = modules
    off = _offload(L.get("offload")) or "none"
    fw = (t.get("framework") or "").lower()
    if "nemo 24.07" in fw:
        # NeMo 1.x megatron_amp_O2 + distributed fused Adam: bf16 grads (optim.grad_sync_dtype=bf16;
        # NeMo docs features/mixed_precision.rst; NeMo-Framework-Launcher H100 example scripts)
        rec.assumptions["megatron_main_grad_bytes"] = 2.0
        A.append("bf16 gradient buffers (NeMo 1.x distributed fused Adam)")
        if (t.get("task") or "").lower() == "finetune" and (model.name or "").lower().startswith("llama"):
            # NeMo 24.07 full-parameter SFT: NeMo-Framework-Launcher conf/peft/llama/sft.yaml (used by
            # the H100 example examples/peft/llama/h100/70b_2node.sh: 16 GPUs, GBS 32, MBS 1, TP4 PP4,
            # packed 4096, fp8) sets optim distributed_fused_adam with dtype bf16 and grad_sync_dtype
            # bf16; with a bf16 megatron_amp_O2 model the optimizer dtype equals the model's, so
            # megatron_base_model.py `setup_optimization` sets store_params=False: bf16 Adam m, v only.
            rec.assumptions["megatron_optimizer_bytes"] = 4.0
            A.append("optimizer states bf16 m, v = 4 B/param (NeMo 1.x SFT config: distributed_fused_adam, "
                     "optim.dtype bf16)")
    if example is not None and example.tp_comm_overlap and tp > 1:
        rec.assumptions["tp_comm_overlap"] = True
        A.append(f"TP communication overlap, ub_tp_comm_overlap ({example.source})")
    notes = r.get("notes") or ""
    if "--tp-comm-overlap" in notes or r["id"].startswith(_TP_COMM_OVERLAP_SOURCES):
        # stated by the record, or by its source document for all of its runs (see below)
        rec.assumptions["tp_comm_overlap"] = True
        A.append("--tp-comm-overlap (stated by the source)")
    if r["id"].startswith(_FLEX_DISPATCHER_RECORDS):
        rec.assumptions["moe_token_dispatcher"] = "deepep"
        A.append("flex token dispatcher with DeepEP (the Model Zoo's runtime.conf)")
    if r["id"].startswith(_LIGER_LOSS_RECORDS):
        rec.assumptions["hf_loss"] = "chunked"
        A.append("Liger fused linear cross-entropy, hf_loss chunked (the recipe's use_liger_kernel: true)")
    if kind == "fsdp" and "trl" in fw:
        # alignment-handbook recipes load the model with torch_dtype: bfloat16: no fp32 master copy
        rec.assumptions["fsdp_state_bytes"] = (2.0, 2.0, 4.0)
        A.append("pure-bf16 FSDP states 2/2/4 B (alignment-handbook torch_dtype: bfloat16)")
    etp = 1 if re.search(r"expert t(p|ensor[- ]parallel(ism)?)\s*=\s*1", r["notes"], re.I) else None
    if etp is None and tp > 1 and model.experts > 1 and "megatron-bridge" in fw:
        # Megatron-Bridge's performance workloads set expert_tensor_parallel_size=1 for every MoE model
        # (github:NVIDIA-NeMo/Megatron-Bridge@7af9601c9da746d21481194356295bfe23df3737 (v0.2.0)
        # scripts/performance/configs/{deepseek,qwen3,gpt_oss}/workload_base_configs.py, BASE_* configs)
        etp = 1
        A.append("expert TP = 1 (Megatron-Bridge performance workload base config)")
    mbs = t.get("micro_batch_size")
    if mbs is None:
        mbs = 1
        A.append("micro_batch_size=1 (not stated)")
    dp = L.get("dp")
    world = cluster.gpus
    if dp is None:
        if world % (tp * pp * cp):
            raise _Skip(f"gpus({world}) % (tp*pp*cp = {tp * pp * cp}) != 0")
        dp = world // (tp * pp * cp)
    if tp * pp * cp * dp != world:
        raise _Skip(f"tp*pp*cp*dp = {tp * pp * cp * dp} != gpus({world})")
    seq = r["model"].get("seq_len") or model.seq_len
    if seq is None:
        fam_key, fam = _family(r["model"].get("name") or "")
        seq = fam.get("seq_len") if fam else None
        if seq is None:
            raise _Skip("sequence length not stated")
        A.append(f"seq_len={seq} ({fam_key} family)")
    gbs = t.get("global_batch_size")
    if gbs is None:
        gbs = mbs * dp
        A.append(f"global_batch_size = micro_batch_size*dp = {gbs} (no gradient accumulation stated)")
    n_mb = None
    if gbs % (mbs * dp):
        # A batch that does not split over the ranks cannot have run as stated: it is a rounded figure
        # (e.g. OPT's "2M tokens"). Use the nearest batch that does, and say so.
        n_mb = max(1, round(gbs / (mbs * dp)))
        A.append(f"global_batch_size({gbs}) % (micro_batch_size({mbs}) * dp({dp})) != 0: the stated batch "
                 f"is approximate; using {n_mb * mbs * dp} = {n_mb} micro-batches x {mbs} x dp {dp}")
        gbs = n_mb * mbs * dp
    precision, guessed = _precision(t.get("precision"), preset)
    if recipe is not None and recipe.precision and (guessed or precision.startswith("fp8")):
        if guessed:
            A.append(f"precision={recipe.precision} (the Megatron-Bridge config's recipe; the table states none)")
        precision, guessed = recipe.precision, False
    if guessed and r["id"].startswith(_FP8_UNSTATED_SOURCES):
        precision = "fp8"
        A.append("precision=fp8 (not stated; the 25.09 table's footnote describes FP8 quantization granularities)")
    elif guessed:
        A.append(f"precision={precision} (not stated)")
    framework = D["framework"]
    if framework == "torchtitan" and precision == "fp16":
        # torchtitan stands for PyTorch FSDP here, but it has no fp16 (torchtitan.no-fp16): an fp16 FSDP
        # run (metaseq's OPT) is audited as DeepSpeed ZeRO-3, the same full sharding, which runs fp16.
        framework = "deepspeed"
        A.append("fp16 FSDP audited as DeepSpeed ZeRO-3 (torchtitan, the FSDP stand-in, has no fp16)")
    rec.cluster, rec.model = cluster, model
    stack, stack_version = stated_framework(r)
    rec.training = Training(seq_len=seq, global_batch_size=gbs, micro_batch_size=mbs, precision=precision,
                            flash_attention=D["flash"], framework=stack, framework_version=stack_version, **ft)
    rec.layout = Layout(framework=framework, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, etp=etp, vpp=vpp, sp=sp,
                        zero_stage=zero, micro_batch_size=mbs, num_microbatches=n_mb, recompute=rc, offload=off)
    return rec


# NeMo 1.x PEFT defaults, which the NeMo 24.07 LoRA performance rows ran (the table states no adapter
# settings): github:NVIDIA/NeMo@5d5919fe8a4877d260a22cd80690b7ef3acde7a0
# examples/nlp/language_modeling/tuning/conf/megatron_gpt_finetuning_config.yaml, peft.lora_tuning:
# target_modules ['attention_qkv'], adapter_dim 32, alpha = adapter_dim.
_NEMO1_LORA = {"task": "lora", "lora_rank": 32, "lora_alpha": 32, "lora_targets": ("qkv",)}


class _Example(NamedTuple):
    source: str
    lora: bool
    gpus: int
    tp: int
    pp: int
    vpp: int | None
    sp: bool
    tp_comm_overlap: bool


# The NeMo 24.07 performance summary's fine-tuning rows state TP, PP, MBS and GBS but no VP or SP column;
# NeMo-Framework-Launcher's H100 PEFT examples of the same release run exactly those jobs (Llama 2, MBS 1,
# GBS 32, fp8 with fp8_params, SQuAD packed to 4096) and state the rest:
# github:NVIDIA/NeMo-Framework-Launcher@97f45c18b622de7204f8b03a74e4276df30af442 (2024-06-26)
# examples/peft/llama/h100/<script>. A row takes them only when its stated layout matches the script's.
_LAUNCHER = "NeMo-Framework-Launcher@97f45c18 examples/peft/llama/h100/"
_NEMO2407_FINETUNE_EXAMPLES = {
    "llama-2-7b": (_Example(_LAUNCHER + "7b_1node.sh", False, 8, 1, 1, None, False, False),
                   _Example(_LAUNCHER + "7b_1node_lora.sh", True, 8, 1, 1, None, False, False)),
    "llama-2-13b": (_Example(_LAUNCHER + "13b_1node.sh", False, 8, 1, 4, 10, False, False),
                    _Example(_LAUNCHER + "13b_1node_lora.sh", True, 8, 1, 1, None, False, False)),
    "llama-2-70b": (_Example(_LAUNCHER + "70b_2node.sh", False, 16, 4, 4, 20, True, True),
                    _Example(_LAUNCHER + "70b_1node_lora.sh", True, 8, 2, 4, None, False, True)),
}


def _nemo2407_finetune_example(r: dict, tp: int, pp: int) -> _Example | None:
    """The launcher example a NeMo 24.07 fine-tuning row ran, when its stated GPUs, TP, PP, MBS and GBS
    are the script's."""
    t = r["training"]
    if "nemo 24.07" not in (t.get("framework") or "").lower() or (t.get("task") or "").lower() != "finetune":
        return None
    lora = "lora" in r["id"].lower()
    name = (r["model"].get("name") or "").lower()
    for ex in _NEMO2407_FINETUNE_EXAMPLES.get(name, ()):
        if (ex.lora == lora and ex.gpus == r["cluster"].get("gpus") and (ex.tp, ex.pp) == (tp, pp)
                and (t.get("micro_batch_size"), t.get("global_batch_size")) == (1, 32)):
            return ex
    return None


# Mean tokens of one SQuAD v1.1 training sample, for the NeMo 24.07 rows that pack SQuAD into 4096-token
# sequences. NeMo 1.x packed SFT keeps attention inside each sample: GPTSFTPackedDataset (NeMo
# nemo/collections/nlp/data/language_modeling/megatron/gpt_sft_dataset.py, return_cu_seqlen=True) hands
# the samples' cu_seqlens to the THD attention kernel, and the launcher scripts set
# model.data.train_ds.packed_sequence=true (NeMo-Framework-Launcher@97f45c18 examples/peft/llama/h100/).
# No source states the sample length in Llama tokens, so it is derived, not fitted:
# - bytes per sample: SQuAD's train split is 79,317,110 bytes over 87,599 samples (Hugging Face
#   rajpurkar/squad dataset_info) = 905 B, an upper bound of its text (the bytes include id and title);
# - bytes per Llama token on English web text: LLaMA's C4 share (Touvron et al. 2023, Table 1: 15.0 %
#   of 1.4T tokens at 1.06 epochs from 783 GB) = 3.95 B/token; Llama 2 keeps that tokenizer (Touvron et
#   al. 2023b, §2.1).
# 905 / 3.95 = 229 tokens. The finding does not hang on the digit: any mean from 128 to 1024 tokens keeps
# every NeMo 24.07 fine-tuning row's step within 20 % (benchmarks/published_finetune.py).
_SQUAD_SAMPLE_BYTES = 79_317_110 / 87_599
_LLAMA_BYTES_PER_TOKEN = 783e9 / (0.150 * 1.4e12 / 1.06)
SQUAD_SAMPLE_TOKENS = round(_SQUAD_SAMPLE_BYTES / _LLAMA_BYTES_PER_TOKEN)


def _finetune_fields(r: dict, A: list) -> dict:
    """Training.task (and LoRA settings, packing) of a record: "lora" for LoRA rows, "sft" for
    fine-tuning rows."""
    task = (r["training"].get("task") or "").lower()
    fw = (r["training"].get("framework") or "").lower()
    packed = {}
    if "nemo 24.07" in fw and re.search(r"squad\S* packed to \d+ tokens", r.get("notes") or "", re.I):
        packed = {"packed_sample_tokens": SQUAD_SAMPLE_TOKENS}
        A.append(f"packed SQuAD samples of {SQUAD_SAMPLE_TOKENS} tokens, attention within each sample "
                 "(NeMo 1.x GPTSFTPackedDataset cu_seqlens)")
    if "lora" in r["id"].lower() or "lora" in task:
        if "nemo 24.07" in fw:
            A.append("LoRA rank 32 on the fused QKV only (NeMo 1.x megatron_gpt_finetuning_config.yaml defaults)")
            return dict(_NEMO1_LORA) | packed
        A.append("LoRA with advisor's defaults (the source states no adapter settings)")
        return {"task": "lora"} | packed
    if task == "finetune":
        if "dpo" in r["id"].lower() or "orpo" in r["id"].lower():
            A.append("preference tuning estimated as full SFT (DPO's frozen reference model and paired "
                     "sequences are not modelled)")
        return {"task": "sft"} | packed
    return {}


def layout_label(layout: Layout, ep: bool = False) -> str:
    """A record's layout in a table column: "t8 p2 v2 d4 z1 non b1" (cp, vpp and, with `ep`, ep only
    when > 1)."""
    return (f"t{layout.tp} p{layout.pp}" + (f" v{layout.vpp}" if layout.vpp > 1 else "")
            + (f" c{layout.cp}" if layout.cp > 1 else "") + (f" e{layout.ep}" if ep and layout.ep > 1 else "")
            + f" d{layout.dp} z{layout.zero_stage} {layout.recompute[:3]} b{layout.micro_batch_size}")


def load_records(path: str | Path | None = None, *, include_skipped: bool = False) -> Iterator[PublishedRecord]:
    """Yield one `PublishedRecord` per line of the JSONL file (skipped ones only with include_skipped)."""
    p = Path(path) if path else default_path()
    with p.open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            r = json.loads(line)
            try:
                rec = _build(r)
            except _Skip as exc:
                rec = PublishedRecord(id=r["id"], raw=r, skip_reason=str(exc))
            except AdvisorError as exc:  # InputError from the advisor models: report, do not crash
                rec = PublishedRecord(id=r["id"], raw=r, skip_reason=f"invalid input: {str(exc).splitlines()[0]}"
                                      f" ({str(exc).splitlines()[-1].strip()})")
            if rec.ok or include_skipped:
                yield rec
