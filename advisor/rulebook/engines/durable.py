"""The durable_rules adapter.

This is the ONLY module of advisor that imports `durable` / `durable_rules_engine`. The design
follows the traps table of docs/architecture.md; each guard below cites the trap it exists for.

* `DurableEngine(rulesets)` translates compiled rules (rulebook.compiled.CompiledRule) into
  durable's JSON format and evaluates one fact per call, returning the fired rule ids in
  durable's agenda order (ascending pri, ties in definition order).
* Engine selection (durable where it imports, else the pure-Python engine) is `rulebook.engines`.

Process-wide state: one `_Proc` per process holds a timer-less Host, the lock that serialises
every evaluation, the per-sid traces and the registration refcounts. It is rebuilt when
`os.getpid()` changes (fork); engines re-register their rulesets in the new process lazily.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import re
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from ...errors import EngineError
from ..compiled import CompiledRule, check_fact, check_ruleset, dedupe, normalize_fact

__all__ = [
    "DurableEngine",
    "durable_available",
    "durable_import_error",
    "translate_condition",
    "FACT_KIND",
    "MAX_FIRINGS",
    "SINK_RULE",
    "SINK_PRI",
]

#: `kind` of the one fact asserted per evaluation; every pattern tests it first (a pattern
#: without a positive discriminator can match durable's own state document and loop forever).
FACT_KIND = "situation"
#: Catch-all rule so that the asserted fact is always "handled" (asserting a fact no rule
#: matches raises MessageNotHandledException). Filtered out of the result.
SINK_RULE = "__sink__"
#: durable keeps pri in an unsigned short (evaluator.MAX_PRI); the sink takes the last slot.
SINK_PRI = 65_535
#: Default per-evaluation firing budget (durable has no budget of its own).
MAX_FIRINGS = 10_000

_OPS = {"==": "$eq", "!=": "$neq", "<": "$lt", "<=": "$lte", ">": "$gt", ">=": "$gte"}

# durable error codes seen in practice, explained (rules.h).
_CODES = {
    108: "too many beta nodes in one ruleset",
    113: "a pattern has too many $and/$or groups (MAX_SEQUENCE_EXPRESSIONS 32)",
    202: "unknown operator or unsupported constant",
    204: "the JSON could not be parsed (e.g. a float written 1e-09)",
    302: "the fact has too many properties (about 253)",
    303: "more than 64 sibling tests matched the fact (durable's alpha stack); "
    "split the ruleset or use fewer any/in branches",
    309: "session state not found",
}


def _explain_durable_error(exc: BaseException) -> str:
    m = re.search(r"error code: (\d+)", str(exc))
    why = _CODES.get(int(m.group(1))) if m else None
    return f"{exc}" + (f" ({why})" if why else "")


# --------------------------------------------------------------------------------------------
# Float-safe JSON for durable
# --------------------------------------------------------------------------------------------
# durable's number parser needs a "." before an exponent: Python's repr of 1e-09 is "1e-09",
# which durable rejects with error 204 (in facts and in rule constants alike). Integral floats
# never reach durable (normalize_value turns them into ints), but small non-integral floats such
# as 3e-07 do. durable.engine serialises through its module-global `json`, so we give it a
# drop-in whose `dumps` writes those floats as "3.0e-07" (parsed exactly by durable's strtod).
# Fast path: if the standard encoding has no number token with an exponent, it is already safe.
# (A number token follows ":", "[" or ","; a false positive inside a string only costs time.)

_EXP_HINT = re.compile(r"[:\[,]\s*-?\d+[eE]")


def _float_text(x: float) -> str:
    text = float.__repr__(x)
    mantissa, e, exponent = text.partition("e")
    if e and "." not in mantissa:
        return f"{mantissa}.0e{exponent}"
    return text


def _encode(obj: Any) -> str:
    if isinstance(obj, float):
        return _float_text(obj) if math.isfinite(obj) else json.dumps(obj)
    if isinstance(obj, dict):
        return "{" + ",".join(f"{json.dumps(str(k), ensure_ascii=False)}:{_encode(v)}" for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(_encode(v) for v in obj) + "]"
    return json.dumps(obj, ensure_ascii=False)


class _DurableJson:
    """Stands in for the `json` module inside durable.engine (only dumps/loads are used)."""

    loads = staticmethod(json.loads)

    @staticmethod
    def dumps(obj: Any, **kwargs: Any) -> str:
        text = json.dumps(obj, **kwargs)
        return text if _EXP_HINT.search(text) is None else _encode(obj)


# --------------------------------------------------------------------------------------------
# Import durable (optional: it does not import on Python 3.13+)
# --------------------------------------------------------------------------------------------

try:
    from durable import engine as _dr           # first: its ImportError is the one users need to read
    import durable_rules_engine as _drc
except Exception as _exc:  # ImportError, or OSError from a broken C extension
    _dr = _drc = None
    _IMPORT_ERROR: str | None = f"{type(_exc).__name__}: {_exc}"
else:
    _IMPORT_ERROR = None
    # 3.12+: the stock _unix_now calls datetime.utcfromtimestamp, a DeprecationWarning on every
    # firing, which fails -W error test suites; it is looked up at call time.
    _dr._unix_now = time.time
    _dr.json = _DurableJson  # see "Float-safe JSON" above

    class _QuietHost(_dr.Host):
        """A Host without the two self-rescheduling timer threads that `Host.__init__` starts:
        they poll every 0.2 s forever and can steal a pending action onto their own thread,
        outside our lock."""

        def _run(self) -> None:
            pass


def durable_available() -> bool:
    """True if durable_rules imported in this interpreter."""
    return _dr is not None


def durable_import_error() -> str | None:
    """Why durable_rules did not import (None when it did)."""
    return _IMPORT_ERROR


# --------------------------------------------------------------------------------------------
# Translation of compiled conditions to durable JSON
# --------------------------------------------------------------------------------------------


def translate_condition(condition: Mapping[str, Any]) -> dict:
    """Translate a (validated) condition tree into ONE durable pattern expression.

    The result is always `{"$and": [{"kind": FACT_KIND}, ...]}`: the kind guard comes first, so
    no pattern can match durable's state document (the `$nex` loop). `all`->`$and`,
    `any`->`$or`, `!=`->`$neq`, `in`->`$or` of equalities (durable has no `$ne`/`$in`).
    Nested groups of the same kind merge and one-child groups unwrap, so fewer groups count
    against durable's per-pattern limit (evaluator.count_groups counts the same way).
    """
    terms: list = [{"kind": FACT_KIND}]
    _emit(condition, "all", terms)
    return {"$and": terms}


def _emit(node: Mapping[str, Any], parent: str, out: list) -> None:
    for key, dop in (("all", "$and"), ("any", "$or")):
        if key in node:
            kids = node[key]
            if len(kids) == 1:
                _emit(kids[0], parent, out)
            elif key == parent:
                for kid in kids:
                    _emit(kid, parent, out)
            else:
                inner: list = []
                for kid in kids:
                    _emit(kid, key, inner)
                out.append({dop: inner})
            return
    field, op, value = node["field"], node["op"], node["value"]
    if op != "in":
        out.append({_OPS[op]: {field: value}})
        return
    eqs = [{"$eq": {field: v}} for v in dedupe(value)]
    if len(eqs) == 1 or parent == "any":
        out.extend(eqs)
    else:
        out.append({"$or": eqs})


@dataclass(frozen=True)
class _Plan:
    """One compiled ruleset, ready to register: durable definition without actions."""

    name: str
    hashed: str  # "<name>_<sha256[:12]>": registered once per process under this name
    rule_ids: tuple[str, ...]  # durable rule "r<i>" -> rule_ids[i]
    definition: dict  # {"r0": {...}, ..., SINK_RULE: {...}} without "run"
    kinds: dict  # field -> type class, for check_fact
    tested: tuple  # ((group, (names...)), ...): the fact fields the conditions read, all durable is sent


def _plan(name: str, rules: tuple[CompiledRule, ...], kinds: dict) -> _Plan:
    canon = json.dumps([name, [[r.id, r.pri, r.condition] for r in rules]], sort_keys=True, separators=(",", ":"))
    hashed = f"{name}_{hashlib.sha256(canon.encode()).hexdigest()[:12]}"
    # Durable rule names are "r<i>", not the ids: ids may contain anything the compiler allows,
    # and the closure maps back. Dict order is definition order, which durable uses for ties.
    definition: dict = {
        f"r{i}": {"all": [{"m": translate_condition(r.condition)}], "pri": r.pri} for i, r in enumerate(rules)
    }
    definition[SINK_RULE] = {"all": [{"m": {"kind": FACT_KIND}}], "pri": SINK_PRI}
    groups: dict[str, list[str]] = {}
    for field in kinds:
        group, _, key = field.partition(".")
        groups.setdefault(group, []).append(key)
    tested = tuple((group, tuple(keys)) for group, keys in groups.items())
    return _Plan(name, hashed, tuple(r.id for r in rules), definition, kinds, tested)


# --------------------------------------------------------------------------------------------
# Process-wide durable state
# --------------------------------------------------------------------------------------------

#: Test hook: if set, called with the rule id inside every rule action (to inject failures).
_action_hook: Callable[[str], None] | None = None


class _Trace:
    """What the actions of one evaluation (one sid) recorded."""

    __slots__ = ("budget", "firings", "fired", "seen", "exhausted", "error")

    def __init__(self, budget: int):
        self.budget = budget
        self.firings = 0
        self.fired: list[str] = []
        self.seen: set[str] = set()
        self.exhausted = False
        self.error: tuple[str, BaseException] | None = None


def _make_action(proc: "_Proc", rule_id: str) -> Callable[[Any], None]:
    def action(c: Any) -> None:
        trace = proc.traces.get(c.s.sid)
        if trace is None:  # not one of our evaluations; cannot happen under the lock
            return
        trace.firings += 1
        if trace.firings > trace.budget:  # our own budget: durable has none
            trace.exhausted = True
            return
        hook = _action_hook
        if hook is not None:
            try:
                hook(rule_id)
            except BaseException as exc:
                # durable swallows it into state["exception"]; keep the rule id and
                # the exception object so evaluate() can raise a precise EngineError.
                if trace.error is None:
                    trace.error = (rule_id, exc)
                raise
        # A rule whose condition has an `any`/`in` fires once per true branch (durable routes
        # the fact through each branch; measured), but one fact matches a rule at most once.
        if rule_id not in trace.seen:
            trace.seen.add(rule_id)
            trace.fired.append(rule_id)

    return action


def _sink_action(c: Any) -> None:
    pass


class _Proc:
    """The durable Host, lock, traces and registrations of ONE process."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        # One lock around each whole evaluation: unlocked sharing segfaults in delete_state
        #; the C code holds the GIL anyway, so nothing is lost.
        self.lock = threading.Lock()
        self.host = _QuietHost()
        self.traces: dict[str, _Trace] = {}
        self.refs: dict[str, int] = {}

    def register(self, plan: _Plan) -> None:
        """Register `plan` unless this process already has it (content-hashed name); +1 ref."""
        if plan.hashed in self.refs:
            self.refs[plan.hashed] += 1
            return
        # durable pops "run" from the dict it is given and keeps a reference: deep-copy.
        definition = copy.deepcopy(plan.definition)
        for i, rule_id in enumerate(plan.rule_ids):
            definition[f"r{i}"]["run"] = _make_action(self, rule_id)
        definition[SINK_RULE]["run"] = _sink_action
        try:
            self.host.register_rulesets({plan.hashed: definition})
        except Exception as exc:
            raise EngineError(f"durable_rules could not register ruleset {plan.name!r}: {_explain_durable_error(exc)}") from exc
        self.refs[plan.hashed] = 1

    def release(self, plan: _Plan) -> None:
        """-1 ref; at zero, delete the ruleset from durable (a dropped Ruleset leaks ~100 KB of
        C memory forever). Reaches into Host internals."""
        n = self.refs.get(plan.hashed, 0) - 1
        if n > 0:
            self.refs[plan.hashed] = n
            return
        self.refs.pop(plan.hashed, None)
        rs = self.host._ruleset_directory.pop(plan.hashed, None)
        if rs is not None:
            self.host._ruleset_list.remove(rs)
            _drc.delete_ruleset(rs._handle)


