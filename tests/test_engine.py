"""Tests of advisor.engine (the durable_rules adapter): one regression test per trap of
research/durable-rules.md §7.8, plus thread, fork and memory smoke tests."""

from __future__ import annotations

import multiprocessing
import os
import re
import threading

import pytest

import advisor.rulebook.compiled as ev_mod
import advisor.rulebook.engines.durable as eng_mod
from advisor.errors import EngineError
from advisor.rulebook.compiled import CompiledRule
from advisor.rulebook.engines import engine_info, make_engine
from advisor.rulebook.engines.durable import FACT_KIND, SINK_RULE, DurableEngine, translate_condition
from advisor.rulebook.engines.python import PythonEngine

pytestmark = pytest.mark.skipif(not eng_mod.durable_available(), reason="durable_rules does not import here")


from engine_fixtures import FACT, L  # noqa: E402  (tests/ is on sys.path via rootdir conftest)
from threads import run_in_threads  # noqa: E402


def matrix_rules(n=20):
    """A selection-matrix-like ruleset: thresholds, equalities, `in`, `any`, varied pri."""
    rules = []
    for i in range(n):
        k = i % 5
        if k == 0:
            cond = {"all": [L("cluster.gpus", "<=", 8 * (i + 1)), L("model.is_moe", "==", False)]}
        elif k == 1:
            cond = {"all": [L("cluster.gpu_name", "in", ["H100-SXM-80GB", "A100-SXM-80GB"]), L("model.params", ">", i * 10**9)]}
        elif k == 2:
            cond = {"any": [L("sizing.states_fit_gpu", "==", True), L("sizing.states_gpu_ratio", ">", float(i) + 0.5)]}
        elif k == 3:
            cond = L("cluster.nvlink_domain", "!=", 8)
        else:
            cond = {"all": [L("cluster.gpus", ">=", i), {"any": [L("model.params", "<", 10**10), L("cluster.nvlink_domain", ">=", 8)]}]}
        rules.append(CompiledRule(f"matrix.row-{i}", (i * 7) % 4, cond))
    return rules


def facts(n=30):
    out = []
    for i in range(n):
        out.append(
            {
                "cluster": {"gpus": [1, 8, 16, 64, 512][i % 5], "nvlink_domain": [4, 8, 72][i % 3], "gpu_name": ["H100-SXM-80GB", "A100-SXM-80GB", "MI300X"][i % 3]},
                "model": {"params": [7 * 10**9, 70553706496, 405 * 10**9][i % 3], "is_moe": i % 2 == 0},
                "sizing": {"states_fit_gpu": i % 4 == 0, "states_gpu_ratio": [0.1, 0.25, 14.78, 80.0][i % 4]},
            }
        )
    return out


@pytest.fixture(scope="module")
def engines():
    rs = {"matrix": matrix_rules(), "check": matrix_rules(7)}
    d = DurableEngine(rs)
    yield d, PythonEngine(rs)
    d.close()


# ---------------------------------------------------------------- basics


def test_same_answers_as_python_engine(engines):
    d, p = engines
    assert d.name == "durable"
    for f in facts():
        for rs in ("matrix", "check"):
            assert d.evaluate(rs, f) == p.evaluate(rs, f)


def test_translation_always_starts_with_the_kind_guard():
    # research §1.3: a pattern without a positive discriminator ($nex-only) matches durable's
    # state document and loops forever. Every translated pattern starts with kind == FACT_KIND.
    conds = [L("g.a", "==", 1), {"any": [L("g.a", "==", 1), L("g.b", "!=", "x")]}, L("g.a", "in", [1, 2])]
    conds += [r.condition for r in matrix_rules()]
    for cond in conds:
        pattern = translate_condition(cond)
        assert list(pattern) == ["$and"] and pattern["$and"][0] == {"kind": FACT_KIND}
    d = DurableEngine({"m": matrix_rules(3)})
    for name, rule in d._plans["m"].definition.items():
        (pattern,) = rule["all"]
        assert list(pattern) == ["m"]
        m = pattern["m"]
        assert m == {"kind": FACT_KIND} if name == SINK_RULE else m["$and"][0] == {"kind": FACT_KIND}
    d.close()


