"""Megatron-LM: command-line flags for `pretrain_gpt.py` and a `torchrun` command around them.

Sources: NVIDIA/Megatron-LM megatron/training/arguments.py at commit
000c4ac24f61159c138b0975def722c65245983c (the newest stored copy, 207,307 characters; an older
stored copy, 307dcf37, is 93,035). MEGATRON_FLAGS records, for every flag written here, the
`_add_*_args` function and the character window of the stored file in which its `add_argument`
call sits.

The flags added for issue 20 (the settings the estimate depends on: token dispatcher, router, RoPE,
recompute modules, overlaps, offload, FP8 parameters, optimizer) were read at the two releases the
export targets, MEGATRON_PINS: main and the latest core release. There many flags are generated from
Megatron-Core's config dataclasses (megatron/training/argument_utils.py ArgumentGroupFactory: field
`moe_token_dispatcher_type` -> `--moe-token-dispatcher-type`); their `where` names the field and its
line at each pin. tests/data/frameworks/megatron-*.json are the real parsers' option lists at the
pins (benchmarks/validate_exports.py --snapshot), and tests check every emitted flag against them.

Legality is the audit's (rules/audit-megatron.toml): every refusal below is an assertion of that
contract and names the rule that forbids the layout.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, Literal

from ..costmodel.assumptions import Assumptions
from ..inputs.pipeline import pipeline_split, stage_layers
from ..inputs.precision import megatron_adam_dtypes, recipe
from ..inputs.layout import Layout
from ..inputs.specs import Cluster, Model, Training
from ..errors import InputError
from .batch import Batch, refused, resolved
from .megatron_bridge import MEGATRON_BRIDGE_PIN, megatron_bridge_command, megatron_bridge_overrides
from .megatron_deepspeed import DEEPSPEED_CONFIG_FILE, alibi_note, to_megatron_deepspeed
from .torchrun import launch_notes, torchrun_command

__all__ = ["MegatronFlag", "MEGATRON_FLAGS", "MEGATRON_ARGUMENTS_SOURCE", "MEGATRON_PINS", "ASSUMPTIONS_IN_FLAGS",
           "megatron_args", "megatron_command", "megatron_notes"]

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
    holds the call; M-numbers refer to research/anchors-selection.md §2.
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
    """Where a flag added for issue 20 is declared: at main, at core_v0.16.1 (MEGATRON_PINS) and, when
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
    # ---- issue 20: the settings the estimate depends on (MEGATRON_PINS; megatron/core/transformer/...)
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
    # ---- issue 37: the rest of the settings the estimate prices
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


def megatron_args(layout: Layout, model: Model, training: Training, cluster: Cluster,
                  assumptions: Assumptions | None = None, *, version: str = "main") -> list[str]:
    """Megatron-LM command-line arguments (for `pretrain_gpt.py`) for this layout and model.

    Model shape (RoPE base and scaling, router), parallelism, batch, recompute, precision, optimizer
    and every run setting of `assumptions` the estimate depends on (ASSUMPTIONS_IN_FLAGS); the
    tokenizer, data, learning-rate schedule and checkpoint paths stay the user's. ZeRO maps to
    Megatron as: 1 -> `--use-distributed-optimizer`; 2/3 -> Megatron-FSDP (`--use-megatron-fsdp
    --use-distributed-optimizer --data-parallel-sharding-strategy optim_grads|optim_grads_params
    --ckpt-format fsdp_dtensor`). Under framework "megatron+deepspeed" ZeRO and offload live in the
    DeepSpeed JSON (and --zero-stage), and no Megatron ZeRO or offload flag is written. `version` is a MEGATRON_PINS release
    ("main" or "core_v0.16.1"); flags whose spelling differs follow it. Every flag is in
    `MEGATRON_FLAGS`. A layout `advisor.audit` refuses raises InputError naming the rule. Framework
    "megatron+deepspeed" gets the same flags in Megatron-DeepSpeed's spelling with its DeepSpeed flags
    (megatron_deepspeed.py; a flag it has no equivalent of is refused, naming the audit rule). A LoRA job
    (Training.task) trains adapters pretrain_gpt.py does not have: its arguments are Megatron-Bridge's
    ConfigContainer overrides (megatron_bridge.py); Megatron-DeepSpeed has no adapters.
    """
    if training.frozen_base:
        return _finetune_args(layout, model, training, cluster, assumptions)
    args = megatron_lm_args(layout, model, training, cluster, assumptions, version=version)
    if layout.framework == "megatron+deepspeed":
        return to_megatron_deepspeed(args, layout, model)
    return args


