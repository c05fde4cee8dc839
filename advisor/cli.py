"""Command line: `advisor recommend`, `advisor audit`, `advisor capacity`, `advisor presets`, `advisor rules`,
`advisor facts`.

Exit status (EXIT_STATUS; docs/user-guide.md lists it too): 0 on success; 1 when no layout fits
(recommend) or the audit has an error finding; 2 on bad input (the message names the field, what
was given and what is wanted); 3 on an internal error (one line, no traceback unless --debug or
ADVISOR_DEBUG=1); 4 when the output cannot be written (disk full); 130 on SIGINT. When the reader
closes the pipe early (`advisor rules | head -1`) the rest of the output is dropped quietly and the
status is the command's own.
With --json (or --format json) an error is also written to stdout as {"error": {...}} (_error_object).
A launch-config format (--format megatron|deepspeed|torchtitan) writes only the config to stdout;
notes, and the report when there is nothing to export, go to stderr, so `> ds.json` holds JSON or
nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from .errors import AdvisorError
from .inputs.finetune import ALL_LINEAR, LORA_TARGETS, PEFT_TARGETS
from .inputs.optimizers import OPTIMIZERS
from .inputs.precision import RECIPES
from .inputs.stacks import STACKS

__all__ = ["main", "EXIT_STATUS"]


FORMATS = ("text", "json", "megatron", "deepspeed", "torchtitan", "accelerate", "peft", "trl")
LAUNCH_FORMATS = ("megatron", "deepspeed", "torchtitan", "accelerate", "peft", "trl")

# --framework-version: the releases each launch format is written for (the first is the default).
FRAMEWORK_VERSIONS = {
    "megatron": ("main", "core_v0.16.1"),
    "torchtitan": ("main", "v0.2.2"),
    "deepspeed": ("0.19.8",),
    "accelerate": ("1.15.0",),
    "peft": ("0.21.2",),
    "trl": ("1.10.0.dev0",),
}

# The launch-config formats each framework runs (tests/test_audit_export_contract.py FORMATS):
# Megatron-DeepSpeed takes Megatron's model and TP/PP flags plus the DeepSpeed JSON.
FRAMEWORK_FORMATS = {
    "megatron": ("megatron",),
    "megatron+deepspeed": ("megatron", "deepspeed"),
    "deepspeed": ("deepspeed", "accelerate", "trl"),
    "torchtitan": ("torchtitan",),
}
# Formats that describe the job rather than one framework's launch (PEFT's LoraConfig arguments).
ANY_FRAMEWORK_FORMATS = ("peft",)

EXIT_STATUS = {
    0: "success: a layout was recommended, the audit found no error, or a comparison or a listing was printed",
    1: "no layout fits (recommend), or the audit found at least one error",
    2: "bad input or usage: the message names the field, what was given and what is wanted",
    3: "internal error in advisor (one line; --debug or ADVISOR_DEBUG=1 shows the traceback): please report",
    4: "the output could not be written (e.g. disk full)",
    130: "interrupted (SIGINT)",
}
EXIT_INTERNAL, EXIT_OUTPUT, EXIT_INTERRUPTED = 3, 4, 130
MIN_WIDTH = 40          # narrower, the wrapped text stops being readable


def _finetune_args(r: argparse.ArgumentParser) -> None:
    """Training.task and the LoRA settings (advisor.inputs.finetune)."""
    r.add_argument("--task", choices=["pretrain", "sft", "lora", "qlora"], default="pretrain",
                   help="pretrain / sft train every weight; lora and qlora train adapters on a frozen base")
    r.add_argument("--lora-rank", type=int, help="adapter rank r (lora, qlora; default 16)")
    r.add_argument("--lora-alpha", type=int, help="adapter scale numerator (default 2 x rank)")
    r.add_argument("--lora-targets", nargs="+", choices=list(LORA_TARGETS + PEFT_TARGETS + (ALL_LINEAR,)),
                   help="linears that get an adapter: Megatron's fused qkv proj fc1 fc2, or PEFT's module names "
                        "(q_proj ... down_proj, all-linear) (default: every linear of the block)")
    r.add_argument("--lora-dropout", type=float, help="PEFT's lora_dropout (lora, qlora; default 0)")
    r.add_argument("--optimizer", choices=list(OPTIMIZERS), default="adam",
                   help="optimizer, for its state bytes (advisor.inputs.optimizers; default adam)")
    r.add_argument("--master-weights", choices=["fp32", "none"], default="fp32",
                   help="fp32: an fp32 master copy of the trained weights; none: pure 16-bit weights, gradients "
                        "and optimizer states (default fp32)")


def _finetune_fields(args) -> dict:
    fields = {"task": args.task, "optimizer": args.optimizer, "master_weights": args.master_weights}
    for key in ("lora_rank", "lora_alpha", "lora_targets", "lora_dropout"):
        value = getattr(args, key)
        if value is not None:
            fields[key] = tuple(value) if key == "lora_targets" else value
    return fields


LAYOUT_FRAMEWORKS = ("megatron", "deepspeed", "megatron+deepspeed", "torchtitan")
# The layout framework (Layout.framework) each stated stack runs, for audit's default: the rules
# (rules/stated-framework.toml) say which layouts a stack allows; this is only the audit's guess
# when neither --layout-framework nor a layout id's prefix says.
STACK_LAYOUT_FRAMEWORK = {"megatron-core": "megatron", "megatron-bridge": "megatron", "nemo": "megatron",
                          "megatron-lm": "megatron", "megatron-deepspeed": "megatron+deepspeed",
                          "deepspeed": "deepspeed", "hf-trl": "deepspeed", "hf-accelerate": "deepspeed",
                          "torchtitan": "torchtitan"}


def _stack_name(text: str) -> str:
    """--framework: a stack name (every command); a layout framework's name that is no stack gets an
    error pointing to --layout-framework (audit's --framework meant the layout's framework before)."""
    name = text.strip().lower()
    if name in STACKS:
        return name
    if name in LAYOUT_FRAMEWORKS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is a layout framework, not a training stack: --framework names the stack you run "
            f"({', '.join(STACKS)}); the framework of an audited layout is --layout-framework {name} "
            f"(or the prefix of --layout's id)")
    raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(STACKS)})")


def _stack_args(r: argparse.ArgumentParser) -> None:
    """Training.framework: the stack the team runs, with one meaning on every command (audit's layout
    framework is --layout-framework)."""
    r.add_argument("--framework", type=_stack_name, metavar="NAME",
                   help="the training stack you run, which the rules (rules/stated-framework.toml) turn into the "
                        f"layouts allowed: {', '.join(STACKS)} (default: the advisor chooses, and says so)")


def _situation_args(r: argparse.ArgumentParser) -> None:
    model = r.add_mutually_exclusive_group(required=True)
    model.add_argument("--model", help="model preset name, e.g. llama-3-70b (see `advisor presets`)")
    model.add_argument("--hf-config", metavar="PATH", help="a Hugging Face config.json (or its folder)")
    _gpu_args(r)
    r.add_argument("--gpus", required=True, type=int, help="total number of GPUs")
    _network_args(r)
    r.add_argument("--seq-len", help="tokens per sequence, e.g. 4096, 8k, 128k (default: the model's context)")
    r.add_argument("--global-batch", metavar="N", help="the batch of one optimizer step: sequences (512), or tokens "
                                                        "with a suffix (4M = 4 x 2^20 tokens, 512k), turned into "
                                                        "sequences of --seq-len (default: about 4M tokens)")
    r.add_argument("--precision", choices=list(RECIPES), default="bf16",
                   help="GEMM precision recipe (advisor.inputs.precision): fp8 = the framework's default FP8")
    r.add_argument("--no-flash-attention", action="store_true", help="FlashAttention kernels are not available")
    r.add_argument("--profile", metavar="FILE", help="a measured kernel profile of this GPU (advisor measure "
                                                     "writes one; default: the shipped H200 measurement, "
                                                     "rescaled to the GPU's datasheet)")
    r.add_argument("--cuda-graphs", action="store_true",
                   help="the step replays CUDA graphs: no per-kernel host cost (Training.cuda_graphs)")
    r.add_argument("--packed-sample-tokens", type=int, metavar="N",
                   help="sequence packing: mean tokens per packed sample (attention stays within each sample)")
    _finetune_args(r)
    r.add_argument("--rules", nargs="*", default=[], metavar="FILE", help="extra site rule files (TOML)")
    r.add_argument("--engine", choices=["durable", "python"], help="rule engine (default: durable where it imports)")
    r.add_argument("--assume", action="append", default=[], metavar="NAME=VALUE",
                   help="a cost-model assumption (see advisor.Assumptions), e.g. "
                        "megatron_main_grad_bytes=2 or tp_comm_overlap=true; repeatable")
    r.add_argument("--json", action="store_true", help="same as --format json")
    r.add_argument("--framework-version", metavar="RELEASE",
                   help="the release of the framework you run. With --framework (recommend, explain) it is "
                        "also Training.framework_version, a fact the rules read (a stated release that is no "
                        "pin below gets the format's default pin, with a note). A launch config (--format) is "
                        "written for it, which needs one of: "
                        + "; ".join(f"{fmt} {' or '.join(v)} (default {v[0]})" for fmt, v in FRAMEWORK_VERSIONS.items()))
    r.add_argument("--format", choices=FORMATS, default="text",
                   help="text, JSON, or a launch config for Megatron-LM, DeepSpeed or torchtitan. "
                        "recommend writes a launch config only in a format the recommended layout's "
                        "framework runs (megatron: megatron; deepspeed: deepspeed; megatron+deepspeed: "
                        "megatron or deepspeed; torchtitan: torchtitan), else exits 2")
    _debug_arg(r)


def _gpu_args(r: argparse.ArgumentParser) -> None:
    """The GPU: a preset, or a file of GPU fields for a part without one; memory and peak overridable."""
    gpu = r.add_mutually_exclusive_group(required=True)
    gpu.add_argument("--gpu", metavar="NAME", help="GPU preset name, e.g. H100-SXM-80GB (see `advisor presets`)")
    gpu.add_argument("--gpu-spec", metavar="FILE",
                     help="a GPU without a preset: a TOML or JSON file of its fields (schemas/gpu.schema.json), at "
                          "least memory and peak_flops; omit nvlink_bandwidth for a PCIe card without NVLink")
    r.add_argument("--gpu-memory", metavar="QTY", help='the GPU\'s memory instead of its preset\'s, e.g. "94 GiB"')
    r.add_argument("--gpu-flops", metavar="QTY",
                   help='the GPU\'s dense BF16 peak instead of its preset\'s, e.g. "835 TFLOP/s"')


def _network_args(r: argparse.ArgumentParser) -> None:
    """The nodes and the network (Cluster); the text output's first line repeats what was assumed."""
    r.add_argument("--gpus-per-node", type=int, help="GPUs per server (default: the GPU preset's)")
    r.add_argument("--nvlink-domain", type=int, help="GPUs per NVLink domain (default: the GPU preset's)")
    r.add_argument("--inter-node-bandwidth", metavar="RATE",
                   help="scale-out network bandwidth per GPU, one direction, e.g. 400Gbit/s for one NDR "
                        "InfiniBand HCA per GPU (default: the GPU preset's reference server)")
    r.add_argument("--intra-node-bandwidth", metavar="RATE",
                   help='NVLink bandwidth per GPU, both directions, e.g. "600 GB/s" for bridged H100 PCIe '
                        "pairs with --nvlink-domain 2 (default: the GPU's)")


