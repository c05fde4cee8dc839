"""The runs that would settle the planner's disagreements with published layouts (issue 32). Run on demand.

    python benchmarks/disagreements.py [path/to/published.jsonl ...]

For every dev record (both dev files by default) where the recommendation, with the framework the
record states (benchmarks/published_planner.py, "stated" pass), differs from the published layout in
(TP, PP), prints the pair of layouts to measure on the record's cluster, model, sequence, batch and
precision: the published one and the advisor's, each with its estimated step time, and the kind of
disagreement:
- near-tie: the estimates are within 8% (the band the planner's tie-break decides in; which one is
  faster then rests on terms no dev measurement separates);
- estimate prefers the advisor's: the published layout is estimated more than 8% slower;
- published faster by the estimate: the planner ranked it lower for memory headroom or a rule;
- published does not fit: the estimate judges the published layout out of memory.
Every pair needs several GPUs and nodes (TP, PP, CP and EP across them); the one lent GPU cannot
measure any of them. Nothing is fitted here.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.published import REPO, load_records  # noqa: E402
from benchmarks.published_planner import evaluate  # noqa: E402

DATA = REPO.parent / "shared" / "data"
BAND = 0.08     # the near-tie band the planner reports (advisor.planner.ranking; measured error)


def kind(row: dict) -> str:
    if row["fits"] is not True:
        return "published does not fit"
    rel = row["rel"]
    if rel is None:
        return "published not estimable"
    if abs(rel - 1.0) <= BAND:
        return "near-tie"
    return "estimate prefers the advisor's" if rel > 1.0 else "published faster by the estimate"


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv if not a.startswith("--")] or \
        [DATA / "published-layouts-dev.jsonl", DATA / "published-perf-2025-dev.jsonl"]
    kinds: Counter = Counter()
    total = 0
    for path in paths:
        for rec in load_records(path):
            total += 1
            row = evaluate(rec, "stated")
            if row["got"] is not None and row["got"][:2] == row["pub"][:2]:
                continue
            k = kind(row)
            kinds[k] += 1
            t, c = rec.training, rec.cluster
            rel = f"{row['rel']:.2f}" if row["rel"] else "-"
            print(f"{rec.id}: {c.gpus} x {c.gpu.name}, {rec.model.name}, seq {t.seq_len}, batch {t.global_batch_size}, "
                  f"{t.precision}, {t.framework or 'no stated stack'} {t.framework_version or ''}".rstrip())
            print(f"    measure  published {row['pub_id']}  vs  advisor {row['got_id']}  "
                  f"(est. published / advisor {rel}; {k})")
    print(f"\n{sum(kinds.values())} of {total} records disagree on (TP, PP):")
    for k, n in kinds.most_common():
        print(f"  {n:3d}  {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