def _finetune_args(layout: Layout, model: Model, training: Training, cluster: Cluster,
                   assumptions: Assumptions | None) -> list[str]:
    if layout.framework == "megatron+deepspeed":
        raise refused("Training.task", training.task, "'pretrain' or 'sft' under Megatron-DeepSpeed",
                      "megatron-deepspeed.no-adapters", "it has no LoRA: the job would train every weight")
    lm = megatron_lm_args(layout, model, training, cluster, assumptions)     # the same checks and refusals
    return megatron_bridge_overrides(layout, training, lm)


def megatron_lm_args(layout: Layout, model: Model, training: Training, cluster: Cluster,
                     assumptions: Assumptions | None = None, *, version: str = "main") -> list[str]:
    """megatron_args in Megatron-LM's own spelling, whatever the layout's framework."""
    if version not in MEGATRON_PINS:
        raise InputError("--framework-version", version, f"one of {list(MEGATRON_PINS)} for Megatron-LM")
    A = assumptions or Assumptions()
    b = resolved(layout, training, cluster)
    out = _Args(version)
    _shape(out, layout, model, b, A)
    _parallelism(out, layout, model)
    if layout.framework != "megatron+deepspeed":
        _zero(out, layout, A)
    out.add("--micro-batch-size", b.mbs)
    out.add("--global-batch-size", b.gbs)
    _recompute_and_precision(out, layout, model, training, A)
    _overlaps(out, layout, model, A)
    _activation_offload(out, layout, model, A)
    if layout.framework != "megatron+deepspeed":
        _offload(out, layout)
    return list(out)


def megatron_notes(layout: Layout, model: Model, training: Training, cluster: Cluster,
                   assumptions: Assumptions | None = None) -> list[str]:
    """What the user must still add or know, for stderr (the command itself goes to stdout)."""
    if training.frozen_base:
        return _finetune_notes(model, training) + launch_notes(cluster)
    notes = ["add your tokenizer, data, learning-rate and checkpoint flags (e.g. --tokenizer-type, "
             "--data-path, --lr, --train-iters, --save/--load)"]
    if layout.framework == "megatron+deepspeed":
        notes.append(f"Megatron-DeepSpeed: save the DeepSpeed JSON (--format deepspeed) as {DEEPSPEED_CONFIG_FILE} "
                     "beside the command (--deepspeed_config); ZeRO and offload are set there")
        notes += alibi_note(megatron_args(layout, model, training, cluster, assumptions))
    if model.attention_chunk is not None:
        notes.append(f"chunked local attention ({model.attention_chunk} tokens; Llama 4) has no Megatron-LM flag: these "
                     "flags attend the whole context in every layer, which the estimate did not price")
    if model.rope_scaling == "llama3":
        notes.append("--use-rope-scaling applies Llama 3.1's frequency bands (low_freq_factor 1, high_freq_factor 4, "
                     "original context 8192; rotary_pos_embedding.py _apply_scaling): a config.json with other bands "
                     "(Llama 4 Scout: 1 and 1) is not reproduced exactly")
    if model.rope_scaling == "yarn" and model.mla is None:
        notes.append("YaRN: --yarn-beta-fast / --yarn-beta-slow / --mscale default to 32, 1, 1 and the correction "
                     "range is rounded to integers; set them to your config.json's rope_scaling (gpt-oss: "
                     "truncate false, i.e. --no-yarn-correction-range-round-to-int, as Megatron-Bridge's gpt-oss "
                     "provider sets it)")
    return notes + launch_notes(cluster)


