"""`Profile`: what one GPU (and its host) measured, as efficiency curves the cost model reads.

A profile is data, not code: a versioned JSON file (schema: schemas/profile.schema.json) holding
  gemm           share of the dense peak a GEMM reaches, by its FLOPs and reduction width K, per format
  grouped_gemm   share of the 16-bit peak a grouped expert GEMM reaches, by tokens per expert and K
  attention      share of the 16-bit peak of a fused causal attention kernel, forward + backward, by
                 backend and head dim, over its forward FLOPs and its sequence (chunk) length
  memory_bound   share of the HBM bandwidth a streaming kernel reaches, by the bytes it moves
  elementwise    GPU seconds of an eager PyTorch layer's element-wise kernels per byte it stores
  host           host seconds to issue a plain PyTorch decoder layer forward + backward, and per kernel
  collectives    optional: bus bandwidth of NCCL collectives by message size (a multi-GPU measurement)
`advisor measure` writes one; `Cluster(profile=...)` uses it. A GPU without a measured profile gets
the shipped Hopper measurement rescaled by its datasheet (`Profile.derived_for`), and says so.

Curves are tables over log2 axes, read by bilinear interpolation of log(efficiency): no fitted
formula, so a profile reproduces the table it was built from. Outside the measured range a curve
keeps its edge value, except towards small work, where a kernel's time stops falling (launch and
tail-wave bound): there the time is held at the smallest measured point's (`Grid.small`).
"""

from __future__ import annotations

import json
import math
from bisect import bisect_right
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Literal

from types import SimpleNamespace

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from ..errors import InputError

__all__ = ["Grid", "HostCost", "Collective", "Profile", "load_profile", "shipped_profile", "shipped_or_file", "profile_for",
           "SHIPPED", "MAX_PROFILE_BYTES"]

FORMAT = 1
MAX_PROFILE_BYTES = 4 << 20          # a profile is a few tens of KB; bound what a caller can hand us
MAX_AXIS = 64                        # nodes per axis (2^64 FLOPs is far beyond any kernel)
SHIPPED = "h200-2026-12"             # the measurement shipped with the package (advisor/profiles/)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)


class Grid(_Frozen):
    """A measured table over two log2 axes: values[j][i] is the curve at (2**x[i], 2**y[j])."""

    x: tuple[float, ...] = Field(min_length=1, max_length=MAX_AXIS)
    """log2 of the first axis (FLOPs, tokens per expert or bytes), strictly increasing."""
    y: tuple[float, ...] = Field(min_length=1, max_length=MAX_AXIS)
    """log2 of the second axis (reduction width K, sequence length; one node for a 1-D curve)."""
    values: tuple[tuple[float, ...], ...]
    """Efficiency (0, 1] at each node, one row per y node."""
    small: Literal["fixed_time", "clamp"] = "fixed_time"
    """Below x[0]: "fixed_time" holds a kernel's time at the first node's (efficiency falls with the
    work), "clamp" holds the efficiency."""
    _table: "_Table | None" = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check(self) -> "Grid":
        for name, axis in (("x", self.x), ("y", self.y)):
            if any(b <= a for a, b in zip(axis, axis[1:])):
                raise InputError(f"Profile grid.{name}", list(axis), "strictly increasing log2 values")
        if len(self.values) != len(self.y) or any(len(row) != len(self.x) for row in self.values):
            raise InputError("Profile grid.values", f"{len(self.values)} rows",
                             f"{len(self.y)} rows of {len(self.x)} values (one per y node, one per x node)")
        if any(not (0.0 < v <= 1.0) for row in self.values for v in row):
            raise InputError("Profile grid.values", "a value outside (0, 1]", "efficiencies in (0, 1]")
        self._table = _Table(self.x, self.y, self.values, self.small == "fixed_time")
        return self

    def at(self, x: float, y: float = 1.0) -> float:
        """The curve's efficiency at (x, y) (raw values, not logs)."""
        return self.__pydantic_private__["_table"].at(x, y)     # (the cost model's hot path)

    def shifted(self, dx: float) -> "Grid":
        """The same curve with its first axis moved by dx (log2): a GPU k times faster reaches at
        k x FLOPs what the measured one reaches at 1 x (time-equivalent work)."""
        return Grid(x=tuple(v + dx for v in self.x), y=self.y, values=self.values, small=self.small)


