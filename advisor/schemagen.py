"""The JSON Schemas of `schemas/`, derived from the pydantic models and the rule book's grammar;
`advisor.docgen` writes them with the generated docs (python -m advisor.docgen)."""

from __future__ import annotations

from typing import Any, Callable

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema

from .capacity_plan import CapacityPlan, Prices
from .costmodel import Estimate
from .facts import CATALOGUE
from .inputs import specs, units
from .inputs.layout import Layout
from .inputs.profile import Profile
from .inputs.specs import GPU, Cluster, Model, Training
from .results.audit import Audit
from .results.comparison import Comparison
from .results.recommendation import Recommendation
from .rulebook.load import ID_RE, LEAF_RE, MAX_RULES_PER_FILE, RuleBook, RuleSpec

__all__ = ["schemas", "DIALECT"]

DIALECT = "https://json-schema.org/draft/2020-12/schema"

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
    "then": "Effects from the closed action set (advisor.rulebook.actions).",
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
