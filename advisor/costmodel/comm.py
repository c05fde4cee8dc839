"""Communication per parallel dimension: bytes, seconds on the link the group crosses, overlap.

Conventions:
- One "unit" is one all-gather or reduce-scatter of a message of B bytes over n ranks; an all-reduce
  is two units (ring reduce-scatter + all-gather). A unit moves (n-1)/n * B per rank (NCCL
  nccl-tests "bus bandwidth" definition; ZeRO paper §7: all-reduce = 2 psi, ZeRO-3 = 3 psi).
- Groups follow Megatron's rank order tp-cp-ep-dp-pp (parallel_state.py RankGenerator): a group with
  stride `stride` has min(n, domain // stride) members inside one NVLink domain. A collective over k
  local members and N = n/k > 1 domains runs as NCCL's rings do: every channel's ring visits the k
  local members over NVLink and leaves the domain through one NIC, and the channels are spread over
  the k members' NICs (every GPU driving its own NIC, as on DGX/HGX). Per rank that is
  (k-1)/k * (n-1)/n * B over NVLink and (n-1)/n * B/k through its NIC, and the ring pipelines the
  two, so the collective takes the slower of the two rather than their sum (nccl-tests
  doc/PERFORMANCE.md: a collective's bus bandwidth "should reflect the speed of the hardware
  bottleneck: NVLink, PCI, QPI, or network"). An earlier version added them, which over-charged
  data-parallel groups with several members per node (TP < 8) by up to 2x.
- Latency: every call pays `latency_nvlink` or `latency_network`, and a ring across N domains also
  N-1 network steps of `ring_hop_latency` (a ring reduce-scatter / all-gather takes n-1 steps; the
  intra-domain ones are NVLink-fast). Data-parallel traffic is issued in Megatron's gradient buckets
  (max(40M, 1M x DP) parameters, megatron/training/training.py `bucket_size`), DeepSpeed's
  `reduce_bucket_size` (5e8 elements) or one call per layer under FSDP / ZeRO-3, so large DP groups
  pay their ring latency once per bucket.
- NVLink bandwidth is the vendor's bidirectional figure halved; the network figure is per GPU, one
  direction (advisor.Cluster).
- Which collectives a layer issues, and which of them Megatron overlaps, is from Korthikanti et al.
  2022 §4.2.2 (TP: 2 all-reduces forward and 2 backward per layer; with SP the same volume as
  all-gathers and reduce-scatters) and Megatron-LM's tensor_parallel/layers.py
  (`LinearWithGradAccumulationAndAsyncCommunication`: the backward all-reduce / reduce-scatter of a
  column-parallel layer's input gradient, and the SP re-all-gather of its input, run asynchronously
  with the weight-gradient / data-gradient GEMMs).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from .context import Ctx

__all__ = ["local_members", "collective", "ring", "run_ring", "p2p", "alltoall", "tp_per_microbatch", "tp_plan",
           "tp_unhidden", "cp_per_microbatch", "cp_plan", "ep_per_microbatch", "ep_plan", "pp_per_microbatch",
           "dp_terms"]


def local_members(n: int, stride: int, domain: int) -> int:
    if n <= 1 or stride >= domain:
        return 1
    return max(1, min(n, domain // stride))


def collective(c: Ctx, A, units: float, nbytes: float, n: int, stride: int, calls: float = 1.0):
    """(bytes sent per rank, seconds, crosses_network) of `units` AG/RS-equivalents of nbytes over n ranks."""
    return run_ring(ring(c, A, nbytes, n, stride), units, calls)


def ring(c: Ctx, A, nbytes: float, n: int, stride: int):
    """How one AG/RS-equivalent of nbytes over n ranks runs, for `run_ring`: (crosses_network, bytes
    per rank per unit, seconds per unit across domains or None, NVLink bandwidth inside one domain or
    None, latency per call); None when nothing moves. Apart from `collective` so that a caller
    issuing several collectives of one message (TP) works this out once."""
    if n <= 1 or nbytes <= 0:
        return None
    domain = c.domain
    k = 1 if stride >= domain else max(1, min(n, domain // stride))   # local_members(n, stride, domain)
    N = -(-n // k)
    if N > 1:
        per_unit = (n - 1) / n * nbytes
        intra = (k - 1) / k * per_unit
        inter = per_unit / k
        t_nvl = intra / nvlink_rate(c, A)
        t_net = inter / (c.net_bw * A.network_efficiency)
        return (True, per_unit, t_nvl if t_nvl > t_net else t_net, None,
                A.latency_network + (N - 1) * A.ring_hop_latency)
    return False, (k - 1) / k * nbytes, None, nvlink_rate(c, A), A.latency_nvlink


def nvlink_rate(c: Ctx, A) -> float:
    """Bytes/s a bulk collective reaches inside the NVLink domain: the profile's measurement where it
    has one (`advisor measure` under torchrun), else Assumptions.nvlink_efficiency of the link."""
    return c.nvl_rate or c.nvlink_bw * A.nvlink_efficiency


def ep_nvlink_rate(c: Ctx, eff: float) -> float:
    """The same for the MoE all-to-all: the profile's all-to-all measurement, else `eff` of the link."""
    return c.nvl_a2a_rate or c.nvlink_bw * eff


