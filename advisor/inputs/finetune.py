"""Fine-tuning jobs: the task names, the LoRA target linears and the defaults the trace names.

A `Training.task` is one of
- "pretrain": every weight trains (the default; what advisor modelled before fine-tuning existed);
- "sft":      full-parameter supervised fine-tuning: the same memory and time as pretraining, usually
              at a smaller batch and a shorter, packed sequence;
- "lora":     the base weights are frozen (16-bit, no gradients, no optimizer states) and a rank-r
              adapter B·A is trained beside each targeted linear (Hu et al. 2021, arXiv:2106.09685 §4);
- "qlora":    "lora" over a base stored in 4-bit NormalFloat with double-quantised block constants
              (Dettmers et al. 2023, arXiv:2305.14314 §3), dequantised to 16-bit for every GEMM.

Targets are named one of two ways, not mixed:
- the Megatron-Core linears of one transformer layer (the names Megatron-Bridge's LoRA takes without
  their "linear_" prefix): qkv (the fused query/key/value projection), proj (the attention output
  projection), fc1 (the MLP input, gate and up fused under SwiGLU) and fc2 (the MLP output); one
  adapter per fused linear. `HF_MODULES` maps each to the Hugging Face Llama-style module names.
- the Hugging Face Llama-style module names PEFT's `LoraConfig.target_modules` matches: q_proj, k_proj,
  v_proj, o_proj, gate_proj, up_proj, down_proj (transformers models/llama/modeling_llama.py), one
  adapter per module, so separate q/k/v and gate/up adapters each see the layer input; "all-linear"
  (alone) is PEFT's shorthand for every linear but the output head (github:huggingface/peft@5d602fdbff04c33c1c4de55cda9d4ae1d7cb7e40
  src/peft/tuners/tuners_utils.py `_maybe_include_all_linear_layers`), the seven above.
`Training.lora_dropout` is PEFT's `lora_dropout`: 0 (PEFT's default) makes the adapter's dropout an
nn.Identity, above 0 an nn.Dropout whose mask the backward keeps (src/peft/tuners/lora/layer.py
`update_layer`).
"""

from __future__ import annotations

from typing import Literal

from ..errors import InputError
from .stacks import HF_STACKS

__all__ = ["Task", "LoraTarget", "LORA_TARGETS", "PEFT_TARGETS", "ALL_LINEAR", "HF_MODULES", "DEFAULT_LORA_RANK",
           "DEFAULT_LORA_TARGETS", "default_alpha", "FROZEN_BASE_TASKS", "check_finetune", "finetune_defaults",
           "peft_modules", "priced_targets"]

