"""The text of a capacity plan (`CapacityPlan.explain`): the question, the work and its floor, the
options as a table, the pick and why, what bounds scaling, and the counts rejected. It reads the
plan's fields only; nothing is decided here."""

from __future__ import annotations

from itertools import groupby

__all__ = ["plan_text"]


def _tokens(n: int) -> str:
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M")):
        if n >= size:
            return f"{n / size:,.3g}{suffix}"
    return f"{n:,}"


def _header(plan) -> list[str]:
    goal = []
    if plan.deadline_days is not None:
        goal.append(f"deadline {plan.deadline_days:,.1f} days")
    if plan.budget is not None:
        goal.append(f"budget {plan.budget:,.0f} {plan.budget_unit}")
    w = plan.work
    lines = [f"Capacity plan: {plan.model} ({plan.params / 1e9:.1f}B params), {_tokens(w.tokens)} tokens of "
             f"{w.seq_len:,}, {plan.precision}" + (f"; {', '.join(goal)}" if goal else "; no deadline or budget")]
    if w.flops is not None:
        floors = ", ".join(f"{gpu} {hours:,.0f}" for gpu, hours in w.floor_gpu_hours.items())
        lines.append(f"Work: {w.flops:.3g} FLOPs ({w.flops_per_token / 1e9:,.1f} GFLOP per token); at the dense "
                     f"peak that is {floors} GPU-hours, the floor no count goes below")
    lines.append("Prices: " + (f"{plan.currency} per GPU-hour ({plan.prices_source})" if plan.currency else
                               "none given, so cost is GPU-hours (GPU types compared hour for hour)"))
    return lines


def _row(o, mark: str, money: bool, width: int) -> str:
    cost = f" {o.cost:>13,.0f}" if money else ""
    return (f"  {mark} {o.gpu:<15} {o.gpus:>6,} {o.layout:<{width}} {o.global_batch_size:>6,} "
            f"{o.step_time_s:>8.2f} "
            f"{o.mfu:>6.1%} {o.goodput:>7.1%} {o.days:>10,.1f} {o.gpu_hours:>12,.0f}{cost}  "
            f"{'yes' if o.meets else 'no'}")


def _table(plan, all_counts: bool) -> list[str]:
    money = plan.currency is not None
    picked = plan.pick.option if plan.pick is not None else None
    shown = [o for o in plan.options if all_counts or o.pareto or o == picked
             or (plan.shortfall is not None and o == plan.shortfall.closest)]
    front = "the Pareto front of days against cost" if money else \
        "each GPU type's Pareto front of days against GPU-hours"
    what = "every option" if all_counts else \
        f"{front}, and the pick; --all-counts lists all {plan.counts_tried:,} counts tried"
    width = max([len("layout"), *(len(o.layout) for o in shown)])
    head = (f"  {'':1} {'GPU':<15} {'GPUs':>6} {'layout':<{width}} {'batch':>6} {'step s':>8} {'MFU':>6} "
            f"{'goodput':>7} {'days':>10} {'GPU-hours':>12}" + (f" {plan.currency:>13}" if money else "") + "  meets")
    lines = [f"Options ({what}):", head]
    lines += [_row(o, "*" if o == picked else " ", money, width) for o in shown]
    return lines


def _rejected(plan, all_counts: bool) -> list[str]:
    if not plan.rejected:
        return []
    lines = [f"Rejected ({len(plan.rejected):,} count{'' if len(plan.rejected) == 1 else 's'}):"]
    if all_counts:
        return lines + [f"  - {r.gpus:,} x {r.gpu} ({r.reason}): {r.why}" for r in plan.rejected]
    for (gpu, reason), group in groupby(sorted(plan.rejected, key=lambda r: (r.gpu, r.reason, r.gpus)),
                                        key=lambda r: (r.gpu, r.reason)):
        group = list(group)
        counts = ", ".join(f"{r.gpus:,}" for r in group[:8]) + (", ..." if len(group) > 8 else "")
        lines.append(f"  - {gpu} at {counts} GPUs ({reason}): {group[0].why}")
    return lines


def plan_text(plan, all_counts: bool = False) -> str:
    """The plan as text; `all_counts` lists every option and every rejected count."""
    lines = _header(plan) + [""]
    if plan.options:
        lines += _table(plan, all_counts) + [""]
    lines.append(("Pick: " if plan.pick is not None else "No pick: ") + plan.why)
    if plan.pick is not None:
        rec = plan.pick.recommendation
        lines.append(f"  layout: {rec.layout.id} on {rec.framework}, {rec.estimates.memory.total / 2**30:.1f} of "
                     f"{rec.estimates.memory.capacity / 2**30:.1f} GiB per GPU, step {rec.estimates.step_time:.2f} s, "
                     f"MFU {rec.estimates.mfu:.1%}; its trace says why (JSON: pick.recommendation; or "
                     f"advisor explain ... --gpu {plan.pick.option.gpu} --gpus {plan.pick.option.gpus} "
                     f"--global-batch {plan.pick.option.global_batch_size})")
    lines += ["", "What bounds scaling:"]
    for bound in plan.bounds:
        lines.append(f"  - {bound.name}: {bound.text}" + (f" [{bound.source}]" if bound.source else ""))
    rejected = _rejected(plan, all_counts)
    return "\n".join(lines + ([""] + rejected if rejected else []))
