"""Megatron-Bridge: the LoRA fine-tuning job of a Megatron layout, as its recipe runner takes it.

Megatron-LM's `pretrain_gpt.py` trains every weight; the adapters of a LoRA layout on Megatron-Core are
Megatron-Bridge's PEFT (src/megatron/bridge/peft/lora.py `LoRA`: target_modules, dim, alpha, dropout). Its
runner `scripts/training/run_recipe.py --model STEM --mode lora` loads the model's PEFT recipe and applies
trailing KEY=VALUE overrides to the ConfigContainer (src/megatron/bridge/training/config.py): `model.*` are
Megatron-Core's TransformerConfig / ModelParallelConfig fields, `ddp.*` its DistributedDataParallelConfig,
`train.*`, `dataset.seq_length`, `peft.*` and `mixed_precision` (training/mixed_precision.py recipe names).
Source: MEGATRON_BRIDGE_PIN. QLoRA has no Megatron path (audit rule megatron.qlora-no-4bit-base).
"""

from __future__ import annotations

import shlex

from ..errors import InputError
from ..inputs.finetune import LORA_TARGETS
from ..inputs.layout import Layout
from ..inputs.specs import Cluster, Training
from .batch import refused
from .megatron_deepspeed import flag_groups
from .torchrun import torchrun_command

__all__ = ["MEGATRON_BRIDGE_PIN", "MIXED_PRECISION", "megatron_bridge_command", "megatron_bridge_overrides",
           "BRIDGE_KEYS", "FROM_RECIPE", "NAMED_RECIPE", "bridge_overrides_of"]

MEGATRON_BRIDGE_PIN = ("NVIDIA-NeMo/Megatron-Bridge", "067f987df03b8355b03192d88d70f1709fedf51a")
"""The Megatron-Bridge commit the runner, override keys and recipe names were read at."""

# Training.precision -> Megatron-Bridge's mixed-precision recipe (training/mixed_precision.py @ the pin)
MIXED_PRECISION = {"bf16": "bf16_mixed", "fp16": "fp16_mixed", "fp8": "bf16_with_fp8_delayed_scaling_mixed",
                   "fp8-delayed": "bf16_with_fp8_delayed_scaling_mixed",
                   "fp8-cs": "bf16_with_fp8_current_scaling_mixed",
                   "fp8-blockwise": "bf16_with_fp8_subchannel_scaling_mixed", "mxfp8": "bf16_with_mxfp8_mixed",
                   "nvfp4": "bf16_with_nvfp4_mixed"}