def test_translation_operators():
    pattern = translate_condition({"all": [L("g.a", "!=", 1), L("g.b", "in", ["x", "y", "x"]), {"any": [L("g.c", "<", 1.5), L("g.d", "in", [1, 2])]}]})
    assert pattern == {
        "$and": [
            {"kind": FACT_KIND},
            {"$neq": {"g.a": 1}},
            {"$or": [{"$eq": {"g.b": "x"}}, {"$eq": {"g.b": "y"}}]},
            {"$or": [{"$lt": {"g.c": 1.5}}, {"$eq": {"g.d": 1}}, {"$eq": {"g.d": 2}}]},
        ]
    }


def test_no_timer_threads():
    # research §3.2: the stock Host starts two never-ending Timer threads per Host
    before = threading.active_count()
    engines = [DurableEngine({"m": matrix_rules(2)}) for _ in range(3)]
    for e in engines:
        e.evaluate("m", FACT)
    assert threading.active_count() == before
    for e in engines:
        e.close()


def test_unknown_ruleset_and_bad_facts(engines):
    d, _ = engines
    with pytest.raises(EngineError, match="unknown ruleset"):
        d.evaluate("nope", FACT)
    with pytest.raises(EngineError, match="lacks field"):
        d.evaluate("matrix", {"cluster": {"gpus": 1}})
    bad = {**FACT, "cluster": {**FACT["cluster"], "gpus": "64"}}  # durable would say "64" == 64
    with pytest.raises(EngineError, match="cluster.gpus"):
        d.evaluate("matrix", bad)


# ---------------------------------------------------------------- traps (research §7.8)


def test_unhandled_fact_is_caught_by_the_sink():
    # research §4.1: a fact no rule matches raises MessageNotHandledException before any action
    d = DurableEngine({"m": [CompiledRule("never", 0, L("cluster.gpus", "==", -1))]})
    assert d.evaluate("m", FACT) == []
    d.close()


def test_action_exception_surfaces(monkeypatch):
    # research §4.2: durable swallows an action's exception into state["exception"]
    d = DurableEngine({"m": matrix_rules(5)})
    want = d.evaluate("m", FACT)
    victim = want[1]
    sids = []
    real_new_sid = eng_mod._new_sid
    monkeypatch.setattr(eng_mod, "_new_sid", lambda: sids.append(real_new_sid()) or sids[-1])

    def hook(rule_id):
        if rule_id == victim:
            raise ZeroDivisionError("boom")

    monkeypatch.setattr(eng_mod, "_action_hook", hook)
    with pytest.raises(EngineError, match="ZeroDivisionError: boom") as info:
        d.evaluate("m", FACT)
    assert info.value.rule_id == victim
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    assert not eng_mod._state_exists(d.registered_name("m"), sids[-1])  # cleaned up anyway
    assert not eng_mod._process().traces
    monkeypatch.setattr(eng_mod, "_action_hook", None)
    assert d.evaluate("m", FACT) == want
    d.close()


def test_exception_recorded_only_by_durable_surfaces(monkeypatch):
    # The path where durable alone knows about the failure: its state["exception"] (§4.2).
    def make_action(proc, rule_id):
        def action(c):
            raise KeyError(rule_id)

        return action

    monkeypatch.setattr(eng_mod, "_make_action", make_action)
    d = DurableEngine({"raw-exc": [CompiledRule("x", 0, L("cluster.gpus", ">", 0))]})
    with pytest.raises(EngineError, match="an action failed inside durable: exception caught 'x'"):
        d.evaluate("raw-exc", FACT)
    assert not eng_mod._process().traces
    d.close()


