"""`Layout`: one concrete way to lay a training job over the GPUs.

Degrees follow torchtitan's `ParallelDims` vocabulary: tp, pp, dp, cp, ep; "1 means disabled" for
every degree. Ranks are ordered as Megatron-LM's default "tp-cp-ep-dp-pp" (TP innermost, on the
fastest links; PP outermost). `zero_stage` 1 under Megatron-LM means its distributed optimizer.
"""

from __future__ import annotations

import re
from math import prod
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, computed_field, model_validator

from ..errors import InputError
from .screen import screen

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

    @model_validator(mode="before")
    @classmethod
    def _screen(cls, data: object) -> object:
        data = screen(cls, data)
        if isinstance(data, dict) and "id" in data:         # a JSON round trip: the id is derived, not a field
            data = dict(data)
            given = data.pop("id")
            derived = cls(**data).id
            if given != derived:
                raise InputError("Layout.id", given, f"the id of the other fields given, {derived!r}",
                                 "the id is derived from the fields: leave it out when you change one, "
                                 "or build the layout from its id alone with Layout.parse")
        return data

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

    @computed_field(description='The layout\'s id, which Layout.parse reads back: the degrees in Megatron rank '
                                'order, then the options that differ from their defaults, e.g. '
                                '"tp8-dp4-pp2-zero1-sp-nmb128"; another framework than Megatron-LM is a prefix '
                                '("deepspeed/tp1-dp64-pp1-zero3").')
    @property
    def id(self) -> str:
        """The layout's id: readable, short in the common case, and distinct for distinct layouts
        (`Layout.parse` inverts it). Traces key candidates by it.

        The degree part is in Megatron rank order; options follow in the fixed order of this table,
        each written only when its field differs from the field's default:

            token          field                                  written when
            <framework>/   framework                              not "megatron" (a prefix)
            tp<n>          tp                                     always
            cp<n>          cp                                     > 1
            ep<n>          ep                                     > 1
            dp<n> | dp?    dp (? while None, derived later)       always
            pp<n>          pp                                     always
            vpp<n>         vpp                                    > 1
            zero<n>        zero_stage                             always
            etp<n>         etp                                    not None (even when equal to tp)
            sp             sp                                     True
            mbs<n>         micro_batch_size                       != 1
            nmb<n>         num_microbatches                       not None
            rc:<r>         recompute: selective | full            not "none"
            offload:<o>    offload: optimizer | optimizer+params  not "none"
            @nvme          offload_device, after offload:<o>      "nvme"
            nop2poverlap   overlap_p2p_comm                       False

        Tokens are joined by "-"; <n> is a decimal without leading zeros. Examples:
        "tp8-dp4-pp2-zero1-sp-nmb128", "deepspeed/tp1-dp64-pp1-zero3-offload:optimizer+params@nvme",
        "tp2-ep8-dp32-pp1-vpp4-zero1-etp1".

        An omitted token means its field's default, so `parse` needs no context. The framework is a
        prefix, not a suffix, because it scopes everything after it (legality differs by framework)
        and one family's ids sort together; Megatron, the default, has none, so a Megatron id begins
        with the degree part as it always did. `etp` is written whenever it is set: etp=None ("as
        tp") and etp=tp mean the same but are different field values, and folding one into the other
        in a validator would change what `model_dump` returns for explicit input (planned MoE
        layouts carry etp=1 even at tp=1), so the id tells them apart: "tp8-...-etp8" is the
        explicit spelling of the default.
        """
        prefix = "" if self.framework == "megatron" else f"{self.framework}/"
        return prefix + "-".join(self._degree_tokens() + self._option_tokens())

    def _degree_tokens(self) -> list[str]:
        """The id's degree part, in Megatron rank order (the table of `id`)."""
        parts = [f"tp{self.tp}"]
        if self.cp > 1:
            parts.append(f"cp{self.cp}")
        if self.ep > 1:
            parts.append(f"ep{self.ep}")
        parts.append(f"dp{self.dp if self.dp is not None else '?'}")
        parts.append(f"pp{self.pp}")
        if self.vpp > 1:
            parts.append(f"vpp{self.vpp}")
        return parts

    def _option_tokens(self) -> list[str]:
        """The id's options, in the table's order, each only where it differs from its default."""
        parts = [f"zero{self.zero_stage}"]
        if self.etp is not None:
            parts.append(f"etp{self.etp}")
        if self.sp:
            parts.append("sp")
        if self.micro_batch_size != 1:
            parts.append(f"mbs{self.micro_batch_size}")
        if self.num_microbatches is not None:
            parts.append(f"nmb{self.num_microbatches}")
        if self.recompute != "none":
            parts.append(f"rc:{self.recompute}")
        if self.offload != "none":
            parts.append(f"offload:{self.offload}" + ("@nvme" if self.offload_device == "nvme" else ""))
        if not self.overlap_p2p_comm:
            parts.append("nop2poverlap")
        return parts

    @classmethod
    def parse(cls, text: str) -> "Layout":
        """The layout whose `id` is `text`; raises InputError naming the first token that is not
        where the grammar (see `id`) wants it. Only canonical ids parse, so `parse(s).id == s`."""
        if not isinstance(text, str):
            raise InputError("layout id", text, ID_GRAMMAR)
        framework, slash, rest = text.rpartition("/")
        if not slash:
            framework = "megatron"
        elif framework not in _PREFIXED_FRAMEWORKS:
            raise InputError("layout id", text, ID_GRAMMAR,
                             f"bad token {framework + '/'!r}: the prefix is one of "
                             f"{[f + '/' for f in _PREFIXED_FRAMEWORKS]}, or none for megatron")
        fields: dict[str, object] = {"framework": framework}
        token_of: dict[str, str] = {}     # field -> the token that set it, for the range errors below
        tokens = rest.split("-")
        at = 0                      # the next grammar slot a token may fill
        for token in tokens:
            while at < len(_SLOTS) and not _SLOTS[at][1].fullmatch(token):
                if _SLOTS[at][2]:   # a required slot is missing
                    raise InputError("layout id", text, ID_GRAMMAR, _misplaced(token, at))
                at += 1
            if at == len(_SLOTS):
                raise InputError("layout id", text, ID_GRAMMAR, _misplaced(token, None))
            name, pattern, required, read = _SLOTS[at]
            value = read(pattern.fullmatch(token))
            if not required and value == _DEFAULT_OF[name]:   # cp1, ep1, vpp1, mbs1: not canonical
                raise InputError("layout id", text, ID_GRAMMAR,
                                 f"bad token {token!r}: {name}={value!r} is the default, written by omitting the token")
            fields.update(value if isinstance(value, dict) else {name: value})
            token_of[name] = token
            at += 1
        missing = [name for name, _, required, _ in _SLOTS[at:] if required]
        if missing:
            raise InputError("layout id", text, ID_GRAMMAR, f"the {missing[0]} token is missing after {tokens[-1]!r}")
        try:
            return cls(**fields)
        except ValidationError as error:
            first = error.errors()[0]
            field = str(first["loc"][0]) if first["loc"] else ""
            raise InputError("layout id", text, ID_GRAMMAR,
                             f"bad token {token_of.get(field, text)!r}: {field}: {first['msg']}") from None


