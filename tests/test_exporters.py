"""Exporters: Megatron-LM flags, DeepSpeed JSON, torchtitan TOML and torchrun lines for one Layout.

The Megatron flags are parsed by an argparse parser built from `MEGATRON_FLAGS` (the table of
flags checked against NVIDIA/Megatron-LM megatron/training/arguments.py, with the same `type`,
`action` and `choices`), so a misspelt or unverified flag fails. The DeepSpeed config is fed to
DeepSpeed's own `DeepSpeedConfig` when the `deepspeed` package is installed (in a subprocess, with
a one-process gloo group and a model-parallel unit reporting the layout's dp).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import textwrap
import tomllib

import pytest

import advisor
from advisor import export as ex
from advisor.inputs.layout import Layout
from advisor.inputs.pipeline import stage_layers
from advisor.inputs.specs import Cluster, Model, Training

H100_64 = Cluster(gpu="H100-SXM-80GB", gpus=64)
LLAMA70 = Model.preset("llama-3-70b")
T70 = Training(seq_len=8192, global_batch_size=512)

# Llama-3-70B on 64 H100: TP8 x PP2 x DP4 with the distributed optimizer.
TP8_PP2 = Layout(tp=8, pp=2, dp=4, sp=True, zero_stage=1, micro_batch_size=1, num_microbatches=128,
                 recompute="selective")
# Megatron's parallelism guide for 70B on 64 GPUs: TP4 x PP4 x CP2 (here with 2 virtual stages).
TP4_PP4_CP2 = Layout(tp=4, pp=4, cp=2, dp=2, vpp=2, sp=True, zero_stage=1, micro_batch_size=1,
                     num_microbatches=256)

LLAMA70_SHAPE = [
    "--num-layers", "80", "--hidden-size", "8192", "--ffn-hidden-size", "28672",
    "--num-attention-heads", "64", "--group-query-attention", "--num-query-groups", "8",
    "--seq-length", "8192", "--max-position-embeddings", "8192", "--position-embedding-type", "rope",
    "--rotary-base", "500000", "--normalization", "RMSNorm", "--attention-dropout", "0.0", "--hidden-dropout", "0.0", "--swiglu", "--untie-embeddings-and-output-weights",
    "--disable-bias-linear",
]


# --- a parser with the types, actions and choices of Megatron-LM's add_argument calls ----------

def _moe_freq(text: str):
    """Megatron's moe_freq_type: an int, or a list expression of digits, [], (), + and *."""
    if re.fullmatch(r"\d+", text):
        return int(text)
    if re.search(r"[^,\d\[\]()+*]", text):
        raise argparse.ArgumentTypeError(f"invalid pattern {text!r}")
    return eval(text, {"__builtins__": {}})  # the characters are restricted above, as Megatron does


def megatron_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pretrain_gpt.py", allow_abbrev=False, add_help=False)
    for flag, spec in ex.MEGATRON_FLAGS.items():
        kw = {"dest": spec.dest} if spec.dest else {}
        if spec.kind in ("store_true", "store_false"):
            parser.add_argument(flag, action=spec.kind, **kw)
        elif spec.kind == "choice":
            parser.add_argument(flag, choices=spec.choices + spec.main_choices, **kw)
        elif spec.kind == "str_list":
            parser.add_argument(flag, nargs="*", **kw)
        elif spec.kind == "moe_freq":
            parser.add_argument(flag, type=_moe_freq, default=1, **kw)
        else:
            parser.add_argument(flag, type={"int": int, "float": float, "str": str}[spec.kind], **kw)
    return parser


def parse(args: list[str]) -> argparse.Namespace:
    return megatron_parser().parse_args(args)


def test_flag_table_records_where_each_flag_was_seen():
    assert ex.MEGATRON_ARGUMENTS_SOURCE.startswith("NVIDIA/Megatron-LM megatron/training/arguments.py @ ")
    for flag, spec in ex.MEGATRON_FLAGS.items():
        assert flag == spec.flag and flag.startswith("--")
        # 000c4ac's character windows, or (issue 20 flags) the declaration at each MEGATRON_PINS release
        assert re.match(r"_add_\w+_args, chars \d+-\d+", spec.where) or all(
            f"{v}: " in spec.where for v in spec.versions), flag
        assert (spec.kind == "choice") == bool(spec.choices), flag


def test_parser_rejects_a_typo():
    with pytest.raises(SystemExit):
        megatron_parser().parse_args(["--tensor-model-paralel-size", "8"])
    with pytest.raises(SystemExit):
        megatron_parser().parse_args(["--recompute-granularity", "partial"])


# --- Megatron-LM --------------------------------------------------------------------------------

