"""Output, and every way a run can end (EXIT_STATUS): stdout that may be closed, full or not UTF-8,
messages on stderr, and errors as JSON objects (`want` as data)."""

from __future__ import annotations

import json
import os
import re
import sys

from ..errors import AdvisorError


EXIT_INTERNAL, EXIT_OUTPUT, EXIT_INTERRUPTED = 3, 4, 130


class _OutputError(Exception):
    """Writing stdout failed for a reason other than a closed pipe (ENOSPC, EIO)."""

    def __init__(self, error: OSError):
        self.error = error
        super().__init__(str(error))


def _emit(text: str, as_json: bool = False) -> None:
    """Write one result to stdout. JSON stays valid JSON on a non-UTF-8 stdout (non-ASCII characters
    become \\u escapes); text gets backslash escapes from the stream (_tolerant_streams). A reader that
    has gone away silences the rest of the output instead of failing the run. Text has its control
    characters made visible (_visible); JSON escapes them itself."""
    out = sys.stdout
    if out is None:                         # started with stdout closed (`advisor rules >&-`)
        import errno

        raise _OutputError(OSError(errno.EBADF, "stdout is closed"))
    if not as_json:
        text = _visible(text)
    if as_json and not _encodes(out, text):
        text = re.sub(r"[^\x00-\x7f]+", lambda m: json.dumps(m.group())[1:-1], text)
    try:
        out.write(text + "\n")
    except BrokenPipeError:
        _silence_stdout()
    except OSError as exc:
        raise _OutputError(exc) from None