class _Table:
    """A Grid's lookup as plain Python (log values precomputed): the cost model reads curves
    thousands of times per recommendation."""

    __slots__ = ("x", "y", "logs", "fixed_time")

    def __init__(self, x: tuple, y: tuple, values: tuple, fixed_time: bool):
        self.x, self.y, self.fixed_time = x, y, fixed_time
        self.logs = tuple(tuple(math.log(v) for v in row) for row in values)

    def at(self, x: float, y: float) -> float:
        lx, ly = _log2(x), _log2(y)
        xs, ys = self.x, self.y
        shift = 0.0
        if lx < xs[0] and self.fixed_time:
            shift, lx = lx - xs[0], xs[0]
        logs = self.logs
        # _bracket, inlined for both axes (this is the cost model's innermost call)
        if ly <= ys[0] or len(ys) == 1:
            j, b = 0, 0.0
        elif ly >= ys[-1]:
            j, b = len(ys) - 1, 0.0
        else:
            j = _bisect(ys, ly) - 1
            b = (ly - ys[j]) / (ys[j + 1] - ys[j])
        if lx <= xs[0] or len(xs) == 1:
            i, a = 0, 0.0
        elif lx >= xs[-1]:
            i, a = len(xs) - 1, 0.0
        else:
            i = _bisect(xs, lx) - 1
            a = (lx - xs[i]) / (xs[i + 1] - xs[i])
        row0, row1 = logs[j], logs[j + 1] if b else logs[j]
        v0 = row0[i] + a * (row0[i + 1] - row0[i]) if a else row0[i]
        v1 = row1[i] + a * (row1[i + 1] - row1[i]) if a else row1[i]
        v = v0 + b * (v1 - v0) if b else v0
        return _exp(v) * (2.0 ** shift if shift else 1.0)


_log2, _exp, _bisect = math.log2, math.exp, bisect_right


class HostCost(_Frozen):
    """What the host (CPU, Python, PyTorch's dispatcher) takes to issue the GPU's work (bounds: a
    second per kernel and a minute per layer are far beyond any host, even a CPU smoke run's)."""

    per_kernel: float = Field(gt=0, le=1.0)
    """Seconds to issue one CUDA kernel from eager PyTorch: `eager_layer` over `eager_kernels`."""
    eager_layer: float = Field(gt=0, le=60.0)
    """Seconds to issue one plain-PyTorch decoder layer forward + backward (MHA, no recompute)."""
    eager_layer_recompute: float = Field(gt=0, le=60.0)
    """The same with full activation checkpointing (torch.utils.checkpoint, non-reentrant)."""
    eager_kernels: float = Field(gt=0, le=1e4)
    """CUDA kernels of that layer forward + backward, as the profiler counted them."""


class Collective(_Frozen):
    """Bus bandwidth (bytes/s, nccl-tests convention) of one collective, by message bytes."""

    op: Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]
    ranks: int = Field(ge=2, le=1 << 20)
    bytes: tuple[float, ...] = Field(min_length=1, max_length=MAX_AXIS)
    bus_bandwidth: tuple[float, ...] = Field(min_length=1, max_length=MAX_AXIS)


