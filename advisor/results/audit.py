"""`Audit` and `Finding`: what `audit()` returns, and the findings a recommendation carries."""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, computed_field

from ..costmodel import Estimate
from ..facts import COMPARED_WITH
from ..inputs.layout import Layout
from ..inputs.specs import Cluster, Model, Training
from ..rulebook.load import Reference
from .brief import wrap_lines
from .render import estimate_lines, named_layout, network_text
from .trace import Trace

__all__ = ["Audit", "Finding", "Screening", "Severity", "SEVERITY_ORDER"]

Severity = Literal["error", "warning", "info"]
# the rule that reads the versus.* facts: its finding states the comparison, so the text need not
SLOWER_RULE = "advice.slower-than-recommended"
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


class Screening(NamedTuple):
    """The audit's verdict on one candidate layout, as the planner screens it: `errors`, (rule id,
    message) of each error (the layout is refused); `advice`, of each warning of the "advice" tier (legal
    but unwise: the planner prefers a near-tied layout without it, or says why the choice keeps it)."""
    errors: tuple[tuple[str, str], ...] = ()
    advice: tuple[tuple[str, str], ...] = ()


class Finding(BaseModel):
    model_config = ConfigDict(frozen=True)

    rule_id: str
    rule_version: int
    severity: Severity
    message: str
    """The problem, with the formula and its values."""
    fix: str
    """A one-line remedy."""
    facts: dict[str, Any] = Field(default_factory=dict)
    """The facts the rule's condition read."""
    references: list[Reference] = Field(default_factory=list)

    def line(self) -> str:
        return f"{self.severity.upper():<7} {self.rule_id}: {self.message}\n{'':8}fix: {self.fix}"


class Audit(BaseModel):
    model_config = ConfigDict(frozen=True)

    layout: Layout
    """The layout judged, with dp and num_microbatches filled in where they were omitted."""
    cluster: Cluster
    model: Model
    training: Training
    findings: list[Finding]
    """Errors first, then warnings, then info; within a severity, in rule firing order."""
    estimates: Estimate | None = None
    """The cost model's view of the layout, or None when its shape cannot be estimated."""
    trace: Trace
    """The decision log: the input in brief, the rules that fired on the layout, the result."""

    @property
    def advisor_version(self) -> str:
        return self.trace.advisor_version

    @property
    def engine(self) -> str:
        return self.trace.engine

    @property
    def ruleset_revision(self) -> str:
        return self.trace.ruleset_revision

    @computed_field
    @property
    def ok(self) -> bool:
        """True when no finding is an error (the frameworks would accept the layout)."""
        return not self.errors

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    def explain(self, width: int | None = None) -> str:
        """The findings, then the estimate; `width`: wrap every line to that many columns (None: as written)."""
        return "\n".join(wrap_lines(self._text().split("\n"), width))

    def _comparison(self) -> list[str]:
        """The comparison with the advisor's pick (audit(compare=True)) when no finding already says it."""
        if any(f.rule_id == SLOWER_RULE for f in self.findings):
            return []
        said = next((e.message for e in self.trace.events if e.op == "input" and e.message.startswith(COMPARED_WITH)),
                    None)
        return [f"{said[0].upper()}{said[1:]}"] if said else []

    def _text(self) -> str:
        lay = self.layout
        head = (f"Audit of {named_layout(lay.framework, lay)} for {self.model.name} on {self.cluster.gpus} x "
                f"{self.cluster.gpu.name} ({network_text(self.cluster)}; seq {self.training.seq_len}, global batch "
                f"{self.training.global_batch_size})")
        counts = {s: sum(f.severity == s for f in self.findings) for s in SEVERITY_ORDER}
        lines = [head, f"{counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} note(s)"]
        lines += self._comparison()
        lines += [f.line() for f in self.findings]
        if self.estimates is not None:
            lines += ["", *estimate_lines(self.estimates)]
        lines.append(f"\nadvisor {self.advisor_version}, engine {self.engine}, rules {self.ruleset_revision}")
        return "\n".join(lines)
