"""The planner's speed-ups (issue 8) change no result: same recommendations, traces and estimates.

The search sizes each (shape, micro-batch, ZeRO stage, offload) at several recompute levels from one
context (estimate.resize), and keeps what many layouts share in the per-(cluster, model, training)
memo (memory._states, memory._act_invariants, time._plans, the DP terms). Two kinds of checks:

- golden: for the scenarios below, tests/golden/recommend/<id>.json holds the Recommendation
  (layout, estimates, alternatives, findings, trace, candidates examined; volatile fields dropped,
  see tests/golden_files.py) and tests/golden/recommend/<id>.ranking.json the ranking that
  `recommend_with_ranking` returns, one layout per line with its estimate's headline figures. A
  deliberate change of the rules, the planner or the cost model changes them: regenerate with
  `python tests/golden/regenerate.py`, review `git diff tests/golden` and say why in the commit.
- invariance: resize equals size at every level, and answers do not depend on what the memo holds
  (cold, warm from an earlier call, other assumptions first, many threads).
"""

from __future__ import annotations

import pytest

from advisor import Assumptions, Cluster, Layout, Model, Training
from advisor.api import recommend_with_ranking
from advisor.costmodel.sizing import resize, size, step_time_of
from golden_files import check_all, ranking_rows, recommendation_data
from threads import run_in_threads  # tests/ is on sys.path (rootdir conftest)

# (id, cluster kwargs, model preset, training kwargs or None, assumptions kwargs or None)
SCENARIOS = [
    ("70b-64-h100-8k", dict(gpu="H100-SXM-80GB", gpus=64), "llama-3-70b", dict(seq_len=8192, global_batch_size=512),
     None),
    ("7b-8-a100", dict(gpu="A100-80GB", gpus=8), "llama-2-7b", None, None),
    ("mixtral-64-h100", dict(gpu="H100-SXM-80GB", gpus=64), "mixtral-8x7b", dict(seq_len=4096, global_batch_size=512),
     None),
    ("70b-8-a100-offload", dict(gpu="A100-80GB", gpus=8), "llama-2-70b", dict(seq_len=4096, global_batch_size=64),
     None),
    ("gpt3-nonflash-tpoverlap", dict(gpu="A100-80GB", gpus=1024), "gpt-3-175b",
     dict(seq_len=2048, global_batch_size=1536, flash_attention=False), dict(tp_comm_overlap=True, dropout_masks=True)),
    ("70b-32k-recompute-modules", dict(gpu="H100-SXM-80GB", gpus=64), "llama-3-70b", dict(seq_len=32768, global_batch_size=64),
     dict(moe_load_imbalance=1.3, recompute_modules=["core_attn", "mlp"])),
]


def scenario_objects(scenario):
    _id, cl, model, tr, assumptions = scenario
    return (Cluster(**cl), Model.preset(model), Training(**tr) if tr is not None else None,
            Assumptions(**assumptions) if assumptions is not None else None)


def answer(cluster, model, training, assumptions):
    return recommend_with_ranking(cluster, model, training, engine="python", assumptions=assumptions)


def dumps(cluster, model, training, assumptions) -> tuple[str, str]:
    """`repr(model_dump())` of the Recommendation and of the ranking's (layout, estimate) pairs: every
    field, floats to the last bit, dict order; for comparing runs with each other."""
    rec, ranking = answer(cluster, model, training, assumptions)
    return repr(rec.model_dump()), repr([(layout.model_dump(), est.model_dump()) for layout, est in ranking])


def golden(scenario) -> dict[str, dict]:
    """Golden file name -> data."""
    rec, ranking = answer(*scenario_objects(scenario))
    return {f"recommend/{scenario[0]}": recommendation_data(rec),
            f"recommend/{scenario[0]}.ranking": {"ranking": ranking_rows(ranking)}}


def goldens() -> dict:
    """Every golden file of this module, name -> function giving its data: for tests/golden/regenerate.py."""
    return {name: (lambda s=s, name=name: golden(s)[name]) for s in SCENARIOS
            for name in (f"recommend/{s[0]}", f"recommend/{s[0]}.ranking")}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_recommendations_match_the_golden_files(scenario):
    check_all(golden(scenario))


def test_recommendations_do_not_depend_on_the_memo():
    """Cold (fresh objects), warm (the same objects again: the memo holds the first call's entries),
    and after another Assumptions object used the same memo: the same answers."""
    scenario = SCENARIOS[2]
    cold = dumps(*scenario_objects(scenario))
    cluster, model, training, A = scenario_objects(scenario)
    assert dumps(cluster, model, training, A) == cold
    assert dumps(cluster, model, training, A) == cold
    dumps(cluster, model, training, Assumptions(fragmentation_fraction=0.2))
    assert dumps(cluster, model, training, A) == cold
    assert dumps(cluster, model, training, Assumptions(fragmentation_fraction=0.2)) != cold


def _sized_values(s) -> tuple:
    return s.best, s.details, s.total, s.capacity, s.fits, s.host_fits, step_time_of(s)


@pytest.mark.parametrize("frugal_first", [True, False])
def test_resize_equals_size_at_every_recompute_level(frugal_first):
    """The planner's derivation of a layout's other recompute levels from one sizing gives what
    sizing each level from scratch gives, whatever the memo holds."""
    from test_estimate_speed_identity import CASES, case_objects

    for case in CASES:
        cluster, model, layout, training, A = case_objects(case)
        levels = ("none", "full") if layout.framework == "deepspeed" else ("none", "selective", "full")
        fresh = {r: _sized_values(size(*case_objects(case)[:2], layout.model_copy(update={"recompute": r}),
                                       training, A)) for r in levels}
        start = size(cluster, model, layout.model_copy(update={"recompute": levels[-1 if frugal_first else 0]}),
                     training, A)
        for r in levels:
            derived = resize(start, Layout(**{**layout.model_dump(exclude={"id"}), "recompute": r}))
            assert _sized_values(derived) == fresh[r], (case[0], r)


def test_same_recommendations_from_many_threads():
    """Threads share one memo (the same objects) and race to fill it."""
    picks = [SCENARIOS[0], SCENARIOS[2]]
    want = [dumps(*scenario_objects(s)) for s in picks]
    shared = [scenario_objects(s) for s in picks]
    errors = []

    def work(seed):
        for i in range(2):
            j = (seed + i) % len(picks)
            if dumps(*shared[j]) != want[j]:
                errors.append(picks[j][0])

    errors += run_in_threads(work, 4)
    assert not errors
