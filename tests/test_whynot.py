"""The "why did this rule not fire" view (advisor.whynot): per-leaf field/op/want/have/ok.

Its leaves must be consistent with what the engines decided: combining the leaves' `ok` by the
condition's all/any structure gives True exactly for the rules that fired.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import advisor
from advisor.errors import InputError
from advisor.facts import CATALOGUE, LayoutCase, build_facts, build_layout_facts
from advisor.inputs.coerce import resolve_layout
from advisor.inputs.specs import resolve_training
from advisor.rulebook.engines.python import PythonEngine, evaluate
from advisor.rulebook.load import builtin_rulebook
from advisor.rulebook.session import evaluate_rules
from advisor.rulebook.whynot import not_fired_report, why_not

BOOK = builtin_rulebook()
KEYS = {"field", "op", "want", "have", "ok", "path"}


def situation(gpu="H100-SXM-80GB", gpus=64, model="llama-3-70b", **training):
    c, m = advisor.Cluster(gpu=gpu, gpus=gpus), advisor.Model.preset(model)
    t, _ = resolve_training(m, advisor.Training(**training))
    return c, m, t


def combine(node: dict, leaves: dict[str, bool], path: str = "") -> bool:
    """Re-evaluate a condition from the leaves' ok values (keyed by path)."""
    for key, agg in (("all", all), ("any", any)):
        if key in node:
            return agg(combine(child, leaves, f"{path}.{key}[{i}]" if path else f"{key}[{i}]")
                       for i, child in enumerate(node[key]))
    return leaves[path]


def check_consistent(facts: dict, fired: list[str], scope: str) -> dict:
    report = not_fired_report(BOOK, facts, fired, scope)
    in_scope = [rid for rid, r in BOOK.rules.items() if r.scope == scope]
    assert list(report) == [rid for rid in in_scope if rid not in fired]
    for rid in in_scope:
        leaves = report[rid] if rid in report else why_not(BOOK, facts, rid)
        assert leaves and all(set(leaf) == KEYS for leaf in leaves)
        cond = BOOK.rules[rid].compiled.condition
        holds = combine(cond, {leaf["path"]: leaf["ok"] for leaf in leaves})
        assert holds == (rid in fired) == evaluate(cond, facts), rid
        if rid in report:
            assert not all(leaf["ok"] for leaf in leaves), rid     # at least one leaf failed
        for leaf in leaves:
            group, name = leaf["field"].split(".")
            assert leaf["have"] == facts[group][name]
            assert leaf["field"] in CATALOGUE
    json.dumps(report)                                               # renders as JSON for the trace
    return report


@pytest.mark.parametrize("gpus, model", [(64, "llama-3-70b"), (8, "llama-3-8b"), (1, "llama-2-7b"),
                                         (16, "mixtral-8x7b"), (1024, "llama-3.1-405b")])
def test_situation_report_is_consistent_with_the_engine(gpus, model):
    c, m, t = situation(gpus=gpus, model=model)
    facts = build_facts(c, m, t)
    fired, _ = evaluate_rules(BOOK, facts)
    check_consistent(facts, fired, "situation")


@pytest.mark.parametrize("layout", [{"tp": 8, "pp": 4}, {"tp": 3}, {"tp": 2, "cp": 2, "pp": 3, "vpp": 2},
                                    {"framework": "deepspeed", "zero_stage": 3, "tp": 2}])
def test_layout_report_is_consistent_with_the_engine(layout):
    c, m, t = situation()
    lay = resolve_layout(advisor.Layout(**layout), c)          # dp = gpus // (tp*pp*cp), as audit() does
    facts = build_layout_facts(LayoutCase(c, m, t, lay))
    fired, _ = evaluate_rules(BOOK, facts, scope="layout")
    check_consistent(facts, fired, "layout")


def test_leaf_shows_have_and_want():
    c, m, t = situation(gpus=64, model="llama-3-70b")
    facts = build_facts(c, m, t)
    fired, _ = evaluate_rules(BOOK, facts)
    report = not_fired_report(BOOK, facts, fired)
    # Some rule tests cluster.gpus against a bound 64 does not meet: it shows both numbers.
    gpu_leaves = [leaf for leaves in report.values() for leaf in leaves if leaf["field"] == "cluster.gpus"]
    assert any(not leaf["ok"] and leaf["have"] == 64 and isinstance(leaf["want"], int) for leaf in gpu_leaves)
    for leaf in gpu_leaves:
        assert re.fullmatch(r"(all|any)\[\d+\](\.(all|any)\[\d+\])*|", leaf["path"])


def test_missing_field_and_unknown_rule():
    rid = next(iter(BOOK.rules))
    leaves = why_not(BOOK, {}, rid)
    assert leaves and all(leaf["have"] is None and leaf["ok"] is False for leaf in leaves)
    with pytest.raises(InputError, match="rule_id"):
        why_not(BOOK, {}, "no.such-rule")
    with pytest.raises(InputError, match="scope"):
        not_fired_report(BOOK, {}, [], "everything")


def test_fired_rules_are_left_out_and_order_is_the_books():
    c, m, t = situation(gpus=8, model="llama-3-8b")
    facts = build_facts(c, m, t)
    everything = not_fired_report(BOOK, facts, [])
    assert list(everything) == [rid for rid, r in BOOK.rules.items() if r.scope == "situation"]
    some = list(everything)[:2]
    assert list(not_fired_report(BOOK, facts, some)) == list(everything)[2:]


# Perturbed facts: the view must agree with the Python engine for any values of the right types.
SITUATION_FACTS = build_facts(*situation())


@st.composite
def perturbed_facts(draw):
    facts = {g: dict(v) for g, v in SITUATION_FACTS.items()}
    for name in draw(st.lists(st.sampled_from(sorted(f for f, s in CATALOGUE.items() if s.scope == "situation")),
                              max_size=6, unique=True)):
        group, field = name.split(".")
        kind = CATALOGUE[name].type
        if kind is bool:
            value = draw(st.booleans())
        elif kind is int:
            value = draw(st.sampled_from([0, 1, 2, 7, 8, 16, 32, 64, 72, 128, 512, 4096, 10**9, 10**11]))
        elif kind is float:
            value = draw(st.sampled_from([0.0, 0.25, 0.5, 0.9, 1.0, 1.5, 7.0, 40.0, 80.0, 100.5, 1e4]))
        else:
            value = draw(st.sampled_from(["custom", "H100-SXM-80GB", "bf16", "fp8", "fp16", "llama-3-70b"]))
        facts[group][field] = value
    return facts


ENGINE = PythonEngine(BOOK.rulesets)


@settings(max_examples=150, deadline=None)
@given(facts=perturbed_facts())
def test_why_not_agrees_with_the_engine_on_perturbed_facts(facts):
    fired = [rid for rs in BOOK.rulesets_in("situation") for rid in ENGINE.evaluate(rs, facts)]
    check_consistent(facts, fired, "situation")
