"""The checks pydantic's lax mode leaves out, run once per input object before its fields validate:

- a bool is not a number: lax mode reads `gpus=True` as 1 GPU and `layers=True` as 1 layer;
- text is not a number: lax mode reads `gpus="64"` as 64 and `lora_rank="16"` as 16. A field that
  takes a quantity with units ("80 GiB", "8k", "70B") still takes text, which its converter reads;
- a flag is a bool: lax mode reads `flash_attention="yes"` (or "on", 1, "t") as True, so a typo
  such as "flase" is an error but "no" is False;
- a key must be a field: a mistyped one (`global_batch`, `num_gpus`) names the closest fields;
- a string must encode as UTF-8: a lone surrogate ("x\\ud800") validates, then makes every JSON
  dump of the result raise.

An integral float still counts (`gpus=64.0` is 64; tests/test_hostile_api.py states it): JSON has
one number type, and a client that writes 64.0 means 64. A fractional one is refused by pydantic.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BeforeValidator

from ..errors import InputError
from .suggest import closest

__all__ = ["screen"]


def _mentions(annotation: Any, kinds: tuple) -> bool:
    if annotation in kinds:
        return True
    return any(_mentions(arg, kinds) for arg in get_args(annotation) if arg is not annotation)


def _converts(annotation: Any, metadata: list) -> bool:
    """The field has a BeforeValidator (a unit converter, a preset reader) that reads text itself."""
    if any(isinstance(m, BeforeValidator) for m in metadata):
        return True
    if get_origin(annotation) is Annotated:
        return any(isinstance(m, BeforeValidator) for m in annotation.__metadata__)
    return any(_converts(arg, []) for arg in get_args(annotation) if arg is not annotation)


def _literals(annotation: Any) -> frozenset:
    if get_origin(annotation) is Literal:
        return frozenset(get_args(annotation))
    return frozenset().union(*(_literals(arg) for arg in get_args(annotation) if arg is not annotation))


class _Kinds:
    __slots__ = ("numeric", "plain", "flags", "names")

    def __init__(self, cls):
        fields = cls.model_fields.items()
        # the keys a dict may hold: the fields, and the computed ones a JSON dump carries (Layout.id);
        # None where the model takes other keys too (extra is not "forbid")
        self.names = ([*cls.model_fields, *cls.model_computed_fields]
                      if cls.model_config.get("extra") == "forbid" else None)
        # fields that take a number and no bool (a bool field accepts True as itself)
        self.numeric = frozenset(name for name, info in fields
                                 if _mentions(info.annotation, (int, float)) and not _mentions(info.annotation, (bool,)))
        # ... of which those without a converter of their own: text is no number there
        self.plain = frozenset(name for name in self.numeric
                               if not _converts(cls.model_fields[name].annotation, cls.model_fields[name].metadata))
        # flags: a bool, or one of the field's literal strings ("auto")
        self.flags = {name: _literals(info.annotation) for name, info in fields
                      if _mentions(info.annotation, (bool,)) and not _mentions(info.annotation, (int, float))}


@cache
def _kinds(cls) -> _Kinds:
    return _Kinds(cls)


def screen(cls, data: Any) -> Any:
    """`data` unchanged, or an InputError naming the first bool given for a number, text given for a
    number, a non-bool given for a flag, or a string that is not encodable. For a
    `model_validator(mode="before")`; only dicts are screened (an instance was screened when it was
    built)."""
    if not isinstance(data, dict):
        return data
    kinds = _kinds(cls)
    if kinds.names is not None:
        _known_keys(cls.__name__, data, kinds.names)
    for name, value in data.items():
        kind = type(value)
        if kind is bool and name in kinds.numeric:
            raise InputError(f"{cls.__name__}.{name}", value, "a number (a bool is not a count or an amount)")
        if kind is str and name in kinds.plain:
            raise InputError(f"{cls.__name__}.{name}", value, "a number, not text",
                             "write the number itself (64, not \"64\")")
        if (name in kinds.flags and kind is not bool and value is not None
                and not (kind is str and value in kinds.flags[name])):
            allowed = " or ".join(["true", "false", *(repr(v) for v in sorted(kinds.flags[name], key=str))])
            raise InputError(f"{cls.__name__}.{name}", value, allowed, "a flag is a bool, not text or a number")
        if kind is str and not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise InputError(f"{cls.__name__}.{name}", value, "text that encodes as UTF-8",
                                 f"character {exc.start} is a lone surrogate") from None
    return data


def _known_keys(title: str, data: dict, names: list[str]) -> None:
    """An InputError for the first key that is no field, with the closest fields as did-you-mean
    (`global_batch` -> global_batch_size, `num_gpus` -> gpus) and every field as data (`want`)."""
    for key in data:
        if key not in names:
            near = closest(key, names) if isinstance(key, str) else []
            raise InputError(f"{title}.{key}", data[key], names,
                             f"no field {key!r}: did you mean {', '.join(near)}?" if near
                             else f"no field {key!r}; the fields are under want")
