"""Whether a simpler layout than the one under audit would fit: the facts that compare a layout with the
data-parallel-only layouts of its situation (check.zero_only_fits, check.batch_forced_mp_unneeded). Each
sizes layouts with the cost model, so the facts ask only where their rules can fire."""

from __future__ import annotations

from ..errors import InputError
from ..inputs.layout import Layout
from ..inputs.specs import Cluster, Model, Training
from .context import is_shape_error
from .sizing import memory_only

__all__ = ["zero_only_fits", "dp_only_fits", "ZERO_ONLY_MAX_GPUS"]

ZERO_ONLY_MAX_GPUS = 32
"""check.zero_only_fits is sized up to this many GPUs (the one rule that reads it, advice.small-cluster-tp-pp-when-zero-fits, fires there only)."""


def _fits(cluster: Cluster, model: Model, layout: Layout, training: Training, assumptions) -> bool:
    """Whether `layout` fits by the estimate; False for a shape the cost model cannot hold."""
    try:
        return memory_only(cluster, model, layout, training, assumptions).fits
    except InputError as exc:          # a shape the cost model cannot hold; anything else propagates
        if not is_shape_error(exc):
            raise
        return False


def zero_only_fits(cluster: Cluster, model: Model, layout: Layout, training: Training, assumptions=None) -> bool:
    """Fact check.zero_only_fits: would DeepSpeed ZeRO-2/3 with tp = pp = cp = 1 fit (no offload)?
    Sizes up to four layouts, so it is asked only where the one rule that reads it can fire
    (advice.small-cluster-tp-pp-when-zero-fits: at most ZERO_ONLY_MAX_GPUS GPUs, with TP or PP); elsewhere False."""
    if cluster.gpus > ZERO_ONLY_MAX_GPUS or (layout.tp == 1 and layout.pp == 1):
        return False
    mbs = layout.micro_batch_size if training.global_batch_size % (layout.micro_batch_size * cluster.gpus) == 0 else 1
    if training.global_batch_size % (mbs * cluster.gpus):
        return False
    for zero in (2, 3):
        for recompute in ("none", "full"):
            candidate = Layout(framework="deepspeed", dp=cluster.gpus, zero_stage=zero, recompute=recompute,
                               micro_batch_size=mbs)
            if _fits(cluster, model, candidate, training, assumptions):
                return True
    return False


def dp_only_fits(cluster: Cluster, model: Model, training: Training, assumptions=None) -> bool:
    """Fact check.batch_forced_mp_unneeded (with its guard, in facts): a data-parallel layout alone
    fits, the most frugal one (ZeRO-3, full recompute, one sequence per micro-batch, a replica per GPU).
    `training`'s global batch must split over the GPUs (facts passes the next multiple: memory per GPU
    does not depend on the batch, legality does)."""
    frugal = Layout(framework="deepspeed", dp=cluster.gpus, zero_stage=3, recompute="full", micro_batch_size=1)
    return _fits(cluster, model, frugal, training, assumptions)
