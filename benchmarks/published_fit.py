"""Do published layouts fit in memory under the options they used? (DESIGN.md §8, use 2)

    python benchmarks/published_fit.py [path/to/published-layouts.jsonl] [--verbose]

For every record of the published-layouts file (default: ../shared/data/published-layouts-dev.jsonl
next to the repository) this builds the advisor objects with benchmarks/published.py (null fields ->
the framework's defaults for that kind of run, each listed), runs `advisor.estimate`, and
prints per-GPU memory against capacity. Records that do not fit are listed with their breakdown, the
largest terms, the defaults that were assumed for them, by how much they exceed the GPU, what their
sources say about it (`EXPLAIN`, with citations) and the estimate under the changes those sources
document ("what if", never counted as a fit); records that cannot be built are listed with the reason.
Where the source reports throughput, the estimated MFU / TFLOP/s is shown next to it.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advisor import Cluster  # noqa: E402
from advisor.costmodel import Assumptions, estimate
from advisor.errors import AdvisorError  # noqa: E402
from benchmarks.published import load_records  # noqa: E402

GiB = float(1 << 30)


@dataclass(frozen=True)
class WhatIf:
    """One change to a record's options that its source (or a comparable run of the same source)
    documents; shown next to a record that does not fit, never used for the FIT count."""
    label: str
    layout: dict[str, Any] = field(default_factory=dict)
    assumptions: dict[str, Any] = field(default_factory=dict)
    gpu: str | None = None
    seq_len: int | None = None


# Why the records that do not fit do not, from their sources (NVIDIA/NeMo,
# NVIDIA/NeMo-Framework-Launcher, yanring/Megatron-MoE-ModelZoo, NVIDIA/Megatron-LM). Explanations
# only: the FIT count above comes from each record's own options and the framework defaults.
_FULL = WhatIf("full recompute", layout=dict(recompute="full"))
_NEMOTRON_340B = (
    "NeMo 24.07 perf config (NeMo-Framework-Launcher conf/training/nemotron/nemotron_340b.yaml, the TP8 PP8 "
    "VP12 version): mcore_distributed_optim (12 B/param over dp 2; optim.dtype bf16 is ignored by "
    "nemo/core/classes/modelPT.py setup_megatron_optimization), grad_sync_dtype bf16, no activation "
    "checkpointing, SP, ub_tp_comm_overlap (+0.3 GiB of userbuffers, not counted). The excess (0.3 GiB, "
    "0.4 %) is below the model's resolution: assumed, not measured, are the FP8 weight cache (1 B per "
    "linear parameter, 4.8 GiB; TE may also cache the transpose, +4.8), fragmentation 5 % (1.0 GiB), CUDA "
    "context 1 GiB and NCCL 0.4 GiB. Not stated and likely: fp8_params (FP8 primary weights, no bf16 "
    "copy: -2 B per linear parameter).",
    [WhatIf("without the assumed FP8 weight cache", assumptions=dict(fp8_weight_copy_bytes=0.0)),
     WhatIf("FP8 cache with transpose", assumptions=dict(fp8_weight_copy_bytes=2.0))])
EXPLAIN: dict[str, tuple[str, list[WhatIf]]] = {
    "nemo2-recipe-mixtral-8x22b-64k": (
        "Unmeasured recipe. NVIDIA/NeMo nemo/collections/llm/recipes/mixtral_8x22b_64k.py reuses the 4K "
        "recipe's trainer (mixtral_8x22b.py: TP2 PP4 VP14 CP2 EP8, MBS 1) at seq_length 65536 and sets no "
        "recompute (MixtralConfig8x22B and the recipe leave recompute_granularity None); NeMo's long-context "
        "page (docs.nvidia.com/nemo-framework/user-guide/latest/longcontext) lists Mixtral 8x7B, not 8x22B, "
        "among the tested recipes. 32K tokens per rank x 59 one-layer chunks in flight need ~16x the "
        "activations of the 4K layout.",
        [WhatIf("the same layout at 4K", seq_len=4096), _FULL]),
    "nemo2-recipe-nemotron4-15b-16k": (
        "Unmeasured recipe (GPU not stated). NVIDIA/NeMo recipes/nemotron4_15b_16k.py: TP2 PP2 CP2, dp 1, "
        "MBS 2, seq 16384, no recompute (Nemotron4Config15B sets none), distributed optimizer over dp x cp = 2. "
        "Model states alone take 43.7 GiB, two in-flight micro-batches of 2 x 8K tokens 43 GiB. With "
        "FlashAttention Megatron's default selective recompute (core_attn) saves almost nothing; it fits a "
        "141 GiB H200, or with the dense MLP recomputed or full recompute.",
        [WhatIf("H200", gpu="H200"),
         WhatIf("selective core_attn + mlp", layout=dict(recompute="selective"),
                assumptions=dict(recompute_modules=("core_attn", "mlp"))), _FULL]),
    "nemo2407-h100-fp8-pretrain-nemotron-340b-128g": _NEMOTRON_340B,
    "nemo2407-h100-nemotron-340b": _NEMOTRON_340B,
    "moe-zoo-default-qwen3-235b-a22b-256g": (
        "GPU not stated. The zoo's default yaml (model_configs/benchmarking/Qwen3-235B-A22B.yaml) sets no "
        "recompute; the zoo's own measured H100 runs of this layout (TP2 PP8 VPP4 EP32 on 256 H100, "
        "best_practice/Qwen3/readme.md 'recompute: norm, act'; best_practice/qwen3/run_h100_235b.sh "
        "--recompute-modules moe_act layernorm) add it. Over by 0.3 GiB (0.4 %), below the model's "
        "resolution. Also not modelled: Megatron-Core >= 0.13 multiplies the router probabilities inside the "
        "expert activation (transformer_config.py moe_apply_probs_on_input; MoE README v0.13 'memory "
        "efficient token permutation'), so the expert FC2 output (2h per routed copy, counted here) need not "
        "be stored.",
        [WhatIf("zoo H100 recompute (moe_act, layernorm)", layout=dict(recompute="selective"),
                assumptions=dict(recompute_modules=("moe_act", "layernorm")))]),
    "moe-zoo-default-deepseek-v3-1024g": (
        "GPU not stated (the zoo targets H100, B200, GB200; 8 tasks per node = not GB200). The default yaml "
        "(model_configs/benchmarking/DeepSeek-V3.yaml) sets no recompute at TP1 PP16 EP64, so stage 1 "
        "holds 4 MoE layers x 15 micro-batches at full width (130 GiB). runtime.conf's PP_FIRST=4 PP_LAST=1 "
        "split (--decoder-first/last-pipeline-num-layers) is not reproduced (the cost model runs NeMo's "
        "3 | 4 x 14 | 2): its stage 0 would hold 4 layers (3 dense) x 16 in flight. The zoo's H100 best "
        "practice (best-practice/DeepSeekV3/run.sh) is a different run "
        "(TP2 PP8 VPP4, FP8, --recompute-modules mla_up_proj mlp); the zoo README's launch example (TP2 PP8 "
        "EP64) adds --recompute-modules mla_up_proj layernorm. Fits a 180 GiB B200.",
        [WhatIf("B200", gpu="B200"),
         WhatIf("README recompute (mla_up_proj, layernorm)", layout=dict(recompute="selective"),
                assumptions=dict(recompute_modules=("mla_up_proj", "layernorm"))),
         WhatIf("recompute mla_up_proj, layernorm, moe", layout=dict(recompute="selective"),
                assumptions=dict(recompute_modules=("mla_up_proj", "layernorm", "moe"))), _FULL]),
}


def _what_if(rec, w: WhatIf) -> str:
    """`w` applied to `rec`: total / capacity, or the error the estimate raises."""
    cluster = rec.cluster
    if w.gpu:
        cluster = Cluster(gpu=w.gpu, gpus=cluster.gpus, gpus_per_node=cluster.gpus_per_node)
    training = rec.training if w.seq_len is None else rec.training.model_copy(update={"seq_len": w.seq_len})
    try:
        m = estimate(cluster, rec.model, rec.layout.model_copy(update=w.layout), training,
                     Assumptions(**{**rec.assumptions, **w.assumptions})).memory
    except AdvisorError as exc:
        return f"{w.label}: {str(exc).splitlines()[0]}"
    return f"{w.label}: {m.total / GiB:.1f}/{m.capacity / GiB:.0f} GiB{'' if m.fits else ' (no)'}"


def _wrap(text: str, indent: str, width: int = 110) -> str:
    words, lines, line = text.split(), [], indent
    for w in words:
        if len(line) + len(w) + 1 > width and line.strip():
            lines.append(line)
            line = indent
        line += ("" if line == indent else " ") + w
    lines.append(line)
    return "\n".join(lines)


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
            over = M.total - M.capacity
            print(f"      over by {over / GiB:.1f} GiB ({100 * over / M.capacity:.1f} % of capacity)"
                  f"{'; the source says it is not a measured benchmark' if not rec.measured else ''}")
            why, whatifs = EXPLAIN.get(rec.id, ("", [_FULL]))
            if why:
                print(_wrap("why: " + why, "      "))
            print(_wrap("what if: " + "; ".join(_what_if(rec, w) for w in whatifs), "      "))
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
