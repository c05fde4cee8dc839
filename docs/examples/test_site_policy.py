"""Tests for site-policy.toml. Copy next to your own site rules and adapt; run with pytest."""

from pathlib import Path

import pytest

import advisor
from advisor.facts import build_facts
from advisor.inputs.specs import resolve_training
from advisor.rulebook.engines.python import evaluate
from advisor.rulebook.load import load_rulebook

SITE = Path(__file__).with_name("site-policy.toml")
BOOK = load_rulebook((SITE,))        # built-in rules + ours; a mistake raises RuleFileError
SITE_RULES = [rule for rule in BOOK.rules.values() if Path(rule.path) == SITE]


def reference_facts(overrides):
    """The reference situation of rule examples (Llama-3-70B on 64 H100, 8k tokens), overridden."""
    cluster, model = advisor.Cluster(gpu="H100-SXM-80GB", gpus=64), advisor.Model.preset("llama-3-70b")
    training, _ = resolve_training(model, advisor.Training(seq_len=8192, global_batch_size=512))
    facts = build_facts(cluster, model, training)
    for name, value in overrides.items():
        group, field = name.split(".")
        facts[group][field] = value
    return facts


@pytest.mark.parametrize("rule", SITE_RULES, ids=lambda rule: rule.id)
def test_examples(rule):
    for example in rule.spec.examples.fire:
        assert evaluate(rule.compiled.condition, reference_facts(example)), example
    for example in rule.spec.examples.no_fire:
        assert not evaluate(rule.compiled.condition, reference_facts(example)), example


def test_end_to_end():
    rec = advisor.recommend({"gpu": "H100", "gpus": 256}, "llama-3-70b", rules=(SITE,))
    assert rec.framework == "torchtitan"
    assert "site.reserve-large-jobs" in [item.rule_id for item in rec.checklist]
