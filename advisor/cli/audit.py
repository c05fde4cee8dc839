"""`advisor audit` (the layout from --layout's id or --tp, --pp, ... flags) and `advisor compare`."""

from __future__ import annotations

from .output import _emit
from .parser import FRAMEWORK_FORMATS, STACK_LAYOUT_FRAMEWORK
from .recommend import _check_format, _emit_export, _export_pin
from .situation import _assumptions, _situation, _width


def _audit(args) -> int:
    from ..api import audit

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
    from ..errors import InputError
    from ..inputs.layout import Layout

    framework = args.layout_framework or STACK_LAYOUT_FRAMEWORK.get(args.framework, "megatron")
    if args.layout_id is not None:
        if args.layout is not None and args.layout != args.layout_id:
            raise InputError("--layout", args.layout, f"one layout: {args.layout_id} is given as well",
                             "give the id once, as --layout or on its own")
        args.layout = args.layout_id
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
    from ..errors import InputError

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
    from ..api import compare

    cluster, model, training = _situation(args)
    result = compare(cluster, model, _layout_ids(args.layouts), training, rules=tuple(args.rules), engine=args.engine,
                     assumptions=_assumptions(args.assume))
    fmt = "json" if args.json else args.format
    if not _emit_result(result, fmt, args):
        from ..errors import InputError

        raise InputError("--format", fmt, "text or json for compare (recommend and audit write launch configs)")
    return 0


def _layout_ids(words: list[str]) -> list:
    """The layouts of `advisor compare`, parsed: "megatron  tp8-..." as recommend's summary printed it
    (a framework word, then the id) reads as one layout; each id names the argument on an error."""
    from ..errors import InputError
    from ..inputs.layout import Layout

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

