"""Soak test: memory stays flat over many mixed API calls and over thousands of distinct site rule
files (issues 7 and 21). Run on demand; not part of the test suite.

    python benchmarks/soak_memory.py                    # both phases: 100,000 calls, then 3,000 rule files
    python benchmarks/soak_memory.py --phase calls --calls 20000 --every 2000 --threads 4 --engine python
    python benchmarks/soak_memory.py --phase rules --rule-files 3000 --rules-every 300 --engine durable

Phase "calls": each line prints the calls so far, the resident set size (VmRSS from
/proc/self/status, else ru_maxrss), its growth since the end of the warm-up, live rule-engine
sessions (must stay 0: every durable session is deleted after its evaluation,
research/durable-rules.md §3.1), threads, and the elapsed time. The mix per 100 calls: 1 recommend
(the planner audits dozens of candidates, so it is the heaviest), 40 audits, 39 estimates, 20 input
constructions from dicts (pint unit parsing); inputs cycle through small situations, legal and
illegal layouts.

Phase "rules": each step writes one more small valid site rule file, different from every other
(its threshold and message differ), to a temporary directory and audits (every 10th step:
recommends) with it, as a service taking per-request site policy would. Each line prints the files
so far, RSS, its growth and the engines the process holds in its cache.

Exit status 1 when RSS grew more than --max-growth MiB after warm-up in either phase (issue 21's
target: 64), or when an answer differed from the first answer for the same input (determinism
under load).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import advisor  # noqa: E402
import advisor.rulebook.engines.durable as eng  # noqa: E402
from advisor.rulebook.engines import engine_info  # noqa: E402
from advisor.inputs.specs import resolve_training

CASES = [
    ({"gpu": "H100-SXM-80GB", "gpus": 8}, "llama-3-8b", None, {"tp": 2, "pp": 2}),
    ({"gpu": "A100-40GB", "gpus": 16}, "llama-2-13b", {"seq_len": "2k", "global_batch_size": 256}, {"tp": 4}),
    ({"gpu": "H100-SXM-80GB", "gpus": 16}, "mixtral-8x7b", {"seq_len": 4096, "global_batch_size": 128},
     {"tp": 2, "ep": 8}),
    ({"gpu": "L40S", "gpus": 4}, "qwen2.5-7b", {"precision": "fp8"}, {"framework": "deepspeed", "zero_stage": 3}),
    ({"gpu": "H100-SXM-80GB", "gpus": 8}, "llama-3-8b", None, {"tp": 3}),
    ({"gpu": "H100-SXM-80GB", "gpus": 64}, "llama-3-70b", None, {"tp": 8, "pp": 4, "sp": True}),
]


def rss_mib() -> float:
    """Current RSS; where /proc is missing, the peak (ru_maxrss, KiB on Linux), which still shows growth."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def call(n: int, engine: str | None, objs: list) -> str:
    i = n % len(CASES)
    slot = (n // len(CASES)) % 100          # every (case, kind) pair within 100 * len(CASES) calls
    c, m, t, layout = objs[i]
    try:
        if slot == 0:
            return advisor.recommend(c, m, t, engine=engine).model_dump_json()
        if slot <= 40:
            return advisor.audit(c, m, layout, t, engine=engine).model_dump_json()
        if slot <= 79:
            tr, _ = resolve_training(m, t)
            return advisor.estimate(c, m, advisor.Layout(**layout).for_world(c.gpus), tr).model_dump_json()
        cluster, model, training, layout = CASES[i]
        return advisor.Cluster(**cluster).model_dump_json() + advisor.Training(**(training or {})).model_dump_json()
    except advisor.AdvisorError as exc:
        return f"{type(exc).__name__}: {exc}"


def soak_calls(args) -> bool:
    objs = [(advisor.Cluster(**c), advisor.Model.preset(m), advisor.Training(**(t or {})), lay) for c, m, t, lay in CASES]
    answers: dict[int, str] = {}            # key (case, slot) -> digest of the first answer
    wrong = 0
    start = time.perf_counter()
    for n in range(args.warmup):
        call(n, args.engine, objs)
    gc.collect()
    base = rss_mib()
    print(f"calls: warm-up  calls={args.warmup:>7}  rss={base:7.1f} MiB  "
          f"elapsed={time.perf_counter() - start:6.1f}s", flush=True)

    lock = threading.Lock()
    done = 0
    next_report = args.every
    worst = 0.0

    def run(offset: int, count: int) -> None:
        nonlocal wrong, done, next_report, worst
        for n in range(offset, offset + count):
            out = call(n, args.engine, objs)
            key = (n % len(CASES)) * 100 + (n // len(CASES)) % 100
            digest = hashlib.sha256(out.encode()).hexdigest()
            with lock:
                if answers.setdefault(key, digest) != digest:
                    wrong += 1
                done += 1
                if done >= next_report:
                    next_report += args.every
                    gc.collect()
                    rss = rss_mib()
                    worst = max(worst, rss - base)
                    print(f"calls={done:>7}  rss={rss:7.1f} MiB  (+{rss - base:5.1f})  "
                          f"live_sessions={len(eng._process().traces) if eng.durable_available() else 0}  "
                          f"threads={threading.active_count()}  elapsed={time.perf_counter() - start:6.1f}s  "
                          f"wrong={wrong}", flush=True)

    per = args.calls // args.threads
    workers = [threading.Thread(target=run, args=(k * per, per if k < args.threads - 1 else args.calls - k * per))
               for k in range(args.threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    gc.collect()
    final = rss_mib() - base
    worst = max(worst, final)
    ok = worst <= args.max_growth and wrong == 0
    print(f"{'OK' if ok else 'FAIL'}: {done} calls, RSS growth after warm-up {final:+.1f} MiB "
          f"(max {worst:+.1f}, allowed {args.max_growth}), wrong answers {wrong}", flush=True)
    return ok


# A site rule as small as the rule-file schema allows; `n` makes every file's content distinct.
SITE_RULE = """\
[[rule]]
id = "site.soak-{n}"
version = 1
tier = "checklist"
title = "site note {n}"
when = "cluster.gpus >= {threshold}"
then = [{{ action = "checklist" }}]
message = "site note {n}: {{cluster.gpus}} GPUs, at least {threshold}"
rationale = "one of many distinct site policies (benchmarks/soak_memory.py)"
references = [{{ title = "soak benchmark", url = "https://example.org/soak/{n}" }}]
[rule.examples]
fire = [{{ "cluster.gpus" = {threshold} }}]
no_fire = [{{ "cluster.gpus" = 0 }}]
"""


def cached_engines() -> int | str:
    """Engines in the process-wide cache (rulebook/session.py), or "?" where it has another shape."""
    from advisor.rulebook import session

    cache = getattr(session, "_ENGINES", None)
    return len(cache) if hasattr(cache, "__len__") else "?"


def soak_rules(args) -> bool:
    cluster, model, training, layout = CASES[0]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="advisor-soak-") as tmp:
        def step(n: int) -> None:
            path = Path(tmp, f"site-{n:05d}.toml")
            path.write_text(SITE_RULE.format(n=n, threshold=n % 64 + 1), encoding="utf-8")
            if n % 10 == 0:
                advisor.recommend(cluster, model, training, rules=(str(path),), engine=args.engine)
            else:
                advisor.audit(cluster, model, layout, training, rules=(str(path),), engine=args.engine)

        step(0)                             # compile the built-in rule book before the baseline
        gc.collect()
        base = rss_mib()
        worst = 0.0
        print(f"rules: warm-up  files=      1  rss={base:7.1f} MiB  engines={cached_engines()}", flush=True)
        for n in range(1, args.rule_files):
            step(n)
            if (n + 1) % args.rules_every == 0 or n + 1 == args.rule_files:
                gc.collect()
                rss = rss_mib()
                worst = max(worst, rss - base)
                print(f"files={n + 1:>7}  rss={rss:7.1f} MiB  (+{rss - base:6.1f})  engines={cached_engines()}  "
                      f"elapsed={time.perf_counter() - start:6.1f}s", flush=True)
    ok = worst <= args.max_growth
    print(f"{'OK' if ok else 'FAIL'}: {args.rule_files} distinct site rule files, RSS growth {worst:+.1f} MiB "
          f"(allowed {args.max_growth})", flush=True)
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--phase", choices=["calls", "rules", "both"], default="both")
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--every", type=int, default=10_000)
    ap.add_argument("--warmup", type=int, default=1_000)
    ap.add_argument("--threads", type=int, default=1, help="run the calls from this many threads")
    ap.add_argument("--rule-files", type=int, default=3_000, help="distinct site rule files (phase rules)")
    ap.add_argument("--rules-every", type=int, default=300)
    ap.add_argument("--engine", choices=["durable", "python"], default=None)
    ap.add_argument("--max-growth", type=float, default=64.0, help="MiB of RSS growth allowed after warm-up")
    args = ap.parse_args()

    print(f"advisor {advisor.__version__}, engine {engine_info(args.engine)['engine']}, python "
          f"{sys.version.split()[0]}, pid {os.getpid()}, threads {args.threads}", flush=True)
    ok = True
    if args.phase in ("calls", "both"):
        ok &= soak_calls(args)
    if args.phase in ("rules", "both"):
        ok &= soak_rules(args)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