def _width_arg(r: argparse.ArgumentParser) -> None:
    r.add_argument("--width", type=int, metavar="COLUMNS",
                   help=f"wrap the text output to this many columns (default: the terminal's, or COLUMNS, else 80; "
                        f"at least {MIN_WIDTH})")


def _width(args) -> int:
    """The text output's width: --width, else the terminal's (COLUMNS first, as shutil reads it)."""
    import shutil

    width = args.width if args.width is not None else shutil.get_terminal_size((80, 24)).columns
    if args.width is not None and width < MIN_WIDTH:
        from .errors import InputError

        raise InputError("--width", width, f"at least {MIN_WIDTH} columns")
    return max(MIN_WIDTH, width)


def _debug_arg(p: argparse.ArgumentParser) -> None:
    # Declared so argparse accepts it; main() reads it from argv, since an error can precede parsing.
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="print the traceback of an error (also: ADVISOR_DEBUG=1)")


class UsageError(Exception):
    """argparse's usage error, raised instead of exiting so that main() reports it like the others."""

    def __init__(self, message: str, usage: str, field: str | None = None):
        self.usage, self.field = usage, field
        super().__init__(message)


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        field = message.split(":", 1)[0].removeprefix("argument ").split("/")[0] \
            if message.startswith("argument ") else None
        raise UsageError(message, self.format_usage(), field)


def _epilog() -> str:
    return "exit status:\n" + "\n".join(f"  {code:<4} {text}" for code, text in EXIT_STATUS.items())


