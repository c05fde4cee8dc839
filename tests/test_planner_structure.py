"""The planner's shape, stated: functions short enough to read (<= 60 lines, <= 8 parameters besides
self), modules under 600 lines, no pointer the repository cannot resolve (issue numbers, folders it
does not hold), an answer no search writes into, and the search-space shortcuts equal to their plain
definitions."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.planner import PlanResult, space
from advisor.planner.job import Outcome

PLANNER = Path(__file__).resolve().parent.parent / "advisor" / "planner"
MODULES = sorted(PLANNER.glob("*.py"))


def _functions(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_planner_functions_are_short_and_take_few_parameters(path):
    too_long, too_many = [], []
    for node in _functions(path):
        a = node.args
        names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs] + [x.arg for x in (a.vararg, a.kwarg) if x]
        names = [n for n in names if n not in ("self", "cls")]
        if node.end_lineno - node.lineno + 1 > 60:
            too_long.append(f"{node.name} ({node.end_lineno - node.lineno + 1} lines)")
        if len(names) > 8:
            too_many.append(f"{node.name} ({len(names)} parameters)")
    assert not too_long and not too_many, (too_long, too_many)
    assert len(path.read_text().splitlines()) <= 600


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_planner_code_points_only_at_what_resolves(path):
    """Issue numbers and the seed and research folders are not in the repository: a reader cannot
    follow them. Sources are public (a paper, a repository path) or in docs/evidence/planner.md."""
    text = path.read_text()
    assert not re.search(r"\bissue \d+", text)
    assert "research/" not in text and "shared/seed" not in text and "seed's" not in text


def test_the_answer_and_each_outcome_are_written_once():
    """plan() combines the searches' outcomes into new results; none of them is written to."""
    result = PlanResult(None, None, "megatron")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.layout = None
    assert dataclasses.fields(Outcome) and Outcome.__dataclass_params__.frozen


def test_evidence_page_exists_and_the_planner_links_it():
    evidence = PLANNER.parent.parent / "docs" / "evidence" / "planner.md"
    assert evidence.exists()
    assert "docs/evidence/planner.md" in (PLANNER / "__init__.py").read_text()


def _plain_variants(shapes_and_bases, gbs, mbs_options):
    """variants_of as its docstring defines it, one (shape, micro-batch) at a time."""
    variants = {}
    for shape, b in shapes_and_bases:
        for mbs in mbs_options:
            m = gbs // (mbs * shape.dp)
            if gbs % (mbs * shape.dp) == 0 and (shape.vpp == 1 or (m >= shape.pp and m % shape.pp == 0)):
                variants.setdefault(b, []).append((mbs, shape.vpp))
    return variants


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4, 8, 16]),
                          st.sampled_from([1, 2]), st.sampled_from([1, 2, 3, 4]),
                          st.sampled_from([1, 2, 4, 8, 16, 64])), max_size=30),
       st.sampled_from([8, 64, 96, 128, 512, 4096]), st.sampled_from([(1, 2, 4), (1,), (2,)]))
def test_variants_of_works_out_each_dp_pp_vpp_once_with_the_same_answer(degrees, gbs, mbs_options):
    """variants_of shares the legal micro-batches between shapes of the same (dp, pp, vpp): the
    answer is the one-at-a-time definition's, in the same order."""
    shaped = []
    for tp, pp, cp, vpp, dp in degrees:
        shape = space.Shape(tp, pp, cp, 1, tp, vpp, dp)
        shaped.append((shape, space.Base(tp, pp, cp, 1, dp)))
    assert space.variants_of(shaped, gbs, mbs_options) == _plain_variants(shaped, gbs, mbs_options)
