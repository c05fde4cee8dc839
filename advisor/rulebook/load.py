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
import os
import re
import stat
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import RuleFileError
from ..facts import CATALOGUE
from .actions import Action, Limit, ReportFinding
from .grammar import (ID_RE, LEAF_RE, MAX_BRANCHES, MAX_CONDITION_CHARS, MAX_CONDITION_DEPTH,  # noqa: F401 (re-exported)
                      MAX_FORMAT_PRECISION, MAX_FORMAT_WIDTH, MAX_IN_VALUES, MAX_RENDERED_CHARS, MAX_TEMPLATE_CHARS,
                      PLACEHOLDER_RE, COUNT_SPEC_RE, _FORMAT_PARTS, _FORMAT_SAMPLES, _RENDERED_RE, _fields, _preview,
                      parse_condition, render_message)
from .compiled import (MAX_GROUPS_PER_RULE, MAX_RULES_PER_RULESET, MAX_TESTS_PER_RULESET, MAX_TRUE_TESTS_PER_RULESET,
                       CompiledRule, count_groups, leaf_tests, true_test_bound)

__all__ = ["Reference", "RuleSpec", "Rule", "RuleBook", "SiteFile", "load_rulebook", "builtin_rulebook",
           "builtin_rules_dir", "parse_condition", "read_site_files", "render_message", "ruleset_name", "site_rulebook",
           "MAX_SITE_FILES", "MAX_SITE_RULES"]

MAX_RULES_PER_FILE = MAX_RULES_PER_RULESET   # each file compiles to one ruleset: the engines' limit (rulebook/compiled.py)
MAX_RULE_FILE_BYTES = 512 * 1024       # 20x the largest built-in file (audit-megatron.toml, 25 KB)
# Site rule files per call, and their rules together. Unbounded, 100 files of 60 rules cost 1.6 s a
# call and 200 files 3.8 s (measured); a site policy is a file or two of a
# few dozen rules (docs/examples/site-policy.toml has 2); 16 files of 30 rules make a first call of
# about 0.45 s, once per content (rulebook.session keeps it), then 66 ms against 25 ms without them
# (benchmarks/site_rules.py).
MAX_SITE_FILES = 16
MAX_SITE_RULES = 480
# Where tomllib's recursion gives out with the default recursion limit (1000): ~300 levels of
# nested arrays or inline tables (measured). Named in the error only.
TOML_NESTING_HINT = 300
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
        return ruleset_name(self.rules[rule_id].path)

    def rulesets_in(self, scope: str) -> list[str]:
        return [name for name, s in self.scopes.items() if s == scope]


# ---------------------------------------------------------------------------------------------
# Loading

_RULESET_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")     # what the engines accept (compiled.check_ruleset)


