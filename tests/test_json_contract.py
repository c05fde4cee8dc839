"""JSON a platform can rely on (issue 36): every layout object carries its id, an audit its verdict,
and both read back to equal results; the schemas in schemas/ say so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import advisor
from advisor.inputs.layout import Layout

ROOT = Path(__file__).resolve().parent.parent
CLUSTER, MODEL = {"gpu": "H100", "gpus": 64}, "llama-3-70b"


def _layouts(node):
    """Every object in a JSON document that is a Layout (it has tp, pp and zero_stage)."""
    if isinstance(node, dict):
        if {"tp", "pp", "zero_stage"} <= set(node):
            yield node
        for value in node.values():
            yield from _layouts(value)
    elif isinstance(node, list):
        for value in node:
            yield from _layouts(value)


def test_every_layout_in_a_recommendation_has_its_id():
    rec = advisor.recommend(CLUSTER, MODEL)
    dump = json.loads(rec.model_dump_json())
    layouts = list(_layouts(dump))
    assert len(layouts) == 1 + len(rec.alternatives)
    for obj in layouts:
        assert Layout.parse(obj["id"]) == Layout(**obj)                # the id names exactly that layout
    assert dump["layout"]["id"] == rec.layout.id == dump["trace"]["result"]["layout"]
    assert type(rec).model_validate_json(rec.model_dump_json()) == rec


def test_an_audit_says_ok_in_json():
    good = advisor.audit(CLUSTER, MODEL, {"tp": 8, "pp": 2, "sp": True, "zero_stage": 1})
    bad = advisor.audit(CLUSTER, MODEL, {"tp": 16, "pp": 3})
    for report in (good, bad):
        dump = json.loads(report.model_dump_json())
        assert dump["ok"] is report.ok and dump["ok"] == (not any(f["severity"] == "error" for f in dump["findings"]))
        assert dump["layout"]["id"] == report.layout.id
        assert type(report).model_validate_json(report.model_dump_json()) == report
    assert good.ok and not bad.ok


def test_a_layout_id_that_contradicts_its_fields_is_refused():
    layout = Layout(tp=8, pp=2, dp=4)
    assert Layout(**layout.model_dump()) == layout                     # the id read back is checked, then dropped
    with pytest.raises(ValueError, match="Layout.id") as info:
        Layout(**{**layout.model_dump(), "pp": 4})
    assert "tp8-dp4-pp4-zero0" in str(info.value)


def test_the_output_schemas_name_the_fields():
    rec = json.loads((ROOT / "schemas" / "recommendation.schema.json").read_text())
    layout = rec["$defs"]["Layout"]
    assert layout["properties"]["id"]["type"] == "string" and "id" in layout["required"]
    audit = json.loads((ROOT / "schemas" / "audit.schema.json").read_text())
    assert audit["properties"]["ok"]["type"] == "boolean" and "ok" in audit["required"]