def run_ring(r, units: float, calls: float = 1.0):
    """(bytes sent per rank, seconds, crosses_network) of `units` of the collective r = ring(...) in
    `calls` calls."""
    if r is None or units <= 0:
        return 0.0, 0.0, False
    net, per_unit, unit_sec, nvlink, latency = r
    # across domains units x the per-unit time; inside one (units x bytes) / bandwidth, as it always was
    sec = units * unit_sec if net else units * per_unit / nvlink
    return units * per_unit, sec + calls * latency, net


def p2p(c: Ctx, A, nbytes: float, network: bool, calls: float = 1.0):
    bw = (c.net_bw * A.network_efficiency) if network else nvlink_rate(c, A)
    return nbytes / bw + calls * (A.latency_network if network else A.latency_nvlink)


def alltoall(c: Ctx, A, nbytes: float, n: int, stride: int, calls: float = 1.0, nvl_eff: float | None = None):
    """All-to-all where each rank holds nbytes spread evenly over n peers; NVLink and NIC paths run
    concurrently, so the slower of the two bounds the time. `nvl_eff`: the share of NVLink bandwidth
    reached (Assumptions.nvlink_efficiency unless given; the MoE exchange's is ep_nvlink_efficiency)."""
    if n <= 1 or nbytes <= 0:
        return 0.0, 0.0, False
    k = local_members(n, stride, c.domain)
    intra = nbytes * (k - 1) / n
    inter = nbytes * (n - k) / n
    rate = nvlink_rate(c, A) if nvl_eff is None else ep_nvlink_rate(c, nvl_eff)
    sec = max(intra / rate, inter / (c.net_bw * A.network_efficiency) if inter else 0.0)
    net = inter > 0
    sec += calls * (A.latency_network if net else A.latency_nvlink)
    return intra + inter, sec, net


