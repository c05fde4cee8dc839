"""Megatron-DeepSpeed's spelling of the Megatron-LM flags: framework "megatron+deepspeed" runs Megatron's
model code on DeepSpeed's engine, and its `pretrain_gpt.py` parses an older Megatron vocabulary.

Source: microsoft/Megatron-DeepSpeed (now deepspeedai/) megatron/arguments.py at MEGATRON_DEEPSPEED_PIN;
tests/data/frameworks/megatron-deepspeed.json is that parser's option list (benchmarks/validate_exports.py
--snapshot), against which tests check every flag written here. ZeRO and offload live in the DeepSpeed JSON
(`--deepspeed --deepspeed_config`); the ZeRO stage is also a flag (`--zero-stage`: pretrain_gpt.py builds the
model under deepspeed.zero.Init at stage 3), and one pipeline stage runs without DeepSpeed's pipeline engine
(`--no-pipeline-parallel`), which ZeRO-2 and -3 need. Context parallelism is DeepSpeed-Ulysses
(`--ds-sequence-parallel-size`), as the estimate prices it for this framework. A Megatron-LM flag with no
equivalent is refused, naming the audit rule (rules/audit-megatron-deepspeed.toml) that forbids the layout.
"""

from __future__ import annotations

from ..errors import InputError
from .batch import refused

__all__ = ["BY_VALUE", "DEEPSPEED_CONFIG_FILE", "MEGATRON_DEEPSPEED_PIN", "MEGATRON_DEEPSPEED_SHARED", "NO_EQUIVALENT",
           "RENAMED", "RESPELLED", "alibi_note", "flag_groups", "to_megatron_deepspeed"]
MEGATRON_DEEPSPEED_PIN = ("microsoft/Megatron-DeepSpeed", "f4157bea69f3df8c6cb66f2ebcda66ba03d1288e")
"""The Megatron-DeepSpeed release the flags are written for (2024-12-24)."""

# Megatron-LM flags its parser declares with the same meaning and values.
MEGATRON_DEEPSPEED_SHARED = frozenset({
    "--num-layers", "--hidden-size", "--ffn-hidden-size", "--num-attention-heads", "--kv-channels",
    "--max-position-embeddings", "--swiglu", "--untie-embeddings-and-output-weights", "--seq-length",
    "--micro-batch-size", "--global-batch-size", "--recompute-granularity", "--recompute-method",
    "--recompute-num-layers", "--disable-bias-linear", "--sequence-parallel", "--fp16", "--bf16",
    "--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--rotary-percent", "--attention-dropout",
    "--hidden-dropout", "--optimizer", "--sgd-momentum",
})

# Megatron-LM flags it spells otherwise, renamed with their values as they are
RENAMED = {"--num-query-groups": "--num-key-value-heads", "--rotary-base": "--rotary-position-embeddings-theta"}
# Megatron-LM flag -> its value -> Megatron-DeepSpeed's tokens (None: leave it out, the default there).
# "--recompute-modules core_attn" is what its selective recompute does; "--fp8-recipe delayed" is the only
# scaling it has (DelayedScaling in megatron/model/transformer.py), set with --fp8-hybrid / --fp8-e4m3 and its
# Transformer Engine layer; ALiBi is BigScience's fork's spelling (megatron_notes names the fork: f4157be has
# no ALiBi).
BY_VALUE: dict[str, dict[str | None, tuple[str, ...] | None]] = {
    "--normalization": {"LayerNorm": ("--normalization", "layernorm"), "RMSNorm": ("--normalization", "rmsnorm")},
    "--group-query-attention": {None: None},                       # implied by --num-key-value-heads
    "--position-embedding-type": {"rope": ("--use-rotary-position-embeddings",), "learned_absolute": None,
                                  "none": ("--no-position-embedding",),
                                  "alibi": ("--position-embedding-type", "alibi")},
    "--attention-backend": {"flash": ("--use-flash-attn-v2",), "fused": None, "unfused": None, "auto": None,
                            "local": None},
    "--context-parallel-size": {"1": None},
    "--recompute-modules": {"core_attn": None},
    "--fp8-format": {"hybrid": ("--fp8-hybrid", "--transformer-impl", "transformer_engine"),
                     "e4m3": ("--fp8-e4m3", "--transformer-impl", "transformer_engine")},
    "--fp8-recipe": {"delayed": None},
}
RESPELLED = frozenset(RENAMED) | frozenset(BY_VALUE)
"""The Megatron-LM flags written otherwise (or left out) for Megatron-DeepSpeed."""

