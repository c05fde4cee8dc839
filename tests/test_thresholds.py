"""Numbers that Python and a rule file both state are the same number."""

from __future__ import annotations

from advisor.facts import ZERO_ONLY_MAX_GPUS
from advisor.planner.ranking import MAX_MEMORY_UTILIZATION
from advisor.rulebook.load import builtin_rulebook


def leaves(node: dict):
    """Every `<field> <op> <value>` leaf of a compiled condition."""
    for key in ("all", "any"):
        for child in node.get(key, ()):
            yield from leaves(child)
    if "field" in node:
        yield node["field"], node["op"], node["value"]


def bound_in(rule_id: str, field: str) -> tuple[str, object]:
    (found,) = [(op, value) for f, op, value in leaves(builtin_rulebook().rules[rule_id].compiled.condition)
                if f == field]
    return found


def test_zero_only_fits_is_computed_wherever_its_rule_can_fire():
    # facts.zero_only_fits sizes ZeRO layouts only up to ZERO_ONLY_MAX_GPUS; above, it reports False
    assert bound_in("advice.small-cluster-tp-pp-when-zero-fits", "cluster.gpus") == ("<=", ZERO_ONLY_MAX_GPUS)


def test_the_planner_ranks_tight_layouts_last_where_the_audit_warns():
    assert bound_in("advice.memory-tight", "check.memory_percent") == (">", MAX_MEMORY_UTILIZATION * 100)
