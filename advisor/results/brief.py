"""The first screen of a recommendation: `advisor recommend`'s default text, `Recommendation.explain("brief")`.

The answer comes first and each fact is said once: the situation with the network it assumed, the
layout and the rule that chose it, memory and time per step, the figures framework logs print
(tokens/s and TFLOP/s per GPU, MFU against a named peak), three runners-up with why each ranked
lower, the warnings of the pick's audit and the checklist. The rules, notes and every alternative are
`explain("summary")` (render.recommendation_text); the trace and the rejected layouts `explain("full")`.
Every line is wrapped to the width asked for (the terminal's, from the CLI). No decision is made here.
"""

from __future__ import annotations

import re
import textwrap

from ..inputs.precision import recipe
from .render import deciding_event, named_layout, network_text, pipeline_line

__all__ = ["brief_text", "wrap_lines", "per_gpu_figures", "infeasible_reason", "deciding_rule", "DEFAULT_WIDTH",
           "SHOWN_ALTERNATIVES"]

DEFAULT_WIDTH = 80
SHOWN_ALTERNATIVES = 3
_GIB = 2**30
# a list marker or a severity label, whose text a wrapped line's continuation lines up with
_HANGING = re.compile(r" *(?:- |\d+\. |[A-Z]{4,} +)")
# a number and its unit stay on one line ("0.01 s", "80.0 GiB"): the space between them is held by
# a character no text here contains while the line is wrapped
_UNIT = re.compile(r"(?<=\d) (?=(?:s|GiB|GB|GB/s|Gbit/s|TFLOP/s)(?![\w/]))")
_KEEP = "\x1f"
# the trace's input notes for a field the caller left out (specs.resolve_training writes them)
_ASSUMED = {"seq_len": "training.seq_len not given", "global_batch_size": "training.global_batch_size not given"}


def wrap_lines(lines: list[str], width: int | None) -> list[str]:
    """Each line wrapped to `width` columns, its continuation indented past a list marker ("- ",
    "1. ") or a severity label ("WARNING "), else two columns past its own indent; ids and other words
    are never split. None: as is."""
    if width is None:
        return list(lines)
    out = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        head = _HANGING.match(line)
        lead = line[:head.end()] if head else line[:len(line) - len(line.lstrip(" "))]
        hang = " " * (len(lead) if head else len(lead) + 2)
        # the marker and the first word stay on one line, however long the word (a layout id)
        wrapped = textwrap.wrap(_UNIT.sub(_KEEP, line[len(lead):]), width=width, initial_indent=lead,
                                subsequent_indent=hang, break_long_words=False, break_on_hyphens=False)
        out += [part.replace(_KEEP, " ") for part in wrapped] or [line]
    return out


def per_gpu_figures(est, cluster, precision: str) -> str:
    """Throughput as framework logs print it: tokens/s and model TFLOP/s per GPU, and MFU against the
    dense 16-bit peak, plus against the precision's own peak when its GEMMs run at another."""
    gpus, gpu = cluster.gpus, cluster.gpu
    tflops = est.model_flops / est.step_time / gpus / 1e12 if est.step_time else 0.0
    text = (f"{est.tokens_per_second / gpus:,.0f} tokens/s and {tflops:,.0f} TFLOP/s per GPU; MFU {est.mfu:.1%} of "
            f"the {gpu.peak_flops / 1e12:,.0f} TFLOP/s {'BF16' if gpu.bf16 else 'FP16'} dense peak")
    gemm = recipe(precision).gemm
    peak = {"fp8": gpu.peak_flops_fp8, "fp4": gpu.peak_flops_fp4}.get(gemm)
    if peak:
        text += f", {tflops * 1e12 / peak:.1%} of the {peak / 1e12:,.0f} TFLOP/s {gemm.upper()} peak"
    return text


def brief_text(rec, width: int | None = DEFAULT_WIDTH) -> str:
    """The first screen of a Recommendation `rec` (untyped: its module imports this one)."""
    sections = [[_situation(rec)], _answer(rec)]
    if rec.layout is not None:
        sections += [_figures(rec), _alternatives(rec), _warnings(rec), _checklist(rec)]
    sections.append([_footer(rec)])
    lines: list[str] = []
    for section in sections:
        if section:
            lines += ([""] if lines else []) + section
    return "\n".join(wrap_lines(lines, width))


def _situation(rec) -> str:
    m, t = rec.model, rec.training
    assumed = {field for field, words in _ASSUMED.items()
               if any(e.op == "input" and e.message.startswith(words) for e in rec.trace.events)}
    mark = {field: " (assumed)" if field in assumed else "" for field in _ASSUMED}
    tokens = t.global_batch_size * t.seq_len
    return (f"{m.name} ({m.params / 1e9:.1f}B params) on {rec.cluster.gpus} x {rec.cluster.gpu.name}: "
            f"{network_text(rec.cluster)}; seq {t.seq_len}{mark['seq_len']}, global batch {t.global_batch_size} "
            f"= {tokens / 1e6:.1f}M tokens{mark['global_batch_size']}, {t.precision}")


