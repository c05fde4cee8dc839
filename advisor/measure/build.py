"""Build a `Profile` from microbenchmark records (the rows `advisor measure` and the released H200
scripts write: sections gemm, attn, moe, elem, host, layer, graphs).

Pure Python: the same code turns a fresh measurement and the shipped data into a profile.

Curves: each table cell (rounded log2 coordinates) holds the median efficiency of the rows that fall
in it; a node with no row of its own takes its row's nearest measured node (towards less work at
the same time, the "fixed_time" rule of `Grid`), a row with none the nearest row's values.
The two layer-level figures come from whole layers, with the curves' share taken out:
- elementwise: the GPU time of CUDA-graph-replayed plain-PyTorch layers (`graphs` rows) not spent
  in their GEMMs and attention core by the curves, per byte the layer stores, at full HBM bandwidth
  (the median over the rows);
- host: the eager layers whose GPU time by the curves is under half their wall time are host-bound;
  their median wall time per layer is the host's time to issue one, with and without full recompute
  (MHA layers); over the kernels the profiler counted in such a layer (the `host` row) it is the
  host's cost per kernel.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Iterable

from ..costmodel.context import resolve
from ..costmodel.kernels import attention_core_seconds, eager_stored_bytes, parts
from ..errors import InputError
from ..inputs.layout import Layout
from ..inputs.profile import Collective, Grid, HostCost, Profile
from ..inputs.specs import GPU, Cluster, Model, Training

__all__ = ["build_profile", "layer_gpu_seconds", "HOST_BOUND_SHARE", "ATTENTION_BWD_FACTOR"]

HOST_BOUND_SHARE = 0.5
"""A layer row is host-bound when the curves' GPU time is under this share of its wall time."""
ATTENTION_BWD_FACTOR = 2.5
"""Backward FLOPs of an attention core per forward FLOP (the convention of the attn rows)."""


def _grid(cells: dict, small: str = "fixed_time", exact_x: bool = False) -> Grid:
    """A Grid from {(log2 x, log2 y): [efficiency, ...]} (integer-rounded coordinates; with `exact_x`
    the x nodes are the measured log2 values themselves, for a 1-D curve of few points)."""
    med = {key: statistics.median(vals) for key, vals in cells.items()}
    if exact_x:
        xs = sorted({k[0] for k in med})
    else:
        xs = list(range(min(k[0] for k in med), max(k[0] for k in med) + 1))
    ys = sorted({k[1] for k in med})
    rows: dict[int, list[float] | None] = {}
    for y in ys:
        measured = sorted(x for (x, yy) in med if yy == y)
        if not measured:
            rows[y] = None
            continue
        row = []
        for x in xs:
            near = min(measured, key=lambda m: (abs(m - x), m))
            v = med[(near, y)]
            if x < near and small == "fixed_time":
                v *= 2.0 ** (x - near)
            row.append(min(1.0, max(v, 1e-6)))
        rows[y] = row
    full = {y: r for y, r in rows.items() if r is not None}
    values = tuple(tuple(rows[y] or full[min(full, key=lambda f: abs(f - y))]) for y in ys)
    return Grid(x=tuple(float(x) for x in xs), y=tuple(float(y) for y in ys), values=values, small=small)


def _log2(v: float) -> int:
    return round(math.log2(v))


def _curves(records: list[dict], peaks: dict, hbm: float) -> dict:
    gemm: dict[str, dict] = defaultdict(lambda: defaultdict(list))
    grouped: dict = defaultdict(list)
    attention: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    memory: dict = defaultdict(list)
    for r in records:
        sec = r.get("section")
        if "error" in r:
            continue
        if sec == "gemm" and r.get("dtype") in peaks:
            t = r.get("t_graph") or r["t_eager"]
            gemm[r["dtype"]][(_log2(r["flops"]), _log2(r["k"]))].append(r["flops"] / (peaks[r["dtype"]] * t))
        elif sec == "moe" and (r.get("t_grouped_graph") or r.get("t_grouped")):
            t = r.get("t_grouped_graph") or r["t_grouped"]
            grouped[(_log2(r["tokens_per_expert"]), _log2(r["K"]))].append(r["flops"] / (peaks["bf16"] * t))
        elif sec == "attn" and r.get("causal") and r.get("t_fwdbwd"):
            f = r["fwd_flops"]
            eff = (1.0 + ATTENTION_BWD_FACTOR) * f / (peaks["bf16"] * r["t_fwdbwd"])
            attention[r["backend"]][str(r["d"])][(_log2(f), _log2(r["seq"]))].append(eff)
        elif sec == "elem" and r.get("op") == "add" and r.get("t_fwd"):
            memory[(round(math.log2(r["min_bytes_fwd"]), 3), 0)].append(r["min_bytes_fwd"] / (hbm * r["t_fwd"]))
    missing = [name for name, v in (("gemm", gemm), ("moe", grouped), ("attn", attention), ("elem add", memory)) if not v]
    if missing or "bf16" not in gemm:
        raise InputError("measure records", ", ".join(missing) or "no bf16 gemm rows",
                         "gemm (bf16), moe, attn (causal) and elem (add) rows to build the curves")
    return {
        "gemm": {fmt: _grid(cells) for fmt, cells in gemm.items()},
        "grouped_gemm": _grid(grouped),
        "attention": {b: {d: _grid(cells) for d, cells in by_d.items()} for b, by_d in attention.items()},
        "memory_bound": _grid(memory, exact_x=True),
    }


