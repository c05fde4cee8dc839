"""The estimate's measured error, recomputed from the data (issue 32): the figures behind
advisor/inputs/uncertainty.py, printed next to the shipped constants.

    python benchmarks/uncertainty.py

- Step time: |log(estimated / measured)| over the unique configurations of both dev files (the rows of
  benchmarks/calibrate_2025.py): its median, overall and by dense / MoE; between two layouts of one
  model on one GPU type (the median |log| of the ratio of their two ratios); and over the H200 layer
  rows (benchmarks/measured_h200.py).
- Memory: the largest |estimated / measured - 1| over the H200 layer rows' stored activations, Korthikanti
  et al.'s Fig. 1 terms and the Hugging Face + PEFT peaks (benchmarks/finetune_real.py).
- The memory experts use: percentiles of the published layouts' estimated memory share (both dev files,
  every layout the estimate can size, with the settings its source states).
Measurement only: nothing is fitted here.
"""

from __future__ import annotations

import math
import statistics
import sys
from collections import defaultdict
from itertools import combinations
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from advisor.costmodel import Assumptions, estimate  # noqa: E402
from advisor.errors import AdvisorError  # noqa: E402
from advisor.inputs import presets  # noqa: E402
from advisor.inputs.profile import shipped_profile  # noqa: E402
from advisor.inputs.specs import GPU  # noqa: E402
from advisor.inputs.uncertainty import EXPERT_MEMORY_SHARE, MEMORY_ERROR, STEP_TIME_ERROR  # noqa: E402
from benchmarks import finetune_real, measured_h200  # noqa: E402
from benchmarks.calibrate_2025 import PERF_2025, rows_2025, rows_layouts, unique  # noqa: E402
from benchmarks.published import default_path, load_records  # noqa: E402
from korthikanti_cases import case_objects, load_cases  # noqa: E402

KORTHIKANTI = Path(__file__).resolve().parents[1] / "tests" / "data" / "korthikanti2022-measured.json"
EXPERT_PERCENTILE = 85


def time_rows() -> list[dict]:
    A = Assumptions()
    return unique(rows_2025(PERF_2025, A)[0]) + unique([r for r in rows_layouts(default_path(), A)[0] if r["use"]])


def _median_log(ratios: list[float]) -> float:
    return statistics.median(abs(math.log(r)) for r in ratios)


def pair_errors(rows: list[dict]) -> list[float]:
    """|log| of the ratio of two layouts' est/measured ratios, same model and GPU type, dense."""
    by = defaultdict(list)
    for r in rows:
        rec = r["rec"]
        if not rec.model.is_moe:
            by[rec.model.layers, rec.model.hidden, rec.cluster.gpu.name].append(r)
    return [abs(math.log(a["ratio"] / b["ratio"])) for g in by.values() for a, b in combinations(g, 2)
            if a["rec"].layout.id != b["rec"].layout.id]


def h200_layers() -> tuple[list[float], list[float]]:
    """(time ratios, stored-activation ratios) of the H200 layer rows."""
    rows = measured_h200.load(measured_h200.DEFAULT, "microbench.jsonl")
    gpu, prof = GPU(**presets.gpu("H200")), shipped_profile()
    times, stored = [], []
    for r in rows:
        if r["section"] != "layer" or "error" in r:
            continue
        est, terms = measured_h200.layer_estimate(r, gpu, prof, Assumptions().host_overlap_exponent)
        times.append(est / r["t_per_layer"])
        if r.get("stored_bytes_per_layer") and not r["ckpt"]:
            stored.append(terms["stored"] / r["stored_bytes_per_layer"])
    return times, stored


def korthikanti_memory() -> list[float]:
    """est/measured of Fig. 1's parameters + optimizer and activations, every case and mode."""
    out = []
    A = Assumptions()
    for case in load_cases(KORTHIKANTI)["cases"]:
        cluster, model, training, layouts = case_objects(case)
        for mode, meas in case["fig1_gib"].items():
            m = estimate(cluster, model, layouts[mode], training, A).memory
            out.append((m.weights + m.gradients + m.optimizer) / 2**30 / meas["params_and_optimizer"])
            out.append(m.activations / 2**30 / meas["activations"])
    return out


