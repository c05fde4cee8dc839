"""The result of `advisor.capacity`: every option tried (a GPU type and count with its recommended
layout, time to train, GPU-hours and cost), the counts rejected and why, what bounds scaling, and
the pick. Frozen pydantic models; `CapacityPlan.model_dump_json()` is the CLI's `--json` and
`schemas/capacity.schema.json` its schema.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..results.recommendation import Recommendation
from .render import plan_text
from .scaling import Scaling

__all__ = ["CapacityOption", "Rejected", "Pick", "Shortfall", "Work", "Bound", "CapacityPlan", "RejectReason",
           "Constraint"]

RejectReason = Literal["does-not-fit", "batch-too-small", "no-legal-layout", "not-whole-nodes", "interruptions",
                       "input"]
Constraint = Literal["deadline", "budget", "deadline and budget"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class CapacityOption(_Frozen):
    """One GPU type and count, with the layout the advisor recommends there and what the run costs."""

    gpu: str
    """The GPU type's name."""
    gpus: int
    nodes: int
    layout: str
    """The recommended layout's id (`Layout.parse` reads it back); the pick carries the whole recommendation."""
    framework: str
    offload: bool
    """The layout offloads model states to host memory or NVMe (nothing fits on the GPUs alone)."""
    global_batch_size: int
    """Sequences per optimizer step at this count (inputs.batch.batch_for)."""
    batch_tokens: int
    step_time_s: float
    """Estimated seconds per optimizer step."""
    steps: float
    """Optimizer steps to train the tokens: tokens / batch_tokens."""
    mfu: float
    """Model FLOPs utilisation of the step (against the dense 16-bit peak)."""
    memory_gib: float
    """Estimated memory per GPU, most-loaded rank (GiB)."""
    bubble_fraction: float
    """Pipeline bubble as a share of the step time."""
    exposed_comm_fraction: float
    """Communication left on the critical path, as a share of the step time."""
    interruptions_per_day: float
    goodput: float
    """Useful time / wall time after interruptions and checkpoints (scaling.goodput_at)."""
    days: float
    """Wall-clock days to train: steps x step time / goodput."""
    gpu_hours: float
    """GPUs x wall-clock hours (the GPUs are held while the job restarts)."""
    cost: float | None
    """gpu_hours x the price per GPU-hour; None without prices."""
    meets: bool
    """Meets every constraint given (the deadline and the budget); True when none is given."""
    pareto: bool
    """On the Pareto front of days against cost: no other option is both faster and cheaper. Without
    prices, the front of its own GPU type in GPU-hours (an hour of one type is not an hour of another)."""
    limited_by: str
    """What costs this option most besides compute: the bubble, exposed communication, the optimizer
    step or interruptions, with its share; "compute" when each is under 10%."""
    recommendation: Recommendation | None = Field(None, exclude=True)
    """The full recommendation at this count (layout, memory, estimates, trace). In the API only; the
    JSON carries it for the pick."""


class Rejected(_Frozen):
    """A GPU type and count with no option, and why."""

    gpu: str
    gpus: int
    reason: RejectReason
    why: str


class Pick(_Frozen):
    """The option chosen: the cheapest that meets the deadline, or the fastest within the budget."""

    option: CapacityOption
    why: str
    recommendation: Recommendation
    """The full recommendation at the pick: layout, memory, estimates, checklist and trace."""


class Shortfall(_Frozen):
    """No option meets the constraints: the closest one and by how much it misses."""

    constraint: Constraint
    closest: CapacityOption
    """The fastest option (a deadline missed) or the cheapest (a budget overrun)."""
    days_over: float | None
    """Days past the deadline of the fastest option; None when the deadline was met or not given."""
    over_budget: float | None
    """Cost (GPU-hours without prices) past the budget of the cheapest option; None likewise."""
    why: str


class Work(_Frozen):
    """The training work, the same at every scale."""

    tokens: int
    seq_len: int
    flops_per_token: float | None
    """Model FLOPs per trained token (6 x active parameters + attention + logits; no recompute), from
    the estimate of the first option; None when no count has a layout."""
    flops: float | None
    floor_gpu_hours: dict[str, float]
    """Per GPU type: the work at the precision's dense peak. No option's GPU-hours can be lower."""


class Bound(_Frozen):
    """One thing that bounds scaling out, stated with its figures and source."""

    name: Literal["batch", "memory", "network", "bubble", "goodput", "scaling"]
    text: str
    source: str | None = None


class CapacityPlan(_Frozen):
    """GPU types and counts for training `tokens` of a model, each with its layout, time and cost."""

    model: str
    params: int
    precision: str
    """The job's precision recipe, and in parentheses the GPU types that run another because the job left
    it to them, e.g. "bf16 (V100-32GB fp16)": a part without BF16 tensor cores."""
    deadline_days: float | None
    budget: float | None
    """In `currency` (prices given) or GPU-hours."""
    budget_unit: str | None
    """The budget's unit: the prices' currency, or "GPU-hours"."""
    currency: str | None
    """The prices' currency; None without prices (the answer is then in GPU-hours)."""
    prices_source: str | None
    scaling: Scaling
    work: Work
    options: list[CapacityOption]
    """Every GPU type and count with a recommended layout, by GPU type then count."""
    rejected: list[Rejected]
    pick: Pick | None
    shortfall: Shortfall | None
    why: str
    """The verdict in a sentence or two: the pick and why, or what cannot be met and by how much."""
    bounds: list[Bound]
    counts_tried: int

    def explain(self, all_counts: bool = False) -> str:
        """Text: the question, the work and its floor, the options (the Pareto front and the pick;
        every count tried with `all_counts`), the pick and why, and what bounds scaling."""
        return plan_text(self, all_counts)
