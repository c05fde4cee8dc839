"""Command line: `advisor recommend`, `advisor audit`, `advisor capacity`, `advisor presets`, `advisor rules`,
`advisor facts`.

Exit status (EXIT_STATUS; docs/user-guide.md lists it too): 0 on success; 1 when no layout fits
(recommend) or the audit has an error finding; 2 on bad input (the message names the field, what
was given and what is wanted); 3 on an internal error (one line, no traceback unless --debug or
ADVISOR_DEBUG=1); 4 when the output cannot be written (disk full); 130 on SIGINT. When the reader
closes the pipe early (`advisor rules | head -1`) the rest of the output is dropped quietly and the
status is the command's own.
With --json (or --format json) an error is also written to stdout as {"error": {...}} (_error_object).
A launch-config format (--format megatron|deepspeed|torchtitan) writes only the config to stdout;
notes, and the report when there is nothing to export, go to stderr, so `> ds.json` holds JSON or
nothing.
"""

from __future__ import annotations

import os
import sys

from ..errors import AdvisorError
from .audit import _audit, _compare
from .capacity import _ProgressBar, _capacity  # noqa: F401  (_ProgressBar: tests draw it)
from .listings import _completion, _facts, _measure, _presets, _rules
from .output import (EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OUTPUT, _fail, _flush, _internal, _is_validation_error,
                     _OutputError, _say, _silence_stdout, _tolerant_streams, _validation_text, _wants_json)
from .parser import EXIT_STATUS, UsageError, _parser
from .recommend import _recommend

__all__ = ["main", "EXIT_STATUS"]


def main(argv: list[str] | None = None) -> int:
    """Run one command line; return its exit status (EXIT_STATUS). Never raises and never prints a
    traceback unless --debug or ADVISOR_DEBUG=1 (`--help` and usage errors return 0 and 2)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    _tolerant_streams()
    kw = {"as_json": _wants_json(argv),
          "debug": "--debug" in argv or os.environ.get("ADVISOR_DEBUG", "") not in ("", "0")}
    try:
        try:
            code = _main(argv)
        except SystemExit as exc:               # --help; argparse's own exits
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
        _flush()
        return code
    except _OutputError as exc:
        _silence_stdout()
        return _fail(exc.error, EXIT_OUTPUT, f"cannot write the output: {exc.error}", as_json=False, debug=kw["debug"])
    except BrokenPipeError:                     # a write outside _emit (argparse's help)
        _silence_stdout()
        return 0
    except KeyboardInterrupt as exc:
        return _fail(exc, EXIT_INTERRUPTED, "interrupted", prefix=None, **kw)
    except UsageError as exc:
        _say(exc.usage.rstrip())
        kw["debug"] = False                     # a usage error's traceback shows argparse, not the cause
        return _fail(exc, 2, str(exc), **kw)
    except AdvisorError as exc:
        return _fail(exc, 2, str(exc), **kw)
    except BaseException as exc:                # a bug (or pyo3's PanicException, a BaseException)
        if _is_validation_error(exc):
            return _fail(exc, 2, _validation_text(exc), **kw)
        return _fail(exc, EXIT_INTERNAL, _internal(exc), prefix="internal error", **kw)


def _main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.command == "capacity":
        return _capacity(args)
    if args.command == "explain":
        args.explain = "full"
    handler = {"recommend": _recommend, "explain": _recommend, "audit": _audit, "compare": _compare,
               "presets": _presets,
               "rules": _rules, "facts": _facts, "completion": _completion, "measure": _measure}[args.command]
    return handler(args)

