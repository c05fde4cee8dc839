"""Differential property test: DurableEngine and PythonEngine must fire the same rules in the same
order for random valid rulesets and facts (research §7.7; hypothesis found durable's float
parsing bug this way, §4.3).

Each example builds one ruleset of several generated rules (so durable's node sharing between
rules is exercised too), evaluates several facts, and closes the durable engine, which deletes
the ruleset from durable (a registered ruleset otherwise keeps ~100 KB of C memory, §3.1).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import advisor.rulebook.engines.durable as eng_mod
from advisor.rulebook.compiled import MAX_GROUPS_PER_RULE, CompiledRule, count_groups
from advisor.rulebook.engines.durable import FACT_KIND, DurableEngine, translate_condition
from advisor.rulebook.engines.python import PythonEngine
from budget import examples  # tests/ is on sys.path (rootdir conftest)

pytestmark = pytest.mark.skipif(not eng_mod.durable_available(), reason="durable_rules does not import here")

# Field -> type class. Number fields get int and float constants alike.
FIELDS = {
    "cluster.gpus": "int",
    "cluster.nodes": "int",
    "model.params": "int",
    "sizing.ratio": "float",
    "sizing.frac": "float",
    "model.is_moe": "bool",
    "cluster.gpu_name": "str",
}
INTS = [0, 1, 2, 8, 64, 80, -5, 2**40, 2**53 + 1, 2**62, 2**63 - 1, -(2**63) + 1]
FLOATS = [0.1, 0.25, 0.5, 80.0, 14.78, -2.5, 1e-09, 3e-07, 1.5e-05, 1e16, 0.30000000000000004]
STRS = ["", "H100-SXM-80GB", "h100-sxm-80gb", "16", "a b", "é✓", 'q"u\\o', "true"]
ORDER_OPS = ["<", "<=", ">", ">="]

numbers = st.sampled_from(INTS + FLOATS)


def constants(kind: str):
    if kind in ("int", "float"):
        return numbers
    if kind == "bool":
        return st.booleans()
    return st.sampled_from(STRS)


@st.composite
def leaves(draw):
    field = draw(st.sampled_from(sorted(FIELDS)))
    kind = FIELDS[field]
    ops = ["==", "!="] + (["in"] if kind != "bool" else []) + (ORDER_OPS if kind in ("int", "float") else [])
    op = draw(st.sampled_from(ops))
    if op == "in":
        value = draw(st.lists(constants(kind), min_size=1, max_size=4))
    else:
        value = draw(constants(kind))
    return {"field": field, "op": op, "value": value}


def trees(depth: int):
    """Condition trees with at most `depth` levels of all/any above the leaves."""
    if depth == 0:
        return leaves()
    groups = st.builds(lambda key, kids: {key: kids}, st.sampled_from(["all", "any"]), st.lists(trees(depth - 1), min_size=1, max_size=3))
    return st.one_of(leaves(), groups)


conditions = trees(3).filter(lambda c: count_groups(c) <= MAX_GROUPS_PER_RULE)


@st.composite
def rulesets(draw, max_rules=5):
    conds = draw(st.lists(conditions, min_size=1, max_size=max_rules))
    pris = draw(st.lists(st.sampled_from([0, 0, 1, 2, 65534]), min_size=len(conds), max_size=len(conds)))
    return [CompiledRule(f"rule.{i}-x", pris[i], c) for i, c in enumerate(conds)]


def field_values(kind: str):
    if kind == "bool":
        return st.booleans()
    if kind == "str":
        return st.one_of(st.sampled_from(STRS), st.text(max_size=6))
    if kind == "int":
        return st.one_of(st.sampled_from(INTS), st.integers(-(2**63) + 1, 2**63 - 1), st.integers(-100, 100))
    return st.one_of(
        st.sampled_from(FLOATS + INTS),
        st.floats(min_value=-1e18, max_value=1e18, allow_nan=False, allow_infinity=False),
        st.floats(min_value=-1e-3, max_value=1e-3, allow_nan=False),
    )


@st.composite
def facts(draw):
    out: dict = {}
    for field, kind in FIELDS.items():
        group, name = field.split(".")
        out.setdefault(group, {})[name] = draw(field_values(kind))
    return out


def _groups_in(pattern) -> int:
    if isinstance(pattern, dict):
        return sum((k in ("$and", "$or")) + _groups_in(v) for k, v in pattern.items())
    if isinstance(pattern, list):
        return sum(_groups_in(v) for v in pattern)
    return 0


@settings(max_examples=examples(50, thorough=200), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(rules=rulesets(), fact_list=st.lists(facts(), min_size=1, max_size=4))
def test_durable_and_python_engines_agree(rules, fact_list):
    for rule in rules:
        pattern = translate_condition(rule.condition)
        # the kind guard is always first (research §1.3) ...
        assert pattern["$and"][0] == {"kind": FACT_KIND}
        # ... and the shared validator counts groups exactly as the translator emits them
        assert _groups_in(pattern) - 1 == count_groups(rule.condition)
    python = PythonEngine({"gen": rules})
    with DurableEngine({"gen": rules}) as durable:
        for fact in fact_list:
            assert durable.evaluate("gen", fact) == python.evaluate("gen", fact), fact


@st.composite
def simple_rulesets(draw):
    """Many (up to 40) single-leaf rules with colliding pri: stresses agenda order. At most one
    test per rule can match (an `in` holds distinct values), so durable's 64-sibling limit
    (error 303, §4.5) cannot be reached."""
    leaves_ = draw(st.lists(leaves(), min_size=1, max_size=40))
    pris = draw(st.lists(st.integers(0, 3), min_size=len(leaves_), max_size=len(leaves_)))
    return [CompiledRule(f"r{i}", pris[i], leaf) for i, leaf in enumerate(leaves_)]


@settings(max_examples=examples(30, thorough=60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules=simple_rulesets(), fact_list=st.lists(facts(), min_size=1, max_size=3))
def test_engines_agree_on_order_of_many_rules(rules, fact_list):
    python = PythonEngine({"many": rules})
    with DurableEngine({"many": rules}) as durable:
        for fact in fact_list:
            assert durable.evaluate("many", fact) == python.evaluate("many", fact), fact
