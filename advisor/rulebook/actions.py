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

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from ..inputs.layout import Framework

__all__ = ["Action", "Decisions", "Effect", "ReportFinding", "Strategy", "Dimension", "Feature"]

Strategy = Literal["zero-dp", "model-parallel"]
Dimension = Literal["tp", "pp", "cp", "ep", "dp"]
# Every feature is read by the planner (tests/test_features.py shows each changes what it searches or
# prefers): sp, Megatron sequence parallelism on TP layouts; cp, context-parallel layouts for long
# sequences; tp_before_pp, dp_before_tp and ep_over_tp, the tie-break orders. The distributed optimizer is
# `allow_zero [1]` under Megatron, FlashAttention is the caller's Training.flash_attention.
Feature = Literal["sp", "cp", "tp_before_pp", "dp_before_tp", "ep_over_tp"]


class _Action(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class UseFramework(_Action):
    """Choose the framework that drives the run. The first rule to choose wins; a later different
    choice is recorded as overridden."""
    action: Literal["use_framework"]
    framework: Framework


class AllowZero(_Action):
    """Restrict the ZeRO stages the planner may use (1 under Megatron = distributed optimizer). First
    rule wins, as for use_framework."""
    action: Literal["allow_zero"]
    stages: list[Annotated[int, Field(ge=0, le=3)]] = Field(min_length=1, description="a list of ZeRO stages, 0-3")


class AllowFrameworks(_Action):
    """Restrict the frameworks the planner's layouts may run on (a stated training stack: the Hugging
    Face Trainer runs DeepSpeed ZeRO or FSDP, never Megatron-LM): a family none of them runs is not
    searched. First rule wins, as for use_framework."""
    action: Literal["allow_frameworks"]
    frameworks: list[Framework] = Field(min_length=1, description="a list of frameworks (as use_framework names them)")


class UseStrategy(_Action):
    """zero-dp: data parallel with ZeRO sharding only (no TP/PP unless memory forces it);
    model-parallel: the smallest TP (inside the NVLink domain) then PP that fits, DP takes the rest."""
    action: Literal["use_strategy"]
    strategy: Strategy


class Limit(_Action):
    """Bound a parallel degree. Bounds intersect: the tightest wins, and each keeps the rule that set it."""
    action: Literal["limit"]
    dimension: Dimension
    max: int | str | None = Field(None, description="a number or the name of an int fact (e.g. cluster.nvlink_domain)")
    min: int | str | None = Field(None, description="the same, as a lower bound")


class Enable(_Action):
    """Turn on a feature the planner reads: sp (sequence parallelism on every TP layout), cp
    (context-parallel shapes are searched), tp_before_pp, dp_before_tp or ep_over_tp (the tie-break order)."""
    action: Literal["enable"]
    feature: Feature


class Disable(_Action):
    """Turn off a feature the stated framework does not have, whichever rule enables it: sp (Megatron-LM
    before --sequence-parallel, 2022). Disabling wins over enabling, in any order."""
    action: Literal["disable"]
    feature: Literal["sp"]


class Checklist(_Action):
    """Add the rule's message to the recommendation's follow-up checklist; with `needs`, only when the
    recommended layout uses one of those dimensions (degree > 1): the situation that fires the rule is
    known before the layout is, and an item about TP groups does not belong to a layout without TP."""
    action: Literal["checklist"]
    needs: list[Dimension] = Field(default_factory=list, max_length=5,
                                   description="the item applies when the chosen layout has one of these > 1")


class ReportFinding(_Action):
    """Audit only: report the rule's message as a finding of this severity, with its fix."""
    action: Literal["finding"]
    severity: Literal["error", "warning", "info"]
    fix: str = Field(min_length=3, description="a one-line remedy; may name facts as {group.fact}")


class Note(_Action):
    """Record the rule's message in the trace only."""
    action: Literal["note"]


Action = Annotated[
    Union[UseFramework, AllowZero, AllowFrameworks, UseStrategy, Limit, Enable, Disable, Checklist, ReportFinding,
          Note],
    Field(discriminator="action"),
]


class Effect(BaseModel):
    """What one action of a fired rule did, as data. The trace keeps it; the explanation renders it
    (results.render.effect_text); nothing parses the text back."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["choose", "limit", "enable", "disable", "checklist", "finding", "note"]
    field: str | None = None
    """choose: framework, zero_stages, frameworks or strategy; limit: the dimension; enable, disable: the feature."""
    value: str | int | list[int] | list[str] | None = None
    """choose: the value chosen; limit: the bound; finding: the severity."""
    bound: Literal["max", "min"] | None = None
    """limit: which side it bounds."""
    source: str | None = None
    """limit: the fact the bound was read from (e.g. "cluster.nvlink_domain"), when it was not a number."""
    kept: str | int | list[int] | list[str] | None = None
    """limit: the tighter bound already in force (this one changed nothing); choose: the earlier value
    it agrees with or lost to."""
    overridden_by: str | None = None
    """choose: the earlier rule whose different choice stands."""

    @model_serializer(mode="wrap")
    def _without_unset(self, handler):
        # Each kind uses two or three of the fields; the decision log shows only those.
        return {k: v for k, v in handler(self).items() if v is not None}


@dataclass
class Bound:
    value: int
    rule_id: str


@dataclass
class Decisions:
    """What the fired rules decided, each value with the id of the rule that decided it."""

    framework: tuple[str, str] | None = None                 # (framework, rule id)
    zero_stages: tuple[tuple[int, ...], str] | None = None
    frameworks: tuple[tuple[str, ...], str] | None = None   # the frameworks allowed (allow_frameworks)
    strategy: tuple[str, str] | None = None
    max: dict[str, Bound] = field(default_factory=dict)
    min: dict[str, Bound] = field(default_factory=dict)
    features: dict[str, str] = field(default_factory=dict)   # feature -> rule id
    disabled: dict[str, str] = field(default_factory=dict)   # feature -> rule id (Disable)
    # ZeRO stages a "constraint"-tier rule allows (a stated framework's capability): a bound on every
    # family the planner searches, where allow_zero of a strategy row is that row's preference
    zero_bound: tuple[tuple[int, ...], str] | None = None
    checklist: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)   # (rule id, text, needs)

    def apply(self, rule_id: str, action: _Action, facts: dict, message: str, tier: str | None = None) -> list[Effect]:
        """Apply one action of a rule of `tier`; returns what it did (a limit with both sides does two things)."""
        if isinstance(action, UseFramework):
            return [self._choose("framework", action.framework, rule_id)]
        if isinstance(action, AllowZero):
            stages = tuple(sorted(set(action.stages)))
            if tier == "constraint":
                kept = stages if self.zero_bound is None else tuple(s for s in self.zero_bound[0] if s in stages)
                self.zero_bound = (kept, rule_id if self.zero_bound is None else self.zero_bound[1])
            return [self._choose("zero_stages", stages, rule_id)]
        if isinstance(action, AllowFrameworks):
            return [self._choose("frameworks", tuple(dict.fromkeys(action.frameworks)), rule_id)]
        if isinstance(action, UseStrategy):
            return [self._choose("strategy", action.strategy, rule_id)]
        if isinstance(action, Limit):
            return [self._bound(side, raw, action.dimension, rule_id, facts)
                    for side, raw in (("max", action.max), ("min", action.min)) if raw is not None]
        if isinstance(action, Enable):
            self.features.setdefault(action.feature, rule_id)
            return [Effect(kind="enable", field=action.feature)]
        if isinstance(action, Disable):
            self.disabled.setdefault(action.feature, rule_id)
            return [Effect(kind="disable", field=action.feature)]
        if isinstance(action, ReportFinding):
            return [Effect(kind="finding", value=action.severity)]
        if isinstance(action, Checklist):
            self.checklist.append((rule_id, message, tuple(action.needs)))
            return [Effect(kind="checklist")]
        return [Effect(kind="note")]

    def _choose(self, name: str, value, rule_id: str) -> Effect:
        current = getattr(self, name)
        shown = list(value) if isinstance(value, tuple) else value
        if current is None:
            setattr(self, name, (value, rule_id))
            return Effect(kind="choose", field=name, value=shown)
        kept = list(current[0]) if isinstance(current[0], tuple) else current[0]
        if current[0] == value:
            return Effect(kind="choose", field=name, value=shown, kept=kept)
        return Effect(kind="choose", field=name, value=shown, kept=kept, overridden_by=current[1])

    def _bound(self, side: str, raw: int | str, dimension: str, rule_id: str, facts: dict) -> Effect:
        value = _resolve(raw, facts)
        bounds = getattr(self, side)
        current = bounds.get(dimension)
        tighter = current is None or (value < current.value if side == "max" else value > current.value)
        if tighter:
            bounds[dimension] = Bound(value, rule_id)
        return Effect(kind="limit", field=dimension, value=value, bound=side,
                      source=raw if isinstance(raw, str) else None, kept=None if tighter else current.value)

    def zero_choice(self) -> tuple[int, ...] | None:
        """The ZeRO stages the chosen family may use: the first rule's choice, within what the stated
        framework has (zero_bound, set by `constraint` rules); the bound itself when the choice lies
        outside it. A rule at an earlier tier may choose among a release's stages, never add to them."""
        if self.zero_stages is None or self.zero_bound is None:
            return None if self.zero_stages is None else self.zero_stages[0]
        return tuple(s for s in self.zero_stages[0] if s in self.zero_bound[0]) or self.zero_bound[0]

    def has(self, feature: str) -> bool:
        """The feature is enabled and no rule disabled it."""
        return feature in self.features and feature not in self.disabled

    def allows(self, framework: str) -> bool:
        """The rules allow layouts on `framework` (no allow_frameworks rule fired: every framework)."""
        return self.frameworks is None or framework in self.frameworks[0]

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
