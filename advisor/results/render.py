"""The text of the results: the estimate's bars and times, the pipeline split, a recommendation's
account and its summary. No decision is made here; each function reads fields of the results."""

from __future__ import annotations

import textwrap
from ..costmodel import Estimate
from ..inputs.layout import Layout
from ..inputs.pipeline import pipeline_split, stage_layers, virtual_stage_layers
from ..inputs.specs import Model
from ..inputs.units import format_bytes
from ..rulebook.actions import Effect

__all__ = ["CHOICE_WORDS", "OVER_STATED", "BEYOND_STATED", "OVER_PREFERENCE", "effect_text", "estimate_lines", "named_layout",
           "network_text", "pipeline_line", "recommendation_text", "story", "deciding_event"]

_BAR = 40
CHOICE_WORDS = {"framework": "framework", "zero_stages": "ZeRO stages allowed", "frameworks": "frameworks allowed",
                "strategy": "strategy"}
# The words of the trace notes (results.trace) in which a rule's choice stands over a stated
# framework's, or asks for ZeRO stages the stated release does not have; the story repeats them.
OVER_STATED = "overrides the stated"
BEYOND_STATED = "but the stated"
# The words of the planner's note in which one rule's near-tie preference stands over another's (a MoE
# model's "less TP" over "TP first"); the story repeats it next to the rule it qualifies.
OVER_PREFERENCE = "stands over"


def effect_text(effects: list[Effect]) -> str:
    """A fired rule's effects as one line: "framework = megatron; tp <= cluster.nvlink_domain(8)"."""
    return "; ".join(_one_effect(e) for e in effects)


def _one_effect(e: Effect) -> str:
    if e.kind == "choose":
        text = f"{CHOICE_WORDS[e.field]} = {e.value}"
        if e.overridden_by is not None:
            return text + f" (overridden: {e.overridden_by} chose {e.kept})"
        return text + (" (agrees)" if e.kept is not None else "")
    if e.kind == "limit":
        shown = f"{e.source}({e.value})" if e.source else str(e.value)
        text = f"{e.field} {'<=' if e.bound == 'max' else '>='} {shown}"
        return text + (f" (already {e.kept})" if e.kept is not None else "")
    if e.kind == "enable":
        return f"enable {e.field}"
    if e.kind == "disable":
        return f"disable {e.field}"
    if e.kind == "finding":
        return f"{e.value} finding"
    return "checklist item" if e.kind == "checklist" else "note"


def named_layout(framework: str | None, layout: Layout, gap: str = " ") -> str:
    """The layout's id with the framework that runs it, the framework written once: a Megatron id
    carries no framework ("megatron  tp8-dp4-pp2-zero1-sp-nmb128"), the others begin with it
    ("deepspeed/tp1-dp64-pp1-zero3")."""
    if framework is None or layout.id.startswith(f"{framework}/"):
        return layout.id
    return f"{framework}{gap}{layout.id}"


def estimate_lines(est: Estimate) -> list[str]:
    """Per-GPU memory as a bar per term against capacity, then time and communication."""
    m = est.memory
    gib = 2**30
    terms = [("weights", m.weights), ("gradients", m.gradients), ("optimizer", m.optimizer),
             ("activations", m.activations), ("buffers", m.buffers), ("reserve", m.reserve)]
    lines = [f"Memory per GPU (most-loaded rank, stage {m.stage}): {m.total / gib:.1f} of {m.capacity / gib:.1f} GiB, "
             f"headroom {m.headroom / gib:.1f} GiB"]
    for name, value in terms:
        bar = _bar(value, m.capacity)
        lines.append(f"  {name:<12}{value / gib:>7.1f} GiB  {bar}")
    if m.offloaded_to_host or m.offloaded_to_nvme:
        lines.append(f"  offloaded   {m.offloaded_to_host / gib:>7.1f} GiB to host, {m.offloaded_to_nvme / gib:.1f} GiB to NVMe")
    comm = ", ".join(f"{dim} {getattr(est.comm, dim).seconds:.2f} s ({getattr(est.comm, dim).link})"
                     for dim in ("tp", "pp", "dp", "cp", "ep") if getattr(est.comm, dim).seconds > 0)
    lines += [
        f"Step {est.step_time:.2f} s: compute {est.compute_time:.2f} s, bubble {est.bubble_fraction:.1%}, "
        f"exposed comm {est.exposed_comm_time:.2f} s, optimizer {est.optimizer_time:.2f} s",
        f"Throughput {est.tokens_per_second:,.0f} tokens/s, MFU {est.mfu:.1%}, comm/compute ratio {est.comm_ratio:.2f}",
    ]
    if comm:
        lines.append(f"Communication per step (before overlap): {comm}")
    return lines


def _bar(value: float, capacity: float) -> str:
    """A term's share of GPU memory as up to _BAR marks; a term larger than the GPU ends in ">"."""
    if not capacity:
        return ""
    marks = round(_BAR * value / capacity)
    return "#" * marks if marks <= _BAR else "#" * (_BAR - 1) + ">"


