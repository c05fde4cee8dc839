"""What a capacity plan is asked for: the tokens to train, a deadline, a budget, and the GPU types
to consider, read from what callers pass (numbers, or strings such as "1T", "30 days") with errors
that name the field."""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

from ..errors import InputError
from ..inputs.coerce import as_cluster
from ..inputs.specs import GPU, Cluster
from ..inputs.units import to_count

__all__ = ["Goal", "GpuType", "as_tokens", "as_deadline_days", "as_budget", "as_gpu_types", "MAX_TOKENS"]

MAX_TOKENS = 10**17
"""Tokens to train: 6,000x Llama 3's 15.6T (arXiv 2407.21783 §3.1), so every FLOP count stays finite."""

_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?\d+)?)\s*([a-z]*)\s*$", re.I)
_DAYS_PER = {"": 1.0, "d": 1.0, "day": 1.0, "days": 1.0, "w": 7.0, "wk": 7.0, "week": 7.0, "weeks": 7.0,
             "h": 1 / 24, "hr": 1 / 24, "hour": 1 / 24, "hours": 1 / 24, "mo": 30.0, "month": 30.0, "months": 30.0}
_DEADLINE_WANT = 'days (30), or a duration such as "30 days", "6 weeks", "720 h" or "3 months" (30 days each)'


class Goal(NamedTuple):
    """The constraints an option must meet; None where not given."""

    deadline_days: float | None
    budget: float | None
    """In the prices' currency, or in GPU-hours without prices (`budget_unit`)."""
    budget_unit: str


class GpuType(NamedTuple):
    """One GPU type to plan for: the Cluster fields shared by every count, and that cluster at one GPU."""

    fields: dict
    probe: Cluster

    @property
    def name(self) -> str:
        return self.probe.gpu.name


def as_tokens(value: Any) -> int:
    """Tokens to train: 2_000_000_000_000, "2T", "1.5e12", "300B" (decimal suffixes k, M, B, T)."""
    want = 'a token count such as "1T", "15.6T" or 2e12 (decimal suffixes k, M, B, T)'
    if isinstance(value, float) and math.isfinite(value) and value >= 1:
        value = round(value)
    try:
        tokens = to_count(value, "tokens")
    except InputError:
        raise InputError("tokens", value, want) from None
    if tokens > MAX_TOKENS:
        raise InputError("tokens", value, f"at most {MAX_TOKENS:.0e} tokens")
    return tokens


def as_deadline_days(value: Any) -> float | None:
    """A deadline in days: a number of days, or a string with a unit (h, days, weeks, months)."""
    if value is None:
        return None
    days = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        days = float(value)
    elif isinstance(value, str):
        match = _DURATION.match(value)
        unit = match.group(2).lower() if match else None
        if match and unit in _DAYS_PER:
            days = float(match.group(1)) * _DAYS_PER[unit]
    if days is None or not math.isfinite(days) or days <= 0 or days > 36_500:
        raise InputError("deadline", value, _DEADLINE_WANT, "above 0 and at most 100 years")
    return days


def as_budget(value: Any, unit: str) -> float | None:
    """A budget: a positive number in `unit` (the prices' currency, or GPU-hours without prices)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value.replace(",", "").replace("_", ""))
        except ValueError:
            raise InputError("budget", value, f"a number of {unit}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InputError("budget", value, f"a positive number of {unit}")
    return float(value)


def as_gpu_types(value: Any) -> list[GpuType]:
    """The GPU types to plan for: one or a list of a preset name, a GPU, or a dict of Cluster fields
    without `gpus` (a GPU with its nodes and network: {"gpu": "H100", "inter_node_bandwidth": "200 Gbit/s"})."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not items or len(items) > 64:
        raise InputError("gpu", value, "1 to 64 GPU types")
    types, names = [], set()
    for item in items:
        if isinstance(item, (str, GPU)):
            fields = {"gpu": item}
        elif isinstance(item, dict):
            if "gpus" in item:
                raise InputError("gpu.gpus", item["gpus"], "no GPU count in a GPU type (the plan tries the counts "
                                                           "of `gpus`)")
            fields = dict(item)
        else:
            raise InputError("gpu", item, "a GPU preset name, an advisor.GPU, or a dict of Cluster fields without gpus")
        probe = as_cluster({**fields, "gpus": 1})
        if probe.gpu.name in names:
            raise InputError("gpu", probe.gpu.name, "each GPU type once", "give a custom GPU its own name")
        names.add(probe.gpu.name)
        types.append(GpuType(fields, probe))
    return types