def _parser() -> argparse.ArgumentParser:
    from . import __version__

    p = _Parser(prog="advisor", description="Recommend and explain LLM training parallelism.", epilog=_epilog(),
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"advisor {__version__}")
    _debug_arg(p)
    _with_exit_status = {"epilog": _epilog(), "formatter_class": argparse.RawDescriptionHelpFormatter}
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("recommend", help="recommend a layout for a model on a cluster", **_with_exit_status)
    _situation_args(r)
    _stack_args(r)
    r.add_argument("--micro-batch", type=int, help="sequences per GPU per forward pass (default: 1)")
    r.add_argument("--explain", nargs="?", choices=["brief", "summary", "full"], default="brief", const="summary",
                   help="detail of the text output: brief (the default: the answer, its figures, three "
                        "alternatives, the checklist), summary (--explain alone: the rules, notes and every "
                        "alternative), full (the trace and the rejected layouts too)")
    r.add_argument("-q", "--quiet", action="store_true",
                   help="print only the recommended layout's id (nothing when no layout fits; exit 1)")
    _width_arg(r)

    e = sub.add_parser("explain", help="recommend, and tell the whole decision: story, trace, why rules did not fire",
                       **_with_exit_status)
    _situation_args(e)
    _stack_args(e)
    e.add_argument("--micro-batch", type=int, help="sequences per GPU per forward pass (default: chosen)")
    _width_arg(e)

    a = sub.add_parser("audit", help="check a layout: what the frameworks refuse, what is unwise, and why",
                       **_with_exit_status)
    _situation_args(a)
    _stack_args(a)
    a.add_argument("--layout-framework", choices=LAYOUT_FRAMEWORKS, metavar="NAME",
                   help="the framework the audited layout runs on (Layout.framework): "
                        f"{', '.join(LAYOUT_FRAMEWORKS)} (default: --layout's prefix, else the one --framework's "
                        "stack runs, else megatron)")
    a.add_argument("--layout", metavar="LAYOUT_ID",
                   help="the layout as recommend prints its id, e.g. tp8-dp4-pp2-zero1-sp-nmb128 or "
                        "deepspeed/tp1-dp64-pp1-zero3 (instead of --tp, --pp, ... flags)")
    for dim in ("tp", "pp", "cp", "ep", "etp", "vpp"):
        a.add_argument(f"--{dim}", type=int, help=f"{dim} degree (default 1{', tp' if dim == 'etp' else ''})")
    a.add_argument("--dp", type=int, help="data-parallel degree (default: gpus / (tp*pp*cp))")
    a.add_argument("--zero", type=int, choices=[0, 1, 2, 3], default=0, help="ZeRO stage (1 = Megatron distributed optimizer)")
    a.add_argument("--sp", action="store_true", help="Megatron sequence parallelism")
    a.add_argument("--no-overlap-p2p", action="store_true", help="Megatron --no-overlap-p2p-communication")
    a.add_argument("--micro-batch", type=int, default=1)
    a.add_argument("--num-microbatches", type=int)
    a.add_argument("--recompute", choices=["none", "selective", "full"], default="none")
    a.add_argument("--offload", choices=["none", "optimizer", "optimizer+params"], default="none")
    a.add_argument("--offload-device", choices=["cpu", "nvme"], default="cpu")
    a.add_argument("--no-compare", action="store_true",
                   help="skip the comparison with the advisor's own pick (by default a legal layout estimated "
                        "slower than the pick beyond the 8%% tie band gets a warning naming it)")
    _width_arg(a)

    c = sub.add_parser("compare", help="why not this layout: layouts side by side with the advisor's pick",
                       **_with_exit_status)
    c.add_argument("layouts", nargs="+", metavar="LAYOUT_ID",
                   help="layout ids as recommend prints them, e.g. tp8-dp4-pp2-zero1-sp-nmb128 or "
                        "deepspeed/tp1-dp64-pp1-zero3 (a framework word before an id is read as its prefix)")
    _situation_args(c)
    _stack_args(c)
    _width_arg(c)

    pr = sub.add_parser("presets", help="list GPU and model presets; with a NAME, that preset's figures and source")
    pr.add_argument("name", nargs="?", metavar="NAME", help="a GPU or model preset (or alias), e.g. H100-PCIe")
    pr.add_argument("--json", action="store_true")
    _width_arg(pr)
    _debug_arg(pr)
    for name, text in (("rules", "list the built-in rules (id, tier, title)"),
                       ("facts", "list the facts rule conditions may use")):
        listing = sub.add_parser(name, help=text)
        listing.add_argument("--json", action="store_true")
        _debug_arg(listing)
    me = sub.add_parser("measure", help="microbenchmark this GPU into a profile the estimate reads (needs torch)")
    me.add_argument("--out", metavar="FILE", default="advisor-profile.json", help="where to write the profile (JSON)")
    me.add_argument("--records", metavar="FILE", help="also write the raw measurements (JSON lines)")
    me.add_argument("--gpu", help="the GPU preset the curves are shares of (default: from the device name)")
    me.add_argument("--budget", type=float, default=170.0, metavar="SECONDS", help="time for the benchmarks")
    me.add_argument("--smoke", action="store_true", help="tiny sizes, CPU allowed: tests the code path only")
    _debug_arg(me)
    _capacity_parser(sub.add_parser(
        "capacity", help="how many GPUs of which type, how long and at what cost to train N tokens by a deadline "
                         "or within a budget",
        description="Exit status 1 here: no option meets the deadline or the budget (or no count has a layout).",
        **_with_exit_status))
    comp = sub.add_parser("completion", help='print a shell completion script: eval "$(advisor completion bash)"')
    comp.add_argument("shell", choices=["bash", "zsh"])
    _debug_arg(comp)
    return p


def _situation(args):
    from .inputs.specs import Cluster, Model, Training

    cluster = {"gpu": _gpu(args), "gpus": args.gpus}
    for key in ("gpus_per_node", "nvlink_domain", "inter_node_bandwidth", "intra_node_bandwidth"):
        if getattr(args, key):
            cluster[key] = getattr(args, key)
    if args.profile:
        cluster["profile"] = args.profile
    training = {"precision": args.precision, "flash_attention": not args.no_flash_attention,
                "cuda_graphs": args.cuda_graphs, **_finetune_fields(args)}
    if args.packed_sample_tokens is not None:
        training["packed_sample_tokens"] = args.packed_sample_tokens
    for key, value in (("seq_len", args.seq_len), ("global_batch_size", args.global_batch),
                       ("micro_batch_size", getattr(args, "micro_batch", None) if args.command != "audit" else None)):
        if value is not None:
            training[key] = value
    if args.framework is not None:                  # the stated stack, on every command
        training["framework"] = args.framework
        if args.framework_version is not None:
            training["framework_version"] = args.framework_version
    model = Model.from_hf_config(args.hf_config) if args.hf_config else Model.preset(args.model)
    if "global_batch_size" in training:
        training["global_batch_size"] = _global_batch(training["global_batch_size"], model, training)
    return Cluster(**cluster), model, Training(**training)


def _global_batch(text: str, model, training: dict) -> int | str:
    """--global-batch: a plain count is sequences; a count with a suffix (k, M, as --seq-len and
    Scaling.max_batch_tokens read them: 4M = 4 x 2^20) is tokens, turned into whole sequences of the
    job's seq_len and echoed on stderr as "4M tokens = 512 sequences of 8192"."""
    if text.strip().isdigit():
        return int(text)
    from .errors import InputError
    from .inputs.specs import Training, resolve_training
    from .inputs.units import to_tokens

    try:
        tokens = to_tokens(text, "--global-batch")
    except InputError:
        raise InputError("--global-batch", text, "sequences (512), or tokens with a suffix (4M, 512k)") from None
    seq = resolve_training(model, Training(**{k: v for k, v in training.items() if k != "global_batch_size"}))[0].seq_len
    sequences = round(tokens / seq)
    if sequences < 1:
        raise InputError("--global-batch", text, f"at least one sequence of {seq} tokens")
    exact = "" if sequences * seq == tokens else f" (rounded: {sequences * seq:,} tokens)"
    _say(f"advisor: note: --global-batch {text} = {tokens:,} tokens = {sequences} sequences of {seq}{exact}")
    return sequences