# Control characters (C0 but tab and newline, DEL, C1): an ESC from a config's name cleared the screen
# or turned the text red, a CR overwrote a line. Shown as \xNN text instead.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _visible(text: str) -> str:
    """`text` with its terminal control characters written as visible \\xNN escapes."""
    if text.isascii() and text.isprintable():
        return text
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _encodes(out, text: str) -> bool:
    encoding = (getattr(out, "encoding", None) or "utf-8").lower().replace("-", "").replace("_", "")
    if encoding == "utf8":
        return True
    try:
        text.encode(getattr(out, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _flush() -> None:
    if sys.stdout is None:
        return
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    except OSError as exc:
        raise _OutputError(exc) from None


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's own flush at exit cannot fail (and print
    'Exception ignored ...') on the bytes still buffered."""
    try:
        target = sys.stdout.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError, AttributeError):       # no file descriptor (an in-process StringIO)
        return
    try:
        os.dup2(null, target)
    except OSError:
        pass
    finally:
        os.close(null)


def _tolerant_streams() -> None:
    """An ASCII or Latin-1 terminal (PYTHONIOENCODING=ascii) gets `\\u2265` for `≥` rather than a
    UnicodeEncodeError; the interpreter's default for stdout is errors="strict"."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, OSError, ValueError):   # not a TextIOWrapper, or already closed
            pass


def _say(line: str) -> None:
    """A message on stderr; a stderr that cannot be written must not turn an error into a crash."""
    if sys.stderr is None:                  # closed (`2>&-`); print(file=None) would write to stdout
        return
    try:
        print(_visible(line), file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _wants_json(argv: list[str]) -> bool:
    """Whether errors go to stdout as JSON too: --json (or an abbreviation argparse accepts), or a
    last --format of json; read from argv since a usage error leaves no parsed arguments."""
    flag, fmt = False, None
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        flag = flag or len(arg) >= 3 and "--json".startswith(arg)
        if arg.startswith("--format="):
            fmt = arg.partition("=")[2]
        elif arg == "--format" and i + 1 < len(argv):
            fmt = argv[i + 1]
    return flag or fmt == "json"


def _jsonable(value):
    """`value` when JSON writes it as standard JSON, else its repr (inf, NaN, objects, sets)."""
    try:
        json.dumps(value, allow_nan=False)
        return value
    except (TypeError, ValueError, RecursionError):
        try:
            return repr(value)
        except Exception:               # a repr that raises or recurses: the type is all we can say
            return f"<{type(value).__name__}>"


def _validation_items(exc) -> list[tuple[dict, str]]:
    """pydantic's errors in advisor's have/want form (errors.InputError), one per invalid field,
    without pydantic's documentation links: (fields for the JSON object, text for stderr)."""
    items = []
    for err in exc.errors(include_url=False):
        ours = (err.get("ctx") or {}).get("error")
        if isinstance(ours, AdvisorError):          # raised by advisor's own validators: already have/want
            fields = {k: getattr(ours, k, None) for k in ("field", "have", "want", "hint")}
            if hasattr(ours, "known"):          # UnknownPresetError: the names, as data
                fields["known"] = ours.known
            items.append((fields, str(ours)))
            continue
        where = ".".join(str(p) for p in err["loc"])
        field = f"{exc.title}.{where}" if where else exc.title
        have = err.get("input")
        items.append(({"field": field, "have": have, "want": _want_data(err), "hint": None},
                      f"{field}: invalid value\n  have: {have!r}\n  want: {err['msg']}"))
    return items


def _want_data(err: dict):
    """pydantic's error as data for JSON's `want`: the allowed values of a choice as a list
    ("Input should be 'a' or 'b'" -> ["a", "b"]), else the constraint and its bounds as an object
    ({"constraint": "greater_than_equal", "ge": 1}); the words stay in `message`."""
    ctx = err.get("ctx") or {}
    if err["type"] in ("literal_error", "enum") and isinstance(ctx.get("expected"), str):
        return re.findall(r"'([^']*)'", ctx["expected"]) or [ctx["expected"]]
    return {"constraint": err["type"], **{k: _jsonable(v) for k, v in ctx.items() if k != "error"}}


def _validation_text(exc) -> str:
    return "\n".join(text for _fields, text in _validation_items(exc))


def _error_object(exc: BaseException, code: int, message: str) -> dict:
    """The JSON error object: {"error": {"type", "exit_code", "message", "field", "have", "want",
    "hint"}}, plus "path" and "rule_id" for a RuleFileError, "known" (the preset names, as a list) for
    an UnknownPresetError and "errors" (one per field) for a pydantic ValidationError. Fields an error
    does not have are null."""
    obj = {"type": type(exc).__name__, "exit_code": code, "message": message,
           "field": None, "have": None, "want": None, "hint": None}
    if _is_validation_error(exc):
        errors = [{k: _jsonable(v) for k, v in fields.items()} for fields, _text in _validation_items(exc)]
        obj.update(errors[0] if errors else {})
        obj["errors"] = errors
    else:
        for key in ("field", "have", "want", "hint", "path", "rule_id", "known"):
            if hasattr(exc, key):
                obj[key] = _jsonable(getattr(exc, key))
    return {"error": obj}


def _fail(exc: BaseException, code: int, message: str, *, as_json: bool, debug: bool,
          prefix: str | None = "error") -> int:
    """Report an error on stderr (and as JSON on stdout under --json); return the exit status."""
    if debug:
        import traceback

        traceback.print_exception(exc)
    _say(f"advisor: {prefix}: {message}" if prefix else f"advisor: {message}")
    if as_json:
        try:
            _emit(json.dumps(_error_object(exc, code, message), indent=2, ensure_ascii=True))
            _flush()
        except _OutputError:
            pass
    return code


def _internal(exc: BaseException) -> str:
    """One line: the type and the first line of the message, bounded (a message can hold a 1 GB repr)."""
    first = (str(exc).strip().splitlines() or [""])[0]
    first = first if len(first) <= 300 else first[:300] + "..."
    return f"{type(exc).__name__}{': ' + first if first else ''} (please report)"


def _is_validation_error(exc: BaseException) -> bool:
    """pydantic's ValidationError, without importing pydantic at module level (this module loads before
    main() can catch a SIGINT; pydantic is most of that time) or here, when it was never loaded."""
    core = sys.modules.get("pydantic_core")
    return core is not None and isinstance(exc, core.ValidationError)

