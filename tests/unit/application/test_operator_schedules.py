"""Schedules (``--every``, ``--cron``) and the scheduler's exactly-once ticking, on a clock the
tests move: no test waits for a tick."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import pytest

from jarvis.application.ask import Answer, AskQuestion
from jarvis.application.operator_scheduler import Scheduler
from jarvis.application.operators import OperatorService, UnknownOperatorError
from jarvis.application.registry import AgentRegistry, builtin_agents
from jarvis.application.schedules import (
    check_cron,
    every,
    latest_ticks,
    next_tick,
    parse_interval,
)
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.llm.completion import Usage
from jarvis.domain.operators import Operator, Schedule
from jarvis.domain.sessions.records import to_micros
from jarvis.testing import InMemorySessionStore
from jarvis.testing.operators import InMemoryOperatorStore

S = 1_000_000


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("30m", 1800), ("1h30m", 5400), ("1d", 86400), (" 2H ", 7200)],
)
def test_intervals(text: str, seconds: int) -> None:
    assert parse_interval(text) == seconds


@pytest.mark.parametrize(
    "bad", ["", "30", "m", "0s", "30x", "1h 30m", "-5m", "9" * 40 + "s", "400d"]
)
def test_invalid_intervals_show_an_example(bad: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_interval(bad)
    assert "--every 30m" in str(info.value)


@pytest.mark.parametrize(
    "bad", ["", "0 8 * *", "61 * * * *", "0 25 * * *", "* * * * * * *", "hello"]
)
def test_invalid_cron_expressions_show_an_example(bad: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        check_cron(bad)
    assert '--cron "0 8 * * *"' in str(info.value)


def test_an_unknown_time_zone_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="time zone"):
        check_cron("0 8 * * *", "Mars/Olympus")


def test_interval_ticks_fall_on_the_grid_from_creation() -> None:
    schedule = every("10s")
    assert next_tick(schedule, anchor_us=100 * S, after_us=100 * S) == 110 * S
    assert next_tick(schedule, anchor_us=100 * S, after_us=115 * S) == 120 * S
    assert next_tick(schedule, anchor_us=100 * S, after_us=120 * S) == 130 * S
    assert latest_ticks(schedule, anchor_us=100 * S, now_us=155 * S, count=3) == [
        130 * S, 140 * S, 150 * S
    ]  # fmt: skip


def test_cron_ticks_in_their_time_zone() -> None:
    anchor = to_micros(datetime(2030, 1, 1, 9, tzinfo=UTC))
    daily = check_cron("0 8 * * *")
    assert next_tick(daily, anchor_us=anchor, after_us=anchor) == to_micros(
        datetime(2030, 1, 2, 8, tzinfo=UTC)
    )
    paris = check_cron("0 8 * * *", "Europe/Paris")  # UTC+1 in January
    assert next_tick(paris, anchor_us=anchor, after_us=anchor) == to_micros(
        datetime(2030, 1, 2, 7, tzinfo=UTC)
    )
    assert next_tick(Schedule(), anchor_us=anchor, after_us=anchor) is None


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class CountingAsker:
    """Answers every tick at once and records the ticks' labels."""

    def __init__(self, registry: AgentRegistry) -> None:
        self.registry = registry
        self.labels: list[str] = []
        self.during: Callable[[], Awaitable[None]] | None = None
        """Run inside the tick (what another process does meanwhile)."""

    async def ask(self, command: AskQuestion) -> Answer:
        assert command.operator is not None
        self.labels.append(command.operator.tick_label)
        if self.during is not None:
            await self.during()
        return Answer(
            content="ok", turns=1, tool_results=(), usage=Usage(), model="m", engine="e",
            stop_reason="final_answer",
        )  # fmt: skip


def service_on(store: InMemoryOperatorStore, clock: Clock) -> tuple[OperatorService, CountingAsker]:
    registry = builtin_agents()
    asker = CountingAsker(registry)
    service = OperatorService(
        store=store, sessions=InMemorySessionStore(owners=store.holds), registry=registry,
        asker=lambda: asker, clock=clock,
    )  # fmt: skip
    return service, asker


