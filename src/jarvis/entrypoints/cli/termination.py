"""``SIGTERM`` and ``SIGHUP`` end a command the way Ctrl-C does.

Python's default for both is to die at once: no ``finally`` runs, so an external runtime's
server and private dir (which holds the engine's key), an MCP server (started in a session
of its own, so a closing terminal's hang-up never reaches it), a REPL's working directory,
a half-written answer would be left as they are. Inside :func:`sigterm_as_interrupt` either
signal raises ``SIGINT`` instead, which takes the one cleanup path Ctrl-C takes
(``asyncio.run`` cancels the run, every ``finally`` and ``aclose`` runs, exit 130).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType


def _as_interrupt(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
        raise KeyboardInterrupt  # SIGINT ignored (a background job): interrupt anyway
    signal.raise_signal(signal.SIGINT)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While inside, ``SIGTERM`` and ``SIGHUP`` interrupt like Ctrl-C (main thread only;
    elsewhere, and for a signal that is ignored, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    replaced: dict[signal.Signals, signal.Handlers | int | Callable[..., object] | None] = {}
    for number in (signal.SIGTERM, signal.SIGHUP):
        previous = signal.getsignal(number)
        if previous != signal.SIG_IGN:  # started ignoring it (nohup): keep that
            replaced[number] = previous
            signal.signal(number, _as_interrupt)
    try:
        yield
    finally:
        for number, previous in replaced.items():
            signal.signal(number, previous)
