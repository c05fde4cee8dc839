"""How many examples a property test runs (README, "Tests").

A test whose every example does real work (recommend, audit, an export, a rule-file compile, a CLI
call) states two counts: the one it runs by default (the "dev" profile, and "ci" under CI=true) and
the one it runs under HYPOTHESIS_PROFILE=thorough, the deep run on demand. Default counts stay at 20
or more. A stress loop that repeats calls to find races reads THOROUGH the same way.
"""

from __future__ import annotations

import os

PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
THOROUGH = PROFILE == "thorough"


def examples(default: int, thorough: int) -> int:
    """`thorough` under HYPOTHESIS_PROFILE=thorough, else `default`."""
    return thorough if THOROUGH else default
