"""The field types the inputs share: quantities read through advisor.inputs.units (a string with
units, or a plain number in canonical units), and the frozen base every input model derives from
(unknown keys refused with did-you-mean, bools and text screened: advisor.inputs.screen)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, model_validator

from .screen import screen
from .units import to_bytes, to_bytes_per_second, to_count, to_device_memory, to_flops_per_second, to_tokens


def _unit(convert, field: str):
    # The error names the field being validated (GPU.nvlink_bandwidth), `field` when unknown.
    return BeforeValidator(lambda v, info: convert(v, f"{info.config.get('title')}.{info.field_name}"
                                                 if info.field_name else field))


Bytes = Annotated[int, _unit(to_bytes, "memory")]


# A GPU's own memory: the vendor's "80GB" is 80 GiB (units.to_device_memory says why and where from).
DeviceBytes = Annotated[int, _unit(to_device_memory, "memory")]


ByteRate = Annotated[float, _unit(to_bytes_per_second, "bandwidth")]


FlopRate = Annotated[float, _unit(to_flops_per_second, "peak_flops")]


Tokens = Annotated[int, _unit(to_tokens, "seq_len")]


Count = Annotated[int, _unit(to_count, "params")]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    @model_validator(mode="before")
    @classmethod
    def _screen(cls, data: Any) -> Any:
        return screen(cls, data)
