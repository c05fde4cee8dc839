"""Every reference in code, rule files and docs resolves: a repository file a comment, docstring, rule or
page names exists, a dotted `advisor.x.y` name imports (a module, or an attribute of one), and no code or
rule file points to this project's issues, which are not in the repository. The
research notes and the seed article the project grew from are not in the repository, so a pointer to
them does not resolve either."""

from __future__ import annotations

import importlib
import re
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = [*sorted((ROOT / "advisor").rglob("*.py")), *sorted((ROOT / "rules").rglob("*.toml")),
           *sorted((ROOT / "rules").rglob("*.md")), *sorted((ROOT / "docs").rglob("*.md"))]

# A repository path: a top-level folder of the repository (or one it does not hold) and a file in it.
_FILE = re.compile(r"(?<![\w/.@-])((?:advisor|rules|docs|tests|benchmarks|schemas|research|seed|shared)/"
                   r"[\w./-]*[\w-]\.(?:py|toml|md|json|txt|csv|cfg|ini))\b")
_MODULE = re.compile(r"(?<![\w./-])advisor(?:\.[A-Za-z_]\w*)+")
# The same names written from inside the package ("costmodel.context.resolve", "results.render.story"),
# and the cost model's context module by its short name, as comments name them.
_SHORT = re.compile(r"(?<![\w./-])((?:costmodel|rulebook|results|inputs|planner|export|measure|capacity_plan|facts|api|"
                    r"auditor)(?:\.[A-Za-z_]\w*)+)")
_CONTEXT = re.compile(r"(?<![\w./-])context\.([A-Za-z_]\w*)")
_LINK = re.compile(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)")      # a relative Markdown link

# TODO(issue 35): references in files whose owners fix them in their own branches (planner, CLI,
# inputs, cost model) and the rule references to the seed article, which has no public address yet.
KNOWN: dict[str, str] = {
    "docs/rules.md: file shared/seed/": "generated from the rule files below",
    "rules/checklist.toml: file shared/seed/": "the seed article: no public address to cite yet",
    "rules/constraints.toml: file shared/seed/": "the seed article",
    "rules/selection-matrix.toml: file shared/seed/": "the seed article",
    "rules/audit-advice.toml: file shared/seed/": "the seed article",
}


# Another repository named on the same line before the path ("NVIDIA/Megatron-LM: docs/...",
# "deepspeedai/DeepSpeed docs/...", "org/repo@commit tests/..."): the path is in that repository.
_OTHER_REPO = re.compile(r"(?<![\w/.-])(?!(?:advisor|rules|docs|tests|benchmarks|schemas)/)[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+"
                         r"(?:@[0-9a-f]{6,40})?:?\s")


# An issue number of this project: the issues are not in the repository ("issue 17"); another
# repository's issue names that repository on the same line ("NVIDIA/nccl-tests issue 150").
_ISSUE = re.compile(r"\b[Ii]ssues? #?[0-9]+")


def _refs(path: Path) -> list[tuple[str, str]]:
    """(kind, reference) for every repository file, module path and relative link the file names."""
    text = path.read_text(encoding="utf-8")
    found = []
    for m in _FILE.finditer(text):
        line = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
        if not _OTHER_REPO.search(line):
            found.append(("file", m.group(1)))
    found += [("module", m.rstrip(".")) for m in _MODULE.findall(text)]
    found += [("module", "advisor." + m) for m in _SHORT.findall(text) if not re.search(r"\.(py|toml|md|json|txt)$", m)]
    found += [("module", "advisor.costmodel.context." + m) for m in _CONTEXT.findall(text) if m not in ("py", "md")]
    for m in _ISSUE.finditer(text):
        line = text[text.rfind("\n", 0, m.start()) + 1:text.find("\n", m.end()) % (len(text) + 1)]
        if path.suffix != ".md" and not _OTHER_REPO.search(line + " ") and "github.com" not in line:
            found.append(("issue", m.group(0)))
    if path.suffix == ".md":
        found += [("link", m) for m in _LINK.findall(text) if not m.startswith(("http", "mailto"))]
    return found


@lru_cache(maxsize=None)
def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:n]))
        except ImportError:
            continue
        for name in parts[n:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def unresolved() -> list[str]:
    bad = []
    for path in SCANNED:
        rel = path.relative_to(ROOT).as_posix()
        for kind, ref in _refs(path):
            if kind == "file":
                ok = (ROOT / ref).exists()
            elif kind == "link":
                ok = (path.parent / ref).exists()
            elif kind == "issue":
                ok = False
            else:
                ok = _resolves(ref)
            if not ok:
                bad.append(f"{rel}: {kind} {ref}")
    return sorted(set(bad))


def test_every_reference_resolves():
    bad = [b for b in unresolved() if not any(b.startswith(k) for k in KNOWN)]
    assert not bad, f"{len(bad)} references that do not resolve:\n" + "\n".join(bad)


@pytest.mark.parametrize("text, want", [
    ("see advisor/facts.py", [("file", "advisor/facts.py")]),
    ("as issue 17 ruled", [("issue", "issue 17")]),
    ("NVIDIA/nccl-tests issue #150", []),
    ('path = "NVIDIA/Megatron-LM: docs/user-guide/x.md"', []),
    ("deepseek-ai/DeepEP@5eb0722 tests/test_hybrid_ep.py", []),
    ("(research/durable-rules.md §4)", [("file", "research/durable-rules.md")]),
    ("advisor.costmodel.context.resolve.", [("module", "advisor.costmodel.context.resolve")]),
    ("(results.render.story)", [("module", "advisor.results.render.story")]),
    ("the split (context.stage_layers)", [("module", "advisor.costmodel.context.stage_layers")]),
])
def test_the_scan_finds_references(tmp_path, text, want):
    page = tmp_path / "x.py"
    page.write_text(text)
    assert _refs(page) == want


def test_a_missing_file_or_module_does_not_resolve():
    assert not (ROOT / "research/durable-rules.md").exists()
    assert not _resolves("advisor.estimate.memory") and _resolves("advisor.costmodel.memory")
    assert not _resolves("advisor.costmodel.context.no_such_term") and _resolves("advisor.costmodel.context.resolve")
    assert not _resolves("advisor.facts.no_such_fact") and _resolves("advisor.facts.build_facts")
