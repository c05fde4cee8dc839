"""The Megatron-LM flags of a model's shape: sizes, attention (GQA, MLA, sparse, local), positions
and RoPE, norms and biases, MoE routing and dispatch, the hybrid Mamba / Gated-DeltaNet stack."""

from __future__ import annotations

from ..costmodel.assumptions import Assumptions
from ..errors import InputError
from ..inputs.layout import Layout
from ..inputs.specs import Model
from .batch import Batch, refused
from .megatron_flags import _Args

def _shape(out: _Args, layout: Layout, model: Model, b: Batch, A: Assumptions) -> None:
    out.add("--num-layers", model.layers)
    out.add("--hidden-size", model.hidden)
    out.add("--ffn-hidden-size", model.ffn_hidden)
    out.add("--num-attention-heads", model.heads)
    if model.mla is None:
        if model.head_dim != model.hidden // model.heads or model.hidden % model.heads:
            out.add("--kv-channels", model.head_dim)
        if model.kv_heads != model.heads:
            out.add("--group-query-attention")
            out.add("--num-query-groups", model.kv_heads)
    out.add("--seq-length", b.seq)
    _positions(out, layout, model, b)
    out.add("--normalization", "RMSNorm" if model.norm == "rmsnorm" else "LayerNorm")
    # Assumptions.dropout_masks: the estimate stores dropout masks exactly when dropout is on; Megatron's
    # default is 0.1 for every model (transformer_config.py hidden_dropout / attention_dropout)
    masks = (model.bias or model.position_embedding == "learned") if A.dropout_masks == "auto" else A.dropout_masks
    out.add("--attention-dropout", 0.1 if masks else 0.0)
    out.add("--hidden-dropout", 0.1 if masks else 0.0)
    if model.activation == "swiglu":
        out.add("--swiglu")
    if not model.tied_embeddings:
        out.add("--untie-embeddings-and-output-weights")
    if not model.bias:
        out.add("--disable-bias-linear")
        if model.qkv_bias:
            out.add("--add-qkv-bias")
    if model.qk_norm:
        out.add("--qk-layernorm")
    if model.attention_output_gate:
        out.add("--attention-output-gate")
    _local_attention(out, model)
    if model.mla is not None:
        _mla(out, model)
    if model.dsa_topk is not None:
        _dsa(out, model)
    _moe(out, layout, model, A)
    if model.mtp_layers:
        out.add("--mtp-num-layers", model.mtp_layers)
        if model.hybrid_pattern is not None:
            _hybrid_mtp(out, model)
    if model.hybrid_pattern is not None and "G" in model.hybrid_pattern:
        _gdn(out, model)
    if model.hybrid_pattern is not None:
        _hybrid(out, model)


def _mla(out: _Args, model: Model) -> None:
    """Multi-latent attention (DeepSeek-V2/V3): the low-rank query and key-value projections."""
    a = model.mla
    out.add("--multi-latent-attention")
    if a.q_lora_rank:
        out.add("--q-lora-rank", a.q_lora_rank)
    out.add("--kv-lora-rank", a.kv_lora_rank)
    out.add("--qk-head-dim", a.qk_nope_head_dim)
    out.add("--qk-pos-emb-head-dim", a.qk_rope_head_dim)
    out.add("--v-head-dim", a.v_head_dim)


def _hybrid(out: _Args, model: Model) -> None:
    # Megatron-Core's hybrid stack: pretrain_mamba.py with the Mamba layer spec (mamba_builders.py
    # needs --spec) and the pattern; d_conv 4 and chunk 128 are MambaMixer's fixed defaults
    out.add("--spec", "megatron.core.models.mamba.mamba_layer_specs", "mamba_stack_spec")
    out.add("--hybrid-layer-pattern" if out.version == "main" else "--hybrid-override-pattern", model.hybrid_pattern)
    if "M" in model.hybrid_pattern:
        if (model.mamba_conv, model.mamba_chunk) != (4, 128):
            raise InputError("Model.mamba_conv", (model.mamba_conv, model.mamba_chunk),
                             "(4, 128): Megatron-LM has no flag for MambaMixer's d_conv and chunk_size")
        out.add("--mamba-state-dim", model.mamba_state)
        out.add("--mamba-head-dim", model.mamba_head_dim)
        out.add("--mamba-num-groups", model.mamba_groups)
        out.add("--mamba-num-heads", model.mamba_heads)


