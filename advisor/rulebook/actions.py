"""The closed set of named actions a rule's `then` may take, and how fired rules add up to decisions.

A rule file can only *name* one of these actions with typed parameters; nothing in a rule file
is executed. Choices (framework, ZeRO stages, strategy) go to the first rule that makes them, in
firing order (tier, then file, then rule order); a later rule that would choose differently is
recorded as overridden. Limits intersect: the tightest bound wins, and every bound keeps the rule
that set it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from ..inputs.layout import Framework

__all__ = ["Action", "Decisions", "Finding", "Strategy", "Dimension", "Feature"]

Strategy = Literal["zero-dp", "model-parallel"]
Dimension = Literal["tp", "pp", "cp", "ep", "dp"]
Feature = Literal["sp", "flash_attention", "cp", "distributed_optimizer", "offload", "tp_before_pp", "ep_over_tp"]


class _Action(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class UseFramework(_Action):
    """Choose the framework that drives the run."""
    action: Literal["use_framework"]
    framework: Framework


class AllowZero(_Action):
    """Restrict the ZeRO stages the planner may use (1 under Megatron = distributed optimizer)."""
    action: Literal["allow_zero"]
    stages: list[Annotated[int, Field(ge=0, le=3)]] = Field(min_length=1)


class UseStrategy(_Action):
    """zero-dp: data parallel with ZeRO sharding only (no TP/PP unless memory forces it);
    model-parallel: the smallest TP (inside the NVLink domain) then PP that fits, DP takes the rest."""
    action: Literal["use_strategy"]
    strategy: Strategy


class Limit(_Action):
    """Bound a parallel degree. `max`/`min` is a number or the name of an int fact (e.g. "cluster.nvlink_domain")."""
    action: Literal["limit"]
    dimension: Dimension
    max: int | str | None = None
    min: int | str | None = None


class Enable(_Action):
    """Turn on a feature the planner then uses where it applies (SP needs tp > 1, CP needs a long sequence)."""
    action: Literal["enable"]
    feature: Feature


class Checklist(_Action):
    """Add the rule's message to the recommendation's follow-up checklist."""
    action: Literal["checklist"]


class Finding(_Action):
    """Audit only: report the rule's message as a finding. `fix` is a one-line remedy (may name facts)."""
    action: Literal["finding"]
    severity: Literal["error", "warning", "info"]
    fix: str = Field(min_length=3)


class Note(_Action):
    """Record the rule's message in the trace only."""
    action: Literal["note"]


Action = Annotated[
    Union[UseFramework, AllowZero, UseStrategy, Limit, Enable, Checklist, Finding, Note],
    Field(discriminator="action"),
]


@dataclass
class Bound:
    value: int
    rule_id: str


@dataclass
class Decisions:
    """What the fired rules decided, each value with the id of the rule that decided it."""

    framework: tuple[str, str] | None = None                 # (framework, rule id)
    zero_stages: tuple[tuple[int, ...], str] | None = None
    strategy: tuple[str, str] | None = None
    max: dict[str, Bound] = field(default_factory=dict)
    min: dict[str, Bound] = field(default_factory=dict)
    features: dict[str, str] = field(default_factory=dict)   # feature -> rule id
    checklist: list[tuple[str, str]] = field(default_factory=list)   # (rule id, text)

    def apply(self, rule_id: str, action: _Action, facts: dict, message: str) -> tuple[str, str | None]:
        """Apply one action; returns (effect text, overriding rule id if this choice lost)."""
        if isinstance(action, UseFramework):
            return self._choose("framework", action.framework, rule_id, f"framework = {action.framework}")
        if isinstance(action, AllowZero):
            stages = tuple(sorted(set(action.stages)))
            return self._choose("zero_stages", stages, rule_id, f"ZeRO stages allowed = {list(stages)}")
        if isinstance(action, UseStrategy):
            return self._choose("strategy", action.strategy, rule_id, f"strategy = {action.strategy}")
        if isinstance(action, Limit):
            texts = []
            for side, raw in (("max", action.max), ("min", action.min)):
                if raw is None:
                    continue
                value = _resolve(raw, facts)
                bounds = getattr(self, side)
                current = bounds.get(action.dimension)
                tighter = current is None or (value < current.value if side == "max" else value > current.value)
                if tighter:
                    bounds[action.dimension] = Bound(value, rule_id)
                op = "<=" if side == "max" else ">="
                shown = f"{raw}({value})" if isinstance(raw, str) else str(value)
                texts.append(f"{action.dimension} {op} {shown}" + ("" if tighter else f" (already {current.value})"))
            return "; ".join(texts), None
        if isinstance(action, Enable):
            self.features.setdefault(action.feature, rule_id)
            return f"enable {action.feature}", None
        if isinstance(action, Finding):
            return f"{action.severity} finding", None
        if isinstance(action, Checklist):
            self.checklist.append((rule_id, message))
            return "checklist item", None
        return "note", None

    def _choose(self, name: str, value, rule_id: str, text: str) -> tuple[str, str | None]:
        current = getattr(self, name)
        if current is None:
            setattr(self, name, (value, rule_id))
            return text, None
        if current[0] == value:
            return text + " (agrees)", None
        return text + f" (overridden: {current[1]} chose {current[0]})", current[1]

    def upper(self, dimension: str) -> int | None:
        b = self.max.get(dimension)
        return None if b is None else b.value

    def lower(self, dimension: str) -> int:
        b = self.min.get(dimension)
        return 1 if b is None else b.value


def _resolve(raw: int | str, facts: dict) -> int:
    if isinstance(raw, int):
        return raw
    group, name = raw.split(".", 1)
    return int(facts[group][name])