_PREFIXED_FRAMEWORKS = [f for f in get_args(Framework) if f != "megatron"]
_RECOMPUTES_WRITTEN = [r for r in get_args(Recompute) if r != "none"]
_OFFLOADS_WRITTEN = [o for o in get_args(Offload) if o != "none"]
_NUMBER = r"([1-9][0-9]*)"


def _number(match: re.Match) -> int:
    digits = match.group(1)
    # Past 12 digits any degree or count is out of range: say so through the field's bound (int()
    # of thousands of digits raises ValueError instead).
    return int(digits) if len(digits) <= 12 else 10**12


def _offload(match: re.Match) -> dict:
    return {"offload": match.group(1), "offload_device": "nvme" if match.group(2) else "cpu"}


def _alternatives(values) -> str:
    return "|".join(re.escape(v) for v in values)


# The id's grammar, slot by slot in the order `Layout.id` writes them:
# (field, token pattern, required, value of the match).
_SLOTS: list[tuple[str, re.Pattern, bool, object]] = [
    ("tp", re.compile(f"tp{_NUMBER}"), True, _number),
    ("cp", re.compile(f"cp{_NUMBER}"), False, _number),
    ("ep", re.compile(f"ep{_NUMBER}"), False, _number),
    ("dp", re.compile(rf"dp(?:{_NUMBER}|\?)"), True, lambda m: None if m.group(1) is None else _number(m)),
    ("pp", re.compile(f"pp{_NUMBER}"), True, _number),
    ("vpp", re.compile(f"vpp{_NUMBER}"), False, _number),
    ("zero_stage", re.compile("zero([0-3])"), True, lambda m: int(m.group(1))),
    ("etp", re.compile(f"etp{_NUMBER}"), False, _number),
    ("sp", re.compile("sp"), False, lambda m: True),
    ("micro_batch_size", re.compile(f"mbs{_NUMBER}"), False, _number),
    ("num_microbatches", re.compile(f"nmb{_NUMBER}"), False, _number),
    ("recompute", re.compile(f"rc:({_alternatives(_RECOMPUTES_WRITTEN)})"), False, lambda m: m.group(1)),
    ("offload", re.compile(f"offload:({_alternatives(_OFFLOADS_WRITTEN)})(@nvme)?"), False, _offload),
    ("overlap_p2p_comm", re.compile("nop2poverlap"), False, lambda m: False),
]
_DEFAULT_OF = {name: Layout.model_fields[name].default for name, *_ in _SLOTS}

ID_GRAMMAR = (
    "a layout id: an optional framework prefix ('deepspeed/', 'megatron+deepspeed/', 'torchtitan/'; none for "
    "megatron), then '-'-joined tokens in this order: tp<n>, cp<n> (if > 1), ep<n> (if > 1), dp<n> or dp?, "
    "pp<n>, vpp<n> (if > 1), zero<0-3>, then only the non-default options: etp<n>, sp, mbs<n> (if != 1), "
    "nmb<n>, rc:selective|rc:full, offload:optimizer|offload:optimizer+params (with @nvme for NVMe), "
    "nop2poverlap; e.g. 'tp8-dp4-pp2-zero1-sp-nmb128'"
)


def _misplaced(token: str, at: int | None) -> str:
    """Why `token` cannot stand where it does: a slot it fits that comes earlier, or nothing it fits."""
    for index, (name, pattern, _, _) in enumerate(_SLOTS):
        if pattern.fullmatch(token):
            if at is not None and _SLOTS[at][2]:
                return f"bad token {token!r}: {_SLOTS[at][0]} is missing before it"
            return f"bad token {token!r}: {name} is out of order or repeated"
    if at is not None and _SLOTS[at][2]:
        return f"bad token {token!r}: wanted the {_SLOTS[at][0]} token here"
    return f"bad token {token!r}: not a token of the grammar"