def _finetune_notes(model: Model, training: Training) -> list[str]:
    repo, commit = MEGATRON_BRIDGE_PIN
    return [f"{training.task}: Megatron-LM's pretrain_gpt.py has no adapters; this is Megatron-Bridge's PEFT job "
            f"({repo}@{commit[:7]} scripts/training/run_recipe.py), run from its checkout",
            f"set MBRIDGE_MODEL to the recipe stem of {model.name} (e.g. llama3_70b) and add "
            "checkpoint.pretrained_checkpoint=<the base converted to Megatron format> and your dataset "
            "(--dataset, dataset.*)"]


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
        a = model.mla
        out.add("--multi-latent-attention")
        if a.q_lora_rank:
            out.add("--q-lora-rank", a.q_lora_rank)
        out.add("--kv-lora-rank", a.kv_lora_rank)
        out.add("--qk-head-dim", a.qk_nope_head_dim)
        out.add("--qk-pos-emb-head-dim", a.qk_rope_head_dim)
        out.add("--v-head-dim", a.v_head_dim)
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


def _parallelism(out: _Args, layout: Layout, model: Model) -> None:
    out.add("--tensor-model-parallel-size", layout.tp)
    out.add("--pipeline-model-parallel-size", layout.pp)
    _pipeline_split(out, layout, model)
    if layout.sp and layout.tp > 1:
        out.add("--sequence-parallel")
    out.add("--context-parallel-size", layout.cp)
    if model.is_moe:
        out.add("--expert-model-parallel-size", layout.ep)
        out.add("--expert-tensor-parallel-size", layout.etp or layout.tp)


def _pipeline_split(out: _Args, layout: Layout, model: Model) -> None:
    """How the layers split over the pipeline (inputs.pipeline.pipeline_split, the split the cost model
    estimated), in its form's flags: nothing for an even split (or under Megatron-DeepSpeed, whose
    PipelineModule partitions any layer count itself), --num-layers-per-virtual-pipeline-stage for even
    chunks, the first/last-stage flags for Megatron's uneven split, the embedding and loss accounting
    flags where counting them as layers makes every chunk even (TransformerConfig
    account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split, at both pins; audit rules
    megatron.embedding-and-loss-in-pipeline-split, megatron.loss-in-pipeline-split), else
    --pipeline-model-parallel-layout."""
    if layout.vpp > 1 and layout.pp == 1:
        raise refused("Layout.vpp", layout.vpp, "1 when pp is 1", "megatron.vpp-needs-pp",
                      "virtual stages interleave pipeline ranks")
    if layout.pp == 1 or (layout.vpp == 1 and layout.framework == "megatron+deepspeed"):
        return
    split = pipeline_split(model.layers, layout.pp, layout.vpp)
    if split is None:
        raise refused("Layout.vpp", layout.vpp, "at most the layers of the lightest pipeline stage per rank, + 1 "
                      "on the first and last (the embedding's and the loss's chunk)",
                      "megatron.virtual-stage-needs-a-layer",
                      f"layers({model.layers}) over pp({layout.pp}): the lightest stage holds "
                      f"{min(stage_layers(model.layers, layout.pp))}")
    if split.form in ("account-embedding-loss", "account-loss"):
        if split.form == "account-embedding-loss":
            out.add("--account-for-embedding-in-pipeline-split")
        out.add("--account-for-loss-in-pipeline-split")
    if split.form == "first-last":
        out.add("--decoder-first-pipeline-num-layers", split.ranks[0])
        out.add("--decoder-last-pipeline-num-layers", split.ranks[-1])
    elif split.form == "layout":
        out.add("--pipeline-model-parallel-layout", _layout_string(list(split.chunks), model))
    elif layout.vpp > 1:     # even chunks, counting the embedding and the loss in the account forms
        out.add("--num-layers-per-virtual-pipeline-stage", split.per_chunk)


