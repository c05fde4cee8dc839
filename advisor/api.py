"""Public entry points: `recommend()` (and the engine wiring behind it).

Flow (DESIGN §3): inputs -> facts -> rules engine -> decisions -> planner (+ cost model) ->
Recommendation with its trace. The rule book is compiled and registered once per process; each
call is a fresh engine session, so calls are independent and deterministic.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from ._version import __version__
from .actions import Decisions
from .engine import make_engine, select_engine
from .estimate.assumptions import Assumptions
from .evaluator import normalize_fact
from .facts import build_facts, resolve_training
from .planner import plan
from .recommendation import Alternative, ChecklistItem, Recommendation
from .rulebook import RuleBook, builtin_rulebook, load_rulebook, render_message
from .specs import Cluster, Model, Training
from .trace import NotFired, RuleReference, Trace, TraceEvent
from .whynot import not_fired_report
from .errors import InputError

__all__ = ["recommend", "recommend_with_ranking", "coerce", "as_cluster", "as_model", "as_training", "as_assumptions",
           "evaluate_rules"]

_ENGINES: dict[tuple[str, str | None], Any] = {}
_ENGINES_LOCK = threading.Lock()


def _reset_after_fork() -> None:
    # A child forked while another thread held the lock would inherit it held and deadlock.
    global _ENGINES_LOCK
    _ENGINES_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def coerce(value: Any, cls, field: str, want: str, preset=None):
    """`value` as an instance of `cls`: the instance itself, a dict of its fields, or (when `preset`
    is given) a preset name; anything else is an InputError naming `field`."""
    if isinstance(value, cls):
        return value
    if isinstance(value, dict):
        return cls(**value)
    if preset is not None and isinstance(value, str):
        return preset(value)
    raise InputError(field, value, want)


def as_cluster(value: Any) -> Cluster:
    return coerce(value, Cluster, "cluster", 'an advisor.Cluster or a dict such as {"gpu": "H100", "gpus": 64}')


def as_model(value: Any) -> Model:
    return coerce(value, Model, "model", "an advisor.Model, a preset name such as 'llama-3-70b', or a dict of "
                                         "Model fields", preset=Model.preset)


def as_training(value: Any) -> Training:
    if value is None:
        return Training()
    return coerce(value, Training, "training", "an advisor.Training, a dict of its fields, or None")


def _engine_for(book: RuleBook, name: str | None):
    # Keyed by the engine actually selected, so ADVISOR_ENGINE changed at run time takes effect.
    chosen = select_engine(name)
    key = (book.revision, chosen)
    engine = _ENGINES.get(key)            # lock-free fast path: dict reads are atomic
    if engine is not None:
        return engine
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            engine = _ENGINES[key] = make_engine(book.rulesets, chosen)
        return engine


def _rulebook(rules: tuple[str | Path, ...]) -> RuleBook:
    return builtin_rulebook() if not rules else load_rulebook(tuple(rules))


def evaluate_rules(book: RuleBook, facts: dict, engine_name: str | None = None,
                   scope: str = "situation", trusted: bool = False) -> tuple[list[str], str]:
    """Fired rule ids of one scope in firing order (tier, file, position), and the engine's name.
    `trusted`: the facts come from advisor.facts (the Python engine may skip re-normalising them)."""
    engine = _engine_for(book, engine_name)
    fired: list[str] = []
    if trusted and engine.name == "python":
        for ruleset in book.rulesets_in(scope):
            fired += engine.evaluate(ruleset, facts, trusted=True)
    else:
        norm = normalize_fact(facts)           # once for every ruleset of the scope
        fired = engine.evaluate_all(book.rulesets_in(scope), norm, normalized=True)
    fired.sort(key=lambda rid: book.rules[rid].order)
    return fired, engine.name


def recommend(cluster: Any, model: Any, training: Any = None, *, rules: tuple[str | Path, ...] = (),
              engine: str | None = None, assumptions: Any = None) -> Recommendation:
    """Recommend a parallel layout for training `model` on `cluster`, with the reasons.

    `cluster`, `model` and `training` accept the advisor objects, dicts of their fields, and (for the
    model) preset names. `rules` adds site rule files after the built-in ones. `engine` forces
    "durable" or "python" (default: the ADVISOR_ENGINE variable, else durable where it imports).
    `assumptions` (an advisor.estimate.Assumptions or a dict of its fields) describes how your
    framework runs (e.g. NeMo 1.x's bf16 gradient buffers: {"megatron_main_grad_bytes": 2}); every
    estimate behind the choice uses it, and the trace lists what differs from the defaults.
    """
    return _recommend(cluster, model, training, rules, engine, assumptions, keep_ranking=False)[0]


def recommend_with_ranking(cluster: Any, model: Any, training: Any = None, *, rules: tuple[str | Path, ...] = (),
                           engine: str | None = None, assumptions: Any = None):
    """`recommend()`, plus every layout that fit, best first, as (Layout, Estimate) pairs. Slower:
    it tries the virtual-stage and micro-batch variants of every shape, where `recommend` stops at
    those that could change its answer (the Recommendation is the same)."""
    return _recommend(cluster, model, training, rules, engine, assumptions, keep_ranking=True)


def as_assumptions(value: Any) -> Assumptions | None:
    if value is None:
        return None
    return coerce(value, Assumptions, "assumptions", "an advisor.estimate.Assumptions, a dict of its fields, or None")


def _recommend(cluster: Any, model: Any, training: Any, rules: tuple[str | Path, ...], engine: str | None,
               assumptions: Any, keep_ranking: bool):
    cluster, model = as_cluster(cluster), as_model(model)
    training, notes = resolve_training(model, as_training(training))
    assumptions = as_assumptions(assumptions)
    if assumptions is not None:
        changed = {k: v for k, v in assumptions.model_dump().items() if v != Assumptions.model_fields[k].default}
        if changed:
            notes = [*notes, "cost-model assumptions differ from the defaults: "
                     + ", ".join(f"{k}={v!r}" for k, v in changed.items())]
    book = _rulebook(tuple(rules))
    facts = build_facts(cluster, model, training)
    fired, engine_name = evaluate_rules(book, facts, engine)

    events: list[TraceEvent] = []

    def add(op: str, message: str, **kw) -> None:
        events.append(TraceEvent(seq=len(events) + 1, op=op, message=message, **kw))

    for note in notes:
        add("input", note)
    decisions = Decisions()
    for rule_id in fired:
        rule = book.rules[rule_id]
        message = render_message(rule.spec.message, facts)
        effects, overridden = [], None
        for action in rule.spec.then:
            text, lost_to = decisions.apply(rule_id, action, facts, message)
            effects.append(text)
            overridden = overridden or lost_to
        add("fire", message, rule_id=rule_id, rule_version=rule.spec.version, tier=rule.spec.tier,
            facts={f: facts[f.split(".")[0]][f.split(".")[1]] for f in rule.fields},
            effect="; ".join(effects), overridden_by=overridden,
            references=[RuleReference(**r.model_dump()) for r in rule.spec.references])

    from .auditor import _zero_only_fits, layout_errors, layout_findings

    def legality_errors(layout, est):
        # Candidate screening runs the same compiled audit rules on the pure-Python evaluator: the
        # differential test keeps it identical to durable_rules, and it is ~20x cheaper per call. The
        # chosen layout's audit below runs on the configured engine.
        return layout_errors(book, cluster, model, training, layout, est.memory, facts)

    result = plan(cluster, model, training, decisions, legality_errors, keep_ranking=keep_ranking,
                  assumptions=assumptions)
    findings = []
    if result.layout is not None:
        findings, _ = layout_findings(book, cluster, model, training, result.layout, result.estimate.memory, engine,
                                      _zero_only_fits(cluster, model, result.layout, training, assumptions))
    for event in result.events:
        add(event.op, event.message, candidate=event.candidate, rule_id=event.rule_id, have=event.have, want=event.want)
    if result.layout is not None:
        est = result.estimate
        add("choose", f"est. step {est.step_time:.2f} s, MFU {est.mfu:.0%}, "
                      f"{est.memory.total / 2**30:.1f} of {est.memory.capacity / 2**30:.1f} GiB per GPU",
            candidate=result.layout.id)

    def shown(value) -> str:        # as a rule file writes it
        return str(value).lower() if isinstance(value, bool) else repr(value) if isinstance(value, str) else str(value)

    not_fired = [NotFired(rule_id=rid, failed=[f"{leaf['field']} {leaf['op']} {shown(leaf['want'])} "
                                               f"(have {shown(leaf['have'])})" for leaf in leaves if not leaf["ok"]])
                 for rid, leaves in not_fired_report(book, facts, fired, "situation").items()]
    trace = Trace(advisor_version=__version__, engine=engine_name, ruleset_revision=book.revision,
                  events=events, not_fired=not_fired)
    return Recommendation(
        status="recommended" if result.layout is not None else "infeasible",
        layout=result.layout,
        framework=result.framework if result.layout is not None else None,
        estimates=result.estimate,
        cluster=cluster, model=model, training=training,
        checklist=[ChecklistItem(rule_id=r, text=t) for r, t in decisions.checklist],
        alternatives=[Alternative(layout=a.layout, reason=a.reason, memory_total=a.estimate.memory.total,
                                  step_time=getattr(a.estimate, "step_time", None)) for a in result.alternatives],
        findings=findings,
        trace=trace,
        candidates_examined=result.examined,
    ), result.ranking
