"""A service's latency, measured (issue 38). Run on demand; prints, never asserts.

    python benchmarks/service.py [--calls N] [--processes 1,2] [--situations]

The input mix (MIX): sixteen situations a platform service is asked about, dense and MoE, small and
large, pretraining and LoRA, each as often as the others, in one fixed shuffled order (seed 38).
Each worker process runs its share of `--calls` calls per process, one after another, and reports
the wall time of each (what a client waits) and its CPU time (what this process spent: on a shared
machine the wall times also carry other processes' load). Three ways to run a process:

- as is: the first call compiles the rule book, builds the engines and imports the planner, and
  the collector's full passes walk the whole warm heap (~45,000 objects, 15-50 ms each here);
- warm: `advisor.warm_up()` first, then `gc.freeze()`, as docs/user-guide.md ("Serving") says;
- warm in 2 processes: the same in two worker processes at once (one process is one core: the
  GIL; threads add queueing, not throughput).

For each it prints p50 / p99 / max per call and calls per second (all calls over the run's wall
time), then the jitter: each situation's own p99 / p50 over its repeats (the same work, so what is
left is first calls, collections and the machine), on the wall clock and on this process's CPU
clock (which other processes' load moves less). `--situations` adds each situation's median.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import random
import statistics
import sys
import time

MIX = [
    ("llama-3-8b on 8 H100", {"gpu": "H100-SXM-80GB", "gpus": 8}, "llama-3-8b", {"seq_len": 8192}),
    ("llama-2-7b on 8 A100", {"gpu": "A100-80GB", "gpus": 8}, "llama-2-7b", {"seq_len": 4096, "global_batch_size": 128}),
    ("qwen2.5-7b on 16 H200", {"gpu": "H200", "gpus": 16}, "qwen2.5-7b", None),
    ("llama-3-8b LoRA on 8 L40S", {"gpu": "L40S", "gpus": 8}, "llama-3-8b", {"task": "lora"}),
    ("llama-3-70b on 64 H100", {"gpu": "H100-SXM-80GB", "gpus": 64}, "llama-3-70b",
     {"seq_len": 8192, "global_batch_size": 512}),
    ("llama-3.1-70b on 128 B200", {"gpu": "B200", "gpus": 128}, "llama-3.1-70b", None),
    ("qwen2.5-72b SFT on 32 H100", {"gpu": "H100-SXM-80GB", "gpus": 32}, "qwen2.5-72b", {"task": "sft"}),
    ("gemma-7b on 64 A100", {"gpu": "A100-80GB", "gpus": 64}, "gemma-7b", None),
    ("gpt-3-175b on 1024 A100", {"gpu": "A100-80GB", "gpus": 1024}, "gpt-3-175b",
     {"seq_len": 2048, "global_batch_size": 1536}),
    ("llama-3.1-405b on 16384 H100", {"gpu": "H100-SXM-80GB", "gpus": 16384}, "llama-3.1-405b",
     {"seq_len": 8192, "global_batch_size": 2048}),
    ("llama-3-70b at 128k on 512 H100", {"gpu": "H100-SXM-80GB", "gpus": 512}, "llama-3-70b",
     {"seq_len": "128k", "global_batch_size": 64}),
    ("mixtral-8x7b on 64 H100", {"gpu": "H100-SXM-80GB", "gpus": 64}, "mixtral-8x7b", None),
    ("qwen3-30b-a3b on 64 B200", {"gpu": "B200", "gpus": 64}, "qwen3-30b-a3b", None),
    ("deepseek-v3 on 2048 H100", {"gpu": "H100-SXM-80GB", "gpus": 2048}, "deepseek-v3",
     {"seq_len": 4096, "global_batch_size": 4096}),
    ("gpt-oss-120b on 64 H100", {"gpu": "H100-SXM-80GB", "gpus": 64}, "gpt-oss-120b", None),
    ("nemotron-h-8b on 64 H100", {"gpu": "H100-SXM-80GB", "gpus": 64}, "nemotron-h-8b", None),
]


def _order(calls: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    out: list[int] = []
    while len(out) < calls:
        block = list(range(len(MIX)))
        rng.shuffle(block)
        out += block
    return out[:calls]


def _worker(calls: list[int], warm: bool, start, results) -> None:
    import advisor

    if warm:
        advisor.warm_up()
        gc.freeze()
    start.wait()
    samples = []
    t_begin = time.perf_counter()
    for i in calls:
        _, cluster, model, training = MIX[i]
        w0, c0 = time.perf_counter(), time.process_time()
        advisor.recommend(cluster, model, training)
        samples.append((i, time.perf_counter() - w0, time.process_time() - c0))
    results.put((t_begin, time.perf_counter(), samples))


def _run(processes: int, calls: int, warm: bool) -> tuple[float, list[tuple[int, float, float]]]:
    """(wall seconds of the run, (situation, wall, cpu) per call) for `processes` workers started at once."""
    ctx = mp.get_context("spawn")
    start, results = ctx.Barrier(processes + 1), ctx.Queue()
    workers = [ctx.Process(target=_worker, args=(_order(calls, 38 + k), warm, start, results))
               for k in range(processes)]
    for w in workers:
        w.start()
    start.wait()
    got = [results.get() for _ in workers]
    for w in workers:
        w.join()
    wall = max(end for _, end, _ in got) - min(begin for begin, _, _ in got)
    return wall, [s for _, _, samples in got for s in samples]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _report(label: str, wall: float, samples: list[tuple[int, float, float]], per_situation: bool) -> None:
    walls, cpus = [s[1] for s in samples], [s[2] for s in samples]
    p50, p99 = _pct(walls, 0.5), _pct(walls, 0.99)
    print(f"  {label:<26} p50 {p50 * 1e3:6.1f}  p99 {p99 * 1e3:6.1f}  max {max(walls) * 1e3:6.1f} ms "
          f"(p99/p50 {p99 / p50:4.1f}; cpu p50 {_pct(cpus, 0.5) * 1e3:5.1f} p99 {_pct(cpus, 0.99) * 1e3:5.1f} ms)  "
          f"{len(samples) / wall:5.1f} calls/s")
    for clock, col in (("wall", 1), ("cpu", 2)):
        jitter = []
        for i in range(len(MIX)):
            own = [s[col] for s in samples if s[0] == i]
            if len(own) >= 2:
                jitter.append((_pct(own, 0.99) / _pct(own, 0.5), i, _pct(own, 0.5)))
        worst = max(jitter)
        print(f"  {'':<26} jitter, {clock:<4} (a situation's p99 / its p50): median "
              f"{statistics.median(j[0] for j in jitter):.2f}, worst {worst[0]:.2f} ({MIX[worst[1]][0]})")
        if per_situation and clock == "wall":
            for ratio, i, med in sorted(jitter, key=lambda j: j[2]):
                print(f"      {MIX[i][0]:<34} p50 {med * 1e3:6.1f} ms  p99/p50 {ratio:.2f}")


def main(argv: list[str]) -> int:
    calls = int(argv[argv.index("--calls") + 1]) if "--calls" in argv else 10 * len(MIX)
    counts = [int(n) for n in argv[argv.index("--processes") + 1].split(",")] if "--processes" in argv else [1, 2]
    per_situation = "--situations" in argv
    import advisor
    from advisor.build_info import describe

    print(f"advisor {advisor.__version__} ({describe()}), python {sys.version.split()[0]}, {mp.cpu_count()} CPUs, "
          f"{len(MIX)} situations, {calls} calls per process")
    runs = [("1 process, as is", 1, False)] + [(f"{n} process{'es' if n > 1 else ''}, warm", n, True) for n in counts]
    for label, n, warm in runs:
        wall, samples = _run(n, calls, warm)
        _report(label, wall, samples, per_situation)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
