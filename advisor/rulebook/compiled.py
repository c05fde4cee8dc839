"""The contract between the rule compiler and the engines: `CompiledRule`, the fact normaliser,
and the structural limits both engines enforce.

`rulebook.load` turns rule files into `CompiledRule`s. Two engines run them:
`engines.durable.DurableEngine` (durable_rules, the mandated engine) and
`engines.python.PythonEngine` (the fallback where durable cannot be imported, e.g. Python 3.13+). Both validate rulesets with the same `check_ruleset`, normalise facts with the same
`normalize_fact`, and must return identical fired lists (tests/test_engine_differential.py). The
limits are durable's, enforced for both engines so that a file's validity never depends on the
machine.

Nothing in this module imports durable; everything here is pure and thread-safe.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Protocol, Sequence

from ..errors import EngineError

__all__ = [
    "CompiledRule",
    "LeafResult",
    "Engine",
    "normalize_fact",
    "normalize_value",
    "check_ruleset",
    "check_fact",
    "MAX_RULES_PER_RULESET",
    "MAX_PRI",
    "MAX_GROUPS_PER_RULE",
    "MAX_TESTS_PER_RULESET",
    "MAX_TRUE_TESTS_PER_RULESET",
    "true_test_bound",
    "leaf_tests",
    "count_groups",
    "MAX_FACT_PROPERTIES",
    "RESERVED_GROUPS",
    "dedupe",
    "kind_of",
    "KIND_OF_TYPE",
]

OPS = ("==", "!=", "<", "<=", ">", ">=", "in")
_ORDER_OPS = frozenset({"<", "<=", ">", ">="})

# Structural limits of durable_rules. They are enforced for BOTH engines, so whether a rule file
# is valid never depends on which engine a machine happens to select.
# durable's alpha network walks matching sibling tests with a fixed 64-entry stack; more than
# 64 matching siblings under the shared `kind` test raise error 303 and nothing fires
#. Every rule is one pattern under that test, so cap the rule count below 64.
# The cap does not exclude 303 entirely: each branch of an `any` (and each value of an `in`
# inside an `any`) is its own sibling, so wide `any`s can still overflow; MAX_TRUE_TESTS_PER_RULESET
# below closes that (tests/test_engine.py::test_alpha_stack_overflow_is_refused_before_durable_sees_it).
MAX_RULES_PER_RULESET = 60
# durable stores `pri` in an unsigned short (rete.h `unsigned short priority`): 70000 silently
# becomes 4464 and fires before pri 5000 (measured). 65535 is reserved for the engine's sink rule.
MAX_PRI = 65_534
# Each $and/$or group in a pattern appends 2 entries to a 32-entry expression sequence
# (rete.h MAX_SEQUENCE_EXPRESSIONS); the 16th group fails registration with error 113
# (measured). The durable translation spends one group on the kind guard, so a rule's
# condition may use at most 14 (see `count_groups` for how groups are counted).
MAX_GROUPS_PER_RULE = 14
# One alpha node of durable's network holds at most 511 distinct child tests. Measured on
# durable_rules 2.0.28 (CPython 3.11, one subprocess per size, 4 s timeout): a ruleset whose
# `in`/`any` branches put 512 distinct tests under the `kind` node hangs inside the first
# assert_fact with the GIL held (the whole process freezes); from ~600 it hangs inside
# register_rulesets; 511 evaluate in < 1 ms. Identical tests are shared (two rules with the same
# 300-value list cost 300), an `all` chains its tests (2000 `!=` in one `all` ran), and every
# other rule's first test takes a slot too (an `in` of 501 values plus 10 rules hung at 502).
# Counting every distinct leaf test of the ruleset (each `in` value apart) bounds any node's
# children; 192 plus the 60 rules and the sink stays under half of 511.
MAX_TESTS_PER_RULESET = 192
# durable walks the matching children of a node with a fixed 64-entry stack.
# Measured (one subprocess per size): 64 true `>=` branches evaluate; 65 (one `any` of 65, or
# two of 33) abort the process with "free(): invalid pointer" or, in a warm process, raise error
# 303. `true_test_bound` counts how many distinct tests can hold for one fact (summed over
# fields, the most any one value of each field satisfies); 48 leaves a quarter of the stack for
# chained tests.
MAX_TRUE_TESTS_PER_RULESET = 48
# durable rejects facts with more than ~253 properties, nested ones included (error 302);
# 200 keeps a margin. kind/id/sid are added by the durable adapter.
MAX_FACT_PROPERTIES = 200
# The durable adapter adds these top-level keys to the fact.
RESERVED_GROUPS = frozenset({"kind", "id", "sid"})

_INT_LIMIT = 2**63  # durable compares ints as int64; >= 2**64 silently compares false
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Field names _NAME has accepted: fact documents reuse the same few hundred (bounded all the same).
_IDENTIFIERS: set = set()


@dataclass(frozen=True)
class CompiledRule:
    """One rule as produced by the rule compiler.

    `pri` follows durable's convention: LOWER fires first; ties fire in definition order.
    `condition` is a tree of `{"all": [...]}`, `{"any": [...]}` and leaves
    `{"field": "<group>.<name>", "op": <op>, "value": <scalar or list for "in">}`.
    """

    id: str
    pri: int
    condition: dict


@dataclass(frozen=True)
class LeafResult:
    """One leaf of a condition evaluated against a fact (the "why not" view).

    `path` locates the leaf in the tree, e.g. "all[1].any[0]"; `have` is None when the fact
    lacks the field (then `ok` is False).
    """

    field: str
    op: str
    want: Any
    have: Any
    ok: bool
    path: str


class Engine(Protocol):
    """What `PythonEngine` and `engines.durable.DurableEngine` both provide."""

    name: str

    def evaluate(self, ruleset: str, fact: Mapping[str, Any], *, normalized: bool = False) -> list[str]: ...
    """`normalized=True`: `fact` is already `normalize_fact`'s output (one normalisation serves
    every ruleset of a scope); it is still checked against the ruleset's field kinds."""

    def evaluate_all(self, rulesets: Sequence[str], fact: Mapping[str, Any], *, normalized: bool = False) -> list[str]: ...
    """The fired ids of several rulesets for one fact (a scope), each ruleset's in its firing order."""


