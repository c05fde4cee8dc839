"""Real fine-tuning steps against the advisor (issue 31, "Done when"): peak memory and step time.

    python benchmarks/finetune_real.py [REALRUNS.jsonl ...]

For every `hf` row of the measured files (default: ../shared/data/measured-h200-2026-12/realruns.jsonl next to
the repository, or $ADVISOR_REALRUNS, and this directory's realruns_h200_hf.jsonl), asks `estimate` the same
question the method ran
(measured-h200-2026-12/method/realruns.py `hf_run`): the model from the same config.json values, one H200,
Training(framework="hf-trl") with the row's sequence, micro-batch (= global batch: one optimizer step
per micro-batch), recompute (gradient checkpointing = "full"), task, LoRA rank / targets / dropout and
master weights, AdamW; the layout is plain PyTorch on one GPU (framework "torchtitan", ZeRO 0, dp 1: no
DeepSpeed or FSDP). The method's loop holds the model output through the backward and runs autocast only
for `amp-full`, which the Assumptions state (hf_logits_held, hf_autocast).

Prints measured vs estimated peak GiB (the measurement is torch.cuda.max_memory_allocated, so the
estimate compared is its allocated part: the total less the reserve, CUDA context and allocator
fragmentation, which that counter never sees) and measured vs estimated step time. Targets: peak within
7 % and never under by more than 3 %; step time within 20 %.

realruns_h200_hf.jsonl: seven more rows in the shared file's format (without `trainable_dtypes`), measured by
issue 31's session on one H200 (torch 2.11.0+cu130, transformers 5.17.0, peft 0.21.0) with the method's
`hf_run` code compacted into one script: LoRA on Llama-3-8B at 4096 tokens (all seven projections, q_proj and
v_proj only, lora_dropout 0.05, rank 64), lora_dropout 0.05 at 2048 tokens without checkpointing, full
fine-tuning of Llama-3.2-3B under autocast with checkpointing and of Llama-3-8B in pure bf16 at micro-batch 2.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import advisor  # noqa: E402
from advisor.costmodel import Assumptions, estimate  # noqa: E402
from advisor.inputs.layout import Layout  # noqa: E402

GIB = 2**30
DEFAULT = REPO.parent / "shared" / "data" / "measured-h200-2026-12" / "realruns.jsonl"
EXTRA = Path(__file__).resolve().parent / "realruns_h200_hf.jsonl"
# the lead's session on a lent H200 (benchmarks/measured/h200-2026-12-04/README.md): method/realruns2.py hf2,
# Qwen2.5-7B- and Mistral-7B-shaped Llama models, LoRA and bf16 full fine-tuning
HF2 = Path(__file__).resolve().parent / "measured" / "h200-2026-12-04" / "realruns-hf2.jsonl"

# The configs the method builds its models from (method/realruns.py LLAMA: the models' config.json values).
CONFIGS = {
    "llama-3-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                       num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=False),
    "llama-3.2-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                         num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=True),
    "llama-3.2-3b": dict(hidden_size=3072, intermediate_size=8192, num_hidden_layers=28, num_attention_heads=24,
                         num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=True),
    # method/realruns2.py hf2: Llama-architecture models of these shapes (its LLAMA / QWEN tables)
    "mistral-7b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                       num_key_value_heads=8, vocab_size=32000, tie_word_embeddings=False),
    "qwen2.5-7b": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
                       num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False),
}
# What each mode of the method trains: task, master weights, autocast (method/realruns.py hf_run: "lora" and
# "bf16-full" build bf16 weights; "amp-full" fp32 weights under bf16 autocast; PEFT keeps its adapters in fp32).
MODES = {
    "lora": ("lora", "fp32", False),
    "amp-full": ("sft", "fp32", True),
    "bf16-full": ("sft", "none", False),
}


def data_paths(argv: list[str]) -> list[Path]:
    if len(argv) > 1:
        return [Path(a) for a in argv[1:]]
    return [Path(os.environ.get("ADVISOR_REALRUNS", DEFAULT)), EXTRA, HF2]


def hf_rows(paths: list[Path]) -> list[dict]:
    """The `hf` rows of the files that exist."""
    return [r for p in paths if p.exists() for r in map(json.loads, p.read_text().splitlines())
            if r.get("section") == "hf"]


def question(row: dict):
    """(cluster, model, layout, training, assumptions) of one measured row."""
    cfg = dict(model_type="llama", hidden_act="silu", rope_theta=500000.0, max_position_embeddings=max(row["seq"], 8192),
               **CONFIGS[row["model"]])
    model = advisor.Model.from_hf_config(cfg, name=row["model"])
    task, master, autocast = MODES[row["mode"]]
    lora = {}
    if task == "lora":
        lora = dict(lora_rank=row["lora_r"], lora_alpha=2 * row["lora_r"], lora_targets=tuple(row["lora_targets"]),
                    lora_dropout=row["lora_dropout"])
    training = advisor.Training(seq_len=row["seq"], global_batch_size=row["mbs"], micro_batch_size=row["mbs"],
                                precision="bf16", optimizer="adamw", master_weights=master, task=task,
                                framework="hf-trl", flash_attention=True, **lora)
    layout = Layout(framework="torchtitan", tp=1, pp=1, dp=1, zero_stage=0, micro_batch_size=row["mbs"],
                    recompute="full" if row["ckpt"] else "none")
    assumptions = Assumptions(hf_autocast=autocast, hf_logits_held=True)
    return advisor.Cluster(gpu="H200", gpus=1), model, layout, training, assumptions


def main(argv: list[str]) -> int:
    paths = data_paths(argv)
    rows = hf_rows(paths)
    if not rows:
        print(f"no measurements in {', '.join(map(str, paths))} (pass the paths or set ADVISOR_REALRUNS)")
        return 1
    print(f"{'row':44s} {'peak GiB meas':>13s} {'est':>6s} {'ratio':>6s} {'(total)':>7s}   "
          f"{'step s meas':>11s} {'est':>6s} {'ratio':>6s}  phase")
    peaks, steps = [], []
    for row in rows:
        name = (f"{row['model']} {row['mode']} s{row['seq']} b{row['mbs']} {'ckpt' if row['ckpt'] else 'no-ckpt'}"
                + (f" r{row['lora_r']} {len(row['lora_targets'])}t d{row['lora_dropout']}" if row["lora_r"] else ""))
        if "peak" not in row:
            print(f"{name:44s} not measured ({row.get('error') or 'out of memory'})")
            continue
        e = estimate(*question(row))
        allocated = e.memory.total - e.memory.reserve
        peak_ratio = allocated / row["peak"]
        step_ratio = e.step_time / row["step_s"]
        peaks.append(peak_ratio)
        steps.append(step_ratio)
        print(f"{name:44s} {row['peak'] / GIB:13.1f} {allocated / GIB:6.1f} {peak_ratio:6.3f} {e.memory.total / GIB:7.1f}   "
              f"{row['step_s']:11.3f} {e.step_time:6.3f} {step_ratio:6.3f}  {e.memory.detail.get('hf_peak_phase', '-')}")
    if not peaks:
        return 0
    within = sum(0.97 <= r <= 1.07 for r in peaks)
    print(f"\npeak (estimated / measured): within 7% and not under by more than 3% on {within}/{len(peaks)}; "
          f"range {min(peaks):.3f} to {max(peaks):.3f}")
    print(f"step time (estimated / measured): within 20% on {sum(abs(r - 1) <= 0.2 for r in steps)}/{len(steps)}; "
          f"range {min(steps):.3f} to {max(steps):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
