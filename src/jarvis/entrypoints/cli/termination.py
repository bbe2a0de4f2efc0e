"""``SIGTERM`` ends a command the way Ctrl-C does.

Python's default for ``SIGTERM`` is to die at once: no ``finally`` runs, so an external
runtime's server and private dir (which holds the engine's key), a REPL's working
directory, a half-written answer would be left as they are. Inside :func:`sigterm_as_interrupt`
a ``SIGTERM`` raises ``SIGINT`` instead, which takes the one cleanup path Ctrl-C takes
(``asyncio.run`` cancels the run, every ``finally`` and ``aclose`` runs, exit 130).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


def _as_interrupt(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
        raise KeyboardInterrupt  # SIGINT ignored (a background job): interrupt anyway
    signal.raise_signal(signal.SIGINT)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While inside, ``SIGTERM`` interrupts like Ctrl-C (main thread only; elsewhere, and
    where the signal is ignored, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous == signal.SIG_IGN:  # started with SIGTERM ignored (nohup-like): keep it
        yield
        return
    signal.signal(signal.SIGTERM, _as_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
