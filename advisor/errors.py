"""Exceptions raised by advisor.

Every error names *what* was wrong (the field or rule), what was given (`have`) and what is
wanted (`want`), in the style of OPA's "have/want" messages. All of them derive from
`AdvisorError`; input errors are also `ValueError`, so callers that catch pydantic's
`ValidationError` (a `ValueError`) catch ours too. Errors pickle, so worker processes can
send them back to a parent.
"""

from __future__ import annotations

__all__ = [
    "AdvisorError",
    "InputError",
    "UnknownPresetError",
    "RuleFileError",
    "EngineError",
]


class AdvisorError(Exception):
    """Base class of every error advisor raises on purpose."""


class InputError(AdvisorError, ValueError):
    """A caller-supplied value is invalid: names the field, what was given and what is wanted."""

    def __init__(self, field: str, have: object, want: str, hint: str | None = None):
        self.field, self.have, self.want, self.hint = field, have, want, hint
        msg = f"{field}: invalid value\n  have: {have!r}\n  want: {want}"
        if hint:
            msg += f"\n  hint: {hint}"
        super().__init__(msg)

    def __reduce__(self):
        return (type(self), (self.field, self.have, self.want, self.hint))


class UnknownPresetError(InputError):
    """A preset name that is not in the built-in tables."""

    def __init__(self, field: str, have: object, known: list[str] | str, hint: str | None = None):
        known_list = known if isinstance(known, list) else [known]
        self.known = known_list
        super().__init__(field, have, f"one of {known_list}", hint)

    def __reduce__(self):
        return (type(self), (self.field, self.have, self.known, self.hint))


class RuleFileError(AdvisorError, ValueError):
    """A rule file is malformed: names the file, the rule id and the field."""

    def __init__(self, path: str, rule_id: str | None, field: str, have: object, want: str):
        self.path, self.rule_id, self.field, self.have, self.want = path, rule_id, field, have, want
        where = f"{path}: rule {rule_id!r}" if rule_id else path
        super().__init__(f"{where}: {field}: invalid\n  have: {have!r}\n  want: {want}")

    def __reduce__(self):
        return (type(self), (self.path, self.rule_id, self.field, self.have, self.want))


class EngineError(AdvisorError, RuntimeError):
    """The rule engine failed while evaluating (an action raised, a budget ran out, ...)."""

    def __init__(self, message: str, rule_id: str | None = None):
        self.rule_id = rule_id
        super().__init__(message if rule_id is None else f"rule {rule_id!r}: {message}")

    def __reduce__(self):
        return (type(self), (str(self) if self.rule_id is None else str(self).split(": ", 1)[1], self.rule_id))
