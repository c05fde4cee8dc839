"""`advisor measure`: the microbenchmarks run end to end at tiny sizes (--smoke, on the CPU when there
is no GPU) and write a profile that validates against schemas/profile.schema.json and that the
estimate reads. Needs torch (the optional extra `advisor[measure]`; CI installs the CPU build)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

import advisor
from advisor import Cluster, Layout, Training
from advisor.inputs.profile import load_profile
from advisor.measure import gpu_preset_for

# Looked up, not imported: the benchmarks run in the child process, and importing torch here costs ~1.5 s of CPU
pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="advisor measure needs torch (pip install 'advisor[measure]')")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("measure")
    proc = subprocess.run([sys.executable, "-m", "advisor.cli", "measure", "--smoke", "--gpu", "H100",
                           "--out", str(out / "p.json"), "--records", str(out / "r.jsonl")],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out, proc.stdout


def test_smoke_writes_a_profile_the_schema_accepts(smoke):
    from test_schemas import _check    # the repository's validator of the schemas' subset
    out, stdout = smoke
    doc = json.loads((out / "p.json").read_text())
    _check(doc, "profile.schema.json")
    assert doc["format"] == 1 and doc["name"] == "smoke" and "--smoke" in doc["source"]
    sections = {json.loads(line)["section"] for line in (out / "r.jsonl").read_text().splitlines()}
    assert {"gemm", "attn", "moe", "elem", "host", "layer", "graphs", "sustained"} <= sections
    assert "measured" in stdout and "shipped" in stdout       # the table against the shipped profile


def test_the_estimate_follows_the_measured_curves(smoke):
    """A CPU's 'GPU curves' are thousands of times below an H100's: the estimate with that profile
    is slower, and says which profile it used."""
    out, _ = smoke
    prof = load_profile(out / "p.json")
    lay, tr = Layout(zero_stage=1), Training(seq_len=2048, global_batch_size=16)
    mine = advisor.estimate(Cluster(gpu="H100", gpus=8, profile=prof), "llama-3-8b", lay, tr)
    shipped = advisor.estimate(Cluster(gpu="H100", gpus=8), "llama-3-8b", lay, tr)
    assert mine.compute_time > 10 * shipped.compute_time
    assert mine.profile == "smoke (measured)"


def test_device_names_map_to_presets():
    assert gpu_preset_for("NVIDIA H200") == "H200"
    assert gpu_preset_for("NVIDIA H100 80GB HBM3") in ("H100-SXM-80GB",)
    assert gpu_preset_for("NVIDIA A100-SXM4-80GB") == "A100-80GB"
    assert gpu_preset_for("a toaster") is None
