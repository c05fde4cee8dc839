"""`audit()`: judge a layout someone already runs or plans — every finding at once, in milliseconds.

The layout-scope rule files (`rules/audit-*.toml`) hold the checks: what Megatron-LM, DeepSpeed or
torchtitan would refuse (`error`), what is legal but unwise (`warning`), and notes (`info`). Every
check reads facts computed here in Python (`advisor.facts.build_layout_facts`), so an illegal
layout still yields all of its findings instead of stopping at the first.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from ._version import __version__
from .costmodel import estimate, memory_only
from .costmodel.assumptions import as_assumptions
from .costmodel.context import is_shape_error
from .errors import EngineError, EstimateError, InputError, UnknownEngineError
from .facts import LayoutCase, Versus, build_layout_facts, zero_only_fits
from .inputs.coerce import (ENGINE_WANT, as_cluster, as_engine_name, as_layout, as_model, as_rule_paths, as_training,
                            resolve_layout)
from .inputs.layout import Layout
from .inputs.specs import Cluster, Model, Training, resolve_training
from .results.audit import SEVERITY_ORDER, Audit, Finding, Screening
from .results.trace import AuditResult, Trace, TraceEvent, fired_events, input_summary
from .rulebook.actions import Decisions, ReportFinding
from .rulebook.load import RuleBook, render_message
from .rulebook.engines import select_engine
from .rulebook.session import evaluate_rules, rulebook_for

__all__ = ["audit", "layout_errors", "layout_screening", "layout_findings", "call_options", "check_finite",
           "changed_for_trace"]


def changed_for_trace(assumptions) -> dict:
    """The assumptions that differ from the defaults, as the trace's JSON reads them back (tuples as
    lists), so that a result equals its own JSON round trip."""
    if assumptions is None:
        return {}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in assumptions.changed().items()}


def _bad_numbers(model, prefix: str = "") -> list[str]:
    return [prefix + name for name, v in model.__dict__.items() if type(v) is float and not 0.0 <= v < math.inf]


def check_finite(est, layout_id: str) -> None:
    """EstimateError unless every float of `est` (its times, rates and ratios, each DP/TP/... term)
    is finite and not negative: a guard behind the input bounds, so that no result carries one."""
    bad = _bad_numbers(est) + [n for dim, terms in est.comm.__dict__.items() for n in _bad_numbers(terms, f"comm.{dim}.")]
    if bad:
        raise EstimateError(f"the estimate of {layout_id} has non-finite or negative {', '.join(bad)}: "
                            "a bug in advisor's input bounds; please report it with the inputs")


def call_options(rules: Any, engine: Any) -> tuple[tuple, str | None]:
    """`rules=` and `engine=` of a public call as (paths, engine name), or an InputError naming the
    argument: recommend() and audit() read them alike. An engine name is checked here, before any
    work, so a typo is the caller's error (InputError), not the engine's (EngineError)."""
    paths, name = as_rule_paths(rules), as_engine_name(engine)     # a non-str engine: InputError
    if name is not None:
        try:
            select_engine(name)
        except EngineError as exc:
            raise UnknownEngineError("engine", name, ENGINE_WANT, str(exc)) from None
    return paths, name


def _safe_estimate(cluster, model, layout, training, full: bool, assumptions=None):
    """The cost model's view, or None when the layout's shape cannot be estimated (illegal shapes)."""
    try:
        return (estimate if full else memory_only)(cluster, model, layout, training, assumptions)
    except InputError as exc:
        if not is_shape_error(exc):
            raise
        return None


def _audit_estimate(cluster, model, layout, training, assumptions):
    """(the estimate, a note or None). A num_microbatches that contradicts the batch (the finding
    layout.batch-identity) is estimated with the one the global batch implies, as Megatron-LM derives
    it: the training's global batch is what a step must process and what tokens/s and MFU count, so
    the layout's count is the error, not the batch (with it, MFU came out up to 240). When the batch
    does not split into micro-batches at all there is no consistent count: no estimate."""
    b, dp, nmb, gbs = layout.micro_batch_size, layout.dp, layout.num_microbatches, training.global_batch_size
    if nmb is None or b * nmb * dp == gbs:
        return _safe_estimate(cluster, model, layout, training, True, assumptions), None
    if gbs % (b * dp):
        return None, (f"no estimate: num_microbatches({nmb}) contradicts the batch, and global_batch_size({gbs}) % "
                      f"(mbs({b}) * dp({dp})) = {gbs % (b * dp)} leaves no consistent count (layout.batch-identity)")
    derived = gbs // (b * dp)
    est = _safe_estimate(cluster, model, layout.model_copy(update={"num_microbatches": derived}), training, True,
                         assumptions)
    return est, (f"estimates use num_microbatches = global_batch_size({gbs}) / (mbs({b}) * dp({dp})) = {derived}, "
                 f"not the layout's {nmb}, which contradicts the batch (layout.batch-identity)")


def _finding_actions(book: RuleBook, fired: list[str]):
    """(rule id, rule, finding action) of every finding the fired rules make, in firing order."""
    for rule_id in fired:
        rule = book.rules[rule_id]
        for action in rule.spec.then:
            if isinstance(action, ReportFinding):
                yield rule_id, rule, action


def _judged(book: RuleBook, case: LayoutCase, engine_name: str | None, trusted: bool) -> tuple[dict, list[str], str]:
    """The layout facts, the layout-scope rules that fired on them, and the engine's name."""
    facts = build_layout_facts(case)
    fired, engine = evaluate_rules(book, facts, engine_name, scope="layout", trusted=trusted)
    return facts, fired, engine