def tp_per_microbatch(c: Ctx, A, k: int, window: float, plan: TPPlan | None = None):
    """TP traffic of one micro-batch on pipeline stage k: (bytes, seconds, exposed seconds, network).

    Per layer, in units of the hidden-state message M = 2*s*b*h bytes:
      no SP: forward 2 all-reduces (4 units, exposed); backward 2 all-reduces of column-parallel input
             gradients (4 units, async with the weight-gradient GEMMs).
      SP:    forward 2 all-gathers + 2 reduce-scatters (4 units, exposed); backward 2 all-gathers of
             the row-parallel output gradient (2, exposed) + 2 re-all-gathers of saved inputs and 2
             reduce-scatters of input gradients (4, async).
      full recompute repeats the forward units. An MoE layer has the attention half, plus the MLP half
      for routed experts with expert TP (etp > 1), plus the MLP half again for shared experts, which
      are an MLP on the TP group whatever etp is (megatron/core/transformer/moe/shared_experts.py:
      SharedExpertMLP(MLP, tp_group=pg_collection.tp); without --moe-shared-expert-overlap its
      linear layers gather and reduce-scatter as a dense MLP's do).
      selective recompute repeats the forward units of the recomputed modules (tensor_parallel.
      checkpoint re-runs their linear layers with their collectives): "mlp" the MLP half of a dense
      layer, "moe" an MoE layer's expert halves, "shared_experts" the shared experts' half.
    Embedding: +2 units forward (all-reduce; 1 reduce-scatter under SP); output layer under SP: +1
    all-gather forward and 2 async units backward. `window` is the GEMM time async units hide behind.
    `plan` = tp_plan(c, A), when the caller times several stages of the layout.
    A hybrid stack (c.hsplit[k]: the stage's Mamba, attention, MLP and MoE layers): each Mamba, attention-only and MLP-only layer is one column- then row-parallel block,
    half a dense layer's collectives (Megatron-Core MambaMixer: in_proj column-parallel, out_proj
    row-parallel, with SP's all-gather / reduce-scatter like the attention's: megatron/core/ssm/
    mamba_mixer.py); an MoE-only layer is an MoE layer without its attention half.
    """
    if c.tp <= 1:
        return 0.0, 0.0, 0.0, False
    plan = plan or tp_plan(c, A)
    exp_units, exp_calls, async_units, async_calls = _tp_units(plan, *_stage_layers(c, k))
    nbytes, sec_exp, net = run_ring(plan.ring, exp_units, exp_calls)
    b2, sec_async, _ = run_ring(plan.ring, async_units, async_calls)
    total = sec_exp + sec_async
    if plan.overlap:
        exposed = total * (1.0 - A.tp_overlap_efficiency)
    else:
        exposed = sec_exp + max(0.0, sec_async - window)
    return nbytes + b2, total, exposed, net


def tp_unhidden(c: Ctx, A, k: int, plan: TPPlan | None = None) -> float:
    """tp_per_microbatch(..., window=inf)[2], the TP seconds no compute window hides (time.variant_floors).
    Without TP comm overlap that is the exposed collectives' time alone (sec_exp + max(0, sec_async - inf)
    is sec_exp), so the async ones are not timed."""
    if c.tp <= 1:
        return 0.0
    plan = plan or tp_plan(c, A)
    if plan.overlap:
        return tp_per_microbatch(c, A, k, float("inf"), plan)[2]
    exp_units, exp_calls, _, _ = _tp_units(plan, *_stage_layers(c, k))
    return run_ring(plan.ring, exp_units, exp_calls)[1]


def _stage_layers(c: Ctx, k: int) -> tuple:
    """(dense layers, MoE layers, first stage, last stage, hybrid kinds or None) of stage k: what _tp_units reads."""
    _, n_dense, n_moe = c.split[k]
    return n_dense, n_moe, k == 0, k == c.pp - 1, c.hsplit[k] if c.hsplit is not None else None


def _tp_units(plan: TPPlan, n_dense: int, n_moe: int, first: bool, last: bool, kinds=None) -> tuple:
    """(exposed units, exposed calls, async units, async calls) of one micro-batch's TP collectives on a stage."""
    sp = plan.sp
    if kinds is None:
        layers = n_dense + plan.moe_share * n_moe
    else:   # hybrid: Mamba, attention-only and MLP-only layers are halves; MoE-only has no attention half
        layers = 0.5 * (kinds[0] + kinds[1] + kinds[2]) + (plan.moe_share - 0.5) * kinds[3]
    exp_units = layers * plan.exp_units
    exp_calls = layers * plan.exp_calls
    if plan.rec_dense_units or plan.rec_moe_units:      # selective recompute_modules (tp_plan)
        exp_units += n_dense * plan.rec_dense_units + n_moe * plan.rec_moe_units
        exp_calls += n_dense * plan.rec_dense_calls + n_moe * plan.rec_moe_calls
    async_units = layers * plan.async_units
    async_calls = layers * plan.async_calls
    if first:
        exp_units += 1.0 if sp else 2.0
        exp_calls += 1
    if last and sp:
        exp_units += 1.0
        exp_calls += 1
        async_units += 2.0
        async_calls += 2
    return exp_units, exp_calls, async_units, async_calls