def hf_peaks() -> list[float]:
    """est/measured peak of the Hugging Face + PEFT rows (allocated, as finetune_real compares)."""
    out = []
    for row in finetune_real.hf_rows(finetune_real.data_paths([])):
        if "peak" in row:
            m = estimate(*finetune_real.question(row)).memory
            out.append((m.total - m.reserve) / row["peak"])
    return out


def expert_memory_shares() -> list[float]:
    shares = []
    for path in (default_path(), PERF_2025):
        for rec in load_records(path):
            try:
                m = estimate(rec.cluster, rec.model, rec.layout, rec.training, Assumptions(**rec.assumptions)).memory
            except AdvisorError:
                continue
            shares.append(m.total / m.capacity)
    return shares


def measure() -> dict:
    """Every figure, as advisor/inputs/uncertainty.py states it."""
    rows = time_rows()
    times, stored = h200_layers()
    memory = {"h200 stored activations": stored, "korthikanti fig. 1": korthikanti_memory(), "hf + peft peaks": hf_peaks()}
    shares = expert_memory_shares()
    return {
        "step_time": (round(_median_log([r["ratio"] for r in rows]), 3), len(rows)),
        "step_time_dense": (round(_median_log([r["ratio"] for r in rows if not r["rec"].model.is_moe]), 3),
                            sum(not r["rec"].model.is_moe for r in rows)),
        "step_time_moe": (round(_median_log([r["ratio"] for r in rows if r["rec"].model.is_moe]), 3),
                          sum(r["rec"].model.is_moe for r in rows)),
        "step_time_pairs": (round(statistics.median(pair_errors(rows)), 3), len(pair_errors(rows))),
        "step_time_h200_layers": (round(_median_log(times), 3), len(times)),
        "memory": (round(max(abs(x - 1) for xs in memory.values() for x in xs), 3), sum(map(len, memory.values()))),
        "memory_by_set": {k: (round(max(abs(x - 1) for x in xs), 3), len(xs)) for k, xs in memory.items()},
        "expert_memory_share": (round(statistics.quantiles(shares, n=100, method="inclusive")[EXPERT_PERCENTILE - 1], 2),
                                len(shares)),
        "expert_memory_percentiles": {p: round(statistics.quantiles(shares, n=100, method="inclusive")[p - 1], 3)
                                      for p in (50, 75, 80, 85, 90, 95)},
    }


def main(argv: list[str]) -> int:
    got = measure()
    print("step time, median |log(estimated / measured)|        measured (n)     shipped")
    print(f"  dev files, unique runs                               {got['step_time'][0]:.3f} ({got['step_time'][1]})"
          f"      {STEP_TIME_ERROR.value:.3f} (STEP_TIME_ERROR, n {STEP_TIME_ERROR.n})")
    for key, name in (("step_time_dense", "dense runs"), ("step_time_moe", "MoE runs"),
                      ("step_time_pairs", "two layouts of one model and GPU type (dense pairs)"),
                      ("step_time_h200_layers", "H200 layer rows")):
        print(f"  {name:<52} {got[key][0]:.3f} ({got[key][1]})")
    print("memory, largest |estimated / measured - 1|")
    print(f"  every measured figure                                {got['memory'][0]:.3f} ({got['memory'][1]})"
          f"      {MEMORY_ERROR.value:.3f} (MEMORY_ERROR, n {MEMORY_ERROR.n})")
    for name, (v, n) in got["memory_by_set"].items():
        print(f"  {name:<52} {v:.3f} ({n})")
    print("published expert layouts' estimated memory share, percentiles")
    print("  " + ", ".join(f"{p}th {v:.3f}" for p, v in got["expert_memory_percentiles"].items())
          + f" (n {got['expert_memory_share'][1]}); shipped: {EXPERT_MEMORY_SHARE.value:.3f} "
            f"(EXPERT_MEMORY_SHARE, the {EXPERT_PERCENTILE}th, n {EXPERT_MEMORY_SHARE.n})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
