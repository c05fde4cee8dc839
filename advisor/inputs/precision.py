"""Training precisions as the frameworks name them, and what each one means for the cost model.

Transformer Engine runs the linear layers (QKV, output projection, FC1, FC2, the experts' GEMMs)
in the low-precision format; the attention core, the norms, the router and the output layer stay
16-bit (TE `fp8_autocast` / `autocast` wraps the transformer layers; Megatron-Core's output layer is
a `tensor_parallel.ColumnParallelLinear`, not a TE module: megatron/core/models/gpt/gpt_model.py).
Megatron-LM names the recipes `--fp8-recipe delayed|tensorwise|blockwise|mxfp8` and
`--fp4-format e2m1 --fp4-recipe nvfp4` (megatron/training/arguments.py `_add_transformer_engine_args`);
Megatron-Bridge's performance tables call them FP8-DS, FP8-CS, FP8-MX and NVFP4.

Scaling factors (TE docs, "Using FP8 and FP4 with Transformer Engine"; OCP Microscaling Formats
(MX) v1.0 spec, 2023):
- delayed / tensorwise: one fp32 scale per tensor (nothing per element);
- blockwise (DeepSeek-V3 style, Liu et al. 2024 §3.3.2): one fp32 scale per 1 x 128 activation
  tile (4/128 byte per element) and per 128 x 128 weight block;
- MXFP8: one E8M0 (1 byte) scale per 32 consecutive elements (1/32 byte per element);
- NVFP4: E2M1 values (half a byte) with one E4M3 (1 byte) scale per 16 elements (1/16 byte) and a
  per-tensor fp32 scale.
MX and NV scales run along the GEMM's reduction dimension, so a tensor used by a forward GEMM and
by the transposed backward GEMM is quantised twice (a row-wise and a column-wise copy); a
tensor-wise FP8 transpose is the same bytes transposed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Precision", "Recipe", "RECIPES", "recipe", "megatron_adam_master_bytes", "megatron_adam_dtypes"]

Precision = Literal["bf16", "fp16", "fp8", "fp8-delayed", "fp8-cs", "fp8-blockwise", "mxfp8", "nvfp4"]
"""`Training.precision`. "fp8" is the framework's default FP8 recipe: Transformer Engine's
DelayedScaling under Megatron-LM (`--fp8-recipe` default "delayed"), the float8 converter's
current tensor-wise scaling under torchtitan; both are priced alike."""


@dataclass(frozen=True)
class Recipe:
    """What one `Training.precision` runs."""

    name: str
    gemm: Literal["16-bit", "fp8", "fp4"]
    """Format of the linear-layer GEMM inputs (the tensor-core peak they run at)."""
    scaling: Literal["none", "tensor-delayed", "tensor-current", "block-128", "mx-32", "nv-16"]
    value_bytes: float
    """Bytes of one quantised element (1 for FP8, 0.5 for FP4; 2 for the 16-bit formats)."""
    scale_bytes: float
    """Scaling-factor bytes per quantised element (see the module docstring)."""
    weight_copies: int
    """Quantised copies of each weight Transformer Engine keeps for the forward and backward GEMMs
    (2 where the scales follow the reduction dimension: MX, NV)."""
    needs: Literal["fp8", "block-scaled", None]
    """Tensor cores the GPU must have: FP8 (Hopper, Ada, Blackwell, MI300) or block-scaled MX/NV
    formats (Blackwell; GPU.peak_flops_fp4 set)."""
    megatron_flags: tuple[str, ...]
    """Megatron-LM flags after --bf16 (megatron/training/arguments.py)."""
    te_recipe: str = ""
    """Transformer Engine's recipe class (transformer_engine/common/recipe/__init__.py), for stacks whose
    model code sets it itself (DeepSpeed, Hugging Face)."""

    @property
    def low_precision(self) -> bool:
        return self.gemm != "16-bit"


_TE_RECIPES = {"tensor-delayed": "DelayedScaling", "tensor-current": "Float8CurrentScaling",
               "block-128": "Float8BlockScaling", "mx-32": "MXFP8BlockScaling"}


def _fp8(name, scaling, scale_bytes, copies, needs, recipe_flag, fmt):
    return Recipe(name, "fp8", scaling, 1.0, scale_bytes, copies, needs,
                  ("--fp8-format", fmt, "--fp8-recipe", recipe_flag), _TE_RECIPES[scaling])


# FP8 formats as Megatron-Bridge's mixed-precision recipes set them (src/megatron/bridge/training/
# mixed_precision.py: delayed and current scaling "hybrid", E4M3 forward and E5M2 gradients; MXFP8
# "e4m3"); blockwise E4M3 throughout, as DeepSeek-V3 trained (Liu et al. 2024 §3.3.2).


RECIPES: dict[str, Recipe] = {
    "bf16": Recipe("bf16", "16-bit", "none", 2.0, 0.0, 0, None, ()),
    "fp16": Recipe("fp16", "16-bit", "none", 2.0, 0.0, 0, None, ()),
    "fp8": _fp8("fp8", "tensor-delayed", 0.0, 1, "fp8", "delayed", "hybrid"),
    "fp8-delayed": _fp8("fp8-delayed", "tensor-delayed", 0.0, 1, "fp8", "delayed", "hybrid"),
    "fp8-cs": _fp8("fp8-cs", "tensor-current", 0.0, 1, "fp8", "tensorwise", "hybrid"),
    "fp8-blockwise": _fp8("fp8-blockwise", "block-128", 4.0 / 128.0, 1, "fp8", "blockwise", "e4m3"),
    "mxfp8": _fp8("mxfp8", "mx-32", 1.0 / 32.0, 2, "block-scaled", "mxfp8", "e4m3"),
    "nvfp4": Recipe("nvfp4", "fp4", "nv-16", 0.5, 1.0 / 16.0, 2, "block-scaled",
                    ("--fp4-format", "e2m1", "--fp4-recipe", "nvfp4"), "NVFP4BlockScaling"),
}


def recipe(precision: str) -> Recipe:
    """The Recipe of a `Training.precision` value (validated by the Precision literal)."""
    return RECIPES[precision]


# Megatron-Core's Adam state per parameter (megatron/core/optimizer/optimizer_config.py and __init__.py
# @ core_v0.16.1 55ac7082; arguments.py --use-precision-aware-optimizer, --exp-avg-dtype,
# --exp-avg-sq-dtype). Without the precision-aware optimizer: an fp32 master copy, m and v, 12 bytes.
# With it (which asserts the distributed optimizer), m and v take --exp-avg-dtype / --exp-avg-sq-dtype,
# and the master copy is kept one of two ways (OptimizerConfig.use_precision_aware_optimizer_no_fp8_or_ds_fp8):
# - 16-bit GEMMs or delayed-scaling FP8: Transformer Engine's FusedAdam holds the master, and with
#   store_param_remainders (default True, TE >= 2.1) only the low 16 bits the bf16 weight lacks: 2 bytes;
# - current-scaling, blockwise, MX or NV recipes: Megatron-Core keeps fp32 main params: 4 bytes.
_MOMENT_BYTES = {"fp32": 4, "bf16": 2}
_MOMENTS = (("fp32", "fp32"), ("bf16", "fp32"), ("bf16", "bf16"))   # m gives way before v (v is the squared one)


def megatron_adam_master_bytes(precision: str) -> int:
    """Bytes of the master weight under Megatron-Core's precision-aware optimizer (see above)."""
    r = recipe(precision)
    return 2 if not r.low_precision or r.scaling == "tensor-delayed" else 4


def megatron_adam_dtypes(state_bytes: float, precision: str) -> tuple[str, ...] | None:
    """(exp_avg, exp_avg_sq) dtypes under --use-precision-aware-optimizer that hold `state_bytes` per
    parameter with `precision`'s master copy; () for 12 bytes, the default optimizer (no flag); None
    when no combination of Megatron-Core's dtypes gives that many bytes."""
    if state_bytes == 12:
        return ()
    master = megatron_adam_master_bytes(precision)
    for m, v in _MOMENTS:
        if master + _MOMENT_BYTES[m] + _MOMENT_BYTES[v] == state_bytes:
            return (m, v)
    return None