class Profile(_Frozen):
    """Measured kernel efficiencies of one GPU type and its host. See the module docstring."""

    format: Literal[1] = FORMAT
    """Version of this file format."""
    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.+-]+$")
    gpu: str = Field(min_length=1, max_length=128)
    """The GPU the curves describe."""
    source: str = Field(max_length=2000)
    """Who measured it, where and how: device, driver, CUDA, PyTorch, CPU, the script."""
    derived_from: str | None = Field(None, max_length=2000)
    """None for a measurement; else the profile these curves were rescaled from, and how."""
    peak_flops: dict[Literal["bf16", "fp8", "fp4"], float]
    """Dense peaks (FLOP/s) the efficiencies are shares of (the datasheet's)."""
    memory_bandwidth: float = Field(gt=0)
    """HBM bytes/s the memory-bound shares are of (the datasheet's)."""
    gemm: dict[Literal["bf16", "fp8", "fp4"], Grid]
    """x: log2 FLOPs of one GEMM, y: log2 of its reduction width K."""
    grouped_gemm: Grid
    """x: log2 tokens per expert, y: log2 K; 16-bit."""
    attention: dict[str, dict[str, Grid]]
    """backend -> head dim -> x: log2 forward FLOPs of one call, y: log2 sequence length; causal,
    forward + backward, with the backward counted as 2.5 x the forward FLOPs."""
    memory_bound: Grid
    """x: log2 bytes one kernel moves (one y node)."""
    elementwise: float = Field(gt=0, le=1e9)
    """GPU seconds x HBM bytes/s per stored activation byte of an eager PyTorch layer's element-wise
    kernels forward + backward (norms, RoPE, SwiGLU, residual adds, copies): the time they take, as
    full-bandwidth traffic per byte the layer keeps for its backward (an H200 measures ~10; the bound
    admits a CPU smoke run read against a GPU's datasheet, which measured up to 3.4e6)."""
    host: HostCost
    sustained: dict[Literal["bf16", "fp8", "fp4"], float] = {}
    """GEMM throughput after seconds of back-to-back work over that of a short burst, per format (the
    GEMM curves are bursts; a training step keeps the tensor cores busy, at the clock the power limit
    allows); a format not listed is taken at 1."""
    collectives: tuple[Collective, ...] = ()

    @property
    def label(self) -> str:
        """How the trace names it: 'h200-2026-12 (measured)' or '... (derived: ...)'."""
        return f"{self.name} ({'measured' if self.derived_from is None else 'derived'})"

    def derived_for(self, gpu) -> "Profile":
        """This profile rescaled to `gpu` by its datasheet: each compute curve's work axis by the ratio
        of the peaks (fp4 from the fp8 curve when this profile has none), the memory curve's by the
        HBM bandwidth; the host's costs are kept (they are the CPU's). Same efficiencies at the same
        time-equivalent work: an assumption until the GPU is measured."""
        from_peak = self.peak_flops
        bf16 = gpu.peak_flops
        fp8 = gpu.peak_flops_fp8 or bf16
        fp4 = gpu.peak_flops_fp4 or fp8
        target = {"bf16": bf16, "fp8": fp8, "fp4": fp4}
        gemm = {}
        for fmt, peak in target.items():
            src = fmt if fmt in self.gemm else "fp8" if "fp8" in self.gemm else "bf16"
            gemm[fmt] = self.gemm[src].shifted(math.log2(peak / from_peak[src]))
        ratio16 = math.log2(bf16 / from_peak["bf16"])
        bw = gpu.memory_bandwidth or self.memory_bandwidth
        note = (f"{self.name} (measured on {self.gpu}) rescaled by datasheet ratios: 16-bit peak x"
                f"{bf16 / from_peak['bf16']:.3g}, HBM x{bw / self.memory_bandwidth:.3g}; host costs as measured")
        return self.model_copy(update={
            "name": f"{self.name}-for-{_slug(gpu.name)}", "gpu": gpu.name, "derived_from": note,
            "peak_flops": target, "memory_bandwidth": bw, "gemm": gemm,
            "grouped_gemm": self.grouped_gemm.shifted(ratio16),
            "attention": {b: {d: g.shifted(ratio16) for d, g in by_d.items()} for b, by_d in self.attention.items()},
            "memory_bound": self.memory_bound.shifted(math.log2(bw / self.memory_bandwidth)),
            "elementwise": self.elementwise, "collectives": (),
            "sustained": {**self.sustained, **({"fp4": self.sustained["fp8"]} if "fp8" in self.sustained else {})},
        })

    # ---------------------------------------------------------------- lookups the cost model makes

    def gemm_seconds(self, fmt: str, flops: float, k: float) -> float:
        """Seconds of one GEMM of `flops` FLOPs with reduction width k, in format fmt (a burst)."""
        return flops / (self.peak_flops[fmt] * self.gemm[fmt].at(flops, k))

    def attention_efficiency(self, backend: str, head_dim: float, fwd_flops: float, seq: float) -> float:
        """Share of the 16-bit peak, forward + backward, of one fused causal attention call;
        head dims between the measured ones interpolate in log2, outside them take the nearest."""
        by_d = self.attention.get(backend) or next(iter(self.attention.values()))
        lo, hi = _nearest_dims(tuple(by_d), head_dim)
        e_lo = by_d[lo].at(fwd_flops, seq)
        if lo == hi:
            return e_lo
        e_hi = by_d[hi].at(fwd_flops, seq)
        a = (math.log2(head_dim) - math.log2(float(lo))) / (math.log2(float(hi)) - math.log2(float(lo)))
        return math.exp(math.log(e_lo) + a * (math.log(e_hi) - math.log(e_lo)))

    def bus_bandwidth(self, ops: tuple[str, ...]) -> float | None:
        """Measured bus bandwidth (bytes/s) of the largest message among the collectives `ops` (the
        most ranks measured), or None when the profile has none: what a bulk collective inside the
        NVLink domain reaches (`advisor measure` under torchrun on one node)."""
        rows = [c for c in self.collectives if c.op in ops]
        if not rows:
            return None
        widest = max(c.ranks for c in rows)
        return max(c.bus_bandwidth[-1] for c in rows if c.ranks == widest)

    def gemm_table(self, fmt: str) -> tuple:
        """(peak FLOP/s, lookup) of format fmt's GEMM curve, for callers that time many GEMMs."""
        return self.peak_flops[fmt], self.gemm[fmt].__pydantic_private__["_table"]


