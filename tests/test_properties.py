"""Layout invariants, stated as hypothesis properties over generated clusters and models."""

from budget import examples  # tests/ is on sys.path (rootdir conftest)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from situations import GPUS, MODELS, situations  # tests/ is on sys.path (rootdir conftest)

import advisor
from advisor import Cluster
from advisor.inputs.pipeline import megatron_split, stage_layers

PROPERTY = settings(max_examples=examples(20, thorough=40), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(situations())
def test_layout_invariants(s):
    cluster, model, training = s
    rec = advisor.recommend(cluster, model, training)
    if rec.status == "infeasible":
        assert rec.layout is None and any(e.op == "reject" for e in rec.trace.events)
        return
    lay = rec.layout
    assert lay.tp * lay.pp * lay.cp * lay.dp == cluster.gpus
    assert lay.tp <= cluster.nvlink_domain
    assert model.heads % lay.tp == 0
    # every stage holds layers, in a split the framework runs (Megatron: even, or lighter first/last)
    assert sum(stage_layers(model.layers, lay.pp)) == model.layers and min(stage_layers(model.layers, lay.pp)) >= 1
    if rec.framework == "megatron":
        assert megatron_split(model.layers, lay.pp) is not None
    assert training.global_batch_size == lay.micro_batch_size * lay.num_microbatches * lay.dp
    assert rec.memory.fits
    if lay.sp:
        assert lay.tp > 1


@PROPERTY
@given(situations())
def test_same_input_same_recommendation_and_trace(s):
    a = advisor.recommend(*s)
    b = advisor.recommend(*s)
    assert a.model_dump_json() == b.model_dump_json()


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(GPUS), st.sampled_from([8, 16, 64]), st.sampled_from(MODELS))
def test_unit_equivalent_inputs_give_the_same_answer(gpu, gpus, model):
    from advisor import GPU
    from advisor.inputs import presets
    spec = presets.gpu(gpu)
    as_bytes = GPU(**{**spec, "memory": GPU(**spec).memory})
    a = advisor.recommend(Cluster(gpu=GPU(**spec), gpus=gpus), model)
    b = advisor.recommend(Cluster(gpu=as_bytes, gpus=gpus), model)
    assert a.model_dump_json() == b.model_dump_json()


@PROPERTY
@given(situations())
def test_a_recommendation_passes_its_own_audit(s):
    cluster, model, training = s
    rec = advisor.recommend(cluster, model, training)
    if rec.layout is None:
        return
    report = advisor.audit(cluster, model, rec.layout, rec.training)
    assert report.ok, [f.line() for f in report.errors]
    assert [f.rule_id for f in report.findings] == [f.rule_id for f in rec.findings]
