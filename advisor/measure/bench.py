"""The microbenchmarks `advisor measure` runs (needs torch: `pip install 'advisor[measure]'`).

Each section appends records to a list in the format advisor.measure.build reads (the sections and
fields of the released H200 measurements, ../shared/data/README.md), so one builder serves both:
  env        device, clocks, versions, CPU
  gemm       torch.mm (bf16) and torch._scaled_mm (fp8, per-tensor scales) of transformer shapes, the
             forward, data- and weight-gradient orientations; CUDA-graph replay for short ones
  attn       scaled_dot_product_attention forward + backward, causal, cuDNN and flash backends
  moe        torch._grouped_mm over local experts (and a Python loop of torch.mm, for its host cost)
  elem       a streaming add (memory-bound bandwidth by size)
  host       a tiny decoder layer in eager PyTorch: host time per layer and CUDA kernels per layer
  layer      small decoder-layer stacks in eager PyTorch, with and without activation checkpointing
             (host-bound: the host's time to issue a layer), and a few larger ones
  graphs     layer stacks replayed from one CUDA graph (GPU time alone)
  sustained  one GEMM per format run back to back for several seconds: throughput and SM clock at the
             end against a short burst (training keeps the tensor cores busy for minutes)
  coll       with torch.distributed initialised (torchrun): all-reduce, all-gather, reduce-scatter,
             all-to-all bus bandwidth by message size
`smoke=True` runs every section at tiny sizes, on the CPU if there is no GPU (to test the code path).
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import time
from typing import Callable

import torch
import torch.nn.functional as F

__all__ = ["run", "SECTIONS"]

SECTIONS = ("env", "gemm", "attn", "moe", "elem", "host", "layer", "graphs", "sustained", "coll")


class _Bench:
    def __init__(self, smoke: bool, budget: float, log: Callable[[str], None]):
        self.cuda = torch.cuda.is_available()
        self.dev = "cuda" if self.cuda else "cpu"
        self.dtype = torch.bfloat16 if self.cuda else torch.float32
        self.smoke = smoke
        self.budget = budget
        self.t0 = time.time()
        self.log = log
        self.rows: list[dict] = []

    def emit(self, section: str, **rec) -> None:
        self.rows.append({"section": section, **rec})

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def timed(self, fn, reps: int, warm: int = 2) -> float:
        """Seconds per call of `reps` back-to-back calls (CUDA events on a GPU)."""
        for _ in range(warm):
            fn()
        self.sync()
        if self.cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(reps):
                fn()
            b.record()
            b.synchronize()
            return a.elapsed_time(b) / 1e3 / reps
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        return (time.perf_counter() - t) / reps

    def graphed(self, fn, reps: int) -> float | None:
        """Seconds per call replayed from a CUDA graph of `reps` calls (no launch cost); None off-GPU."""
        if not self.cuda or self.smoke:
            return None
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(2):
                    fn()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(reps):
                    fn()
            g.replay()
            self.sync()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            g.replay()
            b.record()
            b.synchronize()
            return a.elapsed_time(b) / 1e3 / reps
        except RuntimeError:
            return None

    def left(self, share: float, started: float) -> bool:
        return time.time() - started < share * self.budget


def _reps(guess_s: float, target: float = 3e-3, lo: int = 3, hi: int = 100) -> int:
    return max(lo, min(hi, int(target / max(guess_s, 1e-7))))


# ------------------------------------------------------------------------------------------- sections

def _env(B: _Bench) -> None:
    rec = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
           "cpu": platform.machine(), "cores": os.cpu_count(), "cpu_model": _cpu_model()}
    if B.cuda:
        p = torch.cuda.get_device_properties(0)
        rec.update(device=p.name, sms=p.multi_processor_count, mem_bytes=p.total_memory,
                   capability=f"{p.major}.{p.minor}", cudnn=torch.backends.cudnn.version())
        rec.update(_smi("clocks.max.sm,clocks.sm,power.limit,driver_version"))
    B.emit("env", **rec)


def _cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _smi(fields: str) -> dict:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
        return {f"smi_{k}": v.strip() for k, v in zip(fields.split(","), out.split(","))}
    except (OSError, IndexError, subprocess.SubprocessError):
        return {}


def _gemm_shapes(smoke: bool):
    tokens = (64,) if smoke else (256, 1024, 4096, 16384)
    hidden = (128,) if smoke else (1024, 2048, 4096, 8192, 16384)
    shards = (1, 2) if smoke else (1, 2, 4, 8)
    for M in tokens:
        for h in hidden:
            for t in shards:
                for kind, N, K in (("qkv", 3 * h // t, h), ("proj", h, h // t), ("fc1", 4 * h // t, h),
                                   ("fc2", h, 4 * h // t)):
                    if 2 * M * N * K > 4e12:
                        continue
                    for orient, (m, n, k) in (("fwd", (M, N, K)), ("dgrad", (M, K, N)), ("wgrad", (N, K, M))):
                        yield dict(M=M, h=h, tp=t, kind=kind, orient=orient, m=m, n=n, k=k)


def _fp8_ok(B: _Bench) -> bool:
    return B.cuda and hasattr(torch, "float8_e4m3fn") and torch.cuda.get_device_capability()[0] >= 9


def _gemm(B: _Bench) -> None:
    started = time.time()
    one = torch.tensor(1.0, device=B.dev)
    fp8 = _fp8_ok(B)
    for s in _gemm_shapes(B.smoke):
        if not B.left(0.3, started):
            B.log(f"gemm: time budget reached after {len(B.rows)} rows")
            break
        m, n, k = s["m"], s["n"], s["k"]
        flops = 2.0 * m * n * k
        a = torch.randn(m, k, device=B.dev, dtype=B.dtype)
        w = torch.randn(n, k, device=B.dev, dtype=B.dtype)
        fn = lambda: torch.mm(a, w.t())  # noqa: E731 - the call timed
        r = _reps(flops / 6e14 + 4e-6)
        t = B.timed(fn, r)
        B.emit("gemm", dtype="bf16", **s, flops=flops, t_eager=t, t_graph=B.graphed(fn, min(r, 50)) if t < 2e-4 else None)
        if fp8:
            a8, w8 = a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
            fn8 = lambda: torch._scaled_mm(a8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # noqa: E731
            t8 = B.timed(fn8, _reps(flops / 1.2e15 + 4e-6))
            B.emit("gemm", dtype="fp8", **s, flops=flops, t_eager=t8,
                   t_graph=B.graphed(fn8, min(r, 50)) if t8 < 2e-4 else None)


def _attn(B: _Bench) -> None:
    started = time.time()
    backends = [("cpu", None)]
    if B.cuda:
        from torch.nn.attention import SDPBackend
        backends = [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)]
    seqs = (64, 128) if B.smoke else (512, 1024, 2048, 4096, 8192, 16384, 32768)
    for d in ((32,) if B.smoke else (128, 64)):
        for heads in ((2,) if B.smoke else (8, 32, 2)):
            for s in seqs:
                b = 1 if B.smoke else max(1, 32768 // s)
                if heads * b * s * s > 2.2e11:
                    continue
                for name, backend in backends:
                    if not B.left(0.16, started):
                        return
                    q, k, v = (torch.randn(b, heads, s, d, device=B.dev, dtype=B.dtype, requires_grad=True) for _ in range(3))
                    go = torch.randn(b, heads, s, d, device=B.dev, dtype=B.dtype)
                    fwd_flops = 4.0 * b * heads * s * s * d * (s + 1) / (2 * s)

                    def fwdbwd():
                        F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(go)
                    try:
                        if backend is not None:
                            from torch.nn.attention import sdpa_kernel
                            with sdpa_kernel([backend]):
                                tb = B.timed(fwdbwd, _reps(3.5 * fwd_flops / 3e14, 40e-3, 2, 30))
                        else:
                            tb = B.timed(fwdbwd, 2)
                    except RuntimeError as exc:
                        B.emit("attn", backend=name, d=d, heads=heads, seq=s, batch=b, causal=True, error=str(exc)[:200])
                        continue
                    B.emit("attn", backend=name, d=d, heads=heads, seq=s, batch=b, causal=True, fwd_flops=fwd_flops,
                           t_fwdbwd=tb)


def _moe(B: _Bench) -> None:
    started = time.time()
    grid = [(4, 32, 64, 32)] if B.smoke else [(e, tpe, k, n) for e in (8, 32, 128) for tpe in (64, 256, 1024, 4096)
                                              for (k, n) in ((2048, 768), (4096, 1536), (7168, 2048))]
    for e, tpe, k, n in grid:
        if not B.left(0.1, started):
            return
        if e * tpe * k * 2 > 3e9:
            continue
        a = torch.randn(e * tpe, k, device=B.dev, dtype=B.dtype)
        w = torch.randn(e, k, n, device=B.dev, dtype=B.dtype)
        chunks = list(a.split(tpe))
        flops = 2.0 * e * tpe * k * n
        rec = dict(experts=e, tokens_per_expert=tpe, K=k, N=n, flops=flops)
        loop = lambda: [torch.mm(chunks[i], w[i]) for i in range(e)]  # noqa: E731
        r = _reps(flops / 5e14 + e * 5e-6, 5e-3, 3, 50)
        rec["t_loop"] = B.timed(loop, r)
        if B.cuda and hasattr(torch, "_grouped_mm"):
            wt = w.transpose(1, 2).contiguous().transpose(1, 2)
            offs = torch.arange(tpe, e * tpe + 1, tpe, device=B.dev, dtype=torch.int32)
            g = lambda: torch._grouped_mm(a, wt, offs=offs)  # noqa: E731
            try:
                rec["t_grouped"] = B.timed(g, r)
                rec["t_grouped_graph"] = B.graphed(g, 5)
            except RuntimeError as exc:
                rec["grouped_error"] = str(exc)[:200]
        else:       # off-GPU (smoke): one batched matmul stands for the grouped GEMM
            bm = lambda: torch.bmm(a.view(e, tpe, k), w)  # noqa: E731
            rec["t_grouped"] = B.timed(bm, r)
        B.emit("moe", **rec)


def _elem(B: _Bench) -> None:
    for mb in ((1,) if B.smoke else (16, 64, 256, 1024)):
        n = mb * (1 << 20) // 2
        x, y = torch.randn(n, device=B.dev, dtype=B.dtype), torch.randn(n, device=B.dev, dtype=B.dtype)
        nbytes = 3 * n * x.element_size()
        t = B.timed(lambda: x + y, _reps(nbytes / 3e12, 3e-3))
        B.emit("elem", op="add", tokens=n, h=1, min_bytes_fwd=nbytes, t_fwd=t)


class _Layer(torch.nn.Module):
    """A Llama-style decoder layer in plain PyTorch (pre-norm RMSNorm, separate q/k/v/o, rotary
    embedding, causal SDPA, SwiGLU MLP): the kernels PyTorch-native trainers launch. `t` keeps one
    tensor-parallel rank's heads and FFN columns (no communication)."""

    def __init__(self, h: int, heads: int, kv: int, ffn: int, t: int, dev: str, dtype):
        super().__init__()
        self.hd, self.nh, self.nkv = h // heads, heads // t, max(1, kv // t)
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False, device=dev, dtype=dtype)  # noqa: E731
        self.q, self.k, self.v = lin(h, self.nh * self.hd), lin(h, self.nkv * self.hd), lin(h, self.nkv * self.hd)
        self.o = lin(self.nh * self.hd, h)
        self.gate, self.up, self.down = lin(h, ffn // t), lin(h, ffn // t), lin(ffn // t, h)
        self.norm1 = torch.nn.RMSNorm(h, device=dev, dtype=dtype)
        self.norm2 = torch.nn.RMSNorm(h, device=dev, dtype=dtype)

    def _rotate(self, x, cos, sin):
        half = self.hd // 2
        a, b = x[..., :half], x[..., half:]
        return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)

    def forward(self, x, cos, sin):
        bsz, s, _ = x.shape
        y = self.norm1(x)
        q = self.q(y).view(bsz, s, self.nh, self.hd).transpose(1, 2)
        k = self.k(y).view(bsz, s, self.nkv, self.hd).transpose(1, 2)
        v = self.v(y).view(bsz, s, self.nkv, self.hd).transpose(1, 2)
        q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
        if self.nkv != self.nh:
            k = k.repeat_interleave(self.nh // self.nkv, dim=1)
            v = v.repeat_interleave(self.nh // self.nkv, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(bsz, s, self.nh * self.hd))
        y = self.norm2(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


def _stack(B: _Bench, shape: dict, ckpt: bool):
    """(step function, the stack's input) of `layers` decoder layers forward + backward."""
    h, heads, kv, ffn, s, b, t, n = (shape[k] for k in ("h", "heads", "kv_heads", "ffn", "seq", "mbs", "tp_shard", "layers"))
    layers = torch.nn.ModuleList([_Layer(h, heads, kv, ffn, t, B.dev, B.dtype) for _ in range(n)])
    hd = h // heads
    pos = torch.arange(s, device=B.dev, dtype=torch.float32)
    inv = 1.0 / (10000.0 ** (torch.arange(0, hd // 2, device=B.dev, dtype=torch.float32) / (hd // 2)))
    ang = pos[:, None] * inv[None, :]
    cos, sin = ang.cos().to(B.dtype), ang.sin().to(B.dtype)
    x0 = torch.randn(b, s, h, device=B.dev, dtype=B.dtype, requires_grad=True)

    def forward():
        x = x0
        for layer in layers:
            x = torch.utils.checkpoint.checkpoint(layer, x, cos, sin, use_reentrant=False) if ckpt else layer(x, cos, sin)
        return x

    def step():
        forward().float().pow(2).mean().backward()
    return step, forward


def _ffn(h: int) -> int:
    return int(8 * h / 3 / 256 + 0.999) * 256


def _host(B: _Bench) -> None:
    shape = dict(h=128, heads=4, kv_heads=4, ffn=352, seq=64, mbs=1, tp_shard=1, layers=8)
    step, _ = _stack(B, shape, False)
    for _ in range(5):
        step()
    B.sync()
    n = 3 if B.smoke else 30
    t = time.perf_counter()
    for _ in range(n):
        step()
    B.sync()
    wall = (time.perf_counter() - t) / n
    kernels = None
    if B.cuda:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step()
            B.sync()
        kernels = sum(1 for e in prof.events() if e.device_type.name == "CUDA")
    else:       # off-GPU: the aten ops stand for the kernels
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            step()
        kernels = sum(1 for e in prof.events() if e.name.startswith("aten::") and not e.cpu_parent)
    B.emit("host", layers=shape["layers"], wall_per_step=wall, wall_per_layer=wall / shape["layers"],
           cuda_kernels_per_step=kernels, us_per_kernel=wall / kernels * 1e6 if kernels else None)


def _layer_shapes(smoke: bool) -> list[dict]:
    if smoke:
        return [dict(h=128, heads=4, kv_heads=4, ffn=352, seq=64, mbs=1, tp_shard=1, layers=2)]
    small = [dict(h=h, heads=16, kv_heads=16, ffn=_ffn(h), seq=s, mbs=1, tp_shard=t, layers=4)
             for h, s, t in ((1024, 1024, 1), (1024, 2048, 4), (2048, 1024, 8), (2048, 2048, 2))]
    large = [dict(h=4096, heads=32, kv_heads=8, ffn=14336, seq=4096, mbs=1, tp_shard=t, layers=4) for t in (1, 4)]
    return small + large


def _layer(B: _Bench) -> None:
    started = time.time()
    for shape in _layer_shapes(B.smoke):
        for ckpt in (False, True):
            if not B.left(0.12, started):
                return
            step, forward = _stack(B, shape, ckpt)
            t = B.timed(step, 3, warm=1)
            stored = None
            if B.cuda:          # what the forward keeps for the backward: allocated after it, minus before
                before = torch.cuda.memory_allocated()
                x = forward()
                B.sync()
                stored = torch.cuda.memory_allocated() - before
                del x
            B.emit("layer", **shape, ckpt=ckpt, t_step=t, t_per_layer=t / shape["layers"],
                   stored_bytes_per_layer=stored / shape["layers"] if stored is not None else None)
            del step, forward
            if B.cuda:
                torch.cuda.empty_cache()


def _graphs(B: _Bench) -> None:
    if not B.cuda or B.smoke:
        shapes = _layer_shapes(True)
    else:
        shapes = [dict(h=h, heads=16, kv_heads=16, ffn=_ffn(h), seq=2048, mbs=1, tp_shard=t, layers=4)
                  for h, t in ((1024, 1), (2048, 1), (2048, 4))]
        shapes.append(dict(h=4096, heads=32, kv_heads=8, ffn=14336, seq=4096, mbs=1, tp_shard=4, layers=4))
    for shape in shapes:
        step, _ = _stack(B, shape, False)
        eager = B.timed(step, 3, warm=1)
        graph = B.graphed(step, 1)
        if graph is None and B.cuda and not B.smoke:
            B.emit("graphs", **shape, error="CUDA graph capture of the step failed")
            continue
        if graph is None:
            graph = eager            # no graph off-GPU: the smoke run records the eager time
        B.emit("graphs", **shape, t_eager_per_layer=eager / shape["layers"], t_graph_per_layer=graph / shape["layers"])
        if B.cuda:
            torch.cuda.empty_cache()


def _sustained(B: _Bench) -> None:
    """One large GEMM per format back to back for `seconds`, throughput over the last second and the SM
    clock then, against the first 20 ms burst (the way the gemm rows are timed)."""
    seconds = 0.2 if B.smoke else 8.0
    m = n = k = 256 if B.smoke else 8192
    flops = 2.0 * m * n * k
    one = torch.tensor(1.0, device=B.dev)
    fmts = ["bf16"] + (["fp8"] if _fp8_ok(B) else [])
    for fmt in fmts:
        a = torch.randn(m, k, device=B.dev, dtype=B.dtype)
        w = torch.randn(n, k, device=B.dev, dtype=B.dtype)
        if fmt == "fp8":
            a8, w8 = a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
            fn = lambda: torch._scaled_mm(a8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # noqa: E731
        else:
            fn = lambda: torch.mm(a, w.t())  # noqa: E731
        burst = B.timed(fn, _reps(flops / 8e14, 20e-3, 3, 200))
        chunk = max(3, int(0.25 / burst))
        samples = []
        end = time.time() + seconds
        while time.time() < end:
            samples.append(B.timed(fn, chunk, warm=0))
        clock = _smi("clocks.sm,power.draw,temperature.gpu")
        tail = statistics.median(samples[-4:]) if samples else burst
        B.emit("sustained", dtype=fmt, m=m, n=n, k=k, flops=flops, seconds=seconds, t_burst=burst, t_sustained=tail,
               ratio=burst / tail, **clock)


def _coll(B: _Bench) -> None:
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return
    world = dist.get_world_size()
    for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        for mb in ((1,) if B.smoke else (1, 8, 64, 256)):
            n = mb * (1 << 20) // 2 // world * world
            x = torch.randn(n, device=B.dev, dtype=B.dtype)
            out = torch.empty_like(x)
            part = torch.empty(n // world, device=B.dev, dtype=B.dtype)
            call = {"all_reduce": lambda: dist.all_reduce(x),
                    "all_gather": lambda: dist.all_gather_into_tensor(out, part),
                    "reduce_scatter": lambda: dist.reduce_scatter_tensor(part, x),
                    "all_to_all": lambda: dist.all_to_all_single(out, x)}[op]
            t = B.timed(call, 5 if B.smoke else 20)
            factor = 2.0 * (world - 1) / world if op == "all_reduce" else (world - 1) / world
            B.emit("coll", op=op, ranks=world, bytes=n * x.element_size(), t=t,
                   bus_bandwidth=n * x.element_size() * factor / t)


_RUN = {"env": _env, "gemm": _gemm, "attn": _attn, "moe": _moe, "elem": _elem, "host": _host, "layer": _layer,
        "graphs": _graphs, "sustained": _sustained, "coll": _coll}


def run(smoke: bool = False, budget: float = 170.0, only: tuple[str, ...] | None = None,
        log: Callable[[str], None] = lambda _: None) -> list[dict]:
    """Run the sections (all, or `only`) and return their records."""
    B = _Bench(smoke, budget, log)
    threads = torch.get_num_threads()
    if not B.cuda:
        # off-GPU (the smoke run) on one thread, the caller's setting restored after: beside other
        # processes, OpenMP's spinning barriers stalled it (3.6 s alone, 18-28 s on a loaded 2-core machine)
        torch.set_num_threads(1)
    try:
        for name in SECTIONS:
            if only and name not in only:
                continue
            started = time.time()
            _RUN[name](B)
            log(f"{name}: {time.time() - started:.1f} s")
    finally:
        torch.set_num_threads(threads)
    return B.rows
