"""Per-GPU memory of one layout: each candidate stage's rank, term by term (model states,
costmodel.states; activations, costmodel.activations; buffers and the reserve), the most-loaded one.
"""

from __future__ import annotations

from typing import NamedTuple

from .activations import act_invariants, chunk_share, chunks_in_flight, hybrid_stage_acts, offloaded_layers
from .context import Ctx
from .hf import applies as hf_applies, hf_peak
from .states import candidate_states, stage_states, state_invariants

__all__ = ["detail_dict", "stage_memory", "memory_terms", "MemoryTerms", "stage_params", "nccl_groups",
           "candidate_stages"]


def stage_memory(c: Ctx, A, k: int, states: tuple | None = None, acts: tuple | None = None):
    """Memory terms (bytes) of pipeline stage k's rank: returns (weights, grads, optimizer,
    activations, buffers, offloaded_host, offloaded_nvme, detail values (detail_dict names them)).
    `states` = stage_states of stage k and `acts` = act_invariants(c, A), when the caller
    evaluates several stages (memory_terms)."""
    (weights, g_bytes, o_bytes, host_b, nvme_b, w_dense, w_exp, fp8_copy, zero3_live, fsdp, bucket, dense,
     expert) = states or stage_states(c, A, k, state_invariants(c, A))
    (per_dense, per_moe, div, s_b, mask, act_out, act_work_dense, act_work_moe, pp_buf,
     tpo) = acts or act_invariants(c, A)
    n_layers, n_dense, n_moe = c.split[k]
    first, last = k == 0, k == c.pp - 1

    # ---- activations
    if not n_dense:
        per_dense = act_work_dense = 0.0
    if not n_moe:
        per_moe = act_work_moe = 0.0
    inflight = chunks_in_flight(c, k)
    v = c.vpp
    if c.hsplit is None:
        share = chunk_share(c, k, inflight)
        act_layers = (n_dense * per_dense + n_moe * per_moe) * share if share is not None else \
            (n_dense * per_dense + n_moe * per_moe) / v * inflight
    else:   # a hybrid stack: the sum over its layer kinds
        per_stage, act_work_dense = hybrid_stage_acts(c, A, k)
        act_layers = per_stage / v * inflight
        act_work_moe = 0.0
    off = offloaded_layers(c, A, n_layers)
    if off:
        # pp 1: one micro-batch in flight; `off` layers leave the GPU but for one layer's double buffer
        per_layer = act_layers / n_layers
        act_layers -= (off - 1) * per_layer
        host_b += off * per_layer
    act_emb = 0.0
    if first:  # token/position ids (8sb) + embedding dropout mask (sbh), per in-flight micro-batch
        act_emb = (8.0 * s_b + mask * s_b * c.h / div) * max(1, inflight // v)
    if not last:
        act_out = 0.0  # the logits term (see act_invariants) is the last stage's
    # the working layer of full recompute (0 otherwise): the larger of a dense and an MoE layer here
    act_work = act_work_moe if act_work_moe > act_work_dense else act_work_dense   # max(), without the call
    activations = act_layers + act_emb + act_out + act_work

    buffers = zero3_live + fsdp + bucket + pp_buf + tpo

    detail = (w_dense, w_exp, fp8_copy, act_layers, act_emb, act_out, act_work, zero3_live, fsdp, bucket, pp_buf,
              tpo, dense, expert, n_layers, inflight)   # named in detail_dict
    return weights, g_bytes, o_bytes, activations, buffers, host_b, nvme_b, detail


def detail_dict(detail: tuple, cuda_context: int, nccl: float, frag: float) -> dict[str, int]:
    """MemoryEstimate.detail: stage_memory's detail values in whole bytes (or counts), then the
    reserve's terms. Built only for the reported stage."""
    (w_dense, w_exp, fp8_copy, act_layers, act_emb, act_out, act_work, zero3_live, fsdp, bucket, pp_buf, tpo,
     dense, expert, n_layers, inflight) = detail[:16]
    named = detail[16] if len(detail) > 16 else {}      # the Hugging Face stacks' terms (costmodel.hf)
    return {
        "weights_dense": int(w_dense), "weights_expert": int(w_exp), "fp8_weight_copies": int(fp8_copy),
        "act_layers": int(act_layers), "act_embedding": int(act_emb), "act_logits": int(act_out),
        "act_recompute_working": int(act_work), "zero3_live_params": int(zero3_live), "fsdp_gather": int(fsdp),
        "deepspeed_reduce_bucket": int(bucket), "pp_buffers": int(pp_buf), "tp_overlap_buffers": int(tpo),
        "params_dense": int(dense), "params_expert": int(expert), "layers": n_layers,
        "chunks_in_flight": inflight, "cuda_context": cuda_context, "nccl": int(nccl), "fragmentation": int(frag),
    } | named


def stage_params(detail: tuple) -> tuple[int, int]:
    """(dense, expert) parameters on one rank of the stage, from stage_memory's detail values."""
    return int(detail[12]), int(detail[13])


def nccl_groups(c: Ctx) -> int:
    """Communicators this rank uses: TP, CP, dense DP(xCP), PP, EP, expert-DP when each is > 1."""
    n = (c.tp > 1) + (c.cp > 1) + (c.dense_shard > 1) + (c.pp > 1)
    if c.experts > 1:
        n += (c.ep > 1) + (c.edp > 1 and c.edp != c.dense_shard)
    return n


def candidate_stages(c: Ctx) -> list[int]:
    """First, last and the heaviest middle stage: the only candidates for the most-loaded rank
    (computed once per pipeline degree in context._split, where the rule is written out)."""
    return list(c.candidates)


class MemoryTerms(NamedTuple):
    """Bytes per GPU of one pipeline stage's rank, term by term (floats, as computed)."""

    stage: int
    weights: float
    gradients: float
    optimizer: float
    activations: float
    buffers: float
    reserve: float
    """CUDA context + NCCL buffers + fragmentation."""
    total: float
    host: float
    """Offloaded states kept in host memory (before DeepSpeed's buffer factor)."""
    nvme: float
    """Offloaded states kept on NVMe."""
    detail: tuple
    """The activation and buffer parts that detail_dict names."""
    nccl: float
    fragmentation: float


_terms = tuple.__new__          # (a NamedTuple's own constructor is several times slower on this hot path)


def memory_terms(c: Ctx, A) -> tuple[MemoryTerms, dict]:
    """The most-loaded rank's MemoryTerms, and {stage: detail values} of every candidate stage."""
    best = None
    details = {}
    nccl = A.nccl_bytes_per_group * nccl_groups(c)
    acts = act_invariants(c, A)
    for k, states in zip(c.candidates, candidate_states(c, A)):
        w, g, o, act, buf, host, nvme, det = stage_memory(c, A, k, states, acts)
        if c.stated_stack is not None and hf_applies(c):     # the Hugging Face stacks' own terms (costmodel.hf)
            peak = hf_peak(c, A, g, det[12] + det[13])
            g, act = peak.gradients, peak.activations
            det = det[:3] + (act - peak.loss - peak.working, 0.0, peak.loss, peak.working) + det[7:] + (peak.detail,)
        details[k] = det
        frag = A.fragmentation_fraction * (act + buf)
        reserve = A.cuda_context_bytes + nccl + frag
        total = w + g + o + act + buf + reserve
        if best is None or total > best.total:
            best = _terms(MemoryTerms, (k, w, g, o, act, buf, reserve, total, host, nvme, det, nccl, frag))
    return best, details
