"""Tests of advisor.evaluator: normalisation, validation, the Python evaluator and explain()."""

from __future__ import annotations

import math

import pytest
from budget import examples  # noqa: E402  (tests/ is on sys.path via rootdir conftest)
from engine_fixtures import FACT, L  # noqa: E402
from threads import run_in_threads  # noqa: E402

from advisor.errors import EngineError
from advisor.rulebook.compiled import (
    MAX_GROUPS_PER_RULE,
    MAX_PRI,
    MAX_RULES_PER_RULESET,
    CompiledRule,
    LeafResult,
    check_ruleset,
    count_groups,
    normalize_fact,
    normalize_value,
)
from advisor.rulebook.engines.python import PythonEngine, evaluate, explain

# ---------------------------------------------------------------- normalize_value / normalize_fact


@pytest.mark.parametrize(
    "value, want",
    [
        (80.0, 80),  # integral float -> int (durable and Python then compare ints)
        (-0.0, 0),
        (1e16, 10**16),  # repr "1e+16" has no dot: error 204 in durable (research §4.3)
        (2.5, 2.5),
        (1e-09, 1e-09),  # kept exact; the durable adapter writes it as 1.0e-09
        (2**63 - 1, 2**63 - 1),
        (-(2**63) + 1, -(2**63) + 1),
        ("16", "16"),
        (None, None),
    ],
)
def test_normalize_value(value, want):
    got = normalize_value(value)
    assert got == want and type(got) is type(want)


def test_normalize_value_keeps_bools():
    assert normalize_value(True) is True and normalize_value(False) is False


@pytest.mark.parametrize("value", [2**63, -(2**63), 2**64 + 1, 10**30, 2.0**63, 1e300])
def test_normalize_value_rejects_ints_outside_int64(value):
    # durable silently compares ints >= 2**64 as false (research §4.3)
    with pytest.raises(EngineError, match="2\\*\\*63"):
        normalize_value(value, "model.params")


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_normalize_value_rejects_non_finite(value):
    with pytest.raises(EngineError, match="sizing.x"):
        normalize_value(value, "sizing.x")


@pytest.mark.parametrize("value", [[1], {"a": 1}, object(), b"x", "lone \ud800 surrogate"])
def test_normalize_value_rejects_other_types(value):
    with pytest.raises(EngineError):
        normalize_value(value)


def test_normalize_fact_copies_and_normalises():
    fact = {"g": {"a": 80.0, "b": 1e16, "c": [1.0, 0.5], "d": True, "e": "x"}}
    out = normalize_fact(fact)
    assert out == {"g": {"a": 80, "b": 10**16, "c": [1, 0.5], "d": True, "e": "x"}}
    assert type(out["g"]["a"]) is int and out["g"] is not fact["g"]
    assert fact["g"]["a"] == 80.0 and type(fact["g"]["a"]) is float  # input untouched


def test_normalize_fact_names_the_bad_field():
    with pytest.raises(EngineError, match="model.params"):
        normalize_fact({"model": {"params": 2**64}})
    with pytest.raises(EngineError, match="sizing.r"):
        normalize_fact({"sizing": {"r": math.nan}})


@pytest.mark.parametrize(
    "fact",
    [
        {"kind": {"a": 1}},  # reserved for the durable adapter
        {"sid": {"a": 1}},
        {"id": {"a": 1}},
        {"a.b": {"c": 1}},  # durable resolves dotted paths
        {"g": {"a.b": 1}},
        {"g": {"$s": 1}},
        {"g": 1},  # depth must be exactly 2
        {"g": {"a": {"b": 1}}},
        [],
    ],
)
def test_normalize_fact_rejects_bad_shapes(fact):
    with pytest.raises(EngineError):
        normalize_fact(fact)


def test_normalize_fact_property_limit():
    normalize_fact({"g": {f"f{i}": i for i in range(199)}})  # 1 group + 199 fields = 200
    with pytest.raises(EngineError, match="302"):
        normalize_fact({"g": {f"f{i}": i for i in range(200)}})


# ---------------------------------------------------------------- evaluate / explain


@pytest.mark.parametrize(
    "leaf, want",
    [
        (L("cluster.gpus", "==", 64), True),
        (L("cluster.gpus", "==", 64.5), False),
        (L("cluster.gpus", "!=", 64), False),
        (L("cluster.gpus", "<", 64), False),
        (L("cluster.gpus", "<=", 64), True),
        (L("cluster.gpus", ">", 63.5), True),
        (L("cluster.gpus", ">=", 65), False),
        (L("cluster.gpus", "in", [8, 64]), True),
        (L("cluster.gpus", "in", [8, 16]), False),
        (L("cluster.gpu_name", "==", "H100-SXM-80GB"), True),
        (L("cluster.gpu_name", "!=", "H100-SXM-80GB"), False),
        (L("cluster.gpu_name", "in", ["A100", "H100-SXM-80GB"]), True),
        (L("model.is_moe", "==", False), True),
        (L("model.is_moe", "!=", True), True),
        (L("sizing.states_gpu_ratio", ">", 14.77), True),
        (L("model.params", ">", 7 * 10**10), True),
    ],
)
def test_evaluate_leaves(leaf, want):
    assert evaluate(leaf, FACT) is want