def _local_attention(out: _Args, model: Model) -> None:
    """Sliding-window attention and attention sinks, as the estimate prices them, in the spelling Megatron-Bridge's
    gpt-oss and Gemma-2 bridges use (NVIDIA-NeMo/Megatron-Bridge@067f987 models/gpt_oss/gpt_oss_bridge.py L86-88:
    window_size (sliding_window - 1, 0), window_attn_skip_freq 2, softmax_type learnable). Chunked attention
    (Llama 4) has no Megatron-LM flag: megatron_notes says so."""
    if model.sliding_window is not None:
        out.add("--window-size", f"{model.sliding_window - 1},0")
        if model.global_attention_every:
            out.add("--window-attn-skip-freq", model.global_attention_every)
    if model.attention_sinks:
        out.add("--softmax-type", "learnable")


# The weight of the DSA indexer's KL loss (Megatron-Core dsa_indexer_loss_coeff, None by default, which dsa.py
# cannot compare with 0): Megatron-Bridge's GLM-5 bridge's value (NVIDIA-NeMo/Megatron-Bridge@
# 067f987df03b8355b03192d88d70f1709fedf51a src/megatron/bridge/models/glm_moe_dsa/glm5_bridge.py
# dsa_indexer_loss_coeff 0.001); the indexer's inputs are detached, so it weighs only the indexer's own training.
DSA_INDEXER_LOSS_COEFF = 0.001


def _dsa(out: _Args, model: Model) -> None:
    """DeepSeek Sparse Attention: the sparse path the estimate prices is core_v0.19.0's and main's
    (audit rules megatron.dsa-release, megatron.dsa-needs-core-0.19); core_v0.16.1's DSAttention computes
    the dense score matrix, so the export refuses it there rather than write a different run."""
    if out.version != "main":
        raise InputError("Model.dsa_topk", model.dsa_topk, f"no sparse DSA path for Megatron-LM {out.version}",
                         "export for --framework-version main, whose DSAttention attends the top-k keys only "
                         "(audit rule megatron.dsa-needs-core-0.19)")
    out.add("--experimental-attention-variant", "dsa")
    out.add("--dsa-indexer-n-heads", model.dsa_indexer_heads)
    out.add("--dsa-indexer-head-dim", model.dsa_indexer_head_dim)
    out.add("--dsa-indexer-topk", model.dsa_topk)
    out.add("--dsa-indexer-loss-coeff", DSA_INDEXER_LOSS_COEFF)


def _hybrid_mtp(out: _Args, model: Model) -> None:
    """A hybrid stack's MTP modules, each an attention and an MoE (or MLP) layer: main converts the
    legacy pattern flag into its unified pattern (audit rule megatron.hybrid-mtp-needs-main)."""
    if out.version != "main":
        raise InputError("Model.mtp_layers", model.mtp_layers, f"0 for a hybrid stack on Megatron-LM {out.version}",
                         "export for --framework-version main, which takes --mtp-hybrid-override-pattern "
                         "(audit rule megatron.hybrid-mtp-needs-main)")
    out.add("--mtp-hybrid-override-pattern", "*E" if model.is_moe else "*-")


def _gdn(out: _Args, model: Model) -> None:
    """Gated DeltaNet layers: Megatron-LM main's hybrid stack builds 'G' from the same layer spec as the
    Mamba layers (megatron/core/models/hybrid/hybrid_layer_allocation.py L18, hybrid_layer_specs.py
    gdn_layer @ d98e8a64; mamba_layer_specs re-exports it); core_v0.16.1's MambaStack has no 'G' (its GDN
    is a GPT attention variant without context parallelism: audit rule megatron.gdn-needs-main). The
    chunk length is the kernel's own."""
    if out.version != "main":
        raise InputError("Model.hybrid_pattern", model.hybrid_pattern,
                         "no Gated DeltaNet layers (G) for Megatron-LM " + out.version,
                         "export for --framework-version main, whose hybrid stack builds them "
                         "(audit rule megatron.gdn-needs-main)")
    out.add("--linear-num-key-heads", model.gdn_key_heads)
    out.add("--linear-num-value-heads", model.gdn_value_heads)
    out.add("--linear-key-head-dim", model.gdn_key_head_dim)
    out.add("--linear-value-head-dim", model.gdn_value_head_dim)
    out.add("--linear-conv-kernel-dim", model.gdn_conv)


