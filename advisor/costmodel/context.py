"""Turn (cluster, model, layout, training) into one flat bag of plain numbers, once per call.

Everything downstream (memory.py, comm.py, time.py) reads these attributes and does arithmetic
only: no pydantic access, no string formatting, no pint. Degrees and groups follow Megatron-LM's
rank order "tp-cp-ep-dp-pp" (NVIDIA/Megatron-LM megatron/core/parallel_state.py `RankGenerator`):
the dense data-parallel group that reduces gradients and shards the distributed optimizer is
dp*cp ranks (get_data_parallel_group(with_context_parallel=True)); expert parameters live on an
etp x ep grid with expert-DP = world / (etp * ep * pp) (M2).
"""

from __future__ import annotations

from ..errors import InputError
from ..inputs.architecture import ParameterCount, count_parameters, gdn_dims, hybrid_counts, mamba_dims, windowed_layers
from ..inputs.finetune import DEFAULT_LORA_RANK, FROZEN_BASE_TASKS, priced_targets
from ..inputs.pipeline import stage_layers
from ..inputs.precision import recipe
from ..inputs.profile import Profile, profile_for

__all__ = ["Ctx", "resolve", "hbm_bandwidth", "memoised", "remember", "is_shape_error", "clear_memos"]

MEGATRON_FRAMEWORKS = ("megatron", "megatron+deepspeed")
DEEPSPEED_FRAMEWORKS = ("deepspeed", "megatron+deepspeed")

# The fields of the InputErrors `resolve` raises for a layout's shape: the degrees do not multiply to
# the GPU count, etp*ep*pp does not divide it, the batch does not split over the micro-batches.
_SHAPE_FIELDS = frozenset({"Layout.dp", "Layout.ep", "Layout.num_microbatches", "Training.global_batch_size"})


def is_shape_error(exc: Exception) -> bool:
    """True for the InputError of a layout whose shape cannot be estimated (the audit reports those
    as findings); any other error is the caller's input, or a bug, and must propagate."""
    return isinstance(exc, InputError) and exc.field in _SHAPE_FIELDS


# A part without a stated memory bandwidth is priced at the A100's FLOP:byte ratio (312e12 / 2.04e12 = 153).
FLOPS_PER_HBM_BYTE = 150.0


def hbm_bandwidth(gpu) -> float:
    """Device memory bandwidth, bytes/s: the preset's datasheet figure (GPU.memory_bandwidth)."""
    return float(gpu.memory_bandwidth) if gpu.memory_bandwidth else gpu.peak_flops / FLOPS_PER_HBM_BYTE


