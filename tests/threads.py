"""Run one test body on several threads at once (the thread-safety tests)."""

from __future__ import annotations

import threading
from typing import Callable


def run_in_threads(work: Callable[[int], object], n: int) -> list[str]:
    """Call work(k) for k in range(n), each on its own thread, all started before any is joined;
    return repr() of every exception a call raised (empty when all returned)."""
    errors: list[str] = []

    def guarded(k: int) -> None:
        try:
            work(k)
        except BaseException as exc:  # noqa: BLE001 - returned to the test, which asserts on it
            errors.append(repr(exc))

    threads = [threading.Thread(target=guarded, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors
