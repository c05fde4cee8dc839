"""The picture of a capacity plan: days to train against cost (GPU-hours without prices), one line
per GPU type through its counts, the deadline and budget lines, the pick marked.

matplotlib is an optional extra (`pip install 'advisor[plot]'`): it is imported here, inside the
functions, and nothing else in advisor imports this module except the CLI's `--plot`. It draws on
a `Figure` of its own with the Agg or SVG canvas, never pyplot, so it needs no display and keeps no
global state between calls.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ..errors import InputError

__all__ = ["check_plot_path", "plot_plan", "FORMATS"]

FORMATS = (".svg", ".png")
_INSTALL = "pip install 'advisor[plot]' (matplotlib)"


def check_plot_path(path: str | Path) -> Path:
    """`path` as a Path when it names an .svg or .png file and matplotlib can be imported, else an
    InputError naming --plot (checked before the sweep, so a typo costs nothing)."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise InputError("--plot", str(path), "a file name ending in .svg or .png")
    if importlib.util.find_spec("matplotlib") is None:
        raise InputError("--plot", str(path), "matplotlib installed to draw the plot", _INSTALL)
    return path


def _label_points(ax, options) -> None:
    for o in options:
        ax.annotate(f"{o.gpus:,}", (o.days, o.cost if o.cost is not None else o.gpu_hours), fontsize=6,
                    xytext=(3, 3), textcoords="offset points")


def plot_plan(plan, path: str | Path) -> Path:
    """Draw `plan` (a CapacityPlan) to `path` (.svg or .png); returns the path written."""
    path = check_plot_path(path)
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    fig = Figure(figsize=(8, 5.5), layout="constrained")
    ax = fig.add_subplot()
    money = plan.currency is not None
    by_gpu: dict[str, list] = {}
    for option in plan.options:
        by_gpu.setdefault(option.gpu, []).append(option)
    for gpu, options in by_gpu.items():
        options = sorted(options, key=lambda o: o.gpus)
        ax.plot([o.days for o in options], [o.cost if money else o.gpu_hours for o in options], marker="o",
                markersize=3, linewidth=1, label=gpu)
        _label_points(ax, options)
    if plan.deadline_days is not None:
        ax.axvline(plan.deadline_days, color="red", linestyle="--", linewidth=1,
                   label=f"deadline {plan.deadline_days:,.1f} days")
    if plan.budget is not None:
        ax.axhline(plan.budget, color="purple", linestyle=":", linewidth=1,
                   label=f"budget {plan.budget:,.0f} {plan.budget_unit}")
    if plan.pick is not None:
        pick = plan.pick.option
        ax.plot([pick.days], [pick.cost if money else pick.gpu_hours], marker="*", markersize=16, color="gold",
                markeredgecolor="black", linestyle="none", label=f"pick: {pick.gpus:,} x {pick.gpu}")
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:g}"))
    ax.set_xlabel("days to train (log)")
    ax.set_ylabel(f"cost ({plan.currency})" if money else "GPU-hours")
    ax.set_title(f"{plan.model}: {plan.work.tokens / 1e12:,.3g}T tokens, time against "
                 f"{'cost' if money else 'GPU-hours'} (labels: GPUs)", fontsize=10)
    ax.grid(True, which="both", linewidth=0.3)
    if by_gpu or plan.deadline_days is not None or plan.budget is not None:
        ax.legend(fontsize=8)
    fig.savefig(path, format=path.suffix.lower().lstrip("."), metadata=_metadata(path))
    return path


def _metadata(path: Path) -> dict:
    """No date or software version in the file, so the same plan draws the same bytes."""
    if path.suffix.lower() == ".svg":
        return {"Date": None, "Creator": None}
    return {"Software": None}