def _runs(sizes: list[int]) -> str:
    """7 | 8 x14 | 7: a split with its repeats folded."""
    runs: list[list[int]] = []
    for n in sizes:
        if runs and runs[-1][0] == n:
            runs[-1][1] += 1
        else:
            runs.append([n, 1])
    return " | ".join(f"{n} x{k}" if k > 1 else str(n) for n, k in runs)


def pipeline_line(layout: Layout, model: Model) -> str | None:
    """The layers per pipeline stage the estimate assumed (advisor.inputs.pipeline.stage_layers) and, for Megatron-LM,
    the flags that make the framework run that split; None without a pipeline."""
    if layout.pp == 1:
        return None
    split = stage_layers(model.layers, layout.pp)
    even = len(set(split)) == 1
    text = f"Pipeline: {model.layers} layers over {layout.pp} stages" + (f" of {split[0]}" if even else f", {_runs(split)}")
    megatron = layout.framework == "megatron"
    chunks = virtual_stage_layers(model.layers, layout.pp, layout.vpp) if layout.vpp > 1 else None
    if chunks and len(set(chunks)) == 1:
        text += f"; {layout.vpp} virtual stages of {chunks[0]} per rank"
        if megatron:
            text += f" (--num-layers-per-virtual-pipeline-stage {chunks[0]})"
    elif chunks:
        text += f"; each rank in {layout.vpp} virtual stages of {min(chunks)}-{max(chunks)} layers"
        form = pipeline_split(model.layers, layout.pp, layout.vpp).form
        if megatron and form.startswith("account"):
            text += (" (" + ("the embedding and " if form == "account-embedding-loss" else "")
                     + "the loss counted as layers: " + ("--account-for-embedding-in-pipeline-split "
                     if form == "account-embedding-loss" else "") + "--account-for-loss-in-pipeline-split)")
        elif megatron:
            text += " (--pipeline-model-parallel-layout, which the Megatron export writes)"
    elif not even and megatron:
        text += f" (--decoder-first-pipeline-num-layers {split[0]} --decoder-last-pipeline-num-layers {split[-1]})"
    return text


def recommendation_text(rec, level: str = "summary", width: int = 100) -> str:
    """The account of a Recommendation `rec` (untyped: its module imports this one): the layout, its
    memory, the rules that chose it, what lost, what to check; `level` "full" adds each rule's facts
    and references, the raw trace and the rules that did not fire. `width`: the story's paragraph."""
    full = level == "full"
    sections = [_situation(rec) + ["", textwrap.fill(story(rec), width=width), ""] + _choice(rec),
                estimate_lines(rec.estimates) if rec.estimates is not None else [],
                _why(rec, full), _planner_notes(rec, full), _alternatives(rec), _audit_of_choice(rec), _checklist(rec)]
    if full:
        sections += [["Trace:", rec.trace.render()], _not_fired(rec)]
    lines = sections[0]
    for section in sections[1:]:
        lines += ["", *section] if section else []
    return "\n".join(lines)


def _situation(rec) -> list[str]:
    c, m, t = rec.cluster, rec.model, rec.training
    return [f"{m.name} ({m.params / 1e9:.1f}B params) on {c.gpus} x {c.gpu.name} ({network_text(c)}), "
            f"seq {t.seq_len}, global batch {t.global_batch_size}, {t.precision}"]


def network_text(cluster) -> str:
    """The nodes and the links the estimate assumed: "8 nodes x 8, NVLink domain 8 (900 GB/s per GPU),
    network 400 Gbit/s per GPU" (NVLink as vendors quote it, both directions; the network one way)."""
    c = cluster
    domain = min(c.nvlink_domain, c.gpus)      # a domain larger than the job: the job's GPUs (facts do the same)
    return (f"{c.nodes} node{'s' if c.nodes > 1 else ''} x {c.gpus_in_node}, NVLink domain {domain} "
            f"({c.intra_node_bandwidth / 1e9:,.0f} GB/s per GPU), network {c.inter_node_bandwidth * 8 / 1e9:,.0f} "
            f"Gbit/s per GPU")


def _choice(rec) -> list[str]:
    if rec.layout is None:
        return ["No layout could be recommended: see the rejections below."]
    lay = rec.layout
    extras = [f"SP {'on' if lay.sp else 'off'}", f"recompute {lay.recompute}",
              f"micro-batch {lay.micro_batch_size} x {lay.num_microbatches}"]
    if lay.offload != "none":
        extras.append(f"offload {lay.offload} to {lay.offload_device}")
    pipeline = pipeline_line(lay, rec.model)
    return [f"Recommendation: {named_layout(rec.framework, lay, gap='  ')}  ({', '.join(extras)})",
            *([pipeline] if pipeline else [])]


