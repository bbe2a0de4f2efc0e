"""When operators tick: ``--every`` intervals and ``--cron`` expressions (croniter).

Tick times are a pure function of the operator's definition, so every scheduler sharing a
store computes the same times and claims the same ticks: an interval's ticks fall on its
grid from the operator's creation (``created + k * interval``); a cron expression's on its
matches in the operator's time zone, after its creation. A tick is named by its time in
whole microseconds since the epoch.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.operators import Schedule
from jarvis.domain.sessions import from_micros, to_micros

_INTERVAL = re.compile(r"(\d{1,9})([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400}
MIN_INTERVAL = 1
MAX_INTERVAL = 366 * 86_400
EVERY_EXAMPLE = "Example: --every 30m (units s, m, h, d; combined as in 1h30m; at least 1s)."
CRON_EXAMPLE = (
    'Example: --cron "0 8 * * *" (08:00 every day: minute hour day-of-month month day-of-week).'
)


def parse_interval(text: str) -> int:
    """``30m`` → 1800 seconds; ``ConfigurationError`` with an example otherwise."""
    cleaned = text.strip().lower()
    position, seconds = 0, 0
    for match in _INTERVAL.finditer(cleaned):
        if match.start() != position:
            break
        seconds += int(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if not cleaned or position != len(cleaned) or not MIN_INTERVAL <= seconds <= MAX_INTERVAL:
        raise ConfigurationError(f"Invalid interval {text!r}.", hint=EVERY_EXAMPLE)
    return seconds


def _zone(name: str) -> object:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if name == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigurationError(
            f"Unknown time zone {name!r}.", hint="Use an IANA name, e.g. Europe/Paris or UTC."
        ) from exc


def check_cron(expression: str, timezone: str = "UTC") -> Schedule:
    """The schedule of a cron expression (5 fields), checked by croniter."""
    from croniter import croniter

    text = " ".join(expression.split())
    if len(text.split(" ")) != 5 or not croniter.is_valid(text):
        raise ConfigurationError(f"Invalid cron expression {expression!r}.", hint=CRON_EXAMPLE)
    _zone(timezone)
    return Schedule(kind="cron", expression=text, timezone=timezone)


def every(text: str) -> Schedule:
    return Schedule(kind="every", seconds=parse_interval(text))


def next_tick(schedule: Schedule, *, anchor_us: int, after_us: int) -> int | None:
    """The first tick strictly after ``after_us`` (``None`` for a manual schedule)."""
    if schedule.kind == "every":
        step = schedule.seconds * 1_000_000
        if after_us < anchor_us:
            return anchor_us + step
        return anchor_us + ((after_us - anchor_us) // step + 1) * step
    if schedule.kind == "cron":
        from croniter import croniter

        zone = _zone(schedule.timezone)
        start = from_micros(after_us).astimezone(zone)  # type: ignore[arg-type]
        found = croniter(schedule.expression, start).get_next(datetime)
        assert isinstance(found, datetime)
        return to_micros(found.astimezone(UTC))
    return None


def latest_ticks(schedule: Schedule, *, anchor_us: int, now_us: int, count: int) -> list[int]:
    """Up to ``count`` of the latest ticks at or before ``now_us`` (after the anchor),
    oldest first: where a scheduler that was down for long resumes."""
    if schedule.kind == "every":
        step = schedule.seconds * 1_000_000
        if now_us < anchor_us + step:
            return []
        last = anchor_us + (now_us - anchor_us) // step * step
        return [t for t in range(last - (count - 1) * step, last + 1, step) if t > anchor_us]
    if schedule.kind == "cron":
        from croniter import croniter

        zone = _zone(schedule.timezone)
        it = croniter(schedule.expression, from_micros(now_us + 1).astimezone(zone))  # type: ignore[arg-type]
        ticks: list[int] = []
        for _ in range(count):
            found = it.get_prev(datetime)
            assert isinstance(found, datetime)
            tick = to_micros(found.astimezone(UTC))
            if tick <= anchor_us:
                break
            ticks.append(tick)
        return sorted(ticks)
    return []


def label(tick_us: int) -> str:
    """A tick's time as operators read it: ISO 8601 in UTC, to the second."""
    moment = from_micros(tick_us).astimezone(UTC)
    if moment.microsecond:
        moment += timedelta(microseconds=1_000_000 - moment.microsecond)  # round up
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
