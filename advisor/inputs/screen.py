"""The checks pydantic's lax mode leaves out, run once per input object before its fields validate:

- a bool is not a number: lax mode reads `gpus=True` as 1 GPU and `layers=True` as 1 layer;
- a string must encode as UTF-8: a lone surrogate ("x\\ud800") validates, then makes every JSON
  dump of the result raise.

Integer fields stay otherwise lax on purpose ("64" and 64.0 read as 64, documented in the guide):
only the two cases above turn a typo into a wrong answer or a later crash.
"""

from __future__ import annotations

from functools import cache
from typing import Any, get_args

from ..errors import InputError

__all__ = ["screen"]


def _mentions(annotation: Any, kinds: tuple) -> bool:
    if annotation in kinds:
        return True
    return any(_mentions(arg, kinds) for arg in get_args(annotation) if arg is not annotation)


@cache
def _numeric_fields(cls) -> frozenset[str]:
    """The fields of `cls` that take a number and no bool (a bool field accepts True as itself)."""
    return frozenset(name for name, info in cls.model_fields.items()
                     if _mentions(info.annotation, (int, float)) and not _mentions(info.annotation, (bool,)))


def screen(cls, data: Any) -> Any:
    """`data` unchanged, or an InputError naming the first bool given for a number or string that
    is not encodable. For a `model_validator(mode="before")`; only dicts are screened (an instance
    was screened when it was built)."""
    if not isinstance(data, dict):
        return data
    numeric = _numeric_fields(cls)
    for name, value in data.items():
        kind = type(value)
        if kind is bool and name in numeric:
            raise InputError(f"{cls.__name__}.{name}", value, "a number (a bool is not a count or an amount)")
        if kind is str and not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise InputError(f"{cls.__name__}.{name}", value, "text that encodes as UTF-8",
                                 f"character {exc.start} is a lone surrogate") from None
    return data
