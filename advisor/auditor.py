"""`audit()`: judge a layout someone already runs or plans — every finding at once, in milliseconds.

The layout-scope rule files (`rules/audit-*.toml`) hold the checks: what Megatron-LM, DeepSpeed or
torchtitan would refuse (`error`), what is legal but unwise (`warning`), and notes (`info`). Every
check reads facts computed here in Python (`advisor.facts.build_layout_facts`), so an illegal
layout still yields all of its findings instead of stopping at the first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._version import __version__
from .actions import Finding as FindingAction
from .errors import InputError
from .estimate import Assumptions, Estimate, estimate, memory_only
from .facts import build_layout_facts, resolve_training
from .layout import Layout
from .rulebook import RuleBook, render_message
from .specs import Cluster, Model, Training
from .trace import RuleReference

__all__ = ["Audit", "Finding", "audit", "as_layout", "layout_errors", "layout_findings", "resolve_layout"]

Severity = Literal["error", "warning", "info"]
_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


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
    references: list[RuleReference] = Field(default_factory=list)

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
    advisor_version: str
    engine: str
    ruleset_revision: str

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

    def explain(self) -> str:
        lay = self.layout
        head = (f"Audit of {lay.framework} {lay.id} for {self.model.name} on {self.cluster.gpus} x {self.cluster.gpu.name}"
                f" (seq {self.training.seq_len}, global batch {self.training.global_batch_size})")
        counts = {s: sum(f.severity == s for f in self.findings) for s in _SEVERITY_ORDER}
        lines = [head, f"{counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} note(s)"]
        lines += [f.line() for f in self.findings]
        if self.estimates is not None:
            from .recommendation import estimate_lines
            lines += ["", *estimate_lines(self.estimates)]
        lines.append(f"\nadvisor {self.advisor_version}, engine {self.engine}, rules {self.ruleset_revision}")
        return "\n".join(lines)


def as_layout(value: Any) -> Layout:
    from .api import coerce

    return coerce(value, Layout, "layout", "an advisor.Layout or a dict of its fields, e.g. {'tp': 8, 'pp': 4}")


def resolve_layout(layout: Layout, cluster: Cluster) -> Layout:
    """Fill an omitted dp from the GPU count (rounded down when it does not divide: M1 then reports it)."""
    if layout.dp is not None:
        return layout
    return layout.model_copy(update={"dp": max(1, cluster.gpus // layout.model_parallel)})


def _safe_estimate(cluster, model, layout, training, full: bool, assumptions=None):
    """The cost model's view, or None when the layout's shape cannot be estimated (illegal shapes)."""
    try:
        return (estimate if full else memory_only)(cluster, model, layout, training, assumptions)
    except (InputError, ValueError, ZeroDivisionError, IndexError):
        return None


def _zero_only_fits(cluster: Cluster, model: Model, layout: Layout, training: Training, assumptions=None) -> bool:
    """Would DeepSpeed ZeRO-2/3 with tp = pp = cp = 1 fit (no offload)? Asked only on <= 32 GPUs with TP/PP."""
    if cluster.gpus > 32 or (layout.tp == 1 and layout.pp == 1):
        return False
    mbs = layout.micro_batch_size if training.global_batch_size % (layout.micro_batch_size * cluster.gpus) == 0 else 1
    if training.global_batch_size % (mbs * cluster.gpus):
        return False
    for zero in (2, 3):
        for recompute in ("none", "full"):
            candidate = Layout(framework="deepspeed", dp=cluster.gpus, zero_stage=zero, recompute=recompute,
                               micro_batch_size=mbs)
            mem = _safe_estimate(cluster, model, candidate, training, full=False, assumptions=assumptions)
            if mem is not None and mem.fits:
                return True
    return False


def _finding_actions(book: RuleBook, fired: list[str]):
    """(rule id, rule, finding action) of every finding the fired rules make, in firing order."""
    for rule_id in fired:
        rule = book.rules[rule_id]
        for action in rule.spec.then:
            if isinstance(action, FindingAction):
                yield rule_id, rule, action


def layout_findings(book: RuleBook, cluster: Cluster, model: Model, training: Training, layout: Layout,
                    memory, engine_name: str | None, zero_only_fits: bool = False,
                    trusted: bool = False) -> tuple[list[Finding], str]:
    """Evaluate the layout-scope rules on one resolved layout; returns findings (sorted) and the engine name."""
    from .api import evaluate_rules

    facts = build_layout_facts(cluster, model, training, layout, memory, zero_only_fits)
    fired, engine = evaluate_rules(book, facts, engine_name, scope="layout", trusted=trusted)
    findings = [Finding(rule_id=rule_id, rule_version=rule.spec.version, severity=action.severity,
                        message=render_message(rule.spec.message, facts), fix=render_message(action.fix, facts),
                        facts={f: facts[f.split(".")[0]][f.split(".")[1]] for f in rule.fields},
                        references=[RuleReference(**r.model_dump()) for r in rule.spec.references])
                for rule_id, rule, action in _finding_actions(book, fired)]
    findings.sort(key=lambda f: _SEVERITY_ORDER[f.severity])     # stable: firing order within a severity
    return findings, engine


def layout_errors(book: RuleBook, cluster: Cluster, model: Model, training: Training, layout: Layout, memory,
                  situation: dict | None = None) -> list[tuple[str, str]]:
    """(rule id, message) of layout_findings' errors, on the pure-Python evaluator, in the same order:
    the planner's screening of candidates, which needs no Finding (nor warnings). `situation`: the
    situation facts (build_facts), built once per recommendation."""
    from .api import evaluate_rules

    facts = build_layout_facts(cluster, model, training, layout, memory, situation=situation)
    fired, _ = evaluate_rules(book, facts, "python", scope="layout", trusted=True)
    return [(rule_id, render_message(rule.spec.message, facts))
            for rule_id, rule, action in _finding_actions(book, fired) if action.severity == "error"]


def audit(cluster: Any, model: Any, layout: Any, training: Any = None, *, rules: tuple[str | Path, ...] = (),
          engine: str | None = None, assumptions: Assumptions | None = None) -> Audit:
    """Every finding about `layout` at once: errors (the framework would refuse or crash), warnings
    (legal but unwise) and notes, each with the formula and its values, a fix and references.

    `layout.framework` decides which framework's rules apply. Omitted degrees are 1; an omitted dp is
    derived from the GPU count; an omitted num_microbatches from the global batch. `assumptions`
    overrides the cost model's defaults (e.g. a framework that keeps bf16 gradient buffers).
    """
    from .api import _rulebook, as_cluster, as_model, as_training

    cluster, model, layout = as_cluster(cluster), as_model(model), resolve_layout(as_layout(layout), as_cluster(cluster))
    training, _ = resolve_training(model, as_training(training))
    book = _rulebook(tuple(rules))
    est = _safe_estimate(cluster, model, layout, training, full=True, assumptions=assumptions)
    zero_fits = _zero_only_fits(cluster, model, layout, training, assumptions)
    findings, engine_name = layout_findings(book, cluster, model, training, layout,
                                            est.memory if est is not None else None, engine, zero_fits)
    if layout.num_microbatches is None and training.global_batch_size % (layout.micro_batch_size * layout.dp) == 0:
        layout = layout.model_copy(update={"num_microbatches": training.global_batch_size
                                           // (layout.micro_batch_size * layout.dp)})
    return Audit(layout=layout, cluster=cluster, model=model, training=training, findings=findings, estimates=est,
                 advisor_version=__version__, engine=engine_name, ruleset_revision=book.revision)
