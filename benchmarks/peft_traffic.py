"""HBM bytes PEFT's LoRA adapter adds around a frozen linear, counted op by op (the measurement behind
costmodel.compute.PEFT_OUTPUT_BYTES and PEFT_INPUT_BYTES).

    pip install 'torch==2.13.0' 'transformers==5.17.0' 'peft==0.21.0'
    python benchmarks/peft_traffic.py

Runs one `torch.nn.Linear(d_in, d_out)` with bf16 weights, frozen, wrapped by PEFT's LoRA (rank 16, fp32
adapters as PEFT keeps them on a 16-bit model), forward and backward on CPU, with and without bf16 autocast,
and records every aten op a TorchDispatchMode sees. An element-wise op's bytes (inputs read + outputs
written) go to the input side when its tensors have the linear's input width, to the output side at its
output width; GEMMs (mm, addmm) are left out (the cost model times them with its GEMM curve) and so are the
weight-sized casts (per call, not per token). The base linear's own ops are counted without an adapter and
subtracted. Prints bytes per element per adapter, forward and backward, by side: the figures the cost model
states. Hardware does not enter (the ops and their tensors are the same on a GPU: PEFT's code decides them).
"""
from __future__ import annotations

import sys

try:
    import torch
    from peft import LoraConfig, get_peft_model
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
except ImportError as exc:      # an on-demand measurement: its packages are not the advisor's
    print(f"needs torch and peft ({exc}); see this file's docstring")
    raise SystemExit(1) from None

D_IN, D_OUT, TOKENS = 256, 1024, 64
GEMMS = {"mm", "addmm", "bmm"}


class Counter(TorchDispatchMode):
    """Bytes of every element-wise aten op by the width of its tensors (d_in, d_out)."""

    def __init__(self):
        super().__init__()
        self.bytes = {D_IN: 0, D_OUT: 0}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.overloadpacket.__name__ in GEMMS:
            return out
        tensors = [t for t in tree_flatten((args, kwargs, out))[0] if isinstance(t, torch.Tensor)]
        per_token = [t for t in tensors if t.dim() >= 2 and t.numel() == TOKENS * t.shape[-1]
                     and t.shape[-1] in self.bytes and t.untyped_storage().nbytes() > 0]
        if per_token and len(per_token) == len(tensors):      # views and weight casts fall out
            self.bytes[per_token[-1].shape[-1]] += sum(t.numel() * t.element_size() for t in per_token)
        return out


class _One(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(D_IN, D_OUT, bias=False, dtype=torch.bfloat16)

    def forward(self, x):
        return self.proj(x)


def count(lora: bool, autocast: bool) -> tuple[dict, dict]:
    """(forward, backward) bytes by width for one linear, with or without its adapter."""
    torch.manual_seed(0)
    model = _One().requires_grad_(False)
    if lora:
        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules=["proj"], lora_dropout=0.0))
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.data = p.data.float()
    x = (torch.randn(TOKENS, D_IN, dtype=torch.bfloat16, requires_grad=True) * 1.0).detach().requires_grad_(True)
    fwd, bwd = Counter(), Counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast), fwd:
        y = model(x)
    grad = torch.ones_like(y)
    with bwd:
        y.backward(grad)
    return fwd.bytes, bwd.bytes


def main() -> int:
    print(f"PEFT LoRA adapter on a frozen bf16 Linear({D_IN}, {D_OUT}), rank 16, fp32 adapters, {TOKENS} tokens")
    print(f"{'autocast':9s} {'side':7s} {'forward B/elem':>15s} {'backward B/elem':>16s}")
    for autocast in (False, True):
        (f0, b0), (f1, b1) = count(False, autocast), count(True, autocast)
        for side, width in (("output", D_OUT), ("input", D_IN)):
            elems = TOKENS * width
            print(f"{str(autocast):9s} {side:7s} {(f1[width] - f0[width]) / elems:15.1f} "
                  f"{(b1[width] - b0[width]) / elems:16.1f}")
    print("(output side without the GEMM's write: costmodel.compute.PEFT_OUTPUT_BYTES adds lora_B's 4-byte"
          " fp32 output forward)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
