"""Command line: `advisor recommend`, `advisor audit`, `advisor presets`, `advisor rules`, `advisor facts`.

Exit status: 0 on success; 1 when no layout fits (recommend) or the audit has an error finding;
2 on bad input (the message names the field, what was given and what is wanted).
"""

from __future__ import annotations

import argparse
import json
import sys

from pydantic import ValidationError

from .errors import AdvisorError

__all__ = ["main"]


FORMATS = ("text", "json", "megatron", "deepspeed", "torchtitan")

# The launch-config formats each framework runs (tests/test_audit_export_contract.py FORMATS):
# Megatron-DeepSpeed takes Megatron's model and TP/PP flags plus the DeepSpeed JSON.
FRAMEWORK_FORMATS = {
    "megatron": ("megatron",),
    "megatron+deepspeed": ("megatron", "deepspeed"),
    "deepspeed": ("deepspeed",),
    "torchtitan": ("torchtitan",),
}


def _situation_args(r: argparse.ArgumentParser) -> None:
    model = r.add_mutually_exclusive_group(required=True)
    model.add_argument("--model", help="model preset name, e.g. llama-3-70b (see `advisor presets`)")
    model.add_argument("--hf-config", metavar="PATH", help="a Hugging Face config.json (or its folder)")
    r.add_argument("--gpu", required=True, help="GPU preset name, e.g. H100-SXM-80GB")
    r.add_argument("--gpus", required=True, type=int, help="total number of GPUs")
    r.add_argument("--gpus-per-node", type=int, help="GPUs per server (default: the GPU preset's)")
    r.add_argument("--nvlink-domain", type=int, help="GPUs per NVLink domain (default: the GPU preset's)")
    r.add_argument("--seq-len", help="tokens per sequence, e.g. 4096, 8k, 128k (default: the model's context)")
    r.add_argument("--global-batch", type=int, help="sequences per optimizer step (default: about 4M tokens)")
    r.add_argument("--precision", choices=["bf16", "fp16", "fp8"], default="bf16")
    r.add_argument("--no-flash-attention", action="store_true", help="FlashAttention kernels are not available")
    r.add_argument("--rules", nargs="*", default=[], metavar="FILE", help="extra site rule files (TOML)")
    r.add_argument("--engine", choices=["durable", "python"], help="rule engine (default: durable where it imports)")
    r.add_argument("--assume", action="append", default=[], metavar="NAME=VALUE",
                   help="a cost-model assumption (see advisor.Assumptions), e.g. "
                        "megatron_main_grad_bytes=2 or tp_comm_overlap=true; repeatable")
    r.add_argument("--json", action="store_true", help="same as --format json")
    r.add_argument("--format", choices=FORMATS, default="text",
                   help="text, JSON, or a launch config for Megatron-LM, DeepSpeed or torchtitan. "
                        "recommend writes a launch config only in a format the recommended layout's "
                        "framework runs (megatron: megatron; deepspeed: deepspeed; megatron+deepspeed: "
                        "megatron or deepspeed; torchtitan: torchtitan), else exits 2")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="advisor", description="Recommend and explain LLM training parallelism.")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("recommend", help="recommend a layout for a model on a cluster")
    _situation_args(r)
    r.add_argument("--micro-batch", type=int, help="sequences per GPU per forward pass (default: 1)")
    r.add_argument("--explain", choices=["summary", "full"], default="summary", help="detail of the text output")

    e = sub.add_parser("explain", help="recommend, and tell the whole decision: story, trace, why rules did not fire")
    _situation_args(e)
    e.add_argument("--micro-batch", type=int, help="sequences per GPU per forward pass (default: chosen)")

    a = sub.add_parser("audit", help="check a layout: what the frameworks refuse, what is unwise, and why")
    _situation_args(a)
    a.add_argument("--framework", choices=["megatron", "deepspeed", "megatron+deepspeed", "torchtitan"],
                   default="megatron")
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

    pr = sub.add_parser("presets", help="list GPU and model presets")
    pr.add_argument("--json", action="store_true")
    sub.add_parser("rules", help="list the built-in rules (id, tier, title)")
    sub.add_parser("facts", help="list the facts rule conditions may use")
    return p


def _situation(args):
    from .inputs.specs import Cluster, Model, Training

    cluster = {"gpu": args.gpu, "gpus": args.gpus}
    if args.gpus_per_node:
        cluster["gpus_per_node"] = args.gpus_per_node
    if args.nvlink_domain:
        cluster["nvlink_domain"] = args.nvlink_domain
    training = {"precision": args.precision, "flash_attention": not args.no_flash_attention}
    for key, value in (("seq_len", args.seq_len), ("global_batch_size", args.global_batch),
                       ("micro_batch_size", getattr(args, "micro_batch", None) if args.command != "audit" else None)):
        if value is not None:
            training[key] = value
    model = Model.from_hf_config(args.hf_config) if args.hf_config else Model.preset(args.model)
    return Cluster(**cluster), model, Training(**training)


def _export(fmt: str, layout, model, training, cluster) -> str:
    from . import export

    if fmt == "megatron":
        return export.megatron_command(layout, model, training, cluster)
    if fmt == "deepspeed":
        return json.dumps(export.deepspeed_config(layout, model, training, cluster), indent=2)
    return export.torchtitan_toml(layout, model, training, cluster)


