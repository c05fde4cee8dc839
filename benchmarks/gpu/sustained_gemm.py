"""Sustained vs burst GEMM throughput on one GPU: does a tensor-core-bound step keep the clock a
short microbenchmark sees? (The cost-model issue's FP8 question; run with the device tool.)

    python3 benchmarks/gpu/sustained_gemm.py OUT_DIR [SECONDS]

For bf16 (torch.mm) and fp8 (torch._scaled_mm, per-tensor scales, fast accumulation off, as the gemm
rows of the released H200 data; and on), one 8192 x 8192 x 8192 GEMM back to back for SECONDS:
throughput of each ~0.25 s chunk (CUDA events) with the SM clock, power and temperature nvidia-smi
reads after it. Writes OUT_DIR/sustained.jsonl, one row per chunk, and prints a summary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import torch


def smi() -> dict:
    try:
        q = "clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active"
        out = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=5).stdout.strip().split(",")
        return {"sm_mhz": float(out[0]), "power_w": float(out[1]), "temp_c": float(out[2]), "throttle": out[3].strip()}
    except Exception as exc:  # noqa: BLE001 - a reading, not the measurement
        return {"smi_error": repr(exc)[:100]}


def run(out_dir: str, seconds: float) -> None:
    os.makedirs(out_dir, exist_ok=True)
    sink = open(os.path.join(out_dir, "sustained.jsonl"), "a")
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    a8, w8 = a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
    one = torch.tensor(1.0, device="cuda")
    flops = 2.0 * n ** 3
    cases = {
        "bf16": lambda: torch.mm(a, w.t()),
        "fp8": lambda: torch._scaled_mm(a8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
        "fp8-fast-accum": lambda: torch._scaled_mm(a8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                                   use_fast_accum=True),
    }
    for name, fn in cases.items():
        time.sleep(5.0)                       # let the clock recover between cases
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        chunk = 20 if "fp8" in name else 10
        t0 = time.time()
        i = 0
        while time.time() - t0 < (seconds if name != "fp8-fast-accum" else seconds / 3):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(chunk):
                fn()
            e.record()
            e.synchronize()
            dt = s.elapsed_time(e) / 1e3 / chunk
            row = {"case": name, "chunk": i, "t_since_start": time.time() - t0, "t_per_gemm": dt,
                   "tflops": flops / dt / 1e12, **smi()}
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            i += 1
        print(name, "first %.0f TFLOP/s, last %.0f TFLOP/s" % (
            flops / json.loads(open(os.path.join(out_dir, "sustained.jsonl")).readlines()[-i])["t_per_gemm"] / 1e12,
            row["tflops"]), row.get("sm_mhz"), "MHz", row.get("power_w"), "W", flush=True)


if __name__ == "__main__":
    run(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 25.0)
