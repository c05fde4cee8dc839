"""The reliability probe, run on demand (issue 38): the generated hostile inputs of
tests/test_hostile_input.py at many times their count, with the outcome of every case. Prints, never asserts.

    python benchmarks/probe.py [--scale 40]

Runs that module's fuzz tests under HYPOTHESIS_PROFILE=thorough with ADVISOR_FUZZ_SCALE=scale: per unit of
scale, 500 API cases (recommend 80, audit 120, constructors and estimate 100, arbitrary JSON 100, Hugging Face
configs 100), 100 CLI runs and 140 rule files (mutated and random bytes), each on the engine it draws. A case
is clean when it gives an answer whose numbers are finite and consistent, or an advisor error (or a pydantic
ValidationError) that names the field with have / want; a CLI run when it exits 0, 1 or 2 with no traceback.
The first unclean case fails its test, which hypothesis then shrinks and prints; the table counts what ran.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=40.0, help="times the thorough counts (40: ~33,000 API cases)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "outcomes.json"
        env = dict(os.environ, HYPOTHESIS_PROFILE="thorough", ADVISOR_FUZZ_SCALE=str(args.scale),
                   ADVISOR_FUZZ_REPORT=str(report))
        t0 = time.perf_counter()
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                              "tests/test_hostile_input.py", "-k", "hostile or arbitrary_json or rule_file_mutations "
                              "or rule_file_random_bytes"], cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        outcomes = json.loads(report.read_text())["outcomes"] if report.exists() else {}
    by_kind: Counter = Counter()
    for key, n in outcomes.items():
        by_kind[key.split(":")[0]] += n
    print(f"probe at scale {args.scale:g}: {wall:.0f} s wall; pytest exit {run.returncode} "
          f"({run.stdout.strip().splitlines()[-1] if run.stdout.strip() else 'no output'})")
    api = sum(n for kind, n in by_kind.items() if kind not in ("cli", "rulefile"))
    print(f"  API cases {api:,}, CLI runs {by_kind['cli']:,}, rule files {by_kind['rulefile']:,}")
    for key, n in sorted(outcomes.items()):
        print(f"  {key:<44} {n:>8,}")
    if run.returncode:
        print(run.stdout[-4000:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