def _gpu(args):
    """--gpu (a preset name, which Cluster resolves) or --gpu-spec (a file), with --gpu-memory and
    --gpu-flops over either; an overridden GPU is named and sourced as such."""
    from .inputs import presets
    from .inputs.gpu_file import read_gpu_file
    from .inputs.specs import GPU

    overrides = {k: v for k, v in (("memory", args.gpu_memory), ("peak_flops", args.gpu_flops)) if v is not None}
    if args.gpu_spec is None and not overrides:
        return args.gpu
    fields = read_gpu_file(args.gpu_spec) if args.gpu_spec is not None else presets.gpu(args.gpu, field="--gpu")
    if overrides:
        from .inputs.units import device_memory_reading

        # The header names the GPU: a vendor-style "80GB" says there how it was read (80 GiB).
        reading = device_memory_reading(args.gpu_memory)
        fields = {**fields, **overrides, "name": f"{fields.get('name', 'custom')} ({reading or 'modified'})",
                  "source": f"{fields.get('source', 'user-supplied')}; {' and '.join(overrides)} from the command line"}
    return GPU(**fields)


def _framework_version(fmt: str, given: str | None) -> str:
    from .errors import InputError

    versions = FRAMEWORK_VERSIONS[fmt]
    if given is None:
        return versions[0]
    if given not in versions:
        raise InputError("--framework-version", given, list(versions), f"the releases --format {fmt} is written for")
    return given


def _export(fmt: str, layout, model, training, cluster, assumptions, version: str | None) -> tuple[str, list[str]]:
    """The launch config (for stdout) and the notes that go with it (for stderr)."""
    from . import export

    release = _framework_version(fmt, version)
    if fmt == "megatron":
        return (export.megatron_command(layout, model, training, cluster, assumptions, version=release),
                export.megatron_notes(layout, model, training, cluster, assumptions))
    if fmt == "deepspeed":
        return (json.dumps(export.deepspeed_config(layout, model, training, cluster, assumptions), indent=2),
                export.deepspeed_notes(layout, model, training, cluster, assumptions))
    if fmt == "accelerate":
        return (export.accelerate_config(layout, model, training, cluster),
                ["DeepSpeed's settings are in the JSON of --format deepspeed, saved as ds_config.json beside it",
                 *export.accelerate_notes(cluster)])
    if fmt == "peft":
        return export.peft_config(model, training), []
    if fmt == "trl":
        return export.trl_config(layout, model, training, cluster), export.trl_notes(layout, training)
    return (export.torchtitan_config(layout, model, training, cluster, assumptions, version=release),
            export.torchtitan_notes(layout, model, training, cluster, assumptions, version=release))


def _emit_export(fmt: str, result, layout, assumptions, version, report_text: str) -> None:
    """A launch config on stdout and its notes on stderr; with no layout to export, the report on
    stderr and nothing on stdout."""
    if layout is None:
        _say(report_text)
        return
    config, notes = _export(fmt, layout, result.model, result.training, result.cluster, assumptions, version)
    _emit(config)
    for note in notes:
        _say(f"advisor: note: {note}")


def _check_format(fmt: str, framework: str) -> None:
    """Refuse a launch config the recommended layout's framework does not run: the exporter would
    otherwise judge the layout by another framework's limits (a DeepSpeed offload layout "fails"
    as Megatron flags)."""
    runs = FRAMEWORK_FORMATS.get(framework, ())
    if fmt not in runs and fmt not in ANY_FRAMEWORK_FORMATS:
        from .errors import InputError

        raise InputError("--format", fmt, f"a format framework {framework!r} runs: {' or '.join(runs)}",
                         f"the layout is for {framework}; print it with --format {runs[0]} (or --json), or state "
                         f"the stack that runs it with --framework (or a site rule's use_framework)")


def _assumptions(items: list[str]):
    """--assume NAME=VALUE pairs as Assumptions; VALUE is read as JSON (2, 0.5, true, ["mlp"]) or else
    taken as a string."""
    if not items:
        return None
    from .costmodel import Assumptions
    from .errors import InputError

    values = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise InputError("--assume", item, "NAME=VALUE, e.g. megatron_main_grad_bytes=2")
        name = _assumption_name(name.strip(), Assumptions.model_fields)
        values[name] = _with_units(name, _assumption_value(item, text), Assumptions.model_fields[name].annotation)
    return Assumptions(**values)


def _assumption_name(name: str, fields) -> str:
    """NAME of --assume, or an error naming the closest fields of Assumptions."""
    if name in fields:
        return name
    from .errors import InputError
    from .inputs.suggest import closest

    near = closest(name, list(fields))
    raise InputError("--assume", name, "a field of advisor.Assumptions",
                     f"did you mean {', '.join(near)}?" if near else "help(advisor.Assumptions) lists them")


def _with_units(name: str, value, annotation):
    """A text VALUE with units for a numeric knob, in its canonical unit: `pcie_bandwidth="32 GB/s"`
    as Cluster's bandwidths take it (bytes/s), a `*_bytes` int knob as bytes; other values as given."""
    if not isinstance(value, str) or annotation not in (int, float):
        return value
    from .inputs import units

    if name.endswith("_bandwidth"):
        return units.to_bytes_per_second(value, f"--assume {name}")
    if name.endswith("_bytes") and annotation is int:
        return units.to_bytes(value, f"--assume {name}")
    return value


def _assumption_value(item: str, text: str):
    """VALUE of --assume as JSON, refusing the non-standard Infinity/NaN Python's json reads (and
    1e999, which overflows to inf): no cost-model knob is meaningful at infinity."""
    import math

    from .errors import InputError

    def finite(literal: str) -> float:
        number = float(literal)
        if not math.isfinite(number):
            raise InputError("--assume", item, "a finite number, e.g. expert_gemm_overhead=2e-5")
        return number

    try:
        return json.loads(text, parse_float=finite, parse_constant=finite)
    except json.JSONDecodeError:
        return text
    except RecursionError:          # '[[[[...' thousands deep
        raise InputError("--assume", item[:80] + "...", "a JSON value nested at most a few levels deep") from None
    except InputError:              # finite() refused inf / NaN
        raise
    except ValueError:              # an integer of over 4300 digits (int's conversion limit)
        raise InputError("--assume", item[:80] + "...", "a number of at most a few digits, e.g. gemm_overhead=1.1") \
            from None


def _recommend(args) -> int:
    from .api import recommend

    cluster, model, training = _situation(args)
    rec = recommend(cluster, model, training, rules=tuple(args.rules), engine=args.engine,
                    assumptions=_assumptions(args.assume))
    fmt = "json" if args.json else args.format
    if getattr(args, "quiet", False) and fmt == "text":
        _quiet(rec)
    elif fmt == "json":
        _emit(rec.model_dump_json(indent=2), as_json=True)
    elif fmt == "text":
        _emit(rec.explain(args.explain, width=_width(args)))
    else:
        if rec.layout is not None:
            _check_format(fmt, rec.layout.framework)
        _emit_export(fmt, rec, rec.layout, rec.estimates.assumptions if rec.estimates else None,
                     _export_pin(fmt, args), rec.explain(args.explain))
    return 0 if rec.status == "recommended" else 1


