"""schemas/*.json: generated from the models, committed, and true of real documents.

jsonschema is not a dependency, so `_validate` below checks the subset of JSON Schema 2020-12 that
pydantic and advisor.docgen emit ($ref into $defs, type, properties, required,
additionalProperties, items, enum, const, anyOf/oneOf/allOf, numeric and length bounds, pattern,
propertyNames). Its own negative tests keep it from passing everything.
"""

from __future__ import annotations

import json
import re
import tempfile
import tomllib
from pathlib import Path

import pytest

import advisor
from advisor import docgen
from advisor.rulebook.load import load_rulebook

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "schemas"


# ---------------------------------------------------------------------------------------------
# A small structural validator


def _is_type(value, name: str) -> bool:
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if name == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    raise AssertionError(f"schema uses a type this validator does not know: {name}")


_KNOWN = {"$schema", "$defs", "$ref", "title", "description", "default", "examples", "type", "properties",
          "required", "additionalProperties", "items", "prefixItems", "enum", "const", "anyOf", "oneOf", "allOf",
          "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems",
          "maxItems", "minProperties", "maxProperties", "pattern", "propertyNames", "discriminator",
          "uniqueItems", "readOnly", "format"}


def _errors(value, schema: dict, root: dict, where: str = "$") -> list[str]:
    unknown = set(schema) - _KNOWN
    assert not unknown, f"{where}: schema keywords this validator does not check: {sorted(unknown)}"
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        errs = _errors(value, root["$defs"][name], root, where)
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        return errs + (_errors(value, rest, root, where) if rest else [])
    out: list[str] = []
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is_type(value, t) for t in types):
            return [f"{where}: {value!r:.60} is not {types}"]
    if "enum" in schema and value not in schema["enum"]:
        shown = schema["enum"] if len(schema["enum"]) <= 8 else [*schema["enum"][:8], "..."]
        out.append(f"{where}: {value!r} not in {shown}")
    if "const" in schema and value != schema["const"]:
        out.append(f"{where}: {value!r} != {schema['const']!r}")
    if "anyOf" in schema and not any(not _errors(value, s, root, where) for s in schema["anyOf"]):
        out.append(f"{where}: matches none of anyOf: " + "; ".join(
            e for s in schema["anyOf"] for e in _errors(value, s, root, where)[:1]))
    if "oneOf" in schema:
        n = sum(not _errors(value, s, root, where) for s in schema["oneOf"])
        if n != 1:
            out.append(f"{where}: matches {n} of oneOf (want exactly 1)")
    for sub in schema.get("allOf", []):
        out += _errors(value, sub, root, where)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        for key, ok in (("minimum", lambda b: value >= b), ("maximum", lambda b: value <= b),
                        ("exclusiveMinimum", lambda b: value > b), ("exclusiveMaximum", lambda b: value < b)):
            if key in schema and not ok(schema[key]):
                out.append(f"{where}: {value} violates {key} {schema[key]}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", len(value)):
            out.append(f"{where}: length {len(value)} out of bounds")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            out.append(f"{where}: {value!r} does not match {schema['pattern']!r}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", len(value)):
            out.append(f"{where}: {len(value)} items out of bounds")
        prefix = schema.get("prefixItems", [])
        for i, item in enumerate(value):
            sub = prefix[i] if i < len(prefix) else schema.get("items")
            if isinstance(sub, dict):
                out += _errors(item, sub, root, f"{where}[{i}]")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                out.append(f"{where}: missing required {key!r}")
        if len(value) < schema.get("minProperties", 0) or len(value) > schema.get("maxProperties", len(value)):
            out.append(f"{where}: {len(value)} properties out of bounds")
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if "propertyNames" in schema:
                out += _errors(key, schema["propertyNames"], root, f"{where}.<key {key}>")
            if key in props:
                out += _errors(item, props[key], root, f"{where}.{key}")
            elif extra is False:
                out.append(f"{where}: unexpected property {key!r}")
            elif isinstance(extra, dict):
                out += _errors(item, extra, root, f"{where}.{key}")
    return out


def _load(name: str) -> dict:
    return json.loads((SCHEMAS / name).read_text(encoding="utf-8"))


