"""The command line's grammar: every subcommand's arguments, the exit statuses its help lists, and
the usage error argparse raises instead of exiting (main reports it like the others)."""

from __future__ import annotations

import argparse

from ..inputs.finetune import ALL_LINEAR, LORA_TARGETS, PEFT_TARGETS
from ..inputs.optimizers import OPTIMIZERS
from ..inputs.precision import RECIPES
from ..inputs.stacks import STACKS


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
    r.add_argument("--precision", choices=list(RECIPES),
                   help="GEMM precision recipe (advisor.inputs.precision): fp8 = the framework's default FP8 "
                        "(default: bf16, or fp16 on a GPU without BF16, such as the V100)")
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


class _Version(argparse.Action):
    """--version: the release and the build (build_info.describe: which hot modules run compiled),
    worked out only when asked."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show the release and the build (compiled or pure Python), then exit")

    def __call__(self, parser, namespace, values, option_string=None):
        from .. import __version__
        from ..build_info import describe
        print(f"advisor {__version__} ({describe()})")      # to stdout, as argparse's own version action
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="advisor", description="Recommend and explain LLM training parallelism.", epilog=_epilog(),
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action=_Version)
    _debug_arg(p)
    sub = p.add_subparsers(dest="command", required=True)
    _recommend_parsers(sub)
    _audit_parser(sub)
    _compare_parser(sub)
    _tool_parsers(sub)
    return p


def _with_exit_status() -> dict:
    """add_parser's keywords for a command whose help lists the exit statuses."""
    return {"epilog": _epilog(), "formatter_class": argparse.RawDescriptionHelpFormatter}


def _recommend_parsers(sub) -> None:
    """`advisor recommend` and `advisor explain` (recommend with the whole decision)."""
    _with = _with_exit_status()
    r = sub.add_parser("recommend", help="recommend a layout for a model on a cluster", **_with)
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
                       **_with)
    _situation_args(e)
    _stack_args(e)
    e.add_argument("--micro-batch", type=int, help="sequences per GPU per forward pass (default: chosen)")
    _width_arg(e)



def _audit_parser(sub) -> None:
    """`advisor audit`: the situation, the stack, and the layout as an id or as flags."""
    _with = _with_exit_status()
    a = sub.add_parser("audit", help="check a layout: what the frameworks refuse, what is unwise, and why",
                       **_with)
    _situation_args(a)
    _stack_args(a)
    a.add_argument("--layout-framework", choices=LAYOUT_FRAMEWORKS, metavar="NAME",
                   help="the framework the audited layout runs on (Layout.framework): "
                        f"{', '.join(LAYOUT_FRAMEWORKS)} (default: --layout's prefix, else the one --framework's "
                        "stack runs, else megatron)")
    a.add_argument("--layout", metavar="LAYOUT_ID",
                   help="the layout as recommend prints its id, e.g. tp8-dp4-pp2-zero1-sp-nmb128 or "
                        "deepspeed/tp1-dp64-pp1-zero3 (instead of --tp, --pp, ... flags)")
    a.add_argument("layout_id", nargs="?", metavar="LAYOUT_ID",
                   help="the same as --layout, as compare takes its ids")
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



def _compare_parser(sub) -> None:
    """`advisor compare`: layouts side by side with the advisor's pick."""
    _with = _with_exit_status()
    c = sub.add_parser("compare", help="why not this layout: layouts side by side with the advisor's pick",
                       **_with)
    c.add_argument("layouts", nargs="+", metavar="LAYOUT_ID",
                   help="layout ids as recommend prints them, e.g. tp8-dp4-pp2-zero1-sp-nmb128 or "
                        "deepspeed/tp1-dp64-pp1-zero3 (a framework word before an id is read as its prefix)")
    _situation_args(c)
    _stack_args(c)
    _width_arg(c)



def _tool_parsers(sub) -> None:
    """The listings (presets, rules, facts), measure, capacity and completion."""
    _with = _with_exit_status()
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
        **_with))
    comp = sub.add_parser("completion", help='print a shell completion script: eval "$(advisor completion bash)"')
    comp.add_argument("shell", choices=["bash", "zsh"])
    _debug_arg(comp)


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
    c.add_argument("--precision", choices=list(RECIPES),
                   help="GEMM precision recipe (default: bf16, fp16 on a GPU without BF16 tensor cores)")
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

