"""`Recommendation`: the layout, its estimates, the checklist, the runners-up and the trace."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from ..costmodel import Estimate
from ..inputs.layout import Framework, Layout
from ..inputs.specs import Cluster, Model, Training
from .audit import Finding
from .brief import DEFAULT_WIDTH, brief_text, wrap_lines
from .render import recommendation_text, story
from .trace import Trace

__all__ = ["Recommendation", "Alternative", "ChecklistItem"]


class ChecklistItem(BaseModel):
    model_config = ConfigDict(frozen=True)
    rule_id: str
    text: str


class Alternative(BaseModel):
    """A runner-up layout that also fits, with why the planner ranked it lower."""

    model_config = ConfigDict(frozen=True)
    layout: Layout
    reason: str
    memory_total: int
    step_time: float | None = None
    family: str | None = None
    """Set for the other family's best, listed for comparison: its strategy ("zero-dp" or
    "model-parallel"). None for a runner-up of the chosen family."""
    kind: str | None = None
    """Set when listed as the best layout of a kind the other entries do not show ("sharded
    data-parallel (tp = pp = 1)", "TP x PP (ZeRO <= 2)", "expert-parallel"): advisor.planner.alternatives.KINDS."""


class FitChange(BaseModel):
    """One change to the inputs under which a layout fits, found by planning again (the CLI's "What
    would fit" under "No layout fits")."""

    model_config = ConfigDict(frozen=True)
    what: str
    """The change: "32 GPUs", "seq 16384", "any stack (no --framework)"."""
    layout_id: str
    """The layout the planner recommends for the changed inputs."""
    memory_gib: float
    """That layout's memory per GPU on its most-loaded rank, GiB."""
    capacity_gib: float
    """The GPU's memory, GiB."""


class Recommendation(BaseModel):
    model_config = ConfigDict(frozen=True)

    status: Literal["recommended", "infeasible"]
    layout: Layout | None
    framework: Framework | None
    estimates: Estimate | None = None
    """Memory, communication, bubble, step time and MFU of the chosen layout (None when infeasible)."""
    cluster: Cluster
    model: Model
    training: Training
    """The training settings used, with omitted fields resolved (see the trace's `input` events)."""
    checklist: list[ChecklistItem] = Field(default_factory=list)
    alternatives: list[Alternative] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    """The audit of the chosen layout: never an error; warnings and notes worth reading."""
    trace: Trace
    candidates_examined: int = 0
    what_would_fit: list[FitChange] = Field(default_factory=list)
    """When infeasible and asked (the CLI asks): the smallest changes of the inputs that would fit, each
    planned again; empty otherwise, and then left out of the JSON."""

    @model_serializer(mode="wrap")
    def _dump(self, handler):
        # left out while empty: every recommendation's JSON, the golden files among them, stays as it was
        data = handler(self)
        if not data.get("what_would_fit"):
            data.pop("what_would_fit", None)
        return data

    @property
    def memory(self):
        """Per-GPU memory breakdown of the chosen layout (most-loaded rank), or None."""
        return None if self.estimates is None else self.estimates.memory

    def explain(self, level: Literal["brief", "summary", "full"] = "summary", width: int | None = None) -> str:
        """Human-readable account: the layout, its memory, the rules that chose it, what lost, what to check.
        "brief": the first screen only (the CLI's default); "full" adds the facts, references and the trace.
        `width`: wrap every line to that many columns (None: brief's 80; the others as written)."""
        if level == "brief":
            return brief_text(self, width or DEFAULT_WIDTH)
        return "\n".join(wrap_lines(recommendation_text(self, level, width or 100).split("\n"), width))

    def story(self) -> str:
        """The decision in a few sentences: what the rules chose and why, what fit, what lost."""
        return story(self)
