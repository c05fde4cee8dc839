"""The Hugging Face stack (Transformers / TRL with `accelerate`): an accelerate config that launches
the DeepSpeed layout, and the PEFT `LoraConfig` (plus, for QLoRA, the `BitsAndBytesConfig`)
arguments of a LoRA job.

The accelerate config hands DeepSpeed the JSON advisor writes with `--format deepspeed`
(`deepspeed_config_file`), so the ZeRO stage, offload and batch are stated once; accelerate then
ignores its own copies of those settings and refuses a file that sets both (accelerate
utils/dataclasses.py DeepSpeedPlugin: "When using `deepspeed_config_file`, the following accelerate
config variables will be ignored ..."). Keys are accelerate's ClusterConfig fields and
`accelerate launch` options (ACCELERATE_SOURCE); LoraConfig's are PEFT's dataclass fields
(PEFT_SOURCE). tests/test_export_hf.py checks both against the installed libraries when they are
importable.
"""

from __future__ import annotations

import json

from ..errors import InputError
from ..inputs.finetune import FROZEN_BASE_TASKS, peft_modules
from ..inputs.layout import Layout
from ..inputs.specs import Cluster, Model, Training
from .batch import no_cuda_graphs, resolved
from .escape import shell_word, yaml_comment, yaml_scalar

__all__ = ["ACCELERATE_SOURCE", "PEFT_SOURCE", "TRAINER_SOURCE", "TRL_SOURCE", "ACCELERATE_KEYS", "LORA_KEYS",
           "TRAINER_OPTIM", "SFT_KEYS", "MAIN_PROCESS_IP_PLACEHOLDER", "accelerate_config", "accelerate_notes", "peft_config",
           "trl_config", "trl_notes"]

ACCELERATE_SOURCE = ("huggingface/accelerate 1.15.0: src/accelerate/commands/config/config_args.py (ClusterConfig), "
                     "src/accelerate/commands/launch.py (launch_command_parser)")
PEFT_SOURCE = "huggingface/peft 0.21.2: src/peft/tuners/lora/config.py (LoraConfig)"

# What the export writes, each key as its source declares it.
ACCELERATE_KEYS = ("compute_environment", "distributed_type", "num_machines", "num_processes", "machine_rank",
                   "main_training_function", "rdzv_backend", "same_network", "use_cpu", "deepspeed_config",
                   "main_process_ip", "main_process_port")
MAIN_PROCESS_IP_PLACEHOLDER = "REPLACE_ME.node0.address"
"""Written as main_process_ip on several nodes: the address of the machine_rank 0 node (accelerate launch
--main_process_ip overrides it)."""
MAIN_PROCESS_PORT = 29500     # torch.distributed's customary rendezvous port (torchrun's --master-port default)
ACCELERATE_DEEPSPEED_KEYS = ("deepspeed_config_file", "zero3_init_flag", "deepspeed_multinode_launcher")
LORA_KEYS = ("r", "lora_alpha", "lora_dropout", "target_modules", "bias", "task_type")
TRAINER_SOURCE = ("huggingface/transformers: src/transformers/training_args.py (TrainingArguments.optim, "
                  "OptimizerNames)")
# The Trainer's `optim` name of each Training.optimizer (transformers OptimizerNames): torch's fused AdamW
# (Adam with the Trainer's default weight_decay 0 is the same update), bitsandbytes' 8-bit and paged 8-bit
# AdamW, transformers' Adafactor, torch SGD (momentum 0), bitsandbytes' 32-bit Lion.
TRAINER_OPTIM = {"adam": "adamw_torch_fused", "adamw": "adamw_torch_fused", "adamw-8bit": "adamw_bnb_8bit",
                 "paged-adamw-8bit": "paged_adamw_8bit", "adafactor": "adafactor", "sgd": "sgd", "lion": "lion_32bit"}
BNB_KEYS = ("load_in_4bit", "bnb_4bit_quant_type", "bnb_4bit_use_double_quant", "bnb_4bit_compute_dtype",
            "bnb_4bit_quant_storage")