def test_megatron_tp8_pp2_exact():
    args = ex.megatron_args(TP8_PP2, LLAMA70, T70, H100_64)
    assert args == LLAMA70_SHAPE + [
        "--tensor-model-parallel-size", "8", "--pipeline-model-parallel-size", "2", "--sequence-parallel",
        "--context-parallel-size", "1", "--overlap-grad-reduce", "--use-distributed-optimizer", "--overlap-param-gather",
        "--micro-batch-size", "1", "--global-batch-size", "512",
        "--recompute-granularity", "selective", "--recompute-modules", "core_attn", "--bf16",
        "--attention-backend", "flash", "--optimizer", "adam",
    ]
    ns = parse(args)
    assert (ns.tensor_model_parallel_size, ns.pipeline_model_parallel_size) == (8, 2)
    assert ns.sequence_parallel and ns.use_distributed_optimizer and ns.bf16 and ns.swiglu
    assert ns.add_bias_linear is False                       # --disable-bias-linear: store_false
    assert ns.global_batch_size % (ns.micro_batch_size * TP8_PP2.dp) == 0           # Megatron M11


def test_megatron_tp4_pp4_cp2_vpp_exact():
    args = ex.megatron_args(TP4_PP4_CP2, LLAMA70, T70, H100_64)
    assert args == LLAMA70_SHAPE + [
        "--tensor-model-parallel-size", "4", "--pipeline-model-parallel-size", "4",
        "--num-layers-per-virtual-pipeline-stage", "10", "--sequence-parallel",
        "--context-parallel-size", "2", "--overlap-grad-reduce", "--use-distributed-optimizer", "--overlap-param-gather",
        "--micro-batch-size", "1", "--global-batch-size", "512", "--bf16", "--attention-backend", "flash",
        "--optimizer", "adam",
    ]
    ns = parse(args)
    assert ns.num_layers // ns.pipeline_model_parallel_size // ns.num_layers_per_virtual_pipeline_stage == 2
    assert ns.seq_length % (2 * ns.context_parallel_size) == 0                        # Megatron M15


def test_megatron_full_recompute_fp8_and_offload():
    layout = TP8_PP2.model_copy(update={"recompute": "full", "offload": "optimizer"})
    args = ex.megatron_args(layout, LLAMA70, T70.model_copy(update={"precision": "fp8"}), H100_64)
    ns = parse(args)
    assert (ns.recompute_granularity, ns.recompute_method, ns.recompute_num_layers) == ("full", "uniform", 1)
    assert ns.bf16 and ns.fp8 == "hybrid"
    assert ns.optimizer_cpu_offload and ns.use_precision_aware_optimizer
    fp16 = parse(ex.megatron_args(TP8_PP2, LLAMA70, T70.model_copy(update={"precision": "fp16"}), H100_64))
    assert fp16.fp16 and not fp16.bf16


@pytest.mark.parametrize(("zero", "flags"), [
    (0, ["--overlap-grad-reduce"]),
    (1, ["--overlap-grad-reduce", "--use-distributed-optimizer", "--overlap-param-gather"]),
    (2, ["--overlap-grad-reduce", "--use-megatron-fsdp", "--use-distributed-optimizer",
         "--data-parallel-sharding-strategy", "optim_grads",
         "--ckpt-format", "fsdp_dtensor"]),
    (3, ["--overlap-grad-reduce", "--use-megatron-fsdp", "--use-distributed-optimizer",
         "--data-parallel-sharding-strategy", "optim_grads_params",
         "--ckpt-format", "fsdp_dtensor"]),
])
def test_megatron_zero_mapping(zero, flags):
    layout = Layout(tp=8, dp=8, zero_stage=zero, micro_batch_size=1, num_microbatches=64)
    args = ex.megatron_args(layout, LLAMA70, T70, H100_64)
    start = args.index("--context-parallel-size") + 2
    assert args[start:args.index("--micro-batch-size")] == flags
    parse(args)
    deepspeed_run = layout.model_copy(update={"framework": "megatron+deepspeed"})
    assert "--use-distributed-optimizer" not in ex.megatron_args(deepspeed_run, LLAMA70, T70, H100_64)


def test_megatron_deepseek_v3_moe_and_mla():
    model = Model.preset("deepseek-v3")
    cluster = Cluster(gpu="H100-SXM-80GB", gpus=1024)
    layout = Layout(tp=2, pp=16, ep=64, dp=32, sp=True, zero_stage=1, micro_batch_size=1, num_microbatches=128)
    training = Training(seq_len=4096, global_batch_size=4096)
    ns = parse(ex.megatron_args(layout, model, training, cluster))
    assert (ns.num_experts, ns.moe_router_topk, ns.moe_ffn_hidden_size) == (256, 8, 2048)
    assert ns.moe_shared_expert_intermediate_size == 2048
    assert ns.moe_layer_freq == [0] * 3 + [1] * 58
    assert ns.multi_latent_attention and (ns.q_lora_rank, ns.kv_lora_rank) == (1536, 512)
    assert (ns.qk_head_dim, ns.qk_pos_emb_head_dim, ns.v_head_dim) == (128, 64, 128)
    assert ns.mtp_num_layers == 1 and ns.num_query_groups is None and not ns.group_query_attention
    assert (ns.expert_model_parallel_size, ns.expert_tensor_parallel_size) == (64, 2)


