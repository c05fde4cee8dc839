"""`advisor presets`, `rules`, `facts`, `measure` and `completion`: the listings and the tools."""

from __future__ import annotations

import json

from .output import _emit, _say
from .parser import _parser
from .situation import _width


def _presets(args) -> int:
    from ..inputs import presets

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
    from ..inputs.specs import Model

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
    from ..errors import UnknownPresetError
    from ..inputs import presets
    from ..results.brief import wrap_lines

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
    from ..rulebook.load import builtin_rulebook

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
    from ..facts import CATALOGUE

    if args.json:
        _emit(json.dumps({"facts": [{"name": spec.name, "type": spec.type.__name__, "scope": spec.scope,
                                     "doc": spec.doc} for spec in CATALOGUE.values()]}, indent=2), as_json=True)
        return 0
    _emit("\n".join(f"  {spec.name:<30} {spec.type.__name__:<5} {spec.doc}" for spec in CATALOGUE.values()))
    return 0


def _measure(args) -> int:
    from ..measure import measure

    prof = measure(args.out, smoke=args.smoke, budget=args.budget, gpu=args.gpu, records=args.records, log=_say)
    _emit(_profile_table(prof) + f"\nwrote {args.out}")
    return 0


def _profile_table(prof) -> str:
    """What a measurement found, beside the shipped profile rescaled to the same GPU."""
    from ..inputs.profile import shipped_profile

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


def _completion(args) -> int:
    from ..completion import completion_script
    from ..inputs import presets

    names = {"--gpu": presets.gpu_names(), "--model": presets.model_names()}
    _emit(completion_script(_parser(), args.shell, names).rstrip("\n"))
    return 0

