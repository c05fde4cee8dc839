"""Capacity planning: tokens to train and a deadline or a budget in; GPU type, count, layout, time
and cost out (`capacity()`, `advisor capacity`). It sits on `recommend`: every option is the full
recommendation at that GPU type and count.

    plan.py    capacity(): the sweep, each option's days, GPU-hours and cost
    counts.py  the GPU counts tried (whole nodes that tile the NVLink domain)
    goal.py    tokens, deadline, budget and GPU types, as callers give them
    scaling.py what bounds scaling: the batch limit, goodput at scale, the work's floor (Scaling)
    sweep.py   recommend over many scenarios, in this process or in workers
    choose.py  meets, the Pareto front, the pick and why
    bounds.py  the bounds stated for one plan
    prices.py  prices per GPU-hour as site data (none shipped)
    result.py  CapacityPlan and its parts; render.py their text; plot.py the picture (matplotlib)
"""

from .plan import capacity
from .prices import Prices, load_prices
from .result import Bound, CapacityOption, CapacityPlan, Pick, Rejected, Shortfall, Work
from .scaling import Scaling

__all__ = ["capacity", "CapacityPlan", "CapacityOption", "Rejected", "Pick", "Shortfall", "Work", "Bound", "Prices",
           "load_prices", "Scaling"]
