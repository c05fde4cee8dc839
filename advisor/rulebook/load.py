"""Rule files: schema, loading and compilation.

A rule file is TOML (read with the standard library's `tomllib`): a list of `[[rule]]` tables.
Conditions are strings in a tiny closed grammar, `<group>.<field> <op> <literal>` with op one of
`== != < <= > >= in`, combined with `{ all = [...] }` / `{ any = [...] }`. They are parsed by this
module, checked against the fact catalogue (`advisor.facts.CATALOGUE`) for names and types, and
compiled into the condition tree both engines evaluate. Nothing in a rule file is executed: there
is no eval, no templating language, and `then` names actions from a closed set (`rulebook.actions`).

Every mistake fails at load time with the file, the rule id and the field (`RuleFileError`).
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import EngineError, RuleFileError
from ..facts import CATALOGUE
from .actions import Action, Finding, Limit
from .compiled import MAX_RULES_PER_RULESET, CompiledRule, normalize_value

__all__ = ["Reference", "RuleSpec", "Rule", "RuleBook", "load_rulebook", "builtin_rulebook",
           "builtin_rules_dir", "parse_condition", "render_message"]

MAX_RULES_PER_FILE = MAX_RULES_PER_RULESET   # each file compiles to one ruleset: the engines' limit (durable-rules.md §4.5)
MAX_RULE_FILE_BYTES = 512 * 1024
ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*(?:\.[a-z0-9]+(?:-[a-z0-9]+)*)+$")
LEAF_RE = re.compile(r"^\s*([a-z][a-z0-9_]*\.[a-z][a-z0-9_]*)\s*(==|!=|<=|>=|<|>|\bin\b)\s*(.+?)\s*$")
# LEAF_RE is the documented grammar (it goes into the JSON schema, so it stays ECMA-compatible).
# Matching it directly backtracks quadratically on long whitespace runs (a `when` padded with
# 100k spaces took 29 s, reliability-probe finding 6). `_LEAF_LINEAR` accepts the same strings
# with the same groups once the text is stripped (str.strip and \s agree on what whitespace is),
# and its possessive quantifiers (Python >= 3.11) leave nothing to backtrack into.
_LEAF_LINEAR = re.compile(r"([a-z][a-z0-9_]*\.[a-z][a-z0-9_]*)\s*+(==|!=|<=|>=|<|>|\bin\b)\s*+(.+)")
PLACEHOLDER_RE = re.compile(r"\{([a-z][a-z0-9_]*\.[a-z][a-z0-9_]*)(?::([^{}]*))?\}")
_FORMAT_SPEC_RE = re.compile(r"^[<>^]?[0-9]*,?(\.[0-9]+)?[dfg%]?$")


class Reference(BaseModel):
    """A citation: a paper (title + url), or code (title + repo path)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    title: str = Field(min_length=3)
    url: str | None = None
    path: str | None = None


class Examples(BaseModel):
    """Test twins (Semgrep's `ruleid:`/`ok:` idea as data): fact overrides on a reference situation."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    fire: list[dict[str, Any]] = Field(min_length=1)
    no_fire: list[dict[str, Any]] = Field(min_length=1)


class RuleSpec(BaseModel):
    """One rule as written in a rule file."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str
    version: int = Field(ge=1)
    title: str = Field(min_length=3)
    tier: str
    when: str | dict[str, Any]
    then: list[Action] = Field(min_length=1)
    message: str = Field(min_length=3)
    rationale: str = Field(min_length=10)
    references: list[Reference] = Field(min_length=1)
    examples: Examples
    status: Literal["stable", "preview", "deprecated"] = "stable"


@dataclass(frozen=True)
class Rule:
    """A validated rule with its compiled condition and where it came from."""

    spec: RuleSpec
    compiled: CompiledRule
    path: str
    file_index: int
    index: int
    fields: tuple[str, ...]          # fact fields its condition reads, in order of appearance
    scope: str                       # "situation" (recommend) or "layout" (audit of one layout)

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def order(self) -> tuple[int, int, int]:
        """Firing order across files: tier priority, then file, then position in the file."""
        return (self.compiled.pri, self.file_index, self.index)


