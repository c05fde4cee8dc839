"""`Layout`: one concrete way to lay a training job over the GPUs.

Degrees follow torchtitan's `ParallelDims` vocabulary: tp, pp, dp, cp, ep; "1 means disabled" for
every degree. Ranks are ordered as Megatron-LM's default "tp-cp-ep-dp-pp" (TP innermost, on the
fastest links; PP outermost). `zero_stage` 1 under Megatron-LM means its distributed optimizer.
"""

from __future__ import annotations

import re
from math import prod
from typing import Any, Callable, Literal, NamedTuple, get_args

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
        (`Layout.parse` inverts it). Traces key candidates by it. Its grammar is stated once, in
        `_SLOTS` below: the tokens in their order, each with when it is written (`ID_GRAMMAR` says the
        same in words, generated from it). The degree part is in Megatron rank order; an omitted
        option means its field's default, so `parse` needs no context. Examples:
        "tp8-dp4-pp2-zero1-sp-nmb128", "deepspeed/tp1-dp64-pp1-zero3-offload:optimizer+params@nvme",
        "tp2-ep8-dp32-pp1-vpp4-zero1-etp1".

        The framework is a prefix, not a suffix, because it scopes everything after it (legality
        differs by framework) and one family's ids sort together; Megatron, the default, has none.
        `etp` is written whenever it is set: etp=None ("as tp") and etp=tp mean the same but are
        different field values, and folding one into the other in a validator would change what
        `model_dump` returns for explicit input (planned MoE layouts carry etp=1 even at tp=1), so the
        id tells them apart: "tp8-...-etp8" is the explicit spelling of the default.
        """
        prefix = "" if self.framework == "megatron" else f"{self.framework}/"
        return prefix + "-".join(token for token in (slot.write(self) for slot in _SLOTS) if token is not None)

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
            while at < len(_SLOTS) and not _SLOTS[at].pattern.fullmatch(token):
                if _SLOTS[at].required:   # a required slot is missing
                    raise InputError("layout id", text, ID_GRAMMAR, _misplaced(token, at))
                at += 1
            if at == len(_SLOTS):
                raise InputError("layout id", text, ID_GRAMMAR, _misplaced(token, None))
            name, _, pattern, required, read, _ = _SLOTS[at]
            value = read(pattern.fullmatch(token))
            if not required and value == _DEFAULT_OF[name]:   # cp1, ep1, vpp1, mbs1: not canonical
                raise InputError("layout id", text, ID_GRAMMAR,
                                 f"bad token {token!r}: {name}={value!r} is the default, written by omitting the token")
            fields.update(value if isinstance(value, dict) else {name: value})
            token_of[name] = token
            at += 1
        missing = [slot.field for slot in _SLOTS[at:] if slot.required]
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


class _Slot(NamedTuple):
    """One token of a layout id: its field, its spelling in ID_GRAMMAR, the token's pattern, whether
    every id holds it, the field value a match reads back as, and the token a layout writes (None:
    the field is at its default and the token is left out)."""

    field: str
    spelling: str
    pattern: re.Pattern
    required: bool
    read: Callable[[re.Match], Any]
    write: Callable[[Layout], str | None]


def _offload_token(layout: Layout) -> str | None:
    if layout.offload == "none":
        return None
    return f"offload:{layout.offload}" + ("@nvme" if layout.offload_device == "nvme" else "")


# The id's grammar, the one statement of it: slot by slot in the order `Layout.id` writes them and
# `Layout.parse` reads them; the first seven are the degree part and the ZeRO stage, the rest options.
_SLOTS: list[_Slot] = [
    _Slot("tp", "tp<n>", re.compile(f"tp{_NUMBER}"), True, _number, lambda x: f"tp{x.tp}"),
    _Slot("cp", "cp<n> (if > 1)", re.compile(f"cp{_NUMBER}"), False, _number,
          lambda x: f"cp{x.cp}" if x.cp > 1 else None),
    _Slot("ep", "ep<n> (if > 1)", re.compile(f"ep{_NUMBER}"), False, _number,
          lambda x: f"ep{x.ep}" if x.ep > 1 else None),
    _Slot("dp", "dp<n> or dp?", re.compile(rf"dp(?:{_NUMBER}|\?)"), True,
          lambda m: None if m.group(1) is None else _number(m), lambda x: f"dp{x.dp if x.dp is not None else '?'}"),
    _Slot("pp", "pp<n>", re.compile(f"pp{_NUMBER}"), True, _number, lambda x: f"pp{x.pp}"),
    _Slot("vpp", "vpp<n> (if > 1)", re.compile(f"vpp{_NUMBER}"), False, _number,
          lambda x: f"vpp{x.vpp}" if x.vpp > 1 else None),
    _Slot("zero_stage", "zero<0-3>", re.compile("zero([0-3])"), True, lambda m: int(m.group(1)),
          lambda x: f"zero{x.zero_stage}"),
    _Slot("etp", "etp<n>", re.compile(f"etp{_NUMBER}"), False, _number,
          lambda x: f"etp{x.etp}" if x.etp is not None else None),
    _Slot("sp", "sp", re.compile("sp"), False, lambda m: True, lambda x: "sp" if x.sp else None),
    _Slot("micro_batch_size", "mbs<n> (if != 1)", re.compile(f"mbs{_NUMBER}"), False, _number,
          lambda x: f"mbs{x.micro_batch_size}" if x.micro_batch_size != 1 else None),
    _Slot("num_microbatches", "nmb<n>", re.compile(f"nmb{_NUMBER}"), False, _number,
          lambda x: f"nmb{x.num_microbatches}" if x.num_microbatches is not None else None),
    _Slot("recompute", "|".join(f"rc:{r}" for r in _RECOMPUTES_WRITTEN),
          re.compile(f"rc:({_alternatives(_RECOMPUTES_WRITTEN)})"), False, lambda m: m.group(1),
          lambda x: f"rc:{x.recompute}" if x.recompute != "none" else None),
    _Slot("offload", "|".join(f"offload:{o}" for o in _OFFLOADS_WRITTEN) + " (with @nvme for NVMe)",
          re.compile(f"offload:({_alternatives(_OFFLOADS_WRITTEN)})(@nvme)?"), False, _offload, _offload_token),
    _Slot("overlap_p2p_comm", "nop2poverlap", re.compile("nop2poverlap"), False, lambda m: False,
          lambda x: None if x.overlap_p2p_comm else "nop2poverlap"),
]
_DEFAULT_OF = {slot.field: Layout.model_fields[slot.field].default for slot in _SLOTS}

ID_GRAMMAR = (
    "a layout id: an optional framework prefix (" + ", ".join(f"'{f}/'" for f in _PREFIXED_FRAMEWORKS)
    + "; none for megatron), then '-'-joined tokens in this order: " + ", ".join(s.spelling for s in _SLOTS[:7])
    + ", then only the non-default options: " + ", ".join(s.spelling for s in _SLOTS[7:])
    + "; e.g. 'tp8-dp4-pp2-zero1-sp-nmb128'"
)


def _misplaced(token: str, at: int | None) -> str:
    """Why `token` cannot stand where it does: a slot it fits that comes earlier, or nothing it fits."""
    for slot in _SLOTS:
        if slot.pattern.fullmatch(token):
            if at is not None and _SLOTS[at].required:
                return f"bad token {token!r}: {_SLOTS[at].field} is missing before it"
            return f"bad token {token!r}: {slot.field} is out of order or repeated"
    if at is not None and _SLOTS[at].required:
        return f"bad token {token!r}: wanted the {_SLOTS[at].field} token here"
    return f"bad token {token!r}: not a token of the grammar"
