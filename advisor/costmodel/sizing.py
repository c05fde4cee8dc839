"""Sizing layouts: the cost model's entry points, and the planner's hot path behind them.

`size` resolves one layout and computes its memory terms without building a result model;
`step_time_of`, `step_and_floors`, `floor_of` and `estimate_of` then read the same `Sized` object, so
neither is computed twice for the hundreds of layouts a search sizes and never reports. `estimate`
and `memory_only` (re-exported by `advisor.costmodel`) are these steps for one layout.
"""

from __future__ import annotations

from .._unchecked import build_unchecked
from ..errors import InputError
from ..inputs.coerce import as_cluster, as_layout, as_model, as_training
from ..inputs.layout import Layout
from ..inputs.specs import Cluster, Model, Training
from .assumptions import Assumptions, as_assumptions
from .context import Ctx, resolve
from .memory import MemoryTerms, detail_dict, memory_terms, stage_params
from .result import CommDimension, CommEstimate, Estimate, MemoryEstimate
from .time import executed_flops_per_step, model_flops_per_step, shape_floor, time_terms, variant_floors

__all__ = ["Sized", "size", "resize", "step_time_of", "step_and_floors", "floor_of", "floor_of_layout",
           "estimate_of", "offload_fits", "estimate", "memory_only"]

_DEFAULT = Assumptions()
_make = build_unchecked
_new = object.__new__


def _memory_estimate(c: Ctx, A: Assumptions, best: MemoryTerms) -> MemoryEstimate:
    k, w, g, o, act, buf, reserve, total, host, nvme, det, nccl, frag = best
    w, g, o, act, buf, reserve = int(w), int(g), int(o), int(act), int(buf), int(reserve)
    total_i = w + g + o + act + buf + reserve
    return _make(MemoryEstimate, {
        "weights": w, "gradients": g, "optimizer": o, "activations": act, "buffers": buf,
        "reserve": reserve, "total": total_i, "capacity": c.capacity, "headroom": c.capacity - total_i,
        "fits": total_i <= c.capacity, "stage": k, "offloaded_to_host": int(host),
        "offloaded_to_nvme": int(nvme), "host_fits": offload_fits(c, A, host, nvme),
        "detail": detail_dict(det, A.cuda_context_bytes, nccl, frag),
    })


def offload_fits(c: Ctx, A: Assumptions, host: float, nvme: float) -> bool:
    """Offloaded states fit where they go: host memory (with DeepSpeed's buffer factor), and NVMe
    when the cluster states its capacity."""
    return host * A.host_buffer_factor <= c.host_per_gpu and (c.nvme_per_gpu is None or nvme <= c.nvme_per_gpu)


class Sized:
    """One layout's resolved context and memory terms, for the planner's search (`size`, then
    `step_time_of` / `step_and_floors` and `estimate_of` on the same object), so that neither is
    computed twice and no result model is built for the hundreds of layouts that never reach the
    output.

    total, capacity: bytes per GPU of the most-loaded rank; fits, host_fits: as MemoryEstimate."""

    __slots__ = ("ctx", "best", "details", "assumptions", "total", "capacity", "fits", "host_fits", "terms")

    def __init__(self, c: Ctx, best: MemoryTerms, details: dict, A: Assumptions):
        self.ctx, self.best, self.details, self.assumptions = c, best, details, A
        self.terms = None      # time_terms, once timed: estimate_of reuses the search's
        k, w, g, o, act, buf, reserve, total, host, nvme, det, nccl, frag = best
        # the same integer sum MemoryEstimate.total reports
        self.total = int(w) + int(g) + int(o) + int(act) + int(buf) + int(reserve)
        self.capacity = c.capacity
        self.fits = self.total <= c.capacity
        self.host_fits = offload_fits(c, A, host, nvme)

    @property
    def host_bytes(self) -> float:
        """Offloaded states the most-loaded rank keeps in host memory (bytes, before the buffers)."""
        return self.best.host

    @property
    def nvme_bytes(self) -> float:
        """Offloaded states the most-loaded rank keeps on NVMe (bytes)."""
        return self.best.nvme


def size(cluster, model, layout, training, assumptions: Assumptions | None = None) -> Sized:
    """The memory part of `estimate` without building its result: the planner's inner loop."""
    A = assumptions or _DEFAULT
    c = resolve(cluster, model, layout, training)
    best, details = memory_terms(c, A)
    return Sized(c, best, details, A)


def resize(s: Sized, layout) -> Sized:
    """`size` of `layout`, which differs from the layout `s` sized in its recompute level only: the
    planner sizes each (shape, micro-batch, ZeRO stage, offload) at several levels. The context is
    s's with the level changed (the only field `resolve` takes from it), and the memory terms that
    do not depend on it come from the memo (states.candidate_states)."""
    d = s.ctx.__dict__.copy()      # (cheaper than dict(..., recompute=...))
    d["recompute"] = layout.recompute
    c = _new(Ctx)
    c.__dict__ = d
    A = s.assumptions
    best, details = memory_terms(c, A)
    return Sized(c, best, details, A)


def _time_terms(s: Sized) -> dict:
    T = s.terms
    if T is None:       # (racing threads may both compute it; the values are equal)
        T = s.terms = time_terms(s.ctx, s.assumptions, {k: stage_params(d) for k, d in s.details.items()})
    return T


def step_time_of(s: Sized) -> float:
    """The step time of the sized layout: estimate(...).step_time bit for bit."""
    return _time_terms(s)["step"]