def test_megatron_mixtral_ep_and_gpt_style_model():
    mix = Model.preset("mixtral-8x7b")
    layout = Layout(tp=1, pp=4, ep=8, dp=16, zero_stage=1, micro_batch_size=1, num_microbatches=32)
    ns = parse(ex.megatron_args(layout, mix, Training(seq_len=4096, global_batch_size=512), H100_64))
    assert (ns.num_experts, ns.expert_model_parallel_size, ns.expert_tensor_parallel_size) == (8, 8, 1)
    assert ns.moe_layer_freq == 1
    gpt = advisor.Model(layers=4, hidden=256, heads=4, ffn_hidden=1024, vocab=1000, activation="gelu",
                        norm="layernorm", bias=True, tied_embeddings=True, position_embedding="learned",
                        max_position=2048)
    ns = parse(ex.megatron_args(Layout(dp=8, num_microbatches=1), gpt, Training(seq_len=1024, global_batch_size=8),
                                Cluster(gpu="H100-SXM-80GB", gpus=8)))
    assert (ns.position_embedding_type, ns.max_position_embeddings, ns.normalization) == ("learned_absolute", 2048,
                                                                                        "LayerNorm")
    assert ns.add_bias_linear is True and not ns.swiglu and not ns.untie_embeddings_and_output_weights


def test_megatron_command_is_shell_ready():
    cmd = ex.megatron_command(TP8_PP2, LLAMA70, T70, H100_64)
    lines = cmd.split(" \\\n    ")
    assert lines[0] == ('CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun --nnodes=8 --nproc-per-node=8 --rdzv-id="$JOB_ID" '
                        '--rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" pretrain_gpt.py')
    assert all(line.startswith("--") for line in lines[1:])    # one flag (and its value) per line
    tokens = shlex.split(cmd.replace("\\\n", " "))
    assert parse(tokens[tokens.index("pretrain_gpt.py") + 1:]) == parse(ex.megatron_args(TP8_PP2, LLAMA70, T70,
                                                                                          H100_64))
    fsdp = Layout(tp=1, dp=64, zero_stage=3, micro_batch_size=1, num_microbatches=8)
    assert not ex.megatron_command(fsdp, LLAMA70, T70, H100_64).startswith("CUDA_DEVICE_MAX_CONNECTIONS")


def test_megatron_moe_pattern_is_quoted_in_the_command():
    model = Model.preset("deepseek-v3")
    layout = Layout(tp=2, pp=16, ep=64, dp=32, zero_stage=1, micro_batch_size=1, num_microbatches=128)
    cmd = ex.megatron_command(layout, model, Training(seq_len=4096, global_batch_size=4096),
                              Cluster(gpu="H100-SXM-80GB", gpus=1024))
    assert "--moe-layer-freq '([0]*3+[1]*58)'" in cmd


# --- errors shared by the exporters ------------------------------------------------------------

@pytest.mark.parametrize("export", [ex.megatron_args, ex.deepspeed_config, ex.torchtitan_toml])
def test_batch_identity_is_enforced(export):
    bad = TP8_PP2.model_copy(update={"num_microbatches": 100})
    with pytest.raises(advisor.InputError, match=r"global_batch_size[\s\S]*1\) \* num_microbatches\(100\) \* dp\(4\) = 400"):
        export(bad, LLAMA70, T70, H100_64)


@pytest.mark.parametrize("export", [ex.megatron_args, ex.deepspeed_config, ex.torchtitan_toml])
def test_unresolved_inputs_are_named(export):
    with pytest.raises(advisor.InputError, match=r"Layout\.dp"):
        export(Layout(tp=8, pp=2, num_microbatches=128), LLAMA70, T70, H100_64)
    with pytest.raises(advisor.InputError, match=r"Layout\.num_microbatches"):
        export(Layout(tp=8, pp=2, dp=4), LLAMA70, T70, H100_64)
    with pytest.raises(advisor.InputError, match=r"Training\.seq_len"):
        export(TP8_PP2, LLAMA70, Training(global_batch_size=512), H100_64)
    with pytest.raises(advisor.InputError, match=r"Layout\.dp[\s\S]*= 32"):
        export(TP8_PP2.model_copy(update={"dp": 2, "num_microbatches": 256}), LLAMA70, T70, H100_64)