async def test_two_schedulers_on_one_store_run_each_due_tick_once_in_order() -> None:
    clock = Clock(1_000.0)
    store = InMemoryOperatorStore(clock=clock)
    service, asker = service_on(store, clock)
    await service.add(Operator(id="beat", prompt="Beat.", schedule=every("10s")))
    first, second = Scheduler(service, holder="a"), Scheduler(service, holder="b")
    assert await first.run_due() == []  # nothing due yet
    clock.now += 35
    ran = [*await first.run_due(), *await second.run_due()]
    assert [o.tick_us for o in ran] == [1_010 * S, 1_020 * S, 1_030 * S]
    assert await second.run_due() == []
    clock.now += 10
    assert [o.tick_us for o in await second.run_due()] == [1_040 * S]
    assert asker.labels == [
        "1970-01-01T00:16:50Z", "1970-01-01T00:17:00Z", "1970-01-01T00:17:10Z",
        "1970-01-01T00:17:20Z",
    ]  # fmt: skip


async def test_a_scheduler_resumes_after_its_last_tick_and_bounds_catching_up() -> None:
    clock = Clock(0.0)
    store = InMemoryOperatorStore(clock=clock)
    service, _ = service_on(store, clock)
    await service.add(Operator(id="beat", prompt="Beat.", schedule=every("1s")))
    clock.now = 2.5
    assert len(await Scheduler(service).run_due()) == 2
    clock.now = 100.5  # down for a while: only the latest 24 run, the rest are skipped
    later = await Scheduler(service, catch_up=24).run_due()
    assert [o.tick_us for o in later] == [t * S for t in range(77, 101)]
    status = await service.status(await service.get("beat"))
    assert (status.ticks, status.skipped, status.last_tick_us) == (26, 74, 100 * S)


async def test_an_operator_removed_and_added_again_while_its_tick_runs_gets_none_of_it() -> None:
    clock = Clock(0.0)
    store = InMemoryOperatorStore(clock=clock)
    service, asker = service_on(store, clock)
    await service.add(Operator(id="beat", prompt="Old.", schedule=every("1s")))

    async def replace_it() -> None:
        await service.remove("beat")
        await service.add(Operator(id="beat", prompt="New.", schedule=every("1s")))

    asker.during = replace_it
    clock.now = 1.5
    scheduler = Scheduler(service)
    ran = await scheduler.run_due()
    assert await service.progress("beat") == {}  # the new operator has had no tick
    assert ran == []  # the old tick belongs to no operator now
    asker.during = None
    clock.now = 3.5  # the new operator was added at 2 s: its first tick is due
    assert [o.tick_us for o in await scheduler.run_due()] == [3 * S]
    status = await service.status(await service.get("beat"))
    assert (status.ticks, status.last_tick_us) == (1, 3 * S)


async def test_a_tick_held_by_another_scheduler_is_not_run() -> None:
    clock = Clock(0.0)
    store = InMemoryOperatorStore(clock=clock)
    service, asker = service_on(store, clock)
    await service.add(Operator(id="beat", prompt="Beat.", schedule=every("1s")))
    assert await store.acquire_lease("operator-run:beat", "elsewhere", 60)
    clock.now = 5.0
    assert await Scheduler(service).run_due() == []
    clock.now = 70.0  # the other holder died: its lease expired
    assert len(await Scheduler(service).run_due()) == 24
    assert len(asker.labels) == 24


async def test_unknown_operators_name_the_existing_ones() -> None:
    service, _ = service_on(InMemoryOperatorStore(), Clock(0))
    await service.add(Operator(id="a1", prompt="x"))
    with pytest.raises(UnknownOperatorError, match="Existing operators: a1"):
        await service.get("nope")
    with pytest.raises(ConfigurationError, match="exists already"):
        await service.add(Operator(id="a1", prompt="x"))