def step_and_floors(s: Sized, variants) -> tuple[float, dict]:
    """(step time of the sized layout, time.variant_floors of its (micro-batch, vpp) variants)."""
    T = _time_terms(s)
    return T["step"], variant_floors(s.ctx, s.assumptions, T, variants)


def floor_of(s: Sized, variant: tuple[int, int]) -> float:
    """time.shape_floor of the sized layout for its own (micro-batch, vpp) `variant`: no layout that
    differs from it only by more recompute, its ZeRO stage or offload runs faster."""
    return shape_floor(s.ctx, s.assumptions, (variant,))


def floor_of_layout(cluster, model, layout, training, assumptions: Assumptions | None = None) -> float:
    """floor_of without the sizing: resolves `layout` only."""
    return shape_floor(resolve(cluster, model, layout, training), assumptions or _DEFAULT,
                       ((layout.micro_batch_size, layout.vpp),))


def memory_only(cluster, model, layout, training, assumptions: Assumptions | None = None) -> MemoryEstimate:
    """Per-GPU memory of the most-loaded rank, without the communication and time model (~2x cheaper)."""
    s = size(cluster, model, layout, training, assumptions)
    return _memory_estimate(s.ctx, s.assumptions, s.best)


def _dim(bytes_, sec, exposed, net, n) -> CommDimension:
    link = "none" if n <= 1 or sec <= 0 else ("network" if net else "nvlink")
    hidden = 0.0 if sec <= 0 else max(0.0, min(1.0, 1.0 - exposed / sec))
    return _make(CommDimension, {"bytes": int(bytes_), "seconds": sec, "exposed_seconds": exposed, "link": link,
                                 "overlappable": hidden, "group_size": n})


def estimate(cluster, model, layout, training, assumptions: Assumptions | None = None) -> Estimate:
    """Memory, communication and time of `layout` for `model` on `cluster` with `training`.

    Each input is the advisor object or what `recommend` and `audit` accept for it (a dict of its
    fields; a preset name for the model; a dict for the assumptions).
    `training.seq_len` and `training.global_batch_size` must be resolved (InputError otherwise);
    `layout.dp` None is derived from the world size; `layout.num_microbatches` None is
    global_batch_size // (micro_batch_size * dp), which must divide exactly (InputError otherwise).
    Raises InputError when tp*pp*cp*dp differs from cluster.gpus or etp*ep*pp does not divide it.
    """
    if not (isinstance(cluster, Cluster) and isinstance(model, Model) and isinstance(layout, Layout)
            and isinstance(training, Training) and (assumptions is None or isinstance(assumptions, Assumptions))):
        cluster, model, layout, training, assumptions = _coerced(cluster, model, layout, training, assumptions)
    return estimate_of(size(cluster, model, layout, training, assumptions))


def _coerced(cluster, model, layout, training, assumptions) -> tuple:
    """estimate's inputs as advisor objects, or InputError naming the field (never an AttributeError
    from inside the cost model)."""
    training = as_training(training)
    if training.seq_len is None or training.global_batch_size is None:
        missing = "seq_len" if training.seq_len is None else "global_batch_size"
        raise InputError(f"training.{missing}", None, "a value: estimate() takes resolved training settings",
                         "recommend() and audit() derive omitted ones from the model")
    return (as_cluster(cluster), as_model(model), as_layout(layout), training, as_assumptions(assumptions))


def estimate_of(s: Sized) -> Estimate:
    """The full Estimate of a layout `size` has sized."""
    c, A = s.ctx, s.assumptions
    mem = _memory_estimate(c, A, s.best)
    T = _time_terms(s)
    S = T["stages"][T["slow"]]
    m = c.m

    def per_mb(key, n):
        b_, s_, e_, net = S[key]
        return _dim(b_ * m, s_ * m, e_ * m, net, n)

    dp_once_b, dp_once_s, _, dp_net = S["dp_once"]
    mb_b, mb_s, mb_exposed = S["dp_mb"]
    # DP's exposed time is the part of exposed_comm that is not TP/CP/EP/PP's: summed from its own
    # (non-negative) terms, not taken as that difference, which float rounding made -1e-12 or below
    dp_dim = _dim(dp_once_b + mb_b * m, dp_once_s + mb_s * m, m * mb_exposed + T["dp_once_exposed"], dp_net,
                  c.dense_shard)
    comm = _make(CommEstimate, {"tp": per_mb("tp", c.tp), "pp": per_mb("pp", c.pp), "dp": dp_dim,
                                "cp": per_mb("cp", c.cp), "ep": per_mb("ep", c.ep)})
    step = T["step"]
    model_flops = model_flops_per_step(c)
    denom = step * c.world * c.peak
    comm_total = comm.tp.seconds + comm.pp.seconds + comm.dp.seconds + comm.cp.seconds + comm.ep.seconds
    compute = T["compute_time"]
    return _make(Estimate, {
        "memory": mem, "comm": comm, "compute_time": compute, "bubble_fraction": T["bubble_fraction"],
        "bubble_time": T["bubble_time"], "exposed_comm_time": T["exposed_comm"],
        "optimizer_time": T["optimizer_time"], "step_time": step, "tokens_per_second": c.gbs * c.seq / step,
        "model_flops": model_flops, "mfu": model_flops / denom,
        "hfu": executed_flops_per_step(c, A) / denom,
        "comm_ratio": comm_total / compute if compute > 0 else 0.0,
        "exposed_comm_ratio": T["exposed_comm"] / step, "dp": c.dp, "num_microbatches": m, "profile": c.prof.label,
        "assumptions": A,
    })