def test_slow_action_surfaces(monkeypatch):
    # research §4.2: an action running longer than 10 s makes durable return 0 and silently
    # drop the rest of the agenda. Simulate the 11 s by moving durable's clock in the action.
    rules = [CompiledRule("slow", 0, L("cluster.gpus", ">", 0)), CompiledRule("later", 1, L("cluster.gpus", ">", 0))]
    d = DurableEngine({"m": rules})
    skew = [0.0]
    monkeypatch.setattr(eng_mod._dr, "_unix_now", lambda: eng_mod.time.time() + skew[0])
    monkeypatch.setattr(eng_mod, "_action_hook", lambda rule_id: skew.__setitem__(0, skew[0] + 11.0))
    with pytest.raises(EngineError, match="did not complete"):
        d.evaluate("m", FACT)
    assert not eng_mod._process().traces
    monkeypatch.undo()
    assert d.evaluate("m", FACT) == ["slow", "later"]
    d.close()


def test_firing_budget():
    rules = [CompiledRule(f"r{i}", 0, L("cluster.gpus", ">", i)) for i in range(3)]
    assert DurableEngine({"m": rules}, max_firings=3).evaluate("m", FACT) == ["r0", "r1", "r2"]
    with pytest.raises(EngineError, match="budget"):
        DurableEngine({"m": rules}, max_firings=2).evaluate("m", FACT)


def test_budget_default_comes_from_module(monkeypatch):
    monkeypatch.setattr(eng_mod, "MAX_FIRINGS", 1)
    rules = [CompiledRule(f"r{i}", 0, L("cluster.gpus", ">", i)) for i in range(2)]
    with pytest.raises(EngineError, match="more than 1 firings"):
        DurableEngine({"m": rules}).evaluate("m", FACT)


def test_any_with_several_true_branches_reports_the_rule_once():
    # durable fires a rule once per true $or branch (measured); one fact matches a rule once
    cond = {"any": [L("cluster.gpus", ">", 1), L("cluster.gpus", ">", 2), L("cluster.gpu_name", "in", ["H100-SXM-80GB", "x"])]}
    rules = [CompiledRule("a", 0, cond), CompiledRule("b", 0, L("cluster.gpus", ">", 0))]
    d = DurableEngine({"m": rules})
    assert d.evaluate("m", FACT) == ["a", "b"]
    d.close()


@pytest.mark.parametrize("engine_cls", [DurableEngine, PythonEngine])
def test_exponent_floats_are_normalised(engine_cls):
    # research §4.3: durable fails with error 204 on "1e-09" / "1e+16" (no "." before the
    # exponent), in facts and in rule constants alike.
    rules = [
        CompiledRule("tiny-eq", 0, L("s.x", "==", 1e-09)),
        CompiledRule("tiny-lt", 0, L("s.x", "<", 1e-08)),
        CompiledRule("tiny-gt", 0, L("s.x", ">", 9.999999999999999e-10)),
        CompiledRule("tiny-in", 0, L("s.x", "in", [3e-07, 1e-09])),
        CompiledRule("big-eq", 0, L("s.y", "==", 1e16)),
        CompiledRule("big-gt", 0, L("s.y", ">", 1e16 - 2)),
        CompiledRule("big-lt", 0, L("s.y", "<", 2e16)),
    ]
    e = engine_cls({"m": rules})
    everything = [r.id for r in rules]
    assert e.evaluate("m", {"s": {"x": 1e-09, "y": 1e16}}) == everything
    assert e.evaluate("m", {"s": {"x": 1e-09, "y": 10**16}}) == everything
    assert e.evaluate("m", {"s": {"x": 3e-07, "y": 3e16}}) == ["tiny-gt", "tiny-in", "big-gt"]
    assert e.evaluate("m", {"s": {"x": 1.0000000000000003e-09, "y": 1e16 - 2}}) == ["tiny-lt", "tiny-gt", "big-lt"]
    if engine_cls is DurableEngine:
        e.close()