class Ctx:
    """The flat bag of plain numbers `resolve` returns. A plain class: `resolve` fills an instance's
    `__dict__` in one go from the cached cluster/model/training part (`_static`) and the layout's own
    degrees, which is several times cheaper than a 60-argument constructor on the planner's hot path.
    Read-only once built."""

    # degrees
    world: int
    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    etp: int
    edp: int
    vpp: int
    overlap_p2p: bool  # interleaved-schedule p2p overlapped with compute (Layout.overlap_p2p_comm, Megatron)
    m: int
    b: int
    gbs: int
    dense_shard: int   # dp * cp: the group that reduces dense gradients / shards dense optimizer
    framework: str
    megatron: bool
    deepspeed: bool
    zero: int
    sp: bool
    recompute: str
    offload: str
    offload_device: str
    precision: str
    gemm: str          # format of the linear-layer GEMMs: "16-bit", "fp8" or "fp4" (inputs.precision)
    lowp_bytes: float  # bytes per quantised element, scales included (0 for 16-bit)
    weight_copies: int # quantised weight copies kept by Transformer Engine (0 for 16-bit)
    flash: bool
    cuda_graphs: bool  # the step replays CUDA graphs (Training.cuda_graphs): no per-kernel host cost
    stack: str         # the model code's kernels: "megatron" (Megatron-Core + Transformer Engine) or "eager"
    prof: Profile      # the GPU's measured (or derived) kernel efficiencies (inputs.profile)
    mla_dims: tuple | None  # MLA (q_lora, kv_lora, qk_rope, qk_nope, v head dims); None without MLA
    # fine-tuning (Training.task; costmodel.adapters)
    frozen: bool       # LoRA / QLoRA: the base weights get no gradients and no optimizer states
    qlora: bool        # the frozen linears are stored in 4-bit NF4
    lora_rank: int     # 0 unless frozen
    lora_targets: tuple
    lora_dropout: float  # PEFT's lora_dropout (0 unless frozen)
    # the stated stack and optimizer (Training.framework, .optimizer, .master_weights; costmodel.hf)
    stated_stack: str | None  # Training.framework; inputs.stacks.HF_STACKS run transformers' model code (costmodel.hf)
    optimizer: str
    master: str        # "fp32" or "none"
    # sequence
    seq: int
    seq_attn: float    # keys per query the attention FLOPs count, as a full s x s matrix would (sliding windows)
    s_loc: float
    # model shape
    L: int
    h: int
    a: int
    kv: int
    wq: int
    wk: int
    wv: int
    wo: int
    latent: int
    kv_div: int
    f: int
    f_moe: int
    gated: bool
    experts: int
    topk: int
    router_groups: int           # group-limited routing (Model.router_groups / router_group_topk)
    router_group_topk: int | None
    shared: int
    dense_first: int
    moe_freq: int
    vocab: int
    vpad: int
    tied: bool
    gpt_style: bool    # biases or learned positions: GPT-2/3-style, trained with dropout
    pc: ParameterCount
    # hybrid stacks (Model.hybrid_pattern); None for attention + MLP layers, and then nothing reads them
    hyb: tuple | None    # linear-mixer sizes (d_inner, ngroups*d_state, nheads, conv channels, d_state, chunk, d_conv, ngroups, kind, ...): _linear_mixer
    hcounts: tuple | None  # (Mamba, attention, MLP, MoE) layers of the whole stack
    pattern: str | None    # Model.hybrid_pattern
    parallel: bool         # Model.parallel_mixers: each M* pair shares one pre-norm and its input
    hsplit: tuple | None   # per stage: (Mamba, attention, MLP, MoE) layers; split is (layers, MLP, MoE) then
    kv_params: int
    pos_params: int
    # cluster
    capacity: int
    peak: float
    peak_fp8: float
    peak_fp4: float
    hbm: float
    nvlink_bw: float     # unidirectional per GPU
    nvl_rate: float | None      # measured bus bandwidth of bulk collectives in the NVLink domain (Profile.collectives)
    nvl_a2a_rate: float | None  # the same of all-to-all; None: Assumptions' efficiencies of nvlink_bw
    net_bw: float        # unidirectional per GPU
    domain: int
    gpus_per_node: int
    host_per_gpu: float
    host_bw: float | None  # GPU.host_bandwidth (None: Assumptions.pcie_bandwidth)
    nvme_per_gpu: float | None
    # pipeline split (depends on pp only; see _split)
    stages: tuple        # layers per stage (stage_layers)
    split: tuple         # per stage: (layers, dense layers, MoE layers)
    candidates: tuple    # stages that can be the most-loaded one (memory.candidate_stages)
    # one dict per (cluster, model, training), shared by every layout's Ctx: memo of terms that depend
    # on a few layout degrees only (activations._acts, act_invariants; states.candidate_states; time._plans, the DP terms);
    # entries are immutable tuples, set atomically (memoised, remember)
    memo: dict

    def __repr__(self) -> str:
        return f"Ctx({', '.join(f'{k}={v!r}' for k, v in self.__dict__.items())})"


# ----------------------------------------------------------------------------- the cached part

# Everything that depends only on (cluster, model, training), which stay the same objects through
# one recommendation while the planner tries hundreds of layouts. Keyed by the objects' ids; each
# entry holds the objects themselves, so an id cannot be reused while its entry lives, and a hit is
# confirmed by identity (`is`). Hashing the frozen pydantic models instead costs ~1 us each per call.
# Thread safety: single dict get/set/clear are atomic in CPython and the values are never mutated
# after they are published (a per-pp entry may be computed twice by racing threads; both are equal).
_STATIC: dict = {}
_STATIC_MAX = 16
# The second level: the same entries by the inputs' values (their JSON, ~6 us for the three), so that
# equal inputs built anew share one memo: a preset name resolved again by the next call, a service's
# request parsed again. Every entry is a pure function of those values (and of the layout and the
# Assumptions its keys name), so the terms are the same numbers whichever call computed them.
_BY_VALUE: dict = {}


