"""The explanation trace: an OPA-style decision log of one `recommend()` or `audit()` call.

Like OPA's decision log it names the decision, the rule set's revision, the input and the result
(typed records: `TraceInput`, `RecommendResult` / `AuditResult`), then the ordered events, and the
decisions the situation rules made (`DecisionRecord`: each with its value, its revision and the `fire`
events that changed it; each such event lists them in `changed`). Ops are a closed set: `input` (what was assumed about the inputs), `fire`
(a rule matched; its facts, effects, message and references), `reject` (a candidate layout or
family that lost, with the number or rule that rejected it: `rule_id`, or `have` and `want` for memory), `choose` (the layout
picked), `note`.
The same input and rule set give the same trace: no ids, times or addresses are recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, model_serializer

from ..inputs.profile import profile_for
from ..inputs.specs import Cluster, Model, Training
from ..rulebook.actions import Decisions, Effect
from ..rulebook.load import Reference, Rule, RuleBook, render_message
from ..rulebook.whynot import not_fired_report
from .render import BEYOND_STATED, CHOICE_WORDS, OVER_STATED, effect_text

__all__ = ["TraceEvent", "Trace", "NotFired", "TraceInput", "RecommendResult", "AuditResult", "DecisionRecord",
           "NoteKind", "decision_records", "fired_events", "input_summary", "not_fired_events"]

Op = Literal["input", "fire", "reject", "choose", "note"]
Decision = Literal["recommend", "audit"]
NoteKind = Literal["stated_override", "beyond_stated", "preference", "search", "family_move"]
"""What a `note` event is about, for the notes the account repeats: an earlier rule's choice standing
over a stated framework's (`stated_override`), ZeRO stages beyond the stated release (`beyond_stated`),
one rule's near-tie preference over another's (`preference`), the search's count of what fit
(`search`), the choice moving to the other family against a rule's preference (`family_move`)."""


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
    """The fired rule's effects as one line of text (for `fire`)."""
    effects: list[Effect] = Field(default_factory=list)
    """The same effects as data: what each action chose, bounded, enabled or added (for `fire`)."""
    references: list[Reference] = Field(default_factory=list)
    candidate: str | None = None
    """Layout id, for `reject` and `choose`."""
    overridden_by: str | None = None
    """For a choice that lost to an earlier rule: that rule's id."""
    have: float | None = None
    """For a candidate rejected for memory: the bytes per GPU it needs."""
    want: float | None = None
    """For a candidate rejected for memory: the bytes per GPU it had to fit in (GPU memory, host
    memory or NVMe, whichever it did not fit)."""
    kind: NoteKind | None = None
    """For a `note` the account repeats: what it is about."""
    changed: list[str] = Field(default_factory=list)
    """For `fire`: the decisions (`DecisionRecord.name`) this rule's actions changed."""

    @model_serializer(mode="wrap")
    def _without_unset_links(self, handler):
        # `kind` and `changed` appear only where they say something, so events that have neither keep
        # the JSON they had before the decision records
        out = handler(self)
        if out.get("kind") is None:
            out.pop("kind", None)
        if not out.get("changed"):
            out.pop("changed", None)
        return out

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


class TraceInput(BaseModel):
    """The input as the rules saw it, in brief: what a reader needs to reproduce the call (the result
    objects hold the rest). Optional fields are left out of the JSON when unset."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    cluster: str
    """"<gpus> x <GPU name>"."""
    gpus_per_node: int
    nvlink_domain: int
    model: str
    params: int
    seq_len: int
    global_batch_size: int
    precision: str
    profile: str
    """The kernel efficiencies the estimate used: "<name> (measured)" or "... (derived)" from another GPU's."""
    cuda_graphs: bool | None = None
    optimizer: str | None = None
    """Training.optimizer, when not the default adam."""
    master_weights: str | None = None
    """Training.master_weights, when not the default fp32."""
    lora_dropout: float | None = None
    framework: str | None = None
    """The stated training stack (rules/stated-framework.toml reads it)."""
    framework_version: str | None = None
    site_rules: list[str] | None = None
    assumptions: dict[str, Any] | None = None
    """The cost-model assumptions that differ from the defaults."""
    layout: str | None = None
    """audit(): the id of the layout judged (Layout.parse reads it back, framework included)."""