# --------------------------------------------------------------------------------------------
# Normalisation
# --------------------------------------------------------------------------------------------


def normalize_value(value: Any, where: str = "value") -> Any:
    """Normalise one scalar so both engines, and durable's JSON parser, see the same number.

    * bool stays bool (checked before int: bool is an int subclass);
    * int must satisfy |v| < 2**63: durable compares int64 and silently gets ints >= 2**64
      wrong;
    * float must be finite (NaN silently never matches, inf is error 202); an integral float
      becomes an int (80.0 -> 80, 1e16 -> 10000000000000000), which also removes every float
      whose repr is like "1e+16" (all floats >= 1e16 are integral);
    * a non-integral float keeps its exact value even when its repr is "1e-09" (exponent
      without a dot, which durable's parser rejects with error 204): the durable adapter
      serialises such floats as "1.0e-09", which durable parses exactly. Changing the value
      instead would make `x < c` and `x == c` differ from what the user wrote.
    * str stays str, but must be encodable as UTF-8 (no lone surrogates); None stays None
      (JSON null; no rule may test it, see `check_fact`).

    Raises EngineError naming `where` for anything else.
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            value.encode("utf-8")  # durable rejects lone surrogates ("Invalid argument")
        except UnicodeEncodeError:
            raise EngineError(f"{where}: string {value!r} is not valid Unicode text") from None
        return str(value)
    if isinstance(value, int):
        if not -_INT_LIMIT < value < _INT_LIMIT:
            raise EngineError(f"{where}: integer {value} is outside the int64 range durable compares correctly (|v| < 2**63)")
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise EngineError(f"{where}: non-finite float {value!r} cannot be compared by the rule engine")
        if value.is_integer():
            return normalize_value(int(value), where)
        return float(value)
    raise EngineError(f"{where}: unsupported value type {type(value).__name__} ({value!r}); want int, float, bool, str or None")


def normalize_fact(fact: Mapping[str, Any]) -> dict:
    """Return a normalised deep copy of one fact document.

    The fact is `{group: {name: value}}` (nesting depth exactly 2). Values go through
    `normalize_value`; a value may also be a list of scalars. Group and field names must be
    identifiers (durable resolves dotted paths, so a name containing "." would be ambiguous,
    and "$"-names are durable syntax); groups "kind", "id" and "sid" are reserved for the
    durable adapter. At most MAX_FACT_PROPERTIES properties (groups + fields) are allowed.
    Both engines call this, so they always see identical facts.
    """
    if not isinstance(fact, Mapping):
        raise EngineError(f"fact: want a mapping of groups, have {type(fact).__name__}")
    out: dict = {}
    count = 0
    for group, fields in fact.items():
        if not isinstance(group, str) or not _NAME.match(group):
            raise EngineError(f"fact: group name {group!r} is not an identifier")
        if group in RESERVED_GROUPS:
            raise EngineError(f"fact: group name {group!r} is reserved for the rule engine")
        if not isinstance(fields, Mapping):
            raise EngineError(f"fact.{group}: want a mapping of fields, have {type(fields).__name__}")
        grp: dict = {}
        count += 1
        for name, value in fields.items():
            if name not in _IDENTIFIERS:
                if not isinstance(name, str) or not _NAME.match(name):
                    raise EngineError(f"fact.{group}: field name {name!r} is not an identifier")
                if len(_IDENTIFIERS) < 4096:
                    _IDENTIFIERS.add(name)
            t = type(value)
            if (t is int and -_INT_LIMIT < value < _INT_LIMIT) or t is bool or value is None:
                grp[name] = value       # what normalize_value returns for these, without building `where`
                count += 1
                continue
            where = f"{group}.{name}"
            if isinstance(value, (list, tuple)):
                grp[name] = [normalize_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
            else:
                grp[name] = normalize_value(value, where)
            count += 1
        out[group] = grp
    if count > MAX_FACT_PROPERTIES:
        raise EngineError(f"fact: {count} properties; the rule engine accepts at most {MAX_FACT_PROPERTIES} (durable error 302)")
    return out


# --------------------------------------------------------------------------------------------
# Ruleset validation (shared by both engines)
# --------------------------------------------------------------------------------------------


def kind_of(value: Any) -> str:
    """Type class used for consistency checks: durable coerces across classes (True == 1 ==
    "true", "16" == 16), so each field must be compared within one class."""
    kind = KIND_OF_TYPE.get(type(value))
    if kind is not None:
        return kind
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "str"
    return type(value).__name__


KIND_OF_TYPE = {bool: "bool", int: "number", float: "number", str: "str"}


def _check_node(node: Any, where: str, field_kinds: dict[str, str], depth: int = 0) -> dict:
    """Validate one condition node; return a normalised deep copy. Records field type classes."""
    if not isinstance(node, Mapping):
        raise EngineError(f"{where}: condition node must be a mapping, have {node!r}")
    if depth > 32:
        raise EngineError(f"{where}: condition nested too deeply")
    keys = set(node)
    if keys in ({"all"}, {"any"}):
        (key,) = keys
        children = node[key]
        if not isinstance(children, (list, tuple)) or not children:
            raise EngineError(f"{where}: {key!r} needs a non-empty list, have {children!r}")
        return {key: [_check_node(c, f"{where}.{key}[{i}]", field_kinds, depth + 1) for i, c in enumerate(children)]}
    if keys != {"field", "op", "value"}:
        raise EngineError(f"{where}: want {{'all': [...]}}, {{'any': [...]}} or a leaf with field/op/value, have keys {sorted(map(str, keys))}")
    field, op, value = node["field"], node["op"], node["value"]
    parts = field.split(".") if isinstance(field, str) else []
    if len(parts) != 2 or not all(_NAME.match(p) for p in parts):
        raise EngineError(f"{where}: field {field!r} must be '<group>.<name>' (identifiers)")
    if parts[0] in RESERVED_GROUPS:
        raise EngineError(f"{where}: field {field!r} uses a group name reserved for the rule engine")
    if op not in OPS:
        raise EngineError(f"{where}: operator {op!r} is not one of {list(OPS)}")
    if op == "in":
        if not isinstance(value, (list, tuple)) or not value:
            raise EngineError(f"{where}: 'in' needs a non-empty list, have {value!r}")
        values = [normalize_value(v, f"{where}.value[{i}]") for i, v in enumerate(value)]
    else:
        values = [normalize_value(value, f"{where}.value")]
    for v in values:
        k = kind_of(v)
        if k not in ("bool", "number", "str"):
            raise EngineError(f"{where}: constant {v!r} must be int, float, bool or str")
        if k == "bool" and op not in ("==", "!="):
            raise EngineError(f"{where}: booleans may only be compared with == or !=, have {op!r}")
        if k == "str" and op in _ORDER_OPS:
            raise EngineError(f"{where}: strings may only be compared with ==, != or in, have {op!r}")
        seen = field_kinds.setdefault(field, k)
        if seen != k:
            raise EngineError(f"{where}: field {field!r} is compared with both {seen} and {k} constants")
    return {"field": field, "op": op, "value": values if op == "in" else values[0]}


def count_groups(node: dict) -> int:
    """How many $and/$or groups the durable translation of `node` emits (same flattening as
    engines.durable): nested same-kind groups merge, single-child groups unwrap, and an `in`
    with two or more distinct values is one $or."""
    # The rule's condition sits inside the kind guard's $and, so a root "all" merges into it.
    return _count(node, "all")


def _count(node: dict, parent: str | None) -> int:
    for key in ("all", "any"):
        if key in node:
            kids = node[key]
            if len(kids) == 1:
                return _count(kids[0], parent)
            own = 0 if key == parent else 1
            return own + sum(_count(k, key) for k in kids)
    if node["op"] == "in" and len(dedupe(node["value"])) > 1:
        return 0 if parent == "any" else 1
    return 0


def dedupe(values: Iterable[Any]) -> list:
    """`values` without repeats, first occurrence kept; equal only within one type class (True
    and 1 stay distinct). Linear: keyed by (class, value), which hashes exactly like `==` compares
    for the finite scalars normalize_value lets through (1 == 1.0 and -0.0 == 0.0 hash alike)."""
    seen: dict = {}
    for v in values:
        seen.setdefault((kind_of(v), v), v)
    return list(seen.values())


def leaf_tests(node: Mapping[str, Any], out: set | None = None) -> set:
    """The distinct tests durable builds for a condition: (field, op, type class, value), an `in`
    contributing one `==` per value. Iterative, so no depth reaches Python's recursion limit."""
    out = set() if out is None else out
    stack = [node]
    while stack:
        n = stack.pop()
        kids = n.get("all", n.get("any"))
        if kids is not None:
            stack.extend(kids)
        elif n["op"] == "in":
            out.update((n["field"], "==", kind_of(v), v) for v in n["value"])
        else:
            out.add((n["field"], n["op"], kind_of(n["value"]), n["value"]))
    return out


