"""The global batch when the caller gives none: a decision, taken from the GPU count within the range
published pretraining runs used, and stated in the trace.

- At least 4M tokens, Llama 2's pretraining batch (Touvron et al. 2023, §2.2).
- At most 16M tokens, Llama 3 405B's final batch (Grattafiori et al. 2024, arXiv 2407.21783, §3.4.1:
  4M tokens at first, 8M after 252M tokens, 16M after 2.87T tokens, on up to 16,384 H100s).
- Within them, at least one sequence per GPU per step where the range allows (Llama 3 grew its batch
  with its GPUs), and a multiple of the largest divisor of the GPU count it can be: the data-parallel
  degree must divide the batch (Megatron-LM's num-microbatches calculator, DeepSpeed's batch identity),
  so a batch the GPU count does not split forces model parallelism the job does not need (512
  sequences on 40 GPUs allow data-parallel degrees 1, 2, 4 and 8 only, so pipeline stages of 5).

Capacity planning (advisor.capacity) grows its batch with the count by the same rule.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["DEFAULT_BATCH_TOKENS", "DEFAULT_MAX_BATCH_TOKENS", "BatchChoice", "base_batch", "batch_for", "default_batch",
           "divisors"]

DEFAULT_BATCH_TOKENS = 4 * 2**20
"""Tokens per step the default batch starts from: Llama 2's 4M (Touvron et al. 2023, §2.2)."""

DEFAULT_MAX_BATCH_TOKENS = 16 * 2**20
"""Most tokens per step the default batch grows to: Llama 3 405B's final 16M (arXiv 2407.21783, §3.4.1)."""


class BatchChoice(NamedTuple):
    """A global batch and why: `sequences` per step, `divides` (the largest divisor of the GPU count
    that the batch is a multiple of: every data-parallel degree dividing it divides the batch)."""
    sequences: int
    divides: int


def divisors(n: int) -> list[int]:
    """The divisors of n >= 1, ascending."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def batch_for(gpus: int, base: int, most: int, unit: int = 1) -> BatchChoice:
    """Sequences per step on `gpus` GPUs, from `base` sequences and at most max(most, base): at least
    one per GPU where `most` allows, then the smallest multiple of unit x the largest divisor of `gpus`
    that stays within the limit. `unit`: a stated micro-batch, which every data-parallel rank's share
    must be a multiple of (with 1, the divisor 1 always stays within the limit; with more, fewer than a
    sequence per GPU may be what fits). With most <= base and unit 1 the batch is `base`."""
    ceiling = max(most, base)
    want = max(base, min(gpus, ceiling))
    splits = list(reversed(divisors(gpus)))
    for d in splits:
        batch = -(-want // (d * unit)) * d * unit
        if batch <= ceiling:
            return BatchChoice(batch, d)
    # (a stated micro-batch only) no multiple reaches a sequence per GPU within the limit: the largest
    # multiple within it that is still at least `base`, else the smallest multiple above `base`
    for d in splits:
        batch = ceiling // (d * unit) * d * unit
        if batch >= base:
            return BatchChoice(batch, d)
    return BatchChoice(-(-base // unit) * unit, 1)


def base_batch(seq: int) -> int:
    """Sequences of `seq` tokens in DEFAULT_BATCH_TOKENS (at least one): where the default starts."""
    return max(1, round(DEFAULT_BATCH_TOKENS / seq))


def default_batch(gpus: int, seq: int, unit: int = 1) -> BatchChoice:
    """The default pretraining batch on `gpus` GPUs at `seq` tokens per sequence, a multiple of a stated
    micro-batch `unit` (this module's rule)."""
    return batch_for(gpus, base_batch(seq), DEFAULT_MAX_BATCH_TOKENS // seq, unit)