class RecommendResult(BaseModel):
    """recommend()'s outcome in brief."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    status: Literal["recommended", "infeasible"]
    framework: str | None
    layout: str | None


class AuditResult(BaseModel):
    """audit()'s outcome in brief: ok when no error; the rule ids of the errors and warnings."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    ok: bool
    errors: list[str]
    warnings: list[str]


class DecisionRecord(BaseModel):
    """One decision the situation rules made, as the planner reads it: `name` is framework,
    zero_stages, frameworks, strategy, "<dimension>.max" / "<dimension>.min" (a limit) or
    "<feature>.enabled" / "<feature>.disabled". `revision` counts the rule events that changed it (a
    choice is made once; a limit changes again when a later rule tightens it); `changed_by` holds
    their `seq`, the last one the rule whose value stands."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    value: str | int | bool | list[int] | list[str]
    revision: int
    changed_by: list[int]
    rule_id: str


class Trace(BaseModel):
    model_config = ConfigDict(frozen=True)

    decision: Decision
    """Which entry point decided: recommend() or audit()."""
    advisor_version: str
    engine: str
    ruleset_revision: str
    input: TraceInput
    """The input as the rules saw it, in brief: the cluster, the model, the resolved training, the
    layout judged (audit), the site rule files and the assumptions that differ from the defaults."""
    result: RecommendResult | AuditResult
    """The outcome in brief: status, framework and layout (recommend); ok, errors, warnings (audit)."""
    events: list[TraceEvent]
    decisions: list[DecisionRecord] = Field(default_factory=list)
    """What the situation rules decided (recommend), in the order first decided."""
    not_fired: list[NotFired] = Field(default_factory=list)
    """Situation rules whose conditions did not hold for these facts, and why (computed by the
    Python evaluator from the same compiled conditions: durable_rules cannot say which clause failed)."""

    @field_serializer("input", mode="wrap")
    def _input_without_unset(self, value, handler):
        # the JSON of the input as it was before it was typed: unset optional fields are left out
        return {k: v for k, v in handler(value).items() if v is not None}

    @model_serializer(mode="wrap")
    def _without_empty_decisions(self, handler):
        out = handler(self)             # an audit decides nothing: its JSON has no `decisions`
        if not out.get("decisions"):
            out.pop("decisions", None)
        return out

    def event(self, seq: int) -> TraceEvent:
        """The event numbered `seq`."""
        return next(e for e in self.events if e.seq == seq)

    def decision_record(self, name: str) -> DecisionRecord | None:
        return next((d for d in self.decisions if d.name == name), None)

    def notes(self, kind: NoteKind) -> list[TraceEvent]:
        """The `note` events about `kind`, in order."""
        return [e for e in self.events if e.op == "note" and e.kind == kind]

    def fired(self) -> list[str]:
        return [e.rule_id for e in self.events if e.op == "fire" and e.rule_id]

    def render(self) -> str:
        head = f"{self.decision}: advisor {self.advisor_version}  engine {self.engine}  rules {self.ruleset_revision}"
        return "\n".join([head, *(e.line() for e in self.events)])


def fired_events(book: RuleBook, fired: list[str], facts: dict, decisions: Decisions, first_seq: int) -> list[TraceEvent]:
    """The `fire` events of the fired rules, in firing order, their actions applied to `decisions`; after
    a rule that reads the stated framework, a `note` for each earlier rule whose different choice
    stands over it, and at the end one for ZeRO stages a rule chose beyond what the stated release has."""
    events: list[TraceEvent] = []
    decided: set[str] = set()
    for rule_id in fired:
        rule = book.rules[rule_id]
        message = render_message(rule.spec.message, facts)
        effects = [e for action in rule.spec.then for e in decisions.apply(rule_id, action, facts, message, rule.spec.tier)]
        events.append(_fire_event(first_seq + len(events), rule, message, facts, effects, _changed(effects, decided)))
        if STATED in rule.fields:
            for by, text in _overrides_of_stated(book, effects, facts, decisions):
                events.append(TraceEvent(seq=first_seq + len(events), op="note", rule_id=by, message=text,
                                         kind="stated_override"))
    beyond = _zero_beyond_stated(book, decisions, facts)
    if beyond:
        events.append(TraceEvent(seq=first_seq + len(events), op="note", rule_id=decisions.zero_stages[1],
                                 message=beyond, kind="beyond_stated"))
    return events


def _changed(effects: list[Effect], decided: set[str]) -> list[str]:
    """The decisions these effects changed, as Decisions.apply made them: a choice when it was the
    first (not one that agreed or lost), a limit when it was tighter, a feature when first switched.
    `decided` collects the features already switched."""
    names = []
    for e in effects:
        if e.kind == "choose" and e.kept is None and e.overridden_by is None:
            names.append(e.field)
        elif e.kind == "limit" and e.kept is None:
            names.append(f"{e.field}.{e.bound}")
        elif e.kind in ("enable", "disable") and f"{e.field}.{e.kind}d" not in decided:
            names.append(f"{e.field}.{e.kind}d")
            decided.add(names[-1])
    return names


def decision_records(events: list[TraceEvent]) -> list[DecisionRecord]:
    """The decisions the `fire` events changed, in the order first decided, each with its final value,
    its revision (how many events changed it) and those events."""
    records: dict[str, DecisionRecord] = {}
    for event in events:
        for name in event.changed:
            value = True if name.endswith(("enabled", "disabled")) else next(
                e.value for e in event.effects if _effect_name(e) == name)
            before = records.get(name)
            records[name] = DecisionRecord(name=name, value=value, revision=(before.revision if before else 0) + 1,
                                           changed_by=[*(before.changed_by if before else []), event.seq],
                                           rule_id=event.rule_id)
    return list(records.values())


def _effect_name(e: Effect) -> str | None:
    if e.kind == "choose":
        return e.field
    if e.kind == "limit":
        return f"{e.field}.{e.bound}"
    return f"{e.field}.{e.kind}d" if e.kind in ("enable", "disable") else None


STATED = "training.framework"
"""The fact of the stack the user states (Training.framework): rules/stated-framework.toml reads it."""


def _stated(facts: dict) -> str:
    version = facts["training"].get("framework_version", "unstated")
    return facts["training"]["framework"] + ("" if version == "unstated" else f" {version}")


def _who(book: RuleBook, rule_id: str) -> str:
    rule = book.rules[rule_id]
    kind = "rule" if Path(rule.path).parent == Path(book.root) else "site rule"
    return f"{kind} {rule_id} (tier {rule.spec.tier})"


def _overrides_of_stated(book: RuleBook, effects: list[Effect], facts: dict,
                         decisions: Decisions) -> list[tuple[str, str]]:
    """(the earlier rule, the words) for each rule whose choice stood over this stated-framework rule's:
    only a rule of a tier before `constraint` can (rules/tiers.toml: `legality`)."""
    by_rule: dict[str, list[str]] = {}
    for e in effects:
        if e.kind != "choose" or e.overridden_by is None:
            continue
        kept = e.kept
        if e.field == "zero_stages":         # within what the release has (Decisions.zero_choice)
            kept = list(decisions.zero_choice())
            if kept == e.value:
                continue                     # _zero_beyond_stated says why
        by_rule.setdefault(e.overridden_by, []).append(f"{CHOICE_WORDS[e.field]} {kept}, not {e.value}")
    return [(by, f"{_who(book, by)} {OVER_STATED} {_stated(facts)}: {'; '.join(what)}")
            for by, what in by_rule.items()]


def _zero_beyond_stated(book: RuleBook, decisions: Decisions, facts: dict) -> str | None:
    """Words for ZeRO stages a rule chose outside what the stated release has (Decisions.zero_choice
    keeps to the release's), or None."""
    if decisions.zero_stages is None or decisions.zero_bound is None:
        return None
    chosen, by = decisions.zero_stages
    bound, stated_by = decisions.zero_bound
    beyond = [s for s in chosen if s not in bound]
    if not beyond or by == stated_by:
        return None
    return (f"{_who(book, by)} allows ZeRO stages {list(chosen)}, {BEYOND_STATED} {_stated(facts)} has "
            f"{list(bound)} ({stated_by}): ZeRO {beyond} left out, a rule chooses among what a release has "
            f"and cannot add to it; the planner uses {list(decisions.zero_choice())}")


def _fire_event(seq: int, rule: Rule, message: str, facts: dict, effects: list[Effect],
                changed: list[str]) -> TraceEvent:
    """The `fire` event of one rule: the facts its condition read, what it did, what that changed, its
    citations."""
    return TraceEvent(seq=seq, op="fire", message=message, rule_id=rule.id, rule_version=rule.spec.version,
                      changed=changed,
                      tier=rule.spec.tier, facts={f: facts[f.split(".")[0]][f.split(".")[1]] for f in rule.fields},
                      effect=effect_text(effects), effects=effects,
                      overridden_by=next((e.overridden_by for e in effects if e.overridden_by), None),
                      references=list(rule.spec.references))


def input_summary(cluster: Cluster, model: Model, training: Training, rules: tuple = (),
                  assumptions: dict | None = None, layout: str | None = None) -> TraceInput:
    """Trace.input: what a reader needs to reproduce the call (the result objects hold the rest)."""
    summary: dict[str, Any] = {
        "cluster": f"{cluster.gpus} x {cluster.gpu.name}", "gpus_per_node": cluster.gpus_per_node,
        "nvlink_domain": cluster.nvlink_domain, "model": model.name, "params": model.params,
        "seq_len": training.seq_len, "global_batch_size": training.global_batch_size,
        "precision": training.precision,
        # the kernel efficiencies the estimate used: "... (measured)" or "... (derived)" from another GPU's
        "profile": (cluster.profile or profile_for(cluster.gpu)).label,
    }
    if training.cuda_graphs:
        summary["cuda_graphs"] = True
    for key, default in (("optimizer", "adam"), ("master_weights", "fp32"), ("lora_dropout", None)):
        if getattr(training, key) != default:   # the optimizer and master-weight policy, when stated
            summary[key] = getattr(training, key)
    if training.framework is not None:      # the stated training stack (rules/stated-framework.toml reads it)
        summary["framework"] = training.framework
        if training.framework_version is not None:
            summary["framework_version"] = training.framework_version
    if rules:
        summary["site_rules"] = [str(r) for r in rules]
    if assumptions:
        summary["assumptions"] = assumptions
    return TraceInput(**summary, layout=layout)


def not_fired_events(book: RuleBook, facts: dict, fired: list[str], scope: str) -> list[NotFired]:
    """The rules of `scope` that did not fire, each with its failing conditions written as a rule file
    writes them: `training.seq_len >= 16384 (have 8192)`."""
    return [NotFired(rule_id=rule_id, failed=[f"{leaf['field']} {leaf['op']} {_as_written(leaf['want'])} "
                                              f"(have {_as_written(leaf['have'])})" for leaf in leaves if not leaf["ok"]])
            for rule_id, leaves in not_fired_report(book, facts, fired, scope).items()]


def _as_written(value) -> str:
    return str(value).lower() if isinstance(value, bool) else repr(value) if isinstance(value, str) else str(value)
