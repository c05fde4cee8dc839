"""The planner's fine pass: a variant (larger micro-batch, more virtual stages, more recompute) is
tried only when its floor (time.variant_floors, or time.shape_floor at the recompute level it is
known to need) can reach the best estimate. Stated here: both floors are true lower bounds, memory
grows with the micro-batch as the pruning assumes, and pruning never changes the choice nor the
alternatives an exhaustive search would list."""

import itertools

import pytest
from budget import examples  # tests/ is on sys.path (rootdir conftest)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import advisor
from advisor import Cluster, Layout, Model, Training
from advisor.api import recommend_with_ranking
from advisor.costmodel import Assumptions, estimate
from advisor.costmodel.sizing import floor_of, size, step_and_floors

PROPERTY = settings(max_examples=examples(20, thorough=30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
RECOMPUTE = ("none", "selective", "full")
# knobs whose terms depend on the compute window: the floors must stay below them too
KNOBS = st.sampled_from([None, Assumptions(ep_a2a_overlap=True), Assumptions(activation_offload_layers=8)])


@st.composite
def shapes(draw):
    """A legal coarse layout (vpp 1, the smallest micro-batch) and the variants of its shape."""
    gpu = draw(st.sampled_from(["A100-80GB", "H100-SXM-80GB", "B200"]))
    model = Model.preset(draw(st.sampled_from(["llama-2-7b", "llama-3-70b", "gpt-3-175b", "mixtral-8x7b",
                                               "qwen2.5-72b"])))
    nodes = draw(st.sampled_from([1, 2, 4, 8, 16]))
    gpus = 8 * nodes
    framework = draw(st.sampled_from(["megatron", "megatron", "deepspeed"]))
    tp = draw(st.sampled_from([t for t in (1, 2, 4, 8) if model.heads % t == 0 and model.kv_heads % t == 0]))
    pp = draw(st.sampled_from([p for p in (1, 2, 4, 8) if model.layers % p == 0 and gpus % (tp * p) == 0]))
    cp = draw(st.sampled_from([c for c in (1, 2, 4) if gpus % (tp * pp * c) == 0]))
    if framework == "deepspeed":
        pp = 1
    dp = gpus // (tp * pp * cp)
    ep = draw(st.sampled_from([e for e in (1, 2, 4, 8) if model.experts % e == 0 and (dp * cp * tp) % e == 0
                               and gpus % (e * pp) == 0])) if model.is_moe else 1
    seq = draw(st.sampled_from([2048, 4096, 8192]))
    gbs = dp * 4 * draw(st.sampled_from([pp, 2 * pp, 8 * pp]))
    zero = draw(st.sampled_from([1, 2, 3])) if framework == "deepspeed" else 1
    recompute = draw(st.sampled_from(RECOMPUTE if framework == "megatron" else ("none", "full")))
    layout = Layout(framework=framework, tp=tp, pp=pp, cp=cp, dp=dp, ep=ep, etp=1 if ep > 1 else None,
                    sp=tp > 1 and framework == "megatron", zero_stage=zero, micro_batch_size=1, recompute=recompute)
    vpps = [v for v in (1, 2, 4) if (model.layers // pp) % v == 0] if pp > 1 and framework == "megatron" else [1]
    return Cluster(gpu=gpu, gpus=gpus), model, Training(seq_len=seq, global_batch_size=gbs), layout, vpps


@PROPERTY
@given(shapes(), KNOBS)
def test_the_floor_is_below_every_variant(s, A):
    cluster, model, training, layout, vpps = s
    variants = [(b, v) for b in (1, 2, 4) for v in vpps]
    step, floors = step_and_floors(size(cluster, model, layout, training, A), variants)
    assert floors[1, 1] <= step * (1 + 1e-12)
    more = RECOMPUTE[RECOMPUTE.index(layout.recompute):]
    if layout.framework == "deepspeed":
        more = [r for r in more if r != "selective"]
    for (b, v), recompute in itertools.product(variants, more):
        m = training.global_batch_size // (b * layout.dp)
        if v > 1 and m % layout.pp:
            continue
        variant = layout.model_copy(update={"micro_batch_size": b, "vpp": v, "recompute": recompute})
        got = estimate(cluster, model, variant, training, A).step_time
        assert floors[b, v] <= got * (1 + 1e-12), (variant.id, b, v, recompute, floors[b, v], got)


@PROPERTY
@given(shapes(), KNOBS)
def test_the_floor_at_a_known_level_is_below_every_variant_at_that_level_or_more(s, A):
    """estimate.floor_of (time.shape_floor) of a sized variant bounds that variant with as much or
    more recompute: the planner parks a variant whose sizing needed more recompute than its coarse
    floor assumed, and times it only when this bound is within reach."""
    cluster, model, training, layout, vpps = s
    more = RECOMPUTE[RECOMPUTE.index(layout.recompute):]
    if layout.framework == "deepspeed":
        more = [r for r in more if r != "selective"]
    for b, v in itertools.product((1, 2, 4), vpps):
        m = training.global_batch_size // (b * layout.dp)
        if v > 1 and m % layout.pp:
            continue
        variant = layout.model_copy(update={"micro_batch_size": b, "vpp": v})
        floor = floor_of(size(cluster, model, variant, training, A), (b, v))
        for recompute in more:
            got = estimate(cluster, model, variant.model_copy(update={"recompute": recompute}), training, A).step_time
            assert floor <= got * (1 + 1e-12), (variant.id, recompute, floor, got)


@PROPERTY
@given(shapes())
def test_memory_grows_with_the_micro_batch_at_each_vpp(s):
    """A larger micro-batch of the same shape and vpp needs at least the recompute a smaller one
    needed (the planner starts its sizing there): memory at each level only grows with it."""
    cluster, model, training, layout, vpps = s
    for v in vpps:
        totals = []
        for b in (1, 2, 4):
            if v > 1 and (training.global_batch_size // (b * layout.dp)) % layout.pp:
                continue
            totals.append((b, size(cluster, model, layout.model_copy(update={"micro_batch_size": b, "vpp": v}),
                                   training).total))
        assert all(x[1] <= y[1] for x, y in zip(totals, totals[1:])), (layout.id, v, totals)


@PROPERTY
@given(shapes())
def test_memory_grows_with_the_micro_batch_and_the_virtual_stages(s):
    """The planner tries a variant only from the recompute level its coarse layout needed."""
    cluster, model, training, layout, vpps = s
    coarse = size(cluster, model, layout, training).total
    for b, v in itertools.product((1, 2, 4), vpps):
        if v > 1 and (training.global_batch_size // (b * layout.dp)) % layout.pp:
            continue
        variant = layout.model_copy(update={"micro_batch_size": b, "vpp": v})
        assert size(cluster, model, variant, training).total >= coarse, (variant.id, b, v)


CASES = [
    (Cluster(gpu="H100-SXM-80GB", gpus=64), "llama-3-70b", Training(seq_len=8192, global_batch_size=512)),
    (Cluster(gpu="A100-80GB", gpus=1024), "gpt-3-175b", Training(seq_len=2048, global_batch_size=1536)),
    (Cluster(gpu="H100-SXM-80GB", gpus=256), "mixtral-8x7b", Training(seq_len=4096, global_batch_size=1024)),
    (Cluster(gpu="A100-80GB", gpus=16), "llama-2-13b", Training(seq_len=4096, global_batch_size=256)),
    (Cluster(gpu="H100-SXM-80GB", gpus=2048), "llama-3.1-405b", Training(seq_len=32768, global_batch_size=256)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[1]}-{c[0].gpus}")
def test_pruned_choice_is_the_exhaustive_choice(case):
    """recommend() refines only what its floors allow; recommend_with_ranking() refines every
    variant. The exhaustive ranking's best is what recommend() chose (no audit rejections here)."""
    rec = advisor.recommend(*case)
    full, ranking = recommend_with_ranking(*case)
    assert full.model_dump_json() == rec.model_dump_json()
    fam = [c for c in ranking if c[0].framework == rec.framework]
    assert fam[0][0] == rec.layout, (fam[0][0].id, rec.layout.id)
    assert len(ranking) > len({a.layout for a in rec.alternatives}) + 1
    listed, exhaustive = _listed_and_exhaustive(rec, ranking)
    assert listed == exhaustive, ([x.id for x in listed], [x.id for x in exhaustive])


def _listed_and_exhaustive(rec, ranking):
    """The choice and its alternatives of the chosen family, and what the exhaustive ranking lists
    in their place: its first layout of each (tp, pp, cp, ep, ZeRO stage) the chosen family could
    have produced, best first."""
    listed = [rec.layout] + [a.layout for a in rec.alternatives
                             if a.layout.framework == rec.framework and a.family is None and a.kind is None]
    own = _chosen_family(rec, ranking)
    seen, firsts = set(), []
    for layout, _ in ranking:
        key = (layout.tp, layout.pp, layout.cp, layout.ep, layout.zero_stage)
        if own(layout) and key not in seen:
            seen.add(key)
            firsts.append(layout)
    return listed, firsts[:len(listed)]


def _chosen_family(rec, ranking):
    """Which ranked layouts the chosen family's search could have produced. The ranking merges both
    families; when both run on the same framework (the long-sequence rule chooses Megatron-LM for the
    ZeRO family too) they are told apart by their search spaces (planner.space): the ZeRO family's
    layouts have tp = pp = ep = 1, the model-parallel family's ZeRO stages are those it uses elsewhere."""
    other = next((a for a in rec.alternatives if a.family is not None), None)
    if other is None or other.layout.framework != rec.framework:
        return lambda layout: layout.framework == rec.framework

    def plain(layout):
        return layout.tp == layout.pp == layout.ep == 1
    if other.family == "model-parallel":            # the choice is the ZeRO family's
        return lambda layout: layout.framework == rec.framework and plain(layout)
    stages = {layout.zero_stage for layout, _ in ranking if layout.framework == rec.framework and not plain(layout)}
    return lambda layout: layout.framework == rec.framework and (not plain(layout) or layout.zero_stage in stages)


@st.composite
def situations(draw):
    gpu = draw(st.sampled_from(["A100-80GB", "H100-SXM-80GB", "H200", "B200"]))
    gpus = draw(st.sampled_from([8, 16, 32, 64, 128, 512, 2048]))
    model = draw(st.sampled_from(["llama-2-7b", "llama-2-13b", "llama-3-70b", "qwen2.5-72b", "gpt-3-175b",
                                  "mixtral-8x7b", "llama-3.1-405b"]))
    seq = draw(st.sampled_from([2048, 4096, 8192, 32768]))
    gbs = draw(st.sampled_from([256, 512, 2048]))
    return Cluster(gpu=gpu, gpus=gpus), model, Training(seq_len=seq, global_batch_size=gbs)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(situations())
def test_pruned_choice_is_the_exhaustive_choice_on_generated_situations(s):
    """The same statement as above over generated clusters, models and batches: the floors never
    prune a variant that the exhaustive refinement would have chosen."""
    rec = advisor.recommend(*s)
    full, ranking = recommend_with_ranking(*s)
    assert full.model_dump_json() == rec.model_dump_json()
    if rec.layout is None or any(e.op == "reject" and e.message.startswith("rule ") for e in rec.trace.events):
        return                                   # no choice, or the audit moved it off the first
    if any(e.op == "note" and e.message.startswith("advice moved the choice") for e in rec.trace.events):
        return                                   # the audit's advice moved it to a near-tie (planner.alternatives.pick)
    same = [layout for layout, _ in ranking if layout.framework == rec.framework]
    assert same[0] == rec.layout, (same[0].id, rec.layout.id)
    listed, exhaustive = _listed_and_exhaustive(rec, ranking)
    assert listed == exhaustive, ([x.id for x in listed], [x.id for x in exhaustive])
