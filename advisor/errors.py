"""Exceptions raised by advisor.

Every error names *what* was wrong (the field or rule), what was given (`have`) and what is
wanted (`want`), in the style of OPA's "have/want" messages. All of them derive from
`AdvisorError`; input errors are also `ValueError`. The entry points (recommend, audit, estimate)
raise only these for bad input (inputs.coerce turns pydantic's ValidationError of a dict they were
given into an InputError naming its path); constructing a model directly raises pydantic's
`ValidationError`, a `ValueError` too. Errors pickle, so worker processes can
send them back to a parent.
"""

from __future__ import annotations

import reprlib

__all__ = [
    "AdvisorError",
    "InputError",
    "UnknownPresetError",
    "RuleFileError",
    "EngineError",
    "UnknownEngineError",
    "EstimateError",
    "bounded_repr",
    "want_text",
]


class _BoundedRepr(reprlib.Repr):
    """repr() with bounded size and depth: `have` may be any object a caller passed, and the plain
    repr of one nested 5000 deep raises RecursionError, of a 10**5000 int ValueError (3.11's digit
    limit), of a 2 MB string makes a 2 MB message."""

    def __init__(self):
        super().__init__()
        self.maxlevel, self.maxstring, self.maxother, self.maxlong = 4, 400, 200, 60
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = self.maxfrozenset = 20

    def repr_int(self, x, level):
        if x.bit_length() > 256:        # repr() of a huge int is slow, or refused past 4300 digits
            return f"<int of {x.bit_length()} bits>"
        return super().repr_int(x, level)


_repr = _BoundedRepr().repr


def bounded_repr(value: object) -> str:
    """The repr of `value` for an error message: bounded in size and depth, never raising."""
    try:
        return _repr(value)
    except Exception:                   # a __repr__ that raises: the message must still build
        return f"<{type(value).__name__} object>"


class AdvisorError(Exception):
    """Base class of every error advisor raises on purpose."""


MAX_WANT_NAMES = 8
"""Names a message lists when `want` is a list; the rest stay in the error's `want` (data in --json)."""


def want_text(want: object) -> str:
    """`want` for a message: a list of names as "one of a, b, c" (the first MAX_WANT_NAMES of a long
    one, and how many more), never a Python list's repr; text as it is."""
    if not isinstance(want, (list, tuple)):
        return str(want)
    names = [str(name) for name in want]
    if len(names) <= MAX_WANT_NAMES:
        return "one of " + ", ".join(names)
    return f"one of {len(names)}: {', '.join(names[:MAX_WANT_NAMES])}, ... ({len(names) - MAX_WANT_NAMES} more)"


class InputError(AdvisorError, ValueError):
    """A caller-supplied value is invalid: names the field, what was given and what is wanted."""

    def __init__(self, field: str, have: object, want: str | list, hint: str | None = None):
        self.field, self.have, self.want, self.hint = field, have, want, hint
        msg = f"{field}: invalid value\n  have: {bounded_repr(have)}\n  want: {want_text(want)}"
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
        super().__init__(field, have, known_list, hint)
        if len(known_list) > MAX_WANT_NAMES:        # the hint's closest names, not 40 on one line
            self.args = (str(self).replace(f"want: {want_text(known_list)}",
                                           f"want: one of the {len(known_list)} presets `advisor presets` lists"),)

    def __reduce__(self):
        return (type(self), (self.field, self.have, self.known, self.hint))


class RuleFileError(AdvisorError, ValueError):
    """A rule file is malformed: names the file, the rule id and the field."""

    def __init__(self, path: str, rule_id: str | None, field: str, have: object, want: str):
        self.path, self.rule_id, self.field, self.have, self.want = path, rule_id, field, have, want
        where = f"{path}: rule {rule_id!r}" if rule_id else path
        super().__init__(f"{where}: {field}: invalid\n  have: {bounded_repr(have)}\n  want: {want}")

    def __reduce__(self):
        return (type(self), (self.path, self.rule_id, self.field, self.have, self.want))


class EngineError(AdvisorError, RuntimeError):
    """The rule engine failed while evaluating (an action raised, a budget ran out, ...)."""

    def __init__(self, message: str, rule_id: str | None = None):
        self.rule_id = rule_id
        super().__init__(message if rule_id is None else f"rule {rule_id!r}: {message}")

    def __reduce__(self):
        return (type(self), (str(self) if self.rule_id is None else str(self).split(": ", 1)[1], self.rule_id))


class UnknownEngineError(InputError, EngineError):
    """`engine=` names no engine that runs here: the caller's input (an InputError naming `engine`,
    so a ValueError) and, as it always was, an EngineError."""


class EstimateError(AdvisorError, ArithmeticError):
    """The cost model gave a time, rate or ratio that is not finite, or is negative, for inputs that
    passed validation: the input bounds should make that impossible, so it is a bug to report (with
    the inputs); advisor raises it rather than recommend or report such a number."""