def clear_memos() -> None:
    """Forget every (cluster, model, training) entry and its memo: the next call computes each term
    afresh (benchmarks/perf.py times such cold calls beside warm ones)."""
    _STATIC.clear()
    _BY_VALUE.clear()


def _value_key(cluster, model, training) -> tuple:
    return (type(cluster).__qualname__, cluster.model_dump_json(), type(model).__qualname__,
            model.model_dump_json(), type(training).__qualname__, training.model_dump_json())


def _static(cluster, model, training) -> tuple:
    """(field values for Ctx, {pp: _split}, MLA or not) of (cluster, model, training), built once
    per triple of values. Raises the InputErrors of an unresolved training (never cached)."""
    key = (id(cluster), id(model), id(training))
    hit = _STATIC.get(key)
    if hit is not None and hit[0] is cluster and hit[1] is model and hit[2] is training:
        return hit[3]
    by_value = _value_key(cluster, model, training)
    value = _BY_VALUE.get(by_value)
    if value is None:
        value = _BY_VALUE[by_value] = _build_static(cluster, model, training)
    if len(_STATIC) >= _STATIC_MAX:
        _STATIC.clear()
    if len(_BY_VALUE) > _STATIC_MAX:
        _BY_VALUE.clear()
        _BY_VALUE[by_value] = value
    _STATIC[key] = (cluster, model, training, value)
    return value


def _build_static(cluster, model, training) -> tuple:
    """_static's entry, computed."""
    _check_resolved(training)
    pc = count_parameters(model)
    h, a = model.hidden, model.heads
    kv = model.kv_heads or a
    wq, wk, wv, wo, latent, kv_params, mla_dims = _attention_widths(model)
    vocab = model.vocab
    pattern = getattr(model, "hybrid_pattern", None)
    hyb = hcounts = None
    if pattern is not None and training.task in FROZEN_BASE_TASKS:
        raise InputError("Training.task", training.task, "'pretrain' or 'sft' for a hybrid model",
                         "LoRA / QLoRA adapters on Mamba-2 layers are not modelled")
    if pattern is not None:
        hcounts = hybrid_counts(pattern)
        if hcounts[0]:
            hyb = _linear_mixer(model, pattern)
        else:
            hyb = (0, 0, 0, 0, 0, 1, 0, 1, "M")
    g = cluster.gpu
    prof = cluster.profile or profile_for(g)
    peak = g.peak_flops
    rec = recipe(training.precision)
    frozen = training.task in FROZEN_BASE_TASKS
    fields = dict(
        world=cluster.gpus, gbs=training.global_batch_size,
        seq_attn=_packed_span(_attended_span(model, training.seq_len), training),
        precision=training.precision, gemm=rec.gemm, weight_copies=rec.weight_copies,
        lowp_bytes=rec.value_bytes + rec.scale_bytes if rec.low_precision else 0.0, flash=training.flash_attention, seq=training.seq_len,
        cuda_graphs=training.cuda_graphs, prof=prof, mla_dims=mla_dims,
        L=model.layers, h=h, a=a, kv=kv, wq=wq, wk=wk, wv=wv, wo=wo, latent=latent,
        f=model.ffn_hidden, f_moe=model.moe_ffn_hidden or model.ffn_hidden,
        gated=model.activation == "swiglu", experts=model.experts, topk=model.experts_per_token,
        router_groups=model.router_groups, router_group_topk=model.router_group_topk,
        shared=model.shared_experts, dense_first=model.dense_layers if model.experts > 1 else model.layers,
        moe_freq=model.moe_layer_freq, vocab=vocab, tied=model.tied_embeddings,
        gpt_style=model.bias or model.position_embedding == "learned", pc=pc, hyb=hyb, hcounts=hcounts,
        pattern=pattern, parallel=getattr(model, "parallel_mixers", False),
        kv_params=kv_params, pos_params=pc.embedding - vocab * h,
        frozen=frozen, qlora=training.task == "qlora",
        lora_rank=(training.lora_rank or DEFAULT_LORA_RANK) if frozen else 0,
        lora_targets=priced_targets(training.lora_targets, training.framework) if frozen else (),
        lora_dropout=(training.lora_dropout or 0.0) if frozen else 0.0,
        stated_stack=training.framework, optimizer=training.optimizer, master=training.master_weights,
        capacity=g.memory, peak=peak, peak_fp8=g.peak_flops_fp8 or peak,
        peak_fp4=g.peak_flops_fp4 or g.peak_flops_fp8 or peak, hbm=hbm_bandwidth(g),
        nvlink_bw=cluster.intra_node_bandwidth / 2.0, net_bw=cluster.inter_node_bandwidth,
        nvl_rate=_measured_rate(prof, ("all_reduce", "all_gather", "reduce_scatter"), cluster),
        nvl_a2a_rate=_measured_rate(prof, ("all_to_all",), cluster),
        domain=cluster.nvlink_domain, gpus_per_node=cluster.gpus_per_node,
        host_per_gpu=cluster.host_memory_per_node / cluster.gpus_in_node, host_bw=g.host_bandwidth,
        nvme_per_gpu=cluster.nvme_per_node / cluster.gpus_in_node if cluster.nvme_per_node is not None else None,
    )
    fields.update(dict.fromkeys(_PER_LAYOUT))
    fields["memo"] = {}
    return fields, {}, model.mla is not None