@pytest.mark.parametrize("engine_cls", [DurableEngine, PythonEngine])
def test_int_at_least_2_pow_63_is_rejected(engine_cls):
    # research §4.3: durable compares ints >= 2**64 silently wrong
    e = engine_cls({"m": [CompiledRule("big", 0, L("model.params", ">", 2**62))]})
    assert e.evaluate("m", {"model": {"params": 2**63 - 1}}) == ["big"]
    with pytest.raises(EngineError, match="model.params"):
        e.evaluate("m", {"model": {"params": 2**63}})
    with pytest.raises(EngineError, match="2\\*\\*63"):
        engine_cls({"m": [CompiledRule("big", 0, L("model.params", ">", 2**64))]})


def test_pri_order_lower_first_ties_in_definition_order():
    # research §2.2. Twelve rules: durable names them r0..r11, so a lexicographic order
    # ("r10" < "r2") would show up here.
    pris = [2, 0, 2, 1, 0, 2, 2, 2, 2, 2, 2, 65534]
    rules = [CompiledRule(f"id-{chr(ord('z') - i)}", p, L("cluster.gpus", ">", 0)) for i, p in enumerate(pris)]
    d = DurableEngine({"m": rules})
    want = ["id-y", "id-v", "id-w", "id-z", "id-x", "id-u", "id-t", "id-s", "id-r", "id-q", "id-p", "id-o"]
    assert d.evaluate("m", FACT) == want == PythonEngine({"m": rules}).evaluate("m", FACT)
    d.close()


def test_more_than_60_rules_refused():
    rules = [CompiledRule(f"r{i}", 0, L("cluster.gpus", ">", i)) for i in range(61)]
    with pytest.raises(EngineError, match=r"'big' has 61 rules.*at most 60.*64"):
        DurableEngine({"big": rules})


def test_alpha_stack_overflow_is_refused_before_durable_sees_it(monkeypatch):
    # research §4.5: > 64 matching sibling tests -> error 303, or (measured in a fresh process)
    # an abort in free(). Rules of `any` over 5 distinct true tests in 15 rules put 75 matching
    # tests under the kind guard, so the 60-rule limit alone does not rule it out: check_ruleset
    # bounds the tests that can hold at once.
    rules = [CompiledRule(f"r{i}", 0, {"any": [L("cluster.gpus", ">", 5 * i + j) for j in range(5)]}) for i in range(15)]
    for engine in (DurableEngine, PythonEngine):
        with pytest.raises(EngineError, match="tests can hold for one fact; at most 48"):
            engine({"wide": rules})
    d = DurableEngine({"wide": rules[:9]})          # 45: within the bound, evaluates normally
    assert len(d.evaluate("wide", {"cluster": {"gpus": 10**6}})) == 9
    assert not eng_mod._process().traces
    d.close()


def test_registration_failure_names_the_ruleset(monkeypatch):
    # Fail fast at construction. Lift our own group limit so durable's (error 113) is hit.
    monkeypatch.setattr(ev_mod, "MAX_GROUPS_PER_RULE", 100)
    node = L("g.a", ">", 0)
    for i in range(16):
        node = {("any" if i % 2 == 0 else "all"): [L("g.a", ">", i + 1), node]}
    with pytest.raises(EngineError, match=r"ruleset 'deep'.*113"):
        DurableEngine({"ok": matrix_rules(2), "deep": [CompiledRule("r", 0, node)]})
    # the ruleset registered before the failure was rolled back
    assert not [n for n in eng_mod._process().host._ruleset_directory if n.startswith("ok_")]


