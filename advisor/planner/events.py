"""What the planner tells the trace, typed: api copies each field into a TraceEvent."""

from __future__ import annotations

from typing import Literal, NamedTuple


class PlanEvent(NamedTuple):
    """One planner event. `op`: "reject" or "note" (advisor.results.trace's ops). `message`: the text the
    trace shows, as auditors read it. `candidate`: the layout (or family) id it is about.
    `rule_id`: for a rejection by the audit's legality rules, that rule; for a note where the
    planner departs from a rule's decision (widening to, or moving to, model parallelism), the rule
    whose decision it sets aside. `have`/`want`: for a rejection for memory, the bytes per GPU the
    layout needs and the capacity it had to fit in (GPU memory, host memory or NVMe). `kind`: what a
    note is about where the account repeats it (TraceEvent.kind: "preference", "search", "family_move")."""
    op: Literal["reject", "note"]
    message: str
    candidate: str | None = None
    rule_id: str | None = None
    have: float | None = None
    want: float | None = None
    kind: str | None = None