class TPPlan(NamedTuple):
    """The parts of tp_per_microbatch that are the same on every stage of one layout (tp_plan)."""
    moe_share: float      # an MoE layer's TP traffic, in dense layers
    exp_units: float      # per layer: exposed units and calls, async units and calls
    exp_calls: float
    async_units: float
    async_calls: float
    sp: bool
    ring: tuple           # ring() of the hidden-state message over the TP group
    overlap: bool         # TP comm overlap (tp_comm_overlap under SP)
    rec_dense_units: float = 0.0   # per dense / MoE layer: forward units and calls selective recompute repeats
    rec_dense_calls: float = 0.0
    rec_moe_units: float = 0.0
    rec_moe_calls: float = 0.0


def tp_plan(c: Ctx, A) -> TPPlan:
    """TPPlan of c's layout (tp > 1)."""
    M = 2.0 * c.s_loc * c.b * c.h
    # (units, calls): forward exposed, backward exposed, backward async
    if c.sp:
        fwd, bwd_exp, bwd_async, c_fwd, c_exp, c_async = 4.0, 2.0, 4.0, 4.0, 2.0, 4.0
    else:
        fwd, bwd_exp, bwd_async, c_fwd, c_exp, c_async = 4.0, 0.0, 4.0, 2.0, 0.0, 2.0
    rec = 2.0 if c.recompute == "full" else 1.0
    routed = 0.5 if c.etp > 1 else 0.0             # an MoE layer's MLP halves, in dense layers
    shared = 0.5 if c.shared else 0.0
    extra_dense = extra_moe = 0.0                   # selective: forward halves run again, in dense layers
    if c.recompute == "selective":
        mods = A.recompute_modules
        if "mlp" in mods:
            extra_dense = 0.5
        if "moe" in mods:
            extra_moe = routed + shared
        elif "shared_experts" in mods:
            extra_moe = shared
    return TPPlan(0.5 + routed + shared, fwd * rec + bwd_exp, c_fwd * rec + c_exp, bwd_async, c_async, c.sp,
                  ring(c, A, M, c.tp, 1), bool(A.tp_comm_overlap and c.sp), extra_dense * fwd, extra_dense * c_fwd,
                  extra_moe * fwd, extra_moe * c_fwd)


def cp_per_microbatch(c: Ctx, A, n_layers: int, window: float, plan: tuple | None = None, kinds=None):
    """CP traffic of one micro-batch: (bytes, seconds, exposed, network).

    Megatron/Transformer Engine ring attention (p2p): each rank passes its K,V chunk around the ring,
    cp-1 hops forward, and K,V plus dK,dV backward (2(cp-1) hops), overlapped with the attention of the
    chunk in hand (`window` = attention compute); a recomputed attention core (full, or selective
    with "core_attn") runs the forward hops again. DeepSpeed-Ulysses (framework deepspeed or
    megatron+deepspeed): all-to-all of Q,K,V and of the attention output, forward and backward,
    exposed (Jacobs et al. 2023, DeepSpeed-Ulysses §3). `plan` = cp_plan(c, A), when the caller times
    several stages of the layout.
    A hybrid stack (`kinds`): the attention exchange runs in its attention layers only, and each
    Mamba layer adds mamba_cp's all-to-alls, exposed.
    """
    if c.cp <= 1:
        return 0.0, 0.0, 0.0, False
    ulysses, nbytes, sec, net, per_layer = plan or cp_plan(c, A)
    if kinds is not None:
        attn = cp_per_microbatch(c, A, kinds[1], window, (ulysses, nbytes, sec, net, per_layer))
        if not kinds[0]:
            return attn
        m_bytes, m_sec, m_net = mamba_cp(c, A)
        return (attn[0] + kinds[0] * m_bytes, attn[1] + kinds[0] * m_sec, attn[2] + kinds[0] * m_sec,
                attn[3] or m_net)
    if ulysses:
        k = n_layers * per_layer
        return nbytes * k, sec * k, sec * k, net
    sec *= n_layers     # ring attention: per layer
    return nbytes * n_layers, sec, max(0.0, sec - window), net


