"""advisor._unchecked.build_unchecked: the same object as validating, without the validation."""

from advisor import Layout
from advisor._unchecked import build_unchecked
from advisor.costmodel import estimate
from advisor.costmodel.result import MemoryEstimate


def test_layout_built_unchecked_equals_the_validated_one():
    values = dict(framework="megatron", tp=8, pp=2, dp=4, cp=1, ep=1, etp=None, vpp=1, overlap_p2p_comm=True,
                  sp=True, zero_stage=1, micro_batch_size=1, num_microbatches=128, recompute="none", offload="none",
                  offload_device="cpu")
    assert list(values) == list(Layout.model_fields)
    fast = build_unchecked(Layout, dict(values))
    slow = Layout(**values)
    assert fast == slow and hash(fast) == hash(slow)
    assert fast.model_dump() == slow.model_dump() and fast.model_fields_set == set(values)
    assert Layout.model_validate(fast.model_dump()) == fast
    assert fast.id == "tp8-dp4-pp2-zero1-sp-nmb128"


def test_results_built_unchecked_round_trip():
    est = estimate({"gpu": "H100-SXM-80GB", "gpus": 64} and __import__("advisor").Cluster(gpu="H100-SXM-80GB", gpus=64),
                   __import__("advisor").Model.preset("llama-3-70b"), Layout(tp=8, pp=2, dp=4, sp=True, zero_stage=1),
                   __import__("advisor").Training(seq_len=8192, global_batch_size=512))
    assert type(est.memory) is MemoryEstimate
    assert type(est).model_validate(est.model_dump()) == est


def test_the_planners_layouts_are_what_validation_would_build():
    """The planner builds candidates unchecked; every field must be set, and set validly."""
    import advisor
    from advisor.api import recommend_with_ranking

    rec, ranking = recommend_with_ranking(advisor.Cluster(gpu="H100-SXM-80GB", gpus=64), "mixtral-8x7b",
                                          advisor.Training(seq_len=4096, global_batch_size=256))
    assert ranking and rec.layout is not None
    for layout, _ in ranking[:50] + [(rec.layout, None)]:
        assert layout.model_fields_set == set(Layout.model_fields)
        assert Layout(**layout.model_dump()) == layout
