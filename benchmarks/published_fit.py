"""Do published layouts fit in memory under the options they used? (DESIGN.md §8, use 2)

    python benchmarks/published_fit.py [path/to/published-layouts.jsonl] [--verbose]

For every record of the published-layouts file (default: ../shared/data/published-layouts-dev.jsonl
next to the repository) this builds the advisor objects with benchmarks/published.py (null fields ->
the framework's defaults for that kind of run, each listed), runs `advisor.estimate.estimate`, and
prints per-GPU memory against capacity. Records that do not fit are listed with their breakdown, the
largest terms and the defaults that were assumed for them; records that cannot be built are listed
with the reason. Where the source reports throughput, the estimated MFU / TFLOP/s is shown next to it.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advisor.errors import AdvisorError  # noqa: E402
from advisor.estimate import Assumptions, estimate  # noqa: E402
from benchmarks.published import load_records  # noqa: E402

GiB = float(1 << 30)


def _g(x: float) -> str:
    return f"{x / GiB:6.1f}"


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    verbose = "--verbose" in argv
    path = args[0] if args else None
    fits, no_fit, errors, skipped = [], [], [], []
    for rec in load_records(path, include_skipped=True):
        if not rec.ok:
            skipped.append(rec)
            continue
        try:
            est = estimate(rec.cluster, rec.model, rec.layout, rec.training, Assumptions(**rec.assumptions))
        except AdvisorError as exc:
            errors.append((rec, str(exc).replace("\n", " | ")))
            continue
        (fits if est.memory.fits else no_fit).append((rec, est))

    print(f"{'id':46s} {'layout':34s} {'GiB':>6s}/{'cap':>4s}  {'w':>5s} {'g':>5s} {'opt':>5s} {'act':>5s} "
          f"{'buf':>5s} {'rsv':>5s}  {'est MFU/HFU':>11s} {'reported':>8s}")
    for rec, est in fits + no_fit:
        M, L = est.memory, rec.layout
        fw = {"megatron": "mg", "deepspeed": "ds", "megatron+deepspeed": "mg+ds", "torchtitan": "fsdp"}[L.framework]
        lay = (f"{fw} tp{L.tp} pp{L.pp} dp{est.dp} cp{L.cp} ep{L.ep} v{L.vpp} z{L.zero_stage} "
               f"{'sp ' if L.sp else ''}{L.recompute[:3]}")
        rep = rec.raw.get("reported") or {}
        mfu_rep = rep.get("mfu")
        if mfu_rep is None and rep.get("tflops_per_gpu"):
            mfu_rep = rep["tflops_per_gpu"] * 1e12 / rec.cluster.gpu.peak_flops
        mfu = f"{est.mfu:5.2f}/{est.hfu:4.2f} {mfu_rep:8.2f}" if mfu_rep else f"{est.mfu:5.2f}/{est.hfu:4.2f} {'-':>8s}"
        flag = "" if M.fits else "  <-- does not fit"
        print(f"{rec.id[:46]:46s} {lay[:34]:34s} {M.total / GiB:6.1f}/{M.capacity / GiB:4.0f}  "
              f"{M.weights / GiB:5.1f} {M.gradients / GiB:5.1f} {M.optimizer / GiB:5.1f} {M.activations / GiB:5.1f} "
              f"{M.buffers / GiB:5.1f} {M.reserve / GiB:5.1f}  {mfu}{flag}")
        if verbose and rec.assumed:
            print(f"{'':46s} assumed: {'; '.join(rec.assumed)}")

    n_built = len(fits) + len(no_fit)
    print()
    print(f"records: {n_built + len(errors) + len(skipped)}; estimated: {n_built}; "
          f"FIT: {len(fits)}/{n_built}; do not fit: {len(no_fit)}; estimate errors: {len(errors)}; "
          f"skipped: {len(skipped)}")
    if no_fit:
        print("\nDo not fit (largest terms; defaults assumed for the record):")
        for rec, est in no_fit:
            M = est.memory
            terms = {"weights": M.weights, "gradients": M.gradients, "optimizer": M.optimizer,
                     "activations": M.activations, "buffers": M.buffers, "reserve": M.reserve}
            top = sorted(terms.items(), key=lambda kv: -kv[1])[:2]
            det = M.detail
            act = (f"act: layers {_g(det['act_layers']).strip()} x{det['chunks_in_flight']} chunks, logits "
                   f"{_g(det['act_logits']).strip()}, working {_g(det['act_recompute_working']).strip()}")
            print(f"  {rec.id}: {M.total / GiB:.1f} GiB > {M.capacity / GiB:.0f} GiB (stage {M.stage}); "
                  f"largest {top[0][0]} {top[0][1] / GiB:.1f}, {top[1][0]} {top[1][1] / GiB:.1f}; {act}")
            if rec.assumed:
                print(f"      assumed: {'; '.join(rec.assumed)}")
    if errors:
        print("\nEstimate refused the input:")
        for rec, msg in errors:
            print(f"  {rec.id}: {msg}")
    if skipped:
        print("\nSkipped (cannot be built):")
        reasons = Counter()
        for rec in skipped:
            print(f"  {rec.id}: {rec.skip_reason}")
            reasons[rec.skip_reason.split(" (")[0].split(":")[0]] += 1
        print("  by reason: " + "; ".join(f"{n} x {why}" for why, n in reasons.most_common()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