def mamba_cp(c: Ctx, A) -> tuple:
    """(bytes, seconds, network) of one Mamba-2 layer's context parallelism for one micro-batch.
    Megatron-Core's all-to-all CP (megatron/core/ssm/mamba_context_parallel.py MambaContextParallel):
    before the conv1d and the scan, z, x, B, C and dt go from sequence-sharded to head-sharded
    (five all-to-alls, B and C repeated group_repeat = cp / (ngroups / tp) times when the rank has
    fewer groups than cp), after it the output y goes back (one): forward 2 (3 d_inner + 2 ngroups
    d_state r + nheads) / tp bytes per token on this rank, the same again backward, and the forward
    once more under full recompute. Not overlapped with compute (the scan needs them)."""
    d_inner, gn, nheads = c.hyb[:3]
    g_tp = max(1, c.hyb[7] // c.tp)    # at least one group per rank (fewer: the audit refuses the tp)
    repeat = c.cp // g_tp if g_tp < c.cp else 1
    payload = 2.0 * c.s_loc * c.b * (3 * d_inner + 2 * gn * repeat + nheads) / c.tp
    passes = 3.0 if c.recompute == "full" else 2.0
    return alltoall(c, A, payload * passes, c.cp, c.tp, calls=6 * passes)


def cp_plan(c: Ctx, A) -> tuple:
    """The parts of cp_per_microbatch that are the same on every stage of one layout (cp > 1):
    (Ulysses, bytes, seconds, network, all-to-alls per layer) with Ulysses, else (ring attention,
    bytes per layer, seconds per layer, network, None)."""
    # the forward's exchange runs again when the attention core is recomputed: full recompute, or
    # selective with "core_attn" (Megatron-Core checkpoints TEDotProductAttention, whose forward
    # holds the ring's P2P: transformer/attention.py _checkpointed_attention_forward)
    rec = 1.0 if c.recompute == "full" or (c.recompute == "selective" and "core_attn" in A.recompute_modules) else 0.0
    if c.deepspeed:
        payload = 2.0 * c.s_loc * c.b * (c.wq + c.wk + c.wv + c.wo) / c.tp
        nbytes, sec, net = alltoall(c, A, payload, c.cp, c.tp, calls=4)
        return True, nbytes, sec, net, 2.0 + rec
    chunk = 2.0 * c.s_loc * c.b * (c.wk + c.wv) / c.kv_div
    k_local = min(c.cp, c.domain // c.tp) if c.tp < c.domain else 1
    net = k_local < c.cp
    hops = (c.cp - 1) * (3.0 + rec)
    return False, chunk * hops, p2p(c, A, chunk * hops, net, calls=hops), net, None


def ep_per_microbatch(c: Ctx, A, n_moe: int, plan: tuple | None = None):
    """EP all-to-all of one micro-batch: dispatch and combine, forward and backward (4 per MoE layer,
    6 with full recompute), each carrying the rank's routed token copies (k per token, h-wide).
    `plan` = ep_plan(c, A), when the caller times several stages of the layout."""
    if c.ep <= 1 or n_moe == 0:
        return 0.0, 0.0, 0.0, False
    nbytes, sec, net, per_layer = plan or ep_plan(c, A)
    k = n_moe * per_layer
    return nbytes * k, sec * k, sec * k * (1.0 - A.ep_overlap), net


def ep_plan(c: Ctx, A) -> tuple:
    """The parts of ep_per_microbatch that are the same on every stage of one layout (ep > 1): one
    all-to-all's (bytes, seconds, network) and all-to-alls per MoE layer. Over NVLink the exchange
    runs at Assumptions.ep_nvlink_efficiency (the measured dispatch / combine kernels), not at the
    bulk collectives' nvlink_efficiency."""
    # a routed token is moe_width wide: hidden, or LatentMoE's latent width (the down projection runs before
    # dispatch: Megatron-Core moe_layer.py fc1_latent_proj in the preprocess step)
    payload = 2.0 * c.s_loc * c.b * c.topk * c.pc.moe_width * c.etp / c.tp * A.moe_load_imbalance
    per_layer = 6.0 if c.recompute == "full" else 4.0
    if A.moe_token_dispatcher == "deepep":
        return (*_deepep(c, A, payload), per_layer)
    return (*alltoall(c, A, payload, c.ep, c.etp, nvl_eff=A.ep_nvlink_efficiency), per_layer)


def node_dedup(experts: int, topk: int, nodes: int, groups: int = 1, group_topk: int | None = None) -> float:
    """Network copies of a token per routed copy when each token crosses to a remote node once and is
    forwarded there over NVLink (DeepEP's internode dispatch and combine): the expected number of
    nodes among a token's `topk` distinct experts, drawn uniformly from `experts` spread evenly over
    `nodes` nodes, over its topk copies (each node is remote with the same probability, so the
    (nodes-1)/nodes remote share cancels). A node holds experts/nodes experts; it is missed with
    probability C(E - E/N, k) / C(E, k).
    Group-limited routing (`groups`, `group_topk`: Megatron --moe-router-num-groups / -group-topk,
    DeepSeek-V3's node-limited routing) picks the experts from group_topk of the groups; when the
    groups split evenly over the nodes, a node is missed with probability C(G - G/N, g) / C(G, g),
    at most as many nodes as without the limit (the fewer of the two is taken)."""
    if nodes <= 1:
        return 1.0
    per_node = experts // nodes
    miss = math.comb(experts - per_node, topk) / math.comb(experts, topk)
    hit = nodes * (1.0 - miss)
    if group_topk is not None and group_topk < groups and groups % nodes == 0:
        g_miss = math.comb(groups - groups // nodes, group_topk) / math.comb(groups, group_topk)
        hit = min(hit, nodes * (1.0 - g_miss))
    return hit / topk


def _deepep(c: Ctx, A, payload: float):
    """alltoall() for DeepEP's kernels (deepseek-ai/DeepEP README: internode dispatch/combine send a
    token over RDMA once per destination node and forward it to that node's experts over NVLink;
    combine reduces on the remote node before sending back): the network part shrinks by node_dedup.
    Over NVLink a token goes to each destination rank once, however many of its experts that rank
    holds, and is copied to them there (DeepEP `Buffer.get_dispatch_layout` returns
    `num_tokens_per_rank` / `is_token_in_rank`, which the intranode dispatch sends; HybridEP's
    dispatch returns one row per received token and the expert copies are made on the receiving
    rank: deepseek-ai/DeepEP@5eb0722d205ecca498ae3e32fb14ba3c3aa00fb7 tests/test_hybrid_ep.py,
    `copy_times = local_expert_routing_map.sum(dim=1)`), so the NVLink part carries the expected
    distinct ranks of a token's top-k experts (node_dedup over the ep ranks: 0.66 of the copies for
    128 experts, top-8, on EP 8; 0.92 on EP 32). Megatron's NCCL all-to-all dispatcher sends every
    routed copy (token_dispatcher.py permutes by expert before the all_to_all). Routing is taken as
    uniform, limited to the model's router groups when it has them (DeepSeek-V3: 4 of 8 nodes;
    node_dedup).
    Across domains the NVLink leg also carries what arrives over the network: the receiving node's
    forwarder warps copy each token on to the ranks there that hold its experts (dispatch's
    kRDMAAndNVLForwarder, combine's kNVLAndRDMAForwarder in the reverse direction:
    deepseek-ai/DeepEP@b805c0e15e0d697c06d5db05fabcac2f0edb6e30 csrc/kernels/internode.cu), all but
    the share bound for the forwarding rank itself (1/k). Direct and forwarded together,
    (k-1)/n + (n-k)/n x (k-1)/k = (k-1)/k of the routed rows cross NVLink: as much as on EP k inside
    one domain, so spreading EP over more domains adds the network leg and saves no NVLink traffic.
    The two legs run concurrently; the slower sets the time."""
    n = c.ep
    k = local_members(n, c.etp, c.domain)
    nodes = -(-n // k)
    # distinct destination ranks per routed copy (1 when a rank holds at most one expert)
    per_rank = node_dedup(c.experts, c.topk, n) if c.experts >= n else 1.0
    if nodes <= 1:
        return alltoall(c, A, payload * per_rank, n, c.etp, nvl_eff=A.ep_nvlink_efficiency)
    nvlink = payload * per_rank * (k - 1) / k        # sent directly in this domain, or forwarded on arrival
    inter = payload * (n - k) / n * node_dedup(c.experts, c.topk, nodes, c.router_groups, c.router_group_topk)
    sec = max(nvlink / ep_nvlink_rate(c, A.ep_nvlink_efficiency), inter / (c.net_bw * A.network_efficiency))
    return nvlink + inter, sec + A.latency_network, True


def pp_per_microbatch(c: Ctx, A, window: float = 0.0):
    """Pipeline send/recv of one micro-batch on one stage: (bytes, seconds, exposed, network).

    The activation (forward) and its gradient (backward) cross each chunk boundary once; the
    interleaved schedule has v chunk boundaries per stage (Narayanan et al. 2021 §2.2: v x more
    communication). With TP > 1 only 1/t of the message crosses (scatter/gather optimisation, §4.1).
    Exposure: Megatron-Core's interleaved schedule with overlap_p2p_comm (its default; Layout
    .overlap_p2p_comm) posts each chunk's send/recv asynchronously and waits for it only before the
    chunk that needs it, so the transfers hide behind the micro-batch's compute (`window`) up to
    `pp_overlap_efficiency`; plain 1F1B send/recv are blocking (schedules.py), exposed but for
    `pp_overlap`.
    """
    p = c.pp
    if p <= 1:
        return 0.0, 0.0, 0.0, False
    msg = 2.0 * c.s_loc * c.b * c.h / c.tp
    stride = c.tp * c.cp * c.dp
    net = stride * p > c.domain
    n = 2.0 * c.vpp
    sec = p2p(c, A, msg * n, net, calls=n)
    if c.overlap_p2p:
        hidden = min(sec, window) * A.pp_overlap_efficiency
        return msg * n, sec, sec - hidden, net
    return msg * n, sec, sec * (1.0 - A.pp_overlap), net


def dp_terms(c: Ctx, A, dense: float, expert: float, trainable: tuple | None = None):
    """Data-parallel traffic of one rank: returns (once_bytes, once_grad_sec, once_param_sec,
    per_mb_bytes, per_mb_sec, network). `dense` / `expert` are the rank's parameter counts.

    megatron:   zero 0 all-reduce of main grads (4 B bf16, 2 B fp16); zero 1-2 (distributed optimizer /
                FSDP optim_grads) reduce-scatter grads + all-gather 16-bit params once per step;
                zero 3 gathers params forward and backward and reduce-scatters grads every micro-batch.
    deepspeed:  zero 0 all-reduce of 16-bit grads; zero 1 reduce-scatter + all-gather once; zero 2
                reduce-scatters every micro-batch (gradients are partitioned as they are produced);
                zero 3 all-gathers params forward + backward and reduce-scatters grads every
                micro-batch (ZeRO paper §7.2.2: 1.5x the all-reduce volume, per micro-batch with GA).
    torchtitan: zero 0 (replicate) all-reduce of fp32 grads; FSDP all-gathers bf16 params forward and
                backward and reduce-scatters fp32 grads every micro-batch.
    `trainable` = (dense, expert) parameters that get gradients when the base is frozen (LoRA,
    costmodel.adapters): gradients and the once-per-step gather of updated parameters move those only;
    the per-micro-batch gathers of sharded weights (ZeRO-3, FSDP) still move every weight.
    """
    tr_d, tr_e = trainable if trainable is not None else (dense, expert)
    groups = ((dense, tr_d, c.dense_shard, c.tp * c.cp), (expert, tr_e, c.edp, c.etp * c.ep))
    fw = c.framework
    once_g, once_p, mb = _dp_schedule(c, A)
    ob = og = op = mbb = mbs = 0.0
    net = False
    per_layer = max(1, c.L // c.pp)
    for params, trained, n, stride in groups:
        if params <= 0 or n <= 1:
            continue
        if fw == "megatron":
            buckets = params / (1e6 * n if n > 40 else 40e6)
        else:
            buckets = params / A.deepspeed_bucket_elements if c.deepspeed else 1.0
        if buckets < 1.0:
            buckets = 1.0
        if trainable is not None:
            # adapters only: their few buckets (DeepSpeed, Megatron size them by elements)
            buckets = max(1.0, buckets * trained / params)
        for units, bpp in once_g:
            bb, s, nn = collective(c, A, units, trained * bpp, n, stride, units * buckets)
            ob += bb; og += s; net |= nn
        for units, bpp in once_p:
            bb, s, nn = collective(c, A, units, trained * bpp, n, stride, units * buckets)
            ob += bb; op += s; net |= nn
        for i, (units, bpp) in enumerate(mb):  # FSDP / ZeRO-3 gather and reduce layer by layer
            # ZeRO-3 / FSDP: the first of two entries gathers the weights, the other reduces gradients
            moved = params if (i == 0 and len(mb) == 2) else trained
            bb, s, nn = collective(c, A, units, moved * bpp, n, stride, units * per_layer)
            mbb += bb; mbs += s; net |= nn
    return ob, og, op, mbb, mbs, net


def _dp_schedule(c: Ctx, A) -> tuple[list, list, list]:
    """dp_terms' collectives by framework and ZeRO stage, each (ring units, bytes per parameter):
    (once per step on gradients, once per step on parameters, every micro-batch)."""
    fw, z = c.framework, c.zero
    if fw == "megatron":
        g = 2.0 if c.precision == "fp16" else A.megatron_main_grad_bytes
        if z == 0:
            once_g, once_p, mb = [(2, g)], [], []
        elif z <= 2:
            once_g, once_p, mb = [(1, g)], [(1, 2.0)], []
        else:
            once_g, once_p, mb = [], [], [(2, 2.0), (1, g)]
    elif fw == "torchtitan":
        gb = A.fsdp_state_bytes[1]
        if z == 0:
            once_g, once_p, mb = [(2, gb)], [], []
        else:
            once_g, once_p, mb = [], [], [(2, 2.0), (1, gb)]
    else:
        if z == 0:
            once_g, once_p, mb = [(2, 2.0)], [], []
        elif z == 1:
            once_g, once_p, mb = [(1, 2.0)], [(1, 2.0)], []
        elif z == 2:
            once_g, once_p, mb = [], [(1, 2.0)], [(1, 2.0)]
        else:
            once_g, once_p, mb = [], [], [(2, 2.0), (1, 2.0)]
    return once_g, once_p, mb
