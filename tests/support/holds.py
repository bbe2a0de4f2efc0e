"""Hold a store call once it ran, until the test lets it go on: a use case that reads and
then writes (a deletion, a removal) is paused between two of its steps while another
client changes what it read."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest


@dataclass(frozen=True, slots=True)
class Held:
    """A call held once it ran: :attr:`waits` is set then, :attr:`go_on` lets it return."""

    waits: asyncio.Event
    go_on: asyncio.Event


def hold_next(
    monkeypatch: pytest.MonkeyPatch, store: object, method: str, *, skip: int = 0
) -> Held:
    """The next call of ``store``'s ``method`` runs, then waits until the test lets it go
    on (the calls after it run as they are); with ``skip``, the call after the next
    ``skip`` ones (a use case that reads twice is held after its second read)."""
    held = Held(asyncio.Event(), asyncio.Event())
    call = getattr(store, method)
    calls = [0]

    async def holding(*args: object, **kwargs: object) -> object:
        result = await call(*args, **kwargs)
        calls[0] += 1
        if calls[0] == skip + 1:
            held.waits.set()
            await held.go_on.wait()
        return result

    monkeypatch.setattr(store, method, holding)
    return held
