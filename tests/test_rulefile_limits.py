"""Issue 21: a site rule file cannot hang the process, exhaust memory or fail every call.

Each reproducer of reliability-probe findings 1, 2, 3, 4, 6, 8, 9 and 14 ends in a RuleFileError
naming the file, the rule and the limit, in well under a second; the watchdog runs everything the
loader accepts at its limits on durable in a subprocess that is killed if it hangs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import advisor
from advisor import EngineError, RuleFileError
from advisor.rulebook import session
from advisor.rulebook.compiled import (MAX_TESTS_PER_RULESET, MAX_TRUE_TESTS_PER_RULESET, CompiledRule, check_ruleset,
                                       dedupe, leaf_tests, true_test_bound)
from advisor.rulebook.engines import durable as durable_engine
from advisor.rulebook.load import (LEAF_RE, MAX_BRANCHES, MAX_CONDITION_CHARS, MAX_CONDITION_DEPTH,
                                   MAX_FORMAT_PRECISION, MAX_FORMAT_WIDTH, MAX_IN_VALUES, MAX_RENDERED_CHARS,
                                   MAX_RULE_FILE_BYTES, MAX_TEMPLATE_CHARS, load_rulebook, parse_condition,
                                   read_site_files, render_message, ruleset_name, site_rulebook)

ENGINES = ["python"] + (["durable"] if durable_engine.durable_available() else [])
CLUSTER = {"gpu": "H100", "gpus": 64}


def rule(when: str, rid: str = "site.allowed-sizes", message: str = "job size {cluster.gpus} is allowed",
         tier: str = "checklist") -> str:
    """One situation rule as TOML; `when` is TOML source (a quoted string or an inline table)."""
    return f'''
[[rule]]
id = "{rid}"
version = 1
title = "Allowed job sizes"
tier = "{tier}"
when = {when}
then = [{{ action = "checklist" }}]
message = {quoted(message)}
rationale = "A reproducer from the reliability probe."
references = [{{ title = "probe", url = "https://example.org" }}]
examples = {{ fire = [{{ "cluster.gpus" = 64 }}], no_fire = [{{ "cluster.gpus" = 100000 }}] }}
'''


def quoted(text: str) -> str:
    """`text` as a TOML basic string (JSON's escapes are TOML's; non-ASCII stays literal)."""
    return json.dumps(text, ensure_ascii=False)


def in_list(n: int, base: int = 0) -> str:
    return quoted("cluster.gpus in [" + ", ".join(str(base + i) for i in range(n)) + "]")


def any_of(n: int, base: int = 0) -> str:
    return "{ any = [" + ", ".join(quoted(f"cluster.gpus == {base + i}") for i in range(n)) + "] }"


def write(tmp_path: Path, text: str, name: str = "site.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def refused(path: Path, field_pattern: str = ".*", want: str = "") -> RuleFileError:
    with pytest.raises(RuleFileError) as info:      # as a call with site rules reads them (rulebook_for)
        site_rulebook(read_site_files((path,)))
    err = info.value
    assert err.path == str(path) and re.fullmatch(field_pattern, err.field), err
    assert want in err.want, err
    return err


# ---------------------------------------------------------------------------------------------
# Finding 1: durable's hang on wide `in` / `any`


@pytest.mark.parametrize("engine", ENGINES)
def test_512_value_in_list_is_refused_before_any_engine_sees_it(tmp_path, engine):
    path = write(tmp_path, rule(in_list(512)))
    with pytest.raises(RuleFileError) as info:
        advisor.recommend(CLUSTER, "llama-3-8b", rules=(path,), engine=engine)
    assert (info.value.path, info.value.rule_id, info.value.field) == (str(path), "site.allowed-sizes", "when")
    assert str(MAX_IN_VALUES) in info.value.want


def test_any_with_512_branches_is_refused(tmp_path):
    refused(write(tmp_path, rule(any_of(512))), r"when\.any", str(MAX_BRANCHES))


def test_a_file_whose_lists_add_up_past_the_ruleset_budget_is_refused(tmp_path):
    # 60 rules of 10 distinct values each hung durable just like one list of 600.
    per_rule = MAX_IN_VALUES
    rules = "".join(rule(in_list(per_rule, base=1000 * k), rid=f"site.sizes-{k}") for k in range(4))
    err = refused(write(tmp_path, rules), "when", str(MAX_TESTS_PER_RULESET))
    assert err.rule_id == f"site.sizes-{MAX_TESTS_PER_RULESET // per_rule}"


def test_check_ruleset_refuses_the_hang_for_direct_engine_callers():
    rules = [CompiledRule(f"r{k}", 10, {"field": "cluster.gpus", "op": "in", "value": list(range(100 * k, 100 * k + 100))})
             for k in range(3)]
    with pytest.raises(EngineError, match="distinct tests"):
        check_ruleset("site", rules)


def any_at_least(n: int, base: int) -> str:
    """An `any` of n ordered tests that all hold for any cluster of at least one GPU."""
    return "{ any = [" + ", ".join(quoted(f"cluster.gpus >= {base - i}") for i in range(n)) + "] }"


def test_more_true_tests_than_durables_match_stack_is_refused(tmp_path):
    # Two rules of 33 true `>=` branches aborted the process in durable (free(): invalid pointer).
    text = rule(any_at_least(33, 0), rid="site.a") + rule(any_at_least(33, -100), rid="site.b")
    err = refused(write(tmp_path, text), "when", str(MAX_TRUE_TESTS_PER_RULESET))
    assert err.rule_id == "site.b"


def test_true_test_bound_is_exact_per_field():
    def bound(*leaves):
        return true_test_bound(leaf_tests({"all": [{"field": f, "op": op, "value": v} for f, op, v in leaves]}))
    assert bound(("c.n", ">", 1), ("c.n", "<=", 1)) == 1                  # exclusive
    assert bound(("c.n", ">", 1), ("c.n", ">", 5), ("c.n", "!=", 3)) == 3  # all hold at 6
    assert bound(("c.n", "in", [1, 2, 3])) == 1
    assert bound(("c.s", "!=", "a"), ("c.s", "!=", "b"), ("c.s", "==", "a")) == 2
    assert bound(("c.n", ">", 1), ("c.m", ">", 1)) == 2                    # fields add up


def nested_groups(levels: int) -> str:
    """all/any alternating `levels` deep, two children each: `levels` groups for durable."""
    node = quoted("cluster.gpus == 1")
    for level in range(levels):
        node = f"{{ {'any' if level % 2 == 0 else 'all'} = [{node}, {quoted(f'cluster.gpus == {level + 2}')}] }}"
    return f"{{ all = [{node}] }}" if levels % 2 == 0 else node


def test_more_than_14_groups_is_a_rule_file_error_naming_file_and_rule(tmp_path):
    load_rulebook((write(tmp_path, rule(nested_groups(14)), "ok.toml"),))
    err = refused(write(tmp_path, rule(nested_groups(15))), "when", "at most 14")
    assert err.rule_id == "site.allowed-sizes"


# ---------------------------------------------------------------------------------------------
# Watchdog: everything accepted at the limits runs on durable, in a subprocess with a deadline


WATCHDOG = r"""
import sys, time
import advisor
from advisor.rulebook.load import builtin_rules_dir, load_rulebook
from advisor.rulebook.session import evaluate_rules
paths = tuple(sys.argv[1:])
book = load_rulebook(paths)        # every built-in file plus the generated ones
for gpus in (1, 8, 64, 4096):
    cluster = {"gpu": "H100", "gpus": gpus}
    advisor.recommend(cluster, "llama-3-8b", rules=paths, engine="durable")
    advisor.audit(cluster, "llama-3-8b", {"tp": 8 if gpus >= 8 else 1}, rules=paths, engine="durable")
