"""The situation a command line describes: Cluster, Model and Training from the arguments (--gpu,
--gpu-spec, the network, --global-batch in sequences or tokens), and --assume's Assumptions."""

from __future__ import annotations

import json

from .output import _say
from .parser import MIN_WIDTH


def _finetune_fields(args) -> dict:
    fields = {"task": args.task, "optimizer": args.optimizer, "master_weights": args.master_weights}
    for key in ("lora_rank", "lora_alpha", "lora_targets", "lora_dropout"):
        value = getattr(args, key)
        if value is not None:
            fields[key] = tuple(value) if key == "lora_targets" else value
    return fields


def _width(args) -> int:
    """The text output's width: --width, else the terminal's (COLUMNS first, as shutil reads it)."""
    import shutil

    width = args.width if args.width is not None else shutil.get_terminal_size((80, 24)).columns
    if args.width is not None and width < MIN_WIDTH:
        from ..errors import InputError

        raise InputError("--width", width, f"at least {MIN_WIDTH} columns")
    return max(MIN_WIDTH, width)


def _situation(args):
    from ..inputs.specs import Cluster, Model, Training

    cluster = {"gpu": _gpu(args), "gpus": args.gpus}
    for key in ("gpus_per_node", "nvlink_domain", "inter_node_bandwidth", "intra_node_bandwidth"):
        if getattr(args, key):
            cluster[key] = getattr(args, key)
    if args.profile:
        cluster["profile"] = args.profile
    training = {"cuda_graphs": args.cuda_graphs, **_finetune_fields(args)}
    if args.precision is not None:     # unstated: the GPU decides (inputs.specs.part_defaults)
        training["precision"] = args.precision
    if args.no_flash_attention:
        training["flash_attention"] = False
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
    cluster = Cluster(**cluster)
    if "global_batch_size" in training:
        training["global_batch_size"] = _global_batch(training["global_batch_size"], model, training)
    training = Training(**training)
    _say_part_defaults(cluster.gpu, training)
    return cluster, model, training


def _say_part_defaults(gpu, training) -> None:
    """Say on stderr what the GPU decides for the training fields the command line left out (fp16 on a
    GPU without BF16 tensor cores, no FlashAttention on Volta): the same notes the trace records."""
    from ..inputs.specs import part_defaults

    for note in part_defaults(gpu, training)[1]:
        _say(f"advisor: note: {note}")


def _global_batch(text: str, model, training: dict) -> int | str:
    """--global-batch: a plain count is sequences; a count with a suffix (k, M, as --seq-len and
    Scaling.max_batch_tokens read them: 4M = 4 x 2^20) is tokens, turned into whole sequences of the
    job's seq_len and echoed on stderr as "4M tokens = 512 sequences of 8192"."""
    if text.strip().isdigit():
        return int(text)
    from ..errors import InputError
    from ..inputs.specs import Training, resolve_training
    from ..inputs.units import to_tokens

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
    from ..inputs import presets
    from ..inputs.gpu_file import read_gpu_file
    from ..inputs.specs import GPU

    overrides = {k: v for k, v in (("memory", args.gpu_memory), ("peak_flops", args.gpu_flops)) if v is not None}
    if args.gpu_spec is None and not overrides:
        return args.gpu
    fields = read_gpu_file(args.gpu_spec) if args.gpu_spec is not None else presets.gpu(args.gpu, field="--gpu")
    if overrides:
        from ..inputs.units import device_memory_reading

        # The header names the GPU: a vendor-style "80GB" says there how it was read (80 GiB).
        reading = device_memory_reading(args.gpu_memory)
        fields = {**fields, **overrides, "name": f"{fields.get('name', 'custom')} ({reading or 'modified'})",
                  "source": f"{fields.get('source', 'user-supplied')}; {' and '.join(overrides)} from the command line"}
    return GPU(**fields)


def _assumptions(items: list[str]):
    """--assume NAME=VALUE pairs as Assumptions; VALUE is read as JSON (2, 0.5, true, ["mlp"]) or else
    taken as a string."""
    if not items:
        return None
    from ..costmodel import Assumptions
    from ..errors import InputError

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
    from ..errors import InputError
    from ..inputs.suggest import closest

    near = closest(name, list(fields))
    raise InputError("--assume", name, "a field of advisor.Assumptions",
                     f"did you mean {', '.join(near)}?" if near else "help(advisor.Assumptions) lists them")


def _with_units(name: str, value, annotation):
    """A text VALUE with units for a numeric knob, in its canonical unit: `pcie_bandwidth="32 GB/s"`
    as Cluster's bandwidths take it (bytes/s), a `*_bytes` int knob as bytes; other values as given."""
    if not isinstance(value, str) or annotation not in (int, float):
        return value
    from ..inputs import units

    if name.endswith("_bandwidth"):
        return units.to_bytes_per_second(value, f"--assume {name}")
    if name.endswith("_bytes") and annotation is int:
        return units.to_bytes(value, f"--assume {name}")
    return value


def _assumption_value(item: str, text: str):
    """VALUE of --assume as JSON, refusing the non-standard Infinity/NaN Python's json reads (and
    1e999, which overflows to inf): no cost-model knob is meaningful at infinity."""
    import math

    from ..errors import InputError

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