def test_megatron_uneven_pipeline_gets_first_and_last_stage_flags():
    """Llama 3.1 405B: 126 layers on pp 16 run as 7 | 8 x 14 | 7 (the Llama 3 paper's split, and the
    one the cost model estimated); Megatron refuses 126 % 16 without the two flags (M8)."""
    model = Model.preset("llama-3.1-405b")
    layout = Layout(tp=8, pp=16, dp=8, sp=True, zero_stage=1, micro_batch_size=1, num_microbatches=64)
    training = Training(seq_len=8192, global_batch_size=512)
    ns = parse(ex.megatron_args(layout, model, training, Cluster(gpu="H100", gpus=1024)))
    first, last = ns.decoder_first_pipeline_num_layers, ns.decoder_last_pipeline_num_layers
    middle = (ns.num_layers - first - last) / (ns.pipeline_model_parallel_size - 2)
    assert (first, last, middle) == (7, 7, 8)
    even = ex.megatron_args(TP8_PP2, LLAMA70, T70, H100_64)
    assert "--decoder-first-pipeline-num-layers" not in even
    # DeepSeek-V3's 61 layers on pp 16: middle stages of 4, first and last 3 + 2 (NeMo's recipe)
    ns = parse(ex.megatron_args(layout.model_copy(update={"ep": 8, "etp": 1}), Model.preset("deepseek-v3"),
                                training, Cluster(gpu="H100", gpus=1024)))
    assert (ns.decoder_first_pipeline_num_layers, ns.decoder_last_pipeline_num_layers) == (3, 2)
    # and its node-limited router: 8 groups, 4 per token (the model, not the layout)
    assert (ns.moe_router_num_groups, ns.moe_router_group_topk) == (8, 4)
    # 126 layers on pp 20: middle stages of 7 would leave nothing for the first and last, so the split
    # the cost model estimated (context.stage_layers: 6 or 7 per stage) is written out as a layout
    ns = parse(ex.megatron_args(layout.model_copy(update={"pp": 20}), model, training, Cluster(gpu="H100", gpus=1280)))
    stages = ns.pipeline_model_parallel_layout.split("|")
    assert ns.decoder_first_pipeline_num_layers is None and len(stages) == 20
    assert [st.count("t") for st in stages] == stage_layers(126, 20) and sum(map(len, stages)) == 126 + 2


def test_megatron_uneven_interleaved_pipeline_counts_the_embedding_and_loss_or_gets_a_layout():
    """126 layers on pp 16 with vpp 2: the ranks keep Llama 3's 7 | 8 x 14 | 7 and split it into two
    chunks each (3 + 4 on the first rank, embedding side small; 4 + 3 on the last, loss side small):
    128 = 126 + embedding + loss over 32 chunks of 4, which Megatron-Core says with its accounting flags
    and --num-layers-per-virtual-pipeline-stage 4 (the per-chunk count including them). DeepSeek-V3's 61
    layers on 16 x 2 (3 | 4 x 14 | 2) divide neither way: only --pipeline-model-parallel-layout says it."""
    model = Model.preset("llama-3.1-405b")
    layout = Layout(tp=8, pp=16, dp=8, vpp=2, sp=True, zero_stage=1, micro_batch_size=1, num_microbatches=64)
    training = Training(seq_len=8192, global_batch_size=512)
    ns = parse(ex.megatron_args(layout, model, training, Cluster(gpu="H100", gpus=1024)))
    assert ns.account_for_embedding_in_pipeline_split and ns.account_for_loss_in_pipeline_split
    assert ns.num_layers_per_virtual_pipeline_stage == 4 and ns.pipeline_model_parallel_layout is None
    assert ns.decoder_first_pipeline_num_layers is None
    # DeepSeek-V3's MTP layer sits with the loss; 61 layers: 3 | 4 x 14 | 2, two chunks per rank
    ns = parse(ex.megatron_args(layout.model_copy(update={"ep": 8, "etp": 1}), Model.preset("deepseek-v3"),
                                training, Cluster(gpu="H100", gpus=1024)))
    stages = ns.pipeline_model_parallel_layout.split("|")
    assert len(stages) == 32 and stages[0] == "Et" and stages[-1] == "tmL"
    assert sum(st.count("t") for st in stages) == 61 and not ns.account_for_loss_in_pipeline_split
    per_rank = [sum(stages[j * 16 + k].count("t") for j in range(2)) for k in range(16)]
    assert per_rank == [3] + [4] * 14 + [2]
    # more chunks than the lightest stage's layers + 1 (2 on DeepSeek-V3's last rank: 3 chunks) cannot be laid out
    with pytest.raises(advisor.InputError, match=r"Layout\.vpp[\s\S]*megatron\.virtual-stage-needs-a-layer[\s\S]*lightest stage holds 2"):
        ex.megatron_args(layout.model_copy(update={"ep": 8, "etp": 1, "vpp": 4}), Model.preset("deepseek-v3"),
                         training, Cluster(gpu="H100", gpus=1024))


