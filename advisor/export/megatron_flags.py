"""The Megatron-LM flags the export may write, each checked against the pinned releases'
`arguments.py` (MEGATRON_FLAGS, MEGATRON_PINS), the Assumptions fields they carry, and the argument
list that accepts only those flags. Sources: advisor/export/megatron.py's module docstring."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

MEGATRON_ARGUMENTS_SOURCE = (
    "NVIDIA/Megatron-LM megatron/training/arguments.py @ 000c4ac24f61159c138b0975def722c65245983c"
)

MEGATRON_PINS: dict[str, str] = {
    "main": "d98e8a64ddf34856e74b24714e3bedb2f5a39553",          # 2026-08-22
    "core_v0.16.1": "55ac7082517c3878ae653c07c09c534b8aed49f6",  # tag core_v0.16.1, 2026-03-16
}
"""NVIDIA/Megatron-LM commits the exported flags are checked against (benchmarks/validate_exports.toml
holds the same pins for the validation run)."""

FlagKind = Literal["int", "float", "str", "str_list", "store_true", "store_false", "choice", "moe_freq"]


@dataclass(frozen=True)
class MegatronFlag:
    """One Megatron-LM command-line flag as `add_argument` declares it.

    `kind` mirrors the declaration: "int"/"float"/"str" (`type=`), "store_true"/"store_false"
    (`action=`), "choice" (`choices=`), "str_list" (`nargs`, one value per word), "moe_freq" (`type=moe_freq_type`: an int or a Python list
    expression such as "([0]*3+[1]*58)"). `where` is the `_add_*_args` function and the 16,000-
    character window of MEGATRON_ARGUMENTS_SOURCE (as the search tool's read_file pages it) that
    holds the call; M-numbers name the legality constraints of rules/audit-megatron.toml.
    """

    flag: str
    kind: FlagKind
    where: str
    choices: tuple[str, ...] = ()
    dest: str | None = None
    emitted: bool = True
    note: str = ""
    versions: tuple[str, ...] = ("main", "core_v0.16.1")
    """The MEGATRON_PINS releases that declare the flag (the snapshots in tests/data/frameworks check it)."""
    main_choices: tuple[str, ...] = ()
    """Choices only main declares (the export writes them for main only)."""


def _f(flag: str, kind: FlagKind, where: str, **kw: Any) -> tuple[str, MegatronFlag]:
    return flag, MegatronFlag(flag, kind, where, **kw)


_NET = "_add_network_size_args"
_TRAIN = "_add_training_args"
_DIST = "_add_distributed_args"
_MOE = "_add_moe_args"
_MLA = "_add_mla_args"


def _W(k: int) -> str:
    """The 16,000-character read window (starting at k thousand) of the stored arguments.py."""
    return f"chars {k * 1000}-{min(k * 1000 + 16000, 207307)}"


_TC, _MPC = "transformer_config.py", "model_parallel_config.py"


def _pinned(main: str, v016: str, old: str = "") -> str:
    """Where a flag the estimate depends on is declared: at main, at core_v0.16.1 (MEGATRON_PINS) and, when
    it existed there, at MEGATRON_ARGUMENTS_SOURCE's commit (arguments.py line)."""
    return f"main: {main}; core_v0.16.1: {v016}" + (f"; 000c4ac: arguments.py L{old}" if old else "")


MEGATRON_FLAGS: dict[str, MegatronFlag] = dict([
    # _add_network_size_args (model shape)
    _f("--num-layers", "int", f"{_NET}, {_W(64)}"),
    _f("--hidden-size", "int", f"{_NET}, {_W(64)}"),
    _f("--ffn-hidden-size", "int", f"{_NET}, {_W(64)}"),
    _f("--num-attention-heads", "int", f"{_NET}, {_W(64)}"),
    _f("--attention-backend", "choice", f"{_NET}, {_W(64)}",
       choices=("flash", "fused", "unfused", "local", "auto"),
       note="type=AttnBackend[name]; members from megatron/core/transformer/enums.py AttnBackend"),
    _f("--kv-channels", "int", f"{_NET}, {_W(64)}", note="head_dim when it is not hidden/heads"),
    _f("--group-query-attention", "store_true", f"{_NET}, {_W(64)}"),
    _f("--num-query-groups", "int", f"{_NET}, {_W(64)}"),
    _f("--max-position-embeddings", "int", f"{_NET}, {_W(80)}",
       note="validate_args asserts it is >= --seq-length (M21)"),
    _f("--position-embedding-type", "choice", f"{_NET}, {_W(80)}",
       choices=("learned_absolute", "rope", "mrope", "relative", "none"), main_choices=("yarn",),
       note="no ALiBi choice in Megatron-LM; BigScience's Megatron-DeepSpeed takes alibi (megatron/enums.py "
            "@ 754cf21a487eb2a63eaaa7f9def52d725262b639), written for framework megatron+deepspeed"),
    _f("--normalization", "choice", f"{_NET}, {_W(80)}", choices=("LayerNorm", "RMSNorm")),
    _f("--swiglu", "store_true", f"{_NET}, {_W(80)}"),
    _f("--untie-embeddings-and-output-weights", "store_true", f"{_NET}, {_W(80)}"),
    _f("--multi-latent-attention", "store_true", f"{_NET}, {_W(80)}"),
    _f("--qk-layernorm", "store_true", f"_add_vision_args, {_W(176)}",
       note="declared among the vision arguments (char 183492), read by every Megatron-Core model "
            "(TransformerConfig.qk_layernorm): a norm over each query and key head"),
    _f("--mtp-num-layers", "int", f"{_NET}, {_W(80)}"),
    # hybrid Mamba stacks (pretrain_mamba.py; NVIDIA/Megatron-LM examples/mamba/train.sh @ 55ac7082)
    _f("--hybrid-override-pattern", "str", _pinned("arguments.py L3660 _add_experimental_args (deprecated "
       "for --hybrid-layer-pattern, still accepted: L743)", "arguments.py L2828 _add_experimental_args")),
    _f("--spec", "str_list", _pinned("arguments.py L3645 _add_experimental_args", "arguments.py L2815"),
       note="nargs='*': module and name of the layer spec; mamba_builders.py raises without it"),
    _f("--mamba-state-dim", "int", _pinned(f"{_TC} L1259 TransformerConfig.mamba_state_dim", f"{_TC} L846")),
    _f("--mamba-head-dim", "int", _pinned(f"{_TC} L1262 TransformerConfig.mamba_head_dim", f"{_TC} L849")),
    _f("--mamba-num-groups", "int", _pinned(f"{_TC} L1265 TransformerConfig.mamba_num_groups", f"{_TC} L852")),
    _f("--mamba-num-heads", "int", _pinned(f"{_TC} L1268 TransformerConfig.mamba_num_heads", f"{_TC} L855")),
    # _add_data_args
    _f("--seq-length", "int", f"_add_data_args, {_W(160)}"),
    # _add_training_args: batch, recompute, biases, sequence parallelism, offload
    _f("--micro-batch-size", "int", f"{_TRAIN}, {_W(96)}"),
    _f("--global-batch-size", "int", f"{_TRAIN}, {_W(96)}",
       note="a multiple of micro-batch-size x data-parallel-size (M11)"),
    _f("--recompute-granularity", "choice", f"{_TRAIN}, {_W(96)}", choices=("full", "selective")),
    _f("--recompute-method", "choice", f"{_TRAIN}, {_W(112)}", choices=("uniform", "block"),
       note="selective granularity takes no method (validate_args, M17)"),
    _f("--recompute-num-layers", "int", f"{_TRAIN}, {_W(112)}"),
    _f("--use-flash-attn", "store_true", f"{_TRAIN}, {_W(112)}", emitted=False,
       note="still declared, but Megatron-Core models pick kernels with --attention-backend"),
    _f("--disable-bias-linear", "store_false", f"{_TRAIN}, {_W(112)}", dest="add_bias_linear"),
    _f("--add-qkv-bias", "store_true", f"{_TRAIN}, {_W(112)}"),
    _f("--optimizer-cpu-offload", "store_true", f"{_TRAIN}, {_W(112)}",
       note="validate_args asserts --use-precision-aware-optimizer with it"),
    _f("--sequence-parallel", "store_true", f"{_TRAIN}, {_W(112)}",
       note="validate_args silently disables it when TP == 1 (M12)"),
    # _add_checkpointing_args
    _f("--ckpt-format", "choice", f"_add_checkpointing_args, {_W(128)}",
       choices=("torch", "torch_dist", "torch_dcp", "fsdp_dtensor"),
       note="validate_args asserts fsdp_dtensor with --use-megatron-fsdp; 000c4ac also had zarr, gone at both pins"),
    # _add_mixed_precision_args / _add_transformer_engine_args / _add_experimental_args
    _f("--fp16", "store_true", f"_add_mixed_precision_args, {_W(144)}"),
    _f("--bf16", "store_true", f"_add_mixed_precision_args, {_W(144)}"),
    _f("--fp8-format", "choice", f"_add_transformer_engine_args, {_W(48)}",
       choices=("e4m3", "hybrid"), dest="fp8"),
    _f("--fp8-recipe", "choice", f"_add_transformer_engine_args, {_W(48)}",
       choices=("tensorwise", "delayed", "mxfp8", "blockwise", "custom"), note="default delayed"),
    _f("--fp4-format", "choice", f"_add_transformer_engine_args, {_W(64)}", choices=("e2m1",), dest="fp4"),
    _f("--fp4-recipe", "choice", f"_add_transformer_engine_args, {_W(64)}", choices=("nvfp4",)),
    _f("--use-precision-aware-optimizer", "store_true", f"_add_experimental_args, {_W(192)}",
       note="OptimizerConfig asserts the distributed optimizer with it (core_v0.16.1 optimizer_config.py)"),
    _f("--exp-avg-dtype", "choice", _pinned("arguments.py L3675", "arguments.py L2848"),
       choices=("fp32", "fp16", "bf16", "fp8"), note="Adam's m under the precision-aware optimizer"),
    _f("--exp-avg-sq-dtype", "choice", _pinned("arguments.py L3680", "arguments.py L2853"),
       choices=("fp32", "fp16", "bf16", "fp8"), note="Adam's v under the precision-aware optimizer"),
    # _add_distributed_args
    _f("--tensor-model-parallel-size", "int", f"{_DIST}, {_W(144)}"),
    _f("--pipeline-model-parallel-size", "int", f"{_DIST}, {_W(144)}"),
    _f("--decoder-first-pipeline-num-layers", "int", f"{_DIST}, {_W(144)}",
       note="with --decoder-last-pipeline-num-layers: an uneven split, the middle stages even (M8)"),
    _f("--decoder-last-pipeline-num-layers", "int", f"{_DIST}, {_W(144)}"),
    _f("--pipeline-model-parallel-layout", "str", f"{_DIST}, {_W(144)}",
       note="layers per (virtual) stage, stages split by '|': E embedding, t decoder layer, m MTP, L loss; "
       "an interleaved split the two flags above cannot say (M8)"),
    _f("--num-layers-per-virtual-pipeline-stage", "int", f"{_DIST}, {_W(144)}",
       note="at most one of it, --num-virtual-stages-per-pipeline-rank, --pipeline-model-parallel-layout (M8)"),
    _f("--num-virtual-stages-per-pipeline-rank", "int", f"{_DIST}, {_W(144)}", emitted=False),
    _f("--account-for-embedding-in-pipeline-split", "store_true",
       _pinned(f"{_TC} L137 TransformerConfig.account_for_embedding_in_pipeline_split", f"{_TC} L96"),
       note="the embedding counts as a layer of the split, its chunk builds one decoder layer less "
            "(transformer_block.py get_num_layers_to_build); since core_v0.11.0 (arguments.py L1833 @ aa6207e2)"),
    _f("--account-for-loss-in-pipeline-split", "store_true",
       _pinned(f"{_TC} L141 TransformerConfig.account_for_loss_in_pipeline_split", f"{_TC} L100"),
       note="the loss (output layer) counts as a layer of the split; not with the first/last flags or a layout "
            "(TransformerConfig.__post_init__)"),
    _f("--no-overlap-p2p-communication", "store_false", f"{_DIST}, {_W(144)}", dest="overlap_p2p_comm",
       emitted=False, note="P2P overlap is on by default, so the interleaved schedule may use pp = 2 (M9); "
       "there is no --overlap-p2p-comm flag"),
    _f("--use-distributed-optimizer", "store_true", f"{_DIST}, {_W(144)}"),
    _f("--overlap-grad-reduce", "store_true", f"{_DIST}, {_W(144)}",
       note="bucketed DP gradient reduction overlapped with backward; the cost model assumes it"),
    _f("--overlap-param-gather", "store_true", f"{_DIST}, {_W(144)}",
       note="needs the distributed optimizer and --overlap-grad-reduce (M19); the cost model assumes it"),
    _f("--use-megatron-fsdp", "store_true", f"{_DIST}, {_W(144)}"),
    _f("--data-parallel-sharding-strategy", "choice", f"{_DIST}, {_W(144)} (choices continue at 160000)",
       choices=("no_shard", "optim", "optim_grads", "optim_grads_params")),
    _f("--context-parallel-size", "int", f"{_DIST}, {_W(160)}",
       note="validate_args asserts seq-length % (2 x context-parallel-size) == 0 (M15)"),
    # _add_moe_args
    _f("--expert-model-parallel-size", "int", f"{_MOE}, {_W(176)}"),
    _f("--expert-tensor-parallel-size", "int", f"{_MOE}, {_W(176)}",
       note="None means --tensor-model-parallel-size"),
    _f("--num-experts", "int", f"{_MOE}, {_W(176)}"),
    _f("--moe-layer-freq", "moe_freq", f"{_MOE}, {_W(176)}"),
    _f("--moe-ffn-hidden-size", "int", f"{_MOE}, {_W(176)}"),
    _f("--moe-shared-expert-intermediate-size", "int", f"{_MOE}, {_W(176)}",
       note="num_shared_experts x size of one shared expert"),
    _f("--moe-router-topk", "int", f"{_MOE}, {_W(176)}"),
    _f("--moe-router-num-groups", "int", f"{_MOE}, {_W(176)}",
       note="group-limited routing; node-limited when the groups are the EP group's nodes (DeepSeek-V3)"),
    _f("--moe-router-group-topk", "int", f"{_MOE}, {_W(176)}"),
    _f("--moe-grouped-gemm", "store_true", _pinned(f"{_TC} L850", f"{_TC} L649", "3134"),
       note="TEGroupedMLP, whose per-expert GEMMs the estimate prices (Assumptions.expert_gemm_overhead); "
            "without it Megatron runs SequentialMLP, a Python loop over the local experts"),
    _f("--moe-permute-fusion", "store_true", _pinned(f"{_TC} L941", f"{_TC} L708", "3209"), emitted=False,
       note="TransformerConfig.__post_init__ raises unless Transformer Engine >= 2.1 is importable; not written, "
            "since the export cannot know the TE version (the Megatron-Bridge performance configs set it)"),
    # _add_mla_args
    _f("--q-lora-rank", "int", f"{_MLA}, {_W(192)}"),
    _f("--kv-lora-rank", "int", f"{_MLA}, {_W(192)}"),
    _f("--qk-head-dim", "int", f"{_MLA}, {_W(192)}", note="the no-RoPE part of the q/k head"),
    _f("--qk-pos-emb-head-dim", "int", f"{_MLA}, {_W(192)}"),
    _f("--v-head-dim", "int", f"{_MLA}, {_W(192)}"),
    # DeepSeek Sparse Attention and LatentMoE: TransformerConfig fields declared as flags by ArgumentGroupFactory
    _f("--experimental-attention-variant", "choice", _pinned(f"{_TC} L301", f"{_TC} L250"), choices=("dsa",),
       note="main also takes gdn, gdn2; both take gated_delta_net"),
    _f("--dsa-indexer-n-heads", "int", _pinned(f"{_TC} L317", f"{_TC} L256")),
    _f("--dsa-indexer-head-dim", "int", _pinned(f"{_TC} L320", f"{_TC} L259")),
    _f("--dsa-indexer-topk", "int", _pinned(f"{_TC} L323", f"{_TC} L262")),
    _f("--dsa-indexer-loss-coeff", "float", _pinned(f"{_TC} L333", f"{_TC} L265"),
       note="None by default, which dsa.py compares with 0 (a TypeError at core_v0.16.1 L813): always written"),
    _f("--moe-latent-size", "int", _pinned(f"{_TC} L952", f"{_TC} L719")),
    _f("--mtp-hybrid-override-pattern", "str", _pinned(f"{_TC} L97 (deprecated, converted in arguments.py L774)",
       "not declared"), versions=("main",)),
    # ---- the settings the estimate depends on (MEGATRON_PINS; megatron/core/transformer/...)
    _f("--moe-token-dispatcher-type", "choice",
       _pinned(f"{_TC} L891 TransformerConfig.moe_token_dispatcher_type", f"{_TC} L675", "3201"),
       choices=("allgather", "alltoall", "flex"), note="default allgather; the estimate assumes alltoall or DeepEP"),
    _f("--moe-flex-dispatcher-backend", "choice",
       _pinned(f"{_TC} L898 moe_flex_dispatcher_backend", f"{_TC} L682"), choices=("deepep", "hybridep"),
       note="replaces --moe-enable-deepep (deprecated at both pins, transformer_config.py __post_init__ "
            "'moe_enable_deepep is deprecated'); main adds 'ncclep'"),
    _f("--moe-enable-deepep", "store_true", _pinned(f"{_TC} L895 (deprecated)", f"{_TC} L679 (deprecated)", "3205"),
       emitted=False, note="the pre-0.16 spelling of --moe-flex-dispatcher-backend deepep"),
    _f("--moe-router-dtype", "choice", _pinned(f"{_TC} L811", f"{_TC} L629", "3151"), choices=("fp32", "fp64"),
       note="DeepEP asserts float32 probabilities (moe/token_dispatcher.py _DeepepManager, core_v0.16.1 L1297)"),
    _f("--moe-router-score-function", "choice", _pinned(f"{_TC} L808", f"{_TC} L626", "3160"),
       choices=("softmax", "sigmoid"), note="main adds sqrtsoftplus"),
    _f("--moe-router-enable-expert-bias", "store_true", _pinned(f"{_TC} L816", f"{_TC} L634", "3175")),
    _f("--moe-router-topk-scaling-factor", "float", _pinned(f"{_TC} L804", f"{_TC} L622", "3173")),
    _f("--recompute-modules", "str_list", _pinned(f"{_TC} L560 (list[str], nargs +)", f"{_TC} L411", "2091"),
       note="nargs: the modules follow as separate values; default ['core_attn']"),
    _f("--tp-comm-overlap", "store_true", _pinned(f"{_MPC} L265", f"{_MPC} L186", "2138"),
       note="validate_args asserts --sequence-parallel with it (M16)"),
    _f("--overlap-moe-expert-parallel-comm", "store_true", _pinned(f"{_MPC} L343", f"{_MPC} L264", "3221"),
       note="TransformerConfig.__post_init__: EP > 1, alltoall/flex, no full recompute, vpp when pp > 1, "
            "MTP at most 1 (audit rule megatron.ep-a2a-overlap-needs)"),
    _f("--cpu-offloading-num-layers", "int", _pinned(f"{_MPC} L461", f"{_MPC} L373", "2105"),
       note="sets cpu_offloading; TransformerConfig refuses it with PP, with recompute, and for >= num_layers"),
    _f("--fp8-param-gather", "store_true", _pinned("arguments.py L2016", "arguments.py L1398", "1356"),
       note="validate_args: only with the distributed optimizer or (Megatron-)FSDP"),
    _f("--fp4-param-gather", "store_true",
       _pinned("arguments.py L2012 (fp4_param excluded from the dataclass flags)",
               f"{_TC} L520 TransformerConfig.fp4_param, argparse_meta arg_names ['--fp4-param-gather']"),
       note="validate_args: 'must be used together with --fp4-format'"),
    _f("--grad-reduce-in-bf16", "store_true", _pinned("arguments.py L3053", "arguments.py L2178", "2574"),
       note="validate_args then sets accumulate_allreduce_grads_in_fp32 = False: 2-byte main gradients"),
    # Gated DeltaNet and gated attention (Qwen3-Next): TransformerConfig fields, declared as flags by
    # ArgumentGroupFactory(TransformerConfig) (main arguments.py L2373; core_v0.16.1 L1621)
    _f("--linear-key-head-dim", "int", _pinned(f"{_TC} L373", f"{_TC} L285")),
    _f("--linear-value-head-dim", "int", _pinned(f"{_TC} L376", f"{_TC} L288")),
    _f("--linear-num-key-heads", "int", _pinned(f"{_TC} L379", f"{_TC} L291")),
    _f("--linear-num-value-heads", "int", _pinned(f"{_TC} L382", f"{_TC} L294")),
    _f("--linear-conv-kernel-dim", "int", _pinned(f"{_TC} L370", f"{_TC} L282")),
    _f("--attention-output-gate", "store_true", _pinned(f"{_TC} L278", f"{_TC} L227")),
    _f("--moe-shared-expert-gate", "store_true", _pinned(f"{_TC} L713", f"{_TC} L546")),
    _f("--rotary-percent", "float", _pinned("arguments.py L2420", "arguments.py L1657")),
    _f("--rotary-base", "int", _pinned("arguments.py L2418", "arguments.py L1655", "1623"),
       note="type=int: a fractional rope_theta cannot be written (audit rule megatron.rotary-base-integer)"),
    _f("--use-rope-scaling", "store_true", _pinned("arguments.py L2424", "arguments.py L1661", "1631"),
       note="Llama 3.1 scaling (rotary_pos_embedding.py _apply_scaling: low/high frequency factors 1 and 4, "
            "original context 8192)"),
    _f("--rope-scaling-factor", "float", _pinned("arguments.py L2426", "arguments.py L1663", "1633")),
    _f("--rope-type", "choice", _pinned("arguments.py L2906", "arguments.py L2049", "2226"), choices=("rope", "yarn"),
       note="MLA only; MLATransformerConfig's default is yarn (transformer_config.py, core_v0.16.1 L2034)"),
    _f("--rotary-scaling-factor", "float", _pinned("arguments.py L3558", "arguments.py L2735", "3247"),
       note="YaRN factor for MLA; MLATransformerConfig's own default is 40. At main also the GPT model's YaRN "
            "factor (argument_utils.py _apply_yarn_config_from_args: yarn_rotary_scaling_factor)"),
    _f("--yarn-original-max-position-embeddings", "int", _pinned("arguments.py L2400", "not declared"),
       versions=("main",), note="the pretraining context YaRN extends (argument_utils.py default 4096)"),
    _f("--attention-dropout", "float", _pinned(f"{_TC} L191", f"{_TC} L140", "1901"), note="default 0.1"),
    _f("--hidden-dropout", "float", _pinned(f"{_TC} L188", f"{_TC} L137", "1903"), note="default 0.1"),
    _f("--optimizer", "choice", _pinned("arguments.py L2913", "arguments.py L2056", "2245"),
       choices=("adam", "sgd"), main_choices=("lion",),
       note="'adam' is Adam with decoupled weight decay (AdamW); main adds lion (megatron/core/optimizer/__init__.py "
            "L602: one moment)"),
    _f("--sgd-momentum", "float", _pinned("arguments.py L2626", "arguments.py L1836"),
       note="default 0.9 (a momentum buffer); the estimate's sgd keeps no state, so 0.0 is written"),
    # ---- the rest of the settings the estimate prices
    _f("--cuda-graph-impl", "choice", _pinned(f"{_TC} L1075 TransformerConfig.cuda_graph_impl", f"{_TC} L776"),
       choices=("local", "transformer_engine", "none"),
       note="Training.cuda_graphs: 'local' captures each layer's forward and backward (Megatron-Core's "
            "CudaGraphManager); --enable-cuda-graph is its deprecated spelling (arguments.py validate_args)"),
    _f("--moe-router-load-balancing-type", "str_list", _pinned(f"{_TC} L743", f"{_TC} L564"),
       note="default aux_loss, whose coefficient defaults to 0: no balancing at all"),
    _f("--moe-aux-loss-coeff", "float", _pinned(f"{_TC} L875", f"{_TC} L659"),
       note="nargs='+'; megatron/core/transformer/moe/README.md (Basic MoE Training) starts at 1e-2"),
    _f("--window-size", "str", _pinned(f"arguments.py L2384 (type=tuple_type); {_TC} L247", f"arguments.py L1632; {_TC} L196"),
       note="(left, right) tokens: Model.sliding_window - 1, 0, as Megatron-Bridge's gpt-oss and Gemma-2 bridges set it"),
    _f("--window-attn-skip-freq", "moe_freq", _pinned(f"arguments.py L2387; {_TC} L251", f"arguments.py L1635; {_TC} L200"),
       note="N: one full-attention layer after N-1 windowed ones (Model.global_attention_every)"),
    _f("--softmax-type", "choice", _pinned(f"{_TC} L170", f"{_TC} L119"), choices=("vanilla", "off-by-one", "learnable"),
       note="learnable: a learned sink logit per head (Model.attention_sinks; gpt-oss's bridge sets it)"),
    _f("--hybrid-layer-pattern", "str", _pinned("arguments.py L3652 _add_experimental_args", "not declared"),
       versions=("main",), note="main's spelling of --hybrid-override-pattern (deprecated there, L743)"),
])


ASSUMPTIONS_IN_FLAGS: dict[str, str] = {
    "recompute_modules": "--recompute-modules (with --recompute-granularity selective)",
    "overlap_grad_reduce": "--overlap-grad-reduce (when dp x cp > 1)",
    "overlap_param_gather": "--overlap-param-gather (with the distributed optimizer, dp x cp > 1)",
    "tp_comm_overlap": "--tp-comm-overlap (with --sequence-parallel, tp > 1)",
    "ep_a2a_overlap": "--overlap-moe-expert-parallel-comm (ep > 1)",
    "ep_overlap": "--overlap-moe-expert-parallel-comm when > 0 (the overlap whose measured share it is)",
    "dropout_masks": "--attention-dropout / --hidden-dropout 0.1 when masks are stored, else 0.0",
    "moe_token_dispatcher": "--moe-token-dispatcher-type alltoall | flex --moe-flex-dispatcher-backend deepep",
    "activation_offload_layers": "--cpu-offloading-num-layers (pp 1, no recompute: where the estimate applies it)",
    "fp8_param_gather": "--fp8-param-gather / --fp4-param-gather (low-precision GEMMs)",
    "megatron_main_grad_bytes": "--grad-reduce-in-bf16 when 2 (4: Megatron's fp32 default)",
    "megatron_optimizer_bytes": "12: --optimizer adam's fp32 master, m and v; other sums: "
                                "--use-precision-aware-optimizer --exp-avg-dtype / --exp-avg-sq-dtype "
                                "(precision.megatron_adam_dtypes; audit rule megatron.optimizer-state-bytes)",
}
"""The Assumptions fields that are settings of a Megatron run, and the flags that carry them
(tests/test_exporters.py checks each). Every other field describes hardware or kernels (efficiencies,
latencies, bandwidths, bytes moved), another framework (DeepSpeed, torchtitan), or the memory
accounting of what the flags already say; those are listed in tests/test_exporters.py with why."""


MEGATRON_VERSIONS = tuple(MEGATRON_PINS)


class _Args(list):
    """The argument list under construction; `add` accepts only flags of MEGATRON_FLAGS that the
    target release declares."""

    def __init__(self, version: str):
        super().__init__()
        self.version = version

    def add(self, flag: str, *values: object) -> None:
        spec = MEGATRON_FLAGS[flag]  # a KeyError here means an unverified flag: check it, then add it to the table
        assert self.version in spec.versions, f"{flag} is not declared by Megatron-LM {self.version}"
        self.append(flag)
        self.extend(str(v) for v in values if v is not None)