def _quiet(rec) -> None:
    """-q: the layout id alone on stdout (Layout.parse reads it back); when nothing fits, one line on stderr."""
    if rec.layout is not None:
        _emit(rec.layout.id)
        return
    from .results.brief import infeasible_reason

    _say(f"advisor: no layout fits: {infeasible_reason(rec)}")


def _export_pin(fmt: str, args) -> str | None:
    """The release a launch config is written for. With --framework, --framework-version is first the
    stated stack's release (Megatron-LM "2021"): when it is not also one of the format's pins, the
    format's default pin is written and a note says so (it was an exit 2)."""
    given = args.framework_version
    if given is None or args.framework is None or given in FRAMEWORK_VERSIONS.get(fmt, (given,)):
        return given
    pin = FRAMEWORK_VERSIONS[fmt][0]
    _say(f"advisor: note: --framework-version {given} is the stated {args.framework} release; the {fmt} config "
         f"is written for {pin} (the releases it can be written for: {', '.join(FRAMEWORK_VERSIONS[fmt])})")
    return pin


def _audit(args) -> int:
    from .api import audit
    from .inputs.layout import Layout

    cluster, model, training = _situation(args)
    report = audit(cluster, model, _audited_layout(args), training, rules=tuple(args.rules), engine=args.engine,
                   assumptions=_assumptions(args.assume), compare=not args.no_compare)
    fmt = "json" if args.json else args.format
    if not _emit_result(report, fmt, args):
        if report.ok:
            _check_format(fmt, report.layout.framework)
        _emit_export(fmt, report, report.layout if report.ok else None, _assumptions(args.assume),
                     _export_pin(fmt, args), report.explain())
    return 0 if report.ok else 1


def _audited_layout(args):
    """The audited layout: --layout's id, or the --tp, --pp, ... flags; its framework is
    --layout-framework, else the id's prefix, else the stated stack's, else megatron."""
    from .errors import InputError
    from .inputs.layout import Layout

    framework = args.layout_framework or STACK_LAYOUT_FRAMEWORK.get(args.framework, "megatron")
    if args.layout is not None:
        _only_layout(args)
        text = args.layout if "/" in args.layout or framework == "megatron" else f"{framework}/{args.layout}"
        try:
            layout = Layout.parse(text)
        except InputError as exc:
            raise InputError("--layout", args.layout, exc.want, exc.hint) from None
        if args.layout_framework is not None and layout.framework != args.layout_framework:
            raise InputError("--layout-framework", args.layout_framework, f"{layout.framework}, the prefix of "
                             f"--layout {args.layout}", "give one of them")
        return layout
    fields = {"framework": framework, "zero_stage": args.zero, "sp": args.sp,
              "overlap_p2p_comm": not args.no_overlap_p2p, "micro_batch_size": args.micro_batch,
              "recompute": args.recompute, "offload": args.offload, "offload_device": args.offload_device}
    for dim in ("tp", "pp", "cp", "ep", "etp", "vpp", "dp"):
        if getattr(args, dim) is not None:
            fields[dim] = getattr(args, dim)
    if args.num_microbatches is not None:
        fields["num_microbatches"] = args.num_microbatches
    return Layout(**fields)


def _only_layout(args) -> None:
    """--layout says the whole layout: a --tp, --zero, ... flag beside it would be silently dropped."""
    from .errors import InputError

    defaults = {"tp": None, "pp": None, "cp": None, "ep": None, "etp": None, "vpp": None, "dp": None,
                "num_microbatches": None, "zero": 0, "sp": False, "no_overlap_p2p": False, "micro_batch": 1,
                "recompute": "none", "offload": "none", "offload_device": "cpu"}
    given = [f"--{key.replace('_', '-')}" for key, default in defaults.items() if getattr(args, key) != default]
    if given:
        raise InputError("--layout", args.layout, "the whole layout, without " + ", ".join(given),
                         "write the layout either as one id (--layout) or as flags (--tp, --pp, ...)")


def _emit_result(result, fmt: str, args) -> bool:
    """An Audit or a Comparison as JSON or as text wrapped to the width; False for a launch format."""
    if fmt == "json":
        _emit(result.model_dump_json(indent=2), as_json=True)
    elif fmt == "text":
        _emit(result.explain(width=_width(args)))
    else:
        return False
    return True


def _compare(args) -> int:
    from .api import compare

    cluster, model, training = _situation(args)
    result = compare(cluster, model, _layout_ids(args.layouts), training, rules=tuple(args.rules), engine=args.engine,
                     assumptions=_assumptions(args.assume))
    fmt = "json" if args.json else args.format
    if not _emit_result(result, fmt, args):
        from .errors import InputError

        raise InputError("--format", fmt, "text or json for compare (recommend and audit write launch configs)")
    return 0


def _layout_ids(words: list[str]) -> list:
    """The layouts of `advisor compare`, parsed: "megatron  tp8-..." as recommend's summary printed it
    (a framework word, then the id) reads as one layout; each id names the argument on an error."""
    from .errors import InputError
    from .inputs.layout import Layout

    layouts, framework = [], None
    for word in words:
        if word in FRAMEWORK_FORMATS:           # megatron, deepspeed, megatron+deepspeed, torchtitan
            framework = word
            continue
        text = f"{framework}/{word}" if framework not in (None, "megatron") and "/" not in word else word
        framework = None
        try:
            layouts.append(Layout.parse(text))
        except InputError as exc:
            raise InputError("LAYOUT_ID", word, exc.want, exc.hint) from None
    if not layouts:
        raise InputError("LAYOUT_ID", " ".join(words), "at least one layout id, e.g. tp8-dp4-pp2-zero1-sp-nmb128")
    return layouts


def _presets(args) -> int:
    from .inputs import presets

    if args.name is not None:
        return _preset(args)
    if args.json:
        _emit(json.dumps({"gpus": presets.gpu_entries(), "models": presets.model_entries()}, indent=2), as_json=True)
        return 0
    lines = ["GPUs:"]
    for e in presets.gpu_entries():
        aliases = f" (aliases: {', '.join(e['aliases'])})" if e.get("aliases") else ""
        link = "PCIe" if e.get("nvlink_domain") == 1 else f"NVLink {e.get('nvlink_domain', e.get('gpus_per_node', 8))}"
        lines.append(f"  {e['name']:<16} {e['memory']:>9}  {e['peak_flops']:>15} dense  "
                     f"{e.get('gpus_per_node', 8)}/node, {link}{aliases}")
    from .inputs.specs import Model

    lines.append("Models:")
    for e in presets.model_entries():
        size = f"{Model.preset(e['name']).params / 1e9:.1f}B"
        lines.append(f"  {e['name']:<16} {size:>7}  layers {e['layers']:>3}  hidden {e['hidden']:>5}  "
                     f"heads {e['heads']:>3}/{e.get('kv_heads', e['heads'])}")
    lines.append("`advisor presets NAME` prints one preset's figures and its source.")
    _emit("\n".join(lines))
    return 0


