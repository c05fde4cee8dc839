"""Sanity table for capacity planning (issue 33): advisor.capacity's GPU-hours against the training compute
open models published, GPU-hours and tokens from their model cards and papers. Run on demand; prints, never
asserts.

    python benchmarks/capacity_sanity.py

These figures are for independent evaluation: nothing in advisor is fitted to them. Each record is run at the
published GPU type, count (where stated), sequence length, batch and precision, with the layout advisor
recommends there and, where the layout is published ("known"), with that layout too (advisor.estimate, then
the same batch, goodput and GPU-hour arithmetic as capacity: scaling.training_time). Known records are held
to 30%; for the others the table shows the range over 256 to 16,384 GPUs. A published figure counts every
GPU-hour of the run (restarts, stragglers, evaluation pauses, long-context and annealing phases where the
card includes them), so it is expected above an estimate of the main pre-training phase.
"""

from __future__ import annotations

import sys
from typing import NamedTuple

import advisor
from advisor.capacity_plan.scaling import Scaling, checkpoint_bytes, training_time


class Record(NamedTuple):
    name: str
    model: str
    gpu: str
    tokens: float
    gpu_hours: float
    source: str
    gpus: int | None = None          # the published count, where the layout is published too
    layout: str | None = None         # the published layout, for the reader
    training: dict | None = None
    fields: dict | None = None        # the published layout as advisor.Layout fields


LLAMA31_CARD = ("Llama 3.1 model card, 'Training Energy Use' (huggingface.co/meta-llama/Llama-3.1-405B, "
                "README.md): GPU-hours on H100-80GB; tokens: ~15T ('Training Data'), 15.6T for 405B "
                "(arXiv 2407.21783 §3.1)")
LLAMA2_PAPER = ("Touvron et al. 2023, Llama 2 (arXiv 2307.09288) Table 2 'CO2 emissions during pretraining': "
                "A100-80GB GPU-hours; Table 1: 2.0T tokens, 4k context, 4M-token batch")

RECORDS = [
    Record("Llama 3.1 405B", "llama-3.1-405b", "H100-SXM-80GB", 15.6e12, 30.84e6, LLAMA31_CARD, 16_384,
           "tp8 cp1 pp16 dp128 at 8k, 16M-token batch (arXiv 2407.21783 Table 4)",
           {"seq_len": 8192, "global_batch_size": 2048},
           {"tp": 8, "pp": 16, "dp": 128, "sp": True, "zero_stage": 1, "num_microbatches": 16}),
    Record("Llama 3.1 70B", "llama-3.1-70b", "H100-SXM-80GB", 15e12, 7.0e6, LLAMA31_CARD, training={"seq_len": 8192}),
    Record("Llama 3.1 8B", "llama-3.1-8b", "H100-SXM-80GB", 15e12, 1.46e6, LLAMA31_CARD, training={"seq_len": 8192}),
    Record("Llama 2 70B", "llama-2-70b", "A100-80GB", 2.0e12, 1_720_320, LLAMA2_PAPER, training={"seq_len": 4096}),
    Record("Llama 2 13B", "llama-2-13b", "A100-80GB", 2.0e12, 368_640, LLAMA2_PAPER, training={"seq_len": 4096}),
    Record("Llama 2 7B", "llama-2-7b", "A100-80GB", 2.0e12, 184_320, LLAMA2_PAPER, training={"seq_len": 4096}),
    Record("LLaMA 7B", "llama-7b", "A100-80GB", 1.0e12, 82_432,
           "Touvron et al. 2023, LLaMA (arXiv 2302.13971) Table 15 (GPU-hours) and Table 2 (1.0T tokens)",
           training={"seq_len": 2048}),
    Record("BLOOM 176B", "bloom-176b", "A100-80GB", 366e9, 1_082_990,
           "Luccioni et al. 2022 (arXiv 2211.02001) Table 1: 1,082,990 GPU-hours; BigScience 2022 (arXiv "
           "2211.05100) §3.5: 366B tokens; 384 A100-80GB (48 nodes)", 384,
           "tp4 pp12 dp8, ZeRO-1, seq 2048, batch 2048 (bigscience tr11-176B-ml.slurm)",
           {"seq_len": 2048, "global_batch_size": 2048},
           {"framework": "megatron+deepspeed", "tp": 4, "pp": 12, "dp": 8, "zero_stage": 1, "micro_batch_size": 2,
            "num_microbatches": 128, "recompute": "full"}),
    Record("DeepSeek-V3", "deepseek-v3", "H800", 14.8e12, 2_664_000,
           "DeepSeek-AI 2024 (arXiv 2412.19437) Table 1: 2,664K H800 GPU-hours of pre-training on 14.8T tokens; "
           "§3.1-3.2: 2,048 H800", 2_048, "pp16 ep64, ZeRO-1 dp, FP8 (§3.2.1, §3.3), batch ramped to 15,360 x 4k",
           {"seq_len": 4096, "global_batch_size": 15360, "precision": "fp8-blockwise"},
           {"tp": 1, "pp": 16, "ep": 64, "dp": 128, "zero_stage": 1, "num_microbatches": 120}),
]


