"""Which options meet the goal, the Pareto front of days against cost, and the pick with why: the
cheapest option that meets the deadline (within the budget, when one is given too), or the fastest
within the budget. Without prices, cost is GPU-hours, the same for every GPU type.

Costs (or days) within NEAR_TIE of the best are ties, as the planner treats step times: the estimate
is not more precise than that. Among tied options the pick is the one with the fewest GPUs (the
smallest allocation that does the job: a data-parallel run costs nearly the same at 32 GPUs and at
2,048, and the question is how many are needed)."""

from __future__ import annotations

from typing import NamedTuple

from ..planner.ranking import NEAR_TIE
from .goal import Goal
from .result import CapacityOption, Shortfall

__all__ = ["Verdict", "money", "meets", "pareto_front", "fronts", "verdict", "fmt_money", "fmt_days", "label"]


class Verdict(NamedTuple):
    pick: int | None
    """Index of the picked option."""
    why: str
    shortfall: Shortfall | None


def money(option: CapacityOption) -> float:
    """What an option costs: its price, or its GPU-hours without prices."""
    return option.cost if option.cost is not None else option.gpu_hours


def meets(option: CapacityOption, goal: Goal) -> bool:
    if goal.deadline_days is not None and option.days > goal.deadline_days:
        return False
    return goal.budget is None or money(option) <= goal.budget


def pareto_front(options: list[CapacityOption]) -> set[int]:
    """Indices of the options no other option beats on both days and cost (ties kept once: the
    fewer GPUs)."""
    order = sorted(range(len(options)), key=lambda i: (options[i].days, money(options[i]), options[i].gpus))
    front, cheapest = set(), float("inf")
    for i in order:
        if money(options[i]) < cheapest:
            front.add(i)
            cheapest = money(options[i])
    return front


def fronts(options: list[CapacityOption], priced: bool) -> set[int]:
    """The Pareto front over every option when prices make GPU types comparable in money; without
    prices, each GPU type's own front (an hour of one type is not an hour of another)."""
    if priced:
        return pareto_front(options)
    out: set[int] = set()
    for gpu in dict.fromkeys(o.gpu for o in options):
        mine = [i for i, o in enumerate(options) if o.gpu == gpu]
        out |= {mine[j] for j in pareto_front([options[i] for i in mine])}
    return out


def fmt_days(days: float) -> str:
    return f"{days:,.1f} days" if days < 1000 else f"{days / 365:,.1f} years"


def fmt_money(amount: float, unit: str) -> str:
    return f"{amount:,.0f} {unit}"


def label(option: CapacityOption) -> str:
    return f"{option.gpus} x {option.gpu}"


def _summary(option: CapacityOption, unit: str) -> str:
    cost = f", {fmt_money(option.cost, unit)}" if option.cost is not None else ""
    return (f"{label(option)} ({option.layout}): {fmt_days(option.days)}, "
            f"{option.gpu_hours:,.0f} GPU-hours{cost}")


def _cheapest(options: list[CapacityOption], indices) -> int:
    return min(indices, key=lambda i: (money(options[i]), options[i].days, options[i].gpus, options[i].gpu))


def _fastest(options: list[CapacityOption], indices) -> int:
    return min(indices, key=lambda i: (options[i].days, money(options[i]), options[i].gpus, options[i].gpu))


def _fewest_near(options: list[CapacityOption], indices, best: int, measure) -> int:
    """Among `indices` within NEAR_TIE of `best` by `measure`, the fewest GPUs (then the lower measure)."""
    ties = [i for i in indices if measure(options[i]) <= measure(options[best]) * (1 + NEAR_TIE)]
    return min(ties, key=lambda i: (options[i].gpus, measure(options[i]), options[i].gpu))


def _tie_note(options: list[CapacityOption], chosen: int, best: int, what: str, unit: str) -> str:
    if chosen == best:
        return ""
    b = options[best]
    value = fmt_days(b.days) if what == "days" else fmt_money(money(b), unit)
    return (f" ({label(b)} is {value}, within the estimate's {NEAR_TIE:.0%}: of such near ties, the fewest "
            "GPUs)")