def _layout_string(sizes: list[int], model: Model) -> str:
    """--pipeline-model-parallel-layout: one '|'-separated stage per (virtual) stage in model order,
    the embedding first, the MTP layers and the loss last, each layer written out."""
    stages = ["t" * n for n in sizes]
    stages[0] = "E" + stages[0]
    stages[-1] += "m" * (model.mtp_layers or 0) + "L"
    return "|".join(stages)


def _zero(out: _Args, layout: Layout, A: Assumptions) -> None:
    if layout.dp * layout.cp > 1 and A.overlap_grad_reduce:
        # advisor's step-time estimate assumes DP traffic overlaps compute (Assumptions.overlap_grad_reduce,
        # overlap_param_gather): ask Megatron for it, or the estimate is optimistic.
        out.add("--overlap-grad-reduce")
    if layout.zero_stage == 1:
        out.add("--use-distributed-optimizer")
        if layout.dp * layout.cp > 1 and A.overlap_grad_reduce and A.overlap_param_gather:
            out.add("--overlap-param-gather")               # M19: needs the distributed optimizer + grad overlap
    elif layout.zero_stage >= 2:
        out.add("--use-megatron-fsdp")
        # Megatron-FSDP v1 runs the distributed optimizer only; validate_args adds it with a warning
        out.add("--use-distributed-optimizer")
        out.add("--data-parallel-sharding-strategy", "optim_grads" if layout.zero_stage == 2 else "optim_grads_params")
        out.add("--ckpt-format", "fsdp_dtensor")


def _recompute_and_precision(out: _Args, layout: Layout, model: Model, training: Training, A: Assumptions) -> None:
    if layout.recompute == "selective":
        out.add("--recompute-granularity", "selective")
        out.add("--recompute-modules", *A.recompute_modules)
    elif layout.recompute == "full":
        out.add("--recompute-granularity", "full")
        out.add("--recompute-method", "uniform")
        out.add("--recompute-num-layers", 1)
    if training.precision == "fp16":
        out.add("--fp16")
    else:
        out.add("--bf16")
        flags = recipe(training.precision).megatron_flags   # (flag, value) pairs
        for flag, value in zip(flags[::2], flags[1::2]):
            out.add(flag, value)
        if A.megatron_main_grad_bytes not in (2, 4):
            raise refused("Assumptions.megatron_main_grad_bytes", A.megatron_main_grad_bytes, "2 or 4 under Megatron-LM",
                          "megatron.main-grad-bytes", "the gradient buffer is fp32, or bf16 with --grad-reduce-in-bf16")
        if A.megatron_main_grad_bytes == 2:
            out.add("--grad-reduce-in-bf16")
        if layout.framework == "megatron":
            _adam_state(out, layout, training, A)
        if A.fp8_param_gather and recipe(training.precision).low_precision:
            if layout.framework == "megatron" and layout.zero_stage == 0:
                raise refused("Assumptions.fp8_param_gather", True, "zero_stage >= 1 under Megatron-LM",
                              "megatron.fp8-param-gather-needs-sharded-optimizer",
                              "validate_args: --fp8-param-gather only with the distributed optimizer or FSDP")
            if layout.framework == "megatron" and layout.offload != "none" and training.precision not in (
                    "fp8", "fp8-delayed"):
                raise refused("Assumptions.fp8_param_gather", True, "precision fp8-delayed with optimizer offload",
                              "megatron.fp8-param-gather-offload-delayed",
                              "validate_args: with --fp8-param-gather the optimizer CPU offload needs --fp8-recipe delayed")
            out.add("--fp4-param-gather" if recipe(training.precision).gemm == "fp4" else "--fp8-param-gather")
    out.add("--attention-backend", "flash" if training.flash_attention else "unfused")
    if training.cuda_graphs:
        out.add("--cuda-graph-impl", "local")
    _optimizer(out, layout, training)


