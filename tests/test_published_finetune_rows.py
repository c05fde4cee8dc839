"""The published benchmarks' reading of the NeMo 24.07 fine-tuning rows (benchmarks/published.py): what
the rows state (SQuAD packed to 4096) becomes Training.packed_sample_tokens, derived from the dataset's
size, and pretraining rows stay unpacked."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

published = pytest.importorskip("benchmarks.published")
DEV = ROOT.parent / "shared" / "data" / "published-layouts-dev.jsonl"
pytestmark = pytest.mark.skipif(not DEV.exists(), reason="needs ../shared/data")


def _rows():
    return {rec.id: rec for rec in published.load_records(DEV) if rec.id.startswith("nemo2407-h100-fp8-")}


def test_squad_sample_length_is_the_datasets_bytes_over_llamas_bytes_per_token():
    # 79,317,110 B / 87,599 samples = 905 B; 783 GB / (15 % of 1.4T tokens / 1.06 epochs) = 3.95 B/token
    assert published.SQUAD_SAMPLE_TOKENS == 229


def test_packed_squad_rows_attend_within_each_sample():
    rows = _rows()
    tuned = [r for r in rows.values() if r.training.task != "pretrain"]
    assert len(tuned) == 6
    assert all(r.training.packed_sample_tokens == published.SQUAD_SAMPLE_TOKENS for r in tuned)
    assert all(any("packed SQuAD" in a for a in r.assumed) for r in tuned)


def test_pretraining_rows_are_not_packed():
    pretrain = [r for r in _rows().values() if r.training.task == "pretrain"]
    assert pretrain and all(r.training.packed_sample_tokens is None for r in pretrain)