def test_unparsable_fact_raises_instead_of_crashing(monkeypatch):
    # Without our float-safe JSON, durable cannot parse 1e-09 (error 204, research §4.3). In a
    # one-element assert_facts batch that crashed the interpreter (segfault in
    # start_action_for_state, measured); the adapter's single assert_fact raises cleanly.
    d = DurableEngine({"m": [CompiledRule("a", 0, L("s.x", "==", 0.5))]})
    monkeypatch.setattr(eng_mod._dr, "json", eng_mod.json)
    for _ in range(3):
        with pytest.raises(EngineError, match="204"):
            d.evaluate("m", {"s": {"x": 1e-09}})
    assert not eng_mod._process().traces
    monkeypatch.undo()
    assert d.evaluate("m", {"s": {"x": 0.5}}) == ["a"]
    assert d.evaluate("m", {"s": {"x": 1e-09}}) == []
    d.close()


@pytest.mark.parametrize(
    "obj",
    [
        {"sid": "3e4f", "x": 1e-09, "y": [3e-07, -1e-05, 0.5, 1e-300], "z": {"w": "1e5", "n": 10**16}},
        [1.5e-05, 2e-07, True, None, "a,1e5", {"k:1e5": -4e-10}],
        {"plain": 1, "s": "no exponent"},
    ],
)
def test_durable_json_writes_parsable_floats(obj):
    text = eng_mod._DurableJson.dumps(obj, ensure_ascii=False)
    assert eng_mod.json.loads(text) == obj
    numbers_only = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)  # drop string literals
    assert re.search(r"(?<![\d.])\d+[eE]", numbers_only) is None  # every exponent has a "." before it


def test_same_content_registers_once_and_close_frees_it():
    rs = {"m": matrix_rules(4)}
    a, b = DurableEngine(rs), DurableEngine(rs)
    name = a.registered_name("m")
    assert name == b.registered_name("m") and name.startswith("m_") and len(name) == len("m_") + 12
    host = eng_mod._process().host
    assert eng_mod._process().refs[name] == 2
    a.close()
    assert b.evaluate("m", FACT) == PythonEngine(rs).evaluate("m", FACT)
    with pytest.raises(EngineError, match="closed"):
        a.evaluate("m", FACT)
    b.close()
    assert name not in host._ruleset_directory and name not in eng_mod._process().refs
    c = DurableEngine({"m": matrix_rules(5)})  # different content, different name
    assert c.registered_name("m") != name
    c.close()


def test_fresh_process_state_after_simulated_fork(monkeypatch, engines):
    # research §3.4/§7.5: a fork may happen while another thread holds the lock; the child
    # rebuilds host and lock when os.getpid() changes, and re-registers lazily.
    d, p = engines
    before = eng_mod._process()
    d.evaluate("matrix", FACT)
    real_pid = os.getpid()
    before.lock.acquire()  # "another thread" holds the lock at fork time
    try:
        monkeypatch.setattr(eng_mod.os, "getpid", lambda: real_pid + 100_000)
        for f in facts(10):
            assert d.evaluate("matrix", f) == p.evaluate("matrix", f)
        after = eng_mod._process()
        assert after is not before and after.lock is not before.lock and after.host is not before.host
        assert after.pid == real_pid + 100_000 and d._proc is after
        assert d.registered_name("matrix") in after.host._ruleset_directory
    finally:
        monkeypatch.setattr(eng_mod.os, "getpid", lambda: real_pid)
        before.lock.release()
    assert d.evaluate("matrix", FACT) == p.evaluate("matrix", FACT)  # rebuilt again for the real pid


# ---------------------------------------------------------------- smoke: memory, threads, fork


