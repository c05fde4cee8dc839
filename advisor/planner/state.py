"""The search's working state, by name: what the coarse pass learned of each shape, and what the fine
pass learned of each variant. Private to one search (search.Search); nothing outside it reads them."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from operator import itemgetter
from typing import NamedTuple

from ..costmodel.sizing import Sized
from ..inputs.layout import Layout
from .space import Base, Shape


class Variant(NamedTuple):
    """One (micro-batch, virtual stages) variant of a shape: what the fine pass sizes and times."""
    base: Base
    mbs: int
    vpp: int


class Option(NamedTuple):
    """A ZeRO stage and offload level: what a variant is sized with besides its recompute level."""
    zero: int
    offload: str


class Sizings(NamedTuple):
    """One (shape, micro-batch, ZeRO, offload) option's sizings: its layout at the first recompute
    index sized (`start`), and {recompute index: (layout, sized)} for every index sized so far."""
    base: Layout
    start: int
    at: dict[int, tuple[Layout, Sized]]


class Parked(NamedTuple):
    """An option sized but not timed: it needs recompute index `level`, whose floor (s) is above the
    threshold it was sized under; a later, larger threshold times it."""
    floor: float
    sizings: Sizings
    level: int


@dataclass
class Coarse:
    """What the coarse pass learned, per base (space.Base): its (micro-batch, vpp) options
    (`variants`); for those that fit, their step-time floors (s), the least recompute index each
    (ZeRO, offload) option needed (`levels`), the layout to build variants from (`probe`); and each
    (base, vpp)'s shape (`by_vpp`); each base's variants with their floors (`by_base`, once pending())."""
    variants: dict[Base, list[tuple[int, int]]] = field(default_factory=dict)
    floors: dict[Base, dict[tuple[int, int], float]] = field(default_factory=dict)
    levels: dict[Base, dict[Option, int]] = field(default_factory=lambda: defaultdict(dict))
    probe: dict[Base, Layout] = field(default_factory=dict)
    by_vpp: dict[tuple[Base, int], Shape] = field(default_factory=dict)
    by_base: dict[Base, list[tuple[float, Variant]]] = field(default_factory=dict)

    def pending(self) -> list[tuple[float, Variant]]:
        """Every variant of the shapes that fit with its floor, lowest floor first (stable: ties keep
        the coarse pass's order); by_base then holds each base's, in its floors' order."""
        by_base = self.by_base = {b: [(floor, Variant(b, mbs, vpp)) for (mbs, vpp), floor in floors.items()]
                                  for b, floors in self.floors.items()}
        every = [pair for pairs in by_base.values() for pair in pairs]
        every.sort(key=itemgetter(0))
        return every


@dataclass
class Fine:
    """What the fine pass learned beyond the floors: the variants `tried`; per (base, vpp, option),
    the [(micro-batch, least recompute index that fitted)] (`needed`: a larger micro-batch needs at
    least as much); options `parked`; a variant's floor at a known recompute level (`level_floors`:
    (level, floor s)); per (base, vpp), the smallest micro-batch that did not fit (`failed`); a
    variant's tie-break key at its most favourable (`favourable`)."""
    tried: set[Variant] = field(default_factory=set)
    needed: dict[tuple[Base, int, Option], list[tuple[int, int]]] = field(default_factory=dict)
    parked: dict[Variant, list[Parked]] = field(default_factory=dict)
    level_floors: dict[Variant, tuple[int, float]] = field(default_factory=dict)
    failed: dict[tuple[Base, int], int] = field(default_factory=dict)
    favourable: dict[Variant, tuple] = field(default_factory=dict)