def test_megatron_chunks_of_the_embedding_or_the_loss_alone():
    """Issue 29: the layouts Megatron-Bridge runs with more model chunks than a rank has layers, the
    embedding's first chunk and the loss's last chunk holding no decoder layer. Llama 3.1 405B at
    PP 16 x VPP 8: 126 + 2 = 128 chunks of one; Qwen3-235B at PP 8 x VPP 12: 94 + 2 = 96; DeepSeek-V3
    at PP 31 x VPP 2: 61 + the loss = 62, its MTP layer with the loss. Each exports as the accounting
    flags with one layer per chunk, at both pinned releases, and the audit calls it legal."""
    cases = [("llama-3.1-405b", Layout(tp=8, pp=16, vpp=8, sp=True, zero_stage=1), 1024, True),
             ("qwen3-235b-a22b", Layout(tp=1, pp=8, vpp=12, ep=8, etp=1, zero_stage=1), 256, True),
             ("deepseek-v3", Layout(tp=1, pp=31, vpp=2, ep=8, etp=1, zero_stage=1), 31 * 64, False)]
    for name, layout, gpus, embedding in cases:
        model, cluster = Model.preset(name), Cluster(gpu="H100", gpus=gpus)
        training = Training(seq_len=4096, global_batch_size=gpus // (layout.tp * layout.pp) * layout.pp * 2)
        layout = layout.model_copy(update={"dp": gpus // (layout.tp * layout.pp), "micro_batch_size": 1,
                                           "num_microbatches": layout.pp * 2})
        errors = [f.rule_id for f in advisor.audit(cluster, model, layout, training).errors
                  if not f.rule_id.startswith("layout.memory")]
        assert errors == [], (name, errors)
        for version in ex.MEGATRON_PINS:
            args = ex.megatron_args(layout, model, training, cluster, version=version)
            ns = parse(args)
            assert ns.account_for_embedding_in_pipeline_split is embedding, (name, version)
            assert ns.account_for_loss_in_pipeline_split is True, (name, version)
            assert ns.num_layers_per_virtual_pipeline_stage == 1 and ns.pipeline_model_parallel_layout is None
            assert (ns.num_layers + embedding + 1) == layout.pp * layout.vpp


def test_megatron_qwen3_gets_qk_layernorm_and_its_head_size():
    """Qwen3 normalises each query and key head and its heads are not hidden / heads wide: without
    --qk-layernorm and --kv-channels Megatron would build another model."""
    model = Model.preset("qwen3-30b-a3b")
    layout = Layout(tp=1, pp=2, dp=8, ep=8, etp=1, zero_stage=1, micro_batch_size=1, num_microbatches=32)
    ns = parse(ex.megatron_args(layout, model, Training(seq_len=4096, global_batch_size=256),
                                Cluster(gpu="H100", gpus=16)))
    assert ns.qk_layernorm is True and ns.kv_channels == 128 != ns.hidden_size // ns.num_attention_heads
    assert "--qk-layernorm" not in ex.megatron_args(TP8_PP2, LLAMA70, T70, H100_64)


def test_megatron_refuses_what_it_cannot_express():
    # 40 layers per rank in 3 chunks (13 + 13 + 14 on the first, 14 + 13 + 13 on the last) is a layout, not --num-layers-per-virtual-pipeline-stage;
    # 41 chunks of 40 layers run with the embedding's and the loss's chunks holding no layer (80 + 2 = 82 = 2 x 41);
    # 42 would leave one empty
    ns = parse(ex.megatron_args(TP8_PP2.model_copy(update={"vpp": 3}), LLAMA70, T70, H100_64))
    assert [st.count("t") for st in ns.pipeline_model_parallel_layout.split("|")] == [13, 14, 13, 13, 14, 13]
    ns = parse(ex.megatron_args(TP8_PP2.model_copy(update={"vpp": 41}), LLAMA70, T70, H100_64))
    assert ns.account_for_embedding_in_pipeline_split and ns.num_layers_per_virtual_pipeline_stage == 1
    with pytest.raises(advisor.InputError, match=r"Layout\.vpp[\s\S]*lightest stage holds 40"):
        ex.megatron_args(TP8_PP2.model_copy(update={"vpp": 42}), LLAMA70, T70, H100_64)
    with pytest.raises(advisor.InputError, match=r"Layout\.offload[\s\S]*megatron\.offload-optimizer-to-cpu-only"):
        ex.megatron_args(TP8_PP2.model_copy(update={"offload": "optimizer+params"}), LLAMA70, T70, H100_64)
    bloom = Model.preset("bloom-176b")
    with pytest.raises(advisor.InputError, match=r"Model\.position_embedding[\s\S]*megatron\.no-alibi[\s\S]*ALiBi"):
        ex.megatron_args(TP8_PP2, bloom, Training(seq_len=2048, global_batch_size=512), H100_64)
    with pytest.raises(advisor.InputError, match=r"Layout\.ep[\s\S]*megatron\.experts-divisible-by-ep"):
        ex.megatron_args(Layout(tp=8, ep=2, dp=8, micro_batch_size=1, num_microbatches=64), LLAMA70, T70, H100_64)
    with pytest.raises(advisor.InputError, match=r"Layout\.vpp[\s\S]*megatron\.vpp-needs-pp"):
        ex.megatron_args(TP8_PP2.model_copy(update={"pp": 1, "dp": 8, "num_microbatches": 64, "vpp": 2}),
                         LLAMA70, T70, H100_64)
    gpt3 = Model.preset("gpt-3-175b")   # learned positions: 2,048 rows
    with pytest.raises(advisor.InputError, match=r"Training\.seq_len[\s\S]*megatron\.max-position-covers-sequence"):
        ex.megatron_args(TP8_PP2, gpt3, T70, H100_64)


def test_megatron_rope_context_extension_raises_the_position_limit():
    """Llama-3-8B (RoPE, 8,192 positions) at 16K: the export sizes --max-position-embeddings to the
    sequence, as the audit's note megatron.rope-context-extension says; it writes no RoPE scaling."""
    layout = Layout(tp=8, dp=8, sp=True, zero_stage=1, micro_batch_size=1, num_microbatches=32)
    ns = parse(ex.megatron_args(layout, Model.preset("llama-3-8b"), Training(seq_len=16384, global_batch_size=256),
                                H100_64))
    assert (ns.seq_length, ns.max_position_embeddings, ns.position_embedding_type) == (16384, 16384, "rope")
    report = advisor.audit(H100_64, "llama-3-8b", layout, Training(seq_len=16384, global_batch_size=256))
    notes = [f for f in report.findings if f.rule_id == "megatron.rope-context-extension"]
    assert report.ok and len(notes) == 1 and notes[0].severity == "info"
    assert "--max-position-embeddings 16384" in notes[0].message


# --- DeepSpeed ---------------------------------------------------------------------------------

DS_TP8_PP2 = TP8_PP2.model_copy(update={"framework": "deepspeed"})
DS_ZERO3_NVME = Layout(framework="deepspeed", tp=1, dp=64, zero_stage=3, micro_batch_size=1, num_microbatches=8,
                       offload="optimizer+params", offload_device="nvme")


def test_deepspeed_tp8_pp2_exact():
    assert ex.deepspeed_config(DS_TP8_PP2, LLAMA70, T70, H100_64) == {
        "train_batch_size": 512,
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 128,
        "gradient_clipping": 1.0,
        "zero_optimization": {"stage": 1, "overlap_comm": True, "reduce_bucket_size": 500_000_000},
        "bf16": {"enabled": True},
    }


def test_deepspeed_writes_what_the_estimate_assumed():
    cfg = ex.deepspeed_config(DS_TP8_PP2, LLAMA70, T70, H100_64,
                              advisor.Assumptions(overlap_grad_reduce=False, deepspeed_bucket_elements=2e8))
    assert cfg["zero_optimization"] == {"stage": 1, "overlap_comm": False, "reduce_bucket_size": 200_000_000}
    # ZeRO-Offload: DeepSpeed's own optimizer (a client optimizer is refused, engine.py L2344)
    off = ex.deepspeed_config(DS_ZERO3_NVME, LLAMA70, T70, H100_64)
    assert off["optimizer"] == {"type": "Adam", "params": {}}
    assert "optimizer" not in ex.deepspeed_config(DS_TP8_PP2, LLAMA70, T70, H100_64)


def test_deepspeed_ulysses_cp_sets_sequence_parallel_size():
    cluster = Cluster(gpu="H100", gpus=8)
    layout = Layout(framework="deepspeed", cp=4, dp=2, zero_stage=3, num_microbatches=64)
    training = Training(seq_len=32768, global_batch_size=128)
    cfg = ex.deepspeed_config(layout, Model.preset("llama-3-8b"), training, cluster)
    assert cfg["sequence_parallel_size"] == 4
    # DeepSpeedConfig without an mpu: world_size / sequence_parallel_size is the DP world
    assert cfg["train_batch_size"] == cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"] * (
        cluster.gpus // cfg["sequence_parallel_size"])
    notes = ex.deepspeed_notes(layout, Model.preset("llama-3-8b"), training, cluster)
    assert any("DistributedAttention" in n for n in notes)


def test_deepspeed_notes_state_the_dp_size_of_megatron_deepspeed():
    layout = TP8_PP2.model_copy(update={"framework": "megatron+deepspeed"})
    notes = ex.deepspeed_notes(layout, LLAMA70, T70, H100_64)
    assert any("data-parallel size 4" in n and "512 != 1 * 128 * 64" in n for n in notes)


def test_deepspeed_offload_sections():
    cfg = ex.deepspeed_config(DS_ZERO3_NVME, LLAMA70, T70, H100_64)
    z = cfg["zero_optimization"]
    assert z["stage"] == 3
    for sec in ("offload_optimizer", "offload_param"):
        assert z[sec] == {"device": "nvme", "pin_memory": True, "nvme_path": ex.NVME_PATH_PLACEHOLDER}
    assert "REPLACE" in ex.NVME_PATH_PLACEHOLDER
    cpu = ex.deepspeed_config(DS_TP8_PP2.model_copy(update={"offload": "optimizer"}), LLAMA70, T70, H100_64)
    assert cpu["zero_optimization"]["offload_optimizer"] == {"device": "cpu", "pin_memory": True}
    fp16 = ex.deepspeed_config(DS_TP8_PP2, LLAMA70, T70.model_copy(update={"precision": "fp16"}), H100_64)
    assert fp16["fp16"] == {"enabled": True} and "bf16" not in fp16
    json.dumps(cfg)                                           # JSON-ready


def test_deepspeed_refuses_zero2_with_pipeline():
    with pytest.raises(advisor.InputError, match=r"Layout\.zero_stage[\s\S]*deepspeed\.zero-2-3-with-pipeline[\s\S]*deepspeed/runtime/pipe/engine\.py"):
        ex.deepspeed_config(DS_TP8_PP2.model_copy(update={"zero_stage": 2}), LLAMA70, T70, H100_64)


def test_deepspeed_refuses_offload_the_stage_cannot_do():
    with pytest.raises(advisor.InputError, match=r"deepspeed\.param-offload-needs-zero3[\s\S]*offload_param is valid only with ZeRO stage 3"):
        ex.deepspeed_config(DS_TP8_PP2.model_copy(update={"offload": "optimizer+params"}), LLAMA70, T70, H100_64)
    with pytest.raises(advisor.InputError, match=r"Layout\.offload_device[\s\S]*deepspeed\.nvme-offload-needs-zero3"):
        ex.deepspeed_config(DS_TP8_PP2.model_copy(update={"offload": "optimizer", "offload_device": "nvme"}),
                            LLAMA70, T70, H100_64)
    with pytest.raises(advisor.InputError, match=r"ZeRO stage 0[\s\S]*deepspeed\.optimizer-offload-needs-zero"):
        ex.deepspeed_config(DS_TP8_PP2.model_copy(update={"offload": "optimizer", "zero_stage": 0}),
                            LLAMA70, T70, H100_64)


_DS_CHECK = textwrap.dedent("""
    import json, os, sys
    import deepspeed.comm as dist
    from deepspeed.runtime.config import DeepSpeedConfig

    dist.init_distributed(dist_backend="gloo", auto_mpi_discovery=False, verbose=False)

    class DataParallelUnit:  # what Megatron's mpu tells DeepSpeed: the data-parallel world size
        def __init__(self, dp):
            self.dp = dp
        def get_data_parallel_world_size(self):
            return self.dp

    out = []
    for case in json.load(open(sys.argv[1])):
        try:
            c = DeepSpeedConfig(case["config"], mpu=DataParallelUnit(case["dp"]))
            out.append({"ok": True, "world": c.world_size, "train_batch_size": c.train_batch_size,
                        "gas": c.gradient_accumulation_steps, "stage": int(c.zero_optimization_stage)})
        except Exception as e:  # AssertionError for the batch identity, ValidationError for keys
            out.append({"ok": False, "error": f"{type(e).__name__}: {e}"})
    print("RESULT " + json.dumps(out))
""")


def test_deepspeed_config_accepted_by_deepspeed(tmp_path):
    if importlib.util.find_spec("deepspeed") is None:
        pytest.skip("the deepspeed package is not installed here (it needs torch; it is not a dependency of "
                    "advisor): DeepSpeedConfig validation not run")
    cases = [
        {"dp": 4, "config": ex.deepspeed_config(DS_TP8_PP2, LLAMA70, T70, H100_64)},
        {"dp": 64, "config": ex.deepspeed_config(DS_ZERO3_NVME, LLAMA70, T70, H100_64)},
        {"dp": 4, "config": ex.deepspeed_config(DS_TP8_PP2.model_copy(update={"offload": "optimizer"}),
                                                 LLAMA70, T70, H100_64)},
        # controls: DeepSpeed itself must reject these, or the check above proves nothing
        {"dp": 4, "config": {**ex.deepspeed_config(DS_TP8_PP2, LLAMA70, T70, H100_64), "train_batch_size": 500}},
        {"dp": 4, "config": {**ex.deepspeed_config(DS_TP8_PP2, LLAMA70, T70, H100_64),
                             "zero_optimization": {"stage": 1, "offload_optimizer": {"device": "disk"}}}},
    ]
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0", "LOCAL_RANK": "0",
           "WORLD_SIZE": "1", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, "-c", _DS_CHECK, str(path)], capture_output=True, text=True,
                          timeout=900, env={**os.environ, **env})
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, proc.stdout[-2000:] + proc.stderr[-4000:]
    res = json.loads(line[len("RESULT "):])
    assert res[0] == {"ok": True, "world": 4, "train_batch_size": 512, "gas": 128, "stage": 1}
    assert res[1] == {"ok": True, "world": 64, "train_batch_size": 512, "gas": 8, "stage": 3}
    assert res[2]["ok"], res[2]
    assert not res[3]["ok"] and "500 != 1 * 128 * 4" in res[3]["error"]
    assert not res[4]["ok"] and "offload_optimizer" in res[4]["error"]


