"""The planner's structural checks are the audit's rules, not a second statement of them: whatever
one of them drops, the audit rule it names refuses, and what they keep, those rules accept.

planner.space.LEGALITY maps each check (a speed-up: the search skips a shape without sizing it) to
the audit error rule that states the constraint. If a framework constraint changes, the rule file
changes and this test says which check must follow.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import advisor
from advisor.auditor import layout_errors
from advisor.inputs.specs import resolve_training
from advisor.planner import space
from advisor.rulebook.actions import Decisions, Enable
from advisor.rulebook.load import builtin_rulebook
from budget import examples  # tests/ is on sys.path (rootdir conftest)

MODELS = ["llama-2-7b", "llama-3-70b", "llama-3.1-405b", "mixtral-8x7b", "qwen2.5-72b", "gpt-3-175b", "deepseek-v3"]
BOOK = builtin_rulebook()


def _arguments(check, model, training, world, layout):
    etp = layout.etp or layout.tp
    return {
        space.heads_divide: (model, layout.tp),
        space.query_groups_divide: (model, layout.tp),
        space.stages_have_layers: (model, layout.pp),
        space.experts_divide: (model, layout.ep),
        space.sequence_splits: (training.seq_len, layout.cp),
        space.world_divides: (world, layout.tp, layout.pp, layout.cp),
        space.expert_grid_divides: (world, etp, layout.ep, layout.pp),
    }[check]


# checks the search applies only where the dimension is in use (ep > 1)
ONLY_WITH_EP = {space.experts_divide, space.expert_grid_divides}


@st.composite
def megatron_layouts(draw):
    model = advisor.Model.preset(draw(st.sampled_from(MODELS)))
    world = draw(st.sampled_from([8, 16, 24, 32, 48, 64, 96, 128, 512]))
    seq = draw(st.sampled_from([2048, 4096, 6000, 8192, 32768, 32769]))
    tp, pp, cp = (draw(st.sampled_from(v)) for v in ([1, 2, 3, 4, 6, 8, 16], [1, 2, 3, 4, 5, 8, 16, 128], [1, 2, 3, 4, 8]))
    ep = draw(st.sampled_from([1, 2, 3, 4, 8, 16, 64])) if model.is_moe else 1
    etp = 1 if model.is_moe and tp > 1 else None          # what the search uses for MoE
    training, _ = resolve_training(model, advisor.Training(seq_len=seq, global_batch_size=world * 4))
    layout = advisor.Layout(tp=tp, pp=pp, cp=cp, ep=ep, etp=etp)
    return model, training, advisor.Cluster(gpu="H100-SXM-80GB", gpus=world), layout


@settings(max_examples=examples(60, thorough=300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(megatron_layouts())
def test_what_a_check_drops_its_audit_rule_refuses_and_what_it_keeps_it_accepts(case):
    model, training, cluster, layout = case
    errors = {f.rule_id for f in advisor.audit(cluster, model, layout, training).errors}
    for check, rule_id in space.LEGALITY.items():
        if check in ONLY_WITH_EP and layout.ep == 1:
            continue
        keeps = check(*_arguments(check, model, training, cluster.gpus, layout))
        assert keeps == (rule_id not in errors), (check.__name__, rule_id, layout, sorted(errors))


@settings(max_examples=examples(25, thorough=60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(MODELS), st.sampled_from([8, 64, 512]), st.sampled_from([4096, 32768]))
def test_no_shape_the_search_keeps_breaks_a_rule_its_checks_state(model_name, world, seq):
    model = advisor.Model.preset(model_name)
    cluster = advisor.Cluster(gpu="H100-SXM-80GB", gpus=world)
    training, _ = resolve_training(model, advisor.Training(seq_len=seq, global_batch_size=world * 4))
    decisions = Decisions()
    decisions.apply("test", Enable(action="enable", feature="cp"), {}, "")
    stated = set(space.LEGALITY.values())
    for shape in space.shapes(cluster, model, training, decisions, "model-parallel", "megatron"):
        layout = advisor.Layout(tp=shape.tp, pp=shape.pp, cp=shape.cp, ep=shape.ep, etp=shape.etp, vpp=shape.vpp,
                                dp=shape.dp)
        broken = {rule_id for rule_id, _ in layout_errors(BOOK, cluster, model, training, layout, None)} & stated
        assert not broken, (layout.id, broken)
