"""The explanation trace: an ordered, OPA-style decision log of what fired, what it did and why.

Ops are a closed set: `input` (what was assumed about the inputs), `fire` (a rule matched; its
facts, effect, message and references), `reject` (a candidate layout or family that lost, with the
number or rule that rejected it: `rule_id`, or `have` and `want` for memory), `choose` (the layout
picked), `note`. The same input and rule set give the same trace: no ids, times or addresses are
recorded.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["TraceEvent", "Trace", "RuleReference", "NotFired"]

Op = Literal["input", "fire", "reject", "choose", "note"]


class RuleReference(BaseModel):
    model_config = ConfigDict(frozen=True)
    title: str
    url: str | None = None
    path: str | None = None


class TraceEvent(BaseModel):
    model_config = ConfigDict(frozen=True)

    seq: int
    op: Op
    message: str
    rule_id: str | None = None
    rule_version: int | None = None
    tier: str | None = None
    facts: dict[str, Any] = Field(default_factory=dict)
    """The facts the rule's condition read, with their values (for `fire`)."""
    effect: str | None = None
    references: list[RuleReference] = Field(default_factory=list)
    candidate: str | None = None
    """Layout id, for `reject` and `choose`."""
    overridden_by: str | None = None
    """For a choice that lost to an earlier rule: that rule's id."""
    have: float | None = None
    """For a candidate rejected for memory: the bytes per GPU it needs."""
    want: float | None = None
    """For a candidate rejected for memory: the bytes per GPU it had to fit in (GPU memory, host
    memory or NVMe, whichever it did not fit)."""

    def line(self) -> str:
        """One human line, experta/CLIPS `watch` style."""
        if self.op == "fire":
            head = f"FIRE   {self.seq:>3} {self.rule_id}@{self.rule_version}"
            return f"{head}  {self.message}" + (f"\n{'':11}-> {self.effect}" if self.effect else "")
        if self.op in ("reject", "choose"):
            return f"{self.op.upper():<6} {self.seq:>3} {self.candidate or ''}  {self.message}"
        return f"{self.op.upper():<6} {self.seq:>3} {self.message}"


class NotFired(BaseModel):
    """A rule that did not fire, with the conditions that did not hold (have vs want)."""

    model_config = ConfigDict(frozen=True)
    rule_id: str
    failed: list[str]
    """Each failing condition as "<fact> <op> <want> (have <value>)"."""


class Trace(BaseModel):
    model_config = ConfigDict(frozen=True)

    advisor_version: str
    engine: str
    ruleset_revision: str
    events: list[TraceEvent]
    not_fired: list[NotFired] = Field(default_factory=list)
    """Situation rules whose conditions did not hold for these facts, and why (computed by the
    Python evaluator from the same compiled conditions: durable_rules cannot say which clause failed)."""

    def fired(self) -> list[str]:
        return [e.rule_id for e in self.events if e.op == "fire" and e.rule_id]

    def render(self) -> str:
        head = f"advisor {self.advisor_version}  engine {self.engine}  rules {self.ruleset_revision}"
        return "\n".join([head, *(e.line() for e in self.events)])
