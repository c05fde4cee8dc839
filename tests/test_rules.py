"""Every rule in rules/: its examples fire and do not fire, on both engines; the files are well formed."""

import pytest

from advisor import Cluster, Layout, Model, Training
from advisor.facts import CATALOGUE, LayoutCase, build_layout_facts
from advisor.rulebook.engines import make_engine
from advisor.rulebook.engines.durable import durable_available
from advisor.rulebook.engines.python import evaluate
from advisor.rulebook.load import builtin_rulebook

BOOK = builtin_rulebook()
# The reference situation every example overrides: Llama-3-70B on 64 H100 at 8k, judged with a
# legal Megatron layout (tp8 pp2 dp4, SP, distributed optimizer) that fits.
REFERENCE = build_layout_facts(LayoutCase(
    Cluster(gpu="H100-SXM-80GB", gpus=64), Model.preset("llama-3-70b"), Training(seq_len=8192, global_batch_size=512),
    Layout(framework="megatron", tp=8, pp=2, dp=4, sp=True, zero_stage=1), memory=None,
))
# durable_rules does not import on Python 3.13+ (research/durable-rules.md §6.2): test what exists.
ENGINES = {name: make_engine(BOOK.rulesets, name)
           for name in (("durable", "python") if durable_available() else ("python",))}


def _with(overrides):
    facts = {group: dict(values) for group, values in REFERENCE.items()}
    for name, value in overrides.items():
        group, field = name.split(".")
        facts[group][field] = value
    return facts


CASES = [(rule_id, kind, i, example)
         for rule_id, rule in BOOK.rules.items()
         for kind in ("fire", "no_fire")
         for i, example in enumerate(getattr(rule.spec.examples, kind))]


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("rule_id, kind, i, example", CASES, ids=[f"{c[0]}-{c[1]}{c[2]}" for c in CASES])
def test_rule_examples(engine, rule_id, kind, i, example):
    facts = _with(example)
    fired = ENGINES[engine].evaluate(BOOK.ruleset_of(rule_id), facts)
    assert (rule_id in fired) == (kind == "fire"), f"{rule_id} {kind} example {i}: {example}"
    assert evaluate(BOOK.rules[rule_id].compiled.condition, facts) == (kind == "fire")


def test_every_rule_is_documented_and_cited():
    for rule in BOOK.rules.values():
        assert rule.spec.references and all(r.url or r.path for r in rule.spec.references), rule.id
        assert len(rule.spec.rationale) > 40, rule.id


def test_seed_matrix_rows_and_checklist_items_all_have_rules():
    ids = set(BOOK.rules)
    rows = {"matrix.small-cluster-tight-memory", "matrix.large-model-tp-pp", "matrix.giant-cluster-combo",
            "matrix.long-sequence-sp-flash"}
    items = {"checklist.small-cluster-start-with-zero", "checklist.large-model-pin-tp-to-node",
             "checklist.giant-validate-each-dimension", "checklist.long-sequence-sp-flash",
             "checklist.acceptance-baselines"}
    assert rows | items <= ids


def test_rule_fields_exist_in_the_catalogue():
    for rule in BOOK.rules.values():
        assert set(rule.fields) <= set(CATALOGUE), rule.id


def test_revision_is_stable_across_loads():
    from advisor.rulebook.load import load_rulebook
    assert load_rulebook().revision == BOOK.revision


def test_reference_layout_is_clean():
    """The reference situation fires no audit finding but the vocabulary-padding note."""
    for ruleset in BOOK.rulesets_in("layout"):
        fired = ENGINES[sorted(ENGINES)[0]].evaluate(ruleset, REFERENCE)
        assert fired in ([], ["megatron.vocab-padding"]), (ruleset, fired)
