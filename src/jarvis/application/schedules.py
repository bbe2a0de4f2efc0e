"""When operators tick: ``--every`` intervals and ``--cron`` expressions (croniter).

Tick times are a pure function of the operator's definition, so every scheduler sharing a
store computes the same times and claims the same ticks: an interval's ticks fall on its
grid from the operator's creation (``created + k * interval``); a cron expression's on its
matches in the operator's time zone, after its creation. A tick is named by its time in
whole microseconds since the epoch.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.operators import Schedule
from jarvis.domain.sessions.records import from_micros, to_micros

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


def _zone(name: str) -> tzinfo:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if name == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigurationError(
            f"Unknown time zone {name!r}.", hint="Use an IANA name, e.g. Europe/Paris or UTC."
        ) from exc


class ScheduleError(ConfigurationError):
    """A schedule whose ticks cannot be computed: a cron expression that never matches a
    date (``0 0 30 2 *``), an interval of zero, a stored time out of range. Raised for what
    a user typed (exit code 2) and for a damaged stored operator, which is then reported
    as broken while the other operators go on."""


def check_cron(expression: str, timezone: str = "UTC", *, now_us: int | None = None) -> Schedule:
    """The schedule of a cron expression (5 fields), checked by croniter; one that has no
    next occurrence (February 30th) is refused here, before anything is stored."""
    from croniter import croniter

    text = " ".join(expression.split())
    if len(text.split(" ")) != 5 or not croniter.is_valid(text):
        raise ConfigurationError(f"Invalid cron expression {expression!r}.", hint=CRON_EXAMPLE)
    _zone(timezone)
    schedule = Schedule(kind="cron", expression=text, timezone=timezone)
    start = to_micros(datetime.now(UTC)) if now_us is None else now_us
    try:
        next_tick(schedule, anchor_us=start, after_us=start)
    except ScheduleError as exc:
        raise ConfigurationError(
            f"The cron expression {expression!r} never matches a date.", hint=CRON_EXAMPLE
        ) from exc
    return schedule


def every(text: str) -> Schedule:
    return Schedule(kind="every", seconds=parse_interval(text))


_FAILURES = (ValueError, OverflowError, KeyError, TypeError)
"""What computing a tick raises on a bad schedule or time (croniter's errors are
``ValueError``s; a time out of ``datetime``'s range an ``OverflowError``)."""


def next_tick(schedule: Schedule, *, anchor_us: int, after_us: int) -> int | None:
    """The first tick strictly after ``after_us`` (``None`` for a manual schedule);
    :class:`ScheduleError` when the schedule has none or a time is out of range."""
    try:
        return _next_tick(schedule, anchor_us=anchor_us, after_us=after_us)
    except ScheduleError:
        raise
    except (ConfigurationError, *_FAILURES) as exc:
        raise ScheduleError(f"Its schedule has no next tick ({_reason(exc)}).") from exc


def check_time(micros: int) -> int:
    """``micros`` when it is a time ``datetime`` can hold; :class:`ScheduleError` otherwise
    (a damaged stored time)."""
    try:
        from_micros(micros)
    except OverflowError as exc:
        raise ScheduleError(f"A stored time ({micros}) is out of range.") from exc
    return micros


def _reason(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())[:200]


def _check_interval(schedule: Schedule) -> int:
    if not MIN_INTERVAL <= schedule.seconds <= MAX_INTERVAL:
        raise ScheduleError(f"Its interval of {schedule.seconds} seconds is out of range.")
    return schedule.seconds * 1_000_000


def _next_tick(schedule: Schedule, *, anchor_us: int, after_us: int) -> int | None:
    if schedule.kind == "every":
        step = _check_interval(schedule)
        for moment in (anchor_us, after_us):
            from_micros(moment)  # a stored time out of range: OverflowError
        if after_us < anchor_us:
            return anchor_us + step
        return anchor_us + ((after_us - anchor_us) // step + 1) * step
    if schedule.kind == "cron":
        from croniter import croniter

        zone = _zone(schedule.timezone)
        start = from_micros(after_us).astimezone(zone)
        found = croniter(schedule.expression, start).get_next(datetime)
        assert isinstance(found, datetime)
        return to_micros(found.astimezone(UTC))
    return None


def latest_ticks(schedule: Schedule, *, anchor_us: int, now_us: int, count: int) -> list[int]:
    """Up to ``count`` of the latest ticks at or before ``now_us`` (after the anchor),
    oldest first: where a scheduler that was down for long resumes (:class:`ScheduleError`
    as :func:`next_tick`)."""
    try:
        return _latest_ticks(schedule, anchor_us=anchor_us, now_us=now_us, count=count)
    except ScheduleError:
        raise
    except (ConfigurationError, *_FAILURES) as exc:
        raise ScheduleError(f"Its schedule has no earlier tick ({_reason(exc)}).") from exc


def _latest_ticks(schedule: Schedule, *, anchor_us: int, now_us: int, count: int) -> list[int]:
    if schedule.kind == "every":
        step = _check_interval(schedule)
        for moment in (anchor_us, now_us):
            from_micros(moment)
        if now_us < anchor_us + step:
            return []
        last = anchor_us + (now_us - anchor_us) // step * step
        return [t for t in range(last - (count - 1) * step, last + 1, step) if t > anchor_us]
    if schedule.kind == "cron":
        from croniter import croniter

        zone = _zone(schedule.timezone)
        it = croniter(schedule.expression, from_micros(now_us + 1).astimezone(zone))
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
