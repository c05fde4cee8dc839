"""Engine selection: durable_rules where it imports (the mandated engine), else the pure-Python
engine (durable does not import on Python 3.13+); `ADVISOR_ENGINE`
or an explicit name overrides. `engine_info()` names the engine and versions, so a recommendation
can be reproduced."""

from __future__ import annotations

import os
import platform
from importlib.metadata import version
from typing import Iterable, Mapping

from ...errors import EngineError
from ..compiled import CompiledRule
from . import durable
from .python import PythonEngine

__all__ = ["select_engine", "make_engine", "engine_info", "PythonEngine"]

# --------------------------------------------------------------------------------------------
# Selection
# --------------------------------------------------------------------------------------------

_ENGINES = ("durable", "python")


def select_engine(name: str | None) -> str:
    """The engine `make_engine(name)` would build: name, else $ADVISOR_ENGINE, else durable if it imports."""
    return _select(name)


def _select(name: str | None) -> str:
    choice = name if name is not None else (os.environ.get("ADVISOR_ENGINE") or "").strip().lower() or None
    if choice is None:
        return "durable" if durable.durable_available() else "python"
    if choice not in _ENGINES:
        source = "name" if name is not None else "ADVISOR_ENGINE"
        raise EngineError(f"{source}: unknown engine {choice!r}; want one of {list(_ENGINES)}")
    if choice == "durable" and not durable.durable_available():
        raise EngineError(f"engine 'durable' requested but durable_rules cannot be imported: "
                          f"{durable.durable_import_error()}")
    return choice


def make_engine(rulesets: Mapping[str, Iterable[CompiledRule]], name: str | None = None) -> durable.DurableEngine | PythonEngine:
    """Build the engine named `name`, else $ADVISOR_ENGINE ("durable" | "python"), else durable
    if it imports, else python. An explicit "durable" that cannot import raises EngineError."""
    choice = _select(name)
    return durable.DurableEngine(rulesets) if choice == "durable" else PythonEngine(rulesets)


def _durable_version() -> str | None:
    try:
        return version("durable-rules")
    except Exception:
        return None


def engine_info(engine: durable.DurableEngine | PythonEngine | str | None = None) -> dict:
    """Engine name, durable_rules version (when that engine is used) and Python version.

    With no argument, describes the engine `make_engine(...)` would select now.
    """
    if engine is None:
        name = _select(None)
    elif isinstance(engine, str):
        name = engine
    else:
        name = engine.name
    return {
        "engine": name,
        "durable_rules": _durable_version() if name == "durable" else None,
        "python": platform.python_version(),
    }
