"""Golden files: results written out as readable JSON under tests/golden/, compared as text.

A test builds the data for one scenario with the functions below and calls `check(name, data)`;
on a mismatch the failure shows a unified diff of the JSON (what the code gives now against what
the file holds). A deliberate change is recorded by regenerating the files,

    python tests/golden/regenerate.py

and reviewing `git diff tests/golden`: the diff, and the commit that carries it, say what changed.

The format, chosen to diff well: pretty-printed JSON, keys sorted, two-space indent, one ranked
layout per line (`ranking_rows`; a row's fields in a fixed order rather than sorted), floats
rounded to 12 significant digits (stable across platforms and libm versions, while any real change
of a number still shows), UTF-8.

Volatile fields, the only ones dropped (see VOLATILE): the package version, and the rule book's
revision (a hash of every rule file, so it changes with any rule edit, even one that changes no
answer here). Everything else a result holds is kept.

"""

from __future__ import annotations

import difflib
import json
import math
from pathlib import Path
from typing import Any

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"

# (path of keys from the top of a dump, why it is volatile)
VOLATILE = {
    ("trace", "advisor_version"): "the package version: changes at each release, not with behaviour",
    ("trace", "ruleset_revision"): "a hash of the rule book: changes with any rule edit, even one that "
                                   "changes no answer here (the fired rules' ids and versions stay)",
}

SIGNIFICANT_DIGITS = 12
DIFF_LINES = 80


# ------------------------------------------------------------------------------ what a file holds

def _drop_volatile(dump: dict) -> dict:
    for path in VOLATILE:
        node = dump
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(path[-1], None)
    return dump


def recommendation_data(rec) -> dict:
    """The whole Recommendation (layout, estimates, alternatives, findings, trace events, candidates
    examined), volatile fields dropped."""
    return _drop_volatile(rec.model_dump(mode="json"))


def audit_data(result) -> dict:
    return _drop_volatile(result.model_dump(mode="json"))


def estimate_data(est) -> dict:
    return est.model_dump(mode="json")


# The estimate's figures a ranking row keeps: the terms of the step time and the memory verdict (a
# full Estimate per ranked layout would make files of megabytes; the Recommendation's section holds
# the full estimates of the chosen layout and its alternatives, the estimate goldens the cost model).
RANKING_TIMES = ("step_time", "compute_time", "bubble_time", "exposed_comm_time", "optimizer_time")
RANKING_MEMORY = ("total", "fits", "host_fits")


def ranking_rows(ranking) -> list[dict]:
    """One row per ranked layout, in ranking order: the full layout and its estimate's headline figures."""
    rows = []
    for layout, est in ranking:
        e = est.model_dump(mode="json")
        rows.append({"layout": layout.model_dump(mode="json"), **{k: e[k] for k in RANKING_TIMES},
                     **{f"memory_{k}": e["memory"][k] for k in RANKING_MEMORY}})
    return rows


# ------------------------------------------------------------------------------ rendering

def _round(value: Any) -> Any:
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)       # JSON has no inf / nan
        return float(f"{value:.{SIGNIFICANT_DIGITS}g}")
    if isinstance(value, dict):
        return {str(k): _round(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_round(v) for v in value]
    return value


def _one_line(row: dict) -> str:
    # a row keeps the order it was built in (layout first, its fields in Layout's order): it reads
    # like the layout, and that order is as fixed as the code that builds it
    return json.dumps(row, ensure_ascii=False, separators=(", ", ": "))


def render(data: dict) -> str:
    """The file's text: json.dumps(indent=2, sort_keys=True), except that the rows of a top-level
    "ranking" list are written one per line (a changed layout or figure is a one-line diff)."""
    data = _round(data)
    items = []
    for key in sorted(data):
        if key == "ranking":
            rows = data[key]
            value = "[\n" + ",\n".join("    " + _one_line(row) for row in rows) + "\n  ]" if rows else "[]"
        else:
            value = json.dumps(data[key], indent=2, sort_keys=True, ensure_ascii=False).replace("\n", "\n  ")
        items.append(f"  {json.dumps(key)}: {value}")
    return "{\n" + ",\n".join(items) + "\n}\n" if items else "{}\n"


def path_of(name: str) -> Path:
    return GOLDEN_DIR / f"{name}.json"


def names_on_disk() -> set[str]:
    return {p.relative_to(GOLDEN_DIR).as_posix()[:-len(".json")] for p in GOLDEN_DIR.rglob("*.json")}


def mismatch(name: str, data: dict) -> str | None:
    """None if `data` renders to the golden file's text, else what to show: a unified diff of the JSON
    (golden file against what the code gives now), at most DIFF_LINES lines."""
    path = path_of(name)
    rel = f"tests/golden/{name}.json"
    if not path.exists():
        return f"no golden file {rel}: write it with `python tests/golden/regenerate.py`"
    got, want = render(data), path.read_text(encoding="utf-8")
    if got == want:
        return None
    diff = list(difflib.unified_diff(want.splitlines(), got.splitlines(), f"{rel} (golden)", f"{rel} (now)",
                                     lineterm="", n=2))
    shown = diff[:DIFF_LINES]
    if len(diff) > DIFF_LINES:
        shown.append(f"... {len(diff) - DIFF_LINES} more diff lines: regenerate and `git diff tests/golden`")
    return f"{name} differs from its golden file:\n" + "\n".join(shown)


def check(name: str, data: dict) -> None:
    check_all({name: data})


def check_all(files: dict[str, dict]) -> None:
    """Fail, showing the diff of every file that differs, unless each file's text is what the data renders to."""
    import pytest

    problems = [m for name, data in files.items() if (m := mismatch(name, data)) is not None]
    if problems:
        # pytrace=False: the message is the diff, without pytest's dump of the (huge) arguments
        pytest.fail("\n\n".join(problems) + "\n\nIf the change is deliberate, run `python tests/golden/regenerate.py`"
                    " and review `git diff tests/golden`.", pytrace=False)


def write(name: str, data: dict) -> bool:
    """Write the golden file; True if its text changed."""
    path = path_of(name)
    text = render(data)
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    return True
