"""Did-you-mean: the names closest to a mistyped one, ranked by similarity (not alphabetically).

One function for every place a name can be mistyped (preset names, the fields of an input object,
--assume knobs), so that each error suggests the same way.
"""

from __future__ import annotations

import difflib

__all__ = ["closest", "SYNONYMS"]

# Names other tools use for our fields: a Megatron or DeepSpeed user writes `num_gpus` or
# `global_batch` (Megatron's --global-batch-size, DeepSpeed's train_batch_size) for ours.
SYNONYMS = {
    "num_gpus": "gpus", "n_gpus": "gpus", "world_size": "gpus", "gpu_count": "gpus",
    "global_batch": "global_batch_size", "train_batch_size": "global_batch_size", "batch_size": "global_batch_size",
    "micro_batch": "micro_batch_size", "train_micro_batch_size_per_gpu": "micro_batch_size",
    "seq_length": "seq_len", "sequence_length": "seq_len", "max_seq_len": "seq_len",
    "num_layers": "layers", "n_layers": "layers", "num_hidden_layers": "layers", "hidden_size": "hidden",
    "num_attention_heads": "heads", "n_heads": "heads", "num_key_value_heads": "kv_heads",
}


def closest(name: str, known: list[str], n: int = 3) -> list[str]:
    """Up to `n` names of `known` closest to `name`: a known synonym first, then by difflib's ratio
    (ties keep `known`'s order)."""
    text = str(name)
    first = [SYNONYMS[text]] if SYNONYMS.get(text) in known else []
    scored = sorted(((difflib.SequenceMatcher(None, text.lower(), k.lower()).ratio(), -i, k)
                     for i, k in enumerate(known)), reverse=True)
    ranked = [k for ratio, _i, k in scored if ratio >= 0.5]
    return list(dict.fromkeys(first + ranked))[:n]