def _check(document, name: str) -> None:
    schema = _load(name)
    errs = _errors(document, schema, schema)
    assert not errs, f"{name}:\n" + "\n".join(errs[:20])


# ---------------------------------------------------------------------------------------------
# Drift


def test_committed_schemas_equal_the_generated_ones():
    generated = {rel: text for rel, text in docgen.generate(ROOT).items() if rel.startswith("schemas/")}
    committed = {f"schemas/{p.name}": p.read_text(encoding="utf-8") for p in sorted(SCHEMAS.glob("*.json"))}
    assert sorted(committed) == sorted(generated), "run `python -m advisor.docgen` (schemas added or removed)"
    stale = [rel for rel in generated if committed[rel] != generated[rel]]
    assert not stale, f"stale: {stale}; run `python -m advisor.docgen` and commit the result"


def test_schemas_are_deterministic_json_with_sorted_keys():
    for path in sorted(SCHEMAS.glob("*.json")):
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
        assert text == json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n", path.name
        assert data["$schema"] == docgen.DIALECT
        assert str(ROOT) not in text and tempfile.gettempdir() not in text, f"{path.name} holds an absolute path"


# ---------------------------------------------------------------------------------------------
# The validator is not vacuous


def test_the_shipped_profile_validates():
    _check(json.loads((ROOT / "advisor" / "profiles" / "h200-2026-12.json").read_text()), "profile.schema.json")


def test_validator_rejects_what_it_should():
    assert _errors({"gpus": 64}, _load("cluster.schema.json"), _load("cluster.schema.json"))   # gpu missing
    s = _load("cluster.schema.json")
    assert _errors({"gpu": "H100", "gpus": 0}, s, s)                     # below minimum
    assert _errors({"gpu": "H100", "gpus": 64, "nodes": 8}, s, s)        # extra="forbid"
    assert _errors({"gpu": {"memory": "80 GiB"}, "gpus": 8}, s, s)      # custom GPU lacks peak_flops
    lay = _load("layout.schema.json")
    assert _errors({"framework": "jax"}, lay, lay)
    assert _errors({"tp": "8"}, lay, lay)


# ---------------------------------------------------------------------------------------------
# Inputs


@pytest.mark.parametrize("doc", [
    {"gpu": "H100-SXM-80GB", "gpus": 64},
    {"gpu": "h100", "gpus": 16, "gpus_per_node": 8, "inter_node_bandwidth": "400 Gbit/s"},
    {"gpu": {"name": "my-gpu", "memory": "96 GiB", "peak_flops": "700 TFLOP/s", "nvlink_bandwidth": "900 GB/s"},
     "gpus": 8, "host_memory_per_node": "1 TiB"},
])
def test_cluster_inputs_the_api_accepts_validate(doc):
    advisor.Cluster(**doc)
    _check(doc, "cluster.schema.json")


def test_model_training_and_layout_inputs_validate():
    model = advisor.Model.preset("mixtral-8x7b").model_dump(mode="json")
    _check(model, "model.schema.json")
    _check({"layers": 32, "hidden": 4096, "heads": 32, "ffn_hidden": 11008, "vocab": 32000, "params": "6.7B"},
           "model.schema.json")
    _check({"seq_len": "8k", "global_batch_size": 512, "precision": "bf16"}, "training.schema.json")
    _check({"framework": "megatron", "tp": 8, "pp": 4, "vpp": 2, "sp": True, "zero_stage": 1}, "layout.schema.json")
    _check(advisor.GPU(memory="80 GiB", peak_flops="989 TFLOP/s", nvlink_bandwidth="900 GB/s").model_dump(mode="json"),
           "gpu.schema.json")


# ---------------------------------------------------------------------------------------------
# Outputs: real dumps validate, and round-trip through pydantic


@pytest.fixture(scope="module")
def recommendation():
    return advisor.recommend(advisor.Cluster(gpu="H100-SXM-80GB", gpus=64), "llama-3-70b",
                             advisor.Training(seq_len="8k", global_batch_size=512))


def test_recommendation_dump_validates_and_round_trips(recommendation):
    text = recommendation.model_dump_json()
    _check(json.loads(text), "recommendation.schema.json")
    again = advisor.Recommendation.model_validate_json(text)
    assert again.model_dump_json() == text