def true_test_bound(tests: Iterable[tuple]) -> int:
    """The most of `tests` (leaf_tests' tuples) that one fact can satisfy at once: per field, the
    maximum over every value that decides a test (each constant, a point between each two, one
    beyond both ends, a value equal to none), summed over fields. Exact per field, an upper bound
    across fields (they vary independently)."""
    return _TrueTests().add(tests)


def _most_held(field_tests: list[tuple[str, Any]]) -> int:
    """The most of one field's (op, constant) tests one value satisfies, over the deciding values.
    Each value's count comes from sorted constants per operator (bisect), not a scan of every test:
    the built-in rule book has fields with ~100 tests, checked at every start."""
    if len(field_tests) == 1:   # one test: some value satisfies it (most fields have one)
        return 1
    by_op: dict[str, list] = {}
    for op, c in field_tests:
        by_op.setdefault(op, []).append(c)
    constants = {v for _, v in field_tests}
    eq, ne = set(by_op.get("==", ())), set(by_op.get("!=", ()))
    if not all(kind_of(v) == "number" for v in constants):
        # bool/str: only == and != (check_ruleset enforces it); a fresh value fails every ==
        return max(len(ne) + (x in eq) - (x in ne) for x in (*constants, object()))
    # in numeric order, ints and floats together (ordered by type first, -1 and 0.0 gave no point below -1)
    constants = sorted(constants)
    points = constants + [(a + b) / 2 for a, b in zip(constants, constants[1:])]
    points += [constants[0] - 1, constants[-1] + 1]
    lt, le, gt, ge = (sorted(by_op.get(op, ())) for op in ("<", "<=", ">", ">="))

    def held(x) -> int:   # x < c: the c above x; x <= c: c >= x; x > c: c below x; x >= c: c <= x
        return (len(ne) + (x in eq) - (x in ne) + len(lt) - bisect_right(lt, x) + len(le) - bisect_left(le, x)
                + bisect_left(gt, x) + bisect_right(ge, x))
    return max(held(x) for x in points)