def _constraint_text(goal: Goal) -> str:
    parts = []
    if goal.deadline_days is not None:
        parts.append(f"the deadline of {fmt_days(goal.deadline_days)}")
    if goal.budget is not None:
        parts.append(f"the budget of {fmt_money(goal.budget, goal.budget_unit)}")
    return " within ".join(parts)


def verdict(options: list[CapacityOption], goal: Goal) -> Verdict:
    """The pick and why, or the shortfall when nothing meets the goal."""
    unit = goal.budget_unit
    if not options:
        return Verdict(None, "no GPU type and count tried has a layout that trains this model (see rejected)", None)
    if goal.deadline_days is None and goal.budget is None:
        fast, cheap = _fastest(options, range(len(options))), _cheapest(options, range(len(options)))
        return Verdict(None, f"no deadline or budget given, so no pick: the fastest option is "
                             f"{_summary(options[fast], unit)}; the cheapest {_summary(options[cheap], unit)}. "
                             "Give a deadline or a budget for a pick", None)
    good = [i for i, o in enumerate(options) if o.meets]
    if not good:
        return _shortfall(options, goal)
    hours = " (without prices, GPU-hours of different GPU types count alike)" \
        if unit == "GPU-hours" and len({o.gpu for o in options}) > 1 else ""
    if goal.deadline_days is not None:
        cheapest = _cheapest(options, good)
        best = _fewest_near(options, good, cheapest, money)
        why = f"the cheapest{hours} of the {len(good)} options that meet {_constraint_text(goal)}: " \
              f"{_summary(options[best], unit)}" + _tie_note(options, best, cheapest, "cost", unit)
        cheaper = [i for i in range(len(options)) if not options[i].meets and money(options[i]) < money(options[best])]
        if cheaper:
            near = _fastest(options, cheaper)
            why += f". The fastest cheaper option, {label(options[near])}, takes {fmt_days(options[near].days)}"
        return Verdict(best, why, None)
    fastest = _fastest(options, good)
    best = _fewest_near(options, good, fastest, lambda o: o.days)
    why = f"the fastest of the {len(good)} options within {_constraint_text(goal)}: " \
          f"{_summary(options[best], unit)}" + _tie_note(options, best, fastest, "days", unit)
    faster = [i for i in range(len(options)) if not options[i].meets and options[i].days < options[best].days]
    if faster:
        near = _cheapest(options, faster)
        why += (f". The cheapest faster option, {label(options[near])}, costs "
                f"{fmt_money(money(options[near]), unit)}")
    return Verdict(best, why, None)


def _shortfall(options: list[CapacityOption], goal: Goal) -> Verdict:
    unit = goal.budget_unit
    every = range(len(options))
    on_time = [i for i in every if goal.deadline_days is None or options[i].days <= goal.deadline_days]
    if goal.deadline_days is not None and not on_time or goal.budget is None:
        closest = _fastest(options, every)
        constraint = "deadline"
    elif goal.deadline_days is None:
        closest = _cheapest(options, every)
        constraint = "budget"
    else:                                       # on time is possible, within budget too, but not both
        closest = _cheapest(options, on_time)
        constraint = "deadline and budget"
    option = options[closest]
    days_over = option.days - goal.deadline_days if goal.deadline_days is not None else None
    over = money(option) - goal.budget if goal.budget is not None else None
    days_over = days_over if days_over is not None and days_over > 0 else None
    over = over if over is not None and over > 0 else None
    misses = []
    if days_over is not None:
        misses.append(f"takes {fmt_days(option.days)}, {fmt_days(days_over)} ({days_over / goal.deadline_days:.0%}) "
                      "past the deadline")
    if over is not None:
        misses.append(f"costs {fmt_money(money(option), unit)}, {fmt_money(over, unit)} "
                      f"({over / goal.budget:.0%}) over the budget")
    which = {"deadline": "the fastest", "budget": "the cheapest",
             "deadline and budget": "the cheapest that meets the deadline"}[constraint]
    why = (f"no option meets {_constraint_text(goal)}: {which}, {label(option)} ({option.layout}), "
           + " and ".join(misses) + f"; it is limited by {option.limited_by}")
    return Verdict(None, why, Shortfall(constraint=constraint, closest=option, days_over=days_over,
                                        over_budget=over, why=why))
