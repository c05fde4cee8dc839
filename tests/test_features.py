"""Every feature a rule can `enable` changes what the planner does: an auditor who reads
"-> enable X" in a trace can trust that it had an effect. A feature added to the vocabulary without
a reader fails here, for want of a check."""

from __future__ import annotations

from typing import get_args

import pytest

import advisor
from advisor.inputs.specs import resolve_training
from advisor.planner import space
from advisor.rulebook.actions import Decisions, Enable, Feature

CLUSTER = advisor.Cluster(gpu="H100-SXM-80GB", gpus=64)
MODEL = advisor.Model.preset("llama-3-70b")
TRAINING, _ = resolve_training(MODEL, advisor.Training(seq_len=32768, global_batch_size=64))


def decisions(*features: str) -> Decisions:
    d = Decisions()
    for feature in features:
        d.apply("test", Enable(action="enable", feature=feature), {}, "")
    return d


def searched_cp(d: Decisions) -> set[int]:
    return {s.cp for s in space.shapes(CLUSTER, MODEL, TRAINING, d, "model-parallel", "megatron")}


EFFECTS = {
    # sequence parallelism on every TP layout the search builds
    "sp": lambda: (space.Policy.of(decisions()).sp, space.Policy.of(decisions("sp")).sp) == (False, True),
    # context-parallel shapes are searched only when enabled
    "cp": lambda: searched_cp(decisions()) == {1} and max(searched_cp(decisions("cp"))) > 1,
    # the tie-break orders
    "tp_before_pp": lambda: space.tie_order(decisions("tp_before_pp")) == "tp_before_pp" != space.tie_order(decisions()),
    "dp_before_tp": lambda: space.tie_order(decisions("tp_before_pp", "dp_before_tp")) == "dp_before_tp",
    "ep_over_tp": lambda: space.tie_order(decisions("tp_before_pp", "dp_before_tp", "ep_over_tp")) == "ep_over_tp",
}


@pytest.mark.parametrize("feature", get_args(Feature))
def test_every_feature_changes_the_search(feature):
    assert feature in EFFECTS, f"feature {feature!r} has no reader: a rule enabling it would do nothing"
    assert EFFECTS[feature]()
