"""Which of the search's hot modules this install runs compiled.

A standard wheel compiles them with Cython, their source unchanged (hatch_build.py, which reads
COMPILED from this file without importing advisor); an editable install, ADVISOR_PURE_BUILD=1 and
a build without a C compiler run them as Python, with the same answers (benchmarks/compiled.py).
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

#: The modules compiled, as paths in the repository: the cost model's terms, the planner's search,
#: the Python rule evaluator and the facts the search screens with. None defines a pydantic model
#: (pydantic reads annotations at run time; tests/test_build_info.py checks it).
COMPILED = (
    "advisor/costmodel/activations.py", "advisor/costmodel/adapters.py", "advisor/costmodel/comm.py",
    "advisor/costmodel/compute.py", "advisor/costmodel/context.py", "advisor/costmodel/fits.py",
    "advisor/costmodel/flops.py", "advisor/costmodel/kernels.py", "advisor/costmodel/memory.py",
    "advisor/costmodel/sizing.py", "advisor/costmodel/states.py", "advisor/costmodel/time.py",
    "advisor/planner/alternatives.py", "advisor/planner/candidates.py", "advisor/planner/families.py",
    "advisor/planner/job.py", "advisor/planner/messages.py", "advisor/planner/ranking.py",
    "advisor/planner/search.py", "advisor/planner/space.py", "advisor/planner/state.py",
    "advisor/rulebook/compiled.py", "advisor/rulebook/engines/python.py", "advisor/rulebook/grammar.py",
    "advisor/rulebook/session.py", "advisor/rulebook/whynot.py",
    "advisor/auditor.py", "advisor/facts.py",
)


def extension_path(rel: str) -> str:
    """Where the compiled extension of module `rel` (a COMPILED path) lies, relative to the same
    root: its .py with this interpreter's extension suffix ("advisor/facts.cpython-311-x86_64-linux-gnu.so")."""
    return rel[:-3] + (sysconfig.get_config_var("EXT_SUFFIX") or ".so")


def compiled_modules(root: Path | None = None) -> tuple[str, ...]:
    """The COMPILED modules this install (or the tree at `root`) has as extension modules, as
    dotted names; () when pure Python."""
    root = Path(__file__).resolve().parent.parent if root is None else root
    return tuple(rel[:-3].replace("/", ".") for rel in COMPILED if (root / extension_path(rel)).is_file())


def describe() -> str:
    """One line for `advisor --version` and the benchmarks: how many hot modules run compiled."""
    n = len(compiled_modules())
    return f"{n} of {len(COMPILED)} hot modules compiled" if n else "pure Python"
