"""`advisor recommend` and `advisor explain`, and the launch configs (--format) recommend and audit
write."""

from __future__ import annotations

import json

from .output import _emit, _say
from .parser import ANY_FRAMEWORK_FORMATS, FRAMEWORK_FORMATS, FRAMEWORK_VERSIONS
from .situation import _assumptions, _situation, _width


def _framework_version(fmt: str, given: str | None) -> str:
    from ..errors import InputError

    versions = FRAMEWORK_VERSIONS[fmt]
    if given is None:
        return versions[0]
    if given not in versions:
        raise InputError("--framework-version", given, list(versions), f"the releases --format {fmt} is written for")
    return given


def _export(fmt: str, layout, model, training, cluster, assumptions, version: str | None) -> tuple[str, list[str]]:
    """The launch config (for stdout) and the notes that go with it (for stderr)."""
    from .. import export

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
        return export.peft_config(model, training, layout), []
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
        from ..errors import InputError

        raise InputError("--format", fmt, f"a format framework {framework!r} runs: {' or '.join(runs)}",
                         f"the layout is for {framework}; print it with --format {runs[0]} (or --json), or state "
                         f"the stack that runs it with --framework (or a site rule's use_framework)")


def _recommend(args) -> int:
    from ..api import recommend

    cluster, model, training = _situation(args)
    rec = recommend(cluster, model, training, rules=tuple(args.rules), engine=args.engine,
                    assumptions=_assumptions(args.assume))
    fmt = "json" if args.json else args.format
    if getattr(args, "quiet", False) and fmt == "text":
        _quiet(rec)
    elif fmt == "json":
        if rec.status != "recommended":
            rec = rec.model_copy(update={"what_would_fit": _fit_changes(args, (cluster, model, training))})
        _emit(rec.model_dump_json(indent=2), as_json=True)
    elif fmt == "text":
        _emit(rec.explain(args.explain, width=_width(args)))
        if rec.status != "recommended":
            _emit(_what_would_fit(args, (cluster, model, training)))
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
    from ..results.brief import infeasible_reason

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


def _fit_changes(args, situation) -> list:
    """The smallest changes that would fit, each planned again (cli/whatfits.py)."""
    from .whatfits import what_would_fit

    options = {"rules": tuple(args.rules), "engine": args.engine, "assumptions": _assumptions(args.assume)}
    return what_would_fit(*situation, options)


def _what_would_fit(args, situation) -> str:
    """Under "No layout fits": the text of _fit_changes."""
    from ..results.brief import wrap_lines
    from .whatfits import what_would_fit_text

    text = what_would_fit_text(_fit_changes(args, situation))
    return "\n".join(wrap_lines(text.splitlines(), _width(args)))
