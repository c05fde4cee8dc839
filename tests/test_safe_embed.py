"""Issue 38, "safe to embed, second pass": one test per finding of the second deep probe. Each fails
on the code before the fix (named in the docstring) and asserts behaviour, never wall-clock time:
where a finding was slowness, the test counts the work instead."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import advisor
from advisor.errors import InputError

HF = Path(__file__).parent / "data" / "hf"


class _CountingList(list):
    """A list that counts membership tests (each one a linear scan of the list)."""

    def __init__(self, items):
        super().__init__(items)
        self.scans = 0

    def __contains__(self, item):
        self.scans += 1
        return super().__contains__(item)


# ------------------------------------------------------------------------------------------------
# A Hugging Face config the caller cannot bound: qwen3_next's mlp_only_layers


def test_qwen3_next_mlp_only_layers_is_read_in_linear_time():
    """`i not in mlp_only` on the list scanned it once per layer: O(layers x entries), 25 min for a 4 MB
    config. A list as long as a 4 MB config holds, on as many layers as advisor.Model takes, is now
    read with no scan of the list per layer (and the answer is an InputError naming a key)."""
    cfg = json.loads((HF / "qwen3-next-80b-a3b-instruct.json").read_text())
    entries = (4 * 2**20) // len("1000000, ") - 2**12               # ~460,000 indices fill 4 MB of JSON
    cfg["num_hidden_layers"] = 50_000
    cfg["mlp_only_layers"] = listed = _CountingList(range(10**6, 10**6 + entries))
    assert len(json.dumps(cfg)) <= 4 * 2**20 + 2**16
    try:
        advisor.Model.from_hf_config(cfg)
    except InputError as exc:
        assert exc.field.startswith(("hf_config.", "Model."))
    assert listed.scans == 0


def test_qwen3_next_mlp_only_layers_still_makes_those_layers_dense():
    cfg = json.loads((HF / "qwen3-next-80b-a3b-instruct.json").read_text())
    cfg["mlp_only_layers"] = [0, 5]
    assert advisor.Model.from_hf_config(cfg).hybrid_pattern.startswith("G-GEGE*EGEG-GE*E")
