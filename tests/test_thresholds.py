"""Numbers that Python and a rule file both state are the same number."""

from __future__ import annotations

import pytest

import advisor
from advisor import Cluster, Layout, Training
from advisor.facts import ZERO_ONLY_MAX_GPUS
from advisor.planner.ranking import Ties
from advisor.rulebook.load import builtin_rulebook


def leaves(node: dict):
    """Every `<field> <op> <value>` leaf of a compiled condition."""
    for key in ("all", "any"):
        for child in node.get(key, ()):
            yield from leaves(child)
    if "field" in node:
        yield node["field"], node["op"], node["value"]


def bound_in(rule_id: str, field: str) -> tuple[str, object]:
    (found,) = [(op, value) for f, op, value in leaves(builtin_rulebook().rules[rule_id].compiled.condition)
                if f == field]
    return found


def test_zero_only_fits_is_computed_wherever_its_rule_can_fire():
    # facts.zero_only_fits sizes ZeRO layouts only up to ZERO_ONLY_MAX_GPUS; above, it reports False
    assert bound_in("advice.small-cluster-tp-pp-when-zero-fits", "cluster.gpus") == ("<=", ZERO_ONLY_MAX_GPUS)


@pytest.mark.parametrize("headroom", [None, 0.02, 0.3])
def test_the_planner_ranks_tight_layouts_last_where_the_audit_warns(headroom):
    """Both read inputs.uncertainty.memory_headroom: the audit's advice.memory-tight fires exactly on the
    layouts the planner's Ties call tight, at the default margin and at one the training asks for."""
    assert bound_in("advice.memory-tight", "check.memory_tight") == ("==", True)
    cluster, model = Cluster(gpu="H100-SXM-80GB", gpus=8), advisor.Model.preset("llama-3-8b")
    layout = Layout(tp=1, pp=1, dp=8, zero_stage=1, micro_batch_size=2, recompute="full")
    seen = set()
    for seq in range(8192, 12288, 128):          # 0.90 to 1.0 of the GPU and beyond
        training = Training(seq_len=seq, global_batch_size=64, memory_headroom=headroom)
        report = advisor.audit(cluster, model, layout, training)
        memory = report.estimates.memory
        if not memory.fits:
            continue
        tight = Ties.for_job("simplicity", model, cluster, training).is_tight(memory.total / memory.capacity)
        seen.add(tight)
        assert ("advice.memory-tight" in {f.rule_id for f in report.findings}) == tight, (seq, headroom)
    assert seen == {True, False} or headroom == 0.3