def _check_resolved(training) -> None:
    """The InputErrors of a training whose sequence length or global batch is not resolved yet."""
    if training.seq_len is None:
        raise InputError("Training.seq_len", None, "a resolved sequence length (tokens)",
                         "estimate needs the sequence length; resolve it from the model first")
    if training.global_batch_size is None:
        raise InputError("Training.global_batch_size", None, "a resolved global batch size (sequences)",
                         "estimate needs the global batch; resolve it first")


def _attention_widths(model) -> tuple:
    """(wq, wk, wv, wo, latent, kv_params, mla_dims): the widths of Q, K, V and the attention output,
    MLA's latent widths and its dims (0 and None without MLA), and the K/V projections' parameters."""
    h, a = model.hidden, model.heads
    kv = model.kv_heads or a
    hd = model.head_dim or h // a
    if model.mla is None:
        return a * hd, kv * hd, kv * hd, a * hd, 0, 2 * h * kv * hd, None
    mla = model.mla
    qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    latent = (mla.q_lora_rank or 0) + mla.kv_lora_rank + mla.qk_rope_head_dim
    dims = (mla.q_lora_rank or 0, mla.kv_lora_rank, mla.qk_rope_head_dim, mla.qk_nope_head_dim, mla.v_head_dim)
    return a * qk, a * qk, a * mla.v_head_dim, a * mla.v_head_dim, latent, 0, dims


def _measured_rate(prof, ops: tuple, cluster) -> float | None:
    """A profile's measured bus bandwidth of `ops` inside the NVLink domain, never above the link's
    unidirectional bandwidth; None without a measurement."""
    rate = prof.bus_bandwidth(ops)
    return None if rate is None else min(rate, cluster.intra_node_bandwidth / 2.0)


def _attended_span(model, seq: int) -> float:
    """The sequence length the attention FLOPs use (2 s (wq + wo) per token and layer, of which a
    causal kernel executes flash_causal_fraction), averaged over the layers: a layer with a window
    w < s attends min(i + 1, w) keys at position i, w - w(w - 1)/(2s) on average, which is what a
    full causal matrix of 2w - w(w - 1)/s columns would execute (Beltagy et al. 2020, Longformer
    §3.1: sliding-window attention is O(s w)); a chunked layer attends (c + 1)/2 keys on average.
    The window applies to every attention kind."""
    if getattr(model, "dsa_topk", None) is not None:
        return _dsa_span(model, seq)
    windowed = windowed_layers(model)
    if not windowed:
        return float(seq)
    if model.attention_chunk is not None:
        # chunked: position i attends (i mod c) + 1 keys, (c + 1)/2 on average (Llama 4 iRoPE)
        c = model.attention_chunk
        if c >= seq:
            return float(seq)
        span = c + 1.0
    else:
        w = model.sliding_window
        if w >= seq:
            return float(seq)
        span = 2.0 * w - w * (w - 1) / seq
    share = windowed / model.layers
    return (1.0 - share) * seq + share * span