def accelerate_config(layout: Layout, model: Model, training: Training, cluster: Cluster, assumptions=None,
                      deepspeed_json: str = "ds_config.json") -> str:
    """accelerate's YAML config for a DeepSpeed layout (the `--format deepspeed` JSON beside it).
    `assumptions` is accepted like the other exporters' and unused: the JSON carries the settings."""
    if layout.framework != "deepspeed":
        raise InputError("Layout.framework", layout.framework, "'deepspeed' for an accelerate config",
                         "accelerate launches the DeepSpeed layouts here; export the others with their own format")
    nodes = -(-cluster.gpus // cluster.gpus_per_node)
    lines = [
        f"# accelerate launch --config_file accelerate.yaml train.py   ({ACCELERATE_SOURCE.split(':')[0]})",
        yaml_comment(f"# DeepSpeed settings live in {deepspeed_json}: advisor recommend ... --format deepspeed > "
                     f"{shell_word(deepspeed_json)}"),
        "compute_environment: LOCAL_MACHINE",
        "distributed_type: DEEPSPEED",
        "deepspeed_config:",
        f"  deepspeed_config_file: {yaml_scalar(deepspeed_json)}",
        f"  zero3_init_flag: {'true' if layout.zero_stage == 3 else 'false'}",
    ]
    if nodes > 1:
        lines.append("  deepspeed_multinode_launcher: standard")
        lines += [f"main_process_ip: {MAIN_PROCESS_IP_PLACEHOLDER}   # the machine_rank 0 node's address",
                  f"main_process_port: {MAIN_PROCESS_PORT}"]
    lines += [
        f"machine_rank: 0   # {'set per node: 0 .. ' + str(nodes - 1) + ', or accelerate launch --machine_rank' if nodes > 1 else 'one node'}",
        "main_training_function: main",
        f"num_machines: {nodes}",
        f"num_processes: {cluster.gpus}",
        f"rdzv_backend: {'c10d' if nodes > 1 else 'static'}",
        "same_network: true",
        "use_cpu: false",
    ]
    return "\n".join(lines) + "\n"


def accelerate_notes(cluster: Cluster) -> list[str]:
    """The per-node parts of an accelerate launch on several nodes."""
    if cluster.nodes == 1:
        return []
    return [f"run accelerate launch on each of the {cluster.nodes} nodes with --machine_rank 0 .. {cluster.nodes - 1} "
            f"(the YAML says 0) and main_process_ip set to the rank-0 node's address (it holds "
            f"{MAIN_PROCESS_IP_PLACEHOLDER}; or pass --main_process_ip); with Slurm: srun --nodes={cluster.nodes} "
            "--ntasks-per-node=1 bash -c 'accelerate launch --config_file accelerate.yaml --machine_rank "
            "$SLURM_NODEID --main_process_ip $(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1) train.py'"]


def _half(training: Training) -> str:
    """The 16-bit type of the job's weights and compute: fp16 where it runs fp16 (a GPU without BF16), else bf16."""
    return "float16" if training.precision == "fp16" else "bfloat16"


def peft_config(model: Model, training: Training, layout: Layout | None = None) -> str:
    """JSON of the keyword arguments of PEFT's LoraConfig (and, for QLoRA, transformers'
    BitsAndBytesConfig) for the estimated adapter: rank, alpha, dropout and target modules (a fused
    target as its modules, "all-linear" as the seven), and the Trainer's `optim` for the optimizer priced.
    With the `layout`, a QLoRA base that ZeRO-3 shards stores its 4-bit weights in the 16-bit type."""
    if training.task not in FROZEN_BASE_TASKS:
        raise InputError("Training.task", training.task, "'lora' or 'qlora' for a PEFT config",
                         "full-weight jobs train without an adapter")
    if model.mla is not None or model.experts > 1 or model.activation != "swiglu" or model.bias:
        raise InputError("Model", model.name, "a Llama-style model (q/k/v/o_proj, gate/up/down_proj)",
                         "PEFT target_modules are the checkpoint's module names; advisor knows the Llama-style "
                         "ones only (advisor.inputs.finetune.PEFT_TARGETS)")
    if training.lora_rank is None or training.lora_alpha is None or training.lora_targets is None:
        raise InputError("Training.lora_rank", training.lora_rank, "resolved LoRA settings",
                         "recommend() and audit() fill the defaults; pass their training")
    modules = list(peft_modules(training.lora_targets))
    out: dict = {"lora_config": {"r": training.lora_rank, "lora_alpha": training.lora_alpha,
                                 "lora_dropout": training.lora_dropout or 0.0, "target_modules": modules,
                                 "bias": "none", "task_type": "CAUSAL_LM"},
                 "source": PEFT_SOURCE,
                 "training_arguments": {"optim": TRAINER_OPTIM[training.optimizer]},
                 "training_arguments_source": TRAINER_SOURCE}
    if training.task == "qlora":
        # QLoRA (Dettmers et al. 2023 §3): 4-bit NormalFloat, double-quantised constants, 16-bit compute (fp16
        # where the job runs fp16: a GPU without BF16)
        half = _half(training)
        out["bnb_config"] = {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True,
                             "bnb_4bit_compute_dtype": half}
        if layout is not None and layout.zero_stage == 3:
            # ZeRO-3 flattens and shards parameters of one dtype: the 4-bit weights are packed in the 16-bit
            # type, and the model loads in it (PEFT docs, accelerate/deepspeed.md, "Use PEFT QLoRA and
            # DeepSpeed with ZeRO3": bnb_4bit_quant_storage and from_pretrained's dtype the same)
            out["bnb_config"]["bnb_4bit_quant_storage"] = half
            out["from_pretrained_kwargs"] = {"dtype": half}
    return json.dumps(out, indent=2) + "\n"


TRL_SOURCE = ("huggingface/trl @ f2cd57710ae345ea6428ae95363267fcf38a3dc8 (1.10.0.dev0): trl/trainer/sft_config.py "
              "SFTConfig (max_length, packing, model_init_kwargs), a transformers TrainingArguments")
SFT_KEYS = ("per_device_train_batch_size", "gradient_accumulation_steps", "gradient_checkpointing", "bf16", "fp16",
            "optim", "deepspeed", "max_length", "packing", "model_init_kwargs")


def trl_notes(layout: Layout, training: Training) -> list[str]:
    """What the Trainer's arguments cannot say: FP8 GEMMs and model parallelism come from elsewhere."""
    notes = []
    if training.precision not in ("bf16", "fp16"):
        notes.append(f"precision {training.precision}: the Trainer has no FP8 / FP4 GEMM setting; the estimate assumes "
                     "the linear layers run in low precision (accelerate's fp8 mixed precision with Transformer Engine "
                     "or torchao), which this config does not turn on")
    if layout.tp > 1 or layout.pp > 1:
        notes.append(f"tp {layout.tp} x pp {layout.pp}: the Trainer with DeepSpeed runs data parallelism (ZeRO); the model "
                     "parallelism must come from a model-parallel unit the launch supplies (the DeepSpeed notes say "
                     "which dp it must report)")
    return notes


def trl_config(layout: Layout, model: Model, training: Training, cluster: Cluster, assumptions=None,
               deepspeed_json: str = "ds_config.json") -> str:
    """JSON of TRL's SFTConfig keyword arguments for a DeepSpeed layout (the `--format deepspeed` JSON beside
    it): the batch split, the recompute (gradient_checkpointing), the precision and master copy (bf16 autocast
    over fp32 weights, or bf16 weights), the optimizer, the attention kernel, the sequence and its packing the
    estimate priced. `assumptions` is accepted like the other exporters' and unused."""
    if layout.framework != "deepspeed":
        raise InputError("Layout.framework", layout.framework, "'deepspeed' for a TRL config",
                         "the Hugging Face stacks run the DeepSpeed layouts here; export the others with their own format")
    b = resolved(layout, training, cluster)
    no_cuda_graphs(layout, training)
    # the weights the optimizer updates: fp32 (a master copy) or 16-bit (master_weights "none"); a frozen base
    # loads in 16 bits and the adapters' dtype is PEFT's (autocast_adapter_dtype, the peft_kwargs below)
    dtype = _half(training) if training.frozen_base or training.master_weights == "none" else "float32"
    sft = {"per_device_train_batch_size": b.mbs, "gradient_accumulation_steps": b.m,
           "gradient_checkpointing": layout.recompute == "full",
           "bf16": training.precision != "fp16", "fp16": training.precision == "fp16",
           "optim": TRAINER_OPTIM[training.optimizer], "deepspeed": deepspeed_json, "max_length": b.seq,
           "packing": training.packed_sample_tokens is not None,
           "model_init_kwargs": {"dtype": dtype,
                                 "attn_implementation": "flash_attention_2" if training.flash_attention else "eager"}}
    out: dict = {"sft_config": sft, "source": TRL_SOURCE}
    if training.frozen_base:
        # PEFT keeps the adapters in fp32 unless get_peft_model(..., autocast_adapter_dtype=False)
        out["get_peft_model_kwargs"] = {"autocast_adapter_dtype": training.master_weights == "fp32"}
    return json.dumps(out, indent=2) + "\n"
