"""The package's layout, as a test: imports point only downward along the data flow.

    L0  errors, _version, _unchecked, build_info
    L1  inputs/        typed inputs, units, presets, layout, pipeline geometry, coercion
    L2  costmodel/     memory, communication, time
    L3  facts          the fact documents the rules match on
    L4  rulebook/      rule files -> compiled rules -> engines -> fired ids -> decisions
    L5  results/       trace, audit and recommendation types, and their text
    L6  planner/ | auditor     (siblings: neither imports the other)
    L7  api
    L8  export/, cli, docgen, capacity_plan/ (sweeps of recommend), the `advisor` package itself (the public facade)

Every import counts: module level, inside functions and under TYPE_CHECKING, plus the parent
packages an import runs (importing `advisor.costmodel.memory` executes `advisor/costmodel/__init__`).
docs/architecture.md describes the same layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "advisor"

LAYERS = {
    "advisor.errors": 0, "advisor._version": 0, "advisor._unchecked": 0, "advisor.build_info": 0,
    "advisor.inputs": 1,
    "advisor.costmodel": 2,
    "advisor.facts": 3,
    "advisor.rulebook": 4,
    "advisor.results": 5,
    "advisor.planner": 6, "advisor.auditor": 6,
    "advisor.api": 7,
    "advisor.export": 8, "advisor.cli": 8, "advisor.docgen": 8, "advisor.measure": 8,
    "advisor.capacity_plan": 8, "advisor": 8,
}
EDGE_LAYER = 8                      # edges may use one another (the CLI prints the exporters' output)
LOCAL_IMPORTS_ALLOWED = {"advisor.cli",      # start-up speed: each subcommand loads what it needs
                         "advisor.measure"}  # its benchmarks import torch, an optional extra


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _component(module: str) -> str:
    """The layer unit a module belongs to: its longest prefix in LAYERS."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in LAYERS:
            return ".".join(parts[:n])
    raise AssertionError(f"{module} is in no layer: add it to LAYERS (and to docs/architecture.md)")


class _Import:
    def __init__(self, source: str, target: str, names: tuple[str, ...], line: int, local: bool):
        self.source, self.target, self.names, self.line, self.local = source, target, names, line, local

    def __repr__(self) -> str:
        return f"{self.source}:{self.line} -> {self.target} {list(self.names) or ''}"


def _imports() -> list[_Import]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        local_lines = {n.lineno for f in functions for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                names = tuple(a.name for a in node.names)
                # `from . import presets`: the names may be submodules
                for name in names:
                    if f"{target}.{name}" in _all_modules():
                        found.append(_Import(module, f"{target}.{name}", (), node.lineno, node.lineno in local_lines))
                found.append(_Import(module, target, names, node.lineno, node.lineno in local_lines))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    found.append(_Import(module, alias.name, (), node.lineno, node.lineno in local_lines))
    return [i for i in found if i.target == "advisor" or i.target.startswith("advisor.")]


_MODULES: set[str] = set()


def _all_modules() -> set[str]:
    if not _MODULES:
        _MODULES.update(_module_name(p) for p in PACKAGE.rglob("*.py"))
    return _MODULES


def _executed(target: str) -> list[str]:
    """The modules an import of `target` runs: it and its parent packages below `advisor`."""
    parts = target.split(".")
    return [".".join(parts[:n]) for n in range(2, len(parts) + 1)]


IMPORTS = _imports()


def test_every_module_has_a_layer():
    for module in sorted(_all_modules()):
        _component(module)


def test_imports_only_point_downward():
    upward = []
    for imp in IMPORTS:
        here = _component(imp.source)
        for target in _executed(imp.target):
            there = _component(target)
            if there == here or (LAYERS[here] == LAYERS[there] == EDGE_LAYER):
                continue
            if LAYERS[there] >= LAYERS[here]:
                upward.append(f"{imp!r}  (L{LAYERS[here]} {here} -> L{LAYERS[there]} {there})")
    assert not upward, "imports against the layer order:\n" + "\n".join(upward)


def test_no_import_cycle():
    graph: dict[str, set[str]] = {m: set() for m in _all_modules()}
    for imp in IMPORTS:
        # the source's own parent packages are already running when it imports a sibling
        own = set(_executed(imp.source)[:-1])
        for target in _executed(imp.target):
            if target in graph and target != imp.source and target not in own:
                graph[imp.source].add(target)
    cycles = [sorted(c) for c in _strongly_connected(graph) if len(c) > 1]
    assert not cycles, f"import cycles: {cycles}"


def _strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (the graph is small, but recursion depth is not ours to spend)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    components.append(component)
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return components


def test_no_private_name_crosses_a_package():
    crossing = []
    for imp in IMPORTS:
        private = [n for n in imp.names if n.startswith("_") and not n.startswith("__")]
        target_package = imp.target if imp.target in _package_names() else imp.target.rpartition(".")[0]
        source_package = imp.source if imp.source in _package_names() else imp.source.rpartition(".")[0]
        if private and target_package != source_package:
            crossing.append(f"{imp!r}: {private}")
    assert not crossing, "private names imported from another package:\n" + "\n".join(crossing)


def _package_names() -> set[str]:
    return {_module_name(p) for p in PACKAGE.rglob("__init__.py")}


def test_imports_of_advisor_modules_are_at_module_level():
    local = [repr(i) for i in IMPORTS if i.local and _component(i.source) not in LOCAL_IMPORTS_ALLOWED]
    assert not local, "function-local imports (they hide an edge from readers and cycles):\n" + "\n".join(local)


@pytest.mark.parametrize("module", ["advisor.planner", "advisor.auditor"])
def test_planner_and_auditor_do_not_import_each_other(module):
    other = {"advisor.planner": "advisor.auditor", "advisor.auditor": "advisor.planner"}[module]
    assert not [i for i in IMPORTS if _component(i.source) == module and _component(i.target) == other]
