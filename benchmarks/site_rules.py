"""What a site rule file costs per call, measured (issue 38). Run on demand; prints, never asserts.

    python benchmarks/site_rules.py [--repeat N] [--engine durable|python]

1. Warm cost: `recommend` with no site file against the same call with one site file whose rules
   fire but decide nothing the search reads (a checklist item and a note) and with the user guide's
   docs/examples/site-policy.toml on A100s (where its torchtitan rule does not fire), so both calls
   search the same layouts. Interleaved rounds (this VM's speed drifts by up to 1.7x within
   minutes); the ratio is the median of the rounds' ratios. Issue 38's target: <= 2x.
2. Cold cost: the first call with a new content (read, compiled, engines built), and one with 16
   files of 30 rules.
3. Memory per cached content: tracemalloc's growth over distinct contents cycling through the
   cache (rulebook/session.py keeps engine_cache_size() of them).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import advisor
from advisor.rulebook import session

REPO = Path(__file__).resolve().parents[1]
CLUSTER, MODEL, TRAINING = {"gpu": "A100-80GB", "gpus": 64}, "llama-3-70b", {"seq_len": 4096, "global_batch_size": 512}

NEUTRAL = '''
[[rule]]
id = "site.{name}-reserve"
version = 1
title = "Large jobs need a reservation"
tier = "checklist"
when = "cluster.gpus >= {gpus}"
then = [{{ action = "checklist" }}]
message = "Book a reservation for {{cluster.gpus}} GPUs before launching"
rationale = "the scheduler preempts unreserved large jobs"
references = [{{ title = "cluster policy", url = "https://wiki.example.org/policy" }}]
[rule.examples]
fire = [{{ "cluster.gpus" = {gpus} }}]
no_fire = [{{ "cluster.gpus" = 0 }}]

[[rule]]
id = "site.{name}-note"
version = 1
title = "A note for the trace"
tier = "default"
when = "training.seq_len >= 1024"
then = [{{ action = "note" }}]
message = "sequences of {{training.seq_len}} tokens"
rationale = "operators read this in the trace"
references = [{{ title = "cluster policy", url = "https://wiki.example.org/policy" }}]
[rule.examples]
fire = [{{ "training.seq_len" = 4096 }}]
no_fire = [{{ "training.seq_len" = 512 }}]
'''


def _median_ms(fn, n: int) -> float:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e3


def warm(files: list[Path], repeat: int, engine: str | None) -> None:
    def plain():
        return advisor.recommend(CLUSTER, MODEL, TRAINING, engine=engine)

    def with_site():
        return advisor.recommend(CLUSTER, MODEL, TRAINING, rules=tuple(files), engine=engine)

    a, b = plain(), with_site()
    assert a.layout == b.layout, "the site file changed the search; pick one that does not"
    rounds = [(_median_ms(plain, repeat), _median_ms(with_site, repeat)) for _ in range(5)]
    ratio = statistics.median(s / p for p, s in rounds)
    plain_ms, site_ms = statistics.median(p for p, _ in rounds), statistics.median(s for _, s in rounds)
    names = ", ".join(f.name for f in files)
    print(f"  warm, {names}: plain {plain_ms:.2f} ms, with site file {site_ms:.2f} ms per call; "
          f"ratio {ratio:.2f} (5 interleaved rounds of {repeat}; target <= 2)")


def cold(tmp: Path, engine: str | None) -> None:
    one = tmp / "cold-one.toml"
    one.write_text(NEUTRAL.format(name="cold", gpus=8), encoding="utf-8")
    t0 = time.perf_counter()
    advisor.recommend(CLUSTER, MODEL, TRAINING, rules=(one,), engine=engine)
    first = (time.perf_counter() - t0) * 1e3
    many = []
    for k in range(16):
        path = tmp / f"cold-{k}.toml"
        path.write_text("".join(NEUTRAL.format(name=f"f{k}r{r}", gpus=8) for r in range(15)), encoding="utf-8")
        many.append(path)
    t0 = time.perf_counter()
    advisor.recommend(CLUSTER, MODEL, TRAINING, rules=tuple(many), engine=engine)
    first_many = (time.perf_counter() - t0) * 1e3
    warm_many = _median_ms(lambda: advisor.recommend(CLUSTER, MODEL, TRAINING, rules=tuple(many), engine=engine), 5)
    print(f"  cold: first call with a new one-file content {first:.1f} ms; with 16 files x 30 rules "
          f"{first_many:.1f} ms, then {warm_many:.1f} ms warm")


def memory(tmp: Path, engine: str | None) -> None:
    size = session.engine_cache_size()
    contents = 2 * size

    def call(k: int) -> None:
        path = tmp / f"mem-{k}.toml"
        path.write_text(NEUTRAL.format(name=f"m{k}", gpus=k + 1), encoding="utf-8")
        advisor.recommend(CLUSTER, MODEL, TRAINING, rules=(path,), engine=engine)

    call(-1)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for k in range(size):
        call(k)
    full = tracemalloc.get_traced_memory()[0]
    for k in range(size, contents):
        call(k)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    print(f"  memory: {(full - base) / size / 2**20:.2f} MiB per cached content (Python heap, tracemalloc; "
          f"durable's C memory is not traced); after {contents} contents through a cache of {size}: "
          f"{(after - base) / 2**20:.1f} MiB, {session.cached_site_contents()} contents kept")


def main(argv: list[str]) -> int:
    repeat = int(argv[argv.index("--repeat") + 1]) if "--repeat" in argv else 20
    engine = argv[argv.index("--engine") + 1] if "--engine" in argv else None
    print(f"advisor {advisor.__version__}, python {sys.version.split()[0]}, engine "
          f"{advisor.recommend(CLUSTER, MODEL, TRAINING, engine=engine).trace.engine}")
    with tempfile.TemporaryDirectory(prefix="advisor-site-") as name:
        tmp = Path(name)
        neutral = tmp / "site-neutral.toml"
        neutral.write_text(NEUTRAL.format(name="n", gpus=8), encoding="utf-8")
        warm([neutral], repeat, engine)
        warm([REPO / "docs" / "examples" / "site-policy.toml"], repeat, engine)
        cold(tmp, engine)
        memory(tmp, engine)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