def _positions(out: _Args, layout: Layout, model: Model, b: Batch) -> None:
    """Learned tables keep their size (the audit refuses a longer sequence); RoPE gets a table as
    long as the sequence, so context extension runs (megatron.rope-context-extension notes it);
    ALiBi only under Megatron-DeepSpeed, whose BigScience fork implements it."""
    if model.position_embedding == "alibi" and layout.framework == "megatron+deepspeed":
        out.add("--max-position-embeddings", max(model.max_position or 0, b.seq))
        out.add("--position-embedding-type", "alibi")
        return
    if model.position_embedding == "alibi":
        raise refused("Model.position_embedding", "alibi", "'rope' or 'learned' for Megatron-LM", "megatron.no-alibi",
                      "--position-embedding-type has no ALiBi choice (arguments.py _add_network_size_args)")
    if model.position_embedding == "learned":
        table = model.max_position or model.seq_len or b.seq
        if b.seq > table:
            raise refused("Training.seq_len", b.seq, f"at most the learned position table ({table})",
                          "megatron.max-position-covers-sequence",
                          "Megatron asserts max_position_embeddings >= seq_length")
        out.add("--max-position-embeddings", table)
        out.add("--position-embedding-type", "learned_absolute")
    elif model.position_embedding == "none":
        out.add("--max-position-embeddings", max(model.max_position or 0, b.seq))
        out.add("--position-embedding-type", "none")
    else:
        out.add("--max-position-embeddings", max(model.max_position or 0, b.seq))
        yarn = model.rope_scaling == "yarn" and model.mla is None     # the GPT model's YaRN (_gpt_yarn)
        if yarn and layout.framework == "megatron+deepspeed":
            raise refused("Model.rope_scaling", "yarn", "'llama3' or 'none' without MLA under Megatron-DeepSpeed",
                          "megatron.rope-scaling-kind",
                          "Megatron-DeepSpeed's parser has --use-rotary-position-embeddings and --rotary-percent, "
                          "no RoPE scaling (tests/data/frameworks/megatron-deepspeed.json)")
        out.add("--position-embedding-type", "yarn" if yarn and out.version == "main" else "rope")
        _rope(out, model)


def _rope(out: _Args, model: Model) -> None:
    """The RoPE base (Megatron's default is 10000 whatever the model) and the model's frequency scaling:
    Llama 3.1's with --use-rope-scaling, YaRN for MLA with --rope-type yarn (MLATransformerConfig
    defaults to yarn, so a plain-RoPE MLA model says --rope-type rope)."""
    theta = 10000.0 if model.rope_theta is None else model.rope_theta
    if theta != int(theta):
        raise refused("Model.rope_theta", theta, "an integer under Megatron-LM", "megatron.rotary-base-integer",
                      "--rotary-base is declared type=int (arguments.py)")
    out.add("--rotary-base", int(theta))
    if model.rotary_percent != 1.0:
        out.add("--rotary-percent", model.rotary_percent)
    if model.rope_scaling == "llama3":
        if model.mla is not None:
            raise refused("Model.rope_scaling", "llama3", "'yarn' or 'none' for an MLA model", "megatron.rope-scaling-kind",
                          "MLA takes --rope-type rope|yarn; --use-rope-scaling is the GPT model's")
        out.add("--use-rope-scaling")
        out.add("--rope-scaling-factor", model.rope_scaling_factor)
    elif model.rope_scaling == "yarn" and model.mla is None:
        _gpt_yarn(out, model)
    elif model.rope_scaling == "yarn":
        out.add("--rope-type", "yarn")
        out.add("--rotary-scaling-factor", model.rope_scaling_factor)
    elif model.mla is not None:
        out.add("--rope-type", "rope")


def _gpt_yarn(out: _Args, model: Model) -> None:
    """YaRN on a GPT (non-MLA) model: main's --position-embedding-type yarn, whose factor and original
    context argument_utils.py _apply_yarn_config_from_args copies into the yarn_* fields GPTModel reads
    (@ d98e8a64); core_v0.16.1 has no such choice (audit rule megatron.yarn-gpt-release says which
    releases run it). The original context is the model's pretraining length (the HF reader takes
    rope_scaling.original_max_position_embeddings); beta_fast / beta_slow / mscale stay Megatron's
    defaults (32, 1, 1), and megatron_notes names what a checkpoint may set otherwise."""
    if out.version != "main":
        raise InputError("Model.rope_scaling", "yarn", f"no YaRN on a GPT model for Megatron-LM {out.version}",
                         "export for --framework-version main, whose --position-embedding-type takes yarn "
                         "(audit rule megatron.yarn-gpt-release)")
    out.add("--rotary-scaling-factor", model.rope_scaling_factor)
    if model.seq_len is not None:
        out.add("--yarn-original-max-position-embeddings", model.seq_len)


