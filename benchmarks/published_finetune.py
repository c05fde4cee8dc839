"""Fine-tuning records of the dev file (issue 18, "Done when"): fit, throughput, planner agreement.

    python benchmarks/published_finetune.py

For every record benchmarks/published.py loads with Training.task "sft" or "lora" (NeMo 24.07 SFT and
LoRA rows, Alpaca, alignment-handbook), prints whether `estimate` judges the published layout to fit,
the measured / estimated step time where the source reports tokens/s (calibrate_throughput's
`measured_step`; 1.0 = exact, < 1 = the estimate is slower), and the (TP, PP) that `recommend` picks
against the published one. Targets: every layout fits, throughput within 20 %, TP/PP agree >= 70 %.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import advisor  # noqa: E402
from advisor.costmodel import Assumptions, estimate  # noqa: E402
from benchmarks.calibrate_throughput import measured_step, run_assumptions  # noqa: E402
from benchmarks.published import load_records  # noqa: E402


def main() -> int:
    rows = []
    for rec in load_records():
        if rec.training.task == "pretrain":
            continue
        A = run_assumptions(rec, Assumptions())
        e = estimate(rec.cluster, rec.model, rec.layout, rec.training, A)
        ms = measured_step(rec)
        ratio = (ms[0] / e.step_time) if ms and ms[2] else None
        r = advisor.recommend(rec.cluster, rec.model, rec.training, assumptions=A)
        got, pub = (r.layout.tp, r.layout.pp), (rec.layout.tp, rec.layout.pp)
        rows.append((rec, e, ratio, pub, got))
        print(f"{rec.id:46s} {rec.training.task:5s} fits={e.memory.fits!s:5s} {e.memory.total / 2**30:6.1f} GiB  "
              f"meas/est {'-' if ratio is None else f'{ratio:.3f}':6s} published t{pub[0]} p{pub[1]}  "
              f"recommended t{got[0]} p{got[1]}")
    n = len(rows)
    timed = [r for r in rows if r[2] is not None]
    print(f"\nfit {sum(r[1].memory.fits for r in rows)}/{n}; throughput within 20% "
          f"{sum(abs(r[2] - 1) <= 0.2 for r in timed)}/{len(timed)}; TP agrees {sum(r[3][0] == r[4][0] for r in rows)}/{n}; "
          f"(TP, PP) agrees {sum(r[3] == r[4] for r in rows)}/{n}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
