"""The MoE token dispatcher's all-to-all traffic: NCCL's all-to-all vs DeepEP's per-node deduplication."""

from math import comb

import pytest

import advisor
from advisor import Cluster, Layout, Model, Training
from advisor.estimate import Assumptions
from advisor.estimate.comm import node_dedup

DEEPEP = Assumptions(moe_token_dispatcher="deepep")


def test_node_dedup_by_hand():
    # Qwen3-235B on EP32 over 4 nodes: 32 experts per node; a node is missed by all 8 of a token's
    # experts with probability C(96, 8) / C(128, 8).
    miss = comb(96, 8) / comb(128, 8)
    assert node_dedup(128, 8, 4) == pytest.approx(4 * (1 - miss) / 8)
    assert 0.44 < node_dedup(128, 8, 4) < 0.46
    # top-1 routing sends each token to one expert: nothing to deduplicate
    assert node_dedup(64, 1, 8) == pytest.approx(1.0)
    # one node: no network copies at all, the factor is moot
    assert node_dedup(8, 2, 1) == 1.0


@pytest.mark.parametrize("experts,topk,nodes", [(8, 2, 2), (64, 6, 4), (128, 8, 4), (256, 8, 8), (256, 8, 32)])
def test_node_dedup_is_a_fraction_that_shrinks_with_topk(experts, topk, nodes):
    f = node_dedup(experts, topk, nodes)
    assert 0 < f <= 1
    assert node_dedup(experts, topk + 1, nodes) <= f + 1e-12


def _ep_estimate(ep: int, A: Assumptions | None, gpus: int = 64):
    cluster = Cluster(gpu="H100-SXM-80GB", gpus=gpus)
    model = Model.preset("mixtral-8x7b")
    layout = Layout(framework="megatron", tp=1, ep=ep, etp=1, pp=4, dp=gpus // 4, zero_stage=1)
    return advisor.estimate(cluster, model, layout, Training(seq_len=4096, global_batch_size=256), A)


def test_deepep_changes_nothing_inside_one_node():
    plain, deepep = _ep_estimate(8, None), _ep_estimate(8, DEEPEP)
    assert deepep.comm.ep.link == "nvlink"
    assert deepep.comm.ep.bytes == plain.comm.ep.bytes
    assert deepep.step_time == plain.step_time


def test_deepep_cuts_only_the_network_share_across_nodes():
    # Mixtral EP16 = 2 nodes of 8: half of a plain all-to-all's copies leave the node; with top-2
    # over 8 experts (4 per node) DeepEP sends a token to the other node once however many of its
    # experts live there.
    plain, deepep = _ep_estimate(16, None), _ep_estimate(16, DEEPEP)
    assert plain.comm.ep.link == deepep.comm.ep.link == "network"
    f = node_dedup(8, 2, 2)
    assert f == pytest.approx(2 * (1 - comb(4, 2) / comb(8, 2)) / 2)
    # bytes = intra + inter: the intra-node part (7/16 of the payload) is unchanged
    payload_share_intra, payload_share_inter = 7 / 16, 8 / 16
    plain_bytes = plain.comm.ep.bytes
    expected = plain_bytes * (payload_share_intra + payload_share_inter * f) / (payload_share_intra + payload_share_inter)
    assert deepep.comm.ep.bytes == pytest.approx(expected, rel=1e-9)
    assert deepep.comm.ep.seconds < plain.comm.ep.seconds
    assert deepep.step_time < plain.step_time


def test_default_is_nccl_all_to_all():
    assert Assumptions().moe_token_dispatcher == "alltoall"
    assert _ep_estimate(16, Assumptions(moe_token_dispatcher="alltoall")).step_time == _ep_estimate(16, None).step_time


def test_unknown_dispatcher_is_refused_with_the_field_named():
    with pytest.raises(Exception) as exc:
        advisor.recommend(Cluster(gpu="H100-SXM-80GB", gpus=64), "mixtral-8x7b",
                          assumptions={"moe_token_dispatcher": "allgather"})
    assert "moe_token_dispatcher" in str(exc.value)
