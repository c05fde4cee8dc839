"""Every string an export embeds, escaped for its format: no name, path or version a
caller passes can change what the config says beyond the value it is written into.

- TOML (torchtitan v0.2.2): values as basic strings with TOML's escapes; comments with the
  characters TOML forbids there (controls other than tab) written as \\uXXXX text.
- YAML (accelerate): values as double-quoted scalars, escaping what YAML 1.1 would read as a line
  break (NEL, U+2028, U+2029) or refuse as non-printable; comments likewise, on one line.
- Shell (torchrun, Megatron, torchtitan main): words single-quoted by `shlex.quote`; a value that
  keeps `$NAME` placeholders for the launcher to expand is double-quoted only when the rest of it
  is plain (letters, digits, `_.:/@%+=,-`), else its literal parts are single-quoted around them.
- JSON (DeepSpeed, PEFT, --json): `json.dumps`, which escapes by itself.

tests/test_export_escaping.py checks, over generated names and paths, that each export parses to
the same structure as with a plain one.
"""

from __future__ import annotations

import json
import re
import shlex

__all__ = ["toml_string", "toml_comment", "yaml_scalar", "yaml_comment", "shell_word", "shell_with_placeholders"]

# What TOML basic strings and comments may not hold raw: controls other than tab (toml.io v1.0.0).
_TOML_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# What YAML 1.1 (PyYAML) reads as a line break or refuses as non-printable: C0 but tab, DEL, C1
# (NEL among them), the line and paragraph separators, the byte-order mark, the non-characters.
_YAML_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")
_PLACEHOLDER = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*|\{[A-Za-z_][A-Za-z0-9_]*\})")
_PLAIN = re.compile(r"[A-Za-z0-9_.:/@%+=,-]*")
# A YAML plain scalar that every parser reads as this string: a path-like word, not a bool, null or number.
_YAML_PLAIN = re.compile(r"[A-Za-z_./][A-Za-z0-9_./-]*")
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", ".nan", ".inf"}


def _u(match: re.Match) -> str:
    return f"\\u{ord(match.group()):04x}"


def toml_string(value: str) -> str:
    """`value` as a TOML basic string ("..."), every character it must escape escaped."""
    return _TOML_CONTROL.sub(_u, json.dumps(value, ensure_ascii=False))


def toml_comment(text: str) -> str:
    """`text` for one TOML comment line: forbidden characters (newline among them) as \\uXXXX text."""
    return _TOML_CONTROL.sub(_u, text)


def yaml_scalar(value: str) -> str:
    """`value` as a YAML scalar that PyYAML and YAML 1.2 parsers read back as this string: plain when
    it is a path-like word (ds_config.json), else double-quoted with every unsafe character escaped."""
    if _YAML_PLAIN.fullmatch(value) and value.lower() not in _YAML_WORDS:
        return value
    return _YAML_UNSAFE.sub(_u, json.dumps(value, ensure_ascii=False))


def yaml_comment(text: str) -> str:
    """`text` for one YAML comment line: line breaks and non-printable characters as \\uXXXX text."""
    return _YAML_UNSAFE.sub(_u, text)


def shell_word(value: str) -> str:
    """One shell word that reads back as `value` (shlex.quote)."""
    return shlex.quote(value)


def shell_with_placeholders(value: str) -> str:
    """One shell word in which the `$NAME` / `${NAME}` placeholders of `value` expand and nothing
    else does: "..." when the rest is plain (the common "$MASTER_ADDR:$MASTER_PORT"), else the
    literal parts single-quoted around double-quoted placeholders."""
    parts = _PLACEHOLDER.split(value)
    if all(_PLAIN.fullmatch(part) for part in parts):
        return f'"{value}"'
    names = _PLACEHOLDER.findall(value)
    out = [shlex.quote(parts[0]) if parts[0] else ""]
    for name, literal in zip(names, parts[1:]):
        out.append(f'"{name}"')
        if literal:
            out.append(shlex.quote(literal))
    return "".join(out)