def _dsa_span(model, seq: int) -> float:
    """_attended_span of DeepSeek Sparse Attention (DeepSeek-V3.2, arXiv:2512.02556 §2.1), every layer: a
    query attends its top-k earlier keys, min(i + 1, k) at position i, which counts as a window of k
    (2k - k(k - 1)/s columns of a full causal matrix, as _attended_span's windows); and its lightning
    indexer scores every earlier key with dsa_indexer_heads heads of dsa_indexer_head_dim channels, one
    QK product of the full causal matrix, i.e. s x (heads x head_dim) / (wq + wo) more columns of the
    attention's two (QK and AV over wq + wo channels). The indexer's projections are weights
    (architecture._dsa_indexer), priced with the other GEMMs."""
    k = model.dsa_topk
    sparse = float(seq) if k >= seq else 2.0 * k - k * (k - 1) / seq
    mla = model.mla
    width = model.heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim + mla.v_head_dim)
    return sparse + seq * model.dsa_indexer_heads * model.dsa_indexer_head_dim / width


def _packed_span(span: float, training) -> float:
    """The attended span of packed samples (Training.packed_sample_tokens): block-diagonal attention over
    samples of n tokens is the chunked case, n + 1 columns of a full matrix; never more than the
    layers' own span (a window shorter than the sample keeps bounding it)."""
    n = training.packed_sample_tokens
    if n is None or n >= training.seq_len:
        return span
    return min(span, n + 1.0)


def _split(fields: dict, splits: dict, pp: int) -> tuple:
    """(stages, split, candidates) for pipeline degree pp, once per (cluster, model, training) and
    pp: stage_layers, per stage (layers, dense layers, MoE layers) by moe_layers_before's rule, and
    the stages that can hold the most-loaded rank."""
    hit = splits.get(pp)
    if hit is not None:
        return hit
    stages = tuple(stage_layers(fields["L"], pp))
    if fields["pattern"] is not None:
        return _hybrid_split(fields["pattern"], splits, pp, stages)
    experts, dense_first, freq = fields["experts"], fields["dense_first"], fields["moe_freq"]
    split = []
    lo = 0
    for n_layers in stages:
        n_moe = (_moe_layers_before(lo + n_layers, experts, dense_first, freq)
                 - _moe_layers_before(lo, experts, dense_first, freq))
        split.append((n_layers, n_layers - n_moe, n_moe))
        lo += n_layers
    # First, last and the heaviest middle stages: the only candidates for the most-loaded (and the
    # slowest) rank. Among middle stages the earliest of the most layers holds the most micro-batches
    # in flight; with MoE, the earliest of the most MoE layers (heavier in memory, compute and EP
    # traffic) too, which differs when a middle stage mixes the last dense layers with MoE ones.
    if pp == 1:
        cand = (0,)
    else:
        cand = [0, pp - 1]
        if pp > 2:
            middle = range(1, pp - 1)
            mid = max(middle, key=lambda i: stages[i])
            # a dense middle stage with no more layers than the first holds fewer in-flight
            # micro-batches and no embedding, so it can only be the most-loaded one when it has more
            # (or MoE) layers
            if stages[mid] > stages[0] or experts > 1:
                cand.append(mid)
            if experts > 1:
                mid_moe = max(middle, key=lambda i: (split[i][2], split[i][0]))
                if mid_moe not in cand:
                    cand.append(mid_moe)
        cand = tuple(cand)
    value = (stages, tuple(split), cand)
    if len(splits) < 256:
        splits[pp] = value
    return value


