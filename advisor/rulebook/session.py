"""One evaluation of a rule book's scope on one fact vector: the engine cache behind it, and the
rule book a call uses (the built-in one, or it plus site files).

Engines are built once per (rule-book revision, engine) and kept for the process; each evaluation
is a fresh engine session, so calls are independent and deterministic.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from .compiled import normalize_fact
from .engines import make_engine, select_engine
from .load import RuleBook, builtin_rulebook, load_rulebook

__all__ = ["evaluate_rules", "engine_for", "rulebook_for"]

_ENGINES: dict[tuple[str, str | None], Any] = {}
_ENGINES_LOCK = threading.Lock()


def _reset_after_fork() -> None:
    # A child forked while another thread held the lock would inherit it held and deadlock.
    global _ENGINES_LOCK
    _ENGINES_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def engine_for(book: RuleBook, name: str | None):
    """The engine for `book`, built once per process. Keyed by the engine actually selected, so
    ADVISOR_ENGINE changed at run time takes effect."""
    chosen = select_engine(name)
    key = (book.revision, chosen)
    engine = _ENGINES.get(key)            # lock-free fast path: dict reads are atomic
    if engine is not None:
        return engine
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            engine = _ENGINES[key] = make_engine(book.rulesets, chosen)
        return engine


def rulebook_for(rules: tuple[str | Path, ...]) -> RuleBook:
    """The built-in rule book, or it with the site rule files `rules` loaded after it."""
    return builtin_rulebook() if not rules else load_rulebook(tuple(rules))


def evaluate_rules(book: RuleBook, facts: dict, engine_name: str | None = None,
                   scope: str = "situation", trusted: bool = False) -> tuple[list[str], str]:
    """Fired rule ids of one scope in firing order (tier, file, position), and the engine's name.
    `trusted`: the facts come from advisor.facts (the Python engine may skip re-normalising them)."""
    engine = engine_for(book, engine_name)
    fired: list[str] = []
    if trusted and engine.name == "python":
        for ruleset in book.rulesets_in(scope):
            fired += engine.evaluate(ruleset, facts, trusted=True)
    else:
        norm = normalize_fact(facts)           # once for every ruleset of the scope
        fired = engine.evaluate_all(book.rulesets_in(scope), norm, normalized=True)
    fired.sort(key=lambda rid: book.rules[rid].order)
    return fired, engine.name