def _why(rec, full: bool) -> list[str]:
    fired = [e for e in rec.trace.events if e.op == "fire"]
    lines = ["Why (rules that fired, in order):"] if fired else []
    for e in fired:
        lines.append(f"  - {e.rule_id}: {e.message}")
        if e.effect and e.effect not in ("checklist item", "note"):
            lines.append(f"      -> {e.effect}")
        if full:
            lines.append("      facts: " + ", ".join(f"{k}={v}" for k, v in e.facts.items()))
            lines += [f"      ref: {r.title} ({r.url or r.path})" for r in e.references]
    return lines


def _planner_notes(rec, full: bool = True) -> list[str]:
    """The input, reject and note events; below "full", a recommendation's rejections only counted."""
    shown = ("reject", "note", "input") if full or rec.layout is None else ("note", "input")
    events = [e for e in rec.trace.events if e.op in shown]
    lines = [f"  - {e.op}: {(e.candidate + ': ') if e.candidate else ''}{e.message}" for e in events]
    rejected = sum(e.op == "reject" for e in rec.trace.events) if "reject" not in shown else 0
    if rejected:
        plural = "s" if rejected > 1 else ""
        lines.append(f"  - {rejected} candidate layout{plural} rejected (--explain full lists them)")
    return ["Assumptions, rejections and notes:", *lines] if lines else []


def _alternatives(rec) -> list[str]:
    return (["Alternatives (also fit, ranked lower):"]
            + [f"  - {a.layout.id} ({format_bytes(a.memory_total)} per GPU): {a.reason}"
               for a in rec.alternatives]) if rec.alternatives else []


def _audit_of_choice(rec) -> list[str]:
    lines = ["Audit of the choice:"] if rec.findings else []
    for f in rec.findings:
        lines.append(f"  {f.severity}: {f.message} [{f.rule_id}]")
        if f.severity != "info":
            lines.append(f"      fix: {f.fix}")
    return lines


def _checklist(rec) -> list[str]:
    return (["Checklist:"] + [f"  {i}. {item.text}  [{item.rule_id}]" for i, item in enumerate(rec.checklist, 1)]
            if rec.checklist else [])


def _not_fired(rec) -> list[str]:
    return (["Did not fire (the conditions that did not hold):"]
            + [f"  - {n.rule_id}: {'; '.join(n.failed)}" for n in rec.trace.not_fired]) if rec.trace.not_fired else []


def deciding_event(trace):
    """The `fire` event that made the framework or strategy decision first (DecisionRecord.changed_by),
    or None when no rule made either."""
    made = [d.changed_by[0] for d in trace.decisions if d.name in ("framework", "strategy")]
    return trace.event(min(made)) if made else None


def _first_bound(trace, skip: set[str]):
    """The first `fire` event that set an upper bound on a dimension, of a rule not in `skip`."""
    seqs = [seq for d in trace.decisions if d.name.endswith(".max") for seq in d.changed_by]
    return next((trace.event(seq) for seq in sorted(seqs) if trace.event(seq).rule_id not in skip), None)


def story(rec) -> str:
    """A Recommendation's decision in a few sentences, read from its decision log: what the rules chose
    and why, what fit, what lost."""
    trace = rec.trace
    chose = deciding_event(trace)
    parts = [f"Rule {chose.rule_id}: {chose.message}."] if chose is not None else []
    # an earlier rule's choice that stands over the stated framework, ZeRO stages kept to the release's,
    # one rule's near-tie preference over another's
    parts += [f"{e.message[0].upper()}{e.message[1:]}." for e in trace.events if e.op == "note" and e.rule_id
              and e.kind in ("stated_override", "beyond_stated", "preference")]
    bound = _first_bound(trace, {chose.rule_id} if chose is not None else set())
    if bound is not None:
        parts.append(f"Rule {bound.rule_id}: {bound.message}.")
    # the last search's count: when the choice moved to the other family, that search made it
    searches = trace.notes("search")
    if rec.layout is None:
        reason = next((e.message for e in reversed(trace.events) if e.op == "reject"), "nothing fits")
        parts.append(f"No layout could be recommended: {reason}.")
        return " ".join(parts)
    est = rec.estimates
    moved = trace.notes("family_move")
    if moved:
        parts.append(f"But {moved[0].message[0].lower()}{moved[0].message[1:]}.")
    parts.append(
        f"Search: {searches[-1].message if searches else 'candidates ranked by estimated step time'}. "
        f"The pick, {rec.layout.id}: est. {est.step_time:.2f} s per step, MFU {est.mfu:.0%}, "
        f"{est.memory.total / 2**30:.0f} of {est.memory.capacity / 2**30:.0f} GiB per GPU.")
    if rec.alternatives:
        a = rec.alternatives[0]
        parts.append(f"Runner-up {a.layout.id}: {a.reason}.")
    family = next((a for a in rec.alternatives if a.family is not None), None)
    if family is not None and family is not rec.alternatives[0]:
        parts.append(f"{family.layout.id}: {family.reason}.")
    return " ".join(parts)