def _run(record: Record):
    counts = [record.gpus] if record.gpus else "256..16384"
    return advisor.capacity(record.model, tokens=record.tokens, gpu=record.gpu, gpus=counts,
                            training=record.training or {})


def _published_layout(record: Record) -> str:
    """GPU-hours of the published layout, as advisor estimates its step, with capacity's arithmetic."""
    model, training = advisor.Model.preset(record.model), advisor.Training(**record.training)
    cluster = advisor.Cluster(gpu=record.gpu, gpus=record.gpus)
    est = advisor.estimate(cluster, model, advisor.Layout(**record.fields), training)
    seq = training.seq_len
    timing = training_time(est.step_time, record.gpus, record.tokens, training.global_batch_size * seq,
                           checkpoint_bytes(model, training), Scaling())
    return (f"published layout: {timing.gpu_hours:,.0f} GPU-hours ({timing.gpu_hours / record.gpu_hours:.2f}), "
            f"MFU {est.mfu:.1%}" + ("" if est.memory.fits else
                                    " (estimated not to fit with only the fields the source states: recompute and "
                                    "virtual stages are left at their defaults)"))


def main() -> int:
    print(f"advisor {advisor.__version__}: capacity GPU-hours against published training compute")
    print(f"{'record':<16} {'GPU':<14} {'GPUs':>7} {'published':>11} {'advisor':>19} {'ratio':>10}  "
          "layout, MFU, goodput")
    judged, within = 0, 0
    for record in RECORDS:
        plan = _run(record)
        if not plan.options:
            print(f"{record.name:<16} {record.gpu:<14} {'':>7} {record.gpu_hours:>11,.0f}  no option: "
                  f"{plan.rejected[0].why if plan.rejected else plan.why}")
            continue
        if record.gpus:
            option = plan.options[0]
            ratio = option.gpu_hours / record.gpu_hours
            judged += 1
            within += abs(ratio - 1) <= 0.30
            print(f"{record.name:<16} {record.gpu:<14} {record.gpus:>7,} {record.gpu_hours:>11,.0f} "
                  f"{option.gpu_hours:>19,.0f} {ratio:>10.2f}  {option.layout}, MFU {option.mfu:.1%}, "
                  f"goodput {option.goodput:.1%}")
            print(f"{'':>16}   known: {record.layout}; {_published_layout(record)}")
        else:
            hours = sorted(o.gpu_hours for o in plan.options)
            low, high = hours[0], hours[-1]
            print(f"{record.name:<16} {record.gpu:<14} {'?':>7} {record.gpu_hours:>11,.0f} "
                  f"{low:>9,.0f}-{high:<9,.0f} {low / record.gpu_hours:>4.2f}-{high / record.gpu_hours:<5.2f} "
                  f" count and layout not published (256 to 16,384 GPUs tried)")
    print(f"within 30% where the count and layout are published: {within} of {judged}")
    print("sources:")
    for source in dict.fromkeys(r.source for r in RECORDS):
        print(f"  - {source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
