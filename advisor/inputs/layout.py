"""`Layout`: one concrete way to lay a training job over the GPUs.

Degrees follow torchtitan's `ParallelDims` vocabulary: tp, pp, dp, cp, ep; "1 means disabled" for
every degree. Ranks are ordered as Megatron-LM's default "tp-cp-ep-dp-pp" (TP innermost, on the
fastest links; PP outermost). `zero_stage` 1 under Megatron-LM means its distributed optimizer.
"""

from __future__ import annotations

from math import prod
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import InputError

__all__ = ["Layout", "Framework", "Recompute", "Offload"]

Framework = Literal["deepspeed", "megatron", "megatron+deepspeed", "torchtitan"]
Recompute = Literal["none", "selective", "full"]
Offload = Literal["none", "optimizer", "optimizer+params"]

_MAX_DEGREE = 1 << 20


class Layout(BaseModel):
    """A parallel layout. Omitted degrees are 1; an omitted `dp` is derived from the GPU count
    by whoever knows it (`Layout.for_world(world, ...)`, `audit`, `estimate`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    framework: Framework = "megatron"
    """Which framework runs it; legality differs between them."""
    tp: int = Field(1, ge=1, le=_MAX_DEGREE)
    """Tensor-parallel degree (Megatron --tensor-model-parallel-size)."""
    pp: int = Field(1, ge=1, le=_MAX_DEGREE)
    """Pipeline-parallel degree."""
    dp: int | None = Field(None, ge=1, le=_MAX_DEGREE)
    """Data-parallel degree; None: derived as world // (tp * pp * cp)."""
    cp: int = Field(1, ge=1, le=_MAX_DEGREE)
    """Context-parallel degree (sequence split across ranks for attention)."""
    ep: int = Field(1, ge=1, le=_MAX_DEGREE)
    """Expert-parallel degree; folded into dp*cp*tp ranks as Megatron-LM does."""
    etp: int | None = Field(None, ge=1, le=_MAX_DEGREE)
    """Expert tensor-parallel degree; None means tp (Megatron's default)."""
    vpp: int = Field(1, ge=1, le=_MAX_DEGREE)
    """Virtual pipeline stages (model chunks) per pipeline rank; 1 means the plain 1F1B schedule."""
    overlap_p2p_comm: bool = True
    """Overlap pipeline send/recv with compute; Megatron's default (off with
    --no-overlap-p2p-communication). The interleaved schedule needs it, or pp > 2 (M9)."""
    sp: bool = False
    """Megatron sequence parallelism (shards LayerNorm/dropout activations over the TP group)."""
    zero_stage: int = Field(0, ge=0, le=3)
    """DeepSpeed ZeRO stage, or 1 for Megatron's distributed optimizer."""
    micro_batch_size: int = Field(1, ge=1, le=1 << 16)
    """Sequences per GPU per forward pass."""
    num_microbatches: int | None = Field(None, ge=1, le=1 << 24)
    """Micro-batches per step per pipeline (gradient accumulation steps); None: derived from the batch."""
    recompute: Recompute = "none"
    """Activation recomputation granularity."""
    offload: Offload = "none"
    """What ZeRO moves off the GPU."""
    offload_device: Literal["cpu", "nvme"] = "cpu"

    @model_validator(mode="after")
    def _check(self) -> "Layout":
        if self.offload == "none" and self.offload_device != "cpu":
            raise InputError("Layout.offload_device", self.offload_device, "'cpu' (the default) when offload is 'none'")
        return self

    @property
    def model_parallel(self) -> int:
        """Ranks that hold one replica of the model: tp * pp * cp."""
        return self.tp * self.pp * self.cp

    def world(self) -> int | None:
        """tp * pp * cp * dp, or None while dp is not known."""
        return None if self.dp is None else self.model_parallel * self.dp

    def degree_formula(self, world: int) -> str:
        """The world-size product with its values, for messages: "tp(8) * cp(1) * pp(2) * dp(4) = 64 != world(128)".

        With dp omitted it is the remainder that keeps dp from being derived:
        "world(128) % (tp(8) * cp(3) * pp(2)) = 32"."""
        # the degrees whose product is the world, in torchtitan's ParallelDims order; ep is not one
        # (it folds into dp*cp*tp ranks), and dp is left out while it is not known
        world_factors = [("tp", self.tp), ("cp", self.cp), ("pp", self.pp), ("dp", self.dp)]
        known = [(name, value) for name, value in world_factors if value is not None]
        product = prod(value for _, value in known)
        factors = " * ".join(f"{name}({value})" for name, value in known)
        if self.dp is None:
            return f"world({world}) % ({factors}) = {world % product}"
        return f"{factors} = {product} {'==' if product == world else '!='} world({world})"

    def for_world(self, world: int) -> "Layout":
        """This layout with dp derived from the world size; raises when the degrees do not divide it."""
        mp = self.model_parallel
        if self.dp is None:
            if world % mp:
                raise InputError(
                    "Layout.dp", None, "tp*cp*pp dividing the world size, so that the omitted dp is a whole number",
                    self.degree_formula(world),
                )
            return self.model_copy(update={"dp": world // mp})
        return self

    @property
    def id(self) -> str:
        """Compact id in Megatron rank order, degree-1 cp/ep/vpp omitted: "tp8-dp4-pp2-zero1"."""
        parts = [f"tp{self.tp}"]
        if self.cp > 1:
            parts.append(f"cp{self.cp}")
        if self.ep > 1:
            parts.append(f"ep{self.ep}")
        parts.append(f"dp{self.dp if self.dp is not None else '?'}")
        parts.append(f"pp{self.pp}")
        if self.vpp > 1:
            parts.append(f"vpp{self.vpp}")
        parts.append(f"zero{self.zero_stage}")
        return "-".join(parts)