# --- torchtitan --------------------------------------------------------------------------------

def _toml(layout, model=LLAMA70, training=T70, cluster=H100_64) -> dict:
    return tomllib.loads(ex.torchtitan_toml(layout, model, training, cluster))


def _keys(doc: dict) -> set[str]:
    return {f"{section}.{key}" for section, table in doc.items() for key in table}


def test_torchtitan_tp8_pp2():
    text = ex.torchtitan_toml(TP8_PP2, LLAMA70, T70, H100_64)
    doc = tomllib.loads(text)
    assert _keys(doc) <= set(ex.TORCHTITAN_KEYS)               # only verified key names
    assert doc["parallelism"] == {      # ZeRO-1 runs as FSDP: torchtitan's DDP refuses TP and PP
        "data_parallel_replicate_degree": 1, "data_parallel_shard_degree": 4, "fsdp_reshard_after_forward": "never",
        "tensor_parallel_degree": 8, "pipeline_parallel_degree": 2, "context_parallel_degree": 1,
        "expert_parallel_degree": 1, "pipeline_parallel_schedule": "1F1B", "pipeline_parallel_microbatch_size": 1,
    }
    assert doc["training"] == {"local_batch_size": 128, "global_batch_size": 512, "seq_len": 8192,
                               "mixed_precision_param": "bfloat16"}
    assert doc["activation_checkpoint"] == {"mode": "selective"}
    assert "ZeRO-1 -> FSDP" in text     # the mapping is said in a comment
    # main: the same settings as --section.key overrides (the batch in tokens), AC as a subcommand
    args = ex.torchtitan_args(TP8_PP2, LLAMA70, T70, H100_64)
    pairs = dict(zip(args[:-2:2], args[1:-2:2]))
    assert {k.removeprefix("--") for k in pairs} | {"training.disable_cuda_graphs"} <= set(ex.TORCHTITAN_MAIN_KEYS)
    assert pairs["--parallelism.data_parallel_shard_degree"] == "4" and pairs["--parallelism.num_pp_microbatches"] == "128"
    assert pairs["--training.num_tokens_per_microbatch_per_dp_rank"] == str(8192)
    assert pairs["--training.num_tokens_per_train_step"] == str(512 * 8192)
    assert args[-2:] == ["--training.disable_cuda_graphs", "activation-checkpoint:selective"]
    assert ex.torchtitan_config(TP8_PP2, LLAMA70, T70, H100_64, version="v0.2.2") == text