def _findings(book: RuleBook, facts: dict, fired: list[str]) -> list[Finding]:
    findings = [Finding(rule_id=rule_id, rule_version=rule.spec.version, severity=action.severity,
                        message=render_message(rule.spec.message, facts), fix=render_message(action.fix, facts),
                        facts={f: facts[f.split(".")[0]][f.split(".")[1]] for f in rule.fields},
                        references=list(rule.spec.references))
                for rule_id, rule, action in _finding_actions(book, fired)]
    findings.sort(key=lambda f: SEVERITY_ORDER[f.severity])     # stable: firing order within a severity
    return findings


def layout_findings(book: RuleBook, case: LayoutCase, engine_name: str | None,
                    trusted: bool = False) -> tuple[list[Finding], str]:
    """Evaluate the layout-scope rules on one resolved layout; returns findings (sorted) and the engine name."""
    facts, fired, engine = _judged(book, case, engine_name, trusted)
    return _findings(book, facts, fired), engine


def layout_errors(book: RuleBook, cluster: Cluster, model: Model, training: Training, layout: Layout, memory,
                  situation: dict | None = None, assumptions=None) -> list[tuple[str, str]]:
    """(rule id, message) of layout_findings' errors, on the pure-Python evaluator, in the same order."""
    case = LayoutCase(cluster, model, training, layout, memory, assumptions=assumptions)
    return list(layout_screening(book, case, situation).errors)


def layout_screening(book: RuleBook, case: LayoutCase, situation: dict | None = None) -> Screening:
    """The planner's screening of one candidate, on the pure-Python evaluator: (rule id, message) of
    layout_findings' errors and of its "advice"-tier warnings, each in firing order; no Finding is built.
    `situation`: the situation facts (build_facts), built once per recommendation."""
    facts = build_layout_facts(case, situation)
    fired, _ = evaluate_rules(book, facts, "python", scope="layout", trusted=True)
    errors, advice = [], []
    for rule_id, rule, action in _finding_actions(book, fired):
        if action.severity == "error":
            errors.append((rule_id, render_message(rule.spec.message, facts)))
        elif action.severity == "warning" and rule.spec.tier == "advice":
            advice.append((rule_id, render_message(rule.spec.message, facts)))
    return Screening(tuple(errors), tuple(advice))


def audit(cluster: Any, model: Any, layout: Any, training: Any = None, *,
          rules: str | Path | tuple[str | Path, ...] | list[str | Path] | None = (),
          engine: str | None = None, assumptions: Any = None, versus: Versus | None = None) -> Audit:
    """Every finding about `layout` at once: errors (the framework would refuse or crash), warnings
    (legal but unwise) and notes, each with the formula and its values, a fix and references, and a
    decision log (`Audit.trace`) of the rules that fired.

    `layout.framework` decides which framework's rules apply. Omitted degrees are 1; an omitted dp is
    derived from the GPU count; an omitted num_microbatches from the global batch. `assumptions`
    overrides the cost model's defaults (e.g. a framework that keeps bf16 gradient buffers). `rules`:
    site rule files, one path or a tuple or list of them, as for recommend(). `versus`: the advisor's
    own pick for the same situation, for the rules that compare with it (advisor.audit(compare=True)
    passes it).
    """
    rules, engine = call_options(rules, engine)
    cluster, model = as_cluster(cluster), as_model(model)
    layout = resolve_layout(as_layout(layout), cluster)
    training, notes = resolve_training(model, as_training(training), cluster)
    assumptions = as_assumptions(assumptions)
    book = rulebook_for(rules)
    est, note = _audit_estimate(cluster, model, layout, training, assumptions)
    notes = [*notes, *([note] if note else []), *([versus.note()] if versus is not None else [])]
    if est is not None:
        check_finite(est, layout.id)
    case = LayoutCase(cluster, model, training, layout, est.memory if est else None,
                      zero_only_fits(cluster, model, layout, training, assumptions), assumptions, versus)
    facts, fired, engine_name = _judged(book, case, engine, trusted=False)
    findings = _findings(book, facts, fired)
    if layout.num_microbatches is None and training.global_batch_size % (layout.micro_batch_size * layout.dp) == 0:
        layout = layout.model_copy(update={"num_microbatches": training.global_batch_size
                                           // (layout.micro_batch_size * layout.dp)})
    trace = _audit_trace(book, replace(case, layout=layout), notes, facts, fired, findings, engine_name, rules)
    return Audit(layout=layout, cluster=cluster, model=model, training=training, findings=findings, estimates=est,
                 trace=trace)


def _audit_trace(book: RuleBook, case: LayoutCase, notes: list[str], facts: dict, fired: list[str],
                 findings: list[Finding], engine_name: str, rules: tuple) -> Trace:
    """The audit's decision log: the notes on the inputs, the layout rules that fired, the outcome."""
    events = [TraceEvent(seq=i, op="input", message=note) for i, note in enumerate(notes, 1)]
    # layout rules report findings only: the Decisions they fold into are not read
    events += fired_events(book, fired, facts, Decisions(), len(events) + 1)
    summary = input_summary(case.cluster, case.model, case.training, tuple(rules), changed_for_trace(case.assumptions),
                            layout=case.layout.id)     # Layout.parse reads it back, framework included
    errors = [f.rule_id for f in findings if f.severity == "error"]
    warnings = [f.rule_id for f in findings if f.severity == "warning"]
    return Trace(decision="audit", advisor_version=__version__, engine=engine_name, ruleset_revision=book.revision,
                 input=summary, result=AuditResult(ok=not errors, errors=errors, warnings=warnings), events=events)
