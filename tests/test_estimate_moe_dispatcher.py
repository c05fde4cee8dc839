"""The MoE token dispatcher's all-to-all traffic: NCCL's all-to-all vs DeepEP's per-node deduplication."""

from math import comb

import pytest

import advisor
from advisor import Cluster, Layout, Model, Training
from advisor.costmodel import Assumptions
from advisor.costmodel.comm import node_dedup

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


def test_deepep_changes_nothing_inside_one_node_with_one_expert_per_rank():
    # Mixtral's 8 experts on EP 8: each rank holds one expert, so a token's 2 copies go to 2 ranks
    plain, deepep = _ep_estimate(8, None), _ep_estimate(8, DEEPEP)
    assert deepep.comm.ep.link == "nvlink"
    assert deepep.comm.ep.bytes == plain.comm.ep.bytes
    assert deepep.step_time == plain.step_time


def test_deepep_sends_a_token_to_each_rank_once_over_nvlink():
    # Qwen3-30B-A3B (128 experts, top-8) on EP 8 inside one node: 16 experts per rank, so a token's
    # 8 copies reach 8 (1 - C(112, 8) / C(128, 8)) ranks on average; DeepEP sends one row to each
    cluster = Cluster(gpu="H100-SXM-80GB", gpus=8)
    model = Model.preset("qwen3-30b-a3b")
    layout = Layout(framework="megatron", tp=1, ep=8, etp=1, pp=1, dp=8, zero_stage=1)
    training = Training(seq_len=4096, global_batch_size=64)
    plain = advisor.estimate(cluster, model, layout, training)
    deepep = advisor.estimate(cluster, model, layout, training, DEEPEP)
    ranks = 8 * (1 - comb(112, 8) / comb(128, 8))
    assert node_dedup(128, 8, 8) == pytest.approx(ranks / 8)
    assert deepep.comm.ep.link == plain.comm.ep.link == "nvlink"
    assert deepep.comm.ep.bytes == pytest.approx(plain.comm.ep.bytes * ranks / 8, rel=1e-6)
    assert deepep.step_time < plain.step_time


def test_deepep_across_nodes_dedups_the_network_share_and_forwards_it_over_nvlink():
    # Mixtral EP16 = 2 nodes of 8: half of a plain all-to-all's copies leave the node; with top-2
    # over 8 experts (4 per node) DeepEP sends a token to the other node once however many of its
    # experts live there, and the receiving node's forwarder passes it on over NVLink to the 7
    # ranks there other than itself (csrc/kernels/internode.cu, kRDMAAndNVLForwarder).
    plain, deepep = _ep_estimate(16, None), _ep_estimate(16, DEEPEP)
    assert plain.comm.ep.link == deepep.comm.ep.link == "network"
    f = node_dedup(8, 2, 2)
    assert f == pytest.approx(2 * (1 - comb(4, 2) / comb(8, 2)) / 2)
    # plain bytes = intra (7/16 of the payload) + inter (8/16); DeepEP adds the forwarded 8/16 x 7/8
    intra, inter, forwarded = 7 / 16, 8 / 16, 8 / 16 * 7 / 8
    expected = plain.comm.ep.bytes * (intra + forwarded + inter * f) / (intra + inter)
    assert deepep.comm.ep.bytes == pytest.approx(expected, rel=1e-9)
    # on H100 the network leg is the slower one, and it shrank
    assert deepep.comm.ep.seconds < plain.comm.ep.seconds
    assert deepep.step_time < plain.step_time


def test_deepep_over_two_nvlink_domains_is_no_faster_than_over_one():
    # DeepSeek-V3 on 256 GB300 (NVL72): EP 128 spans two NVLink domains. What crosses to the other
    # domain is forwarded there over NVLink, so the NVLink leg carries as much as EP 64 inside one
    # domain does, and the network leg comes on top: the exchange cannot get faster by leaving it.
    cluster = Cluster(gpu="GB300", gpus=256)
    model = Model.preset("deepseek-v3")
    training = Training(seq_len=4096, global_batch_size=4096)
    A = Assumptions(moe_token_dispatcher="deepep")

    def ep_seconds(ep):
        layout = Layout(framework="megatron", tp=1, ep=ep, etp=1, pp=1, dp=256, zero_stage=1)
        return advisor.estimate(cluster, model, layout, training, A).comm.ep

    inside, across = ep_seconds(64), ep_seconds(128)
    assert (inside.link, across.link) == ("nvlink", "network")
    assert across.seconds >= inside.seconds * 0.95   # (a rank holds 2 experts, not 4: slightly fewer rows)


