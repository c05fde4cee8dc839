"""The GPU counts a capacity sweep tries: a range ("8..16384"), a list, or one count.

In a range the default counts are those a cluster is built in: whole nodes that tile the NVLink
domain. With U = lcm(gpus_per_node, nvlink_domain): the powers of two below one node, the whole nodes
that divide U (an NVL72 rack of 4-GPU trays: 4, 8, 12, 24, 36), then U times 1, 2, 3, 4, 6, 8, 12, ...
(2^k and 3 x 2^k): two counts per doubling, so the fewest GPUs that meet a deadline are found within
a factor 1.5. A list is taken as given.
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

from ..errors import InputError
from ..inputs.bounds import MAX_GPUS

__all__ = ["CountSpec", "parse_counts", "tiling_counts", "DEFAULT_RANGE"]

DEFAULT_RANGE = (8, 16_384)
"""One 8-GPU node to Llama 3's 16,384 H100s (arXiv 2407.21783 §3.3.1)."""

_RANGE = re.compile(r"^\s*(\d+)\s*(?:\.\.|-|:)\s*(\d+)\s*$")
_WANT = 'a GPU count (64), a range ("8..16384") or a list of counts ([48, 64] or "48,64")'


class CountSpec(NamedTuple):
    """What to try: every tiling count in [low, high], or exactly `listed`."""

    low: int
    high: int
    listed: tuple[int, ...] | None


def _count(value: Any, given: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InputError("gpus", given, _WANT)
    try:
        number = int(value)
    except ValueError:
        raise InputError("gpus", given, _WANT) from None
    if not 1 <= number <= MAX_GPUS:
        raise InputError("gpus", given, f"counts from 1 to {MAX_GPUS}")
    return number


def parse_counts(value: Any) -> CountSpec:
    """A CountSpec from what a caller gives: None (the default range), an int, "A..B", a range, a
    list or tuple of ints, or "48,64,96"."""
    if value is None:
        return CountSpec(*DEFAULT_RANGE, None)
    if isinstance(value, range):
        value = list(value)
    if isinstance(value, str):
        match = _RANGE.match(value)
        if match:
            low, high = _count(match.group(1), value), _count(match.group(2), value)
            if low > high:
                raise InputError("gpus", value, "a range whose first count is at most its last", f"{low} > {high}")
            return CountSpec(low, high, None)
        if "," not in value:
            number = _count(value.strip(), value)
            return CountSpec(number, number, (number,))
        given, value = value, [part for part in value.split(",") if part.strip()]
    else:
        given = value
    if isinstance(value, (list, tuple)):
        if not value or len(value) > 4096:
            raise InputError("gpus", value if len(value) <= 8 else f"{len(value)} counts", "1 to 4096 counts")
        counts = tuple(sorted({_count(v.strip() if isinstance(v, str) else v, given) for v in value}))
        return CountSpec(counts[0], counts[-1], counts)
    number = _count(value, value)
    return CountSpec(number, number, (number,))


def tiling_counts(spec: CountSpec, per_node: int, domain: int) -> tuple[int, ...]:
    """The counts of `spec` for nodes of `per_node` GPUs in NVLink domains of `domain` GPUs."""
    if spec.listed is not None:
        return spec.listed
    unit = per_node * domain // math.gcd(per_node, domain)
    counts = {c for c in range(per_node, unit, per_node) if unit % c == 0}        # whole nodes in a domain
    counts |= {c for c in range(1, per_node) if per_node % c == 0 and c & (c - 1) == 0}   # part of a node
    counts |= {unit * m for m in _multiples(spec.high // unit)}                        # whole domains
    return tuple(sorted(c for c in counts if spec.low <= c <= spec.high))


def _multiples(most: int) -> set[int]:
    """1, 2, 3, 4, 6, 8, 12, 16, 24, ... up to `most`: 2^k and 3 x 2^k."""
    out, power = set(), 1
    while power <= most:
        out |= {power, 3 * power} if 3 * power <= most else {power}
        power *= 2
    return out
