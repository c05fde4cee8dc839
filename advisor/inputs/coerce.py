"""What callers pass (an advisor object, a dict of its fields, a preset name) as the advisor
object, or an InputError naming the field: one place for every entry point (recommend, audit,
estimate) so each rejects bad input with the same words."""

from __future__ import annotations

import os
from typing import Any

from pydantic import ValidationError

from ..errors import AdvisorError, InputError
from .layout import Layout
from .specs import Cluster, Model, Training

__all__ = ["coerce", "invalid_field", "as_cluster", "as_model", "as_training", "as_layout", "resolve_layout", "as_rule_paths",
           "as_engine_name", "ENGINE_WANT"]


def coerce(value: Any, cls, field: str, want: str, preset=None):
    """`value` as an instance of `cls`: the instance itself, a dict of its fields, or (when `preset`
    is given) a preset name; anything else is an InputError naming `field`."""
    if isinstance(value, cls):
        return value
    if isinstance(value, dict):
        for key in value:
            if type(key) is not str:        # cls(**value) would raise a bare TypeError
                raise InputError(f"{field} key", key, f"field names as strings: {want}")
        try:
            return cls(**value)
        except ValidationError as exc:
            raise invalid_field(field, exc) from None
    if preset is not None and isinstance(value, str):
        return preset(value)
    raise InputError(field, value, want)


def invalid_field(field: str, exc: ValidationError) -> AdvisorError:
    """pydantic's first complaint about a dict a caller passed, as the advisor error it wraps (a
    validator's own InputError) or an InputError naming the field path, e.g. `cluster.gpus`."""
    err = exc.errors()[0]
    inner = (err.get("ctx") or {}).get("error")
    if isinstance(inner, AdvisorError):
        return inner
    path = ".".join(str(part) for part in err.get("loc", ()))
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return InputError(f"{field}.{path}" if path else field, err.get("input"), err["msg"] + more)


def as_cluster(value: Any) -> Cluster:
    return coerce(value, Cluster, "cluster", 'an advisor.Cluster or a dict such as {"gpu": "H100", "gpus": 64}')


def as_model(value: Any) -> Model:
    return coerce(value, Model, "model", "an advisor.Model, a preset name such as 'llama-3-70b', or a dict of "
                                         "Model fields", preset=Model.preset)


def as_training(value: Any) -> Training:
    if value is None:
        return Training()
    return coerce(value, Training, "training", "an advisor.Training, a dict of its fields, or None")


def as_layout(value: Any) -> Layout:
    """An advisor.Layout, a dict of its fields, or the id recommend prints (Layout.parse)."""
    if isinstance(value, str):
        try:
            return Layout.parse(value)
        except InputError as exc:
            raise InputError("layout", value, exc.want, exc.hint) from None
    return coerce(value, Layout, "layout", "an advisor.Layout, a dict of its fields, e.g. {'tp': 8, 'pp': 4}, "
                                           "or a layout id, e.g. 'tp8-dp4-pp2-zero1-sp'")


def resolve_layout(layout: Layout, cluster: Cluster) -> Layout:
    """Fill an omitted dp from the GPU count (rounded down when it does not divide: M1 then reports it)."""
    if layout.dp is not None:
        return layout
    return layout.model_copy(update={"dp": max(1, cluster.gpus // layout.model_parallel)})


def as_rule_paths(rules: Any) -> tuple[str | os.PathLike, ...]:
    """Site rule files as a tuple of paths: one path (str or os.PathLike) is one file, as a caller
    writing rules="site.toml" means (iterating it would read the files 's', 'i', ...); None is none."""
    if rules is None:
        return ()
    if isinstance(rules, (str, os.PathLike)):
        _check_path("rules", rules)
        return (rules,)
    if not isinstance(rules, (tuple, list)):
        raise InputError("rules", rules, "a rule file path, or a tuple or list of them")
    for i, path in enumerate(rules):
        if not isinstance(path, (str, os.PathLike)):
            raise InputError(f"rules[{i}]", path, "a rule file path (str or os.PathLike)")
        _check_path(f"rules[{i}]", path)
    return tuple(rules)


def _check_path(field: str, path) -> None:
    """A path the OS can be asked about: encodable (no lone surrogate) and without a NUL byte, which
    every os call would refuse with a bare UnicodeEncodeError or ValueError."""
    try:
        encoded = os.fsencode(path)
    except (UnicodeEncodeError, TypeError):
        raise InputError(field, path, "a file path the file system can encode") from None
    if b"\0" in encoded:
        raise InputError(field, path, "a file path without a NUL byte")


def as_engine_name(engine: Any) -> str | None:
    """`engine=` as None or a str (which names an engine the rule book then selects or refuses)."""
    if engine is None or isinstance(engine, str):
        return engine
    raise InputError("engine", engine, ENGINE_WANT)


ENGINE_WANT = "'durable', 'python', or None (then $ADVISOR_ENGINE, else durable where it imports)"