def test_default_is_nccl_all_to_all():
    assert Assumptions().moe_token_dispatcher == "alltoall"
    assert _ep_estimate(16, Assumptions(moe_token_dispatcher="alltoall")).step_time == _ep_estimate(16, None).step_time


def test_unknown_dispatcher_is_refused_with_the_field_named():
    with pytest.raises(Exception) as exc:
        advisor.recommend(Cluster(gpu="H100-SXM-80GB", gpus=64), "mixtral-8x7b",
                          assumptions={"moe_token_dispatcher": "allgather"})
    assert "moe_token_dispatcher" in str(exc.value)


def test_node_limited_routing_by_hand():
    # DeepSeek-V3 on EP 64 = 8 nodes, 8 router groups (one per node), a token picks 4 groups: a node
    # is missed with probability C(7, 4) / C(8, 4) = 1/2, so 4 nodes of 8 copies, against about
    # 5.3 nodes with the 8 experts drawn from all 256.
    assert node_dedup(256, 8, 8, groups=8, group_topk=4) == pytest.approx(8 * (1 - comb(7, 4) / comb(8, 4)) / 8)
    assert node_dedup(256, 8, 8, groups=8, group_topk=4) == pytest.approx(0.5)
    assert node_dedup(256, 8, 8) == pytest.approx(8 * (1 - comb(224, 8) / comb(256, 8)) / 8)
    # the limit never adds nodes; groups that do not split evenly over the nodes leave it out
    for nodes in (2, 4, 8):
        assert node_dedup(256, 8, nodes, 8, 4) <= node_dedup(256, 8, nodes) + 1e-12
    assert node_dedup(256, 8, 16, 8, 4) == node_dedup(256, 8, 16)


def test_deepseek_v3_routes_to_at_most_four_nodes_under_deepep():
    model = Model.preset("deepseek-v3")
    assert (model.router_groups, model.router_group_topk) == (8, 4)
    cluster = Cluster(gpu="H100-SXM-80GB", gpus=1024)
    layout = Layout(framework="megatron", tp=2, pp=16, dp=32, ep=64, etp=1, sp=True, zero_stage=1)
    training = Training(seq_len=4096, global_batch_size=8192)
    limited = advisor.estimate(cluster, model, layout, training, DEEPEP)
    uniform = advisor.estimate(cluster, model.model_copy(update={"router_group_topk": None}), layout, training, DEEPEP)
    # EP 64 over 8 nodes: of a plain all-to-all's bytes 7/64 stay in the node and 56/64 x 7/8 are
    # forwarded over NVLink on arrival (both sent once per destination rank, whatever the routing
    # limit); 56/64 cross the network, and only those shrink with the limit
    r = node_dedup(256, 8, 64)
    nvlink = 7 * r + 56 * 7 / 8 * r
    want = (nvlink + 56 * node_dedup(256, 8, 8, 8, 4)) / (nvlink + 56 * node_dedup(256, 8, 8))
    assert limited.comm.ep.bytes == pytest.approx(uniform.comm.ep.bytes * want, rel=1e-9)
    assert limited.comm.ep.seconds < uniform.comm.ep.seconds
    # the NCCL all-to-all sends every copy whatever the routing limit
    plain = advisor.estimate(cluster, model, layout, training)
    assert plain.comm.ep.bytes == advisor.estimate(
        cluster, model.model_copy(update={"router_group_topk": None}), layout, training).comm.ep.bytes


def test_router_groups_must_split_the_experts():
    with pytest.raises(ValueError, match=r"Model\.router_groups[\s\S]*% router_groups\(3\) = 1"):
        Model(name="m", layers=4, hidden=1024, heads=8, ffn_hidden=2048, vocab=1000, experts=64,
              experts_per_token=4, router_groups=3)
    with pytest.raises(ValueError, match=r"Model\.router_group_topk"):
        Model(name="m", layers=4, hidden=1024, heads=8, ffn_hidden=2048, vocab=1000, experts=64,
              experts_per_token=4, router_groups=8, router_group_topk=9)