@dataclass(frozen=True)
class RuleBook:
    rules: dict[str, Rule]                       # id -> rule, in firing order
    rulesets: dict[str, list[CompiledRule]]      # ruleset name (file stem) -> its rules
    scopes: dict[str, str]                       # ruleset name -> "situation" | "layout"
    tiers: dict[str, int]
    revision: str                                # sha256 over the compiled rules
    root: str                                    # where the built-in rules were read from

    def ruleset_of(self, rule_id: str) -> str:
        return Path(self.rules[rule_id].path).stem

    def rulesets_in(self, scope: str) -> list[str]:
        return [name for name, s in self.scopes.items() if s == scope]


# ---------------------------------------------------------------------------------------------
# Conditions


def _literal(text: str, where: tuple[str, str | None, str]) -> Any:
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    try:
        return normalize_value(int(text.replace("_", "")) if re.fullmatch(r"-?[0-9_]+", text)
                               else float(text.replace("_", "")))
    except ValueError:
        raise RuleFileError(*where, text, "a number, true/false, or a quoted string") from None
    except EngineError as exc:     # out of the engine's range: |int| >= 2**63, inf, nan
        raise RuleFileError(*where, text, f"a number the rule engine can compare ({exc})") from None


def parse_condition(node: Any, where: tuple[str, str | None, str]) -> dict[str, Any]:
    """Parse a `when` value into the condition tree; `where` = (path, rule id, field) for errors."""
    path, rule_id, fld = where
    if isinstance(node, str):
        m = _LEAF_LINEAR.fullmatch(node.strip())
        if not m:
            raise RuleFileError(path, rule_id, fld, node, "'<group>.<field> <op> <literal>' with op in == != < <= > >= in")
        name, op, raw = m.groups()
        spec = CATALOGUE.get(name)
        if spec is None:
            raise RuleFileError(path, rule_id, fld, name, f"a known fact; see `advisor facts` ({len(CATALOGUE)} known)")
        if op == "in":
            if not (raw.startswith("[") and raw.endswith("]")) or not raw[1:-1].strip():
                raise RuleFileError(path, rule_id, fld, node, "'in' followed by a non-empty list, e.g. [\"a\", \"b\"]")
            value: Any = [_literal(x, where) for x in raw[1:-1].split(",")]
        else:
            value = _literal(raw, where)
        _check_type(spec, op, value, node, where)
        return {"field": name, "op": op, "value": value}
    if isinstance(node, dict) and len(node) == 1 and next(iter(node)) in ("all", "any"):
        key, items = next(iter(node.items()))
        if not isinstance(items, list) or not items:
            raise RuleFileError(path, rule_id, f"{fld}.{key}", items, "a non-empty list of conditions")
        return {key: [parse_condition(x, (path, rule_id, f"{fld}.{key}[{i}]")) for i, x in enumerate(items)]}
    raise RuleFileError(path, rule_id, fld, node, "a condition string, or a table with one key 'all' or 'any'")


def _check_type(spec, op: str, value: Any, node: str, where) -> None:
    values = value if isinstance(value, list) else [value]
    if spec.type is bool:
        ok = op in ("==", "!=") and all(isinstance(v, bool) for v in values)
        want = f"{spec.name} is a boolean: compare with == or != against true/false"
    elif spec.type is str:
        ok = op in ("==", "!=", "in") and all(isinstance(v, str) for v in values)
        want = f"{spec.name} is a string: compare with ==, != or in against quoted strings"
    else:
        # durable_rules coerces "16" == 16 and true == 1 (research §4.3): numbers only meet numbers.
        ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        want = f"{spec.name} is a number: compare against numbers"
    if not ok:
        raise RuleFileError(*where, node, want)


def _fields(node: dict[str, Any]) -> list[str]:
    if "field" in node:
        return [node["field"]]
    return [f for child in next(iter(node.values())) for f in _fields(child)]


def render_message(template: str, facts: dict[str, dict[str, Any]]) -> str:
    """Fill `{group.field}` / `{group.field:.1f}` placeholders from the facts. No other templating."""
    def sub(m: re.Match) -> str:
        group, name = m.group(1).split(".", 1)
        value = facts[group][name]
        return format(value, m.group(2)) if m.group(2) else str(value).lower() if isinstance(value, bool) else str(value)
    return PLACEHOLDER_RE.sub(sub, template)


# ---------------------------------------------------------------------------------------------
# Loading


