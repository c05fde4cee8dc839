"""`Comparison`: layouts a user names, side by side with the advisor's pick for the same situation,
each with why it ranks where it does (what `advisor.compare()` and `advisor compare` return).

Every layout is audited and estimated by the same rules and cost model as the recommendation, so the
figures compare like with like: memory, step time, MFU, communication per dimension. No decision is
made here: the verdicts read the audits, the estimates and the recommendation's own alternatives.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ..costmodel import Estimate
from ..inputs.layout import Layout
from ..inputs.specs import Cluster, Model, Training
from .audit import Audit, Finding
from .brief import deciding_rule, wrap_lines
from .recommendation import Recommendation
from .render import named_layout, network_text

__all__ = ["Comparison", "ComparedLayout", "compared_layouts"]

_GIB = 2**30
_DIMS = ("tp", "pp", "dp", "cp", "ep")
_LABEL = 16             # width of the row labels of the text table
_COLUMN = 13            # width of one layout's column


class ComparedLayout(BaseModel):
    """One layout of a comparison: its audit, its estimate and why it ranks where it does."""

    model_config = ConfigDict(frozen=True)

    layout: Layout
    """The layout, with dp and num_microbatches filled in where they were omitted."""
    pick: bool
    """True for the advisor's own recommendation for this situation."""
    ok: bool
    """No audit error: the framework accepts the layout."""
    findings: list[Finding] = Field(default_factory=list)
    """The audit's findings, errors first."""
    estimates: Estimate | None = None
    """The cost model's view of the layout (None when its shape cannot be estimated)."""
    slower_than_pick: float | None = None
    """step_time / the pick's step_time - 1 (None without both estimates)."""
    verdict: str
    """Why it ranks where it does, in one line: the advisor's pick, refused by a rule, does not fit,
    the planner's own reason for an alternative it listed, or the estimated margin to the pick."""


class Comparison(BaseModel):
    """Layouts side by side with the advisor's pick (the first entry when a layout fits)."""

    model_config = ConfigDict(frozen=True)

    cluster: Cluster
    model: Model
    training: Training
    """The training settings used, with omitted fields resolved."""
    layouts: list[ComparedLayout]
    """The advisor's pick first (when one fits), then the layouts asked about, in the order given."""
    band: float
    """The planner's near-tie band: step times closer than this share are ties."""

    def explain(self, width: int | None = None) -> str:
        """The layouts as a table of figures (columns A, B, ...), then each one's verdict."""
        return "\n".join(wrap_lines(_text(self, width or 80), width))


def compared_layouts(rec: Recommendation, reports: list[Audit], band: float,
                     memory_bound: float) -> list[ComparedLayout]:
    """The pick (from `rec`) and one entry per audit in `reports`, each with its verdict. `band`:
    the planner's near-tie band; `memory_bound`: the share of GPU memory above which the planner
    ranks a layout last (both planner.ranking's, passed in: results sits below the planner)."""
    pick = None
    if rec.layout is not None:
        pick = ComparedLayout(layout=rec.layout, pick=True, ok=True, findings=rec.findings, estimates=rec.estimates,
                              slower_than_pick=0.0,
                              verdict="the advisor's pick: " + (deciding_rule(rec) or "the fastest estimate"))
    rows = [pick] if pick is not None else []
    reasons = {a.layout.id: a.reason for a in rec.alternatives}
    for report in reports:
        if pick is not None and report.layout.id == pick.layout.id:
            continue
        slower = (report.estimates.step_time / rec.estimates.step_time - 1
                  if report.estimates is not None and rec.estimates is not None else None)
        rows.append(ComparedLayout(layout=report.layout, pick=False, ok=report.ok, findings=report.findings,
                                   estimates=report.estimates, slower_than_pick=slower,
                                   verdict=_verdict(report, rec, reasons, slower, band, memory_bound)))
    return rows


