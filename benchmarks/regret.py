"""Regret report (issue 17 item 3): where the dev data measured several layouts of one model on one
cluster, does the cost model order them as the measurements do?

    python benchmarks/regret.py [--verbose]

A group is the records of both dev files with the same GPU, GPU count, model shape, sequence length,
task and GEMM format (any FP8 recipe counts as FP8; repeats of one configuration count once, as in
calibrate_2025.py). Records of different software releases can share a group: the measured order
then also carries the releases' differences. Each record is estimated
with its published layout and the settings its source states (benchmarks/published.py), and compared
by time per token: measured = estimated step x (est/reported ratio) / tokens per step, the ratio of
calibrate_2025.py (the same FLOP conventions). Per group:
- top-1: the layout the advisor ranks first is within 5% of the measured best (target: >= 80% of
  the groups). The advisor's order is the planner's (advisor.planner.ranking.ordered): step time, with
  layouts within the near-tie band ordered by the tie-break the rules choose for the group's stated stack
  and situation; the estimate's own order (fastest estimate first) is reported next to it;
- Kendall tau between the estimated and the measured order (pairs within 2% measured are ties and
  not counted).
Two more sets of groups, by the estimate's order alone (no one job decides among them, so the planner's
tie-break does not apply): the dev records of one model on one GPU type, sequence, task and GEMM format at
any GPU count and batch, compared by GPU-seconds per token (step x GPUs / tokens); and the H200 layer rows
(benchmarks/measured_h200.py) of one decoder-layer shape and sequence at several micro-batches, TP shards
and recompute settings, compared by GPU-seconds per token (time per layer x TP shard / tokens).
Measurement only: nothing is fitted here.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from types import SimpleNamespace
from itertools import combinations
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from advisor.facts import build_facts
from advisor.api import situation_decisions
from advisor.inputs.specs import resolve_training
from advisor.rulebook.session import rulebook_for
from advisor.costmodel import Assumptions
from advisor.inputs.precision import recipe
from advisor.planner.candidates import Candidate
from advisor.planner.ranking import Ties, ordered
from advisor.planner.space import Policy
from advisor.inputs import presets
from advisor.inputs.profile import shipped_profile
from advisor.inputs.specs import GPU
from benchmarks import measured_h200
from benchmarks.calibrate_2025 import PERF_2025, rows_2025, rows_layouts, unique
from benchmarks.published import default_path, layout_label

TOP1_WITHIN = 0.05
TIE = 0.02


def _per_token(row) -> tuple[float, float]:
    """(estimated, measured) seconds per token of the whole step."""
    rec, e = row["rec"], row["est"]
    tokens = rec.training.global_batch_size * rec.training.seq_len
    return e.step_time / tokens, e.step_time * row["ratio"] / tokens


def groups(rows) -> list[list[dict]]:
    by = defaultdict(list)
    for r in rows:
        rec = r["rec"]
        m = rec.model
        key = (rec.cluster.gpu.name, rec.cluster.gpus, m.layers, m.hidden, m.experts, rec.training.seq_len,
               recipe(rec.training.precision).gemm, rec.training.task)
        by[key].append(r)
    return [g for g in by.values() if len({x["rec"].layout.id for x in g}) > 1]


def groups_any_size(rows) -> list[list[dict]]:
    """Records of one model on one GPU type, sequence, task and GEMM format, at any GPU count and batch."""
    by = defaultdict(list)
    for r in rows:
        rec = r["rec"]
        m = rec.model
        by[rec.cluster.gpu.name, m.layers, m.hidden, m.experts, rec.training.seq_len,
           recipe(rec.training.precision).gemm, rec.training.task].append(r)
    return [g for g in by.values() if len({(x["rec"].layout.id, x["rec"].cluster.gpus) for x in g}) > 1]


def _per_gpu_token(row) -> tuple[float, float]:
    """(estimated, measured) GPU-seconds per token."""
    est, meas = _per_token(row)
    return est * row["rec"].cluster.gpus, meas * row["rec"].cluster.gpus


def layer_groups() -> list[list[tuple[str, float, float]]]:
    """The H200 layer rows of one layer shape and sequence: (label, estimated, measured GPU-seconds per token)."""
    if not measured_h200.DEFAULT.exists():
        return []
    gpu, prof = GPU(**presets.gpu("H200")), shipped_profile()
    by = defaultdict(list)
    for r in measured_h200.load(measured_h200.DEFAULT, "microbench.jsonl"):
        if r["section"] != "layer" or "error" in r:
            continue
        est, _ = measured_h200.layer_estimate(r, gpu, prof, Assumptions().host_overlap_exponent)
        per = r["tp_shard"] / (r["mbs"] * r["seq"])
        label = f"b{r['mbs']} t{r['tp_shard']}{' ckpt' if r['ckpt'] else ''}"
        by[r["h"], r["heads"], r["kv_heads"], r["ffn"], r["seq"]].append((label, est * per, r["t_per_layer"] * per))
    return [g for g in by.values() if len(g) > 1]


def by_estimate(name: str, found: list[list[tuple[str, float, float]]], verbose: bool) -> None:
    """Top-1 and Kendall tau of the estimate's order over groups of (label, estimated, measured)."""
    top1, taus = 0, []
    for g in found:
        est, meas = [x[1] for x in g], [x[2] for x in g]
        fastest = min(range(len(g)), key=est.__getitem__)
        ok = meas[fastest] <= (1 + TOP1_WITHIN) * min(meas)
        top1 += ok
        tau = kendall(est, meas)
        if tau is not None:
            taus.append(tau)
        if verbose or not ok:
            print(f"{'ok ' if ok else 'MISS'} {name}: " + ", ".join(
                f"{label} {m / min(meas):.2f}{'*' if x is g[fastest] else ''}" for x in sorted(g, key=lambda x: x[2])
                for label, _, m in (x,)) + "  (measured / best; * the fastest estimate)")
    n = len(found)
    print(f"\n{name}: {n} groups")
    if n:
        print(f"top-1 within {TOP1_WITHIN:.0%} of the measured best, the estimate's order: {top1}/{n} = {top1 / n:.0%}")
    if taus:
        print(f"Kendall tau (pairs tied within {TIE:.0%} measured left out): mean {sum(taus) / len(taus):+.2f} "
              f"over {len(taus)} groups")