def _preset(args) -> int:
    """One preset, GPU or model, by name or alias: every field it sets, then its source, wrapped."""
    from .errors import UnknownPresetError
    from .inputs import presets
    from .results.brief import wrap_lines

    try:
        kind, fields = "gpu", presets.gpu(args.name, field="NAME")
    except UnknownPresetError as not_gpu:
        try:
            kind, fields = "model", presets.model(args.name, field="NAME")
        except UnknownPresetError as not_model:
            close = [e.hint.partition("?")[0] + "?" for e in (not_gpu, not_model) if e.hint.startswith("did you mean")]
            raise UnknownPresetError("NAME", args.name, not_gpu.known + not_model.known,
                                     " ".join(close) or "`advisor presets` lists them") from None
    if args.json:
        _emit(json.dumps({"kind": kind, **fields}, indent=2), as_json=True)
        return 0
    lines = [f"{fields['name']} ({kind} preset)"]
    lines += [f"  {key}: {value}" for key, value in fields.items() if key not in ("name", "source")]
    lines.append(f"  source: {fields.get('source', '')}")
    _emit("\n".join(wrap_lines(lines, _width(args))))
    return 0


def _rules(args) -> int:
    from .rulebook.load import builtin_rulebook

    book = builtin_rulebook()
    if args.json:
        _emit(json.dumps({"root": str(book.root), "revision": book.revision,
                          "rules": [{"id": rule.id, "tier": rule.spec.tier, "title": rule.spec.title}
                                    for rule in book.rules.values()]}, indent=2), as_json=True)
        return 0
    lines = [f"{len(book.rules)} rules from {book.root} ({book.revision})"]
    lines += [f"  {rule.spec.tier:<10} {rule.id:<46} {rule.spec.title}" for rule in book.rules.values()]
    _emit("\n".join(lines))
    return 0


def _facts(args) -> int:
    from .facts import CATALOGUE

    if args.json:
        _emit(json.dumps({"facts": [{"name": spec.name, "type": spec.type.__name__, "scope": spec.scope,
                                     "doc": spec.doc} for spec in CATALOGUE.values()]}, indent=2), as_json=True)
        return 0
    _emit("\n".join(f"  {spec.name:<30} {spec.type.__name__:<5} {spec.doc}" for spec in CATALOGUE.values()))
    return 0


# ------------------------------------------------------------------------------------------------
# Output, and every way a run can end (EXIT_STATUS)


class _OutputError(Exception):
    """Writing stdout failed for a reason other than a closed pipe (ENOSPC, EIO)."""

    def __init__(self, error: OSError):
        self.error = error
        super().__init__(str(error))


def _emit(text: str, as_json: bool = False) -> None:
    """Write one result to stdout. JSON stays valid JSON on a non-UTF-8 stdout (non-ASCII characters
    become \\u escapes); text gets backslash escapes from the stream (_tolerant_streams). A reader that
    has gone away silences the rest of the output instead of failing the run. Text has its control
    characters made visible (_visible); JSON escapes them itself."""
    out = sys.stdout
    if out is None:                         # started with stdout closed (`advisor rules >&-`)
        import errno

        raise _OutputError(OSError(errno.EBADF, "stdout is closed"))
    if not as_json:
        text = _visible(text)
    if as_json and not _encodes(out, text):
        text = re.sub(r"[^\x00-\x7f]+", lambda m: json.dumps(m.group())[1:-1], text)
    try:
        out.write(text + "\n")
    except BrokenPipeError:
        _silence_stdout()
    except OSError as exc:
        raise _OutputError(exc) from None


