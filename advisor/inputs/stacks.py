"""The training stacks a user can state as `Training.framework`, by the names teams use for them.

A stated stack is a fact about the job, like its sequence length: the rule file
rules/stated-framework.toml turns it into the layout frameworks (`Layout.framework`: megatron,
deepspeed, megatron+deepspeed, torchtitan) and the parallel dimensions the planner may use. This
module only names the stacks and checks a given name; what each stack can run is the rules'.

- "megatron-core":      Megatron-LM / Megatron-Core (NVIDIA/Megatron-LM), including its Megatron-FSDP;
- "megatron-bridge":    NVIDIA Megatron-Bridge, which trains Megatron-Core models;
- "nemo":               NVIDIA NeMo (1.x and 2.0), whose LLM collection runs Megatron-Core;
- "megatron-lm":        Megatron-LM before Megatron-Core (2019-2022 releases: the version says which);
- "megatron-deepspeed": Megatron-DeepSpeed (microsoft/Megatron-DeepSpeed, BigScience, GPT-NeoX):
                        Megatron's TP/PP model code on DeepSpeed's engine;
- "deepspeed":          DeepSpeed alone (ZeRO, its pipeline engine);
- "hf-trl", "hf-accelerate": the Hugging Face Trainer / TRL launched by Accelerate, with DeepSpeed ZeRO
                        or PyTorch FSDP as the way to split the model;
- "torchtitan":         pytorch/torchtitan (FSDP2, TP, PP, CP, EP).
"""

from __future__ import annotations

import re

from ..errors import InputError

__all__ = ["STACKS", "HF_STACKS", "check_stack", "check_stack_version"]

STACKS: tuple[str, ...] = ("megatron-core", "megatron-bridge", "nemo", "megatron-lm", "megatron-deepspeed",
                           "deepspeed", "hf-trl", "hf-accelerate", "torchtitan")
HF_STACKS: tuple[str, ...] = ("hf-trl", "hf-accelerate")
"""The stacks that run Hugging Face transformers' model code (and PEFT's adapters): the cost model
prices their activations as that code keeps them (advisor.costmodel.hf)."""
MAX_VERSION_CHARS = 64
MAX_RELEASE_DIGITS = 9
"""Digits of each of a version's first two numbers, which the rules read as major * 1000 + minor
(facts.release_number): 9 holds a date (20240716) and keeps the fact far inside int64, which 16
digits overflowed in the rule engine."""
_NUMBER = re.compile(r"[0-9]+")


def check_stack(value: object) -> object:
    """The stack name, lower-cased and stripped; InputError naming Training.framework otherwise."""
    if value is None:
        return None
    name = value.strip().lower() if isinstance(value, str) else value
    if name not in STACKS:
        raise InputError("Training.framework", value, list(STACKS),
                         "the training stack the team runs, e.g. 'megatron-core', 'hf-trl', 'deepspeed' "
                         "or 'torchtitan'; or None to let the advisor choose")
    return name


def check_stack_version(value: object, stack: str | None) -> None:
    """A version is a short printable string, and only with a stated stack."""
    if value is None:
        return
    if (not isinstance(value, str) or not value.strip() or len(value) > MAX_VERSION_CHARS or not value.isascii()
            or not value.isprintable()):
        raise InputError("Training.framework_version", value,
                         f"a release string of at most {MAX_VERSION_CHARS} printable characters, ASCII only, e.g. "
                         "'0.16.1' or '24.07'", "digits of other scripts are not read as release numbers"
                         if isinstance(value, str) and not value.isascii() else None)
    for number in _NUMBER.findall(value)[:2]:
        if len(number) > MAX_RELEASE_DIGITS:
            raise InputError("Training.framework_version", value,
                             f"release numbers of at most {MAX_RELEASE_DIGITS} digits, e.g. '0.16.1' or '24.07'",
                             f"a number of {len(number)} digits")
    if stack is None:
        raise InputError("Training.framework_version", value, "None unless Training.framework is given",
                         "a version says which release of the stated framework runs the job")
