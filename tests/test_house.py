"""The house's size limits over advisor/: no function over 60 lines, none with more than 8 parameters
(self and cls not counted; data-class constructors are generated, so never counted), no module over 600
lines. ALLOWED names what is over today and why; an entry that is no longer over fails too, so the
list only shrinks."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES, MAX_PARAMS, MAX_MODULE_LINES = 60, 8, 600

# What is over the limits, and why: each entry a justified exception.
ALLOWED: dict[str, str] = {
    "advisor/capacity_plan/plan.py::capacity params":
        "the public advisor.capacity() API: keyword-only arguments, one per `advisor capacity` option",
}


def _params(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    names = [*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []), *([a.kwarg] if a.kwarg else [])]
    return len([p for p in names if p.arg not in ("self", "cls")])


def offenders() -> dict[str, str]:
    """'path::function lines|params' or 'path lines' -> what it measures, for everything over a limit."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "advisor").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > MAX_MODULE_LINES:
            found[f"{rel} lines"] = f"{len(text.splitlines())} lines"
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found[f"{rel}::{node.name} lines"] = f"{length} lines (line {node.lineno})"
            if _params(node) > MAX_PARAMS:
                found[f"{rel}::{node.name} params"] = f"{_params(node)} parameters (line {node.lineno})"
    return found


def test_functions_and_modules_within_the_limits():
    over = {k: v for k, v in offenders().items() if k not in ALLOWED}
    assert not over, "over the house limits:\n" + "\n".join(f"  {k}: {v}" for k, v in over.items())


def test_the_allow_list_only_names_what_is_still_over():
    stale = sorted(set(ALLOWED) - set(offenders()))
    assert not stale, f"within the limits now, drop from ALLOWED: {stale}"