def test_torchtitan_fsdp_cp_and_interleaved():
    doc = _toml(TP4_PP4_CP2.model_copy(update={"zero_stage": 3}))
    p = doc["parallelism"]
    assert (p["data_parallel_replicate_degree"], p["data_parallel_shard_degree"]) == (1, 2)
    assert p["context_parallel_degree"] == 2 and p["pipeline_parallel_schedule"] == "Interleaved1F1B"
    # torchtitan: stages = ceil((80 layers + 1 + 1) / layers_per_stage) must be pp * vpp = 8
    assert -(-82 // p["pipeline_parallel_layers_per_stage"]) == 8
    zero2 = _toml(Layout(tp=8, dp=8, zero_stage=2, micro_batch_size=2, num_microbatches=32))
    assert zero2["parallelism"]["fsdp_reshard_after_forward"] == "never"
    assert zero2["training"]["local_batch_size"] == 2          # no PP: torchtitan accumulates 32 steps
    offload = _toml(Layout(dp=64, zero_stage=3, num_microbatches=8, offload="optimizer+params"))
    assert offload["training"]["enable_cpu_offload"] is True


def test_torchtitan_moe_and_refusals():
    mix = Model.preset("mixtral-8x7b")
    doc = _toml(Layout(tp=2, ep=8, etp=1, dp=32, zero_stage=3, num_microbatches=16), mix,
                Training(seq_len=4096, global_batch_size=512))
    assert (doc["parallelism"]["expert_parallel_degree"], doc["parallelism"]["expert_tensor_parallel_degree"]) == (8, 1)
    with pytest.raises(advisor.InputError, match=r"Layout\.etp[\s\S]*torchtitan\.experts-have-no-tp"):
        ex.torchtitan_toml(Layout(tp=4, ep=8, etp=2, dp=16, zero_stage=1, num_microbatches=32), mix,
                           Training(seq_len=4096, global_batch_size=512), H100_64)
    with pytest.raises(advisor.InputError, match=r"Training\.precision[\s\S]*torchtitan\.no-fp16"):
        _toml(TP8_PP2, training=T70.model_copy(update={"precision": "fp16"}))
    with pytest.raises(advisor.InputError, match=r"Layout\.offload[\s\S]*torchtitan\.offload-needs-fsdp-on-cpu"):
        _toml(TP8_PP2.model_copy(update={"offload": "optimizer"}))
    with pytest.raises(advisor.InputError, match=r"Layout\.zero_stage[\s\S]*torchtitan\.ddp-is-one-dimensional"):
        _toml(TP8_PP2.model_copy(update={"zero_stage": 0}))
    with pytest.raises(advisor.InputError, match=r"Layout\.ep[\s\S]*torchtitan\.experts-divisible-by-ep"):
        _toml(TP8_PP2.model_copy(update={"ep": 2}))
    with pytest.raises(advisor.InputError, match=r"Layout\.vpp[\s\S]*torchtitan\.virtual-stages-split"):
        _toml(TP8_PP2.model_copy(update={"vpp": 8}))   # 16 stages: ceil(82 / k) is 17 or 14 around it


# --- torchrun ----------------------------------------------------------------------------------

def test_torchrun_lines():
    assert ex.torchrun_command(H100_64, script="train.py", script_args=["--job.config_file", "my job.toml"]) == (
        'torchrun --nnodes=8 --nproc-per-node=8 --rdzv-id="$JOB_ID" --rdzv-backend=c10d '
        '--rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" train.py --job.config_file \'my job.toml\'')
    assert ex.torchrun_command(Cluster(gpu="H100-SXM-80GB", gpus=4)) == (
        "torchrun --nnodes=1 --nproc-per-node=4 --standalone")
