"""Which engine each Python gets: durable-rules is declared only where it installs AND imports
(research/durable-rules.md §6.2, §7.7: on 3.13 it builds but fails to import, undefined symbol
PyEval_CallObject), and the pure-Python engine takes over everywhere else."""

from __future__ import annotations

import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import advisor
import advisor.rulebook.engines as engines
import advisor.rulebook.engines.durable as eng

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


@pytest.mark.skipif(not PYPROJECT.exists(), reason="runs from a source checkout")
def test_durable_rules_is_declared_only_below_3_13():
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    durable = [d for d in deps if d.lower().replace("_", "-").startswith("durable-rules")]
    assert durable == ['durable-rules==2.0.28; python_version < "3.13"']


def _installed() -> bool:
    try:
        metadata.version("durable-rules")
    except metadata.PackageNotFoundError:
        return False
    return True


def test_engine_matches_the_interpreter():
    info = engines.engine_info()
    assert info["python"] == ".".join(map(str, sys.version_info[:3]))
    if sys.version_info >= (3, 13):
        assert not eng.durable_available()
        assert info == {"engine": "python", "durable_rules": None, "python": info["python"]}
    elif _installed():
        assert eng.durable_available(), eng.durable_import_error()
        assert info["engine"] in ("durable", "python")        # python only when ADVISOR_ENGINE says so
        if info["engine"] == "durable":
            assert info["durable_rules"] == "2.0.28"


def test_default_engine_runs_end_to_end():
    rec = advisor.recommend({"gpu": "H100-SXM-80GB", "gpus": 8}, "llama-3-8b")
    assert rec.status == "recommended"
    assert rec.trace.engine == engines.engine_info()["engine"]