def builtin_rules_dir() -> Path:
    """The shipped rules: `advisor/rules` in an installed wheel, the repository's `rules/` otherwise."""
    packaged = resources.files("advisor") / "rules"
    if packaged.is_dir():
        return Path(str(packaged))
    repo = Path(__file__).resolve().parents[2] / "rules"
    if repo.is_dir():
        return repo
    raise RuleFileError(str(packaged), None, "rules", "missing", "the built-in rule directory shipped with advisor")


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        size = path.stat().st_size
        if size > MAX_RULE_FILE_BYTES:
            raise RuleFileError(str(path), None, "file", f"{size} bytes", f"at most {MAX_RULE_FILE_BYTES} bytes")
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise RuleFileError(str(path), None, "toml", str(exc), "valid TOML") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RuleFileError(str(path), None, "file", str(exc), "a readable UTF-8 rule file") from None


def _load_tiers(root: Path) -> dict[str, int]:
    path = root / "tiers.toml"
    data = _read_toml(path).get("tiers")
    if not isinstance(data, dict) or not data:
        raise RuleFileError(str(path), None, "tiers", data, "a [tiers] table of name = priority")
    for name, pri in data.items():
        if not isinstance(pri, int) or isinstance(pri, bool) or not 0 <= pri < 1000:
            raise RuleFileError(str(path), None, f"tiers.{name}", pri, "an integer in [0, 1000)")
    return dict(data)


def _pydantic_field(err: dict) -> str:
    return ".".join(str(p) for p in err["loc"] if not (isinstance(p, str) and p[0].isupper()))