def _hybrid_split(pattern: str, splits: dict, pp: int, stages: tuple) -> tuple:
    """_split of a hybrid stack: stage k holds the next stages[k] characters of the pattern
    (Megatron-Core splits --hybrid-override-pattern by layer over the pipeline stages,
    megatron/core/ssm/mamba_block.py MambaStack); split is (layers, MLP, MoE) per stage, hsplit
    (Mamba, attention, MLP, MoE). Every stage is a candidate for the most-loaded rank (the kinds
    are uneven)."""
    hsplit = []
    lo = 0
    for n in stages:
        hsplit.append(hybrid_counts(pattern[lo:lo + n]))
        lo += n
    split = tuple((n, hs[2], hs[3]) for n, hs in zip(stages, hsplit))
    value = (stages, split, tuple(range(pp)), tuple(hsplit))
    if len(splits) < 256:
        splits[pp] = value
    return value


_new = object.__new__
# The Ctx fields `resolve` sets from the layout (the rest come from _static).
_PER_LAYOUT = ("tp", "pp", "dp", "cp", "ep", "etp", "edp", "vpp", "overlap_p2p", "m", "b", "dense_shard", "framework",
               "megatron", "stack", "deepspeed", "zero", "sp", "recompute", "offload", "offload_device", "s_loc", "kv_div",
               "vpad", "stages", "split", "candidates", "hsplit")


