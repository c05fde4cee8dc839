"""The pure-Python engine: evaluates compiled rules with durable's firing order, and `explain`,
the per-leaf view behind "why did this rule not fire" (durable has no hook for it,
so it is always computed here). Pure and thread-safe."""

from __future__ import annotations

import operator
from typing import Any, Iterable, Mapping, Sequence

from ...errors import EngineError
from ..compiled import KIND_OF_TYPE, CompiledRule, LeafResult, check_fact, check_ruleset, kind_of, normalize_fact

__all__ = ["PythonEngine", "evaluate", "explain", "compile_condition"]


# --------------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------------

_MISSING = object()


def _lookup(fact: Mapping[str, Any], field: str) -> Any:
    group, _, name = field.partition(".")
    grp = fact.get(group)
    if type(grp) is not dict and not isinstance(grp, Mapping):  # fast path for plain dicts
        return _MISSING
    return grp.get(name, _MISSING)


def _leaf(op: str, have: Any, want: Any) -> bool:
    # Equality is within one type class (True != 1 here, unlike durable; check_fact makes the
    # difference unobservable for valid facts).
    if op == "==":
        return kind_of(have) == kind_of(want) and have == want
    if op == "!=":
        return not (kind_of(have) == kind_of(want) and have == want)
    if op == "in":
        return any(kind_of(have) == kind_of(w) and have == w for w in want)
    if kind_of(have) != "number" or kind_of(want) != "number":
        raise EngineError(f"cannot order {have!r} {op} {want!r}: both must be numbers")
    if op == "<":
        return have < want
    if op == "<=":
        return have <= want
    if op == ">":
        return have > want
    return have >= want


def evaluate(node: Mapping[str, Any], fact: Mapping[str, Any]) -> bool:
    """Evaluate a condition tree against one fact. Raises EngineError if a field is missing."""
    if "all" in node:
        return all(evaluate(c, fact) for c in node["all"])
    if "any" in node:
        return any(evaluate(c, fact) for c in node["any"])
    have = _lookup(fact, node["field"])
    if have is _MISSING:
        raise EngineError(f"fact lacks field {node['field']!r}")
    return _leaf(node["op"], have, node["value"])


def compile_condition(node: Mapping[str, Any]):
    """`evaluate(node, fact)` as a function of `fact`, built once per rule: the same short-circuit
    order, results and errors, without walking the tree and re-dispatching on the operator for every
    leaf (the planner screens several candidate layouts per recommendation)."""
    if "all" in node:
        kids = tuple(compile_condition(c) for c in node["all"])

        def all_of(fact):
            for kid in kids:
                if not kid(fact):
                    return False
            return True
        return all_of
    if "any" in node:
        kids = tuple(compile_condition(c) for c in node["any"])

        def any_of(fact):
            for kid in kids:
                if kid(fact):
                    return True
            return False
        return any_of
    return _compile_leaf(node["field"], node["op"], node["value"])


def _have_of(field: str):
    """_lookup as a function of the fact, raising as evaluate does when the field is missing."""
    def have_of(fact):
        have = _lookup(fact, field)
        if have is _MISSING:
            raise EngineError(f"fact lacks field {field!r}")
        return have
    return have_of


# Each test below reads the field inline for a dict of dicts (the facts advisor builds) and falls back
# to have_of for any other mapping.
def _compile_leaf(field: str, op: str, want: Any):
    if op in ("==", "!="):
        return _compile_equal(field, want, negate=op == "!=")
    if op == "in":
        return _compile_member(field, want)
    return _compile_order(field, op, want)


def _compile_equal(field: str, want: Any, negate: bool):
    group, _, name = field.partition(".")
    kinds, have_of, want_kind = KIND_OF_TYPE, _have_of(field), kind_of(want)

    def equal(fact):
        grp = fact.get(group) if type(fact) is dict else None
        have = grp.get(name, _MISSING) if type(grp) is dict else _MISSING
        if have is _MISSING:
            have = have_of(fact)
        same = (kinds.get(type(have)) or kind_of(have)) == want_kind and have == want
        return not same if negate else same
    return equal


def _compile_member(field: str, want: Any):
    group, _, name = field.partition(".")
    kinds, have_of, wants = KIND_OF_TYPE, _have_of(field), tuple((kind_of(w), w) for w in want)

    def member(fact):
        grp = fact.get(group) if type(fact) is dict else None
        have = grp.get(name, _MISSING) if type(grp) is dict else _MISSING
        if have is _MISSING:
            have = have_of(fact)
        kind = kinds.get(type(have)) or kind_of(have)
        for w_kind, w in wants:
            if kind == w_kind and have == w:
                return True
        return False
    return member


