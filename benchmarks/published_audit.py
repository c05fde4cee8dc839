"""Audit every published layout (they ran in production or vendor benchmarks): none may be an error.

    python benchmarks/published_audit.py [path/to/published-layouts-dev.jsonl] [--all]

Prints the number of records audited, how many have an `error` finding (target: 0), and each finding
that is reported (warnings and notes with --all), with the record id and source. Run on demand;
not part of the test suite.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import advisor  # noqa: E402
from advisor.costmodel import Assumptions
from benchmarks.published import load_records  # noqa: E402


def main(argv: list[str]) -> int:
    show_all = "--all" in argv
    paths = [a for a in argv if not a.startswith("--")]
    records = list(load_records(Path(paths[0]) if paths else None, include_skipped=True))
    audited = [r for r in records if r.ok]
    with_errors, recipe_errors, by_rule = 0, 0, Counter()
    legality_errors = 0          # errors other than the memory estimate (which the cost model owns)
    for rec in audited:
        # The record's framework settings (e.g. NeMo 24.07's bf16 gradient buffers), as published_fit.py uses.
        assumptions = Assumptions(**rec.assumptions) if rec.assumptions else None
        report = advisor.audit(rec.cluster, rec.model, rec.layout, rec.training, assumptions=assumptions)
        by_rule.update(f.rule_id for f in report.findings)
        if any(not f.rule_id.startswith("layout.memory") and not f.rule_id.startswith("layout.offload")
               for f in report.errors):
            legality_errors += 1
        if report.errors:
            if rec.measured:
                with_errors += 1
            else:
                recipe_errors += 1
        shown = report.findings if show_all else report.errors
        for f in shown:
            kind = "" if rec.measured else " [recipe default, not a measured run]"
            print(f"{rec.id:<44} {f.severity:<7} {f.rule_id}: {f.message}{kind}")
            if f.severity == "error" and rec.assumed:
                print(f"{'':44} assumed: {'; '.join(rec.assumed)}")
    skipped = [r for r in records if not r.ok]
    print()
    print(f"records: {len(records)}  audited: {len(audited)}  skipped: {len(skipped)}")
    print(f"records with a legality error (not memory): {legality_errors} (target 0)")
    print(f"measured runs with an error finding: {with_errors} (target 0; memory errors depend on the "
          "options the source left unstated, listed with 'assumed:' above)")
    print(f"unmeasured recipe defaults with an error finding: {recipe_errors} (reported; they may never have run as written)")
    print("findings by rule: " + ", ".join(f"{k} {v}" for k, v in by_rule.most_common()))
    for r in skipped:
        print(f"  skipped {r.id}: {r.skip_reason}")
    return 0 if with_errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
