"""Concurrency, processes and resource bounds (issue 7; research/durable-rules.md §3, §7.5).

* 8 threads x mixed recommend / audit / estimate calls give exactly the single-threaded answers
  (100 calls each, 200 under HYPOTHESIS_PROFILE=thorough);
  8 threads hammering the rule engine directly agree with the pure-Python engine.
* fork / spawn / forkserver workers give the parent's answers (the engine is rebuilt per process).
* a fork while another thread holds the engine lock still works in the child (pid-checked rebuild).
* memory stays flat over 2,000 calls after warm-up (benchmarks/soak_memory.py runs 100k).
* a looping rule set ends with EngineError at the firing budget instead of hanging.
"""

from __future__ import annotations

import gc
import hashlib
import multiprocessing
import os
import random
import select
import signal
import sys
import threading
import time
import warnings

import pytest
from budget import THOROUGH  # tests/ is on sys.path (rootdir conftest)

import advisor
import advisor.rulebook.engines.durable as eng
from advisor.errors import EngineError
from advisor.inputs.specs import resolve_training
from advisor.rulebook.compiled import CompiledRule
from advisor.rulebook.engines.durable import DurableEngine
from advisor.rulebook.engines.python import PythonEngine

# Small situations: each recommend stays cheap; the layouts include illegal ones (audit errors).
CASES = [
    ({"gpu": "H100-SXM-80GB", "gpus": 8}, "llama-3-8b", None, {"tp": 2, "pp": 2}),
    ({"gpu": "A100-40GB", "gpus": 16}, "llama-2-13b", {"seq_len": "2k", "global_batch_size": 256}, {"tp": 4}),
    ({"gpu": "H100-SXM-80GB", "gpus": 16}, "mixtral-8x7b", {"seq_len": 4096, "global_batch_size": 128},
     {"tp": 2, "ep": 8, "framework": "megatron"}),
    ({"gpu": "L40S", "gpus": 4}, "qwen2.5-7b", {"precision": "fp8"}, {"framework": "deepspeed", "zero_stage": 3}),
    ({"gpu": "H100-SXM-80GB", "gpus": 8}, "llama-3-8b", None, {"tp": 3}),
]
KINDS = ("recommend", "audit", "estimate", "validate")
_OBJECTS: dict[int, tuple] = {}


def objects(i: int) -> tuple:
    """Case i as advisor objects, built once per process (building them parses units with pint,
    which would otherwise dominate the cost; "validate" calls exercise that path)."""
    obj = _OBJECTS.get(i)
    if obj is None:
        cluster, model, training, layout = CASES[i]
        obj = _OBJECTS[i] = (advisor.Cluster(**cluster), advisor.Model.preset(model),
                             advisor.Training(**(training or {})), layout)
    return obj


def job(kind: str, i: int) -> str:
    """One call; its JSON (or the error's type and text, which must be deterministic too)."""
    c, m, t, layout = objects(i)
    try:
        if kind == "recommend":
            return advisor.recommend(c, m, t).model_dump_json()
        if kind == "audit":
            return advisor.audit(c, m, layout, t).model_dump_json()
        if kind == "estimate":
            t, _ = resolve_training(m, t)
            return advisor.estimate(c, m, advisor.Layout(**layout).for_world(c.gpus), t).model_dump_json()
        cluster, model, training, layout = CASES[i]
        return (advisor.Cluster(**cluster).model_dump_json() + advisor.Model.preset(model).model_dump_json()
                + advisor.Training(**(training or {})).model_dump_json() + advisor.Layout(**layout).model_dump_json())
    except advisor.AdvisorError as exc:
        return f"{type(exc).__name__}: {exc}"


def job_digest(args: tuple[str, int]) -> tuple[str, int, str, int]:
    """For worker processes: (kind, case, sha256 of the answer, pid)."""
    kind, i = args
    return kind, i, hashlib.sha256(job(kind, i).encode()).hexdigest(), os.getpid()


@pytest.fixture(scope="module")
def expected() -> dict[tuple[str, int], str]:
    return {(k, i): job(k, i) for k in KINDS for i in range(len(CASES))}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# ------------------------------------------------------------------------------------------------
# Threads