_PROC: _Proc | None = None
_GUARD = threading.Lock()


def _process() -> _Proc:
    """This process's `_Proc`, rebuilt (new Host, new lock) when the pid changed:
    a fork can happen while another thread holds the lock, and the child must not inherit it."""
    global _PROC
    proc = _PROC
    if proc is None or proc.pid != os.getpid():
        with _GUARD:
            proc = _PROC
            if proc is None or proc.pid != os.getpid():
                proc = _PROC = _Proc()
    return proc


def _after_fork_in_child() -> None:
    # The guard itself may have been held by another parent thread at fork time.
    global _GUARD, _PROC
    _GUARD = threading.Lock()
    _PROC = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _new_sid() -> str:
    """A fresh session id per evaluation. Separate function so tests can observe sids."""
    return uuid.uuid4().hex


# --------------------------------------------------------------------------------------------
# The engine
# --------------------------------------------------------------------------------------------


class DurableEngine:
    """Evaluates compiled rulesets with durable_rules.

    Per call: normalise and check the fact, then under the process lock take a fresh sid,
    assert the one fact, collect the ids recorded by the per-rule actions, check the returned
    state, and `delete_state` in `finally` (memory stays flat; at most 1024 live sids per
    ruleset). Thread-safe and fork-safe. Raises EngineError for every engine failure.
    """

    name = "durable"

    def __init__(self, rulesets: Mapping[str, Iterable[CompiledRule]], *, max_firings: int | None = None):
        if _dr is None:
            raise EngineError(f"durable_rules cannot be imported: {_IMPORT_ERROR}")
        self.max_firings = MAX_FIRINGS if max_firings is None else int(max_firings)
        #: the validated rulesets in definition order
        self.rulesets: dict[str, tuple[CompiledRule, ...]] = {}
        self._plans: dict[str, _Plan] = {}
        for rs_name, rules in rulesets.items():
            checked, kinds = check_ruleset(rs_name, rules)  # includes the 60-rule limit
            self.rulesets[rs_name] = checked
            self._plans[rs_name] = _plan(rs_name, checked, kinds)
        self._proc: _Proc | None = None
        self._closed = False
        # (ruleset names) -> the rulesets that evaluate them, one session each: unions of consecutive
        # names registered on first use while they fit one durable ruleset's limits (_pack)
        self._groups: dict[tuple[str, ...], tuple[str, ...]] = {}
        proc = _process()
        with proc.lock:
            self._attach(proc)  # fail fast: registration errors surface here

    def _attach(self, proc: _Proc) -> None:
        """Register this engine's rulesets in `proc` (caller holds proc.lock)."""
        if self._proc is proc:
            return
        done: list[_Plan] = []
        try:
            for plan in self._plans.values():
                proc.register(plan)
                done.append(plan)
        except BaseException:
            for plan in done:
                proc.release(plan)
            raise
        self._proc = proc

    def evaluate(self, ruleset: str, fact: Mapping[str, Any], *, normalized: bool = False) -> list[str]:
        """Return the ids of the rules of `ruleset` that fire for `fact`, in firing order.
        `normalized=True`: `fact` is already normalize_fact's output (checked, not normalised again)."""
        plan = self._plans.get(ruleset)
        if plan is None:
            raise EngineError(f"unknown ruleset {ruleset!r}; known: {sorted(self.rulesets)}")
        norm = fact if normalized else normalize_fact(fact)
        check_fact(norm, plan.kinds, ruleset)
        proc = _process()
        with proc.lock:
            if self._closed:
                raise EngineError("engine is closed")
            self._attach(proc)  # after a fork: re-register in the child's fresh Host
            sid = _new_sid()
            trace = _Trace(self.max_firings)
            proc.traces[sid] = trace
            # explicit unique id (jruizgit/rules issue #376, durable_rules); only the fields the conditions test (check_fact has
            # checked each is there): the actions record rule ids only, and durable's JSON round
            # trip of an audit's few hundred facts was most of the audit's time
            doc = {"kind": FACT_KIND, "id": sid, "sid": sid}
            for group, keys in plan.tested:
                values = norm[group]
                doc[group] = {key: values[key] for key in keys}
            try:
                fired = self._assert(proc, plan, doc, trace)
            except BaseException:
                self._cleanup(proc, plan, sid, quiet=True)
                raise
            self._cleanup(proc, plan, sid, quiet=False)
            return fired

    def evaluate_all(self, rulesets: Sequence[str], fact: Mapping[str, Any], *, normalized: bool = False) -> list[str]:
        """The ids of the rules of all `rulesets` that fire for `fact`, each ruleset's in its firing
        order (callers impose their own order across rulesets). Consecutive rulesets share one durable
        session where their union fits one durable ruleset (check_ruleset's limits; each session costs
        a JSON round trip and a state document): the ten built-in audit files, whose union exceeds
        the bound on tests that can hold at once, run as four sessions instead of ten."""
        names = tuple(rulesets)
        if len(names) == 1:
            return self.evaluate(names[0], fact, normalized=normalized)
        groups = self._groups[names] if names in self._groups else self._pack(names)
        fired: list[str] = []
        for group in groups:
            fired += self.evaluate(group, fact, normalized=normalized)
        return fired

    def _pack(self, names: tuple[str, ...]) -> tuple[str, ...]:
        """`names` in order, consecutive ones merged into unions registered as one ruleset each (once
        per engine) while a union stays within durable's per-ruleset limits (check_ruleset)."""
        unknown = [n for n in names if n not in self._plans]
        if unknown:
            raise EngineError(f"unknown ruleset {unknown[0]!r}; known: {sorted(self.rulesets)}")
        chunks: list[list[str]] = []
        for name in names:
            if chunks and self._union_fits((*chunks[-1], name)):
                chunks[-1].append(name)
            else:
                chunks.append([name])
        groups = tuple(chunk[0] if len(chunk) == 1 else self._register_union(tuple(chunk)) for chunk in chunks)
        self._groups[names] = groups
        return groups

    def _union_fits(self, names: tuple[str, ...]) -> bool:
        try:
            check_ruleset("__all." + ".".join(names), tuple(r for n in names for r in self.rulesets[n]))
        except EngineError:
            return False
        return True

    def _register_union(self, names: tuple[str, ...]) -> str:
        group = "__all." + ".".join(names)
        checked, kinds = check_ruleset(group, tuple(r for n in names for r in self.rulesets[n]))
        plan = _plan(group, checked, kinds)
        proc = _process()
        with proc.lock:
            if self._closed:
                raise EngineError("engine is closed")
            self._attach(proc)
            if group not in self._plans:             # another thread may have registered it meanwhile
                proc.register(plan)
                self._plans[group] = plan
        return group

    def _assert(self, proc: _Proc, plan: _Plan, doc: dict, trace: _Trace) -> list[str]:
        try:
            # assert_fact, not a one-element assert_facts batch: a fact durable cannot parse
            # (e.g. a float written 1e-09) makes the BATCH call return a state handle that
            # segfaults in start_action_for_state, while the single call raises error 204
            # (measured on 2.0.28). One fact per evaluation also avoids durable's batch-assert trap.
            state = proc.host.assert_fact(plan.hashed, doc)
        except _dr.MessageNotHandledException as exc:  # the sink makes this unreachable
            raise EngineError(f"ruleset {plan.name!r}: fact not handled: {exc.message}") from exc
        except _dr.MessageObservedException as exc:
            raise EngineError(f"ruleset {plan.name!r}: fact already observed: {exc.message}") from exc
        except Exception as exc:  # durable_rules_engine.error carries only a numeric code
            raise EngineError(f"ruleset {plan.name!r}: durable_rules failed: {_explain_durable_error(exc)}") from exc
        if trace.error is not None:
            rule_id, err = trace.error
            raise EngineError(f"action raised {type(err).__name__}: {err}", rule_id=rule_id) from err
        if not isinstance(state, dict):
            # 0 means an action outlived durable's 10 s lease and later rules never fired.
            raise EngineError(f"ruleset {plan.name!r}: evaluation did not complete (durable returned {state!r})")
        if state.get("exception"):
            # Any other exception durable swallowed into the session state.
            raise EngineError(f"ruleset {plan.name!r}: an action failed inside durable: {str(state['exception'])[:500]}")
        if trace.exhausted:
            raise EngineError(f"ruleset {plan.name!r}: firing budget exhausted (more than {trace.budget} firings in one evaluation)")
        return list(trace.fired)

    @staticmethod
    def _cleanup(proc: _Proc, plan: _Plan, sid: str, quiet: bool) -> None:
        proc.traces.pop(sid, None)
        try:
            proc.host.delete_state(plan.hashed, sid)
        except Exception as exc:
            # 309: no state was created (e.g. the assert itself failed). Anything else
            # leaks a session; report it unless another error is already on its way out.
            if "309" not in str(exc) and not quiet:
                raise EngineError(f"ruleset {plan.name!r}: delete_state failed: {_explain_durable_error(exc)}") from exc

    def close(self) -> None:
        """Release this engine's registrations; rulesets no other engine uses are deleted from
        durable (reload = build a new engine, swap, close the old one)."""
        proc = _process()
        with proc.lock:
            if self._closed:
                return
            self._closed = True
            if self._proc is proc:
                for plan in self._plans.values():
                    proc.release(plan)
            self._proc = None

    def __enter__(self) -> "DurableEngine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def registered_name(self, ruleset: str) -> str:
        """The content-hashed name `ruleset` is registered under in durable."""
        return self._plans[ruleset].hashed


def _state_exists(ruleset_hashed: str, sid: str) -> bool:
    """Whether durable still holds session `sid` of a registered ruleset (for tests)."""
    proc = _process()
    with proc.lock:
        try:
            proc.host.get_state(ruleset_hashed, sid)
        except Exception as exc:
            if "309" in str(exc):
                return False
            raise
        return True