def _optimizer(out: _Args, layout: Layout, training: Training) -> None:
    """Training.optimizer as Megatron runs it: its adam is AdamW (decoupled weight decay), the estimate's Adam;
    SGD without momentum (the estimate's sgd keeps no state; Megatron's default momentum is 0.9); Lion on main.
    The rest have no Megatron optimizer (audit rule megatron.optimizer-kind)."""
    if training.optimizer in ("adam", "adamw"):
        out.add("--optimizer", "adam")
    elif training.optimizer == "sgd":
        out.add("--optimizer", "sgd")
        out.add("--sgd-momentum", 0.0)
    elif training.optimizer == "lion" and out.version == "main" and layout.framework == "megatron":
        out.add("--optimizer", "lion")
    elif training.optimizer == "lion" and layout.framework == "megatron":
        raise InputError("Training.optimizer", "lion", f"adam or sgd for Megatron-LM {out.version}",
                         "export for --framework-version main, whose --optimizer takes lion (audit rule "
                         "megatron.optimizer-kind)")
    else:
        raise refused("Training.optimizer", training.optimizer, "adam, adamw, sgd or lion under Megatron-LM",
                      "megatron.optimizer-kind", "--optimizer takes adam, sgd (and lion on main)")
    if training.master_weights == "none":
        raise refused("Training.master_weights", "none", "'fp32' under Megatron-LM", "megatron.optimizer-kind",
                      "Megatron's mixed-precision optimizer always keeps a master copy of the weights")


def _adam_state(out: _Args, layout: Layout, training: Training, A: Assumptions) -> None:
    """Assumptions.megatron_optimizer_bytes as Megatron-Core's Adam keeps it (precision.megatron_adam_dtypes)."""
    moments = megatron_adam_dtypes(A.megatron_optimizer_bytes, training.precision)
    if moments is None:
        raise refused("Assumptions.megatron_optimizer_bytes", A.megatron_optimizer_bytes,
                      f"12, or a sum Megatron-Core's precision-aware optimizer keeps at {training.precision}",
                      "megatron.optimizer-state-bytes", "master 2 or 4 bytes plus m and v at 4 (fp32) or 2 (bf16)")
    if not moments:
        return
    if layout.zero_stage == 0:
        raise refused("Layout.zero_stage", 0, "1 or more with the precision-aware optimizer",
                      "megatron.precision-aware-optimizer-needs-distributed-optimizer",
                      "OptimizerConfig asserts the distributed optimizer with --use-precision-aware-optimizer")
    out.add("--use-precision-aware-optimizer")
    exp_avg, exp_avg_sq = moments
    if exp_avg != "fp32":
        out.add("--exp-avg-dtype", exp_avg)
    if exp_avg_sq != "fp32":
        out.add("--exp-avg-sq-dtype", exp_avg_sq)


def _overlaps(out: _Args, layout: Layout, model: Model, A: Assumptions) -> None:
    """P2P, TP and EP communication overlap, as the estimate assumed it."""
    if layout.pp > 1 and not layout.overlap_p2p_comm:
        out.add("--no-overlap-p2p-communication")
    if A.tp_comm_overlap and layout.sp and layout.tp > 1:
        out.add("--tp-comm-overlap")
    if (A.ep_a2a_overlap or A.ep_overlap > 0) and model.is_moe and layout.ep > 1:
        why = _a2a_overlap_blocker(layout, model)
        if why:
            raise refused("Assumptions.ep_a2a_overlap", True, "a layout Megatron-Core overlaps the EP all-to-all in",
                          "megatron.ep-a2a-overlap-needs", why)
        out.add("--overlap-moe-expert-parallel-comm")


