"""Malformed rule files fail at load time naming the file, the rule id and the field."""

import shutil
from pathlib import Path

import pytest

from advisor import RuleFileError
from advisor.rulebook.load import builtin_rules_dir, load_rulebook, parse_condition, read_site_files, site_rulebook

GOOD = '''
[[rule]]
id = "site.no-more-than-four-way-tp"
version = 1
title = "Site policy: TP at most 4"
tier = "constraint"
when = "cluster.gpus > 1"
then = [{ action = "limit", dimension = "tp", max = 4 }]
message = "site policy: tp <= 4"
rationale = "Our racks wire NVLink in groups of four GPUs."
references = [{ title = "Site wiki: rack layout", url = "https://example.org/racks" }]
[rule.examples]
fire = [{ "cluster.gpus" = 8 }]
no_fire = [{ "cluster.gpus" = 1 }]
'''


def _load(tmp_path: Path, text: str) -> None:
    path = tmp_path / "site.toml"
    path.write_text(text, encoding="utf-8")
    site_rulebook(read_site_files((path,)))      # as a call with site rules reads them (rulebook_for)


def test_good_site_rule_loads(tmp_path):
    path = tmp_path / "site.toml"
    path.write_text(GOOD, encoding="utf-8")
    book = load_rulebook((path,))
    assert "site.no-more-than-four-way-tp" in book.rules


@pytest.mark.parametrize("old, new, field, want", [
    ('tier = "constraint"', 'tier = "hihg"', "tier", "one of"),
    ('when = "cluster.gpus > 1"', 'when = "cluster.gpuz > 1"', "when", "known fact"),
    ('when = "cluster.gpus > 1"', 'when = "cluster.gpus > \'1\'"', "when", "is a number"),
    ('when = "cluster.gpus > 1"', 'when = "cluster.multi_node > 1"', "when", "boolean"),
    ('when = "cluster.gpus > 1"', 'when = "cluster.gpus > 1e999"', "when", "rule engine"),
    ('when = "cluster.gpus > 1"', 'when = "cluster.gpus > 9223372036854775808"', "when", "rule engine"),
    ('when = "cluster.gpus > 1"', 'when = "layout.tp > 1"', "when", "scope"),
    ('when = "cluster.gpus > 1"', 'when = "cluster.gpus ~ 1"', "when", "<op>"),
    ('when = "cluster.gpus > 1"', 'when = { all = [] }', "when.all", "non-empty"),
    ('when = "cluster.gpus > 1"', 'when = "__import__(\'os\').system(\'x\')"', "when", "<op>"),
    ('action = "limit"', 'action = "run_python"', "then.0", "action"),
    ('{ action = "limit", dimension = "tp", max = 4 }', '{ action = "checklist", needs = ["gpu"] }',
     "then.0.checklist.needs.0", "'tp', 'pp', 'cp', 'ep' or 'dp'"),
    ('{ action = "limit", dimension = "tp", max = 4 }', '{ action = "disable", feature = "cp" }',
     "then.0.disable.feature", "'sp'"),
    ('max = 4', 'max = "cluster.gpu_name"', "then[0].max", "int fact"),
    ('version = 1', 'version = 0', "version", "greater than or equal"),
    ('references = [{ title = "Site wiki: rack layout", url = "https://example.org/racks" }]', 'references = []', "references", "at least 1"),
    ('message = "site policy: tp <= 4"', 'message = "tp <= {cluster.nope}"', "message", "placeholder"),
    ('no_fire = [{ "cluster.gpus" = 1 }]', 'no_fire = [{ "cluster.gpus" = "1" }]', "examples.no_fire[0].cluster.gpus", "int"),
    ('id = "site.no-more-than-four-way-tp"', 'id = "Site Rule"', "id", "lower-case"),
])
def test_malformed_rule_names_file_rule_and_field(tmp_path, old, new, field, want):
    assert old in GOOD
    with pytest.raises(RuleFileError) as err:
        _load(tmp_path, GOOD.replace(old, new))
    e = err.value
    assert e.path.endswith("site.toml")
    assert e.rule_id in ("site.no-more-than-four-way-tp", "Site Rule")
    assert e.field == field, str(e)
    assert want in str(e)


def test_unknown_key_is_rejected(tmp_path):
    with pytest.raises(RuleFileError) as err:
        _load(tmp_path, GOOD.replace('version = 1', 'version = 1\nrun = "os.system"'))
    assert err.value.field == "run"


def test_invalid_toml(tmp_path):
    with pytest.raises(RuleFileError) as err:
        _load(tmp_path, GOOD + "\n[[rule]\n")
    assert err.value.field == "toml"


def test_duplicate_id_across_files(tmp_path):
    dup = GOOD.replace("site.no-more-than-four-way-tp", "constraint.tp-within-nvlink-domain")
    with pytest.raises(RuleFileError, match="already defined"):
        _load(tmp_path, dup)


def test_too_many_rules_in_one_file(tmp_path):
    text = "".join(GOOD.replace("four-way-tp", f"four-way-tp-{i}") for i in range(61))
    with pytest.raises(RuleFileError, match="at most 60"):
        _load(tmp_path, text)


def test_oversized_file(tmp_path):
    with pytest.raises(RuleFileError, match="at most"):
        _load(tmp_path, GOOD + "#" * (600 * 1024))


def test_broken_builtin_tier_file(tmp_path):
    root = tmp_path / "rules"
    shutil.copytree(builtin_rules_dir(), root)
    (root / "tiers.toml").write_text("[tiers]\nconstraint = 'ten'\n", encoding="utf-8")
    with pytest.raises(RuleFileError) as err:
        load_rulebook(root=root)
    assert err.value.field == "tiers.constraint"


def test_condition_grammar():
    where = ("f", "r", "when")
    assert parse_condition("model.params_b >= 70", where) == {"field": "model.params_b", "op": ">=", "value": 70}
    assert parse_condition('cluster.gpu_name in ["H100-SXM-80GB", "H200"]', where)["value"] == ["H100-SXM-80GB", "H200"]
    tree = parse_condition({"any": ["cluster.gpus <= 32", {"all": ["model.is_moe == true", "training.seq_len >= 8192"]}]}, where)
    assert tree["any"][1]["all"][0] == {"field": "model.is_moe", "op": "==", "value": True}