def _moe(out: _Args, layout: Layout, model: Model, A: Assumptions) -> None:
    if not model.is_moe:
        if layout.ep > 1:
            raise refused("Layout.ep", layout.ep, "1 for a dense model", "megatron.experts-divisible-by-ep",
                          f"{model.name} has no experts")
        return
    out.add("--num-experts", model.experts)
    out.add("--moe-router-topk", model.experts_per_token)
    out.add("--moe-router-score-function", model.router_score)
    if model.router_expert_bias:
        out.add("--moe-router-enable-expert-bias")
    if model.router_topk_scale is not None:
        out.add("--moe-router-topk-scaling-factor", model.router_topk_scale)
    _dispatcher(out, layout, A)
    _balancing(out, model)
    # the expert path the estimate prices: TE's grouped expert GEMMs (TEGroupedMLP), off by default in
    # Megatron-Core (TransformerConfig.moe_grouped_gemm) and on in every Megatron-Bridge performance
    # config (scripts/performance) and the MoE README's compute optimizations
    out.add("--moe-grouped-gemm")
    if model.router_groups > 1:
        out.add("--moe-router-num-groups", model.router_groups)
        if model.router_group_topk is not None:
            out.add("--moe-router-group-topk", model.router_group_topk)
    out.add("--moe-ffn-hidden-size", model.moe_ffn_hidden)
    if model.moe_latent_size is not None:
        out.add("--moe-latent-size", model.moe_latent_size)
    if model.shared_experts:
        out.add("--moe-shared-expert-intermediate-size", model.shared_experts * model.moe_ffn_hidden)
        if model.shared_expert_gate:
            out.add("--moe-shared-expert-gate")
    if model.dense_layers or model.moe_layer_freq > 1:
        out.add("--moe-layer-freq", _moe_layer_pattern(model))


# The auxiliary load-balancing loss weight Megatron's MoE README starts a softmax-routed model at
# (NVIDIA/Megatron-LM megatron/core/transformer/moe/README.md "Basic MoE Training" @ d98e8a64: --moe-aux-loss-coeff
# 1e-2); Megatron-Core's own default is 0.0, i.e. no balancing.
MOE_AUX_LOSS_COEFF = 1e-2


def _balancing(out: _Args, model: Model) -> None:
    """The estimate assumes the experts stay balanced (Assumptions.moe_load_imbalance): a router with the
    expert bias (DeepSeek-V3's aux-loss-free balancing) balances by the bias; any other gets the auxiliary loss,
    which Megatron-Core leaves at 0. The router runs in fp32 (the README's note on router precision)."""
    if not model.router_expert_bias:
        out.add("--moe-router-load-balancing-type", "aux_loss")
        out.add("--moe-aux-loss-coeff", MOE_AUX_LOSS_COEFF)
    if "--moe-router-dtype" not in out:
        out.add("--moe-router-dtype", "fp32")


def _dispatcher(out: _Args, layout: Layout, A: Assumptions) -> None:
    """Assumptions.moe_token_dispatcher. Megatron's default is allgather, which the estimate never
    assumes. The flex dispatcher asserts tp x ep > 1 (moe/token_dispatcher.py, core_v0.16.1 L1346);
    on one rank no token moves and both dispatchers cost the same, so alltoall is written there."""
    if A.moe_token_dispatcher == "deepep" and layout.tp * layout.ep > 1:
        out.add("--moe-token-dispatcher-type", "flex")
        out.add("--moe-flex-dispatcher-backend", "deepep")
        out.add("--moe-router-dtype", "fp32")
    else:
        out.add("--moe-token-dispatcher-type", "alltoall")


def _moe_layer_pattern(model: Model) -> str:
    """--moe-layer-freq as a Python list expression: 0 = dense layer, 1 = MoE layer."""
    if model.moe_layer_freq == 1:
        return f"([0]*{model.dense_layers}+[1]*{model.layers - model.dense_layers})"
    flags = [0 if i < model.dense_layers or (i - model.dense_layers) % model.moe_layer_freq else 1
             for i in range(model.layers)]
    return "[" + ",".join(map(str, flags)) + "]"
