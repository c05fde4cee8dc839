"""Input bounds shared by the input models and the readers that build them (hf.py checks a config's
integers against these before doing any work proportional to them; specs.py declares them as the
fields' `le`).

They keep every derived number inside int64 for the rule engine (durable_rules compares ints
>= 2**64 wrongly: its C core keeps integers as int64) and reject absurd inputs with a message.
"""

from __future__ import annotations

__all__ = ["MAX_GPUS", "MAX_DIM", "MAX_PARAMS", "MAX_LAYERS", "MAX_EXPERTS"]

MAX_GPUS = 1 << 20
MAX_DIM = 1 << 20
MAX_PARAMS = 10**15         # 1,000x the largest models trained; keeps every fact inside int64
MAX_LAYERS = 100_000        # ~800x the deepest trained decoders (Llama 3.1 405B: 126 layers)
MAX_EXPERTS = 65_536        # ~256x the most routed experts of a released model (DeepSeek-V3: 256)
