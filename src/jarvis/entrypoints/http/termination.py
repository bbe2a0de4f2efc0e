"""``SIGTERM`` ends ``jarvis serve`` after its exit handlers, and still by the signal.

uvicorn shuts down cleanly on ``SIGTERM``, then raises the signal again with the handler it
found when it started. That handler was the default one, so the process died at once,
before Python's exit handlers: the trace writer's last batch (up to half a second of runs,
answered but not yet written) was lost. Here uvicorn finds a handler that ends Python
normally instead (exit handlers run: the traces are written), and an exit handler
registered before any other then ends the process by the signal after all, as a service
manager expects of a process told to stop (systemd counts it a clean stop; exit status 143
it would count a failure).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType


class _Terminated(BaseException):
    """Raised by the handler uvicorn calls last: unwinds like ``SystemExit``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def exit_handlers_before_sigterm() -> Iterator[None]:
    """While inside, ``SIGTERM`` (as uvicorn raises it again once shut down) ends Python
    normally, then the process by the signal. Leaves a handler someone else chose (``SIG_IGN``
    under ``nohup``, an embedding app's) alone, and does nothing outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    ended: list[int] = []
    atexit.register(_end_by_signal, ended)  # registered first: it runs after the others

    def raise_terminated(signum: int, frame: FrameType | None) -> None:
        raise _Terminated(signum)

    signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    except _Terminated as terminated:
        ended.append(terminated.signum)
        raise SystemExit(128 + terminated.signum) from None
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if not ended:
            atexit.unregister(_end_by_signal)


def _end_by_signal(ended: list[int]) -> None:
    if ended:
        signal.signal(ended[0], signal.SIG_DFL)
        os.kill(os.getpid(), ended[0])
