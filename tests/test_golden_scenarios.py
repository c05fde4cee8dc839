"""Whole answers for reference scenarios, pinned in readable golden files (tests/golden/).

- perf/<id>.json: the Recommendation for each scenario benchmarks/perf.py times (its SCENARIOS,
  copied here so that editing the benchmark does not move the pins), without the ranking.
- audit/<id>.json: the Audit of a sound layout and of the README's illegal one.

Volatile fields dropped: see tests/golden_files.py. The engine is named (python), as in
tests/test_search_speed_identity.py, so the files do not depend on ADVISOR_ENGINE (the engines'
agreement is tests/test_engine_differential.py's subject). A deliberate change of the rules, the
planner or the cost model changes the files: regenerate with `python tests/golden/regenerate.py`,
review `git diff tests/golden` and say why in the commit.
"""

from __future__ import annotations

import pytest

import advisor
from advisor import Cluster, Layout, Training
from golden_files import audit_data, check, names_on_disk, recommendation_data

ENGINE = "python"

# benchmarks/perf.py SCENARIOS: (id, cluster, model preset, training)
PERF = [
    ("7b-8-a100", dict(gpu="A100-80GB", gpus=8), "llama-2-7b", dict(seq_len=4096, global_batch_size=128)),
    ("70b-64-h100", dict(gpu="H100-SXM-80GB", gpus=64), "llama-3-70b", dict(seq_len=8192, global_batch_size=512)),
    ("gpt3-175b-1024-a100", dict(gpu="A100-80GB", gpus=1024), "gpt-3-175b",
     dict(seq_len=2048, global_batch_size=1536)),
    ("405b-16384-h100-8k", dict(gpu="H100-SXM-80GB", gpus=16384), "llama-3.1-405b",
     dict(seq_len="8k", global_batch_size=2048)),
    ("405b-16384-h100-128k", dict(gpu="H100-SXM-80GB", gpus=16384), "llama-3.1-405b",
     dict(seq_len="128k", global_batch_size=128)),
    ("deepseek-v3-2048-h100", dict(gpu="H100-SXM-80GB", gpus=2048), "deepseek-v3",
     dict(seq_len=4096, global_batch_size=4096)),
]

# (id, cluster, model preset, layout, training)
AUDITS = [
    ("70b-64-h100-tp8pp2-zero1", dict(gpu="H100-SXM-80GB", gpus=64), "llama-3-70b",
     dict(tp=8, pp=2, sp=True, zero_stage=1), dict(seq_len=8192, global_batch_size=512)),
    # README "Audit a layout you already run": illegal (64 GPUs are not divisible by tp x pp = 48)
    ("readme-illegal-tp16-pp3-vpp2", dict(gpu="H100-SXM-80GB", gpus=64), "llama-3-70b",
     dict(tp=16, pp=3, vpp=2), dict(seq_len=8192, global_batch_size=512)),
]


def perf_data(scenario) -> dict:
    _id, cluster, model, training = scenario
    return recommendation_data(advisor.recommend(Cluster(**cluster), model, Training(**training), engine=ENGINE))


def audit_result(scenario) -> dict:
    _id, cluster, model, layout, training = scenario
    return audit_data(advisor.audit(Cluster(**cluster), model, Layout(**layout), Training(**training),
                                    engine=ENGINE))


def goldens() -> dict:
    """Every golden file of this module, name -> function giving its data: for tests/golden/regenerate.py."""
    return {**{f"perf/{s[0]}": (lambda s=s: perf_data(s)) for s in PERF},
            **{f"audit/{s[0]}": (lambda s=s: audit_result(s)) for s in AUDITS}}


@pytest.mark.parametrize("scenario", PERF, ids=[s[0] for s in PERF])
def test_benchmark_recommendations_match_the_golden_files(scenario):
    check(f"perf/{scenario[0]}", perf_data(scenario))


@pytest.mark.parametrize("scenario", AUDITS, ids=[s[0] for s in AUDITS])
def test_audits_match_the_golden_files(scenario):
    check(f"audit/{scenario[0]}", audit_result(scenario))


def test_the_readme_audit_is_illegal_and_the_sound_one_is_not():
    """What the two audit scenarios are for (the files pin the rest)."""
    by_id = {s[0]: s for s in AUDITS}
    assert audit_result(by_id["readme-illegal-tp16-pp3-vpp2"])["findings"][0]["severity"] == "error"
    assert all(f["severity"] != "error" for f in audit_result(by_id["70b-64-h100-tp8pp2-zero1"])["findings"])


def test_every_golden_file_belongs_to_a_scenario():
    """A renamed or removed scenario leaves no stale file behind (regenerate.py deletes them)."""
    from golden.regenerate import expected_names   # tests/golden/regenerate.py

    assert names_on_disk() == expected_names()