def _run_threads(n_threads: int, work, switch: float = 1e-5) -> list[BaseException]:
    """Run work(thread_index) on n threads started together; return what they raised."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(n_threads)

    def body(k: int) -> None:
        try:
            barrier.wait(30)
            work(k)
        except BaseException as exc:  # collected, re-raised by the test
            errors.append(exc)

    old = sys.getswitchinterval()
    sys.setswitchinterval(switch)     # interleave often: a race shows up in hundreds of calls
    try:
        threads = [threading.Thread(target=body, args=(k,), name=f"advisor-stress-{k}") for k in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert not any(t.is_alive() for t in threads), "a worker thread hung"
    finally:
        sys.setswitchinterval(old)
    return errors


def test_threads_give_the_single_threaded_answers(expected):
    # 8 threads x 100 calls (200 under HYPOTHESIS_PROFILE=thorough): 3% recommend, 30% audit, 47% estimate,
    # 20% building the inputs from dicts (recommend runs the planner, which audits every candidate: dozens
    # of engine sessions).
    calls_per_thread = 200 if THOROUGH else 100
    mismatches: list[tuple[str, int]] = []
    counts = {k: 0 for k in KINDS}

    def work(k: int) -> None:
        rng = random.Random(1000 + k)
        for _ in range(calls_per_thread):
            kind = rng.choices(KINDS, weights=(3, 30, 47, 20))[0]
            i = rng.randrange(len(CASES))
            counts[kind] += 1
            if job(kind, i) != expected[kind, i]:
                mismatches.append((kind, i))

    errors = _run_threads(8, work)
    assert not errors, errors[:3]
    assert not mismatches, mismatches[:10]
    assert sum(counts.values()) == 8 * calls_per_thread and all(counts.values())


def _facts(rng: random.Random) -> dict:
    return {"cluster": {"gpus": rng.choice([1, 4, 8, 64, 512]), "gpu_name": rng.choice(["H100", "A100", "x"]),
                        "multi_node": rng.random() < 0.5},
            "sizing": {"ratio": rng.choice([0.1, 0.5, 1.0, 2.5, 14.78, 3e-07])}}


ENGINE_RULES = {"stress": [
    CompiledRule("big", 10, {"all": [{"field": "cluster.gpus", "op": ">=", "value": 64},
                                     {"field": "cluster.multi_node", "op": "==", "value": True}]}),
    CompiledRule("h100", 20, {"field": "cluster.gpu_name", "op": "in", "value": ["H100", "H200"]}),
    CompiledRule("tight", 5, {"any": [{"field": "sizing.ratio", "op": ">", "value": 1.0},
                                      {"field": "cluster.gpus", "op": "==", "value": 1}]}),
    CompiledRule("tiny", 30, {"field": "sizing.ratio", "op": "<", "value": 1e-3}),
    CompiledRule("always", 40, {"field": "cluster.gpus", "op": ">", "value": 0}),
]}


@pytest.mark.skipif(not eng.durable_available(), reason="durable_rules does not import here")
def test_threads_hammering_the_durable_engine_agree_with_python():
    durable, python = DurableEngine(ENGINE_RULES), PythonEngine(ENGINE_RULES)
    mismatches: list = []

    def work(k: int) -> None:
        rng = random.Random(k)
        for _ in range(400):
            fact = _facts(rng)
            got = durable.evaluate("stress", fact)
            if got != python.evaluate("stress", fact):
                mismatches.append((fact, got))

    try:
        errors = _run_threads(8, work, switch=1e-6)
    finally:
        durable.close()
    assert not errors, errors[:3]
    assert not mismatches, mismatches[:5]


# ------------------------------------------------------------------------------------------------
# Processes


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_worker_processes_give_the_parents_answers(method, expected):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"start method {method} not available")
    jobs = [(k, i) for i in (0, 4) for k in KINDS] + [("audit", 2), ("estimate", 3)]
    ctx = multiprocessing.get_context(method)
    with warnings.catch_warnings():
        # 3.12+ warns when forking a process that has threads (pytest may have some); the
        # engine state is rebuilt in the child, which is what this test checks.
        warnings.simplefilter("ignore", DeprecationWarning)
        with ctx.Pool(2) as pool:
            results = pool.map(job_digest, jobs, chunksize=1)
    pids = {pid for *_, pid in results}
    assert os.getpid() not in pids
    for kind, i, digest, _pid in results:
        assert digest == _digest(expected[kind, i]), (method, kind, i)


def _fork_and_run(jobs: list[tuple[str, int]], timeout: float = 120.0) -> list[str]:
    """Fork; the child runs `jobs` and writes the answers' digests to a pipe. A child that hangs
    (e.g. on a lock inherited in the held state) is killed and reported."""
    r, w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            os.close(r)
            out = "\n".join(_digest(job(k, i)) for k, i in jobs) + "\n"
            os.write(w, out.encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    data, deadline = b"", time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([r], [], [], max(0.0, left))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                pytest.fail(f"forked child did not answer within {timeout} s (deadlock?)")
            chunk = os.read(r, 65536)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(r)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, f"child failed with status {status}"
    return data.decode().split()


@pytest.mark.skipif(not eng.durable_available(), reason="the engine lock belongs to the durable engine")
def test_fork_while_another_thread_holds_the_engine_lock(expected):
    jobs = [("recommend", 0), ("audit", 4), ("estimate", 1)]
    proc = eng._process()            # the parent's engine state, already built by `expected`
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with proc.lock:
            held.set()
            release.wait(60)

    t = threading.Thread(target=holder, name="lock-holder")
    t.start()
    try:
        assert held.wait(10)
        answers = _fork_and_run(jobs)
    finally:
        release.set()
        t.join()
    assert answers == [_digest(expected[j]) for j in jobs]
    # The parent is unaffected and still uses its own engine state.
    assert eng._process() is proc
    assert job("audit", 4) == expected["audit", 4]


def test_fork_while_another_thread_holds_the_api_engine_cache_lock(expected):
    import advisor.rulebook.session as session

    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with session._ENGINES_LOCK:
            held.set()
            release.wait(60)

    t = threading.Thread(target=holder, name="cache-lock-holder")
    t.start()
    try:
        assert held.wait(10)
        answers = _fork_and_run([("audit", 0)], timeout=3.0)
    finally:
        release.set()
        t.join()
    assert answers == [_digest(expected["audit", 0])]


def test_fork_while_another_thread_is_evaluating(expected):
    """Fork repeatedly while threads run calls: every child rebuilds and answers correctly."""
    stop = threading.Event()

    def busy(k: int) -> None:
        rng = random.Random(k)
        while not stop.is_set():
            job(rng.choice(("audit", "estimate")), rng.randrange(len(CASES)))

    threads = [threading.Thread(target=busy, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    try:
        for n in range(4):
            time.sleep(0.01 * n)
            assert _fork_and_run([("audit", n), ("estimate", n)]) == [
                _digest(expected["audit", n]), _digest(expected["estimate", n])]
    finally:
        stop.set()
        for t in threads:
            t.join()


# ------------------------------------------------------------------------------------------------
# Resource bounds


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc (Linux)")
def test_memory_stays_flat_over_many_calls():
    # 99% audits (each is several engine sessions, one per layout ruleset) and 1% recommends
    # (each runs dozens of engine evaluations through the planner). 1,000 calls (2,000 thorough):
    # a leaked durable session (below) passes the 4 MiB bound within 30 calls; a leak of 4 KB a call does too.
    calls = 2000 if THOROUGH else 1000
    plan = [("recommend", (n // 100) % len(CASES)) if n % 100 == 0 else ("audit", n % len(CASES)) for n in range(calls)]
    for i in range(len(CASES)):      # warm-up: caches, interned strings, pydantic, durable pools
        job("recommend", i)
    for n in range(200):
        job("audit", n % len(CASES))
    gc.collect()
    before = rss_kib()
    for kind, i in plan:
        job(kind, i)
    gc.collect()
    grown = (rss_kib() - before) / 1024
    print(f"RSS {before / 1024:.1f} MiB after warm-up, {grown:+.2f} MiB after {calls} calls")
    assert grown < 4.0, f"RSS grew {grown:.1f} MiB over {calls} calls"
    # Every durable session was deleted (a leaked sid costs ~155 KB, research §3.1).
    assert not eng.durable_available() or not eng._process().traces


LOOP_RULES = {"loop": [CompiledRule(f"loop-r{k}", k, {"field": "cluster.gpus", "op": ">", "value": k})
                       for k in range(3)]}


@pytest.mark.skipif(not eng.durable_available(), reason="durable_rules does not import here")
def test_firing_budget_ends_a_looping_rule_set(monkeypatch):
    """A rule set whose derived behaviour loops ends with a clear EngineError at the budget.

    The built-in rules assert one fact per evaluation and derive nothing, so they cannot loop;
    here every rule action also asserts a new derived fact into its session (what a
    self-feeding derivation chain does), which matches the rules again, forever."""
    real_make_action = eng._make_action

    def looping_action(proc, rule_id):
        action = real_make_action(proc, rule_id)

        def run(c):
            action(c)
            trace = proc.traces.get(c.s.sid)
            if trace is not None and not trace.exhausted:
                c.assert_fact({"kind": eng.FACT_KIND, "id": f"{c.s.sid}-{trace.firings}",
                               "cluster": {"gpus": trace.firings + 10}})
        return run

    monkeypatch.setattr(eng, "_make_action", looping_action)
    engine = DurableEngine(LOOP_RULES, max_firings=200)     # registers with the looping actions
    monkeypatch.setattr(eng, "_make_action", real_make_action)
    try:
        with pytest.raises(EngineError, match="firing budget exhausted") as info:
            engine.evaluate("loop", {"cluster": {"gpus": 8}})
    finally:
        engine.close()                                      # deletes the looping ruleset
    assert "more than 200 firings" in str(info.value)
    assert not eng._process().traces                        # the session was cleaned up
    # The engine machinery still works afterwards, with the ordinary actions.
    with DurableEngine(LOOP_RULES) as again:
        assert again.evaluate("loop", {"cluster": {"gpus": 8}}) == ["loop-r0", "loop-r1", "loop-r2"]


def test_python_engine_has_no_loop_to_bound():
    """The Python engine asserts one fact and evaluates each rule once: firings are bounded by
    the rule count, so it needs no budget (and matches durable on the same rules)."""
    engine = PythonEngine(LOOP_RULES)
    assert engine.evaluate("loop", {"cluster": {"gpus": 8}}) == ["loop-r0", "loop-r1", "loop-r2"]
    assert engine.evaluate("loop", {"cluster": {"gpus": 1}}) == ["loop-r0"]
