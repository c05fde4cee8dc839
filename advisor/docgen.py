"""Generated reference files: JSON Schemas in `schemas/`, the rule and fact catalogues in `docs/`.

    python -m advisor.docgen            # regenerate schemas/*.json, docs/rules.md, docs/facts.md
    python -m advisor.docgen --check    # exit 1, with a diff summary, when any of them is stale

Everything here is derived from code and data that already exist: the pydantic models (inputs,
`Recommendation`, `Audit`, `Estimate`, `RuleSpec`), the loaded rule book and the fact catalogue.
Output is deterministic: sorted keys, stable order, no timestamps, no absolute paths (rule files
are named relative to the rules directory). tests/test_docs.py and tests/test_schemas.py fail when
the committed files drift from what this module generates.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
import typing
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema

from .capacity_plan import CapacityPlan, Prices
from .costmodel import Estimate
from .facts import CATALOGUE, LAYOUT_GROUPS
from .inputs import specs, units
from .inputs.layout import Layout
from .inputs.profile import Profile
from .inputs.specs import GPU, Cluster, Model, Training
from .results.audit import Audit
from .results.comparison import Comparison
from .results.recommendation import Recommendation
from .rulebook.actions import Action, Limit, ReportFinding
from .rulebook.load import ID_RE, LEAF_RE, MAX_RULES_PER_FILE, PLACEHOLDER_RE, Rule, RuleBook, RuleSpec, load_rulebook

__all__ = ["schemas", "rules_markdown", "facts_markdown", "generate", "stale", "main", "repo_root"]

DIALECT = "https://json-schema.org/draft/2020-12/schema"
RULES_DOC = "docs/rules.md"
RULES_README = "rules/README.md"
ACTIONS_BEGIN = "<!-- actions: generated from advisor/rulebook/actions.py by python -m advisor.docgen -->"
ACTIONS_END = "<!-- end of actions -->"
FACTS_DOC = "docs/facts.md"
SCHEMA_DIR = "schemas"
REGENERATE = "python -m advisor.docgen"

# ---------------------------------------------------------------------------------------------
# JSON Schemas

# Quantity fields are `Annotated[int | float, BeforeValidator(convert)]`: the validator accepts a
# string with units and stores a plain number. pydantic's validation-mode schema shows only the
# stored type, so input schemas would reject "80 GiB". Each converter is mapped here to what it
# accepts; a BeforeValidator that declares `json_schema_input_type` is left to pydantic.
_STRING_INPUTS: dict[Callable[..., Any], dict[str, Any]] = {
    units.to_bytes: {"description": "a size with units, e.g. \"80 GiB\" (a plain number is bytes)",
                     "examples": ["80 GiB", "141 GB"]},
    units.to_device_memory: {"description": "a GPU's memory with units, e.g. \"80 GiB\"; the vendor's \"80GB\" "
                                            "is read as 80 GiB, as the vendor means it (a plain number is bytes)",
                             "examples": ["80 GiB", "80GB"]},
    units.to_bytes_per_second: {"description": "a bandwidth with units, e.g. \"400 Gbit/s\" or \"900 GB/s\" "
                                               "(a plain number is bytes/s)",
                                "examples": ["400 Gbit/s", "900 GB/s"]},
    units.to_flops_per_second: {"description": "a compute rate with units, e.g. \"989 TFLOP/s\" "
                                               "(a plain number is FLOP/s)",
                                "examples": ["989 TFLOP/s"]},
    units.to_count: {"description": "a count with an optional suffix, e.g. \"70B\" or \"1.5M\"",
                     "examples": ["70B"]},
    units.to_tokens: {"description": "a token count with an optional suffix, e.g. \"8k\" or \"128k\"",
                      "examples": ["8k", "128k"]},
    specs._gpu_from: {"description": "a GPU preset name (case-insensitive; `advisor presets` lists them)",
                      "examples": ["H100-SXM-80GB", "A100-80GB"]},
}


def _string_input(function: Any) -> dict[str, Any] | None:
    if function in _STRING_INPUTS:
        return _STRING_INPUTS[function]
    for cell in getattr(function, "__closure__", None) or ():     # `_unit(convert, field)` lambdas
        try:
            found = _STRING_INPUTS.get(cell.cell_contents)
        except (TypeError, ValueError):                            # unhashable or empty cell
            found = None
        if found is not None:
            return found
    return None


class _Schema(GenerateJsonSchema):
    """pydantic's generator, plus the string forms advisor's BeforeValidators accept (validation mode)."""

    def function_before_schema(self, schema):
        inner = super().function_before_schema(schema)
        if self.mode != "validation" or schema.get("json_schema_input_schema"):
            return inner
        extra = _string_input(schema["function"]["function"])
        if extra is None:
            return inner
        return {"anyOf": [inner, {"type": "string", **extra}]}


# pydantic cannot push `Field(ge=..., le=...)` into a union such as `Tokens | None` and writes the
# constraint under its Python name, which JSON Schema ignores; give it the JSON Schema keyword.
_CONSTRAINT_KEYWORDS = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum",
                        "multiple_of": "multipleOf"}


def _json_keywords(node: Any, in_properties: bool = False) -> Any:
    if isinstance(node, list):
        return [_json_keywords(x) for x in node]
    if not isinstance(node, dict):
        return node
    if in_properties:                                   # keys are property names, not keywords
        return {k: _json_keywords(v) for k, v in node.items()}
    out = {}
    for key, value in node.items():
        name = _CONSTRAINT_KEYWORDS.get(key) if isinstance(value, (int, float)) else None
        out[name if name and name not in node else key] = _json_keywords(value, key in ("properties", "$defs"))
    return out


def _model_schema(model: type[BaseModel], mode: str, description: str | None = None) -> dict[str, Any]:
    out = _json_keywords(model.model_json_schema(mode=mode, schema_generator=_Schema))
    out = {"$schema": DIALECT, **out}
    if description:
        out["description"] = description
    return out


def _condition_schema() -> dict[str, Any]:
    return {
        "description": "A condition: '<group>.<fact> <op> <literal>' with op one of == != < <= > >= in, "
                       "or a table with exactly one key, `all` or `any`, holding a non-empty list of conditions. "
                       "Fact names are listed in docs/facts.md.",
        "anyOf": [
            {"type": "string", "pattern": LEAF_RE.pattern, "examples": ["cluster.gpus <= 32"]},
            {"type": "object", "additionalProperties": False, "minProperties": 1, "maxProperties": 1,
             "properties": {key: {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/Condition"}}
                            for key in ("all", "any")}},
        ],
    }


# Shown in the rule-file schema where RuleSpec's own fields carry no docstring (rules/README.md says the same).
_RULE_FIELD_TEXT = {
    "id": "<area>.<kebab-name>; never reused, never changes meaning (a changed rule gets a new version).",
    "version": "Bump when `when` or `then` changes.",
    "title": "One line: what the rule decides or checks.",
    "when": "The condition over facts (docs/facts.md); nothing in a rule file is executed.",
    "then": "Effects from the closed action set (advisor.actions).",
    "message": "One line with the conclusion and the reason; may name facts as {group.fact} or {group.fact:.1f}.",
    "rationale": "Why, with the numbers and who says so.",
    "references": "At least one citation, each with a url or a repository path.",
    "examples": "Fact overrides on the reference situation that must make the rule fire, and must not.",
    "status": "stable, preview or deprecated.",
}


def _rule_file_schema(tiers: dict[str, int]) -> dict[str, Any]:
    rule = _json_keywords(RuleSpec.model_json_schema(mode="validation", schema_generator=_Schema))
    defs = rule.pop("$defs", {})
    defs["Condition"] = _condition_schema()
    props = rule["properties"]
    props["id"] = {**props["id"], "pattern": ID_RE.pattern}
    for name, text in _RULE_FIELD_TEXT.items():
        if name in props:
            props[name].setdefault("description", text)
    props["when"] = {"$ref": "#/$defs/Condition", "description": _RULE_FIELD_TEXT["when"]}
    props["tier"] = {**props["tier"], "enum": sorted(tiers, key=tiers.get),
                     "description": "A tier name from rules/tiers.toml (lower priority fires first)."}
    fact_names = {"propertyNames": {"enum": sorted(CATALOGUE)}}
    examples = defs.get("Examples", {}).get("properties", {})
    for kind in ("fire", "no_fire"):
        if kind in examples and "items" in examples[kind]:
            examples[kind]["items"] = {**examples[kind]["items"], **fact_names}
    defs["RuleSpec"] = rule
    return {
        "$schema": DIALECT,
        "title": "Rule file",
        "description": "An advisor rule file (rules/*.toml, or a site rule file loaded with --rules). "
                       "TOML; shown here as the JSON it parses to. See docs/rules.md for the built-in rules.",
        "type": "object",
        "additionalProperties": False,
        "required": ["rule"],
        "properties": {
            "scope": {"enum": ["situation", "layout"], "default": "situation",
                      "description": "situation: evaluated by recommend() on the cluster/model/training facts; "
                                     "layout: audit rules, evaluated on one concrete layout (may read layout.* "
                                     "and check.* facts, and must use the `finding` action)."},
            "rule": {"type": "array", "minItems": 1, "maxItems": MAX_RULES_PER_FILE,
                     "items": {"$ref": "#/$defs/RuleSpec"}},
        },
        "$defs": defs,
    }


def _tiers_schema() -> dict[str, Any]:
    return {
        "$schema": DIALECT,
        "title": "Tiers file",
        "description": "rules/tiers.toml: named priority tiers. A rule names a tier, never a number; "
                       "LOWER priority fires FIRST (durable_rules `pri`).",
        "type": "object",
        "additionalProperties": False,
        "required": ["tiers"],
        "properties": {"tiers": {"type": "object", "minProperties": 1,
                                 "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 999}}},
    }


def schemas(book: RuleBook) -> dict[str, dict[str, Any]]:
    """File name -> JSON Schema, for every file in schemas/."""
    return {
        "cluster.schema.json": _model_schema(Cluster, "validation"),
        "gpu.schema.json": _model_schema(GPU, "validation"),
        "model.schema.json": _model_schema(Model, "validation"),
        "training.schema.json": _model_schema(Training, "validation"),
        "layout.schema.json": _model_schema(Layout, "validation"),
        "profile.schema.json": _model_schema(
            Profile, "validation",
            "A measured kernel profile: `advisor measure` writes one, Cluster(profile=...) reads it "
            "(advisor/inputs/profile.py)."),
        "recommendation.schema.json": _model_schema(
            Recommendation, "serialization",
            "advisor.recommend(...).model_dump_json(): the chosen layout, estimates, checklist, "
            "runners-up, audit findings and the explanation trace."),
        "audit.schema.json": _model_schema(
            Audit, "serialization", "advisor.audit(...).model_dump_json(): every finding about one layout."),
        "comparison.schema.json": _model_schema(
            Comparison, "serialization",
            "advisor.compare(...).model_dump_json(): layouts beside the advisor's pick, each audited and "
            "estimated alike, with why it ranks where it does."),
        "estimate.schema.json": _model_schema(
            Estimate, "serialization", "advisor.estimate(...).model_dump_json(): memory, communication and time."),
        "capacity.schema.json": _model_schema(
            CapacityPlan, "serialization",
            "advisor.capacity(...).model_dump_json() and `advisor capacity --json`: every GPU type and count "
            "tried with its layout, days, GPU-hours and cost, the counts rejected and why, what bounds scaling, "
            "and the pick with its full recommendation."),
        "prices.schema.json": _model_schema(
            Prices, "validation",
            "A site's prices per GPU-hour (advisor capacity --prices FILE.toml; advisor/capacity_plan/prices.py). "
            "None are shipped."),
        "rule-file.schema.json": _rule_file_schema(book.tiers),
        "tiers.schema.json": _tiers_schema(),
    }


def _dump_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------------------------------------
# Markdown helpers

_HEADER = ("<!-- Generated by `{cmd}` from {source}; do not edit. Regenerate: `{cmd}`. -->\n")


def _code(text: str, in_table: bool = False) -> str:
    """An inline code span that survives backticks (and, in a table cell, pipes)."""
    text = str(text).replace("|", "\\|") if in_table else str(text)
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


_PROSE_ESCAPES = re.compile(r"([*<\[\]|\\])|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def _prose(text: str) -> str:
    """Plain text into Markdown: collapse whitespace, escape what would turn into markup."""
    text = " ".join(str(text).split())
    return _PROSE_ESCAPES.sub(lambda m: "\\" + m.group(0), text)


def _toml_string(text: str) -> str:
    if '"' in text and "'" not in text and "\n" not in text:
        return f"'{text}'"
    return json.dumps(text, ensure_ascii=False)


def _toml_inline(value: Any) -> str:
    """A condition as TOML inline syntax, as a rule file writes it."""
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_inline(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_inline(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot render {type(value).__name__} as TOML")


def _effect(action: BaseModel) -> str:
    """One `then` action in words (the vocabulary of rules/README.md)."""
    a = action.model_dump(exclude_none=True)
    kind = a.pop("action")
    if kind == "use_framework":
        return f"use framework {_code(a['framework'])}"
    if kind == "use_strategy":
        return f"use strategy {_code(a['strategy'])}"
    if kind == "allow_zero":
        stages = a["stages"]
        return f"allow ZeRO stage{'s' if len(stages) > 1 else ''} " + ", ".join(str(s) for s in stages)
    if kind == "limit":
        bounds = [f"{_code(a['dimension'])} {op} {_code(a[side])}" for side, op in (("min", "≥"), ("max", "≤"))
                  if side in a]
        return "limit " + " and ".join(bounds)
    if kind == "enable":
        return f"enable {_code(a['feature'])}"
    if kind == "disable":
        return f"disable {_code(a['feature'])}"
    if kind == "finding":
        return f"**{a['severity']}** finding; fix: {_code(a['fix'])}"
    if kind == "checklist":
        return "checklist item (the message)"
    if kind == "note":
        return "note in the trace (the message)"
    return _code(json.dumps({"action": kind, **a}, sort_keys=True))    # an action added later


_GITHUB_PATH = re.compile(r"^([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+): (\S+)(.*)$")


def _reference(ref) -> str:
    title = _prose(ref.title)
    if ref.url:
        line = f"[{title}]({ref.url})"
        return line + (f" — {_code(ref.path)}" if ref.path else "")
    m = _GITHUB_PATH.match(ref.path or "")
    if m:
        repo, path, rest = m.groups()
        rest = rest.strip()
        if rest.startswith("(") and rest.endswith(")"):
            rest = f"({_code(rest[1:-1])})"             # a location note such as (PipelineEngine.__init__)
        link = f"[{_code(repo + ': ' + path)}](https://github.com/{repo}/blob/HEAD/{path})"
        return f"{title} — {link}" + (f" {_prose(rest) if not rest.startswith('(') else rest}" if rest else "")
    return f"{title} — {_code(ref.path)}"


def _file_comment(path: Path) -> str:
    """The leading comment block of a rule file (its description, as written)."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            lines.append(line.lstrip("#").strip())
        elif line.strip() or lines:
            break
    return " ".join(x for x in lines if x)