def _verdict(report: Audit, rec: Recommendation, reasons: dict[str, str], slower: float | None, band: float,
             memory_bound: float) -> str:
    est = report.estimates
    if report.errors:
        first = report.errors[0]
        more = f" (and {len(report.errors) - 1} more)" if len(report.errors) > 1 else ""
        return f"refused by {first.rule_id}: {first.message}{more}"
    if est is None:
        return "its shape cannot be estimated"
    if not est.memory.fits:
        return f"does not fit: {est.memory.total / _GIB:.1f} GiB per GPU > {est.memory.capacity / _GIB:.1f} GiB"
    if report.layout.id in reasons:                     # the planner listed it: its own words
        return reasons[report.layout.id]
    if rec.layout is None or slower is None:
        return "legal and fits; no recommendation to compare with"
    pick = named_layout(rec.framework, rec.layout)
    times = f"est. step {est.step_time:.2f} s vs {rec.estimates.step_time:.2f} s"
    share = est.memory.total / est.memory.capacity
    if slower > band:
        return f"slower than the pick {pick}: {times} ({slower:+.0%}), beyond the {band:.0%} tie band"
    if share > memory_bound:
        return (f"uses {share:.0%} of GPU memory, above the {memory_bound:.0%} the planner trusts ({times}); "
                f"the pick is {pick}")
    if slower < -band:
        return (f"estimated faster than the pick {pick} ({times}, {slower:+.0%}), but outside what the rules let "
                f"the planner choose: recommend --explain names them")
    return (f"about as fast as the pick {pick} ({times}, within {band:.0%}): {_tie_order(rec)} decides, "
            f"and chose the pick")


def _tie_order(rec: Recommendation) -> str:
    """The planner's tie order as its search note words it, or a plain phrase."""
    note = next((e.message for e in rec.trace.events if e.op == "note" and "ties within" in e.message), "")
    order = note.partition(" go to ")[2]
    return f"the tie-break ({order})" if order else "the tie-break"


def _cells(row: ComparedLayout) -> dict[str, str]:
    est = row.estimates
    if est is None:
        return {"audit": "ok" if row.ok else "refused"}
    m = est.memory
    versus = "pick" if row.pick else "-" if row.slower_than_pick is None else f"{row.slower_than_pick:+.1%}"
    cells = {"audit": "ok" if row.ok else "refused",
             "memory per GPU": f"{m.total / _GIB:.1f} GiB" + ("" if m.fits else " !"),
             "step": f"{est.step_time:.2f} s",
             "vs the pick": versus,
             "MFU (BF16 peak)": f"{est.mfu:.1%}",
             "bubble": f"{est.bubble_fraction:.1%}",
             "exposed comm": f"{est.exposed_comm_time:.2f} s"}
    for dim in _DIMS:
        seconds = getattr(est.comm, dim).seconds
        if seconds > 0:
            cells[f"{dim} comm"] = f"{seconds:.2f} s"
    return cells


def _text(comp: Comparison, width: int) -> list[str]:
    c, m, t = comp.cluster, comp.model, comp.training
    lines = [f"{m.name} on {c.gpus} x {c.gpu.name} ({network_text(c)}); seq {t.seq_len}, global batch "
             f"{t.global_batch_size}, {t.precision}", ""]
    names = [chr(ord("A") + i) if i < 26 else str(i) for i in range(len(comp.layouts))]
    for name, row in zip(names, comp.layouts):
        mark = "  (the advisor's pick)" if row.pick else ""
        lines.append(f"{name}  {named_layout(row.layout.framework, row.layout)}{mark}")
    cells = [_cells(row) for row in comp.layouts]
    labels = list(dict.fromkeys(label for cell in cells for label in cell))
    per_table = max(1, (width - _LABEL) // _COLUMN)
    for start in range(0, len(cells), per_table):
        chunk = range(start, min(start + per_table, len(cells)))
        lines += ["", " " * _LABEL + "".join(f"{names[i]:<{_COLUMN}}" for i in chunk).rstrip()]
        for label in labels:
            row = "".join(f"{cells[i].get(label, '-'):<{_COLUMN}}" for i in chunk)
            lines.append(f"{label:<{_LABEL}}{row}".rstrip())
    lines += ["(comm: seconds per step on its link before overlap; exposed: what overlap leaves; ! does not fit)", ""]
    lines += [f"{name}: {row.verdict}" for name, row in zip(names, comp.layouts)]
    return lines
