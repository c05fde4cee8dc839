"""Rewrite the golden files under tests/golden/ from what the code gives now.

    python tests/golden/regenerate.py          # then review: git diff tests/golden

Writes every scenario's file of the modules in MODULES (each has `goldens()`: name -> function giving
the data), deletes files no scenario produces any more, and prints what changed. The diff is the
record of a deliberate change: say why in the commit that carries it.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

# the test modules that pin golden files
MODULES = ("test_search_speed_identity", "test_estimate_speed_identity", "test_golden_scenarios")


def all_goldens() -> dict:
    found = {}
    for name in MODULES:
        for key, make in importlib.import_module(name).goldens().items():
            assert key not in found, f"two scenarios write golden/{key}.json"
            found[key] = make
    return found


def expected_names() -> set[str]:
    return set(all_goldens())


def main() -> int:
    import golden_files

    goldens = all_goldens()
    changed = [name for name, make in sorted(goldens.items()) if golden_files.write(name, make())]
    stale = sorted(golden_files.names_on_disk() - set(goldens))
    for name in stale:
        golden_files.path_of(name).unlink()
    for name in changed:
        print(f"written  tests/golden/{name}.json")
    for name in stale:
        print(f"deleted  tests/golden/{name}.json")
    print(f"{len(goldens)} golden files, {len(changed)} written, {len(stale)} deleted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
