"""The optimizers a user states (`Training.optimizer`), whether an fp32 master copy of the weights is
kept (`Training.master_weights`), and the bytes of state each keeps per trained parameter.

State per trained parameter, besides the master copy (sources):
- "adam", "adamw": two moments, m and v, each the dtype of the parameter the optimizer steps: fp32 under
  an fp32 master copy, 16-bit without one (torch.optim.Adam / AdamW `_init_group`:
  `torch.zeros_like(p, memory_format=torch.preserve_format)`, github:pytorch/pytorch@dc80ccded5385cca3e777472d64cfe3d874fad89
  torch/optim/adam.py). The Hugging Face Trainer's default, "adamw_torch_fused" from torch 2.8
  (transformers training_args.py `default_optim`), keeps the same two tensors.
- "adamw-8bit", "paged-adamw-8bit": bitsandbytes' 8-bit blockwise Adam: two uint8 states plus one fp32
  absmax per block of 256 values each, 2 x (1 + 4/256) bytes; tensors under `min_8bit_size` (4096
  values) keep fp32 states, a negligible share of a transformer's parameters; the paged variant
  allocates the states of tensors of 1e5 values or more in CUDA unified memory, which the driver moves
  to host memory only under memory pressure (github:bitsandbytes-foundation/bitsandbytes@95f9af309d4d5793847169c39288dcd3fcbdf564
  bitsandbytes/optim/optimizer.py, Optimizer2State.init_state and get_state_buffer). Priced on the GPU.
- "adafactor": transformers' Adafactor (the Trainer's "adafactor") keeps no first moment by default
  (beta1 None) and factors the second moment of a matrix into a row and a column vector in the
  gradient's dtype, d_out + d_in values for d_out x d_in parameters (github:huggingface/transformers@ad1fc9639f2e7b6808a2ca982c0a9b3134d76ee8
  src/transformers/optimization.py, Adafactor.step): priced as 2/hidden values per parameter (both
  widths taken as the hidden size; under 0.1 % of a parameter's bytes from a hidden size of 1024).
- "sgd": torch.optim.SGD keeps a momentum buffer only when momentum != 0 (its default and the Trainer's
  "sgd" are 0): no state (torch/optim/sgd.py, `momentum_buffer_list`).
- "lion": one moment, exp_avg, in fp32: bitsandbytes' Lion32bit (the Trainer's "lion_32bit") is an
  Optimizer1State whose state1 is fp32 whatever the parameter's dtype (bitsandbytes/optim/lion.py,
  optimizer.py Optimizer1State.init_state).

The master copy: "fp32" keeps the trained weights in fp32 for the update, 4 bytes per parameter, as
Megatron-LM's and DeepSpeed's mixed-precision optimizers do (ZeRO paper §3.1: K = 12 = master 4 + Adam
8), and as autocast training of an fp32 model does (the weights themselves are the fp32 copy, cast to
16-bit for each GEMM); "none" trains the 16-bit weights directly, with 16-bit gradients and states
(the Hugging Face Trainer on a model loaded with torch_dtype=bfloat16).
"""

from __future__ import annotations

from typing import Literal

__all__ = ["Optimizer", "MasterWeights", "OPTIMIZERS", "MASTER_BYTES", "moment_bytes", "DEFAULT_OPTIMIZER",
           "BNB_8BIT_BYTES"]

Optimizer = Literal["adam", "adamw", "adamw-8bit", "paged-adamw-8bit", "adafactor", "sgd", "lion"]
OPTIMIZERS: tuple[str, ...] = ("adam", "adamw", "adamw-8bit", "paged-adamw-8bit", "adafactor", "sgd", "lion")
MasterWeights = Literal["fp32", "none"]
DEFAULT_OPTIMIZER = "adam"

MASTER_BYTES = 4.0
"""An fp32 master weight per trained parameter."""
BNB_8BIT_BLOCK = 256
BNB_8BIT_BYTES = 2.0 * (1.0 + 4.0 / BNB_8BIT_BLOCK)
"""bitsandbytes 8-bit Adam: two uint8 states and one fp32 absmax per 256-value block of each."""


def moment_bytes(optimizer: str, master: str, hidden: int) -> float:
    """Bytes per trained parameter of the optimizer's own states (the master copy excluded): the
    moments in the stepped parameter's dtype (4 with an fp32 master, 2 without), bitsandbytes' 8-bit
    states whatever the master."""
    width = 4.0 if master == "fp32" else 2.0
    if optimizer in ("adam", "adamw"):
        return 2.0 * width
    if optimizer in ("adamw-8bit", "paged-adamw-8bit"):
        return BNB_8BIT_BYTES
    if optimizer == "adafactor":
        return width * 2.0 / hidden
    if optimizer == "lion":
        return 4.0
    return 0.0     # sgd without momentum
