""""Why did this rule not fire?": the per-condition view of a rule against one fact document.

durable_rules has no hook that says which clause of a rule failed,
so this view is always computed by the pure-Python evaluator (`engines.python.explain`) from the
same compiled condition both engines run. Every leaf is evaluated (no short-circuit), so the view
shows all the reasons at once:

    >>> why_not(book, facts, "matrix.small-cluster-zero")
    [{"field": "cluster.gpus", "op": "<=", "want": 64, "have": 512, "ok": False, "path": "all[0]"}, ...]

`path` locates the leaf in the condition tree ("all[1].any[0]"): a rule whose condition is an
`any` fails only when every leaf under that `any` is not ok. A field missing from the facts shows
`have` None and `ok` False. Pure functions; thread-safe.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..errors import EngineError, InputError
from .compiled import normalize_fact
from .engines.python import explain
from .load import RuleBook

__all__ = ["why_not", "not_fired_report"]


def _normalized(facts: Mapping[str, Any]) -> Mapping[str, Any]:
    """The facts as the engines see them (integral floats -> int, ...); as given if they cannot
    be normalised, so the view still renders for facts an engine would refuse."""
    try:
        return normalize_fact(facts)
    except EngineError:
        return facts


def _leaves(book: RuleBook, facts: Mapping[str, Any], rule_id: str) -> list[dict]:
    rule = book.rules.get(rule_id)
    if rule is None:
        raise InputError("rule_id", rule_id, "the id of a rule in this rule book")
    return [
        {"field": leaf.field, "op": leaf.op, "want": leaf.want, "have": leaf.have, "ok": leaf.ok, "path": leaf.path}
        for leaf in explain(rule.compiled.condition, facts)
    ]


def why_not(book: RuleBook, facts: Mapping[str, Any], rule_id: str) -> list[dict]:
    """Each condition leaf of rule `rule_id` evaluated against `facts`, in condition order.

    Returns dicts with keys field, op, want (the rule's constant, a list for `in`), have (the fact's
    value, None when missing), ok (the leaf holds) and path. Raises InputError for an unknown id.
    """
    return _leaves(book, _normalized(facts), rule_id)


def not_fired_report(book: RuleBook, facts: Mapping[str, Any], fired_ids: Iterable[str],
                     scope: str = "situation") -> dict[str, list[dict]]:
    """`why_not` for every rule of `scope` ("situation" or "layout") that is not in `fired_ids`,
    keyed by rule id in the book's firing order."""
    if scope not in ("situation", "layout"):
        raise InputError("scope", scope, "'situation' or 'layout'")
    fired = set(fired_ids)
    norm = _normalized(facts)
    return {rid: _leaves(book, norm, rid) for rid, rule in book.rules.items()
            if rule.scope == scope and rid not in fired}