def test_evaluate_is_strictly_typed():
    # Python says True == 1; durable even says "true" == True. Ours does neither (check_fact
    # keeps such facts from reaching either engine).
    assert evaluate(L("g.b", "==", 1), {"g": {"b": True}}) is False
    assert evaluate(L("g.s", "==", 16), {"g": {"s": "16"}}) is False
    assert evaluate(L("g.s", "!=", 16), {"g": {"s": "16"}}) is True


def test_evaluate_groups():
    t, f = L("cluster.gpus", "==", 64), L("cluster.gpus", "==", 1)
    assert evaluate({"all": [t, t]}, FACT) and not evaluate({"all": [t, f]}, FACT)
    assert evaluate({"any": [f, t]}, FACT) and not evaluate({"any": [f, f]}, FACT)
    assert evaluate({"all": [{"any": [f, {"all": [t]}]}, t]}, FACT)


def test_evaluate_missing_field_raises():
    with pytest.raises(EngineError, match="cluster.nodes"):
        evaluate(L("cluster.nodes", "==", 1), FACT)


def test_explain_reports_every_leaf():
    cond = {"all": [L("cluster.gpus", "<=", 32), {"any": [L("model.is_moe", "==", True), L("cluster.gpu_name", "in", ["A100"])]}]}
    got = explain(cond, FACT)
    assert got == [
        LeafResult("cluster.gpus", "<=", 32, 64, False, "all[0]"),
        LeafResult("model.is_moe", "==", True, False, False, "all[1].any[0]"),
        LeafResult("cluster.gpu_name", "in", ["A100"], "H100-SXM-80GB", False, "all[1].any[1]"),
    ]


def test_explain_missing_field_does_not_raise():
    (res,) = explain(L("cluster.nodes", ">", 1), FACT)
    assert res.have is None and res.ok is False


# ---------------------------------------------------------------- check_ruleset


def R(id, pri=0, cond=None):
    return CompiledRule(id, pri, cond if cond is not None else L("cluster.gpus", ">", 0))


def test_check_ruleset_normalises_constants_privately():
    cond = {"all": [L("cluster.gpus", ">=", 8.0)]}
    (rule,), kinds = check_ruleset("m", [R("a", 0, cond)])
    assert rule.condition["all"][0]["value"] == 8 and type(rule.condition["all"][0]["value"]) is int
    assert cond["all"][0]["value"] == 8.0 and type(cond["all"][0]["value"]) is float
    assert kinds == {"cluster.gpus": "number"}


@pytest.mark.parametrize(
    "rules, match",
    [
        ([R("a"), R("a")], "duplicate"),
        ([R("a", -1)], "pri"),
        ([R("a", MAX_PRI + 1)], "pri"),  # durable truncates pri to 16 bits
        ([R("a", True)], "pri"),
        ([R("")], "id"),
        ([R("a", 0, {"all": []})], "non-empty"),
        ([R("a", 0, {"all": [], "any": []})], "leaf"),
        ([R("a", 0, L("cluster", ">", 1))], "<group>.<name>"),
        ([R("a", 0, L("cluster.gpus.x", ">", 1))], "<group>.<name>"),
        ([R("a", 0, L("kind.x", "==", 1))], "reserved"),
        ([R("a", 0, L("cluster.gpus", "=~", 1))], "operator"),
        ([R("a", 0, L("cluster.gpus", "in", []))], "non-empty"),
        ([R("a", 0, L("cluster.gpus", ">", True))], "booleans"),
        ([R("a", 0, L("cluster.name", "<", "b"))], "strings"),
        ([R("a", 0, L("cluster.gpus", ">", None))], "constant"),
        ([R("a", 0, L("cluster.gpus", ">", 2**63))], "2\\*\\*63"),
        ([R("a", 0, L("cluster.gpus", ">", math.nan))], "non-finite"),
        ([R("a", 0, L("g.x", "==", 1)), R("b", 0, L("g.x", "==", "1"))], "both"),
    ],
)
def test_check_ruleset_rejects(rules, match):
    with pytest.raises(EngineError, match=match):
        check_ruleset("m", rules)


def test_check_ruleset_rule_limit_mentions_durable():
    check_ruleset("m", [R(f"r{i}") for i in range(MAX_RULES_PER_RULESET)])
    with pytest.raises(EngineError, match=r"'big' has 61 rules.*at most 60.*durable.*303.*64"):
        check_ruleset("big", [R(f"r{i}") for i in range(MAX_RULES_PER_RULESET + 1)])


