"""A GPU described in a file: the fields of `GPU` as TOML or JSON, for a part without a preset.

    # my-gpu.toml                         (or {"name": "MI210", "memory": "64 GiB", ...} as JSON)
    name = "MI210"
    memory = "64 GiB"
    peak_flops = "181 TFLOP/s"
    source = "AMD Instinct MI210 datasheet (2022)"

The fields may also sit under one `[gpu]` table. `schemas/gpu.schema.json` describes them; omitted
ones take GPU's defaults (nvlink_bandwidth omitted: a PCIe card without NVLink).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from ..errors import InputError

__all__ = ["read_gpu_file", "is_gpu_file_name", "MAX_GPU_FILE_BYTES"]

MAX_GPU_FILE_BYTES = 64 << 10          # a GPU is a dozen fields; bound what a caller can hand us
_FIELD = "Cluster.gpu"
_WANT = "a TOML or JSON file of GPU fields (schemas/gpu.schema.json)"


def is_gpu_file_name(value: str) -> bool:
    """Whether a Cluster.gpu string names a file rather than a preset."""
    return value.lower().endswith((".toml", ".json"))


def read_gpu_file(path: str | Path) -> dict[str, Any]:
    """The GPU fields of the file at `path`, as a dict for `GPU(**fields)`."""
    p = Path(path)
    try:
        if p.stat().st_size > MAX_GPU_FILE_BYTES:
            raise InputError(_FIELD, str(p), f"a GPU file of at most {MAX_GPU_FILE_BYTES} bytes")
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(_FIELD, str(p), _WANT, exc.strerror or str(exc)) from None
    except UnicodeDecodeError:
        raise InputError(_FIELD, str(p), _WANT, "the file is not UTF-8 text") from None
    data = _parse(text, p)
    if isinstance(data, dict) and set(data) == {"gpu"} and isinstance(data["gpu"], dict):
        data = data["gpu"]
    if not isinstance(data, dict):
        raise InputError(_FIELD, str(p), _WANT, f"the file holds a {type(data).__name__}, not a table of fields")
    return data


def _parse(text: str, p: Path) -> Any:
    try:
        if p.suffix.lower() == ".toml":
            return tomllib.loads(text)
        return json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise InputError(_FIELD, str(p), _WANT, f"it does not parse: {exc}") from None
    except RecursionError:
        raise InputError(_FIELD, str(p), _WANT, "it is nested too deeply") from None
