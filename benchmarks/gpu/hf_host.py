"""How long the host takes to issue one Hugging Face + PEFT training step, beside the step's wall time (issue
31's open question: the estimate's host term for these stacks, costmodel.kernels.host_layer_seconds, is priced
from a plain-PyTorch layer; the H200 rows' step time grows linearly with tokens, so the host hides behind the
GPU there, which a direct reading should confirm or refute). Run with the device tool:

    pip install 'transformers==5.17.0' 'peft==0.21.0'
    python3 benchmarks/gpu/hf_host.py OUT_DIR [--smoke]

For each configuration (the shared data's method, measured-h200-2026-12/method/realruns.py hf_run: a
Llama-architecture model from its config.json values, random weights, bf16 base, PEFT LoRA r 16 on the seven
projections, SDPA, gradient checkpointing with use_reentrant False, torch AdamW fused), three readings per step:
`wall` (synchronised step), `issue` (perf_counter from the step's start to the return of opt.zero_grad,
before the synchronise: the host's own time while the launch queue is not full), `cpu_profile` (the
profiler's summed self CPU time of the step) and the CUDA kernels it launched. A micro-batch of 1 at 512
tokens makes the GPU share small, so `wall` there is close to the host's time; 2048 and 4096 tokens are the
measured rows. Writes OUT_DIR/hf_host.jsonl (section "hf-host") and prints one line per row.
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch

SMOKE = "--smoke" in sys.argv
ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
OUT = ARGS[0] if ARGS else "."
DEV = "cuda" if torch.cuda.is_available() else "cpu"
LLAMA_8B = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=False, rope_theta=500000.0)
TINY = dict(hidden_size=128, intermediate_size=352, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=1000, tie_word_embeddings=False, rope_theta=10000.0)
ALL_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def sync() -> None:
    if DEV == "cuda":
        torch.cuda.synchronize()


def build(cfg: dict, seq: int, targets: list[str] | None, ckpt: bool):
    """(model, optimizer) as the method builds them: bf16 weights, PEFT LoRA r 16 on `targets` (None:
    full fine-tuning), gradient checkpointing (use_reentrant False) when `ckpt`, torch AdamW."""
    import transformers
    from peft import LoraConfig, get_peft_model
    config = transformers.LlamaConfig(max_position_embeddings=max(seq, 8192), attn_implementation="sdpa", **cfg)
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(DEV):
            model = transformers.LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(torch.float32)
    if targets:
        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=targets,
                                                 task_type="CAUSAL_LM"))
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if targets:
            model.enable_input_require_grads()
    model.config.use_cache = False
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5, fused=DEV == "cuda")
    return model, opt


def train_step(model, opt, ids):
    """One training step of `model` on the token ids `ids` (labels = inputs), as a callable."""
    def step():
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def readings(model, opt, ids, steps: int) -> dict:
    step = train_step(model, opt, ids)
    for _ in range(2):
        step()
    sync()
    walls, issues = [], []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        issues.append(time.perf_counter() - t)
        sync()
        walls.append(time.perf_counter() - t)
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEV == "cuda" else [])
    with profile(activities=acts) as prof:
        step()
        sync()
    events = prof.key_averages()
    cpu = sum(e.self_cpu_time_total for e in events) / 1e6
    kernels = sum(1 for e in prof.events() if e.device_type.name == "CUDA")
    return dict(wall=min(walls), issue=min(issues), cpu_profile=cpu, cuda_kernels=kernels)


def main() -> int:
    os.makedirs(OUT, exist_ok=True)
    cfg = TINY if SMOKE else LLAMA_8B
    runs = [(64, True, False)] if SMOKE else [(s, lora, ck) for s in (512, 2048, 4096) for lora in (True, False)
                                              for ck in (True, False)]
    with open(os.path.join(OUT, "hf_host.jsonl"), "a") as sink:
        for seq, lora, ckpt in runs:
            model, opt = build(cfg, seq, ALL_LINEAR if lora else None, ckpt)
            ids = torch.randint(0, cfg["vocab_size"], (1, seq), device=DEV)
            try:
                rec = readings(model, opt, ids, 2 if SMOKE else 5)
            except torch.OutOfMemoryError as exc:
                rec = {"error": str(exc)[:160]}
            rec = {"section": "hf-host", "model": "tiny" if SMOKE else "llama-3-8b", "mode": "lora" if lora else "bf16-full",
                   "seq": seq, "mbs": 1, "ckpt": ckpt, **rec}
            sink.write(json.dumps(rec) + "\n")
            print(json.dumps(rec), flush=True)
            del model, opt
            if DEV == "cuda":
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
