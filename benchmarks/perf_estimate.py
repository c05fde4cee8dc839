"""Speed of the cost model alone (issue 8): `memory_only` and `estimate` of one layout, and the whole
`recommend` that calls them hundreds of times. Run on demand; prints medians, never asserts.

    python benchmarks/perf_estimate.py [--repeat N]

Per-call times are the median over N rounds of the mean of a batch of calls on the 70B case
(Llama-3-70B, 64 H100, seq 8192, tp8 pp2 dp4, distributed optimizer). Each call gets a fresh
`Layout`, as the planner's calls do, while cluster, model and training stay the same objects, as
within one recommendation. "estimate after memory_only" times `estimate` of a layout that
`memory_only` has just seen, the planner's pattern (it asks memory_only of every candidate, then
estimate of those that fit), where estimate reuses the memory part. `recommend` is the median of N.
"""

from __future__ import annotations

import statistics
import sys
import time

import advisor
from advisor import Cluster, Layout, Model, Training
from advisor.costmodel import estimate, memory_only

BATCH = 200


def _layouts() -> list[Layout]:
    return [Layout(tp=8, pp=2, dp=4, sp=True, zero_stage=1, micro_batch_size=1 + i % 2) for i in range(BATCH)]


def _per_call(fn, cluster, model, training, repeat: int) -> float:
    for lay in _layouts()[:20]:
        fn(cluster, model, lay, training)   # warm
    samples = []
    for _ in range(repeat):
        layouts = _layouts()
        t0 = time.perf_counter()
        for lay in layouts:
            fn(cluster, model, lay, training)
        samples.append((time.perf_counter() - t0) / BATCH)
    return statistics.median(samples)


def _estimate_after_memory(cluster, model, training, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        spent = 0.0
        for lay in _layouts():
            memory_only(cluster, model, lay, training)
            t0 = time.perf_counter()
            estimate(cluster, model, lay, training)
            spent += time.perf_counter() - t0
        samples.append(spent / BATCH)
    return statistics.median(samples)


def _whole(cluster, model, training, repeat: int) -> float:
    advisor.recommend(cluster, model, training)   # warm: rule book, engine, caches
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        advisor.recommend(cluster, model, training)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main(argv: list[str]) -> int:
    repeat = int(argv[argv.index("--repeat") + 1]) if "--repeat" in argv else 15
    cluster, model = Cluster(gpu="H100-SXM-80GB", gpus=64), Model.preset("llama-3-70b")
    training = Training(seq_len=8192, global_batch_size=512)
    print(f"advisor {advisor.__version__}, python {sys.version.split()[0]}, repeat {repeat}")
    rows = [
        ("memory_only 70B tp8 pp2 dp4", _per_call(memory_only, cluster, model, training, repeat) * 1e6, "us"),
        ("estimate 70B tp8 pp2 dp4", _per_call(estimate, cluster, model, training, repeat) * 1e6, "us"),
        ("estimate after memory_only", _estimate_after_memory(cluster, model, training, repeat) * 1e6, "us"),
        ("recommend 70B on 64 H100", _whole(cluster, model, training, repeat) * 1e3, "ms"),
        ("recommend 405B on 16384 H100 at 128k",
         _whole(Cluster(gpu="H100-SXM-80GB", gpus=16384), "llama-3.1-405b",
                Training(seq_len="128k", global_batch_size=128), repeat) * 1e3, "ms"),
    ]
    for name, value, unit in rows:
        print(f"  {name:<38} median {value:8.1f} {unit}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
