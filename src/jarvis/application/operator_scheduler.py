"""The operators' scheduler: every due tick run once, however many schedulers share a store.

The scheduler (:class:`Scheduler`) runs due ticks exactly once across any number of
schedulers sharing a store: for each operator it takes the run lease, reads the schedule's
progress (``operator:<id>:schedule``), claims the next due tick in the store
(``claim_tick``), runs it, records the progress, then marks the tick completed. A scheduler
that restarts resumes after the last completed tick, so no tick is missed or repeated;
after a long stop only the latest :data:`~jarvis.application.operators.CATCH_UP` missed
ticks are run (the others are counted as skipped).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from jarvis.application.operators import (
    BROKEN,
    CATCH_UP,
    LEASE_TTL,
    OperatorService,
    TickOutcome,
    UnknownOperatorError,
    new_holder,
    stored_int,
)
from jarvis.application.schedules import label, latest_ticks, next_tick
from jarvis.domain.errors import JarvisError
from jarvis.domain.json_types import JSONObject
from jarvis.domain.operators import Operator, key_prefix, owner_of, run_lease, tick_lease
from jarvis.domain.owners import OwnerGoneError
from jarvis.domain.sessions.records import to_micros, utc_now


@dataclass(slots=True)
class Scheduler:
    """Runs the due ticks of every operator of ``service``'s store (see the module)."""

    service: OperatorService
    holder: str = field(default_factory=new_holder)
    ttl: float = LEASE_TTL
    catch_up: int = CATCH_UP
    on_tick: Callable[[TickOutcome], None] | None = None
    on_notice: Callable[[str], None] | None = None
    """Told once per operator that is broken (then skipped) or whose progress was clamped."""
    _reported: set[str] = field(default_factory=set)

    def _notice(self, key: str, text: str) -> None:
        if key in self._reported:
            return
        self._reported.add(key)
        if self.on_notice is not None:
            self.on_notice(text)

    async def run_due(self, *, limit: int | None = None) -> list[TickOutcome]:
        """Every due tick of every operator (at most ``limit``), oldest first per
        operator; each once. A broken operator is skipped (told once, through
        ``on_notice``); the others run."""
        outcomes: list[TickOutcome] = []
        for name in await self.service.names():
            while limit is None or len(outcomes) < limit:
                try:
                    outcome = await self._one(name)
                except BROKEN as exc:
                    self._notice(
                        "broken:" + name, f"operator {name} is broken, skipped: {exc.message}"
                    )
                    break
                if outcome is None:
                    break
                outcomes.append(outcome)
                if self.on_tick is not None:
                    self.on_tick(outcome)
        return outcomes

    async def _due(self, operator: Operator, now_us: int) -> tuple[int | None, int]:
        """The next due tick (``None``: none is due) and how many older ones are skipped."""
        progress = await self.service.progress(operator.id)
        last = stored_int(progress.get("last_tick_us"))
        after, clamped_from = self.service.resume_point(operator, last, now_us)
        if clamped_from is not None:
            self._notice(
                f"clamped:{operator.id}:{clamped_from}",
                f"operator {operator.id}: its last tick is recorded at {label(clamped_from)}, "
                f"after now (the clock went back); its schedule goes on from now",
            )
        due = next_tick(operator.schedule, anchor_us=operator.created_us, after_us=after)
        if due is None or due > now_us:
            return None, 0
        latest = latest_ticks(
            operator.schedule, anchor_us=operator.created_us, now_us=now_us, count=self.catch_up
        )
        if latest and due < latest[0]:  # down for long: resume with the latest ticks
            skipped = sum(1 for _ in _between(operator, due, latest[0]))
            return latest[0], skipped
        return due, 0

    async def _one(self, name: str) -> TickOutcome | None:
        """Run the operator's next due tick, if one is due and no one else runs it."""
        service, store = self.service, self.service.store
        try:
            operator = await service.get(name)
        except UnknownOperatorError:
            return None  # removed meanwhile
        due, _ = await self._due(operator, service._now_us())
        if due is None:
            return None
        lease = run_lease(operator.id)
        async with service.leased(lease, self.holder, ttl=self.ttl) as held:
            if not held:
                return None
            due, skipped = await self._due(operator, service._now_us())  # fresh, under lease
            if due is None:
                return None
            progress = await service.progress(operator.id)
            if not await store.claim_tick(operator.id, due, self.holder, self.ttl):
                # Under the run lease, a tick that cannot be claimed was completed already
                # (recorded before the clock went back): go on after it, without running it.
                progress["last_tick_us"] = due
                with contextlib.suppress(OwnerGoneError):  # removed meanwhile
                    await self._record(operator, progress)
                return None
            outcome = await self._run(operator, due)
            progress = await service.progress(operator.id)
            progress["last_tick_us"] = due
            progress["ticks"] = (stored_int(progress.get("ticks")) or 0) + 1
            progress["skipped"] = (stored_int(progress.get("skipped")) or 0) + skipped
            progress["last_error"] = outcome.error
            progress["updated_us"] = to_micros(utc_now())
            try:
                await self._record(operator, progress)
            except OwnerGoneError:  # removed while it ran: nothing of it is kept, its claim
                await store.release_lease(tick_lease(operator.id, due), self.holder)  # let go
                return None  # not a tick of whatever the name holds now
            await store.complete_tick(operator.id, due, self.holder)
            return outcome

    async def _record(self, operator: Operator, progress: JSONObject) -> None:
        """Store the schedule's progress, while ``operator`` (this very definition) is
        stored: a scheduler never writes to an operator added again under its name."""
        await self.service.store.put_state(
            key_prefix(operator.id) + "schedule", progress, owner=owner_of(operator)
        )

    async def _run(self, operator: Operator, due: int) -> TickOutcome:
        """The tick; its failure is recorded, not retried (a down engine would otherwise
        be asked again at once, for ever)."""
        try:
            answer = await self.service.run(operator, label(due))
        except (JarvisError, OSError) as exc:
            return TickOutcome(operator=operator.id, tick_us=due, error=str(exc)[:500])
        return TickOutcome(operator=operator.id, tick_us=due, answer=answer)

    async def serve(
        self,
        *,
        poll_seconds: float = 1.0,
        stop: asyncio.Event | None = None,
        max_ticks: int | None = None,
        until: float | None = None,
    ) -> int:
        """Run due ticks until ``stop`` is set, ``max_ticks`` ran, or the clock passes
        ``until`` (seconds since the epoch); returns how many ticks ran."""
        ran = 0
        stop = stop or asyncio.Event()
        while not stop.is_set():
            if until is not None and self.service.clock() >= until:
                break
            left = None if max_ticks is None else max_ticks - ran
            ran += len(await self.run_due(limit=left))
            if max_ticks is not None and ran >= max_ticks:
                return ran
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), poll_seconds)
        return ran


def _between(operator: Operator, first: int, end: int) -> Sequence[int]:
    """The ticks from ``first`` (included) to ``end`` (excluded), at most 10,000 counted."""
    ticks: list[int] = []
    tick: int | None = first
    while tick is not None and tick < end and len(ticks) < 10_000:
        ticks.append(tick)
        tick = next_tick(operator.schedule, anchor_us=operator.created_us, after_us=tick)
    return ticks
