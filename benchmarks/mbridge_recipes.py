"""What Megatron-Bridge's performance configs ran for each record of published-perf-2025-dev.jsonl.

The table rows state a layout; the run's other settings live in Megatron-Bridge's source
(scripts/performance/configs/<family>/workload_base_configs.py at the release tags, read into
mbridge_recipes_2025.json with the path and commit of each). These are facts of the job, like the
layout: the framework's own config, not a fitted number. `recipe_overrides` turns the ones the cost
model can represent into estimate inputs and says, for each of the others, what the estimate does
instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from advisor.costmodel.assumptions import RecomputeModule
from advisor.inputs.precision import megatron_adam_master_bytes

__all__ = ["RecipeOverrides", "recipe_overrides"]

_FILE = Path(__file__).with_name("mbridge_recipes_2025.json")
_MODULES = set(RecomputeModule.__args__)


@dataclass
class RecipeOverrides:
    recompute: str | None = None
    sp: bool | None = None
    precision: str | None = None
    assumptions: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@lru_cache(maxsize=1)
def _records() -> dict:
    return json.loads(_FILE.read_text(encoding="utf-8"))["records"]


_FP8_RECIPES = {"tensorwise": "fp8-cs", "delayed": "fp8-delayed", "mxfp8": "mxfp8", "blockwise": "fp8-blockwise"}


def recipe_overrides(record_id: str, pp: int) -> RecipeOverrides | None:
    """The config's settings for one record, or None when the record is not in the file."""
    entry = _records().get(record_id)
    if entry is None:
        return None
    s = entry["settings"]
    out = RecipeOverrides()
    src = f"Megatron-Bridge {entry['config']}"
    gran = s.get("recompute_granularity")
    if gran == "selective":
        mods = tuple(s.get("recompute_modules") or ("core_attn",))
        known = tuple(m for m in mods if m in _MODULES)
        out.recompute = "selective"
        out.assumptions["recompute_modules"] = known
        out.notes.append(f"recompute selective {list(known)} ({src})")
        if len(known) < len(mods):
            out.notes.append(f"recompute modules not modelled: {sorted(set(mods) - set(known))}")
    elif gran == "full":
        n, method = s.get("recompute_num_layers"), s.get("recompute_method")
        out.notes.append(f"{src} recomputes {n} layers per stage (method {method}); partial full recompute "
                         "is not modelled, estimated without recompute")
    fp8 = s.get("fp8_recipe")
    if fp8 and s.get("compute_dtype") != "bf16":
        out.precision = _FP8_RECIPES.get(fp8)
    if s.get("sequence_parallel") is not None:
        out.sp = bool(s["sequence_parallel"])
    if s.get("tp_comm_overlap"):
        out.assumptions["tp_comm_overlap"] = True
    dispatcher, backend = s.get("moe_token_dispatcher_type"), s.get("moe_flex_dispatcher_backend")
    if dispatcher == "flex" and (s.get("moe_enable_deepep") or backend in ("deepep", "hybridep")):
        # HybridEP (Megatron-Core's flex dispatcher backend for NVL72) and DeepEP both send a token to a
        # remote NVLink domain once and fan it out inside: priced by the same node de-duplication
        out.assumptions["moe_token_dispatcher"] = "deepep"
        out.notes.append(f"flex dispatcher, {backend or 'deepep'} backend ({src})")
    if s.get("overlap_moe_expert_parallel_comm"):
        out.assumptions["ep_a2a_overlap"] = True
        out.notes.append(f"EP all-to-all overlapped with the other micro-batch's compute ({src})")
    n_off = s.get("cpu_offloading_num_layers") or 0
    if n_off:
        if pp > 1:
            out.notes.append(f"{src} sets cpu_offloading_num_layers={n_off}, but the table's layout has pp {pp}: "
                             "Megatron-Core refuses CPU offloading with pipeline parallelism, so none is estimated")
        else:
            out.assumptions["activation_offload_layers"] = n_off
            out.notes.append(f"activations of {n_off} layers offloaded to the host ({src})")
    if s.get("fp8_param_gather") and out.precision:
        out.assumptions["fp8_param_gather"] = True
    if s.get("grad_reduce_in_fp32") is False:
        # the performance scripts set cfg.ddp.grad_reduce_in_fp32 = False (scripts/performance/configs/
        # <family>/*_llm_pretrain.py): the DDP gradient buffer and its reduction are bf16
        out.assumptions["megatron_main_grad_bytes"] = 2.0
        out.notes.append(f"bf16 gradient buffers (grad_reduce_in_fp32 False, {src})")
    if s.get("use_precision_aware_optimizer"):
        # Megatron-Core's precision-aware optimizer (advisor.inputs.precision.megatron_adam_master_bytes):
        # the master copy is TE's 16-bit remainder with bf16 GEMMs, fp32 main params with FP8-CS / MX;
        # DeepSeek-V3's recipe also keeps m and v in bf16
        moment = 2 if entry.get("bf16_adam_moments") else 4
        master = megatron_adam_master_bytes(out.precision or "bf16")
        out.assumptions["megatron_optimizer_bytes"] = float(master + 2 * moment)
        out.notes.append(f"precision-aware optimizer: master {master} B + m, v {moment} B each per parameter ({src})")
    return out
