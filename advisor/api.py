"""Public entry point `recommend()`: the wiring of the layers and the trace's assembly.

Flow (DESIGN §3): inputs -> facts -> rules engine -> decisions -> planner (+ cost model, screened by
the audit's error rules) -> Recommendation with its trace. The rule book is compiled and its engine
registered once per process (rulebook.session); each call is a fresh engine session, so calls are
independent and deterministic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._version import __version__
from .auditor import audit as audit_layout
from .auditor import call_options, changed_for_trace, check_finite, layout_findings, layout_screening
from .costmodel.assumptions import as_assumptions
from .facts import LayoutCase, Versus, build_facts, zero_only_fits
from .inputs.coerce import as_cluster, as_model, as_training
from .inputs.specs import resolve_training
from .inputs.units import registry
from .planner import plan
from .inputs.layout import Layout
from .inputs.uncertainty import memory_headroom
from .planner.ranking import NEAR_TIE
from .results.audit import Audit
from .results.comparison import Comparison, compared_layouts
from .results.recommendation import Alternative, ChecklistItem, Recommendation
from .results.render import named_layout
from .results.trace import (RecommendResult, Trace, TraceEvent, decision_records, fired_events, input_summary,
                            not_fired_events)
from .rulebook.actions import Decisions
from .rulebook.session import evaluate_rules, rulebook_for

__all__ = ["recommend", "recommend_with_ranking", "audit", "compare", "warm_up"]

RulePaths = str | Path | tuple[str | Path, ...] | list[str | Path] | None


def recommend(cluster: Any, model: Any, training: Any = None, *, rules: RulePaths = (),
              engine: str | None = None, assumptions: Any = None) -> Recommendation:
    """Recommend a parallel layout for training `model` on `cluster`, with the reasons.

    `cluster`, `model` and `training` accept the advisor objects, dicts of their fields, and (for the
    model) preset names. `rules` adds site rule files after the built-in ones (one path, or a tuple or
    list of paths). `engine` forces "durable" or "python" (default: the ADVISOR_ENGINE variable, else
    durable where it imports).
    `assumptions` (an advisor.Assumptions or a dict of its fields) describes how your
    framework runs (e.g. NeMo 1.x's bf16 gradient buffers: {"megatron_main_grad_bytes": 2}); every
    estimate behind the choice uses it, and the trace lists what differs from the defaults.
    """
    return _recommend(cluster, model, training, rules, engine, assumptions, keep_ranking=False)[0]


def audit(cluster: Any, model: Any, layout: Any, training: Any = None, *, rules: RulePaths = (),
          engine: str | None = None, assumptions: Any = None, compare: bool = False) -> Audit:
    """Every finding about `layout` at once (auditor.audit: errors, warnings and notes, each with its
    formula, a fix and references, and a decision log).

    `compare=True` also recommends a layout for the same situation and, when the audited layout is
    legal, sets it beside the pick by the same cost model: the rule advice.slower-than-recommended
    warns, naming the pick and the margin, when the pick is estimated faster by more than the near-tie
    band the planner itself cannot separate (planner.ranking.NEAR_TIE). It costs one recommendation
    (milliseconds to tens of them); the command line's `advisor audit` does it unless --no-compare.
    """
    report = audit_layout(cluster, model, layout, training, rules=rules, engine=engine, assumptions=assumptions)
    if not compare or not report.ok or report.estimates is None:
        return report
    rec = recommend(report.cluster, report.model, report.training, rules=rules, engine=engine, assumptions=assumptions)
    if rec.layout is None:
        return report
    versus = Versus(pick=named_layout(rec.framework, rec.layout), pick_step=rec.estimates.step_time,
                    step=report.estimates.step_time, band=NEAR_TIE)
    return audit_layout(report.cluster, report.model, layout, report.training, rules=rules, engine=engine,
                        assumptions=assumptions, versus=versus)


def compare(cluster: Any, model: Any, layouts: Any, training: Any = None, *, rules: RulePaths = (),
            engine: str | None = None, assumptions: Any = None) -> Comparison:
    """The `layouts` (Layouts, dicts of their fields, or ids as recommend prints them:
    "tp8-dp4-pp2-zero1-sp-nmb128", "deepspeed/tp1-dp64-pp1-zero3") side by side with the advisor's
    pick for the same situation: each audited and estimated alike, with why it ranks where it does
    (refused by a rule, does not fit, the planner's reason, or the margin to the pick)."""
    if isinstance(layouts, (str, dict, Layout)):
        layouts = [layouts]
    rec = recommend(cluster, model, training, rules=rules, engine=engine, assumptions=assumptions)
    reports = [audit_layout(rec.cluster, rec.model, lay, rec.training, rules=rules, engine=engine,
                            assumptions=assumptions) for lay in layouts]     # (an id: inputs.coerce.as_layout)
    # the planner's own limits: its near-tie band, and the memory share above which a layout is tight
    rows = compared_layouts(rec, reports, NEAR_TIE, 1 - memory_headroom(rec.training))
    return Comparison(cluster=rec.cluster, model=rec.model, training=rec.training, layouts=rows, band=NEAR_TIE)


def warm_up(*, rules: RulePaths = (), engine: str | None = None, units: bool = True) -> None:
    """Do a process's one-time work before its first request, so that no request pays it: import
    the planner, the auditor and the rule engines, compile the rule book (with the site files
    `rules`), build its engines (`engine`, and the Python engine the planner screens candidates
    with) and run one small recommendation. `units`: also load pint's unit registry, which reads
    quantities past the simple forms ("80 GiB", "400 Gbit/s"). Idempotent and thread-safe.

    The first call of a process otherwise took ~0.6 s against ~25 ms warm (benchmarks/service.py).
    Call it in every worker process after it starts (a forked child re-registers the durable engine's
    rulesets); then `gc.freeze()` keeps the warm heap out of the collector's full passes
    (docs/user-guide.md, "Serving")."""
    if units:
        registry()
    recommend({"gpu": "H100-SXM-80GB", "gpus": 8}, "llama-3-8b", {"seq_len": 4096, "global_batch_size": 64},
              rules=rules, engine=engine)


def _checklist(decisions: Decisions, layout) -> tuple[list[ChecklistItem], list[tuple[str, str]]]:
    """The checklist items that apply to the chosen layout, and (rule id, why) of those left out: an
    item whose rule `needs` dimensions the layout does not use (all of them are degree 1)."""
    items, dropped = [], []
    for rule_id, text, needs in decisions.checklist:
        if layout is not None and needs and all(getattr(layout, d) == 1 for d in needs):
            why = (f"checklist item {rule_id} left out: it applies to layouts with {' or '.join(needs)} > 1, "
                   f"and the chosen layout has {' = '.join(needs)} = 1")
            dropped.append((rule_id, why))
        else:
            items.append(ChecklistItem(rule_id=rule_id, text=text))
    return items, dropped


def recommend_with_ranking(cluster: Any, model: Any, training: Any = None, *, rules: RulePaths = (),
                           engine: str | None = None, assumptions: Any = None):
    """`recommend()`, plus every layout that fit, best first, as (Layout, Estimate) pairs. Slower:
    it tries the virtual-stage and micro-batch variants of every shape, where `recommend` stops at
    those that could change its answer (the Recommendation is the same)."""
    return _recommend(cluster, model, training, rules, engine, assumptions, keep_ranking=True)


def situation_decisions(book, facts: dict, engine: str | None, first_seq: int = 1):
    """The situation rules' verdict on `facts`: (Decisions, their trace events numbered from `first_seq`,
    the fired rules, the engine's name). The planner searches what the Decisions allow."""
    fired, engine_name = evaluate_rules(book, facts, engine)
    decisions = Decisions()
    return decisions, fired_events(book, fired, facts, decisions, first_seq), fired, engine_name


def _planner_note_kind(e) -> str | None:
    """What one planner `note` is about (TraceEvent.kind), for the notes the account repeats: the
    planner states it (PlanEvent.kind)."""
    return e.kind if e.op == "note" else None


def _planner_events(result, dropped: list[tuple[str, str]], first_seq: int) -> list[TraceEvent]:
    """The trace events after the situation rules': the planner's, the checklist items left out, the choice."""
    events = [TraceEvent(seq=seq, op=e.op, message=e.message, candidate=e.candidate, rule_id=e.rule_id,
                         have=e.have, want=e.want, kind=_planner_note_kind(e))
              for seq, e in enumerate(result.events, first_seq)]
    events += [TraceEvent(seq=seq, op="note", rule_id=rule_id, message=message)
               for seq, (rule_id, message) in enumerate(dropped, first_seq + len(events))]
    if result.layout is not None:
        est = result.estimate
        events.append(TraceEvent(seq=first_seq + len(events), op="choose", candidate=result.layout.id,
                                 message=f"est. step {est.step_time:.2f} s, MFU {est.mfu:.0%}, "
                                         f"{est.memory.total / 2**30:.1f} of {est.memory.capacity / 2**30:.1f} GiB "
                                         "per GPU"))
    return events


def _recommend(cluster: Any, model: Any, training: Any, rules: tuple[str | Path, ...], engine: str | None,
               assumptions: Any, keep_ranking: bool):
    rules, engine = call_options(rules, engine)
    cluster, model = as_cluster(cluster), as_model(model)
    training, notes = resolve_training(model, as_training(training), cluster)
    assumptions = as_assumptions(assumptions)
    changed = assumptions.changed() if assumptions is not None else {}
    if changed:
        notes = [*notes, "cost-model assumptions differ from the defaults: "
                 + ", ".join(f"{k}={v!r}" for k, v in changed.items())]
    book = rulebook_for(rules)
    facts = build_facts(cluster, model, training)
    events = [TraceEvent(seq=i, op="input", message=note) for i, note in enumerate(notes, 1)]
    decisions, fired_trace, fired, engine_name = situation_decisions(book, facts, engine, len(events) + 1)
    events += fired_trace

    zero_fits: dict[int, bool] = {}      # facts.zero_only_fits depends on the layout's micro-batch only

    def screening(layout, est):
        # Candidate screening runs the same compiled audit rules on the pure-Python evaluator: the
        # differential test keeps it identical to durable_rules, and it is ~20x cheaper per call. The
        # chosen layout's audit below runs on the configured engine.
        mbs = layout.micro_batch_size if layout.tp * layout.pp > 1 else 0
        if mbs not in zero_fits:
            zero_fits[mbs] = mbs > 0 and zero_only_fits(cluster, model, layout, training, assumptions)
        return layout_screening(book, LayoutCase(cluster, model, training, layout, est.memory, zero_fits[mbs],
                                                 assumptions), facts)

    result = plan(cluster, model, training, decisions, screening, keep_ranking=keep_ranking, assumptions=assumptions)
    findings = []
    if result.layout is not None:
        check_finite(result.estimate, result.layout.id)     # never recommend an infinite step time
        case = LayoutCase(cluster, model, training, result.layout, result.estimate.memory,
                          zero_only_fits(cluster, model, result.layout, training, assumptions), assumptions)
        findings, _ = layout_findings(book, case, engine)
    checklist, dropped = _checklist(decisions, result.layout)
    events += _planner_events(result, dropped, len(events) + 1)
    status = "recommended" if result.layout is not None else "infeasible"
    trace = Trace(decision="recommend", advisor_version=__version__, engine=engine_name, ruleset_revision=book.revision,
                  input=input_summary(cluster, model, training, tuple(rules), changed_for_trace(assumptions)),
                  result=RecommendResult(status=status, framework=result.framework if result.layout else None,
                                         layout=result.layout.id if result.layout else None),
                  events=events, decisions=decision_records(fired_trace),
                  not_fired=not_fired_events(book, facts, fired, "situation"))
    return Recommendation(
        status=status,
        layout=result.layout,
        framework=result.framework if result.layout is not None else None,
        estimates=result.estimate,
        cluster=cluster, model=model, training=training,
        checklist=checklist,
        alternatives=[Alternative(layout=a.layout, reason=a.reason, memory_total=a.estimate.memory.total,
                                  step_time=a.estimate.step_time, family=a.family, kind=a.kind) for a in result.alternatives],
        findings=findings,
        trace=trace,
        candidates_examined=result.examined,
    ), result.ranking
