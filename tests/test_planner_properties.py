"""The classic layout patterns, as properties of the planner over generated clusters and models."""

from budget import examples  # tests/ is on sys.path (rootdir conftest)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from situations import situations  # tests/ is on sys.path (rootdir conftest)

import advisor
from advisor import GPU, Cluster, Training
from advisor.inputs import presets

DENSE = ("llama-2-7b", "llama-2-13b", "llama-3-8b", "llama-3-70b", "qwen2.5-72b", "gpt-3-175b", "llama-2-70b")
RECOMPUTE = ["none", "selective", "full"]
OFFLOAD = ["none", "optimizer", "optimizer+params"]
PROPERTY = settings(max_examples=int(__import__("os").environ.get("PLANNER_EXAMPLES", examples(20, thorough=25))), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def dense_situations():
    """Dense models at pre-training sequence lengths: the cases the classic patterns speak of."""
    return situations(models=DENSE, gpus=("A100-80GB", "H100-SXM-80GB", "H200", "B200"),
                      sizes=(8, 16, 32, 64, 128, 256, 512), seqs=(2048, 4096), batches=(512, 1024, 2048))


@PROPERTY
@given(dense_situations())
def test_tp_stays_in_a_node_pp_and_dp_take_the_rest(s):
    cluster, model, training = s
    rec = advisor.recommend(cluster, model, training)
    if rec.layout is None:
        return
    lay = rec.layout
    # TP innermost in the rank order and dividing the node: every TP group lies inside one server.
    assert lay.tp <= cluster.nvlink_domain and cluster.gpus_per_node % lay.tp == 0
    # DP takes the rest.
    assert lay.dp == cluster.gpus // (lay.tp * lay.pp * lay.cp)


@PROPERTY
@given(dense_situations())
def test_pp_only_when_more_tp_inside_the_node_would_not_do_as_well(s):
    """TP grows to the node before PP grows: a recommended pp > 1 never leaves a fitting pp = 1 layout
    with more TP (inside the NVLink domain) that the cost model rates about as fast."""
    from advisor.api import recommend_with_ranking
    from advisor.planner.ranking import NEAR_TIE, Ties
    cluster, model, training = s
    rec, ranking = recommend_with_ranking(cluster, model, training)
    lay = rec.layout
    if lay is None or lay.pp == 1 or rec.framework == "deepspeed":
        return
    ties = Ties.for_job("tp_before_pp", model, cluster, training)
    best = min(est.step_time for cand, est in ranking if not ties.is_tight(est.memory.total / est.memory.capacity))
    for cand, est in ranking:
        if cand.pp == 1 and cand.tp > lay.tp and cand.framework == rec.framework and cand.cp == lay.cp:
            headroom = not ties.is_tight(est.memory.total / est.memory.capacity)
            assert not (headroom and est.step_time <= best * (1 + NEAR_TIE)), (lay.id, cand.id)


def _with_memory(gpu: str, factor: float) -> GPU:
    spec = presets.gpu(gpu)
    base = GPU(**spec)
    return GPU(**{**spec, "name": f"{base.name}-x{factor}", "memory": int(base.memory * factor)})


@PROPERTY
@given(st.sampled_from(["A100-40GB", "A100-80GB", "H100-SXM-80GB"]), st.sampled_from([8, 16, 32]),
       st.sampled_from(["llama-2-7b", "llama-2-13b", "llama-3-8b", "llama-2-70b"]))
def test_more_gpu_memory_never_means_more_aggressive_memory_saving(gpu, gpus, model):
    training = Training(seq_len=4096, global_batch_size=256)
    small = advisor.recommend(Cluster(gpu=_with_memory(gpu, 1.0), gpus=gpus), model, training)
    big = advisor.recommend(Cluster(gpu=_with_memory(gpu, 2.0), gpus=gpus), model, training)
    if small.layout is None:
        return
    assert big.layout is not None
    if big.framework == small.framework:
        assert big.layout.zero_stage <= small.layout.zero_stage, (small.layout.id, big.layout.id)
    assert RECOMPUTE.index(big.layout.recompute) <= RECOMPUTE.index(small.layout.recompute), (small.layout, big.layout)
    assert OFFLOAD.index(big.layout.offload) <= OFFLOAD.index(small.layout.offload)


def test_virtual_stages_are_offered_for_uneven_splits_that_megatron_can_lay_out():
    """Llama 3's 126 layers on PP 16 (7 | 8 x 14 | 7) interleave with 2 or 4 chunks per rank; on PP 8
    (15 | 16 x 6 | 15) with 2 or 8, the embedding and the loss counted as layers (128 = 8 x 8 x 2, as
    Megatron-Bridge runs it); DeepSeek-V3's 61 (3 | 4 x 14 | 2) with 2; even splits keep the divisors of
    L / PP; no split, no virtual stages. Every chunk holds a layer, but for the embedding's first and the
    loss's last, which may hold nothing else."""
    from advisor.inputs.pipeline import virtual_stage_layers
    from advisor.planner.space import vpp_options

    assert vpp_options(126, 16) == [1, 2, 4]
    assert vpp_options(126, 8) == [1, 2, 8]
    assert vpp_options(61, 16) == [1, 2]
    assert vpp_options(80, 4) == [1, 2, 5]
    assert vpp_options(126, 20) == [1]
    for layers in (32, 61, 80, 94, 96, 126):
        for pp in (2, 3, 4, 6, 8, 12, 16):
            for vpp in vpp_options(layers, pp)[1:]:
                chunks = virtual_stage_layers(layers, pp, vpp)
                assert chunks is not None and sum(chunks) == layers, (layers, pp, vpp)
                assert min(chunks[1:-1]) >= 1 and min(chunks) >= 0, (layers, pp, vpp)
