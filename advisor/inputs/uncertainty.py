"""The estimate's measured error, which the planner and the audit allow for.

- The near-tie band: two layouts whose estimated step times differ by less than the estimate's
  measured error cannot be told apart by it; the planner orders them by stated preferences.
- The memory margin: a layout fits with room only when its estimated peak plus the memory estimate's
  measured error fits; `Training.memory_headroom` asks for more.
- The memory experts use: the share of GPU memory that the published expert layouts use by this
  estimate; among near-ties the planner puts a layout within it first.

Each figure is a statistic of measurements in the repo or of the dev data, never a value chosen for
what it does to a benchmark. `python benchmarks/uncertainty.py` recomputes them and
tests/test_uncertainty.py checks these constants against it.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["MeasuredError", "STEP_TIME_ERROR", "MEMORY_ERROR", "EXPERT_MEMORY_SHARE", "memory_headroom"]


class MeasuredError(NamedTuple):
    """One measured figure: `value` (a fraction), `n` (the measurements behind it), `source` (what
    was measured and by which script, as the trace cites it)."""
    value: float
    n: int
    source: str


# The median |log(estimated / measured step time)| over the unique configurations of both dev files
# (benchmarks/calibrate_2025.py: 70 dense, median 0.056; 19 MoE, 0.122). It agrees with the 84 H200 layer
# rows (median 0.063, benchmarks/measured_h200.py) and with pairs of layouts of one model on one GPU type
# (median |log| between their two ratios 0.063 over 64 dense pairs): two layouts' errors are not closer to
# each other than each is to its measurement, so one layout's error is the band.
STEP_TIME_ERROR = MeasuredError(
    0.064, 89, "the median |log(estimated / measured)| step time over the 89 unique runs of the dev files "
               "(benchmarks/calibrate_2025.py; 0.063 over the 84 H200 layer rows, benchmarks/measured_h200.py)")

# The largest |estimated / measured - 1| of a measured memory figure: the activation bytes each of 58
# H200 layer rows stores (4.1%, benchmarks/measured_h200.py), Korthikanti et al.'s Fig. 1 parameters +
# optimizer and activations (3.8%, benchmarks/calibrate_korthikanti.py), 22 Hugging Face + PEFT
# fine-tuning peaks on one H200 (1.1%, benchmarks/finetune_real.py).
MEMORY_ERROR = MeasuredError(
    0.041, 88, "the largest |estimated / measured - 1| of 88 measured memory figures (H200 layer rows' stored "
               "activations, Korthikanti et al. Fig. 1, Hugging Face + PEFT peaks; benchmarks/uncertainty.py)")

# The 85th percentile of the published expert layouts' estimated memory share (both dev files, every
# layout the estimate can size, with the settings its source states): 85 in 100 expert layouts use at
# most this much of the GPU (the median uses 0.69; the 75th, 80th, 90th and 95th percentiles are 0.80,
# 0.82, 0.91 and 0.97: benchmarks/uncertainty.py prints them).
EXPERT_MEMORY_SHARE = MeasuredError(
    0.86, 149, "85 in 100 of the 149 published expert layouts use at most this share of GPU memory by the "
               "estimate (benchmarks/uncertainty.py)")


def memory_headroom(training) -> float:
    """The share of each GPU's memory a layout must leave free by the estimate: Training.memory_headroom,
    or, when not given, the memory estimate's measured error."""
    given = getattr(training, "memory_headroom", None)
    return MEMORY_ERROR.value if given is None else given