def _answer(rec) -> list[str]:
    if rec.layout is None:
        refused = next((e for e in reversed(rec.trace.events) if e.op == "reject"), None)
        # an audit rule that refused every layout that fits memory, or memory itself
        head = "No legal layout" if refused is not None and refused.rule_id else "No layout fits"
        lines = [f"{head}: {infeasible_reason(rec)}."]
        why = deciding_rule(rec)
        return lines + ([f"  rules: {why}"] if why else [])
    lines = [f"Recommendation: {named_layout(rec.framework, rec.layout)}"]
    pipeline = pipeline_line(rec.layout, rec.model)
    if pipeline:
        lines.append(f"  {pipeline}")
    why = deciding_rule(rec)
    if why:
        lines.append(f"  why: {why}")
    return lines


def infeasible_reason(rec) -> str:
    """Why nothing fits, from the last rejection: the layout that came closest and what it needs."""
    reason = next((e.message for e in reversed(rec.trace.events) if e.op == "reject"), "no candidate was left")
    return reason.removeprefix("no layout fits; ")


def deciding_rule(rec) -> str | None:
    """The rule whose framework or strategy choice stood, with its message, and the rule whose near-tie
    preference stands over its own, if any; when the estimate moved the choice to the other family, the
    planner's note saying so."""
    moved = rec.trace.notes("family_move")
    if moved:
        return moved[0].message
    chooser = deciding_event(rec.trace)
    if chooser is None:
        return None
    why = f"{chooser.message} [{chooser.rule_id}]"
    return why if rec.layout is None else why + "".join(_what_else_decided(rec, chooser.rule_id))


def _what_else_decided(rec, chooser: str):
    """What the pick follows beside the deciding rule, where the rule's own words would contradict it:
    a rule that keeps TP at 1 (no NVLink to carry it), the ZeRO family's refusal that widened the search
    to model parallelism, another rule's near-tie preference that stands over the chooser's (an MoE
    model's less TP over a dense model's TP first)."""
    trace, layout = rec.trace, rec.layout
    bound, tp_first = trace.decision_record("tp.max"), trace.decision_record("tp_before_pp.enabled")
    if bound is not None and bound.value == 1 and tp_first is not None and tp_first.rule_id == chooser:
        yield f"; {trace.event(bound.changed_by[-1]).message} [{bound.rule_id}]"
    refused = next((e for e in trace.events if e.op == "reject" and e.candidate == "zero-dp"), None)
    if refused is not None and layout.tp * layout.pp * layout.cp > 1:
        yield f"; {refused.message}, so model parallelism"
    preferred = next((e.rule_id for e in trace.notes("preference") if e.rule_id != chooser), None)
    fired = next((e for e in trace.events if e.op == "fire" and e.rule_id == preferred), None)
    if fired is not None:
        yield f"; near-ties: {fired.message} [{fired.rule_id}]"


def _figures(rec) -> list[str]:
    est, m = rec.estimates, rec.estimates.memory
    other = m.buffers + m.reserve
    memory = (f"Memory per GPU: {m.total / _GIB:.1f} of {m.capacity / _GIB:.1f} GiB (weights {m.weights / _GIB:.1f}, "
              f"gradients {m.gradients / _GIB:.1f}, optimizer {m.optimizer / _GIB:.1f}, activations "
              f"{m.activations / _GIB:.1f}, buffers and reserve {other / _GIB:.1f})")
    if m.offloaded_to_host or m.offloaded_to_nvme:
        memory += (f"; offloaded {m.offloaded_to_host / _GIB:.1f} GiB to host, "
                   f"{m.offloaded_to_nvme / _GIB:.1f} GiB to NVMe")
    step = (f"Step: {est.step_time:.2f} s{_long(est.step_time)} (compute {est.compute_time:.2f} s, exposed communication "
            f"{est.exposed_comm_time:.2f} s, bubble {est.bubble_fraction:.1%}, optimizer {est.optimizer_time:.2f} s)")
    return [memory, step, f"Throughput: {per_gpu_figures(est, rec.cluster, rec.training.precision)}"]


def _long(seconds: float) -> str:
    """A step of an hour or more, also in hours or days: a reader of "304513.14 s" should not have to
    divide to see that one step takes three and a half days."""
    if seconds < 3600.0:
        return ""
    return f" = {seconds / 3600.0:.1f} hours" if seconds < 48 * 3600.0 else f" = {seconds / 86400.0:.1f} days"


def _alternatives(rec) -> list[str]:
    shown = rec.alternatives[:SHOWN_ALTERNATIVES]
    if not shown:
        return []
    lines = ["Also fit, ranked lower:"]
    lines += [f"  - {a.layout.id} ({a.memory_total / _GIB:.1f} GiB per GPU): {a.reason}" for a in shown]
    if len(rec.alternatives) > len(shown):
        lines.append(f"  ({len(rec.alternatives) - len(shown)} more: --explain)")
    return lines


def _warnings(rec) -> list[str]:
    return [f"Warning: {f.message} [{f.rule_id}]; fix: {f.fix}" for f in rec.findings if f.severity == "warning"]


def _checklist(rec) -> list[str]:
    return ["Checklist:", *(f"  {i}. {item.text}" for i, item in enumerate(rec.checklist, 1))] if rec.checklist else []


def _footer(rec) -> str:
    if rec.layout is None:
        return "More: --explain (the rules, notes and every rejected layout), --explain full (the trace)"
    notes = sum(f.severity == "info" for f in rec.findings)
    what = "the rules, notes, " + (f"{notes} audit note{'s' if notes > 1 else ''} on the pick, " if notes else "")
    return f"More: --explain ({what}every alternative), --explain full (the trace, rejected layouts)"