# Megatron-LM flag -> the ConfigContainer key that carries it (model.*: TransformerConfig / ModelParallelConfig
# fields of Megatron-Core, which the flags are generated from; ddp.*: DistributedDataParallelConfig; optimizer.*:
# OptimizerConfig; train.*, dataset.*, checkpoint.*: Megatron-Bridge's own configs). A store_true flag is written
# "=true"; a list (nargs) as [a,b].
BRIDGE_KEYS: dict[str, str] = {
    "--tensor-model-parallel-size": "model.tensor_model_parallel_size",
    "--pipeline-model-parallel-size": "model.pipeline_model_parallel_size",
    "--decoder-first-pipeline-num-layers": "model.num_layers_in_first_pipeline_stage",
    "--decoder-last-pipeline-num-layers": "model.num_layers_in_last_pipeline_stage",
    "--pipeline-model-parallel-layout": "model.pipeline_model_parallel_layout",
    # TransformerConfig fields, so fields of Bridge's model providers too (the Megatron export writes them
    # where the embedding and the loss count as pipeline chunks)
    "--account-for-embedding-in-pipeline-split": "model.account_for_embedding_in_pipeline_split",
    "--account-for-loss-in-pipeline-split": "model.account_for_loss_in_pipeline_split",
    "--context-parallel-size": "model.context_parallel_size",
    "--sequence-parallel": "model.sequence_parallel",
    "--expert-model-parallel-size": "model.expert_model_parallel_size",
    "--expert-tensor-parallel-size": "model.expert_tensor_parallel_size",
    "--micro-batch-size": "train.micro_batch_size",
    "--global-batch-size": "train.global_batch_size",
    "--seq-length": "dataset.seq_length",
    "--recompute-granularity": "model.recompute_granularity",
    "--recompute-method": "model.recompute_method",
    "--recompute-num-layers": "model.recompute_num_layers",
    "--recompute-modules": "model.recompute_modules",
    "--attention-dropout": "model.attention_dropout",
    "--hidden-dropout": "model.hidden_dropout",
    "--overlap-grad-reduce": "ddp.overlap_grad_reduce",
    "--overlap-param-gather": "ddp.overlap_param_gather",
    "--use-megatron-fsdp": "ddp.use_megatron_fsdp",
    "--data-parallel-sharding-strategy": "ddp.data_parallel_sharding_strategy",
    "--ckpt-format": "checkpoint.ckpt_format",
    "--tp-comm-overlap": "model.tp_comm_overlap",
    "--overlap-moe-expert-parallel-comm": "model.overlap_moe_expert_parallel_comm",
    "--moe-token-dispatcher-type": "model.moe_token_dispatcher_type",
    "--moe-flex-dispatcher-backend": "model.moe_flex_dispatcher_backend",
    "--moe-router-dtype": "model.moe_router_dtype",
    "--moe-grouped-gemm": "model.moe_grouped_gemm",
    "--cpu-offloading-num-layers": "model.cpu_offloading_num_layers",
    "--use-precision-aware-optimizer": "optimizer.use_precision_aware_optimizer",
    "--exp-avg-dtype": "optimizer.exp_avg_dtype",
    "--exp-avg-sq-dtype": "optimizer.exp_avg_sq_dtype",
    "--optimizer-cpu-offload": "optimizer.optimizer_cpu_offload",
    "--no-overlap-p2p-communication": "model.overlap_p2p_comm",
    "--moe-router-load-balancing-type": "model.moe_router_load_balancing_type",
    "--moe-aux-loss-coeff": "model.moe_aux_loss_coeff",
    "--cuda-graph-impl": "model.cuda_graph_impl",
    "--optimizer": "optimizer.optimizer",
    "--sgd-momentum": "optimizer.sgd_momentum",
}
# Flags the Megatron-Bridge recipe sets another way: the model's shape and position embedding come from the
# recipe's model provider (the checkpoint's own config); precision is the named mixed_precision recipe;
# --num-layers-per-virtual-pipeline-stage is written as the virtual stage count; the distributed optimizer is two
# keys (ddp., optimizer.).
FROM_RECIPE = frozenset({
    "--num-layers", "--hidden-size", "--ffn-hidden-size", "--num-attention-heads", "--kv-channels",
    "--group-query-attention", "--num-query-groups", "--max-position-embeddings", "--position-embedding-type",
    "--rotary-base", "--rotary-percent", "--use-rope-scaling", "--rope-scaling-factor", "--rope-type",
    "--rotary-scaling-factor", "--yarn-original-max-position-embeddings", "--normalization", "--swiglu",
    "--untie-embeddings-and-output-weights", "--disable-bias-linear", "--add-qkv-bias", "--qk-layernorm",
    "--attention-output-gate", "--multi-latent-attention", "--q-lora-rank", "--kv-lora-rank", "--qk-head-dim",
    "--qk-pos-emb-head-dim", "--v-head-dim", "--mtp-num-layers", "--num-experts", "--moe-router-topk",
    "--moe-router-score-function", "--moe-router-enable-expert-bias", "--moe-router-topk-scaling-factor",
    "--moe-router-num-groups", "--moe-router-group-topk", "--moe-ffn-hidden-size", "--moe-latent-size",
    "--moe-shared-expert-intermediate-size", "--moe-shared-expert-gate", "--moe-layer-freq",
    "--experimental-attention-variant", "--dsa-indexer-n-heads", "--dsa-indexer-head-dim", "--dsa-indexer-topk",
    "--dsa-indexer-loss-coeff", "--window-size", "--window-attn-skip-freq", "--softmax-type", "--spec", "--hybrid-override-pattern", "--hybrid-layer-pattern", "--mtp-hybrid-override-pattern",
    "--mamba-state-dim", "--mamba-head-dim", "--mamba-num-groups", "--mamba-num-heads", "--linear-key-head-dim",
    "--linear-value-head-dim", "--linear-num-key-heads", "--linear-num-value-heads", "--linear-conv-kernel-dim",
    "--bf16", "--fp16", "--fp8-format", "--fp8-recipe", "--fp4-format", "--fp4-recipe", "--attention-backend",
    "--num-layers-per-virtual-pipeline-stage", "--use-distributed-optimizer",
})
NAMED_RECIPE = frozenset({"--fp8-param-gather", "--fp4-param-gather", "--grad-reduce-in-bf16"})
"""Settings a named mixed_precision recipe overwrites (audit rule megatron.lora-named-precision-recipe)."""
_BY_VALUE = {"--no-overlap-p2p-communication": "false", "--use-megatron-fsdp": "true"}