def _a2a_overlap_blocker(layout: Layout, model: Model) -> str:
    """TransformerConfig.__post_init__'s conditions for overlap_moe_expert_parallel_comm (core_v0.16.1)."""
    if layout.recompute == "full":
        return "disable full recomputation when enabling overlap_moe_expert_parallel_comm"
    if layout.pp > 1 and layout.vpp == 1:
        return "virtual_pipeline_model_parallel_size must be specified when pipeline_model_parallel_size > 1"
    if model.mtp_layers > 1:
        return "MTP layernum only supports 1 when enabling overlap_moe_expert_parallel_comm"
    return ""


def _activation_offload(out: _Args, layout: Layout, model: Model, A: Assumptions) -> None:
    """Activation offload where the estimate applies it (costmodel.activations.offloaded_layers: pp 1, no recompute)."""
    if A.activation_offload_layers and layout.pp == 1 and layout.recompute == "none":
        if A.activation_offload_layers >= model.layers:
            raise refused("Assumptions.activation_offload_layers", A.activation_offload_layers,
                          f"fewer than the model's {model.layers} layers", "megatron.activation-offload-layers",
                          "TransformerConfig: 'CPU offloading can be done only for layers less than num_layers'")
        out.add("--cpu-offloading-num-layers", A.activation_offload_layers)


def _offload(out: _Args, layout: Layout) -> None:
    """Megatron offloads optimizer state to the CPU only."""
    if layout.offload == "none":
        return
    if layout.offload != "optimizer" or layout.offload_device != "cpu":
        raise refused("Layout.offload", f"{layout.offload} to {layout.offload_device}",
                      "'optimizer' to 'cpu' under Megatron-LM", "megatron.offload-optimizer-to-cpu-only",
                      "Megatron-LM has --optimizer-cpu-offload only; parameter and NVMe offload are DeepSpeed's")
    out.add("--optimizer-cpu-offload")
    if "--use-precision-aware-optimizer" not in out:         # _adam_state may have written it
        out.add("--use-precision-aware-optimizer")


def _needs_single_connection(layout: Layout) -> bool:
    # validate_args asserts CUDA_DEVICE_MAX_CONNECTIONS == "1" when TP or CP > 1 on pre-Blackwell
    # GPUs, unless Megatron-FSDP / torch FSDP2 is used (arguments.py validate_args, chars 32000-48000).
    fsdp = layout.framework != "megatron+deepspeed" and layout.zero_stage >= 2
    return (layout.tp > 1 or layout.cp > 1) and not fsdp


def megatron_command(layout: Layout, model: Model, training: Training, cluster: Cluster,
                     assumptions: Assumptions | None = None, *, script: str | None = None,
                     version: str = "main") -> str:
    """A shell command: `torchrun ... pretrain_gpt.py` (`pretrain_mamba.py` for a hybrid model,
    Megatron-LM's entry point for MambaModel at both pins) with one Megatron flag (and its values)
    per line, shell-quoted, continued with backslashes. Add your tokenizer, data and checkpoint flags."""
    if training.frozen_base:
        _finetune_args(layout, model, training, cluster, assumptions)     # Megatron-DeepSpeed refuses
        return megatron_bridge_command(layout, training, cluster,
                                       megatron_lm_args(layout, model, training, cluster, assumptions))
    if script is None:      # main deprecates pretrain_mamba.py for pretrain_hybrid.py (its module docstring)
        hybrid = "pretrain_hybrid.py" if version == "main" else "pretrain_mamba.py"
        script = hybrid if model.hybrid_pattern is not None else "pretrain_gpt.py"
    args = megatron_args(layout, model, training, cluster, assumptions, version=version)
    lines: list[str] = []
    i = 0
    while i < len(args):
        j = i + 1
        while j < len(args) and not args[j].startswith("--"):
            j += 1
        lines.append(" ".join(shlex.quote(a) for a in args[i:j]))
        i = j
    head = torchrun_command(cluster, script=script)
    if _needs_single_connection(layout):
        head = "CUDA_DEVICE_MAX_CONNECTIONS=1 " + head
    return " \\\n    ".join([head, *lines])