def test_infeasible_recommendation_validates():
    rec = advisor.recommend(advisor.Cluster(gpu="V100-16GB", gpus=1), "llama-3-70b")
    assert rec.status == "infeasible"
    _check(json.loads(rec.model_dump_json()), "recommendation.schema.json")


def test_audit_dump_validates_and_round_trips():
    report = advisor.audit(advisor.Cluster(gpu="H100", gpus=64), "llama-3-70b", {"tp": 16, "pp": 3})
    assert report.findings
    text = report.model_dump_json()
    _check(json.loads(text), "audit.schema.json")
    assert advisor.Audit.model_validate_json(text).model_dump_json() == text


def test_comparison_dump_validates_and_round_trips():
    result = advisor.compare(advisor.Cluster(gpu="H100", gpus=64), "llama-3-70b",
                             ["tp2-dp4-pp8-zero1-sp-rc:full", "tp16-dp4-pp1-zero1"])
    text = result.model_dump_json()
    _check(json.loads(text), "comparison.schema.json")
    assert advisor.Comparison.model_validate_json(text).model_dump_json() == text


def test_estimate_dump_validates(recommendation):
    _check(json.loads(recommendation.estimates.model_dump_json()), "estimate.schema.json")


@pytest.mark.parametrize("deadline", [200, 1])        # a pick; a shortfall
def test_capacity_plan_dump_validates(deadline):
    plan = advisor.capacity("llama-3-8b", tokens="1T", gpu=["H100", "V100-16GB"], gpus=[1, 8, 12],
                            deadline=deadline, prices={"gpu_hour": {"H100": 2.5, "V100-16GB": 0.5}}, workers=1)
    met = deadline == 200
    assert plan.rejected and (plan.pick is not None) == met and (plan.shortfall is None) == met
    doc = json.loads(plan.model_dump_json())
    _check(doc, "capacity.schema.json")
    assert advisor.CapacityPlan.model_validate_json(plan.model_dump_json()).model_dump_json() == plan.model_dump_json()


def test_prices_schema_takes_a_prices_file_and_refuses_a_bad_one():
    good = tomllib.loads('currency = "USD"\nsource = "contract"\n[gpu_hour]\n"H100-SXM-80GB" = 2.5\nB200 = 4.2\n')
    _check(good, "prices.schema.json")
    advisor.Prices(**good)
    schema = _load("prices.schema.json")
    assert _errors({"gpu_hour": {"H100": "cheap"}}, schema, schema)
    assert _errors({"gpu_hour": {"H100": 2.5}, "discount": 0.1}, schema, schema)


# ---------------------------------------------------------------------------------------------
# Rule files


def test_every_builtin_rule_file_validates_against_the_rule_file_schema():
    files = sorted(p for p in (ROOT / "rules").glob("*.toml") if p.name != "tiers.toml")
    assert files
    for path in files:
        _check(tomllib.loads(path.read_text(encoding="utf-8")), "rule-file.schema.json")
    _check(tomllib.loads((ROOT / "rules" / "tiers.toml").read_text(encoding="utf-8")), "tiers.schema.json")


def test_rule_file_schema_rejects_what_the_loader_rejects():
    schema = _load("rule-file.schema.json")
    good = tomllib.loads((ROOT / "rules" / "constraints.toml").read_text(encoding="utf-8"))
    rule = good["rule"][0]
    for bad in ({**rule, "tier": "urgent"}, {**rule, "id": "NoArea"}, {**rule, "when": {"either": ["cluster.gpus > 1"]}},
                {**rule, "then": [{"action": "run_python", "code": "1"}]}, {**rule, "pri": 3},
                {**rule, "examples": {"fire": [{"cluster.gpu": 8}], "no_fire": [{"cluster.gpus": 1}]}}):
        assert _errors({"rule": [bad]}, schema, schema), bad
    assert _errors({"rule": [rule], "scope": "global"}, schema, schema)


def test_schema_tiers_match_the_tiers_file():
    schema = _load("rule-file.schema.json")
    book = load_rulebook(root=ROOT / "rules")
    assert set(schema["$defs"]["RuleSpec"]["properties"]["tier"]["enum"]) == set(book.tiers)