Task = Literal["pretrain", "sft", "lora", "qlora"]
LoraTarget = Literal["qkv", "proj", "fc1", "fc2", "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                     "down_proj", "all-linear"]
LORA_TARGETS: tuple[str, ...] = ("qkv", "proj", "fc1", "fc2")
PEFT_TARGETS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
ALL_LINEAR = "all-linear"
FROZEN_BASE_TASKS = ("lora", "qlora")

# Hugging Face module names of each target in Llama / Mistral / Qwen2 checkpoints
# (transformers models/llama/modeling_llama.py: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj,
# down_proj), the names PEFT's LoraConfig.target_modules matches.
HF_MODULES: dict[str, tuple[str, ...]] = {
    "qkv": ("q_proj", "k_proj", "v_proj"),
    "proj": ("o_proj",),
    "fc1": ("gate_proj", "up_proj"),
    "fc2": ("down_proj",),
}

# Rank 16 on every linear of the block. QLoRA (Dettmers et al. 2023 §4, "Default Hyperparameters Do
# Not Match 16-bit Performance") finds LoRA on all linear transformer-block layers is what matches
# full fine-tuning, and that the rank matters little once all layers are adapted; Megatron-Bridge's
# LoRA targets the same four linears by default (github:NVIDIA-NeMo/Megatron-Bridge@2afd2d34f7d7b2e84095af1a7fd7244902189ebc
# src/megatron/bridge/peft/lora.py: target_modules linear_qkv, linear_proj, linear_fc1, linear_fc2,
# dim 32, alpha 32). Rank 16 with alpha 2r is the common TRL / PEFT recipe choice.
DEFAULT_LORA_RANK = 16
DEFAULT_LORA_TARGETS: tuple[str, ...] = LORA_TARGETS
MAX_LORA_RANK = 65_536


def default_alpha(rank: int) -> int:
    """LoRA alpha when none is given: 2 x rank (adapter output scaled by alpha / rank = 2)."""
    return 2 * rank


def peft_modules(targets: tuple) -> tuple[str, ...]:
    """The PEFT module names of `targets` (either naming): the fused names mapped by HF_MODULES,
    "all-linear" expanded to the seven projections."""
    if ALL_LINEAR in targets:
        return PEFT_TARGETS
    return tuple(name for t in targets for name in HF_MODULES.get(t, (t,)))


def priced_targets(targets: tuple | None, stack: str | None) -> tuple[str, ...]:
    """The adapted linears the cost model prices for Training.lora_targets (None: the default) under the
    stated stack: a Hugging Face stack's PEFT adapts modules, so a fused name stands for its modules
    (qkv is q_proj, k_proj and v_proj: three adapters), as the PEFT export writes it; the other stacks
    adapt what is named."""
    if stack in HF_STACKS:
        return peft_modules(targets or PEFT_TARGETS)
    return tuple(targets or DEFAULT_LORA_TARGETS)


def check_finetune(task: str, rank: int | None, alpha: int | None, targets: tuple | None,
                   dropout: float | None = None) -> None:
    """InputError naming the field for LoRA settings that do not fit the task or each other."""
    if task not in FROZEN_BASE_TASKS:
        for name, value in (("lora_rank", rank), ("lora_alpha", alpha), ("lora_targets", targets),
                            ("lora_dropout", dropout)):
            if value is not None:
                raise InputError(f"Training.{name}", value, "None unless task is 'lora' or 'qlora'",
                                 f"task {task!r} trains every weight; it has no adapter")
        return
    if targets is not None:
        if not targets:
            raise InputError("Training.lora_targets", targets, f"at least one of {list(LORA_TARGETS + PEFT_TARGETS)}")
        if len(set(targets)) != len(targets):
            raise InputError("Training.lora_targets", targets, "each target once")
        if ALL_LINEAR in targets and len(targets) > 1:
            raise InputError("Training.lora_targets", targets, "'all-linear' alone",
                             "PEFT's shorthand already names every linear of the block")
        fused = [t for t in targets if t in LORA_TARGETS]
        if fused and len(fused) != len(targets):
            raise InputError("Training.lora_targets", targets,
                             "one naming: Megatron's fused linears (qkv, proj, fc1, fc2) or PEFT's modules "
                             "(q_proj ... down_proj, all-linear)",
                             "a fused qkv adapter and a q_proj adapter are different adapters")


def finetune_defaults(task: str, rank: int | None, alpha: int | None, targets: tuple | None,
                      peft_names: bool = False) -> tuple[dict, list[str]]:
    """(the Training fields to fill, the notes that say so) for a LoRA / QLoRA job; `peft_names`: the
    stack names targets as PEFT does (the Hugging Face stacks), so the default is PEFT's seven modules."""
    if task not in FROZEN_BASE_TASKS:
        return {}, []
    updates: dict = {}
    notes: list[str] = []
    if rank is None:
        rank = updates["lora_rank"] = DEFAULT_LORA_RANK
        notes.append(f"training.lora_rank not given: {rank} (LoRA on every block linear, QLoRA paper §4; "
                     "the rank matters little once all linears are adapted)")
    if alpha is None:
        updates["lora_alpha"] = default_alpha(rank)
        notes.append(f"training.lora_alpha not given: {default_alpha(rank)} (2 x rank)")
    if targets is None and peft_names:
        updates["lora_targets"] = PEFT_TARGETS
        notes.append("training.lora_targets not given: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj "
                     "(PEFT's 'all-linear', every linear of the block, as QLoRA §4 recommends)")
    elif targets is None:
        updates["lora_targets"] = DEFAULT_LORA_TARGETS
        notes.append("training.lora_targets not given: qkv, proj, fc1, fc2 (every linear of the block, as "
                     "Megatron-Bridge's LoRA default and QLoRA §4)")
    return updates, notes