def resolve(cluster, model, layout, training) -> Ctx:
    fields, splits, mla = _static(cluster, model, training)
    world = fields["world"]
    lay = layout
    tp, pp, cp = lay.tp, lay.pp, lay.cp
    dp, m = _degrees(lay, world, fields["gbs"])
    ep = lay.ep
    etp = lay.etp or tp
    b = lay.micro_batch_size

    kv_div = tp if mla else min(tp, fields["kv"])
    framework = lay.framework
    megatron = framework in MEGATRON_FRAMEWORKS
    vocab = fields["vocab"]
    if megatron:  # M22: pad to a multiple of make_vocab_size_divisible_by (128) * TP
        mult = 128 * tp
        vpad = -(-vocab // mult) * mult
    else:
        vpad = vocab
    value = _split(fields, splits, pp)
    stages, split, cand = value[:3]
    # A tp or cp that does not split the Mamba-2 / Gated DeltaNet heads and groups is priced (with the
    # fractional per-rank share), as any other shape the planner's space does not filter: the audit
    # rules refuse it for every framework (megatron.mamba-heads-groups, megatron.gdn-heads; the
    # DeepSpeed and torchtitan hybrid rules refuse tp > 1 and cp > 1 there).
    d = fields.copy()  # already holds every per-layout key (as None), so no resize below
    d["tp"] = tp
    d["pp"] = pp
    d["dp"] = dp
    d["cp"] = cp
    d["ep"] = ep
    d["etp"] = etp
    d["edp"] = world // (etp * ep * pp)
    d["vpp"] = lay.vpp
    d["overlap_p2p"] = megatron and lay.vpp > 1 and lay.overlap_p2p_comm
    d["m"] = m
    d["b"] = b
    d["dense_shard"] = dp * cp
    d["framework"] = framework
    d["megatron"] = megatron
    d["stack"] = "megatron" if megatron else "eager"
    d["deepspeed"] = framework in DEEPSPEED_FRAMEWORKS
    d["zero"] = lay.zero_stage
    d["sp"] = lay.sp and tp > 1
    d["recompute"] = lay.recompute
    d["offload"] = lay.offload
    d["offload_device"] = lay.offload_device
    d["s_loc"] = fields["seq"] / cp
    d["kv_div"] = kv_div
    d["vpad"] = vpad
    d["stages"] = stages
    d["split"] = split
    d["candidates"] = cand
    d["hsplit"] = value[3] if len(value) > 3 else None
    c = _new(Ctx)
    c.__dict__ = d
    return c


def _degrees(lay, world: int, gbs: int) -> tuple[int, int]:
    """(dp, micro-batches per step) of layout `lay` on `world` GPUs with global batch `gbs`; the
    InputErrors of degrees that do not tile the world or the batch (Megatron M2, M11)."""
    tp, pp, cp, dp = lay.tp, lay.pp, lay.cp, lay.dp
    if dp is None:
        if world % (tp * pp * cp):
            lay.for_world(world)  # raises the InputError naming the remainder
        dp = world // (tp * pp * cp)
    if tp * pp * cp * dp != world:
        raise InputError("Layout.dp", dp, f"tp*cp*pp*dp equal to the cluster's gpus ({world})",
                         lay.degree_formula(world))
    ep, etp = lay.ep, lay.etp or tp
    if world % (etp * ep * pp):
        raise InputError("Layout.ep", ep, "etp*ep*pp dividing the world size (Megatron M2)",
                         f"gpus({world}) % (etp({etp}) * ep({ep}) * pp({pp})) = {world % (etp * ep * pp)}")
    b = lay.micro_batch_size
    if lay.num_microbatches is None:
        if gbs % (b * dp):
            raise InputError("Training.global_batch_size", gbs, "a multiple of micro_batch_size * dp (Megatron M11)",
                             f"global_batch_size({gbs}) % (micro_batch_size({b}) * dp({dp})) = {gbs % (b * dp)}")
        return dp, gbs // (b * dp)
    m = lay.num_microbatches
    if b * m * dp != gbs:     # else tokens per step and MFU count a batch the step does not run
        raise InputError("Layout.num_microbatches", m,
                         "micro_batch_size * num_microbatches * dp equal to global_batch_size (Megatron M11)",
                         f"mbs({b}) * num_microbatches({m}) * dp({dp}) = {b * m * dp} "
                         f"!= global_batch_size({gbs})")
    return dp, m


def _linear_mixer(model, pattern: str) -> tuple:
    """`hyb`: the linear mixer's sizes (d_inner, ngroups*d_state, nheads, conv channels, d_state, chunk,
    d_conv, ngroups, kind). A Gated DeltaNet layer ("G") fills the Mamba-2 slots with the tensors
    that play the same part in its cost (architecture.gdn_dims): d_inner = the value dim (v and the
    gate z, as Mamba's x and z), ngroups*d_state = the key dim (k and q, as B and C), nheads = 2 x
    value heads (beta and the decay input, as Mamba's dt), ngroups = the key heads; then its value
    heads, key head dim and value head dim."""
    if "G" in pattern:
        v_dim, k_dim, v_heads, conv_ch = gdn_dims(model)
        return (v_dim, k_dim, 2 * v_heads, conv_ch, model.gdn_key_head_dim, model.gdn_chunk, model.gdn_conv,
                model.gdn_key_heads, "G", v_heads, model.gdn_key_head_dim, model.gdn_value_head_dim)
    d_inner, gn, nheads, conv_ch = mamba_dims(model)
    return (d_inner, gn, nheads, conv_ch, model.mamba_state, model.mamba_chunk, model.mamba_conv,
            model.mamba_groups, "M")


# Entries per memo (one per (cluster, model, training); _STATIC keeps up to 16): a recommendation
# stores 400 (70B on 64 GPUs, ~230 KB) to 1,000 (Mixtral-8x22B on 144, DeepSeek-V3 on 2,048, ~650 KB);
# beyond the bound the memo starts over.
MEMO_MAX = 2048


def memoised(c: Ctx, A, key: tuple, compute, *args):
    """compute(*args), kept in c.memo under `key`, which must name every layout field the result
    depends on and id(A). The entry holds A itself, so A's id stays unique while the entry lives;
    entries are never mutated (racing threads may both compute one; the values are equal). Hot
    callers inline the lookup and call `remember` on a miss."""
    hit = c.memo.get(key)
    if hit is not None and hit[0] is A:
        return hit[1]
    return remember(c, A, key, compute(*args))


def remember(c: Ctx, A, key: tuple, value):
    """Store value in c.memo under key (see memoised) and return it."""
    shared = c.memo
    if len(shared) >= MEMO_MAX:
        shared.clear()
    shared[key] = (A, value)
    return value


def moe_layers_before(c: Ctx, n: int) -> int:
    """MoE layers among the first n layers: layers dense_first, dense_first + freq, ... are MoE
    (the same rule as architecture.count_parameters)."""
    return _moe_layers_before(n, c.experts, c.dense_first, c.moe_freq)


def _moe_layers_before(n: int, experts: int, dense_first: int, freq: int) -> int:
    if experts <= 1 or n <= dense_first:
        return 0
    return -(-(n - dense_first) // freq)