_MODEL_CODE = "megatron-deepspeed.model-code"
_MOE = "megatron-deepspeed.no-megatron-moe"
_FP8 = "megatron-deepspeed.fp8-te-layer"
_SETTINGS = "megatron-deepspeed.run-settings"
NO_EQUIVALENT: dict[str, str] = {
    **dict.fromkeys(("--multi-latent-attention", "--q-lora-rank", "--kv-lora-rank", "--qk-head-dim",
                     "--qk-pos-emb-head-dim", "--v-head-dim", "--rope-type", "--qk-layernorm", "--add-qkv-bias",
                     "--attention-output-gate", "--mtp-num-layers", "--mtp-hybrid-override-pattern", "--spec",
                     "--hybrid-override-pattern", "--experimental-attention-variant", "--use-rope-scaling",
                     "--rope-scaling-factor", "--rotary-scaling-factor", "--yarn-original-max-position-embeddings",
                     "--position-embedding-type", "--window-size", "--window-attn-skip-freq", "--softmax-type"),
                    _MODEL_CODE),
    **dict.fromkeys(("--num-experts", "--expert-model-parallel-size", "--expert-tensor-parallel-size",
                     "--overlap-moe-expert-parallel-comm"), _MOE),
    **dict.fromkeys(("--fp8-format", "--fp8-recipe", "--fp4-format", "--fp4-recipe"), _FP8),
    **dict.fromkeys(("--tp-comm-overlap", "--cpu-offloading-num-layers", "--fp8-param-gather", "--fp4-param-gather",
                     "--grad-reduce-in-bf16"), _SETTINGS),
    "--cuda-graph-impl": "layout.cuda-graphs-need-megatron",
}
"""The Megatron-LM flags (or values) Megatron-DeepSpeed has no equivalent of, and the audit rule that refuses a
layout needing them (prefixes: --moe-*, --mamba-*, --linear-*, --dsa-* as their group's first flag)."""
_PREFIXES = {"--moe-": _MOE, "--mamba-": _MODEL_CODE, "--linear-": _MODEL_CODE, "--dsa-": _MODEL_CODE}

DEEPSPEED_CONFIG_FILE = "ds_config.json"
"""The DeepSpeed JSON the command names (`--format deepspeed`, saved beside it)."""


def flag_groups(args: list[str]) -> list[tuple[str, list[str]]]:
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
    if flag == "--context-parallel-size" and values != ["1"]:
        return ("--ds-sequence-parallel-size", *values)      # DeepSpeed-Ulysses, as the estimate prices it
    value = " ".join(values) if values else None
    return BY_VALUE.get(flag, {}).get(value, False)


def _rule(flag: str) -> str | None:
    return NO_EQUIVALENT.get(flag) or next((r for p, r in _PREFIXES.items() if flag.startswith(p)), None)


def to_megatron_deepspeed(args: list[str], layout, model) -> list[str]:
    """The Megatron-LM arguments in Megatron-DeepSpeed's spelling, then its DeepSpeed flags: the ZeRO stage,
    --no-pipeline-parallel for one stage, and the DeepSpeed JSON (DEEPSPEED_CONFIG_FILE). A flag with no
    equivalent raises InputError naming the audit rule that forbids the layout."""
    out: list[str] = []
    if "--fp8-format" in args:
        _te_layer(model)
    for flag, values in flag_groups(args):
        tokens = _respell(flag, values)
        if tokens is False:
            rule = _rule(flag)
            written = " ".join([flag, *values])
            if rule is None:        # the recompute modules: its selective recompute is the attention core only
                raise InputError("Assumptions.recompute_modules" if flag == "--recompute-modules" else flag, written,
                                 "a setting Megatron-DeepSpeed has", "its selective recompute is the attention "
                                 "core only (megatron/model/transformer.py CoreAttention checkpointing)")
            repo, commit = MEGATRON_DEEPSPEED_PIN
            raise refused(flag, written, f"a flag {repo}@{commit[:7]} declares", rule,
                          f"its parser has no equivalent of {written}")
        if tokens is not None:
            out += list(tokens)
    if layout.cp > 1:
        _ulysses(layout, model.heads)
    if model.position_embedding == "alibi":
        out = _bigscience_fork(out, layout, model)
    out += ["--zero-stage", str(layout.zero_stage)]
    if layout.pp == 1:
        out.append("--no-pipeline-parallel")
    return out + ["--deepspeed", "--deepspeed_config", DEEPSPEED_CONFIG_FILE]