def test_count_groups():
    a, b = L("g.a", ">", 1), L("g.b", ">", 1)
    assert count_groups(a) == 0
    assert count_groups({"all": [a, b]}) == 0  # merges into the kind guard's $and
    assert count_groups({"any": [a, b]}) == 1
    assert count_groups({"any": [{"any": [a, b]}, a]}) == 1  # same-kind nesting merges
    assert count_groups({"all": [{"any": [a]}, b]}) == 0  # one-child groups unwrap
    assert count_groups(L("g.a", "in", [1, 2])) == 1
    assert count_groups(L("g.a", "in", [1, 1.0])) == 0  # deduplicated to one equality
    assert count_groups({"any": [L("g.a", "in", [1, 2]), b]}) == 1


def test_check_ruleset_group_limit():
    def chain(n):  # n alternating groups, outermost "any"
        node = L("g.a", ">", 0)
        for i in range(n):
            node = {("any" if (n - 1 - i) % 2 == 0 else "all"): [L("g.a", ">", i + 1), node]}
        return node

    assert count_groups(chain(MAX_GROUPS_PER_RULE - 1)) == MAX_GROUPS_PER_RULE - 1
    check_ruleset("m", [R("a", 0, chain(MAX_GROUPS_PER_RULE - 1))])
    with pytest.raises(EngineError, match="113"):
        check_ruleset("m", [R("a", 0, chain(MAX_GROUPS_PER_RULE + 1))])


def test_check_ruleset_bad_name():
    with pytest.raises(EngineError, match="ruleset name"):
        check_ruleset("a$state", [R("a")])


# ---------------------------------------------------------------- PythonEngine


def test_python_engine_order_lower_pri_first_ties_in_definition_order():
    rules = [R(f"r{i}", pri) for i, pri in enumerate([2, 0, 2, 1, 0, 2, 2, 2, 2, 2, 2, 2])]
    eng = PythonEngine({"m": rules})
    assert eng.name == "python"
    assert eng.evaluate("m", FACT) == ["r1", "r4", "r3", "r0", "r2", "r5", "r6", "r7", "r8", "r9", "r10", "r11"]
    assert [r.id for r in eng.rulesets["m"]] == [f"r{i}" for i in range(12)]


def test_python_engine_fact_checks():
    eng = PythonEngine({"m": [R("a", 0, L("cluster.gpu_name", "==", "16"))]})
    with pytest.raises(EngineError, match="lacks field 'cluster.gpu_name'"):
        eng.evaluate("m", {"cluster": {"gpus": 1}})
    with pytest.raises(EngineError, match="cluster.gpu_name"):
        eng.evaluate("m", {"cluster": {"gpu_name": 16}})
    with pytest.raises(EngineError, match="unknown ruleset"):
        eng.evaluate("x", FACT)


def test_python_engine_is_thread_safe():
    rules = [R(f"r{i}", i % 3, L("cluster.gpus", ">", i * 4)) for i in range(20)]
    eng = PythonEngine({"m": rules})
    facts = [{"cluster": {"gpus": g}} for g in range(0, 90, 3)]
    want = [eng.evaluate("m", f) for f in facts]
    bad: list = []

    def work(_k):
        for _ in range(20):
            if [eng.evaluate("m", f) for f in facts] != want:
                bad.append(1)

    bad += run_in_threads(work, 4)
    assert not bad


# compile_condition (the engine's fast path) against evaluate (the reference interpreter that explain()
# and the rule tests use): the same result, or the same EngineError, on generated trees and facts.
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from advisor.rulebook.engines.python import compile_condition

_VALUES = st.one_of(st.integers(-3, 3), st.booleans(), st.sampled_from(["a", "b"]), st.floats(-2, 2),
                    st.none())
_FIELDS = ["g.x", "g.y", "h.z", "g.missing"]


@st.composite
def _leaves(draw):
    op = draw(st.sampled_from(["==", "!=", "in", "<", "<=", ">", ">="]))
    want = draw(st.lists(_VALUES, min_size=1, max_size=3)) if op == "in" else draw(_VALUES)
    return {"field": draw(st.sampled_from(_FIELDS)), "op": op, "value": want}


_TREES = st.recursive(_leaves(), lambda kids: st.one_of(
    st.builds(lambda k: {"all": k}, st.lists(kids, min_size=1, max_size=3)),
    st.builds(lambda k: {"any": k}, st.lists(kids, min_size=1, max_size=3))), max_leaves=6)


def _outcome(fn):
    try:
        return fn()
    except EngineError as exc:
        return ("error", str(exc))


@settings(max_examples=examples(80, thorough=300), deadline=None)
@given(_TREES, st.fixed_dictionaries({"g": st.fixed_dictionaries({"x": _VALUES, "y": _VALUES}),
                                      "h": st.fixed_dictionaries({"z": _VALUES})}))
def test_compiled_condition_agrees_with_the_interpreter(node, fact):
    assert _outcome(lambda: compile_condition(node)(fact)) == _outcome(lambda: evaluate(node, fact))