# Control characters (C0 but tab and newline, DEL, C1): an ESC from a config's name cleared the screen
# or turned the text red, a CR overwrote a line. Shown as \xNN text instead.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _visible(text: str) -> str:
    """`text` with its terminal control characters written as visible \\xNN escapes."""
    if text.isascii() and text.isprintable():
        return text
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _encodes(out, text: str) -> bool:
    encoding = (getattr(out, "encoding", None) or "utf-8").lower().replace("-", "").replace("_", "")
    if encoding == "utf8":
        return True
    try:
        text.encode(getattr(out, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _flush() -> None:
    if sys.stdout is None:
        return
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    except OSError as exc:
        raise _OutputError(exc) from None


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's own flush at exit cannot fail (and print
    'Exception ignored ...') on the bytes still buffered."""
    try:
        target = sys.stdout.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError, AttributeError):       # no file descriptor (an in-process StringIO)
        return
    try:
        os.dup2(null, target)
    except OSError:
        pass
    finally:
        os.close(null)


def _tolerant_streams() -> None:
    """An ASCII or Latin-1 terminal (PYTHONIOENCODING=ascii) gets `\\u2265` for `≥` rather than a
    UnicodeEncodeError; the interpreter's default for stdout is errors="strict"."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, OSError, ValueError):   # not a TextIOWrapper, or already closed
            pass


def _say(line: str) -> None:
    """A message on stderr; a stderr that cannot be written must not turn an error into a crash."""
    if sys.stderr is None:                  # closed (`2>&-`); print(file=None) would write to stdout
        return
    try:
        print(_visible(line), file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _wants_json(argv: list[str]) -> bool:
    """Whether errors go to stdout as JSON too: --json (or an abbreviation argparse accepts), or a
    last --format of json; read from argv since a usage error leaves no parsed arguments."""
    flag, fmt = False, None
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        flag = flag or len(arg) >= 3 and "--json".startswith(arg)
        if arg.startswith("--format="):
            fmt = arg.partition("=")[2]
        elif arg == "--format" and i + 1 < len(argv):
            fmt = argv[i + 1]
    return flag or fmt == "json"


def _jsonable(value):
    """`value` when JSON writes it as standard JSON, else its repr (inf, NaN, objects, sets)."""
    try:
        json.dumps(value, allow_nan=False)
        return value
    except (TypeError, ValueError, RecursionError):
        try:
            return repr(value)
        except Exception:               # a repr that raises or recurses: the type is all we can say
            return f"<{type(value).__name__}>"


def _validation_items(exc) -> list[tuple[dict, str]]:
    """pydantic's errors in advisor's have/want form (errors.InputError), one per invalid field,
    without pydantic's documentation links: (fields for the JSON object, text for stderr)."""
    items = []
    for err in exc.errors(include_url=False):
        ours = (err.get("ctx") or {}).get("error")
        if isinstance(ours, AdvisorError):          # raised by advisor's own validators: already have/want
            fields = {k: getattr(ours, k, None) for k in ("field", "have", "want", "hint")}
            if hasattr(ours, "known"):          # UnknownPresetError: the names, as data
                fields["known"] = ours.known
            items.append((fields, str(ours)))
            continue
        where = ".".join(str(p) for p in err["loc"])
        field = f"{exc.title}.{where}" if where else exc.title
        have = err.get("input")
        items.append(({"field": field, "have": have, "want": _want_data(err), "hint": None},
                      f"{field}: invalid value\n  have: {have!r}\n  want: {err['msg']}"))
    return items


def _want_data(err: dict):
    """pydantic's error as data for JSON's `want`: the allowed values of a choice as a list
    ("Input should be 'a' or 'b'" -> ["a", "b"]), else the constraint and its bounds as an object
    ({"constraint": "greater_than_equal", "ge": 1}); the words stay in `message`."""
    ctx = err.get("ctx") or {}
    if err["type"] in ("literal_error", "enum") and isinstance(ctx.get("expected"), str):
        return re.findall(r"'([^']*)'", ctx["expected"]) or [ctx["expected"]]
    return {"constraint": err["type"], **{k: _jsonable(v) for k, v in ctx.items() if k != "error"}}


def _validation_text(exc) -> str:
    return "\n".join(text for _fields, text in _validation_items(exc))


def _error_object(exc: BaseException, code: int, message: str) -> dict:
    """The JSON error object: {"error": {"type", "exit_code", "message", "field", "have", "want",
    "hint"}}, plus "path" and "rule_id" for a RuleFileError, "known" (the preset names, as a list) for
    an UnknownPresetError and "errors" (one per field) for a pydantic ValidationError. Fields an error
    does not have are null."""
    obj = {"type": type(exc).__name__, "exit_code": code, "message": message,
           "field": None, "have": None, "want": None, "hint": None}
    if _is_validation_error(exc):
        errors = [{k: _jsonable(v) for k, v in fields.items()} for fields, _text in _validation_items(exc)]
        obj.update(errors[0] if errors else {})
        obj["errors"] = errors
    else:
        for key in ("field", "have", "want", "hint", "path", "rule_id", "known"):
            if hasattr(exc, key):
                obj[key] = _jsonable(getattr(exc, key))
    return {"error": obj}


def _fail(exc: BaseException, code: int, message: str, *, as_json: bool, debug: bool,
          prefix: str | None = "error") -> int:
    """Report an error on stderr (and as JSON on stdout under --json); return the exit status."""
    if debug:
        import traceback

        traceback.print_exception(exc)
    _say(f"advisor: {prefix}: {message}" if prefix else f"advisor: {message}")
    if as_json:
        try:
            _emit(json.dumps(_error_object(exc, code, message), indent=2, ensure_ascii=True))
            _flush()
        except _OutputError:
            pass
    return code


def _internal(exc: BaseException) -> str:
    """One line: the type and the first line of the message, bounded (a message can hold a 1 GB repr)."""
    first = (str(exc).strip().splitlines() or [""])[0]
    first = first if len(first) <= 300 else first[:300] + "..."
    return f"{type(exc).__name__}{': ' + first if first else ''} (please report)"


def main(argv: list[str] | None = None) -> int:
    """Run one command line; return its exit status (EXIT_STATUS). Never raises and never prints a
    traceback unless --debug or ADVISOR_DEBUG=1 (`--help` and usage errors return 0 and 2)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    _tolerant_streams()
    kw = {"as_json": _wants_json(argv),
          "debug": "--debug" in argv or os.environ.get("ADVISOR_DEBUG", "") not in ("", "0")}
    try:
        try:
            code = _main(argv)
        except SystemExit as exc:               # --help; argparse's own exits
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
        _flush()
        return code
    except _OutputError as exc:
        _silence_stdout()
        return _fail(exc.error, EXIT_OUTPUT, f"cannot write the output: {exc.error}", as_json=False, debug=kw["debug"])
    except BrokenPipeError:                     # a write outside _emit (argparse's help)
        _silence_stdout()
        return 0
    except KeyboardInterrupt as exc:
        return _fail(exc, EXIT_INTERRUPTED, "interrupted", prefix=None, **kw)
    except UsageError as exc:
        _say(exc.usage.rstrip())
        kw["debug"] = False                     # a usage error's traceback shows argparse, not the cause
        return _fail(exc, 2, str(exc), **kw)
    except AdvisorError as exc:
        return _fail(exc, 2, str(exc), **kw)
    except BaseException as exc:                # a bug (or pyo3's PanicException, a BaseException)
        if _is_validation_error(exc):
            return _fail(exc, 2, _validation_text(exc), **kw)
        return _fail(exc, EXIT_INTERNAL, _internal(exc), prefix="internal error", **kw)


def _is_validation_error(exc: BaseException) -> bool:
    """pydantic's ValidationError, without importing pydantic at module level (this module loads before
    main() can catch a SIGINT; pydantic is most of that time) or here, when it was never loaded."""
    core = sys.modules.get("pydantic_core")
    return core is not None and isinstance(exc, core.ValidationError)


def _main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.command == "capacity":
        return _capacity(args)
    if args.command == "explain":
        args.explain = "full"
    handler = {"recommend": _recommend, "explain": _recommend, "audit": _audit, "compare": _compare,
               "presets": _presets,
               "rules": _rules, "facts": _facts, "completion": _completion, "measure": _measure}[args.command]
    return handler(args)


def _measure(args) -> int:
    from .measure import measure

    prof = measure(args.out, smoke=args.smoke, budget=args.budget, gpu=args.gpu, records=args.records, log=_say)
    _emit(_profile_table(prof) + f"\nwrote {args.out}")
    return 0


def _profile_table(prof) -> str:
    """What a measurement found, beside the shipped profile rescaled to the same GPU."""
    from .inputs.profile import shipped_profile

    base = shipped_profile()
    rows = [("GEMM bf16 8192^3", lambda p: p.gemm["bf16"].at(2 * 8192.0 ** 3, 8192), "of peak"),
            ("GEMM bf16 1024x1024x1024", lambda p: p.gemm["bf16"].at(2 * 1024.0 ** 3, 1024), "of peak"),
            ("attention d128 s8192", lambda p: p.attention_efficiency("cudnn", 128, 2e12, 8192), "of peak"),
            ("grouped GEMM 256 tok/expert", lambda p: p.grouped_gemm.at(256, 4096), "of peak"),
            ("streaming 256 MB", lambda p: p.memory_bound.at(256e6), "of HBM"),
            ("host per eager layer", lambda p: p.host.eager_layer * 1e3, "ms"),
            ("host per kernel", lambda p: p.host.per_kernel * 1e6, "us")]
    lines = [f"{'':30s} {'measured':>9s} {'shipped ' + base.name:>22s}"]
    for label, read, unit in rows:
        lines.append(f"{label:30s} {read(prof):9.3g} {read(base):22.3g}  {unit}")
    return "\n".join(lines)


def _capacity_parser(c: argparse.ArgumentParser) -> None:
    """`advisor capacity`: advisor.capacity over GPU types and counts (advisor/capacity_plan/)."""
    model = c.add_mutually_exclusive_group(required=True)
    model.add_argument("--model", help="model preset name, e.g. llama-3-70b (see `advisor presets`)")
    model.add_argument("--hf-config", metavar="PATH", help="a Hugging Face config.json (or its folder)")
    c.add_argument("--tokens", required=True, help='tokens to train, e.g. 1T, 15.6T, 300B (decimal suffixes)')
    c.add_argument("--gpu", nargs="+", default=["H100-SXM-80GB"], metavar="NAME",
                   help="GPU types to compare (presets; default H100-SXM-80GB)")
    c.add_argument("--gpus", help='GPU counts: a range "8..16384" (default; the counts in it that tile nodes and '
                                  'the NVLink domain), a list "48,64,96", or one count')
    c.add_argument("--deadline", help='days to train within: 30, "30 days", "6 weeks", "720 h"')
    c.add_argument("--budget", help="most to spend: in the prices' currency with --prices, else in GPU-hours")
    c.add_argument("--prices", metavar="FILE", help="a TOML file of prices per GPU-hour (schemas/prices.schema.json; "
                                                    "none are shipped: without it the answer is in GPU-hours)")
    c.add_argument("--gpus-per-node", type=int, help="GPUs per server (default: each GPU preset's)")
    c.add_argument("--nvlink-domain", type=int, help="GPUs per NVLink domain (default: each GPU preset's)")
    c.add_argument("--inter-node-bandwidth", metavar="RATE",
                   help='scale-out network bandwidth per GPU, one direction, e.g. "200 Gbit/s" (default: each '
                        "preset's reference server)")
    c.add_argument("--seq-len", help="tokens per sequence, e.g. 4096, 8k (default: the model's context)")
    c.add_argument("--global-batch", metavar="N", help="sequences per step (512), or tokens with a suffix (4M); "
                                                       "given, it stays fixed at every count (default: about 4M "
                                                       "tokens, growing with the count)")
    c.add_argument("--precision", choices=list(RECIPES), default="bf16", help="GEMM precision recipe")
    c.add_argument("--cuda-graphs", action="store_true", help="the step replays CUDA graphs")
    _finetune_args(c)
    _stack_args(c)
    c.add_argument("--max-batch-tokens", metavar="N", help="most tokens per step the batch may grow to, e.g. 16M "
                                                           "(Scaling.max_batch_tokens)")
    c.add_argument("--interruptions-per-gpu-day", type=float, metavar="RATE",
                   help="job interruptions per GPU per day (default: Llama 3's 466 in 54 days on 16,384 H100s)")
    c.add_argument("--restart-minutes", type=float, metavar="MIN", help="minutes from an interruption to training "
                                                                         "again (default 10)")
    c.add_argument("--checkpoint-interval", type=float, metavar="MIN",
                   help="minutes between checkpoints (default: Young's optimum)")
    c.add_argument("--checkpoint-bandwidth", metavar="RATE",
                   help='storage write bandwidth per GPU for checkpoints, e.g. "200 MB/s" (default: 122 MB/s)')
    c.add_argument("--rules", nargs="*", default=[], metavar="FILE", help="extra site rule files (TOML)")
    c.add_argument("--engine", choices=["durable", "python"], help="rule engine (default: durable where it imports)")
    c.add_argument("--assume", action="append", default=[], metavar="NAME=VALUE",
                   help="a cost-model assumption (see advisor.Assumptions); repeatable")
    c.add_argument("--workers", type=int, metavar="N", help="processes for the sweep (default: one per CPU for "
                                                            "long sweeps)")
    c.add_argument("--all-counts", action="store_true", help="list every count tried, rejected ones too")
    c.add_argument("--plot", metavar="FILE", help="draw days against cost per GPU type and count to FILE.svg or "
                                                  "FILE.png (needs matplotlib: pip install 'advisor[plot]')")
    c.add_argument("--json", action="store_true", help="the plan as JSON (schemas/capacity.schema.json)")
    _debug_arg(c)


def _capacity_inputs(args) -> dict:
    """advisor.capacity's keyword arguments from the command line."""
    from .inputs.specs import Model

    model = Model.from_hf_config(args.hf_config) if args.hf_config else Model.preset(args.model)
    training = {"precision": args.precision, "cuda_graphs": args.cuda_graphs, **_finetune_fields(args)}
    for key, value in (("seq_len", args.seq_len), ("global_batch_size", args.global_batch),
                       ("framework", args.framework),
                       ("framework_version", args.framework and args.framework_version)):
        if value is not None:
            training[key] = value
    if "global_batch_size" in training:
        training["global_batch_size"] = _global_batch(training["global_batch_size"], model, training)
    overrides = {key: value for key, value in (("gpus_per_node", args.gpus_per_node),
                                                 ("nvlink_domain", args.nvlink_domain),
                                                 ("inter_node_bandwidth", args.inter_node_bandwidth))
                 if value is not None}
    scaling = {key: value for key, value in (("max_batch_tokens", args.max_batch_tokens),
                                               ("interruptions_per_gpu_day", args.interruptions_per_gpu_day),
                                               ("restart_minutes", args.restart_minutes),
                                               ("checkpoint_interval_minutes", args.checkpoint_interval),
                                               ("checkpoint_bandwidth", args.checkpoint_bandwidth))
               if value is not None}
    return {"model": model, "tokens": args.tokens, "gpu": [{"gpu": name, **overrides} for name in args.gpu],
            "gpus": args.gpus, "deadline": args.deadline, "budget": args.budget, "prices": args.prices,
            "training": training, "scaling": scaling, "rules": tuple(args.rules), "engine": args.engine,
            "assumptions": _assumptions(args.assume), "workers": args.workers}


def _capacity(args) -> int:
    from .capacity_plan import capacity

    inputs = _capacity_inputs(args)
    if args.plot:
        from .capacity_plan.plot import check_plot_path

        check_plot_path(args.plot)
    bar = _ProgressBar() if not args.json and _is_tty(sys.stderr) else None
    try:
        plan = capacity(**inputs, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    if args.plot:
        from .capacity_plan.plot import plot_plan

        plot_plan(plan, args.plot)
    if args.json:
        _emit(plan.model_dump_json(indent=2), as_json=True)
    else:
        _emit(plan.explain(all_counts=args.all_counts) + (f"\nwrote {args.plot}" if args.plot else ""))
    met = plan.pick is not None or (plan.options and plan.deadline_days is None and plan.budget is None)
    return 0 if met else 1


def _is_tty(stream) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


class _ProgressBar:
    """A one-line progress bar on stderr for sweeps of more than a few seconds' work (a terminal only)."""

    WIDTH = 30
    SHOW_FROM = 40          # scenarios; fewer finish before a bar would be read

    def __init__(self):
        self.drawn = False

    def __call__(self, done: int, total: int) -> None:
        if total < self.SHOW_FROM:
            return
        filled = self.WIDTH * done // total
        self._write(f"\radvisor: capacity [{'#' * filled}{'.' * (self.WIDTH - filled)}] {done}/{total} counts")
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self._write("\r" + " " * (self.WIDTH + 40) + "\r")

    @staticmethod
    def _write(text: str) -> None:
        try:
            sys.stderr.write(text)
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):
            pass


def _completion(args) -> int:
    from .completion import completion_script
    from .inputs import presets

    names = {"--gpu": presets.gpu_names(), "--model": presets.model_names()}
    _emit(completion_script(_parser(), args.shell, names).rstrip("\n"))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