def _rss_kib() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_memory_smoke(monkeypatch):
    # research §3.1: without delete_state each session costs ~155 KB, and the 1025th live sid
    # of a ruleset raises MemoryError. 2,000 evaluations must leave no live session.
    d = DurableEngine({"m": matrix_rules()})
    fs = facts(20)
    for f in fs:
        d.evaluate("m", f)
    sids = []
    real_new_sid = eng_mod._new_sid
    monkeypatch.setattr(eng_mod, "_new_sid", lambda: sids.append(real_new_sid()) or sids[-1])
    rss0 = _rss_kib()
    for i in range(2000):
        d.evaluate("m", fs[i % len(fs)])
    growth = _rss_kib() - rss0
    assert len(sids) == 2000
    name = d.registered_name("m")
    assert sum(eng_mod._state_exists(name, s) for s in sids) == 0
    assert not eng_mod._process().traces
    assert growth < 5 * 1024, f"RSS grew by {growth} KiB"
    d.close()


def test_thread_smoke(engines):
    # research §3.3: unlocked sharing segfaults; the engine's lock makes 8 threads safe.
    d, _ = engines
    fs = facts(30)
    want = [d.evaluate("matrix", f) for f in fs]
    results: dict[int, list] = {}
    errors: list = []

    def work(k):
        results[k] = [d.evaluate("matrix", fs[(k + i) % len(fs)]) for i in range(300)]

    errors += run_in_threads(work, 8)
    assert not errors
    for k in range(8):
        assert results[k] == [want[(k + i) % len(fs)] for i in range(300)]


_FORK_ENGINE: DurableEngine | None = None


def _fork_worker(k, queue):
    fs = facts(30)
    out = [_FORK_ENGINE.evaluate("matrix", fs[(k + i) % len(fs)]) for i in range(200)]
    proc = eng_mod._process()
    queue.put((k, out, proc.pid == os.getpid(), _FORK_ENGINE._proc is proc))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_fork_smoke(engines):
    global _FORK_ENGINE
    d, _ = engines
    _FORK_ENGINE = d
    fs = facts(30)
    want = [d.evaluate("matrix", f) for f in fs]  # the parent has used the engine before forking
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_fork_worker, args=(k, queue)) for k in range(2)]
    for pr in procs:
        pr.start()
    got = dict((k, rest) for k, *rest in (queue.get(timeout=60) for _ in procs))
    for pr in procs:
        pr.join(timeout=60)
        assert pr.exitcode == 0
    for k in range(2):
        out, own_pid, reattached = got[k]
        assert own_pid and reattached
        assert out == [want[(k + i) % len(fs)] for i in range(200)]
    assert d.evaluate("matrix", fs[0]) == want[0]  # the parent still works
    _FORK_ENGINE = None


# ---------------------------------------------------------------- selection and info


def test_make_engine_selection(monkeypatch):
    rs = {"m": matrix_rules(2)}
    monkeypatch.delenv("ADVISOR_ENGINE", raising=False)
    e = make_engine(rs)
    assert isinstance(e, DurableEngine)
    e.close()
    assert isinstance(make_engine(rs, "python"), PythonEngine)
    monkeypatch.setenv("ADVISOR_ENGINE", "python")
    assert isinstance(make_engine(rs), PythonEngine)
    e = make_engine(rs, "durable")  # explicit name beats the environment
    assert isinstance(e, DurableEngine)
    e.close()
    monkeypatch.setenv("ADVISOR_ENGINE", "drools")
    with pytest.raises(EngineError, match="ADVISOR_ENGINE.*drools"):
        make_engine(rs)
    with pytest.raises(EngineError, match="unknown engine"):
        make_engine(rs, "clips")


def test_make_engine_without_durable(monkeypatch):
    monkeypatch.setattr(eng_mod, "_dr", None)
    monkeypatch.setattr(eng_mod, "_IMPORT_ERROR", "ImportError: undefined symbol: PyEval_CallObject")
    monkeypatch.delenv("ADVISOR_ENGINE", raising=False)
    rs = {"m": matrix_rules(2)}
    assert isinstance(make_engine(rs), PythonEngine)
    with pytest.raises(EngineError, match="PyEval_CallObject"):
        make_engine(rs, "durable")
    monkeypatch.setenv("ADVISOR_ENGINE", "durable")
    with pytest.raises(EngineError, match="cannot be imported"):
        make_engine(rs)
    with pytest.raises(EngineError, match="cannot be imported"):
        DurableEngine(rs)
    with pytest.raises(EngineError, match="cannot be imported"):
        engine_info()
    monkeypatch.setenv("ADVISOR_ENGINE", "python")
    assert engine_info() == {"engine": "python", "durable_rules": None, "python": engine_info()["python"]}