# BigScience's fork, the Megatron-DeepSpeed with ALiBi (bigscience-workshop/Megatron-DeepSpeed@754cf21
# megatron/arguments.py): LayerNorm is its only norm (no --normalization), it has no FlashAttention flag, no
# Megatron sequence parallelism and no selective recompute (rules megatron-deepspeed.alibi-bigscience-fork and
# megatron-deepspeed.alibi-no-flash-attention say so before an export); full recompute is
# --checkpoint-activations, every --checkpoint-num-layers layers (default 1).
_NOT_IN_FORK = {"--normalization": 1, "--use-flash-attn-v2": 0, "--recompute-method": 1}


def _bigscience_fork(tokens: list[str], layout, model) -> list[str]:
    """`tokens` in the fork's spelling: the flags it does not declare left out (with their value), full
    recompute as its --checkpoint-activations. What the fork cannot run at all raises, naming the rule."""
    lacks = [what for what, bad in (("sequence parallelism", layout.sp), ("selective recompute",
                                    layout.recompute == "selective"), (f"{model.norm}", model.norm != "layernorm"))
             if bad]
    if lacks:
        raise refused("Layout", layout.id, "sp off, recompute none or full and LayerNorm for ALiBi under "
                      "Megatron-DeepSpeed", "megatron-deepspeed.alibi-bigscience-fork",
                      f"BigScience's fork, the one with ALiBi, has no {', '.join(lacks)}")
    out, skip = [], 0
    for i, token in enumerate(tokens):
        if skip:
            skip -= 1
        elif token in _NOT_IN_FORK:
            skip = _NOT_IN_FORK[token]
        elif token == "--recompute-granularity":       # "full": selective was refused above
            out.append("--checkpoint-activations")
            skip = 1
        elif token == "--recompute-num-layers":
            out += ["--checkpoint-num-layers", tokens[i + 1]]
            skip = 1
        else:
            out.append(token)
    return out


def _te_layer(model) -> None:
    """Its FP8 runs in transformer_engine.pytorch.TransformerLayer, built with TE's LayerNorm, GeLU and biases and
    asserting 'Transformer_engine does not support GQA' (megatron/model/transformer.py)."""
    odd = [what for what, bad in (("GQA", model.kv_heads != model.heads), ("SwiGLU", model.activation != "gelu"),
                                  ("RMSNorm", model.norm != "layernorm"), ("no biases", not model.bias)) if bad]
    if odd:
        raise refused("Training.precision", "fp8", "bf16 for this model under Megatron-DeepSpeed", _FP8,
                      f"its FP8 path is Transformer Engine's TransformerLayer, which has no {', '.join(odd)}")


def _ulysses(layout, heads: int) -> None:
    """DeepSpeed-Ulysses' limits in Megatron-DeepSpeed (megatron/initialize.py, megatron/model/transformer.py)."""
    if heads % layout.cp:
        raise refused("Layout.cp", layout.cp, f"a divisor of the {heads} attention heads under Megatron-DeepSpeed",
                      "deepspeed.ulysses-heads-divisible-by-cp",
                      "ParallelAttention asserts num_attention_heads % sequence-parallel world size == 0")
    if layout.sp and layout.tp > 1:
        raise refused("Layout.sp", True, "False with cp > 1 under Megatron-DeepSpeed",
                      "megatron-deepspeed.ulysses-not-with-sequence-parallel",
                      "_initialize_distributed raises: DeepSpeed's sequence parallel 'is not compatible with "
                      "Megatron-LM's sequence parallel'")


def alibi_note(args: list[str]) -> list[str]:
    """ALiBi runs on BigScience's fork only: the note that says so."""
    if "alibi" not in args:
        return []
    repo, commit = MEGATRON_DEEPSPEED_PIN
    return [f"--position-embedding-type alibi is the spelling of BigScience's fork (bigscience-workshop/"
            f"Megatron-DeepSpeed, which trained BLOOM with ALiBi; megatron/enums.py @ 754cf21): run this command "
            f"there, since {repo}@{commit[:7]} has no ALiBi; the command is in the fork's spelling (no "
            f"--normalization: LayerNorm is its only norm; no FlashAttention or sequence-parallel flag: it has neither)"]
