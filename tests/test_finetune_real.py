"""Real fine-tuning steps (measured-h200-2026-12/realruns.jsonl, section hf, and benchmarks/realruns_h200_hf.jsonl)
against the estimate of the same job (benchmarks/finetune_real.py): the peak allocated memory within 7 %, never
under by more than 3 %."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

finetune_real = pytest.importorskip("benchmarks.finetune_real")


@pytest.mark.parametrize("path", [finetune_real.DEFAULT, finetune_real.EXTRA], ids=["shared", "repo"])
def test_every_measured_peak_is_met(path):
    from advisor.costmodel import estimate
    if not path.exists():
        pytest.skip("needs ../shared/data")
    rows = [r for r in finetune_real.hf_rows([path]) if "peak" in r]
    assert rows
    for row in rows:
        e = estimate(*finetune_real.question(row))
        ratio = (e.memory.total - e.memory.reserve) / row["peak"]
        assert 0.97 <= ratio <= 1.07, (row["model"], row["mode"], row["mbs"], row["ckpt"], ratio)