def test_engine_info(monkeypatch, engines):
    d, p = engines
    monkeypatch.delenv("ADVISOR_ENGINE", raising=False)
    info = engine_info()
    assert info["engine"] == "durable" and info["durable_rules"] == "2.0.28"
    assert info["python"].count(".") == 2
    assert engine_info(p)["engine"] == "python" and engine_info(p)["durable_rules"] is None
    assert engine_info(d)["durable_rules"] == "2.0.28"


def _renamed(prefix, rules):
    return [CompiledRule(f"{prefix}.r{i}", r.pri, r.condition) for i, r in enumerate(rules)]


def test_evaluate_all_answers_as_each_ruleset_in_one_session():
    """A scope's rulesets in one durable session (each session is a JSON round trip and a state
    document): the same rules fire as evaluating them one by one, on both engines; the union is
    registered once, and close() frees it with the rest."""
    rs = {"a": _renamed("a", matrix_rules(20)), "b": _renamed("b", matrix_rules(7))}
    d, p = DurableEngine(rs), PythonEngine(rs)
    try:
        for f in facts():
            one_by_one = d.evaluate("a", f) + d.evaluate("b", f)
            assert sorted(d.evaluate_all(("a", "b"), f)) == sorted(one_by_one)
            assert p.evaluate_all(("a", "b"), f) == p.evaluate("a", f) + p.evaluate("b", f)
            assert sorted(p.evaluate_all(("a", "b"), f)) == sorted(one_by_one)
        (group,) = d._groups[("a", "b")]
        name = d.registered_name(group)
        assert eng_mod._process().refs[name] == 1
        assert d.evaluate_all(("a",), FACT) == d.evaluate("a", FACT)
        with pytest.raises(EngineError, match="unknown ruleset 'c'"):
            d.evaluate_all(("a", "c"), FACT)
    finally:
        d.close()
    assert name not in eng_mod._process().refs


def test_evaluate_all_packs_consecutive_rulesets_while_their_union_fits():
    """Three rulesets of which any two fit one durable ruleset but not all three: two sessions, the
    first for the union of the first two, with the same answers as one by one."""
    rs = {"a": _renamed("a", matrix_rules(25)), "b": _renamed("b", matrix_rules(25)),
          "c": _renamed("c", matrix_rules(25))}
    d = DurableEngine(rs)
    try:
        for f in facts(6):
            assert sorted(d.evaluate_all(("a", "b", "c"), f)) == sorted(
                d.evaluate("a", f) + d.evaluate("b", f) + d.evaluate("c", f))
        first, second = d._groups[("a", "b", "c")]
        assert first.startswith("__all.") and second == "c"
    finally:
        d.close()


def test_evaluate_all_falls_back_to_one_by_one_past_durables_limits():
    """A union over durable's per-ruleset rule limit (or with clashing ids) is evaluated ruleset by
    ruleset, with the same answers."""
    rs = {"a": _renamed("a", matrix_rules(40)), "b": _renamed("b", matrix_rules(40)), "c": matrix_rules(5),
          "d": matrix_rules(5)}
    d = DurableEngine(rs)
    try:
        for f in facts(6):
            assert d.evaluate_all(("a", "b"), f) == d.evaluate("a", f) + d.evaluate("b", f)
            assert d.evaluate_all(("c", "d"), f) == d.evaluate("c", f) + d.evaluate("d", f)   # same ids
        assert d._groups[("a", "b")] == ("a", "b") and d._groups[("c", "d")] == ("c", "d")
    finally:
        d.close()
