"""Built-in GPU and model presets, read from the data files beside this module.

`gpus.toml` and `models.toml` are the single source: each entry carries its own `source`. Keys a
data file may hold besides the `GPU`/`Model` fields: `aliases` (other accepted names) and, for
models, `published_params` (the total the model card or paper states, used by tests).
"""

from __future__ import annotations

import difflib
import tomllib
from functools import lru_cache
from importlib import resources
from typing import Any

from ...errors import UnknownPresetError

__all__ = ["gpu", "model", "gpu_names", "model_names", "gpu_entries", "model_entries", "published_params"]

_META_KEYS = ("aliases", "published_params")


@lru_cache(maxsize=None)
def _table(kind: str) -> dict[str, dict[str, Any]]:
    """name (lower-cased, aliases included) -> entry; entries keep their file order."""
    text = (resources.files(__package__) / f"{kind}s.toml").read_text(encoding="utf-8")
    by_name: dict[str, dict[str, Any]] = {}
    for entry in tomllib.loads(text)[kind]:
        for key in (entry["name"], *entry.get("aliases", ())):
            if key.lower() in by_name:
                raise ValueError(f"presets/{kind}s.toml: duplicate preset name {key!r}")
            by_name[key.lower()] = entry
    return by_name


def _entries(kind: str) -> list[dict[str, Any]]:
    seen, out = set(), []
    for entry in _table(kind).values():
        if id(entry) not in seen:
            seen.add(id(entry))
            out.append(entry)
    return out


def _lookup(kind: str, name: object, field: str) -> dict[str, Any]:
    table = _table(kind)
    entry = table.get(name.lower()) if isinstance(name, str) else None
    if entry is None:
        names = [e["name"] for e in _entries(kind)]
        suggestions = _close(str(name).lower().rpartition("/")[2], table)
        hint = f"did you mean {', '.join(suggestions)}?" if suggestions else "`advisor presets` lists them."
        if kind == "model" and isinstance(name, str) and name.count("/") == 1 and not name.startswith(("/", ".")):
            hint += (f" {name!r} looks like a Hugging Face hub id: advisor reads no hub; download its config.json "
                     f"(`huggingface-cli download {name} config.json`) and pass it with --hf-config PATH "
                     "(Model.from_hf_config).")
            raise UnknownPresetError(field, name, names, hint)
        raise UnknownPresetError(field, name, names, hint + _DESCRIBE.get(kind, ""))
    return {k: v for k, v in entry.items() if k not in _META_KEYS}


# What to do when no preset fits: say it in the error, where the user is stuck.
_DESCRIBE = {"gpu": " A GPU without a preset: a TOML or JSON file of its fields (--gpu-spec FILE; "
                    "Cluster(gpu=\"my-gpu.toml\")) or advisor.GPU(memory=..., peak_flops=...)",
             "model": " A model without a preset: its Hugging Face config.json (--hf-config PATH; "
                      "Model.from_hf_config) or advisor.Model(layers=..., hidden=..., ...)"}


def _close(name: str, table: dict[str, dict[str, Any]]) -> list[str]:
    """Up to three preset names close to `name`, those of the same family (the text before the first
    "-": "h100" for "H100-80GB") first, so that H100-SXM-80GB comes before A100-80GB."""
    close = difflib.get_close_matches(name, list(table), n=5, cutoff=0.5)
    family = name.split("-")[0]
    close.sort(key=lambda key: key.split("-")[0] != family)        # stable: difflib's order otherwise
    return list(dict.fromkeys(table[key]["name"] for key in close))[:3]


def gpu(name: str, field: str = "gpu") -> dict[str, Any]:
    """Keyword arguments for `GPU(...)` of a preset such as "H100-SXM-80GB" (case-insensitive)."""
    return _lookup("gpu", name, field)


def model(name: str, field: str = "model") -> dict[str, Any]:
    """Keyword arguments for `Model(...)` of a preset such as "llama-3-70b" (case-insensitive)."""
    return _lookup("model", name, field)


def gpu_entries() -> list[dict[str, Any]]:
    return _entries("gpu")


def model_entries() -> list[dict[str, Any]]:
    return _entries("model")


def gpu_names() -> list[str]:
    return [e["name"] for e in _entries("gpu")]


def model_names() -> list[str]:
    return [e["name"] for e in _entries("model")]


def published_params(name: str) -> int | None:
    """The parameter total the model's own source states, if the data file records it."""
    entry = _table("model").get(name.lower())
    return None if entry is None else entry.get("published_params")
