"""Megatron-DeepSpeed's spelling of the Megatron-LM flags: framework "megatron+deepspeed" runs Megatron's
model code on DeepSpeed's engine, and its `pretrain_gpt.py` parses an older Megatron vocabulary.

Source: microsoft/Megatron-DeepSpeed (now deepspeedai/) megatron/arguments.py at MEGATRON_DEEPSPEED_PIN;
tests/data/frameworks/megatron-deepspeed.json is that parser's option list (benchmarks/validate_exports.py
--snapshot), against which tests check every flag written here. ZeRO and offload are not flags: they live
in the DeepSpeed JSON (`--deepspeed --deepspeed_config`). A Megatron-LM flag with no equivalent is kept as
written, so that the parser names it rather than the run silently differing, and `untranslated_note` says so.
"""

from __future__ import annotations

__all__ = ["BY_VALUE", "MEGATRON_DEEPSPEED_PIN", "MEGATRON_DEEPSPEED_SHARED", "RENAMED", "RESPELLED",
           "to_megatron_deepspeed", "untranslated", "untranslated_note"]

MEGATRON_DEEPSPEED_PIN = ("microsoft/Megatron-DeepSpeed", "f4157bea69f3df8c6cb66f2ebcda66ba03d1288e")
"""The Megatron-DeepSpeed release the flags are written for (2024-12-24)."""

# Megatron-LM flags its parser declares with the same meaning and values.
MEGATRON_DEEPSPEED_SHARED = frozenset({
    "--num-layers", "--hidden-size", "--ffn-hidden-size", "--num-attention-heads", "--kv-channels",
    "--max-position-embeddings", "--swiglu", "--untie-embeddings-and-output-weights", "--seq-length",
    "--micro-batch-size", "--global-batch-size", "--recompute-granularity", "--recompute-method",
    "--recompute-num-layers", "--disable-bias-linear", "--sequence-parallel", "--fp16", "--bf16",
    "--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--rotary-percent", "--attention-dropout",
    "--hidden-dropout", "--optimizer",
})

# Megatron-LM flags it spells otherwise, renamed with their values as they are
RENAMED = {"--num-query-groups": "--num-key-value-heads", "--rotary-base": "--rotary-position-embeddings-theta"}
# Megatron-LM flag -> its value -> Megatron-DeepSpeed's tokens (None: leave it out, the default there); a
# value not listed has no equivalent. "--recompute-modules core_attn" is what its selective recompute does;
# "--context-parallel-size 1": it has no Megatron CP (DeepSpeed-Ulysses is --ds-sequence-parallel-size);
# ALiBi is only in BigScience's fork.
BY_VALUE: dict[str, dict[str | None, tuple[str, ...] | None]] = {
    "--normalization": {"LayerNorm": ("--normalization", "layernorm"), "RMSNorm": ("--normalization", "rmsnorm")},
    "--group-query-attention": {None: None},                       # implied by --num-key-value-heads
    "--position-embedding-type": {"rope": ("--use-rotary-position-embeddings",), "learned_absolute": None,
                                  "none": ("--no-position-embedding",)},
    "--attention-backend": {"flash": ("--use-flash-attn-v2",), "fused": None, "unfused": None, "auto": None,
                            "local": None},
    "--context-parallel-size": {"1": None},
    "--recompute-modules": {"core_attn": None},
}
RESPELLED = frozenset(RENAMED) | frozenset(BY_VALUE)
"""The Megatron-LM flags written otherwise (or left out) for Megatron-DeepSpeed."""


def _groups(args: list[str]) -> list[tuple[str, list[str]]]:
    """(flag, values) pairs of a Megatron argument list."""
    out: list[tuple[str, list[str]]] = []
    for token in args:
        if token.startswith("--"):
            out.append((token, []))
        else:
            out[-1][1].append(token)
    return out


def _respell(flag: str, values: list[str]) -> tuple[str, ...] | None | bool:
    """Megatron-DeepSpeed's tokens for one Megatron-LM flag: a tuple, None (leave it out) or False (no
    equivalent)."""
    if flag in MEGATRON_DEEPSPEED_SHARED:
        return (flag, *values)
    if flag in RENAMED:
        return (RENAMED[flag], *values)
    value = " ".join(values) if values else None
    return BY_VALUE.get(flag, {}).get(value, False)


def to_megatron_deepspeed(args: list[str]) -> list[str]:
    """The Megatron-LM arguments in Megatron-DeepSpeed's spelling; flags without an equivalent stay as they are."""
    out: list[str] = []
    for flag, values in _groups(args):
        tokens = _respell(flag, values)
        if tokens is False:
            out += [flag, *values]
        elif tokens is not None:
            out += list(tokens)
    return out


def untranslated(args: list[str]) -> list[str]:
    """The Megatron-LM flags (with their values) of `args` that Megatron-DeepSpeed has no equivalent of."""
    return [" ".join([flag, *values]) for flag, values in _groups(args) if _respell(flag, values) is False]


def untranslated_note(args: list[str]) -> list[str]:
    """The note for the user when some Megatron-LM flags of the layout have no Megatron-DeepSpeed equivalent."""
    missing = untranslated(args)
    if not missing:
        return []
    repo, commit = MEGATRON_DEEPSPEED_PIN
    note = (f"{repo}@{commit[:7]} has no equivalent of {', '.join(missing)}, kept as written so its parser "
            "names them: run this layout on Megatron-LM (framework megatron), or drop the setting")
    return [note]
