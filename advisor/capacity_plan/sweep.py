"""Running `recommend` over many (cluster, training) scenarios: in this process, or across worker
processes where that is faster. Either way the answers are the same objects in the same order
(recommend is deterministic; tests/test_capacity.py compares the two paths).

Workers are forked from this process after it has run the first scenario, so they start with the
rule book compiled and its engines built (a cold process spends ~0.6 s on that; api.warm_up). A
process with other threads is never forked (a lock held by another thread would stay held in the
child); it runs the sweep itself unless `workers` asks for processes, which are then spawned.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, Callable, NamedTuple

from ..api import recommend
from ..errors import InputError
from ..inputs.specs import Cluster, Model, Training
from ..results.recommendation import Recommendation

__all__ = ["Scenario", "RecommendArgs", "Outcome", "run_scenarios", "PARALLEL_FROM", "MAX_WORKERS"]

PARALLEL_FROM = 24
"""Fewer scenarios run in this process: a recommendation takes ~3-60 ms, a forked worker ~20 ms to
start and its results ~1 ms each to send back."""
MAX_WORKERS = 64

Progress = Callable[[int, int], None]


class Scenario(NamedTuple):
    cluster: Cluster
    training: Training


class RecommendArgs(NamedTuple):
    """What every scenario of a sweep shares."""

    model: Model
    rules: tuple
    engine: str | None
    assumptions: Any


class Outcome(NamedTuple):
    """A scenario's recommendation, or the input error that refused it at this GPU type and count
    (a precision the GPU cannot run); other errors (a rule file, the engine) end the sweep."""

    recommendation: Recommendation | None
    error: InputError | None


def _one(args: RecommendArgs, scenario: Scenario) -> Outcome:
    try:
        rec = recommend(scenario.cluster, args.model, scenario.training, rules=args.rules, engine=args.engine,
                        assumptions=args.assumptions)
    except InputError as exc:
        return Outcome(None, exc)
    return Outcome(rec, None)


def _chunk(args: RecommendArgs, chunk: list[tuple[int, Scenario]]) -> list[tuple[int, Outcome]]:
    return [(index, _one(args, scenario)) for index, scenario in chunk]


def _worker_init() -> None:
    """A worker leaves Ctrl-C to the process that started it, which cancels what is left and waits
    for the chunks under way: no worker dies mid-chunk with a traceback of its own."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


def _workers(requested: int | None, count: int) -> int:
    if requested is not None:
        if isinstance(requested, bool) or not isinstance(requested, int) or not 1 <= requested <= MAX_WORKERS:
            raise InputError("workers", requested,
                             f"a number of processes from 1 to {MAX_WORKERS}, or None (automatic)")
        return min(requested, max(1, count))
    if count < PARALLEL_FROM or not _can_fork():
        return 1
    return max(1, min(_cpus(), count // (PARALLEL_FROM // 2), MAX_WORKERS))


def run_scenarios(args: RecommendArgs, scenarios: list[Scenario], *, workers: int | None = None,
                  progress: Progress | None = None) -> list[Outcome]:
    """Each scenario's Outcome, in the order given. `workers`: processes to use (None: as many as
    the CPUs this process may run on, for sweeps of PARALLEL_FROM scenarios or more). `progress` is
    called with (done, total) as scenarios finish."""
    total = len(scenarios)
    processes = _workers(workers, total)
    outcomes: list[Outcome | None] = [None] * total
    done = 0
    if total:
        outcomes[0] = _one(args, scenarios[0])      # warms this process (and the workers forked from it)
        done = 1
        _tell(progress, done, total)
    rest = list(enumerate(scenarios))[1:]
    if processes == 1 or len(rest) < 2:
        for index, scenario in rest:
            outcomes[index] = _one(args, scenario)
            done += 1
            _tell(progress, done, total)
        return outcomes
    size = max(1, min(16, len(rest) // (processes * 8)))
    chunks = [rest[i:i + size] for i in range(0, len(rest), size)]
    context = multiprocessing.get_context("fork" if _can_fork() else "spawn")
    with ProcessPoolExecutor(max_workers=processes, mp_context=context, initializer=_worker_init) as pool:
        futures = [pool.submit(_chunk, args, chunk) for chunk in chunks]
        try:
            for future in as_completed(futures):
                for index, outcome in future.result():
                    outcomes[index] = outcome
                done += len(future.result())
                _tell(progress, done, total)
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return outcomes


def _tell(progress: Progress | None, done: int, total: int) -> None:
    if progress is not None:
        progress(done, total)
