"""`advisor measure`: microbenchmarks on this machine's GPU into a `Profile` the estimate reads.

    advisor.measure(out="h100-site.json")          # or: advisor measure --out h100-site.json
    advisor.recommend(advisor.Cluster(gpu="H100", gpus=64, profile="h100-site.json"), model)

Needs torch (`pip install 'advisor[measure]'`); the rest of advisor never imports it. `smoke=True`
runs every benchmark at tiny sizes (on the CPU when there is no GPU): the code path and the file
format, not a measurement. Run under `torchrun --nproc-per-node N` to add collective bandwidths.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from ..errors import InputError
from ..inputs import presets
from ..inputs.profile import Profile
from ..inputs.specs import GPU
from .build import build_profile

__all__ = ["measure", "records_to_profile", "gpu_preset_for"]


def gpu_preset_for(device_name: str) -> str | None:
    """The GPU preset a CUDA device name ("NVIDIA H200", "NVIDIA H100 80GB HBM3") stands for."""
    name = device_name.lower().replace("nvidia", "").replace(" ", "")
    best = None
    for entry in presets.gpu_entries():
        for key in (entry["name"], *entry.get("aliases", ())):
            k = key.lower().replace("-", "").replace(" ", "")
            if k and k in name and (best is None or len(k) > best[0]):
                best = (len(k), entry["name"])
    return best[1] if best else None


def records_to_profile(rows: list[dict], *, name: str, gpu: str | GPU, source: str) -> Profile:
    """The profile of measurement records (advisor.measure.build)."""
    g = gpu if isinstance(gpu, GPU) else GPU(**presets.gpu(gpu, field="measure --gpu"))
    return build_profile(rows, name=name, gpu=g, source=source)


def measure(out: str | Path | None = None, *, smoke: bool = False, budget: float = 170.0, gpu: str | None = None,
            name: str | None = None, records: str | Path | None = None,
            log: Callable[[str], None] = lambda _: None) -> Profile:
    """Run the microbenchmarks (about `budget` seconds on a GPU) and return the profile; write it to
    `out` (JSON) and the raw records to `records` (JSON lines) when given."""
    for field, path in (("measure --out", out), ("measure --records", records)):
        _check_writable(field, path)       # before minutes of measuring, not after
    try:
        from . import bench
    except ImportError as exc:
        raise InputError("measure", "torch is not installed", "pip install 'advisor[measure]' (PyTorch)",
                         str(exc)) from None
    rows = bench.run(smoke=smoke, budget=budget, log=log)
    env = next((r for r in rows if r["section"] == "env"), {})
    device = env.get("device")
    gpu = gpu or (gpu_preset_for(device) if device else None)
    if gpu is None:
        raise InputError("measure --gpu", device or "no GPU", "the GPU preset whose datasheet peaks the curves are "
                         "shares of, e.g. --gpu H100 (see `advisor presets`)")
    if records is not None:
        _write("measure --records", records, "".join(json.dumps(r) + "\n" for r in rows))
    source = (f"advisor measure{' --smoke' if smoke else ''} on {device or 'CPU'}: torch {env.get('torch')}, "
              f"CUDA {env.get('cuda')}, host {env.get('cpu_model')} ({env.get('cores')} cores)")
    prof = records_to_profile(rows, name=name or ("smoke" if smoke else _slug(gpu) + "-measured"), gpu=gpu,
                              source=source)
    if out is not None:
        _write("measure --out", out, json.dumps(prof.model_dump(mode="json"), indent=1, sort_keys=True) + "\n")
    return prof


def _check_writable(field: str, path: str | Path | None) -> None:
    """InputError unless `path` (when given) names a file in a folder that exists."""
    if path is None:
        return
    target = Path(path)
    if target.is_dir():
        raise InputError(field, str(path), "a file name, not a folder")
    if not target.parent.is_dir():
        raise InputError(field, str(path), "a file in a folder that exists", f"create {target.parent} first")


def _write(field: str, path: str | Path, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(field, str(path), "a file this process can write", exc.strerror or str(exc)) from None


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_.+" else "-" for ch in text.lower())