def _tier_comments(root: Path) -> dict[str, str]:
    out = {}
    for line in (root / "tiers.toml").read_text(encoding="utf-8").splitlines():
        m = re.match(r"^\s*([A-Za-z0-9_-]+)\s*=\s*\d+\s*#\s*(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


_SCOPE_TEXT = {
    "situation": ("Situation rules", "scope `situation`: evaluated by `recommend()` on the cluster, model and "
                                     "training facts. They choose the framework, strategy and ZeRO stages, bound the "
                                     "parallel degrees, enable features and add checklist items."),
    "layout": ("Audit rules", "scope `layout`: evaluated by `audit()` on one concrete layout, and by the planner "
                              "on every candidate it would return. Each reports a finding: `error` (the framework "
                              "refuses or crashes), `warning` (legal but unwise) or `info`."),
}


def _anchor(rule_id: str) -> str:
    return rule_id


def _rule_section(rule: Rule) -> list[str]:
    s = rule.spec
    status = "" if s.status == "stable" else f" · **{s.status}**"
    out = [
        f'<a id="{_anchor(s.id)}"></a>',
        f"#### {_code(s.id)}",
        "",
        f"**{_prose(s.title)}** · version {s.version} · tier {_code(s.tier)}{status}",
        "",
        f"- **When:** {_code(s.when if isinstance(s.when, str) else _toml_inline(s.when))}",
    ]
    effects = [_effect(a) for a in s.then]
    if len(effects) == 1:
        out.append(f"- **Then:** {effects[0]}")
    else:
        out.append("- **Then:**")
        out += [f"  - {e}" for e in effects]
    out += [f"- **Message:** {_code(s.message)}", "", _prose(s.rationale), "", "References:", ""]
    out += [f"- {_reference(r)}" for r in s.references]
    out.append("")
    return out


def rules_markdown(book: RuleBook, rules_dir: Path) -> str:
    """docs/rules.md: every rule of `book`, grouped by scope, file and tier, in firing order."""
    rules = list(book.rules.values())
    files = sorted({Path(r.path).name for r in rules},
                   key=lambda name: (0 if book.scopes[Path(name).stem] == "situation" else 1, name))
    tier_notes = _tier_comments(rules_dir)
    counts = {scope: sum(r.scope == scope for r in rules) for scope in _SCOPE_TEXT}
    out = [
        _HEADER.format(cmd=REGENERATE, source="rules/*.toml"),
        "# Rule catalogue",
        "",
        f"Generated by `{REGENERATE}` from `rules/`; do not edit. After changing a rule file, run "
        f"`{REGENERATE}` and commit the result; `{REGENERATE} --check` (and the test suite) fail while "
        "this page is stale. The rule format is described in `rules/README.md` and "
        "`schemas/rule-file.schema.json`; the facts conditions may name are in [facts.md](facts.md).",
        "",
        f"{len(rules)} rules in {len(files)} files ({counts['situation']} situation, {counts['layout']} audit). "
        f"Rule set revision `{book.revision}` (the `ruleset_revision` every trace records).",
        "",
        "## Tiers",
        "",
        "Rules fire in tier order (lower priority first), then by file name, then by position in the file. "
        "A choice (framework, strategy, ZeRO stages) goes to the first rule that makes it; limits intersect.",
        "",
        "| tier | priority | meaning |",
        "|---|---:|---|",
    ]
    for name, pri in sorted(book.tiers.items(), key=lambda kv: (kv[1], kv[0])):
        out.append(f"| {_code(name, True)} | {pri} | {_prose(tier_notes.get(name, ''))} |")
    out += ["", "## Files", "", "| file | scope | rules | about |", "|---|---|---:|---|"]
    for name in files:
        n = sum(Path(r.path).name == name for r in rules)
        out.append(f"| [{_code(name, True)}](#{Path(name).stem}) | {book.scopes[Path(name).stem]} | {n} | "
                   f"{_prose(_file_comment(rules_dir / name))} |")
    out += ["", "## Index", "", "| rule | tier | title |", "|---|---|---|"]
    for r in sorted(rules, key=lambda r: r.id):
        out.append(f"| [{_code(r.id, True)}](#{_anchor(r.id)}) | {r.spec.tier} | {_prose(r.spec.title)} |")
    out.append("")
    for scope, (heading, text) in _SCOPE_TEXT.items():
        scoped = [f for f in files if book.scopes[Path(f).stem] == scope]
        if not scoped:
            continue
        out += [f"## {heading}", "", text[0].upper() + text[1:], ""]
        for name in scoped:
            out += [f'<a id="{Path(name).stem}"></a>', f"### {_code(name)}", ""]
            comment = _file_comment(rules_dir / name)
            if comment:
                out += [_prose(comment), ""]
            in_file = [r for r in rules if Path(r.path).name == name]       # already in firing order
            for tier in dict.fromkeys(r.spec.tier for r in in_file):
                out += [f"Tier {_code(tier)} (priority {book.tiers[tier]}):", ""]
                for r in (r for r in in_file if r.spec.tier == tier):
                    out += _rule_section(r)
    return "\n".join(out).rstrip("\n") + "\n"


_GROUP_TEXT = {
    "cluster": "The GPUs and their links, from `Cluster` (presets fill what is omitted).",
    "model": "The model's shape, from `Model` (a preset, a Hugging Face config, or explicit fields).",
    "training": "One training step, from `Training`, with omitted fields resolved against the model.",
    "sizing": "Memory arithmetic done in Python so that rules only compare (18 bytes per parameter of "
              "model states: bf16 weights, fp32 gradients and master weights, Adam moments).",
    "layout": "The layout under audit, with dp and num_microbatches filled in.",
    "check": "Numbers derived from the layout under audit: products, remainders and the cost model's verdict.",
}


def _facts_used(rule: Rule) -> list[str]:
    """Facts a rule names anywhere: its condition, message, finding fixes and limit bounds."""
    texts = [rule.spec.message] + [a.fix for a in rule.spec.then if isinstance(a, ReportFinding)]
    named = list(rule.fields) + [m.group(1) for t in texts for m in PLACEHOLDER_RE.finditer(t)]
    named += [b for a in rule.spec.then if isinstance(a, Limit) for b in (a.max, a.min) if isinstance(b, str)]
    return list(dict.fromkeys(named))


def facts_markdown(book: RuleBook) -> str:
    """docs/facts.md: every fact of the catalogue, by group, with the rules that use it."""
    readers: dict[str, list[str]] = {}
    for r in book.rules.values():
        for f in _facts_used(r):
            readers.setdefault(f, []).append(r.id)
    groups = list(dict.fromkeys(name.split(".")[0] for name in CATALOGUE))
    out = [
        _HEADER.format(cmd=REGENERATE, source="advisor/facts.py (CATALOGUE)"),
        "# Fact catalogue",
        "",
        f"Generated by `{REGENERATE}` from `advisor.facts.CATALOGUE`; do not edit. These are the only names "
        "a rule's `when`, `message`, `fix` and `limit` may use; a rule that names anything else fails to load. "
        "Values are plain numbers, booleans and strings in canonical units: units stop at the input boundary. "
        "`advisor facts` prints the same list. *Used by* names the rules whose condition, message, fix or "
        "limit mentions the fact.",
        "",
        f"{len(CATALOGUE)} facts in {len(groups)} groups. Groups {', '.join(_code(g) for g in sorted(LAYOUT_GROUPS))} "
        "exist only for audit rules (`scope = \"layout\"`).",
        "",
        "Comparisons are typed: numbers (`int`, `float`) compare with `== != < <= > >=` and `in` against numbers; "
        "booleans only with `==`/`!=` against `true`/`false`; strings with `==`, `!=` or `in` against quoted strings.",
        "",
    ]
    for group in groups:
        names = [n for n in CATALOGUE if n.split(".")[0] == group]
        scope = "layout" if group in LAYOUT_GROUPS else "situation"
        out += [f"## `{group}`", "", f"{_GROUP_TEXT.get(group, '')} Scope: {scope}.".strip(), "",
                "| fact | type | meaning | used by |", "|---|---|---|---|"]
        for name in names:
            spec = CATALOGUE[name]
            users = readers.get(name, [])
            used = (", ".join(f"[{u}](rules.md#{_anchor(u)})" for u in users[:4])
                    + (f" and {len(users) - 4} more" if len(users) > 4 else "")) if users else "—"
            out.append(f"| {_code(name, True)} | {spec.type.__name__} | {_prose(spec.doc)} | {used} |")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


# ---------------------------------------------------------------------------------------------
# Files


def repo_root() -> Path:
    """The repository this module sits in (docgen is a development tool: it writes into the checkout)."""
    root = Path(__file__).resolve().parent.parent
    if not (root / "pyproject.toml").is_file() or not (root / "rules").is_dir():
        raise SystemExit(f"advisor.docgen: {root} is not an advisor checkout (no pyproject.toml and rules/); "
                         "run it from a clone with --root")
    return root


def _parameter(name: str, field) -> str:
    if field.description:
        return f"`{name}`: {field.description}"
    values = typing.get_args(field.annotation) if typing.get_origin(field.annotation) is typing.Literal else ()
    return f"`{name}`: " + ", ".join(map(str, values)) if values else f"`{name}`"


def actions_table() -> str:
    """The `then` vocabulary as a Markdown table: every action, its parameters, what it does."""
    rows = ["| action | parameters | effect |", "|---|---|---|"]
    for cls in typing.get_args(typing.get_args(Action)[0]):
        (name,) = typing.get_args(cls.model_fields["action"].annotation)
        params = "; ".join(_parameter(k, f) for k, f in cls.model_fields.items() if k != "action") or "—"
        rows.append(f"| `{name}` | {params} | {' '.join(cls.__doc__.split())} |")
    return "\n".join(rows)


def rules_readme(root: Path) -> str:
    """rules/README.md with its actions table regenerated between the markers."""
    text = (root / RULES_README).read_text(encoding="utf-8")
    head, _, rest = text.partition(ACTIONS_BEGIN)
    _, _, tail = rest.partition(ACTIONS_END)
    return f"{head}{ACTIONS_BEGIN}\n{actions_table()}\n{ACTIONS_END}{tail}"


def generate(root: Path) -> dict[str, str]:
    """Relative path -> content of every generated file, from the rules in `root/rules`."""
    rules_dir = root / "rules"
    book = load_rulebook(root=rules_dir)
    files = {f"{SCHEMA_DIR}/{name}": _dump_json(schema) for name, schema in schemas(book).items()}
    files[RULES_DOC] = rules_markdown(book, rules_dir)
    files[FACTS_DOC] = facts_markdown(book)
    files[RULES_README] = rules_readme(root)
    return dict(sorted(files.items()))


def stale(root: Path, files: dict[str, str] | None = None) -> dict[str, str]:
    """Relative path -> "missing" | "stale" | "extra" for generated files that differ on disk."""
    files = generate(root) if files is None else files
    out = {}
    for rel, text in files.items():
        path = root / rel
        if not path.is_file():
            out[rel] = "missing"
        elif path.read_text(encoding="utf-8") != text:
            out[rel] = "stale"
    for path in sorted((root / SCHEMA_DIR).glob("*.json")) if (root / SCHEMA_DIR).is_dir() else ():
        rel = f"{SCHEMA_DIR}/{path.name}"
        if rel not in files:
            out[rel] = "extra"
    return dict(sorted(out.items()))


def _diff_summary(root: Path, rel: str, text: str, limit: int = 12) -> list[str]:
    old = (root / rel).read_text(encoding="utf-8").splitlines()
    diff = [line for line in difflib.unified_diff(old, text.splitlines(), f"{rel} (committed)",
                                                  f"{rel} (generated)", n=0, lineterm="")]
    changed = sum(1 for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---")))
    shown = [f"    {line[:160]}" for line in diff[2:] if not line.startswith("@@")][:limit]
    more = changed - len([s for s in shown if s.strip()[:1] in "+-"])
    return [f"  stale: {rel} ({changed} line(s) differ)", *shown] + ([f"    ... {more} more"] if more > 0 else [])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m advisor.docgen",
                                description="Regenerate schemas/*.json, docs/rules.md and docs/facts.md.")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when a generated file is stale")
    p.add_argument("--root", type=Path, help="repository root (default: the checkout this module is in)")
    args = p.parse_args(argv)
    root = (args.root or repo_root()).resolve()
    files = generate(root)
    problems = stale(root, files)
    if args.check:
        if not problems:
            print(f"advisor.docgen: {len(files)} generated files are up to date")
            return 0
        print(f"advisor.docgen: {len(problems)} generated file(s) out of date; run `{REGENERATE}`:")
        for rel, what in problems.items():
            if what == "stale":
                print("\n".join(_diff_summary(root, rel, files[rel])))
            elif what == "extra":
                print(f"  extra: {rel} (not generated any more; delete it)")
            else:
                print(f"  missing: {rel}")
        return 1
    for rel, text in files.items():
        if problems.get(rel) in ("stale", "missing"):
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    for rel, what in problems.items():
        if what == "extra":
            (root / rel).unlink()
    changed = ", ".join(f"{rel} ({what})" for rel, what in problems.items()) or "nothing changed"
    print(f"advisor.docgen: {len(files)} files checked; {changed}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