def _compile_order(field: str, op: str, want: Any):
    group, _, name = field.partition(".")
    kinds, have_of, compare = KIND_OF_TYPE, _have_of(field), _ORDER[op]
    want_is_number = kind_of(want) == "number"

    def order(fact):        # _leaf's ordering operators, with its type check
        grp = fact.get(group) if type(fact) is dict else None
        have = grp.get(name, _MISSING) if type(grp) is dict else _MISSING
        if have is _MISSING:
            have = have_of(fact)
        if not want_is_number or (kinds.get(type(have)) or kind_of(have)) != "number":
            raise EngineError(f"cannot order {have!r} {op} {want!r}: both must be numbers")
        return compare(have, want)
    return order


_ORDER = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def explain(node: Mapping[str, Any], fact: Mapping[str, Any]) -> list[LeafResult]:
    """Evaluate every leaf (no short-circuit) and report field, op, want, have, ok, path.

    A missing field gives have=None, ok=False instead of raising, so the view always renders.
    """
    out: list[LeafResult] = []
    _explain(node, fact, "", out)
    return out


def _explain(node: Mapping[str, Any], fact: Mapping[str, Any], path: str, out: list[LeafResult]) -> None:
    for key in ("all", "any"):
        if key in node:
            for i, child in enumerate(node[key]):
                _explain(child, fact, f"{path}.{key}[{i}]" if path else f"{key}[{i}]", out)
            return
    have = _lookup(fact, node["field"])
    want = node["value"]
    if have is _MISSING:
        out.append(LeafResult(node["field"], node["op"], want, None, False, path))
        return
    try:
        ok = _leaf(node["op"], have, want)
    except EngineError:
        ok = False
    out.append(LeafResult(node["field"], node["op"], want, have, ok, path))


class PythonEngine:
    """Evaluates compiled rulesets in pure Python, with durable's firing order.

    Each evaluation asserts one fact, so each rule fires at most once; the fired list is in
    ascending `pri`, ties in definition order (durable's agenda). Immutable after
    construction, hence thread-safe.
    """

    name = "python"

    def __init__(self, rulesets: Mapping[str, Iterable[CompiledRule]]):
        #: the validated rulesets in definition order (conditions are private normalised copies)
        self.rulesets: dict[str, tuple[CompiledRule, ...]] = {}
        self._ordered: dict[str, tuple[CompiledRule, ...]] = {}
        self._kinds: dict[str, dict[str, str]] = {}
        self._tests: dict[str, tuple[tuple[str, Any], ...]] = {}   # (rule id, compiled condition), in firing order
        for rs_name, rules in rulesets.items():
            checked, kinds = check_ruleset(rs_name, rules)
            self.rulesets[rs_name] = checked
            # sorted() is stable: equal pri keeps definition order.
            self._ordered[rs_name] = tuple(sorted(checked, key=lambda r: r.pri))
            self._kinds[rs_name] = kinds
            self._tests[rs_name] = tuple((r.id, compile_condition(r.condition)) for r in self._ordered[rs_name])

    def evaluate(self, ruleset: str, fact: Mapping[str, Any], *, normalized: bool = False,
                 trusted: bool = False) -> list[str]:
        """Return the ids of the rules of `ruleset` that fire for `fact`, in firing order.

        `normalized=True`: `fact` is already normalize_fact's output (checked, not normalised again).
        `trusted=True` skips normalising and checking the fact: for facts built by advisor.facts (plain
        ints, bools, strings and rounded floats), where normalising changes no comparison's outcome.
        """
        tests = self._tests.get(ruleset)
        if tests is None:
            raise EngineError(f"unknown ruleset {ruleset!r}; known: {sorted(self._ordered)}")
        if not trusted:
            if not normalized:
                fact = normalize_fact(fact)
            check_fact(fact, self._kinds[ruleset], ruleset)
        return [rule_id for rule_id, test in tests if test(fact)]

    def evaluate_all(self, rulesets: Sequence[str], fact: Mapping[str, Any], *, normalized: bool = False) -> list[str]:
        """evaluate() of each of `rulesets`, concatenated (DurableEngine.evaluate_all's contract)."""
        fired: list[str] = []
        for ruleset in rulesets:
            fired += self.evaluate(ruleset, fact, normalized=normalized)
        return fired