def _row_situation(r: dict, gpu: GPU, ckpt: bool) -> tuple:
    """(cluster, model, layout, training) of a plain-PyTorch layer-stack row: `tp_shard` ranks'
    heads / ffn split emulated by a TP layout on as many GPUs, no SP (the stack has no communication)."""
    t = r["tp_shard"]
    model = Model(layers=r["layers"], hidden=r["h"], heads=r["heads"], kv_heads=r["kv_heads"],
                  ffn_hidden=r["ffn"], vocab=32000)
    cluster = Cluster(gpu=gpu, gpus=t, gpus_per_node=max(8, t))
    layout = Layout(framework="torchtitan", tp=t, micro_batch_size=r["mbs"],
                    recompute="full" if ckpt else "none")
    training = Training(seq_len=r["seq"], global_batch_size=r["mbs"])
    return cluster, model, layout, training


def layer_gpu_seconds(r: dict, gpu: GPU, profile: Profile, graphed: bool = False) -> dict:
    """The curves' terms for one layer of a layer-stack row, forward + backward (seconds):
    gemm, attention, elementwise, and the layer's stored bytes (eager count)."""
    cluster, model, layout, training = _row_situation(r, gpu, bool(r.get("ckpt")))
    cluster = cluster.model_copy(update={"profile": profile})
    c = resolve(cluster, model, layout, training)
    p = parts(c)
    full = bool(r.get("ckpt")) and not graphed
    gemm = (p.attention + p.mlp).seconds(2.0 if full else 1.0, True)
    attn = attention_core_seconds(c, 0.5 * (c.seq + 1) / c.seq)
    if full:
        attn *= (2.0 + ATTENTION_BWD_FACTOR) / (1.0 + ATTENTION_BWD_FACTOR)
    stored = eager_stored_bytes(c)[0] * c.s_loc * c.b
    ew = profile.elementwise * stored / profile.memory_bandwidth * (4.0 / 3.0 if full else 1.0)
    return {"gemm": gemm, "attention": attn, "elementwise": ew, "stored": stored}


def _host(records: list[dict], gpu: GPU, profile: Profile) -> HostCost:
    host = next((r for r in records if r.get("section") == "host" and r.get("cuda_kernels_per_step")), None)
    if host is None:
        raise InputError("measure records", "no host row", "a host row (wall time and kernel count of a tiny layer)")
    kernels = host["cuda_kernels_per_step"] / host["layers"]
    bound: dict[bool, list[float]] = {False: [], True: []}
    for r in records:
        if r.get("section") != "layer" or "error" in r or r["kv_heads"] != r["heads"]:
            continue
        terms = layer_gpu_seconds(r, gpu, profile)
        if terms["gemm"] + terms["attention"] + terms["elementwise"] < HOST_BOUND_SHARE * r["t_per_layer"]:
            bound[bool(r["ckpt"])].append(r["t_per_layer"])
    layer = statistics.median(bound[False]) if bound[False] else host["wall_per_layer"]
    layer_rc = statistics.median(bound[True]) if bound[True] else layer * 2.0
    return HostCost(per_kernel=layer / kernels, eager_layer=layer, eager_layer_recompute=layer_rc, eager_kernels=kernels)


def _elementwise(records: list[dict], gpu: GPU, profile: Profile) -> float:
    shares = []
    for r in records:
        if r.get("section") != "graphs" or "error" in r:
            continue
        terms = layer_gpu_seconds(r, gpu, profile, graphed=True)
        rest = max(0.0, r["t_graph_per_layer"] - terms["gemm"] - terms["attention"])
        shares.append(rest * profile.memory_bandwidth / terms["stored"])
    if not shares:
        raise InputError("measure records", "no graphs row",
                         "graphs rows (CUDA-graph-replayed layer stacks) to measure the element-wise kernels")
    # a residual within the noise of the GEMM and attention terms leaves the element-wise kernels
    # too small to see: the least positive value the profile format takes
    return max(statistics.median(shares), 1e-6)


def build_profile(records: Iterable[dict], *, name: str, gpu: GPU, source: str) -> Profile:
    """The profile of `gpu` (its datasheet peaks and HBM bandwidth are what the efficiencies are
    shares of) from measurement records."""
    rows = list(records)
    peaks = {"bf16": gpu.peak_flops}
    if gpu.peak_flops_fp8:
        peaks["fp8"] = gpu.peak_flops_fp8
    hbm = gpu.memory_bandwidth or gpu.peak_flops / 150.0
    curves = _curves(rows, peaks, hbm)
    placeholder = HostCost(per_kernel=1e-6, eager_layer=1e-6, eager_layer_recompute=1e-6, eager_kernels=1.0)
    draft = Profile(name=name, gpu=gpu.name, source=source, peak_flops=peaks, memory_bandwidth=hbm,
                    elementwise=1.0, host=placeholder, **curves)
    draft = draft.model_copy(update={"elementwise": _elementwise(rows, gpu, draft)})
    done = draft.model_copy(update={"host": _host(rows, gpu, draft), "sustained": _sustained(rows),
                                    "collectives": _collectives(rows)})
    return Profile.model_validate(done.model_dump())      # every bound checked, as a file would be


def _sustained(rows: list[dict]) -> dict:
    """{format: throughput after seconds of back-to-back GEMMs / throughput of a short burst}."""
    out = {}
    for r in rows:
        if r.get("section") == "sustained" and "error" not in r and r.get("t_sustained"):
            out[r["dtype"]] = min(1.0, r["t_burst"] / r["t_sustained"])
    return out


def _collectives(rows: list[dict]) -> tuple:
    by_op: dict = defaultdict(list)
    for r in rows:
        if r.get("section") == "coll" and "error" not in r:
            by_op[(r["op"], r["ranks"])].append((r["bytes"], r["bus_bandwidth"]))
    return tuple(Collective(op=op, ranks=ranks, bytes=tuple(b for b, _ in sorted(v)),
                            bus_bandwidth=tuple(bw for _, bw in sorted(v))) for (op, ranks), v in sorted(by_op.items()))