def _compile_file(path: Path, file_index: int, tiers: dict[str, int], seen: dict[str, str]) -> list[Rule]:
    data = _read_toml(path)
    unknown = set(data) - {"rule", "scope"}
    if unknown:
        raise RuleFileError(str(path), None, sorted(unknown)[0], "unexpected top-level key", "[[rule]] tables and an optional scope")
    scope = data.get("scope", "situation")
    if scope not in ("situation", "layout"):
        raise RuleFileError(str(path), None, "scope", scope, "'situation' (recommend) or 'layout' (audit)")
    raw_rules = data.get("rule")
    if not isinstance(raw_rules, list) or not raw_rules:
        raise RuleFileError(str(path), None, "rule", raw_rules, "one or more [[rule]] tables")
    if len(raw_rules) > MAX_RULES_PER_FILE:
        raise RuleFileError(str(path), None, "rule", f"{len(raw_rules)} rules",
                            f"at most {MAX_RULES_PER_FILE} per file (durable_rules' 64-test alpha stack); split the file")
    out = []
    for index, raw in enumerate(raw_rules):
        rule_id = raw.get("id") if isinstance(raw, dict) else None
        rid = rule_id if isinstance(rule_id, str) else f"#{index + 1}"
        try:
            spec = RuleSpec.model_validate(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise RuleFileError(str(path), rid, _pydantic_field(err), err.get("input"), err["msg"]) from None
        if not ID_RE.match(spec.id):
            raise RuleFileError(str(path), rid, "id", spec.id, "lower-case '<area>.<kebab-name>', e.g. 'matrix.small-cluster-zero'")
        if spec.id in seen:
            raise RuleFileError(str(path), rid, "id", spec.id, f"a unique id (already defined in {seen[spec.id]})")
        if spec.tier not in tiers:
            raise RuleFileError(str(path), rid, "tier", spec.tier, f"one of {list(tiers)}")
        for i, ref in enumerate(spec.references):
            if not (ref.url or ref.path):
                raise RuleFileError(str(path), rid, f"references[{i}]", ref.title, "a url or a repo path")
        condition = parse_condition(spec.when, (str(path), rid, "when"))
        fields = tuple(dict.fromkeys(_fields(condition)))
        _check_scope(fields, scope, (str(path), rid, "when"))
        for i, action in enumerate(spec.then):
            if isinstance(action, Limit):
                _check_limit(action, (str(path), rid, f"then[{i}]"))
            if isinstance(action, Finding) != (scope == "layout"):
                raise RuleFileError(str(path), rid, f"then[{i}].action", action.action,
                                    "'finding' in scope 'layout' files only, and only there" if scope == "layout"
                                    else "a situation action; 'finding' belongs in scope = \"layout\" files")
            if isinstance(action, Finding):
                _check_template(action.fix, scope, (str(path), rid, f"then[{i}].fix"))
        _check_template(spec.message, scope, (str(path), rid, "message"))
        for kind in ("fire", "no_fire"):
            for i, example in enumerate(getattr(spec.examples, kind)):
                _check_example(example, (str(path), rid, f"examples.{kind}[{i}]"))
                _check_scope(tuple(example), scope, (str(path), rid, f"examples.{kind}[{i}]"))
        seen[spec.id] = str(path)
        compiled = CompiledRule(id=spec.id, pri=tiers[spec.tier], condition=condition)
        out.append(Rule(spec, compiled, str(path), file_index, index, fields, scope))
    return out


def _check_template(text: str, scope: str, where) -> None:
    for m in PLACEHOLDER_RE.finditer(text):
        if m.group(1) not in CATALOGUE:
            raise RuleFileError(*where, m.group(0), "a placeholder naming a known fact")
        if m.group(2) is not None and not _FORMAT_SPEC_RE.match(m.group(2)):
            raise RuleFileError(*where, m.group(0), "a simple format such as {x:.1f} or {x:,}")
        _check_scope((m.group(1),), scope, where)


def _check_scope(fields: tuple[str, ...], scope: str, where) -> None:
    if scope == "situation":
        for name in fields:
            if CATALOGUE[name].scope == "layout":
                raise RuleFileError(*where, name, "a situation fact; layout.* and check.* need scope = \"layout\"")


def _check_limit(action: Limit, where) -> None:
    if action.max is None and action.min is None:
        raise RuleFileError(*where, "limit without bounds", "max or min")
    for side in ("max", "min"):
        raw = getattr(action, side)
        if isinstance(raw, str) and (raw not in CATALOGUE or CATALOGUE[raw].type is not int):
            raise RuleFileError(where[0], where[1], f"{where[2]}.{side}", raw, "an integer or the name of an int fact")
        if isinstance(raw, int) and raw < 1:
            raise RuleFileError(where[0], where[1], f"{where[2]}.{side}", raw, "a degree >= 1")


def _check_example(example: dict[str, Any], where) -> None:
    for name, value in example.items():
        spec = CATALOGUE.get(name)
        if spec is None:
            raise RuleFileError(*where, name, "a known fact name")
        good = (isinstance(value, bool) if spec.type is bool else isinstance(value, str) if spec.type is str
                else isinstance(value, (int, float)) and not isinstance(value, bool))
        if not good:
            raise RuleFileError(where[0], where[1], f"{where[2]}.{name}", value, f"a {spec.type.__name__}")


def _revision(rules: list[Rule], tiers: dict[str, int]) -> str:
    canon = json.dumps(
        {"tiers": tiers, "rules": [r.spec.model_dump(mode="json") | {"file": Path(r.path).name} for r in rules]},
        sort_keys=True, separators=(",", ":"),
    )
    return "sha256:" + hashlib.sha256(canon.encode()).hexdigest()[:16]


def load_rulebook(extra: tuple[str | Path, ...] = (), *, root: Path | None = None) -> RuleBook:
    """Load and compile the built-in rules (or `root`) plus extra site rule files, in that order."""
    root = root or builtin_rules_dir()
    tiers = _load_tiers(root)
    files = sorted(p for p in root.glob("*.toml") if p.name != "tiers.toml")
    files += [Path(p) for p in extra]
    seen: dict[str, str] = {}
    stems: set[str] = set()
    rules: list[Rule] = []
    for file_index, path in enumerate(files):
        if path.stem in stems:
            raise RuleFileError(str(path), None, "file", path.name, "a file name not already loaded")
        stems.add(path.stem)
        rules += _compile_file(path, file_index, tiers, seen)
    rules.sort(key=lambda r: r.order)
    rulesets: dict[str, list[CompiledRule]] = {}
    scopes: dict[str, str] = {}
    for r in sorted(rules, key=lambda r: (r.file_index, r.index)):
        rulesets.setdefault(Path(r.path).stem, []).append(r.compiled)
        scopes[Path(r.path).stem] = r.scope
    return RuleBook({r.id: r for r in rules}, rulesets, scopes, tiers, _revision(rules, tiers), str(root))


@lru_cache(maxsize=1)
def builtin_rulebook() -> RuleBook:
    return load_rulebook()

