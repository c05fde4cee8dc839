"""Pyflakes' checks (ruff's F rules) over the code, the tests, the benchmarks and the docs' examples: no
undefined name, no unused or shadowed import, no name in __all__ the module does not define. These are
the mistakes a refactor leaves behind (a moved helper still imported, a renamed one still annotated)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_pyflakes_finds_nothing():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "F",
                           "--output-format", "concise", "advisor", "tests", "benchmarks", "docs"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