def _check_format(fmt: str, framework: str) -> None:
    """Refuse a launch config the recommended layout's framework does not run: the exporter would
    otherwise judge the layout by another framework's limits (a DeepSpeed offload layout "fails"
    as Megatron flags)."""
    runs = FRAMEWORK_FORMATS.get(framework, ())
    if fmt not in runs:
        from .errors import InputError

        raise InputError("--format", fmt, f"a format framework {framework!r} runs: {' or '.join(runs)}",
                         f"the recommended layout is for {framework}; print it with --format {runs[0]} "
                         f"(or --json), or choose the framework with a site rule (use_framework)")


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
        try:
            values[name.strip()] = json.loads(text)
        except json.JSONDecodeError:
            values[name.strip()] = text
    return Assumptions(**values)


def _recommend(args) -> int:
    from .api import recommend

    cluster, model, training = _situation(args)
    rec = recommend(cluster, model, training, rules=tuple(args.rules), engine=args.engine,
                    assumptions=_assumptions(args.assume))
    fmt = "json" if args.json else args.format
    if fmt == "json":
        print(rec.model_dump_json(indent=2))
    elif fmt == "text" or rec.layout is None:
        print(rec.explain(args.explain))
    else:
        _check_format(fmt, rec.layout.framework)
        print(_export(fmt, rec.layout, rec.model, rec.training, rec.cluster))
    return 0 if rec.status == "recommended" else 1


def _audit(args) -> int:
    from .auditor import audit
    from .inputs.layout import Layout

    cluster, model, training = _situation(args)
    fields = {"framework": args.framework, "zero_stage": args.zero, "sp": args.sp,
              "overlap_p2p_comm": not args.no_overlap_p2p, "micro_batch_size": args.micro_batch,
              "recompute": args.recompute, "offload": args.offload, "offload_device": args.offload_device}
    for dim in ("tp", "pp", "cp", "ep", "etp", "vpp", "dp"):
        if getattr(args, dim) is not None:
            fields[dim] = getattr(args, dim)
    if args.num_microbatches is not None:
        fields["num_microbatches"] = args.num_microbatches
    report = audit(cluster, model, Layout(**fields), training, rules=tuple(args.rules), engine=args.engine,
                   assumptions=_assumptions(args.assume))
    fmt = "json" if args.json else args.format
    if fmt == "json":
        print(report.model_dump_json(indent=2))
    elif fmt == "text" or not report.ok:
        print(report.explain())
    else:
        print(_export(fmt, report.layout, report.model, report.training, report.cluster))
    return 0 if report.ok else 1


def _presets(args) -> int:
    from .inputs import presets

    if args.json:
        print(json.dumps({"gpus": presets.gpu_entries(), "models": presets.model_entries()}, indent=2))
        return 0
    print("GPUs:")
    for e in presets.gpu_entries():
        aliases = f" (aliases: {', '.join(e['aliases'])})" if e.get("aliases") else ""
        print(f"  {e['name']:<16} {e['memory']:>9}  {e['peak_flops']:>15} dense  "
              f"{e.get('gpus_per_node', 8)}/node{aliases}")
    from .inputs.specs import Model

    print("Models:")
    for e in presets.model_entries():
        size = f"{Model.preset(e['name']).params / 1e9:.1f}B"
        print(f"  {e['name']:<16} {size:>7}  layers {e['layers']:>3}  hidden {e['hidden']:>5}  "
              f"heads {e['heads']:>3}/{e.get('kv_heads', e['heads'])}")
    return 0


def _rules(_args) -> int:
    from .rulebook.load import builtin_rulebook

    book = builtin_rulebook()
    print(f"{len(book.rules)} rules from {book.root} ({book.revision})")
    for rule in book.rules.values():
        print(f"  {rule.spec.tier:<10} {rule.id:<46} {rule.spec.title}")
    return 0


def _facts(_args) -> int:
    from .facts import CATALOGUE

    for spec in CATALOGUE.values():
        print(f"  {spec.name:<30} {spec.type.__name__:<5} {spec.doc}")
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # `advisor rules | head`: the reader went away; exit quietly like other Unix tools.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _validation_text(exc: ValidationError) -> str:
    """pydantic's errors in advisor's have/want form (errors.InputError), one per invalid field,
    without pydantic's documentation links."""
    parts = []
    for err in exc.errors(include_url=False):
        ours = (err.get("ctx") or {}).get("error")
        if isinstance(ours, AdvisorError):          # raised by advisor's own validators: already have/want
            parts.append(str(ours))
            continue
        where = ".".join(str(p) for p in err["loc"])
        field = f"{exc.title}.{where}" if where else exc.title
        parts.append(f"{field}: invalid value\n  have: {err.get('input')!r}\n  want: {err['msg']}")
    return "\n".join(parts)


def _main(argv: list[str] | None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "explain":
        args.explain = "full"
    handler = {"recommend": _recommend, "explain": _recommend, "audit": _audit, "presets": _presets,
               "rules": _rules, "facts": _facts}[args.command]
    try:
        return handler(args)
    except ValidationError as exc:
        print(f"advisor: error: {_validation_text(exc)}", file=sys.stderr)
        return 2
    except AdvisorError as exc:
        print(f"advisor: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
