"""Text fields of the inputs (names, sources): bounded in length and free of characters that
change how the text is read where it is written.

A name goes into launch configs (a TOML comment), traces, explanations and terminals: a newline in
`Model.name` injected `[job]` tables into the torchtitan TOML, an ESC cleared the screen. So a
name, and a source line, is printable text: no control characters (C0, DEL, C1, which includes
NEL, a line break to YAML 1.1), no line or paragraph separators (U+2028, U+2029), no format
characters (the bidirectional overrides and invisible marks that make text read otherwise than
it runs), of bounded length.
"""

from __future__ import annotations

import unicodedata
from typing import Annotated

from pydantic import AfterValidator, ValidationInfo

from ..errors import InputError

__all__ = ["Label", "SourceText", "MAX_LABEL_CHARS", "MAX_SOURCE_CHARS", "check_text"]

MAX_LABEL_CHARS = 1024
"""A name: a Hugging Face repo id is at most 96 characters per part on the Hub, a preset name under
40; a config's _name_or_path is often the local path the checkpoint was loaded from, so 1024."""
MAX_SOURCE_CHARS = 4096
"""A source line: a citation plus the path it was read from (PATH_MAX on Linux is 4096)."""

# Unicode categories refused: Cc control, Cf format, Cs surrogate, Zl / Zp line / paragraph separator.
_REFUSED = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def check_text(value: str, field: str, most: int) -> str:
    """`value`, or an InputError naming `field`: at most `most` characters, none of them refused."""
    if len(value) > most:
        raise InputError(field, value, f"text of at most {most} characters", f"{len(value)} characters")
    if value.isascii() and value.isprintable():       # the common case, checked in C
        return value
    for i, char in enumerate(value):
        if unicodedata.category(char) in _REFUSED:
            name = unicodedata.name(char, "a control character")
            raise InputError(field, value, "printable text: no control, format or line-separator characters",
                             f"character {i} is {name} (U+{ord(char):04X})")
    return value


def _checked(most: int):
    def check(value: str, info: ValidationInfo) -> str:
        return check_text(value, f"{info.config.get('title')}.{info.field_name}", most)
    return AfterValidator(check)


Label = Annotated[str, _checked(MAX_LABEL_CHARS)]
"""A name (Model.name, GPU.name)."""
SourceText = Annotated[str, _checked(MAX_SOURCE_CHARS)]
"""Where numbers come from (Model.source, GPU.source)."""