@lru_cache(maxsize=256)
def _nearest_dims(dims: tuple, head_dim: float) -> tuple[str, str]:
    """The measured head dims (as the profile's keys) just below and above head_dim, or the nearest
    one twice when it lies outside them."""
    ordered = sorted(dims, key=float)
    lo = max((d for d in ordered if float(d) <= head_dim), key=float, default=ordered[0])
    hi = min((d for d in ordered if float(d) >= head_dim), key=float, default=ordered[-1])
    return lo, hi


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_.+" else "-" for ch in name)[:60] or "gpu"


def _parse(text: str, where: str) -> Profile:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError("Cluster.profile", where, "a profile JSON file (advisor measure writes one)",
                         f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InputError("Cluster.profile", where, "a JSON object with the fields of advisor.inputs.profile.Profile")
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise InputError(f"Cluster.profile.{loc}", where, err["msg"], "see schemas/profile.schema.json") from None


def load_profile(path: str | Path) -> Profile:
    """A profile from a JSON file; InputError naming the file and the field when it is not one."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_PROFILE_BYTES:
            raise InputError("Cluster.profile", str(p), f"a profile file of at most {MAX_PROFILE_BYTES} bytes")
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError("Cluster.profile", str(p), "a readable profile file, or a shipped profile's name",
                         exc.strerror or str(exc)) from None
    return _parse(text, str(p))


@lru_cache(maxsize=4)
def shipped_profile(name: str = SHIPPED) -> Profile:
    """A profile shipped in advisor/profiles/."""
    try:
        text = (resources.files("advisor") / "profiles" / f"{name}.json").read_text(encoding="utf-8")
    except (FileNotFoundError, OSError):
        raise InputError("Cluster.profile", name, f"a profile file or a shipped profile name ({SHIPPED!r})") from None
    return _parse(text, name)


def shipped_or_file(value: str) -> Profile:
    """A shipped profile by name, else the profile file at that path."""
    if value and "/" not in value and "\\" not in value and not value.endswith(".json"):
        return shipped_profile(value)
    return load_profile(value)


@lru_cache(maxsize=64)
def _for_gpu(name: str, bf16: float, fp8: float | None, fp4: float | None, hbm: float | None) -> Profile:
    base = shipped_profile()
    if name == base.gpu:
        return base
    gpu = SimpleNamespace(name=name, peak_flops=bf16, peak_flops_fp8=fp8, peak_flops_fp4=fp4, memory_bandwidth=hbm)
    return base.derived_for(gpu)


def profile_for(gpu) -> Profile:
    """The profile a GPU without one of its own uses: the shipped measurement, rescaled to its
    datasheet unless it is the measured part itself."""
    return _for_gpu(gpu.name, gpu.peak_flops, gpu.peak_flops_fp8, gpu.peak_flops_fp4, gpu.memory_bandwidth)
