"""Prices as data: a site's own price per GPU-hour for each GPU type, read from a TOML file.

None are shipped: prices change by the month and by the contract, so a price is always the user's
fact. Without prices a capacity plan answers in GPU-hours. The file's schema is
`schemas/prices.schema.json`:

    currency = "USD"
    source = "our cloud contract, 2027-01"
    [gpu_hour]
    "H100-SXM-80GB" = 2.50       # a preset name or alias (`advisor presets`), or a custom GPU's name
    B200 = 4.20
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..errors import InputError, UnknownPresetError
from ..inputs import presets
from ..inputs.coerce import coerce
from ..inputs.screen import screen
from ..inputs.text import Label, SourceText

__all__ = ["Prices", "load_prices", "as_prices", "MAX_PRICES_FILE_BYTES"]

MAX_PRICES_FILE_BYTES = 1 << 20
"""A prices file lists a few GPU types; a megabyte is far past any real one."""


def _canonical(name: str) -> str:
    """A preset's own name for `name` (aliases and case folded), else `name` as given (a custom GPU)."""
    try:
        return presets.gpu(name)["name"]
    except UnknownPresetError:
        return name


class Prices(BaseModel):
    """Price per GPU-hour of each GPU type, in one currency."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    currency: Label = Field("USD", min_length=1, max_length=16)
    """What the prices are in, e.g. "USD"; it names the cost column and the budget's unit."""
    source: SourceText = "user-supplied"
    """Where the prices come from (a contract, a price list and its date)."""
    gpu_hour: dict[Label, float] = Field(min_length=1, max_length=256)
    """GPU type -> price of one GPU for one hour. A key is a preset name or alias (`advisor presets`)
    or the `name` of a custom GPU."""

    @model_validator(mode="before")
    @classmethod
    def _screen(cls, data: Any) -> Any:
        return screen(cls, data)

    @field_validator("gpu_hour", mode="before")
    @classmethod
    def _check(cls, table: Any) -> Any:
        if not isinstance(table, dict):
            return table                    # pydantic says what a dict needs
        out: dict[str, float] = {}
        for name, price in table.items():
            if isinstance(price, bool) or not isinstance(price, (int, float)) or not math.isfinite(price) \
                    or price <= 0:
                raise InputError(f"Prices.gpu_hour.{name}", price, "a finite price above 0 per GPU-hour")
            key = _canonical(name)
            if key in out:
                raise InputError(f"Prices.gpu_hour.{name}", price, "one price per GPU type",
                                 f"{name!r} and another key both name {key}")
            out[key] = float(price)
        return out

    def per_gpu_hour(self, gpu_name: str) -> float:
        """The price of one hour of `gpu_name`, or an InputError naming the missing type."""
        price = self.gpu_hour.get(_canonical(gpu_name))
        if price is None:
            raise InputError("prices.gpu_hour", gpu_name, f"a price for every GPU type planned; the prices name "
                                                          f"{', '.join(sorted(self.gpu_hour))}",
                             "add the type to the prices file, or leave it out of --gpu")
        return price


def load_prices(path: str | Path) -> Prices:
    """A Prices from a TOML file (see the module docstring); errors name the file and the field."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_PRICES_FILE_BYTES:
            raise InputError("prices", str(path), f"a prices file of at most {MAX_PRICES_FILE_BYTES} bytes",
                             f"{size} bytes")
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError("prices", str(path), "a readable TOML file of prices per GPU-hour", str(exc)) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError("prices", str(path), "valid TOML (schemas/prices.schema.json)", str(exc)) from None
    return coerce(data, Prices, f"prices file {path.name}", _WANT)


def as_prices(value: Any) -> Prices | None:
    """None, a Prices, a dict of its fields, or a TOML file's path."""
    if value is None:
        return None
    if isinstance(value, (str, Path)):
        return load_prices(value)
    return coerce(value, Prices, "prices", _WANT)


_WANT = 'a Prices, a dict such as {"gpu_hour": {"H100": 2.5}}, or a TOML file\'s path'