def ruleset_name(path: str | Path) -> str:
    """The engine ruleset a rule file compiles to: its stem when the engines accept it as a name
    (every built-in file), else the stem with other characters replaced by "_" plus a hash of the
    file name, so that `site policy (1).toml` and `политика.toml` load and stay distinct."""
    stem = Path(path).stem
    if _RULESET_NAME.fullmatch(stem):
        return stem
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", stem)[:40]
    digest = hashlib.sha256(Path(path).name.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"_{safe}-{digest}"


def builtin_rules_dir() -> Path:
    """The shipped rules: `advisor/rules` in an installed wheel, the repository's `rules/` otherwise."""
    packaged = resources.files("advisor") / "rules"
    if packaged.is_dir():
        return Path(str(packaged))
    repo = Path(__file__).resolve().parents[2] / "rules"
    if repo.is_dir():
        return repo
    raise RuleFileError(str(packaged), None, "rules", "missing", "the built-in rule directory shipped with advisor")


def _read_capped(path: Path) -> bytes:
    """At most MAX_RULE_FILE_BYTES of a regular file. The size is checked on the bytes actually
    read (st_size is 0 for /dev/zero, which was read until the machine ran out of memory), and
    anything but a regular file is refused before reading: O_NONBLOCK keeps the open of a FIFO
    with no writer from blocking forever."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "a device, FIFO or socket"
            raise RuleFileError(str(path), None, "file", kind, "a regular file")
        with os.fdopen(fd, "rb") as f:
            fd = -1                  # owned by f now
            data = f.read(MAX_RULE_FILE_BYTES + 1)
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > MAX_RULE_FILE_BYTES:
        raise RuleFileError(str(path), None, "file", f"more than {MAX_RULE_FILE_BYTES} bytes",
                            f"at most {MAX_RULE_FILE_BYTES} bytes")
    return data


def _read_bytes(path: Path) -> bytes:
    try:
        return _read_capped(path)
    except OSError as exc:
        raise RuleFileError(str(path), None, "file", str(exc), "a readable UTF-8 rule file") from None


def _read_toml(path: Path) -> dict[str, Any]:
    return _parse_toml(path, _read_bytes(path))


def _parse_toml(path: Path, data: bytes) -> dict[str, Any]:
    try:
        # A UTF-8 byte-order mark (Windows editors write one) is accepted and dropped: tomllib
        # rejects it, and it carries no meaning in UTF-8.
        text = data.decode("utf-8").removeprefix("\ufeff")
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RuleFileError(str(path), None, "toml", str(exc), "valid TOML") from None
    except RecursionError:
        # tomllib recurses once per nesting level and hits Python's recursion limit at ~300
        # levels of arrays/inline tables (measured).
        raise RuleFileError(str(path), None, "toml", f"nesting deeper than {TOML_NESTING_HINT} levels",
                            "TOML nested a few levels deep (rule conditions allow at most "
                            f"{MAX_CONDITION_DEPTH})") from None
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


def _compile_file(path: Path, file_index: int, tiers: dict[str, int], seen: dict[str, str],
                  data: dict[str, Any] | None = None) -> list[Rule]:
    """The rules of the file at `path` (`data`: its parsed TOML, when the caller read it)."""
    data = _read_toml(path) if data is None else data
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
    file_tests: set = set()      # the file's distinct leaf tests: it compiles to one durable ruleset
    for index, raw in enumerate(raw_rules):
        rule_id = raw.get("id") if isinstance(raw, dict) else None
        rid = rule_id if isinstance(rule_id, str) else f"#{index + 1}"
        try:
            spec = RuleSpec.model_validate(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            have = err.get("input")
            if len(shown := repr(have)) > 200:      # a 100k-element list would fill the message
                have = _preview(shown)
            raise RuleFileError(str(path), rid, _pydantic_field(err), have, err["msg"]) from None
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
        _check_engine_limits(condition, file_tests, (str(path), rid, "when"))
        fields = tuple(dict.fromkeys(_fields(condition)))
        _check_scope(fields, scope, (str(path), rid, "when"))
        for i, action in enumerate(spec.then):
            if isinstance(action, Limit):
                _check_limit(action, (str(path), rid, f"then[{i}]"))
            if isinstance(action, ReportFinding) != (scope == "layout"):
                raise RuleFileError(str(path), rid, f"then[{i}].action", action.action,
                                    "'finding' in scope 'layout' files only, and only there" if scope == "layout"
                                    else "a situation action; 'finding' belongs in scope = \"layout\" files")
            if isinstance(action, ReportFinding):
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


def _check_engine_limits(condition: dict, file_tests: set, where) -> None:
    """durable's per-rule and per-ruleset limits (compiled.check_ruleset), as RuleFileErrors that
    name the file and the rule instead of engine errors at the first call."""
    groups = count_groups(condition)
    if groups > MAX_GROUPS_PER_RULE:
        raise RuleFileError(*where, f"{groups} all/any/in groups",
                            f"at most {MAX_GROUPS_PER_RULE} (durable_rules error 113); split the rule")
    leaf_tests(condition, file_tests)
    if len(file_tests) > MAX_TESTS_PER_RULESET:
        raise RuleFileError(*where, f"the file's rules reach {len(file_tests)} distinct tests here (each `in` value counts)",
                            f"at most {MAX_TESTS_PER_RULESET} per file (durable_rules hangs at 512); split the file")
    true_tests = true_test_bound(file_tests)
    if true_tests > MAX_TRUE_TESTS_PER_RULESET:
        raise RuleFileError(*where, f"the file's rules reach {true_tests} tests that can hold at once here "
                            "(one per field for ==/in, every !=, <, <=, >, >=)",
                            f"at most {MAX_TRUE_TESTS_PER_RULESET} per file (durable_rules crashes beyond 64); split the file")


def _check_template(text: str, scope: str, where) -> None:
    if len(text) > MAX_TEMPLATE_CHARS:
        raise RuleFileError(*where, _preview(text), f"at most {MAX_TEMPLATE_CHARS} characters")
    for m in _RENDERED_RE.finditer(text):
        if m.group(1) is None:   # a doubled brace: a literal one
            continue
        if m.group(1) not in CATALOGUE:
            raise RuleFileError(*where, _preview(m.group(0)), "a placeholder naming a known fact")
        if m.group(2):          # "{x:}" is the same as "{x}"
            _check_format_spec(m.group(0), m.group(2), CATALOGUE[m.group(1)].type, where)
        _check_scope((m.group(1),), scope, where)


def _check_format_spec(placeholder: str, spec: str, fact_type: type, where) -> None:
    if spec.startswith("count "):
        if COUNT_SPEC_RE.fullmatch(spec) is None or fact_type is not int:
            raise RuleFileError(*where, _preview(placeholder), "a counted noun of ASCII letters (at most 20) on an "
                                f"integer fact, such as {{cluster.gpus:count GPU}}; this fact is {fact_type.__name__}")
        return
    parts = _FORMAT_PARTS.fullmatch(spec)
    if parts is None:
        raise RuleFileError(*where, _preview(placeholder), "a simple format such as {x:.1f} or {x:,}")
    width, precision = parts.groups()
    # Digit strings are compared by length first: int() of a 5000-digit string raises ValueError.
    if width and (len(width) > 3 or int(width) > MAX_FORMAT_WIDTH):
        raise RuleFileError(*where, _preview(placeholder), f"a format width of at most {MAX_FORMAT_WIDTH}")
    if precision and (len(precision) > 3 or int(precision) > MAX_FORMAT_PRECISION):
        raise RuleFileError(*where, _preview(placeholder), f"a format precision of at most {MAX_FORMAT_PRECISION}")
    sample = _FORMAT_SAMPLES.get(fact_type)
    if sample is None:      # bool: rendered as true/false; a spec would format it as the number 1
        raise RuleFileError(*where, placeholder, f"no format spec: {fact_type.__name__} facts render as true/false")
    try:
        format(sample, spec)
    except ValueError as exc:
        raise RuleFileError(*where, placeholder, f"a format that applies to {fact_type.__name__} facts ({exc})") from None


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
    seen: dict[str, str] = {}
    names: set[str] = set()
    rules: list[Rule] = []
    for file_index, path in enumerate(files):
        _check_name(path, names)
        rules += _compile_file(path, file_index, tiers, seen)
    return _with_site_files(rules, tiers, str(root), read_site_files(tuple(extra)))


@dataclass(frozen=True)
class SiteFile:
    """A site rule file as read for one call: its path, its bytes and their sha256."""

    path: str
    data: bytes
    digest: str


def read_site_files(paths: tuple[str | Path, ...]) -> tuple[SiteFile, ...]:
    """The site rule files `paths`, read (at most MAX_SITE_FILES of them; each capped as any rule file)."""
    if len(paths) > MAX_SITE_FILES:
        raise RuleFileError(str(paths[MAX_SITE_FILES]), None, "rules", f"{len(paths)} site rule files",
                            f"at most {MAX_SITE_FILES} per call; merge policies into fewer files")
    out = []
    for path in paths:
        data = _read_bytes(Path(path))
        out.append(SiteFile(str(path), data, hashlib.sha256(data).hexdigest()))
    return tuple(out)


def site_rulebook(files: tuple[SiteFile, ...], base: RuleBook | None = None) -> RuleBook:
    """The built-in rule book (`base`) plus the site files, compiled from the bytes read; the built-in
    rules are reused as compiled, not read again."""
    base = base or builtin_rulebook()
    return _with_site_files(list(base.rules.values()), base.tiers, base.root, files)


def _check_name(path: Path, names: set[str]) -> None:
    if ruleset_name(path) in names:
        raise RuleFileError(str(path), None, "file", path.name, "a file name not already loaded")
    names.add(ruleset_name(path))


def _with_site_files(rules: list[Rule], tiers: dict[str, int], root: str, files: tuple[SiteFile, ...]) -> RuleBook:
    """A RuleBook of `rules` (the built-in ones, compiled) and the site `files` after them."""
    seen = {r.id: r.path for r in rules}
    names = {ruleset_name(r.path) for r in rules}
    first = 1 + max((r.file_index for r in rules), default=-1)
    rules, site_rules = list(rules), 0
    for i, site in enumerate(files):
        path = Path(site.path)
        _check_name(path, names)
        compiled = _compile_file(path, first + i, tiers, seen, data=_parse_toml(path, site.data))
        site_rules += len(compiled)
        if site_rules > MAX_SITE_RULES:
            raise RuleFileError(site.path, None, "rule", f"{site_rules} site rules in the first {i + 1} files",
                                f"at most {MAX_SITE_RULES} site rules per call")
        rules += compiled
    rules.sort(key=lambda r: r.order)
    rulesets: dict[str, list[CompiledRule]] = {}
    scopes: dict[str, str] = {}
    for r in sorted(rules, key=lambda r: (r.file_index, r.index)):
        rulesets.setdefault(ruleset_name(r.path), []).append(r.compiled)
        scopes[ruleset_name(r.path)] = r.scope
    return RuleBook({r.id: r for r in rules}, rulesets, scopes, tiers, _revision(rules, tiers), root)


@lru_cache(maxsize=1)
def builtin_rulebook() -> RuleBook:
    return load_rulebook()

