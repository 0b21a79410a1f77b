"""Helpers the tests share (imported as ``from support import …``: pytest puts this folder on sys.path)."""

from __future__ import annotations

import threading
import time
from typing import Callable, List, Optional


class Later:
    """Runs ``fn`` in a thread after ``seconds``: mail that arrives while a wait is held.
    ``join()`` waits for it and raises what it raised."""

    def __init__(self, seconds: float, fn: Callable[[], None]) -> None:
        self._error: List[BaseException] = []

        def run() -> None:
            time.sleep(seconds)
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - handed to join()
                self._error.append(e)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def join(self, timeout: Optional[float] = 30) -> None:
        self._thread.join(timeout)
        if self._error:
            raise self._error[0]


def later(seconds: float, fn: Callable[[], None]) -> Later:
    return Later(seconds, fn)
