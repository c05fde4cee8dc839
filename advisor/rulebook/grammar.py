"""The grammar of rule conditions and message templates: `<group>.<fact> <op> <literal>` leaves under
`all` / `any`, checked against the fact catalogue, and `{group.fact:spec}` placeholders; with the limits
that keep every accepted condition inside what both engines evaluate safely. `rulebook.load` compiles
rule files with them."""

from __future__ import annotations

import re
from typing import Any

from ..errors import EngineError, RuleFileError
from ..facts import CATALOGUE
from .compiled import normalize_value

__all__ = ["parse_condition", "render_message", "ID_RE", "LEAF_RE", "PLACEHOLDER_RE", "MAX_IN_VALUES", "MAX_BRANCHES",
           "MAX_CONDITION_DEPTH", "MAX_CONDITION_CHARS", "MAX_FORMAT_WIDTH", "MAX_FORMAT_PRECISION",
           "MAX_TEMPLATE_CHARS", "MAX_RENDERED_CHARS"]

# Limits on conditions, checked at load so that every accepted file stays well inside what
# durable_rules evaluates safely; no accepted rule set needs a fallback engine. The per-ruleset
# test budget (compiled.MAX_TESTS_PER_RULESET, 192 of durable's 511) is the guard against the
# hang; the per-condition limits below keep each rule small and each error local to one rule.
# Built-in rules use at most 2 `in` values, 5 branches, depth 3 and 44 characters per leaf.
MAX_IN_VALUES = 64            # a third of the ruleset budget: three wide lists still fit one file
MAX_BRANCHES = 64             # durable's alpha stack holds 64 matching siblings (error 303)
MAX_CONDITION_DEPTH = 16      # above the 14 all/any groups durable allows, so only single-child chains hit it
MAX_CONDITION_CHARS = 4096    # 64 quoted values of ~60 characters; checked before any regex runs
ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*(?:\.[a-z0-9]+(?:-[a-z0-9]+)*)+$")
LEAF_RE = re.compile(r"^\s*([a-z][a-z0-9_]*\.[a-z][a-z0-9_]*)\s*(==|!=|<=|>=|<|>|\bin\b)\s*(.+?)\s*$")
# LEAF_RE is the documented grammar (it goes into the JSON schema, so it stays ECMA-compatible).
# Matching it directly backtracks quadratically on long whitespace runs (a `when` padded with
# 100k spaces took 29 s, measured). `_LEAF_LINEAR` accepts the same strings
# with the same groups once the text is stripped (str.strip and \s agree on what whitespace is),
# and its possessive quantifiers (Python >= 3.11) leave nothing to backtrack into.
_LEAF_LINEAR = re.compile(r"([a-z][a-z0-9_]*\.[a-z][a-z0-9_]*)\s*+(==|!=|<=|>=|<|>|\bin\b)\s*+(.+)")
PLACEHOLDER_RE = re.compile(r"\{([a-z][a-z0-9_]*\.[a-z][a-z0-9_]*)(?::([^{}]*))?\}")
# What rendering replaces: a doubled brace is a literal one, as in str.format ("{{" -> "{"), else a placeholder.
_RENDERED_RE = re.compile(r"\{\{|\}\}|" + PLACEHOLDER_RE.pattern)
_FORMAT_SPEC_RE = re.compile(r"^[<>^]?[0-9]*,?(\.[0-9]+)?[dfg%]?$")     # the grammar (docs, schema)
_FORMAT_PARTS = re.compile(r"[<>^]?([0-9]*),?(?:\.([0-9]+))?[dfg%]?")
# A counted noun, for an integer fact: `{cluster.gpus:count GPU}` renders "1 GPU", "64 GPUs" (the
# English plural by "s"; a noun of ASCII letters, at most 20).
COUNT_SPEC_RE = re.compile(r"count ([A-Za-z]{1,20})")
# Width aligns a value in a line of text (40 is half a terminal); precision 12 is already past
# what any fact means (GiB, seconds, fractions) and leaves the 17 significant digits of a double
# for the integer part. Unbounded, `{cluster.gpus:999999999}` put 1 GB in every answer and
# `.2000000000f` aborted the process (measured).
MAX_FORMAT_WIDTH = 40
MAX_FORMAT_PRECISION = 12
# Messages and fixes are one-line texts: the longest built-in message is 236 characters, the
# longest fix 193. Templates longer than MAX_TEMPLATE_CHARS are refused at load; a rendered
# text is cut at MAX_RENDERED_CHARS with an ellipsis, since string facts come from inputs and a
# float at precision 12 can be 300 digits long.
MAX_TEMPLATE_CHARS = 2000
MAX_RENDERED_CHARS = 4000
# A value of each catalogue type to try a format spec on at load: the spec must apply to the
# fact's type (`{float_fact:d}` loaded and then failed every call with a bare ValueError).
_FORMAT_SAMPLES = {int: 1, float: 0.5, str: "x"}


# ---------------------------------------------------------------------------------------------
# Conditions


def _literal(text: str, where: tuple[str, str | None, str]) -> Any:
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if not text.isascii():          # float() reads other scripts' digits: "١٠" would mean 10
        raise RuleFileError(*where, text, "a number written in ASCII digits, true/false, or a quoted string")
    try:
        return normalize_value(int(text.replace("_", "")) if re.fullmatch(r"-?[0-9_]+", text)
                               else float(text.replace("_", "")))
    except ValueError:
        raise RuleFileError(*where, text, "a number, true/false, or a quoted string") from None
    except EngineError as exc:     # out of the engine's range: |int| >= 2**63, inf, nan
        raise RuleFileError(*where, text, f"a number the rule engine can compare ({exc})") from None


def _preview(text: str, keep: int = 80) -> str:
    """`text` for an error message: long rule-file text is shown by its start and length."""
    return text if len(text) <= keep else f"{text[:keep]}… ({len(text)} characters)"


def parse_condition(node: Any, where: tuple[str, str | None, str], depth: int = 0) -> dict[str, Any]:
    """Parse a `when` value into the condition tree; `where` = (path, rule id, field) for errors."""
    path, rule_id, fld = where
    if isinstance(node, str):
        return _parse_leaf(node, where)
    if isinstance(node, dict) and len(node) == 1 and next(iter(node)) in ("all", "any"):
        key, items = next(iter(node.items()))
        if not isinstance(items, list) or not items:
            raise RuleFileError(path, rule_id, f"{fld}.{key}", items, "a non-empty list of conditions")
        if len(items) > MAX_BRANCHES:
            raise RuleFileError(path, rule_id, f"{fld}.{key}", f"{len(items)} conditions", f"at most {MAX_BRANCHES}")
        if depth >= MAX_CONDITION_DEPTH:    # checked before recursing
            raise RuleFileError(path, rule_id, fld, f"all/any nested deeper than {MAX_CONDITION_DEPTH}",
                                f"at most {MAX_CONDITION_DEPTH} levels of all/any")
        return {key: [parse_condition(x, (path, rule_id, f"{fld}.{key}[{i}]"), depth + 1) for i, x in enumerate(items)]}
    raise RuleFileError(path, rule_id, fld, node if isinstance(node, (dict, list)) and len(str(node)) < 200 else type(node).__name__,
                        "a condition string, or a table with one key 'all' or 'any'")


def _parse_leaf(node: str, where: tuple[str, str | None, str]) -> dict[str, Any]:
    path, rule_id, fld = where
    if len(node) > MAX_CONDITION_CHARS:
        raise RuleFileError(path, rule_id, fld, _preview(node), f"a condition of at most {MAX_CONDITION_CHARS} characters")
    m = _LEAF_LINEAR.fullmatch(node.strip())
    if not m:
        raise RuleFileError(path, rule_id, fld, _preview(node), "'<group>.<field> <op> <literal>' with op in == != < <= > >= in")
    name, op, raw = m.groups()
    spec = CATALOGUE.get(name)
    if spec is None:
        raise RuleFileError(path, rule_id, fld, name, f"a known fact; see `advisor facts` ({len(CATALOGUE)} known)")
    if op == "in":
        if not (raw.startswith("[") and raw.endswith("]")) or not raw[1:-1].strip():
            raise RuleFileError(path, rule_id, fld, _preview(node), "'in' followed by a non-empty list, e.g. [\"a\", \"b\"]")
        items = _list_items(raw[1:-1], where)
        if len(items) > MAX_IN_VALUES:
            raise RuleFileError(path, rule_id, fld, f"'in' list of {len(items)} values", f"at most {MAX_IN_VALUES} values")
        value: Any = [_literal(x, where) for x in items]
    else:
        value = _literal(raw, where)
    _check_type(spec, op, value, _preview(node), where)
    return {"field": name, "op": op, "value": value}


def _list_items(text: str, where: tuple[str, str | None, str]) -> list[str]:
    """The items of an `in` list, split at the commas outside quotes: ["a,b", "c"] has two."""
    items, start, quote = [], 0, None
    for i, char in enumerate(text):
        if quote is not None:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == ",":
            items.append(text[start:i])
            start = i + 1
    if quote is not None:
        raise RuleFileError(*where, _preview(text), f"a closing {quote} for the quoted string in the list")
    return [*items, text[start:]]


def _check_type(spec, op: str, value: Any, node: str, where) -> None:
    values = value if isinstance(value, list) else [value]
    if spec.type is bool:
        ok = op in ("==", "!=") and all(isinstance(v, bool) for v in values)
        want = f"{spec.name} is a boolean: compare with == or != against true/false"
    elif spec.type is str:
        ok = op in ("==", "!=", "in") and all(isinstance(v, str) for v in values)
        want = f"{spec.name} is a string: compare with ==, != or in against quoted strings"
    else:
        # durable_rules coerces "16" == 16 and true == 1: numbers only meet numbers.
        ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        want = f"{spec.name} is a number: compare against numbers"
    if not ok:
        raise RuleFileError(*where, node, want)


def _fields(node: dict[str, Any]) -> list[str]:
    if "field" in node:
        return [node["field"]]
    return [f for child in next(iter(node.values())) for f in _fields(child)]


def render_message(template: str, facts: dict[str, dict[str, Any]]) -> str:
    """Fill `{group.field}` / `{group.field:.1f}` / `{group.field:count GPU}` placeholders from the facts.
    No other templating.
    The result is at most MAX_RENDERED_CHARS long; a longer one ends in "…"."""
    def sub(m: re.Match) -> str:
        if m.group(1) is None:                   # "{{" or "}}"
            return m.group(0)[0]
        group, name = m.group(1).split(".", 1)
        value, spec = facts[group][name], m.group(2)
        if spec and spec.startswith("count "):
            text = f"{value} {spec[6:]}" + ("" if value == 1 else "s")
        else:
            text = format(value, spec) if spec else str(value).lower() if isinstance(value, bool) else str(value)
        return text[:MAX_RENDERED_CHARS + 1]
    out = _RENDERED_RE.sub(sub, template)
    return out if len(out) <= MAX_RENDERED_CHARS else out[:MAX_RENDERED_CHARS - 1] + "…"