def advisors_pick(g: list[dict]) -> int:
    """Index of the group's layout the planner would rank first among them (its near-tie rules for the
    situation of the group's first record: same cluster, model, sequence, stated stack)."""
    rec = g[0]["rec"]
    training, _ = resolve_training(rec.model, rec.training)
    decisions, *_ = situation_decisions(rulebook_for(()), build_facts(rec.cluster, rec.model, training), None)
    ties = Ties.for_job(Policy.of(decisions).tie_order, rec.model, rec.cluster, training)
    cands = []
    for r in g:
        mem = r["est"].memory
        sized = SimpleNamespace(total=mem.total, capacity=mem.capacity)
        cands.append(Candidate(r["rec"].layout, sized, _per_token(r)[0], None,
                               ties.is_tight(mem.total / mem.capacity)))
    first = ordered(cands, ties)[0]
    return cands.index(first)


def kendall(est: list[float], meas: list[float]) -> float | None:
    agree = disagree = 0
    for i, j in combinations(range(len(est)), 2):
        if abs(meas[i] - meas[j]) <= TIE * min(meas[i], meas[j]):
            continue
        if (est[i] - est[j]) * (meas[i] - meas[j]) > 0:
            agree += 1
        else:
            disagree += 1
    total = agree + disagree
    return (agree - disagree) / total if total else None


def main(argv: list[str]) -> int:
    A = Assumptions()
    rows = unique(rows_2025(PERF_2025, A)[0]) + unique([r for r in rows_layouts(default_path(), A)[0] if r["use"]])
    found = groups(rows)
    top1 = est_top1 = 0
    taus = []
    for g in found:
        times = [_per_token(r) for r in g]
        est, meas = [t[0] for t in times], [t[1] for t in times]
        fastest = min(range(len(g)), key=est.__getitem__)
        pick = advisors_pick(g)
        ok = meas[pick] <= (1 + TOP1_WITHIN) * min(meas)
        top1 += ok
        est_top1 += meas[fastest] <= (1 + TOP1_WITHIN) * min(meas)
        tau = kendall(est, meas)
        if tau is not None:
            taus.append(tau)
        if "--verbose" in argv or not ok:
            rec = g[0]["rec"]
            print(f"{'ok ' if ok else 'MISS'} {rec.model.name} on {rec.cluster.gpus} x {rec.cluster.gpu.name}, "
                  f"seq {rec.training.seq_len}, {rec.training.precision}: tau {tau if tau is None else round(tau, 2)}")
            for r, (e_t, m_t) in sorted(zip(g, times), key=lambda x: x[1][1]):
                mark = (" <- advisor's pick" if r is g[pick] else "") + (" <- fastest estimate" if r is g[fastest] else "")
                print(f"     {layout_label(r['rec'].layout, ep=True):<30} measured {m_t * 1e6:9.3f} us/token  "
                      f"estimated {e_t * 1e6:9.3f}{mark}")
    n = len(found)
    print(f"\ngroups with several measured layouts: {n}")
    if n:
        print(f"top-1 within {TOP1_WITHIN:.0%} of the measured best, the advisor's order: {top1}/{n} = {top1 / n:.0%}   "
              "target >= 80%")
        print(f"                                   the estimate's order: {est_top1}/{n} = {est_top1 / n:.0%}")
    if taus:
        print(f"Kendall tau (pairs tied within {TIE:.0%} measured left out): mean {sum(taus) / len(taus):+.2f} "
              f"over {len(taus)} groups")
    verbose = "--verbose" in argv
    by_estimate("dev records of one model and GPU type at any GPU count (GPU-seconds per token)",
                [[(f"{layout_label(r['rec'].layout, ep=True)} on {r['rec'].cluster.gpus} gbs "
                   f"{r['rec'].training.global_batch_size}", *_per_gpu_token(r))
                  for r in g] for g in groups_any_size(rows)], verbose)
    by_estimate("H200 layer rows of one layer shape and sequence (GPU-seconds per token)", layer_groups(), verbose)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
