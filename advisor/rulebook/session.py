"""One evaluation of a rule book's scope on one fact vector: the engine cache behind it, and the
rule book a call uses (the built-in one, or it plus site files).

Site rule files are read on every call (an edit takes effect at once) and compiled once per
content: the rule book of the same paths with the same bytes (sha256) comes from a cache. Engines
are built once per (rule-book revision, engine); each evaluation is a fresh engine session, so
calls are independent and deterministic. Both caches are bounded by one number, the distinct
site-rule contents kept (`set_engine_cache_size`, $ADVISOR_ENGINE_CACHE, default 16: a content is
its rule book and its one or two engines, ~1.1 MiB of Python heap and ~0.8 MiB of durable's C
memory, benchmarks/site_rules.py); the built-in book and its
engines are kept outside that bound, so a caller cycling many contents never makes the others
rebuild the built-in engines. Unbounded, the cache grew by ~790 KiB per content on durable (3000
files: RSS 32 MiB -> 2.4 GB, measured). An evicted engine is closed (its durable
rulesets deleted) once no evaluation holds it: evaluations lease the engine they use, and the last
lease of an evicted engine closes it.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from ..errors import EngineError
from .compiled import normalize_fact
from .engines import make_engine, select_engine
from .load import RuleBook, builtin_rulebook, read_site_files, site_rulebook

__all__ = ["evaluate_rules", "engine_for", "rulebook_for", "set_engine_cache_size", "engine_cache_size",
           "cached_engine_count", "cached_site_contents", "DEFAULT_ENGINE_CACHE_SIZE"]

#: Distinct site-rule contents kept compiled per process (their rule books and engines) unless the
#: embedder says otherwise (`set_engine_cache_size` or $ADVISOR_ENGINE_CACHE): room for a service's
#: handful of site policies; a service that uses more distinct contents should set it to that number.
DEFAULT_ENGINE_CACHE_SIZE = 16


class _Entry:
    __slots__ = ("engine", "leases", "evicted")

    def __init__(self, engine: Any):
        self.engine = engine
        self.leases = 0
        self.evicted = False


_ENGINES: OrderedDict[tuple[str, str], _Entry] = OrderedDict()      # (revision, engine name) -> entry
_REVISIONS: OrderedDict[str, None] = OrderedDict()                  # site-book revisions, least recent first
_BOOKS: OrderedDict[tuple[tuple[str, str], ...], RuleBook] = OrderedDict()   # ((path, sha256), ...) -> book
_ENGINES_LOCK = threading.Lock()
_cache_size: int | None = None          # None: not set yet; read $ADVISOR_ENGINE_CACHE on first use


def _reset_after_fork() -> None:
    # A child forked while another thread held the lock would inherit it held and deadlock.
    global _ENGINES_LOCK
    _ENGINES_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _checked_size(value: Any, source: str) -> int:
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise EngineError(f"{source}: engine cache size {value!r} is not an integer; want an integer >= 1") from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise EngineError(f"{source}: engine cache size {value!r}; want an integer >= 1")
    return value


def set_engine_cache_size(n: int) -> None:
    """Keep at most `n` (>= 1) distinct site-rule contents compiled in this process (their rule books
    and engines; the built-in book's are always kept); evicts (and closes) the least recently used
    ones beyond it. Overrides $ADVISOR_ENGINE_CACHE."""
    global _cache_size
    size = _checked_size(n, "set_engine_cache_size")
    with _ENGINES_LOCK:
        _cache_size = size
        _evict_locked()


def engine_cache_size() -> int:
    """The current bound: set_engine_cache_size, else $ADVISOR_ENGINE_CACHE, else the default."""
    global _cache_size
    if _cache_size is None:
        raw = os.environ.get("ADVISOR_ENGINE_CACHE", "").strip()
        _cache_size = _checked_size(raw, "ADVISOR_ENGINE_CACHE") if raw else DEFAULT_ENGINE_CACHE_SIZE
    return _cache_size


def cached_engine_count() -> int:
    """How many engines the cache holds now, the built-in book's included (for tests and monitoring)."""
    return len(_ENGINES)


def cached_site_contents() -> int:
    """How many distinct site-rule contents have engines cached now (at most engine_cache_size())."""
    return len(_REVISIONS)


def _close(engine: Any) -> None:
    close = getattr(engine, "close", None)      # the Python engine holds nothing to release
    if close is not None:
        close()


def _evict_locked() -> None:
    """Drop the least recently used site contents beyond the bound, books and engines (caller holds
    _ENGINES_LOCK); an engine still leased is closed by its last lease instead."""
    size = engine_cache_size()
    while len(_BOOKS) > size:
        _BOOKS.popitem(last=False)
    while len(_REVISIONS) > size:
        revision, _ = _REVISIONS.popitem(last=False)
        for key in [k for k in _ENGINES if k[0] == revision]:
            entry = _ENGINES.pop(key)
            entry.evicted = True
            if entry.leases == 0:
                _close(entry.engine)


def _acquire(book: RuleBook, name: str | None) -> _Entry:
    key = (book.revision, select_engine(name))
    with _ENGINES_LOCK:
        entry = _ENGINES.get(key)
        if entry is None:
            # Built under the lock: two threads must not both register the same revision.
            entry = _ENGINES[key] = _Entry(make_engine(book.rulesets, key[1]))
        if book.revision != builtin_rulebook().revision:
            _REVISIONS[book.revision] = None
            _REVISIONS.move_to_end(book.revision)
            _evict_locked()
        entry.leases += 1
        return entry


def _release(entry: _Entry) -> None:
    with _ENGINES_LOCK:
        entry.leases -= 1
        close = entry.evicted and entry.leases == 0
    if close:
        _close(entry.engine)


def engine_for(book: RuleBook, name: str | None):
    """The cached engine for `book`. Keyed by the engine actually selected, so ADVISOR_ENGINE
    changed at run time takes effect. It may be evicted and closed by later calls; evaluations
    go through `evaluate_rules`, which holds it while it runs."""
    entry = _acquire(book, name)
    _release(entry)
    return entry.engine


def rulebook_for(rules: tuple[str | Path, ...]) -> RuleBook:
    """The built-in rule book, or it with the site rule files `rules` after it: the files are read on
    every call, and compiled only when these paths with these bytes are not in the cache."""
    if not rules:
        return builtin_rulebook()
    files = read_site_files(tuple(rules))
    key = tuple((f.path, f.digest) for f in files)
    with _ENGINES_LOCK:
        book = _BOOKS.get(key)
        if book is not None:
            _BOOKS.move_to_end(key)
            return book
    book = site_rulebook(files)             # outside the lock: another call may compile the same; one is kept
    with _ENGINES_LOCK:
        book = _BOOKS.setdefault(key, book)
        _evict_locked()
    return book


def evaluate_rules(book: RuleBook, facts: dict, engine_name: str | None = None,
                   scope: str = "situation", trusted: bool = False) -> tuple[list[str], str]:
    """Fired rule ids of one scope in firing order (tier, file, position), and the engine's name.
    `trusted`: the facts come from advisor.facts (the Python engine may skip re-normalising them)."""
    entry = _acquire(book, engine_name)
    try:
        engine = entry.engine
        fired: list[str] = []
        if trusted and engine.name == "python":
            for ruleset in book.rulesets_in(scope):
                fired += engine.evaluate(ruleset, facts, trusted=True)
        else:
            norm = normalize_fact(facts)           # once for every ruleset of the scope
            fired = engine.evaluate_all(book.rulesets_in(scope), norm, normalized=True)
    finally:
        _release(entry)
    fired.sort(key=lambda rid: book.rules[rid].order)
    return fired, engine.name