print("ok", len(book.rules))
"""


def limit_files(tmp_path: Path) -> list[Path]:
    """Rule files at every load limit at once: the distinct-test budget, the widest `any`, the
    deepest nesting, 14 groups, the longest lists, and the most tests true at once (all of them
    hold for every cluster the watchdog asks about)."""
    third = MAX_IN_VALUES
    full_budget = "".join(rule(in_list(third, base=10_000 * k), rid=f"site.sizes-{k}")
                          for k in range(MAX_TESTS_PER_RULESET // third))
    wide_any = rule(any_of(MAX_BRANCHES), rid="site.wide-any")
    deep = "{ all = [" * (MAX_CONDITION_DEPTH - 1) + quoted("cluster.gpus >= 1") + "] }" * (MAX_CONDITION_DEPTH - 1)
    deep_and_groups = rule(deep, rid="site.deep") + rule(nested_groups(14), rid="site.groups")
    names = rule(quoted("cluster.gpu_name in [" + ", ".join(f'"gpu-{i:055d}"' for i in range(MAX_IN_VALUES)) + "]"),
                 rid="site.long-names")
    half = MAX_TRUE_TESTS_PER_RULESET // 2
    stack = rule(any_at_least(half, 0), rid="site.stack-a") + rule(any_at_least(half, -100), rid="site.stack-b")
    texts = {"budget.toml": full_budget, "wide.toml": wide_any, "deep.toml": deep_and_groups,
             "site policy (1).toml": names, "stack.toml": stack}
    return [write(tmp_path, text, name) for name, text in texts.items()]


@pytest.mark.skipif(not durable_engine.durable_available(), reason="durable_rules does not import here")
def test_watchdog_everything_accepted_at_the_limits_evaluates_on_durable(tmp_path):
    paths = limit_files(tmp_path)
    load_rulebook(tuple(paths))                         # accepted: these are at, not past, the limits
    try:
        done = subprocess.run([sys.executable, "-c", WATCHDOG, *map(str, paths)], capture_output=True,
                              text=True, timeout=10, env={**os.environ, "ADVISOR_ENGINE": "durable"})
    except subprocess.TimeoutExpired:
        pytest.fail("durable_rules hung on a rule set the loader accepted")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("ok")


# ---------------------------------------------------------------------------------------------
# Finding 6: linear parsing


def test_padded_condition_is_refused_quickly(tmp_path):
    refused(write(tmp_path, rule(quoted("cluster.gpus == 1" + " " * 100_000 + "x"))), "when", str(MAX_CONDITION_CHARS))
    with pytest.raises(RuleFileError):       # the matcher itself is linear below the cap too
        parse_condition("cluster.gpus ==" + " " * (MAX_CONDITION_CHARS - 20) + "a\nb", ("f", "r", "when"))


def test_dedupe_is_linear_and_keeps_type_classes():
    assert len(dedupe(list(range(20_000)) * 2)) == 20_000
    assert dedupe([1, True, 1.0, "1", 0, False, -0.0, 0.0]) == [1, True, "1", 0, False]


LEAF_ALPHABET = ["cluster.gpus", "a.b", " ", "\n", "\t", "\u00a0", "\u2028", "==", "!=", "<", "<=", "=",
                 "in", "in[", "[", "]", "1", "x", ",", '"']


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(LEAF_ALPHABET), min_size=1, max_size=10).map("".join))
def test_linear_leaf_matcher_accepts_what_the_documented_grammar_accepts(text):
    old = LEAF_RE.match(text)
    try:
        new = parse_condition(text, ("f", "r", "when"))
    except RuleFileError:
        new = None
    if new is not None:
        assert old is not None and (old.group(1), old.group(2)) == (new["field"], new["op"])
    elif old is not None:
        # The documented regex matches but the leaf is refused: its literal must be bad too.
        name, op, raw = old.groups()
        with pytest.raises(RuleFileError):
            parse_condition(f"{name} {op} {raw.strip() or 'x y'}", ("f", "r", "when"))


# ---------------------------------------------------------------------------------------------
# Findings 2 and 8: format specs and rendered length


@pytest.mark.parametrize("placeholder, want", [
    ("{cluster.gpus:999999999}", f"width of at most {MAX_FORMAT_WIDTH}"),
    ("{cluster.gpu_memory_gib:.2000000000f}", f"precision of at most {MAX_FORMAT_PRECISION}"),
    ("{cluster.gpu_memory_gib:d}", "float facts"),
    ("{cluster.gpu_name:.1f}", "str facts"),
    ("{cluster.gpus:.1}", "int facts"),
    ("{cluster.multi_node:.1%}", "true/false"),
    ("{cluster.gpu_memory_gib:count GiB}", "integer fact"),
    ("{cluster.gpus:count GPU's}", "counted noun"),
    ("{cluster.gpus:count " + "G" * 21 + "}", "counted noun"),
])
def test_format_specs_are_checked_against_the_fact_type_at_load(tmp_path, placeholder, want):
    refused(write(tmp_path, rule(quoted("cluster.gpus > 1"), message="size " + placeholder)), "message", want)


def test_template_length_is_capped_and_rendered_text_is_bounded(tmp_path):
    refused(write(tmp_path, rule(quoted("cluster.gpus > 1"), message="x" * (MAX_TEMPLATE_CHARS + 1))), "message",
            str(MAX_TEMPLATE_CHARS))
    text = render_message("{cluster.gpu_name} " * 3, {"cluster": {"gpu_name": "g" * 10_000}})
    assert len(text) == MAX_RENDERED_CHARS and text.endswith("…")
    assert render_message("{cluster.gpus:>8,}", {"cluster": {"gpus": 4096}}) == "   4,096"


@pytest.mark.parametrize("gpus, text", [(1, "1 GPU"), (0, "0 GPUs"), (64, "64 GPUs")])
def test_a_counted_noun_agrees_with_its_number(gpus, text):
    assert render_message("on {cluster.gpus:count GPU}", {"cluster": {"gpus": gpus}}) == "on " + text


@pytest.mark.parametrize("engine", ENGINES)
def test_widest_accepted_format_renders_a_bounded_message(tmp_path, engine):
    path = write(tmp_path, rule(quoted("cluster.gpus > 1"), message=f"gpus {{cluster.gpus:{MAX_FORMAT_WIDTH}}}"))
    rec = advisor.recommend(CLUSTER, "llama-3-8b", rules=(path,), engine=engine)
    (fired,) = [e for e in rec.trace.events if e.rule_id == "site.allowed-sizes"]
    assert fired.message == "gpus " + " " * (MAX_FORMAT_WIDTH - 2) + "64"


# ---------------------------------------------------------------------------------------------
# Findings 3 and 9: what is read, and how deep


def test_devices_fifos_and_directories_are_refused_without_reading(tmp_path):
    for path in (Path("/dev/zero"), tmp_path):
        with pytest.raises(RuleFileError) as info:
            load_rulebook((path,))
        assert info.value.want == "a regular file"
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "policy.toml"
        os.mkfifo(fifo)
        refused(fifo, "file", "a regular file")


def test_size_is_checked_on_the_bytes_read(tmp_path):
    refused(write(tmp_path, rule(quoted("cluster.gpus > 1")) + "#" * MAX_RULE_FILE_BYTES), "file",
            str(MAX_RULE_FILE_BYTES))


@pytest.mark.parametrize("depth", [300, 3000])
def test_deep_toml_nesting_is_a_rule_file_error(tmp_path, depth):
    refused(write(tmp_path, rule("{ all = [" * depth + quoted("cluster.gpus == 1") + "] }" * depth)), "toml",
            "nested")
    refused(write(tmp_path, "x = " + "[" * 3 * depth + "]" * 3 * depth + "\n", "arrays.toml"), "toml", "nested")


def test_errors_show_long_values_by_their_start(tmp_path):
    err = refused(write(tmp_path, rule("[" + ", ".join(["1"] * 100_000) + "]")), r"when\..*")
    assert len(str(err)) < 1000


def test_condition_nesting_is_capped_before_recursing(tmp_path):
    depth = MAX_CONDITION_DEPTH + 5
    refused(write(tmp_path, rule("{ all = [" * depth + quoted("cluster.gpus == 1") + "] }" * depth)),
            r"when(\.all\[0\])*", f"at most {MAX_CONDITION_DEPTH}")


def test_a_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bom.toml"
    path.write_bytes("\ufeff".encode() + rule(quoted("cluster.gpus > 1")).encode())
    assert "site.allowed-sizes" in load_rulebook((path,)).rules


# ---------------------------------------------------------------------------------------------
# Finding 14: file names


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", ["site policy (1).toml", "политика.toml", "-site.toml", '$x"y.toml'])
def test_any_file_name_loads_and_evaluates(tmp_path, name, engine):
    path = write(tmp_path, rule(quoted("cluster.gpus > 1")), name)
    rec = advisor.recommend(CLUSTER, "llama-3-8b", rules=(path,), engine=engine)
    assert any(e.rule_id == "site.allowed-sizes" for e in rec.trace.events)


def test_sanitised_ruleset_names_stay_distinct_and_keep_valid_stems():
    assert ruleset_name("rules/checklist.toml") == "checklist"
    assert ruleset_name("a b.toml") != ruleset_name("a_b.toml") and ruleset_name("a b.toml") != ruleset_name("a?b.toml")
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", ruleset_name("политика.toml"))


# ---------------------------------------------------------------------------------------------
# Finding 4: the engine cache is bounded and closes what it evicts


@pytest.fixture
def small_cache():
    before = session.engine_cache_size()
    session.set_engine_cache_size(3)
    yield 3
    session.set_engine_cache_size(before)


@pytest.mark.parametrize("engine", ENGINES)
def test_engine_cache_stays_bounded_over_many_distinct_site_files(tmp_path, small_cache, engine):
    registered = []
    for k in range(12):
        path = write(tmp_path, rule(quoted(f"cluster.gpus > {k}")), f"site-{k}.toml")
        advisor.recommend(CLUSTER, "llama-3-8b", rules=(path,), engine=engine)
        assert session.cached_site_contents() <= small_cache
        if engine == "durable":
            registered.append(len(durable_engine._process().refs))
    if engine == "durable":       # evicted engines deleted their durable rulesets
        assert max(registered) == registered[-1] and registered[-1] <= registered[small_cache]


@pytest.mark.skipif(not durable_engine.durable_available(), reason="durable_rules does not import here")
def test_an_engine_evicted_while_evaluating_is_closed_after_it_finishes(tmp_path, small_cache):
    book = session.rulebook_for((write(tmp_path, rule(quoted("cluster.gpus > 1"))),))
    entry = session._acquire(book, "durable")          # as evaluate_rules does: a lease while it runs
    try:
        session.set_engine_cache_size(1)
        for k in range(3):                              # other site files push it out of the cache
            other = write(tmp_path, rule(quoted(f"cluster.gpus > {k + 2}")), f"other-{k}.toml")
            advisor.recommend(CLUSTER, "llama-3-8b", rules=(other,), engine="durable")
        assert entry.evicted and not entry.engine._closed     # not closed under the evaluation
    finally:
        session._release(entry)
    assert entry.engine._closed
    hashed = entry.engine._plans[next(iter(book.rulesets))].hashed
    assert hashed not in durable_engine._process().refs or any(
        e.engine._plans.get(next(iter(book.rulesets))) for e in session._ENGINES.values())


def test_cache_size_is_validated():
    for bad in (0, -1, True, "x", 2.5):
        with pytest.raises(EngineError, match="engine cache size"):
            session.set_engine_cache_size(bad)


def test_threads_evaluating_while_the_cache_evicts_all_succeed(tmp_path, small_cache):
    paths = [write(tmp_path, rule(quoted(f"cluster.gpus > {k}")), f"t-{k}.toml") for k in range(6)]
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(6):
                advisor.recommend(CLUSTER, "llama-3-8b", rules=(paths[(k + i) % len(paths)],))
        except BaseException as exc:            # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and session.cached_site_contents() <= small_cache


# ---------------------------------------------------------------------------------------------
# Hostile rule files: a RuleFileError or a bounded evaluation, never another exception


LEAVES = st.one_of(
    st.builds(lambda n: f"cluster.gpus in [{', '.join(map(str, range(n)))}]", st.integers(1, 3 * MAX_IN_VALUES)),
    st.builds(lambda op, v: f"cluster.gpus {op} {v}", st.sampled_from(["==", "!=", "<", ">=", "in"]),
              st.integers(-2**70, 2**70)),
    st.builds(lambda pad: "cluster.gpus == 1" + " " * pad + "x", st.integers(0, 2 * MAX_CONDITION_CHARS)),
    st.text(min_size=0, max_size=40),
)


def _tree(depth_budget):
    return st.recursive(LEAVES.map(quoted), lambda kids: st.builds(
        lambda key, items: f"{{ {key} = [{', '.join(items)}] }}", st.sampled_from(["all", "any"]),
        st.lists(kids, min_size=1, max_size=6)), max_leaves=depth_budget)


SPECS = st.one_of(st.just(""), st.from_regex(r"[<>^]?[0-9]{0,12},?(\.[0-9]{1,12})?[dfgs%x]?", fullmatch=True),
                  st.text(max_size=8))
FACTS = st.sampled_from(["cluster.gpus", "cluster.gpu_memory_gib", "cluster.gpu_name", "cluster.multi_node"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(when=_tree(40), fact=FACTS, spec=SPECS, wide=st.integers(0, 3))
def test_hostile_rule_files_fail_cleanly_or_evaluate_quickly(tmp_path_factory, when, fact, spec, wide):
    directory = tmp_path_factory.mktemp("hostile")
    message = "value {" + fact + (":" + spec if spec else "") + "}"
    text = rule(when, message=message) + "".join(
        rule(in_list(MAX_IN_VALUES, base=1000 * k), rid=f"site.wide-{k}") for k in range(wide))
    path = write(directory, text)
    try:
        advisor.recommend(CLUSTER, "llama-3-8b", rules=(path,))
    except RuleFileError as exc:
        assert exc.path == str(path)


# ---------------------------------------------------------------------------------------------
# Finding 16: literals read as a reader reads them


def test_a_comma_inside_a_quoted_list_item_stays_in_the_item(tmp_path):
    book = load_rulebook((write(tmp_path, rule(quoted('model.name in ["llama, 70B", "mixtral"]'))),))
    assert book.rules["site.allowed-sizes"].compiled.condition["value"] == ["llama, 70B", "mixtral"]
    refused(write(tmp_path, rule(quoted('model.name in ["llama, "mixtral"]')), "open.toml"), "when", "a closing")


def test_digits_of_other_scripts_are_not_numbers(tmp_path):
    # float() reads Arabic-Indic digits: "cluster.gpus >= ١٠" loaded as ">= 10"
    refused(write(tmp_path, rule(quoted("cluster.gpus >= ١٠"))), "when", "ASCII digits")


def test_doubled_braces_are_literal_braces_as_in_str_format(tmp_path):
    book = load_rulebook((write(tmp_path, rule(quoted("cluster.gpus > 1"), message="{{cluster.gpus}} is {cluster.gpus}")),))
    assert render_message(book.rules["site.allowed-sizes"].spec.message, {"cluster": {"gpus": 64}}) == \
        "{cluster.gpus} is 64"


def _held_by_scan(tests) -> int:
    """true_test_bound's definition, scanned: per field, every deciding value against every test."""
    holds = {"==": lambda x, c: x == c, "!=": lambda x, c: x != c, "<": lambda x, c: x < c,
             "<=": lambda x, c: x <= c, ">": lambda x, c: x > c, ">=": lambda x, c: x >= c}
    total = 0
    for field in {t[0] for t in tests}:
        mine = [(op, v) for f, op, _, v in tests if f == field]
        cs = sorted({v for _, v in mine})
        points = cs + [(a + b) / 2 for a, b in zip(cs, cs[1:])] + [cs[0] - 1, cs[-1] + 1]
        total += max(sum(holds[op](x, c) for op, c in mine) for x in points)
    return total