def _value(flag: str, values: list[str]) -> str:
    if flag in _BY_VALUE:
        return _BY_VALUE[flag]
    if not values:
        return "true"
    return values[0] if len(values) == 1 else "[" + ",".join(values) + "]"


def bridge_overrides_of(megatron_lm_args: list[str], layout: Layout) -> list[str]:
    """The ConfigContainer overrides that carry a Megatron-LM argument list's run settings (BRIDGE_KEYS), the
    model-shape flags left to the recipe (FROM_RECIPE); a flag in neither raises KeyError (add it to a table)."""
    out: list[str] = []
    for flag, values in flag_groups(megatron_lm_args):
        if flag in FROM_RECIPE:
            continue
        out.append(f"{BRIDGE_KEYS[flag]}={_value(flag, values)}")
        if flag == "--cpu-offloading-num-layers":
            out.append("model.cpu_offloading=true")
    if layout.vpp > 1:
        out.append(f"model.virtual_pipeline_model_parallel_size={layout.vpp}")
    if "--use-distributed-optimizer" in megatron_lm_args:
        out += ["ddp.use_distributed_optimizer=true", "optimizer.use_distributed_optimizer=true"]
    return out


def megatron_bridge_overrides(layout: Layout, training: Training, megatron_lm_args: list[str]) -> list[str]:
    """The KEY=VALUE ConfigContainer overrides of the LoRA job: the adapter the estimate priced, the precision
    recipe, and every run setting of `megatron_lm_args` (the Megatron-LM export of the same layout, whose
    refusals have already run) that is not the model's shape."""
    if training.task == "qlora":
        raise refused("Training.task", "qlora", "'lora' under Megatron-LM", "megatron.qlora-no-4bit-base",
                      "Megatron-Bridge's PEFT adapts a 16-bit (or FP8) base, never a 4-bit NF4 one")
    targets = training.lora_targets or LORA_TARGETS
    if any(t not in LORA_TARGETS for t in targets):
        raise InputError("Training.lora_targets", targets, f"Megatron's fused linears {list(LORA_TARGETS)}",
                         "Megatron-Bridge's LoRA target_modules are linear_qkv, linear_proj, linear_fc1, linear_fc2")
    if NAMED_RECIPE & set(megatron_lm_args):
        raise refused("Assumptions", "fp8_param_gather or megatron_main_grad_bytes 2",
                      "a setting of a named Megatron-Bridge precision recipe", "megatron.lora-named-precision-recipe",
                      "mixed_precision is a named recipe (fp8_param_gather False, grad_reduce_in_fp32 True), which "
                      "overwrites the model's and DDP's fields of the same name")
    out = [f"peft.dim={training.lora_rank}", f"peft.alpha={training.lora_alpha}",
           f"peft.dropout={training.lora_dropout or 0.0}",
           "peft.target_modules=[" + ",".join(f"linear_{t}" for t in targets) + "]",
           f"mixed_precision={MIXED_PRECISION[training.precision]}"]
    return bridge_overrides_of(megatron_lm_args, layout) + out


def megatron_bridge_command(layout: Layout, training: Training, cluster: Cluster, megatron_lm_args: list[str]) -> str:
    """`torchrun ... scripts/training/run_recipe.py --model "$MBRIDGE_MODEL" --mode lora` and the overrides, one
    per line; run from a Megatron-Bridge checkout with the model's recipe stem in MBRIDGE_MODEL."""
    overrides = megatron_bridge_overrides(layout, training, megatron_lm_args)
    head = torchrun_command(cluster, script="scripts/training/run_recipe.py") + ' --model "$MBRIDGE_MODEL" --mode lora'
    return " \\\n    ".join([head, *(shlex.quote(o) for o in overrides)])