class _TrueTests:
    """true_test_bound of a growing set of tests, kept per field: adding a rule's new tests recomputes
    only the fields they touch (check_ruleset checks the bound after every rule; recomputing every
    field each time was quadratic in the ruleset, ~2 s of the test suite's engine builds)."""

    def __init__(self):
        self.by_field: dict[str, list[tuple[str, Any]]] = {}
        self.held: dict[str, int] = {}

    def add(self, new_tests: Iterable[tuple]) -> int:
        """Add tests not added before (leaf_tests' tuples); the bound of all added so far."""
        touched = set()
        for field, op, _kind, value in new_tests:
            self.by_field.setdefault(field, []).append((op, value))
            touched.add(field)
        for field in touched:
            self.held[field] = _most_held(self.by_field[field])
        return sum(self.held.values())


def check_ruleset(name: str, rules: Iterable[CompiledRule]) -> tuple[tuple[CompiledRule, ...], dict[str, str]]:
    """Validate one compiled ruleset; return (rules with normalised private conditions, field kinds).

    Checks: name and rule ids are non-empty strings, ids unique, 0 <= pri <= MAX_PRI, at most
    MAX_RULES_PER_RULESET rules, well-formed conditions with type-consistent constants, and at
    most MAX_GROUPS_PER_RULE and/or groups per rule. Raises EngineError naming the ruleset.
    """
    if not isinstance(name, str) or not re.match(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$", name):
        raise EngineError(f"ruleset name {name!r} must match [A-Za-z0-9_][A-Za-z0-9_.-]*")
    rules = list(rules)
    if len(rules) > MAX_RULES_PER_RULESET:
        raise EngineError(
            f"ruleset {name!r} has {len(rules)} rules; at most {MAX_RULES_PER_RULESET} are allowed because "
            f"durable_rules fails (error 303) when more than 64 sibling tests match one fact; split the ruleset"
        )
    out: list[CompiledRule] = []
    seen_ids: set[str] = set()
    kinds: dict[str, str] = {}
    tests: set = set()
    bound = _TrueTests()
    for i, rule in enumerate(rules):
        if not isinstance(rule, CompiledRule):
            raise EngineError(f"ruleset {name!r}: item {i} is not a CompiledRule: {rule!r}")
        if not isinstance(rule.id, str) or not rule.id:
            raise EngineError(f"ruleset {name!r}: item {i} has an empty or non-string id {rule.id!r}")
        if rule.id in seen_ids:
            raise EngineError(f"ruleset {name!r}: duplicate rule id", rule_id=rule.id)
        seen_ids.add(rule.id)
        if isinstance(rule.pri, bool) or not isinstance(rule.pri, int) or not 0 <= rule.pri <= MAX_PRI:
            raise EngineError(f"ruleset {name!r}: pri {rule.pri!r} must be an int in 0..{MAX_PRI} (durable keeps pri in 16 bits)", rule_id=rule.id)
        cond = _check_node(rule.condition, f"ruleset {name!r} rule {rule.id!r} condition", kinds)
        groups = count_groups(cond)
        if groups > MAX_GROUPS_PER_RULE:
            raise EngineError(
                f"ruleset {name!r}: condition uses {groups} all/any/in groups; durable allows at most {MAX_GROUPS_PER_RULE} (error 113)",
                rule_id=rule.id,
            )
        new_tests = leaf_tests(cond) - tests
        tests |= new_tests
        if len(tests) > MAX_TESTS_PER_RULESET:
            raise EngineError(
                f"ruleset {name!r}: {len(tests)} distinct tests (each `in` value counts); at most "
                f"{MAX_TESTS_PER_RULESET}: durable_rules hangs with 512 under one node", rule_id=rule.id)
        true_tests = bound.add(new_tests)
        if true_tests > MAX_TRUE_TESTS_PER_RULESET:
            raise EngineError(
                f"ruleset {name!r}: up to {true_tests} tests can hold for one fact; at most "
                f"{MAX_TRUE_TESTS_PER_RULESET}: durable_rules overflows its 64-entry match stack "
                f"(error 303 or a crash) beyond 64", rule_id=rule.id)
        out.append(CompiledRule(rule.id, rule.pri, cond))
    return tuple(out), kinds


def check_fact(fact: Mapping[str, Any], field_kinds: Mapping[str, str], ruleset: str = "") -> None:
    """Every field a ruleset tests must be present in the (normalised) fact with the type class
    its constants have: durable would coerce "16" == 16 or True == 1 silently,
    and treat a missing field as "no match"."""
    for field, want in field_kinds.items():
        group, name = field.split(".")
        grp = fact.get(group)
        if (type(grp) is not dict and not isinstance(grp, Mapping)) or name not in grp:
            raise EngineError(f"fact lacks field {field!r} used by ruleset {ruleset!r}")
        have = grp[name]
        if (KIND_OF_TYPE.get(type(have)) or kind_of(have)) != want:
            raise EngineError(f"fact field {field!r} is {kind_of(have)} ({have!r}); ruleset {ruleset!r} compares it as {want}")