@given(st.lists(st.tuples(st.sampled_from(["c.n", "c.m"]), st.sampled_from(["==", "!=", "<", "<=", ">", ">="]),
                          st.integers(-3, 3) | st.floats(-3, 3, allow_nan=False)), min_size=1, max_size=30))
def test_true_test_bound_counts_what_a_scan_of_every_test_counts(leaves):
    tests = leaf_tests({"all": [{"field": f, "op": op, "value": v} for f, op, v in leaves]})
    assert true_test_bound(tests) == _held_by_scan(tests)


@given(st.lists(st.lists(st.tuples(st.sampled_from(["c.n", "c.m", "c.s"]), st.sampled_from(["==", "!=", "<", ">="]),
                                   st.integers(-3, 3)), min_size=1, max_size=6), min_size=1, max_size=12))
def test_the_bound_kept_per_field_equals_the_bound_of_everything_so_far(rules):
    """check_ruleset keeps true_test_bound per field as rules are added (compiled._TrueTests): after
    every rule it equals the bound computed from scratch over all tests so far."""
    from advisor.rulebook.compiled import _TrueTests
    bound, tests = _TrueTests(), set()
    for leaves in rules:
        new = leaf_tests({"all": [{"field": f, "op": op, "value": v} for f, op, v in leaves]}) - tests
        tests |= new
        assert bound.add(new) == true_test_bound(tests)
