"""The host's work to issue a Hugging Face + PEFT decoder layer, relative to the plain-PyTorch layer whose H200
host time the profile holds (costmodel.kernels.host_layer_seconds prices the HF stack as that layer plus
KERNELS_PEFT_LORA kernels per adapter at the profile's cost per kernel). Measured on this machine's CPU,
where a tiny layer's ops stand for the kernels the host would launch:

    pip install 'torch==2.13.0' 'transformers==5.17.0' 'peft==0.21.0'
    python benchmarks/hf_host_cpu.py

For stacks of 4 and 12 layers at the profile's host shape (hidden 128, 4 heads, FFN 352, 64 tokens, bf16,
one CPU thread): advisor measure's plain layer (`advisor.measure.bench._Layer`, the host row's layer), the
transformers Llama layer fully fine-tuned, and with PEFT LoRA r 16 on all seven projections and on q_proj and
v_proj (fp32 adapters, the method's settings: measured-h200-2026-12/method/realruns.py hf_run), without and
with gradient checkpointing (use_reentrant False). The per-layer cost is the slope between the two depths
(the embedding, loss and optimizer fall out); seven interleaved rounds, medians. Prints each stack's cost per
layer and its ratio to the plain layer, beside the ratio the cost model assumes.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

try:
    import torch
    import transformers  # noqa: F401 - the builder's, checked here for the message below
    import peft  # noqa: F401
except ImportError as exc:
    print(f"needs torch, transformers and peft ({exc}); see this file's docstring")
    raise SystemExit(1) from None

sys.path.insert(0, str(Path(__file__).resolve().parent / "gpu"))
from hf_host import build, train_step  # noqa: E402

from advisor.costmodel.kernels import KERNELS_PEFT_LORA
from advisor.inputs.profile import shipped_profile
from advisor.measure.bench import _Layer

H, HEADS, FFN, S = 128, 4, 352, 64
ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def plain(layers: int, ckpt: bool):
    torch.manual_seed(0)
    stack = torch.nn.ModuleList([_Layer(H, HEADS, HEADS, FFN, 1, "cpu", torch.bfloat16) for _ in range(layers)])
    cos = torch.ones(S, H // HEADS // 2, dtype=torch.bfloat16)
    sin = torch.zeros(S, H // HEADS // 2, dtype=torch.bfloat16)
    x0 = torch.randn(1, S, H, dtype=torch.bfloat16, requires_grad=True)

    def step():
        x = x0
        for layer in stack:
            x = torch.utils.checkpoint.checkpoint(layer, x, cos, sin, use_reentrant=False) if ckpt else layer(x, cos, sin)
        x.float().pow(2).mean().backward()
    return step


def hf(layers: int, ckpt: bool, targets: list[str] | None):
    cfg = dict(hidden_size=H, intermediate_size=FFN, num_hidden_layers=layers, num_attention_heads=HEADS,
               num_key_value_heads=HEADS, vocab_size=256, tie_word_embeddings=False, rope_theta=10000.0)
    torch.manual_seed(0)
    model, opt = build(cfg, S, targets, ckpt)         # the GPU reading's builder, on this CPU
    return train_step(model, opt, torch.randint(0, 256, (1, S)))


def per_step(step, n: int = 20) -> float:
    for _ in range(3):
        step()
    t = time.perf_counter()
    for _ in range(n):
        step()
    return (time.perf_counter() - t) / n


STACKS = {"plain layer": lambda n, c: plain(n, c), "HF full": lambda n, c: hf(n, c, None),
          "HF LoRA 7 targets": lambda n, c: hf(n, c, ALL), "HF LoRA q,v": lambda n, c: hf(n, c, ["q_proj", "v_proj"])}


def main() -> int:
    torch.set_num_threads(1)
    host = shipped_profile("h200-2026-12").host
    steps = {(name, n, c): make(n, c) for name, make in STACKS.items() for n in (4, 12) for c in (False, True)}
    times: dict = {}
    for _ in range(7):
        for key, step in steps.items():
            times.setdefault(key, []).append(per_step(step))
    for ckpt in (False, True):
        base = host.eager_layer_recompute if ckpt else host.eager_layer
        extra = (KERNELS_PEFT_LORA + (6.0 if ckpt else 0.0)) * host.per_kernel
        slope = {name: (statistics.median(times[name, 12, ckpt]) - statistics.median(times[name, 4, ckpt])) / 8
                 for name in STACKS}
        print(f"gradient checkpointing {'on' if ckpt else 'off'}:")
        for name, s in slope.items():
            adapters = 7 if "7" in name else 2 if "q,v" in name else 0
            model = f"; cost model {(base + adapters * extra) / base:.2f}" if "LoRA" in name else ""
            print(f"  {name:<18} {s * 1e6:7.0f} us per layer, {s / slope['plain layer']:.2f} x the plain layer{model}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
